/* entmtp serve: options, the shared model, and the wait for SIGINT/SIGTERM. */
#include "../cli.h"
#include "serve.h"

#include <arpa/inet.h>
#include <limits.h>
#include <netdb.h>
#include <netinet/in.h>
#ifdef __GLIBC__
#include <malloc.h>
#endif
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static void usage(FILE *f) {
    fprintf(f,
            "usage: entmtp serve --model PATH [options]\n"
            "\n"
            "An OpenAI-compatible HTTP server (POST /v1/completions, /v1/chat/completions,\n"
            "GET /v1/models, /health) with a chat page at /. See docs/server.md.\n"
            "\n"
            "  --model PATH          GGUF file or Hugging Face directory\n"
            "  --heads PATH          Medusa/Hydra heads; default: heads shipped for the model, else AR\n"
            "  --no-heads            plain AR even when heads are shipped\n"
            "  --bank FILE           bank JSON; default: the one shipped beside the heads\n"
            "  --tree NAME[,NAME..]  built-in trees forming the bank instead\n"
            "  --policy KIND         static | ladder | hysteresis | ucb | throughput | dynamic (default:\n"
            "                        the bank's, else static; settings from the bank when it has them)\n"
            "  --static-tree I       tree index for the static policy\n"
            "  --host ADDR           address to listen on (default 127.0.0.1); an address other than\n"
            "                        loopback needs --api-key (or --allow-no-api-key)\n"
            "  --port N              port (default 8080; 0 picks a free one)\n"
            "  --api-key KEY         require \"Authorization: Bearer KEY\" on every endpoint but /health\n"
            "                        and the chat page (else 401); default: $ENTMTP_API_KEY, else none\n"
            "  --allow-no-api-key    listen on a non-loopback address without a key (anyone who\n"
            "                        reaches the port can generate)\n"
            "  --parallel N          generations running at once (default 2)\n"
            "  --queue N             requests waiting for a slot before 503 (default 64)\n"
            "  -c, --ctx-size N      context (KV capacity) per request in tokens (alias --ctx; default\n"
            "                        2048, or the model's context when smaller)\n"
            "  --max-tokens N        max_tokens when a request gives none (default 256)\n"
            "  --temperature|--temp T  temperature when a request gives none (default 0, greedy)\n"
            "  --top-k K, --top-p P  refused (except the 'off' values 0 and 1): typical acceptance\n"
            "                        decides what is sampled; see docs/acceptance.md\n"
            "  --chat-template T     chat template instead of the model's: a file or a Jinja template's\n"
            "                        text, or chatml | llama3 | llama2 | mistral | phi3 | gemma | deepseek-r1\n"
            "  --max-body BYTES      largest request body (default 1048576)\n"
            "  --threads N           CPU threads per generation (default: all cores)\n"
            "  --backend B           auto | cpu | cuda (default auto)\n"
            "  --compute C           native (weights in their file type, default) | f32\n"
            CLI_PROMPT_BITS_HELP CLI_STEP_BITS_HELP CLI_KV_TYPE_HELP);
}

typedef struct serve_options {
    const char *model, *heads, *bank, *trees, *policy, *host, *chat_template, *api_key;
    int no_heads, allow_no_api_key;
    long static_tree, port, parallel, queue, ctx, max_tokens, max_body, threads;
    float temperature;
    int32_t prompt_bits, step_bits, kv_type;
    entmtp_backend backend;
    entmtp_compute_type compute;
} serve_options;

/* 1 when every address `host` names is a loopback one, 0 when one is not,
 * -1 when it does not resolve (listening then reports the error). */
static int host_is_loopback(const char *host) {
    struct addrinfo hints = { .ai_family = AF_UNSPEC, .ai_socktype = SOCK_STREAM, .ai_flags = AI_PASSIVE }, *ai = NULL;
    if (getaddrinfo(host, NULL, &hints, &ai)) return -1;
    int loopback = 1;
    for (const struct addrinfo *a = ai; a; a = a->ai_next) {
        if (a->ai_family == AF_INET) {
            uint32_t ip = ntohl(((const struct sockaddr_in *)a->ai_addr)->sin_addr.s_addr);
            loopback &= (ip >> 24) == 127;
        } else if (a->ai_family == AF_INET6) {
            const struct in6_addr *ip = &((const struct sockaddr_in6 *)a->ai_addr)->sin6_addr;
            loopback &= IN6_IS_ADDR_LOOPBACK(ip) || (IN6_IS_ADDR_V4MAPPED(ip) && ip->s6_addr[12] == 127);
        } else {
            loopback = 0;
        }
    }
    freeaddrinfo(ai);
    return loopback;
}

/* 0 ok, 1 after --help, else the exit code */
static int parse_options(int argc, char **argv, serve_options *o) {
    *o = (serve_options){ .host = "127.0.0.1", .static_tree = -1, .port = 8080, .parallel = 2, .queue = 64,
                          .ctx = 2048, .max_tokens = 256, .max_body = 1 << 20, .api_key = getenv("ENTMTP_API_KEY"),
                          .prompt_bits = 0, .step_bits = 16 };
    const cli_option opts[] = {
        { "--model", CLI_STRING, &o->model },
        { "--heads", CLI_STRING, &o->heads },
        { "--no-heads", CLI_FLAG, &o->no_heads },
        { "--bank", CLI_STRING, &o->bank },
        { "--tree", CLI_STRING, &o->trees },
        { "--policy", CLI_STRING, &o->policy },
        { "--host", CLI_STRING, &o->host },
        { "--api-key", CLI_STRING, &o->api_key },
        { "--allow-no-api-key", CLI_FLAG, &o->allow_no_api_key },
        { "--chat-template", CLI_STRING, &o->chat_template },
        { "--top-k", CLI_CALL, NULL, 0, 0, cli_refuse_top_k },
        { "--top-p", CLI_CALL, NULL, 0, 0, cli_refuse_top_p },
        { "--static-tree", CLI_LONG, &o->static_tree, 0, 255 },
        { "--port", CLI_LONG, &o->port, 0, 65535 },
        { "--parallel", CLI_LONG, &o->parallel, 1, 256 },
        { "--queue", CLI_LONG, &o->queue, 0, 4096 },
        { "-c|--ctx-size|--ctx", CLI_LONG, &o->ctx, 16, 1 << 20 },
        { "--max-tokens", CLI_LONG, &o->max_tokens, 1, 1 << 20 },
        { "--max-body", CLI_LONG, &o->max_body, 1024, 1L << 30 },
        { "--threads", CLI_LONG, &o->threads, 0, 1024 },
        { "--prompt-bits", CLI_CALL, &o->prompt_bits, 0, 0, cli_prompt_bits },
        { "--step-bits", CLI_CALL, &o->step_bits, 0, 0, cli_step_bits },
        { "--kv-type", CLI_CALL, &o->kv_type, 0, 0, cli_kv_type },
        { "--temperature|--temp", CLI_FLOAT, &o->temperature, 0 },
        { "--backend", CLI_BACKEND, &o->backend },
        { "--compute", CLI_COMPUTE, &o->compute },
    };
    int rc = cli_parse("serve", argc, argv, CLI_TABLE(opts), usage);
    if (rc) return rc;
    if (!o->model) { fprintf(stderr, "entmtp serve: --model is required\n"); usage(stderr); return 2; }
    if (o->bank && o->trees) { fprintf(stderr, "entmtp serve: give --bank or --tree, not both\n"); return 2; }
    if (o->trees && !cli_check_tree_names("serve", o->trees)) return 2;
    if (o->api_key && !*o->api_key) o->api_key = NULL;
    if (!o->api_key && !o->allow_no_api_key && host_is_loopback(o->host) == 0) {
        fprintf(stderr, "entmtp serve: --host %s: refusing to listen beyond this machine without an API key: anyone who\n"
                        "  reaches the port could generate. Give --api-key KEY (or $ENTMTP_API_KEY; clients send\n"
                        "  \"Authorization: Bearer KEY\"), or --allow-no-api-key behind your own access control.\n", o->host);
        return 2;
    }
    return 0;
}

/* Heads, bank and policy settings, as `generate` picks them. */
static int load_drafting(const serve_options *o, serve_model *sm) {
    entmtp_drafter drafter = { sizeof drafter };
    const char *heads = o->heads, *bank = o->bank;
    entmtp_status st;
    int shipped = !o->no_heads && !heads && cli_find_drafter(sm->model, &drafter);
    if (shipped) {
        heads = drafter.heads_path;
        if (!bank && !o->trees && drafter.bank_path[0]) bank = drafter.bank_path;
        fprintf(stderr, "entmtp serve: drafter %s: %s\n", heads, drafter.reason);
    }
    if (o->no_heads || !heads) {
        fprintf(stderr, "entmtp serve: no heads: plain AR decoding%s%s\n", o->no_heads ? "" : ": ",
                o->no_heads ? "" : drafter.reason);
        return 1;
    }
    if ((st = entmtp_heads_load(sm->model, heads, &sm->heads))) return !cli_fail(heads, st);
    entmtp_heads_info hi = { sizeof hi };
    entmtp_heads_get_info(sm->heads, &hi);
    entmtp_bank_params bp = entmtp_bank_default_params();
    bp.max_depth = hi.n_heads;
    if (bank) {
        if ((st = entmtp_bank_load(bank, &bp, &sm->bank))) return !cli_fail(bank, st);
    } else {
        if ((st = entmtp_bank_create(&bp, &sm->bank))) return !cli_fail("bank", st);
        char list[1024];
        snprintf(list, sizeof list, "%s", o->trees ? o->trees : hi.kind == ENTMTP_HEADS_HYDRA ? "hydra_default" : "medusa_vicuna_7b_stage2");
        for (char *save = NULL, *t = strtok_r(list, ",", &save); t; t = strtok_r(NULL, ",", &save))
            if ((st = entmtp_bank_add_builtin(sm->bank, t, NULL))) return !cli_fail(t, st);
    }
    entmtp_policy_kind kind = ENTMTP_POLICY_STATIC;
    if (o->policy && (entmtp_policy_kind_from_name(o->policy, &kind) || kind == ENTMTP_POLICY_CUSTOM)) {
        fprintf(stderr, "entmtp serve: --policy: '%s' is not static, ladder, hysteresis, ucb, throughput or dynamic\n", o->policy);
        return 0;
    }
    if (!o->policy && entmtp_bank_default_policy(sm->bank, &kind) != ENTMTP_OK) kind = ENTMTP_POLICY_STATIC;
    sm->policy = serve_policy_config(sm->bank, kind);
    if (o->static_tree >= 0) sm->policy.static_tree = (int32_t)o->static_tree;
    entmtp_policy *check = NULL;
    if ((st = entmtp_policy_create(&sm->policy, &check)) || (st = entmtp_policy_validate(check, entmtp_bank_size(sm->bank)))) {
        entmtp_policy_free(check);
        return !cli_fail("policy", st);
    }
    entmtp_policy_free(check);
    fprintf(stderr, "entmtp serve: heads %s, %d trees%s%s, policy %s\n", heads, entmtp_bank_size(sm->bank),
            bank ? " from " : "", bank ? bank : "", entmtp_policy_kind_name(kind));
    return 1;
}

int cmd_serve(int argc, char **argv) {
    serve_options o;
    int rc = parse_options(argc, argv, &o);
    if (rc) return rc == 1 ? 0 : rc;

    /* signals are taken by sigwait below; every server thread inherits the mask */
    sigset_t sigs;
    sigemptyset(&sigs);
    sigaddset(&sigs, SIGINT);
    sigaddset(&sigs, SIGTERM);
    pthread_sigmask(SIG_BLOCK, &sigs, NULL);
    signal(SIGPIPE, SIG_IGN);
#ifdef __GLIBC__
    /* Each request's session holds a KV cache of tens of MiB. glibc raises its
     * mmap threshold after the first such block is freed and from then on
     * keeps them in per-thread arenas that only grow (RSS rose ~11 MiB per
     * 112 requests in tests/server/test_load.py); a fixed threshold keeps
     * them in mmap, so a finished request gives its memory back. */
    mallopt(M_MMAP_THRESHOLD, 1 << 20);
#endif

    serve_model sm = { .ctx = (int32_t)o.ctx, .prompt_bits = o.prompt_bits, .step_bits = o.step_bits, .kv_type = o.kv_type, .max_tokens_default = (int32_t)o.max_tokens,
                       .temperature_default = o.temperature, .max_body = (size_t)o.max_body };
    serve_gate gate = { .parallel = (int)o.parallel, .queue_max = (int)o.queue };
    pthread_mutex_init(&gate.mu, NULL);
    pthread_cond_init(&gate.cv, NULL);
    serve_server *srv = NULL;
    rc = 1;
    entmtp_model_params mp = entmtp_model_default_params();
    mp.backend = o.backend;
    mp.n_threads = (int32_t)o.threads;
    mp.compute_type = o.compute;
    mp.progress = cli_progress;
    char *chat_template = NULL;
    if (o.chat_template && !(chat_template = cli_chat_template_text("serve", o.chat_template))) { rc = 2; goto done; }
    sm.chat_template = chat_template;
    sm.api_key = o.api_key;
    if (cli_model_load(o.model, &mp, &sm.model, 1)) goto done;
    if (chat_template) { /* a template of no known family fails now, not on every request */
        const char *role = "user", *content = "hi";
        size_t need = 0;
        entmtp_status ct = entmtp_chat_prompt_template(sm.model, chat_template, &role, &content, 1, NULL, 0, &need);
        if (ct != ENTMTP_OK && ct != ENTMTP_ERR_BUFFER_TOO_SMALL) { cli_fail("--chat-template", ct); goto done; }
    }
    entmtp_model_info mi = { sizeof mi };
    entmtp_model_get_info(sm.model, &mi);
    if (mi.context_length > 0 && sm.ctx > mi.context_length) sm.ctx = mi.context_length;
    /* the id clients send back: the file (or directory) name without .gguf */
    const char *base = strrchr(o.model, '/');
    snprintf(sm.model_id, sizeof sm.model_id, "%s", base && base[1] ? base + 1 : o.model);
    char *ext = strstr(sm.model_id, ".gguf");
    if (ext && !ext[5]) *ext = '\0';
    if (!load_drafting(&o, &sm)) goto done;

    int port = 0;
    if (!serve_http_start(&sm, &gate, o.host, (int)o.port, &srv, &port)) goto done;
    fprintf(stderr, "entmtp serve: listening on http://%s:%d (model %s, %ld parallel, ctx %d%s)\n", o.host, port,
            sm.model_id, o.parallel, sm.ctx, sm.api_key ? ", API key required" : "");
    if (!sm.api_key && host_is_loopback(o.host) != 1)
        fprintf(stderr, "entmtp serve: warning: no API key on %s: anyone who reaches the port can generate\n", o.host);
    int sig = 0;
    sigwait(&sigs, &sig);
    fprintf(stderr, "entmtp serve: %s: finishing running generations\n", sig == SIGINT ? "SIGINT" : "SIGTERM");
    serve_http_drain_and_stop(srv);
    fprintf(stderr, "entmtp serve: stopped\n");
    rc = 0;
done:
    entmtp_bank_free(sm.bank);
    entmtp_heads_free(sm.heads);
    entmtp_model_free(sm.model);
    free(chat_template);
    pthread_cond_destroy(&gate.cv);
    pthread_mutex_destroy(&gate.mu);
    return rc;
}
