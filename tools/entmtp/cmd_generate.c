/* entmtp generate: text in, text out, with EntMTP or plain AR. */
#include "cli.h"

#include "chat.h"
#include "common/common.h"
#include "prompts.h"

#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static void usage(FILE *f) {
    fprintf(f,
            "usage: entmtp generate --model PATH [options]\n"
            "       entmtp chat --model PATH [options]     (the same as generate -i)\n"
            "\n"
            "  --model PATH          GGUF file or Hugging Face directory\n"
            "  --heads PATH          Medusa/Hydra heads (.safetensors) or an EAGLE-3 drafter\n"
            "                        directory (docs/drafters.md); default: the drafter shipped\n"
            "                        for this model, matched by its identity (architecture, shapes,\n"
            "                        vocabulary hash; entmtp info prints it), else AR\n"
            "  --no-heads            plain AR even when heads are shipped\n"
            "  --bank FILE           bank JSON (trees + calibrated policy settings)\n"
            "  --tree NAME[,NAME..]  built-in trees forming the bank (default: the heads' default)\n"
            "  --policy KIND         static | ladder | hysteresis | ucb | throughput | dynamic (default: the bank's, else static)\n"
            "  --static-tree I       tree index for the static policy (default 0)\n"
            "  --thresholds A,B,..   ladder thresholds on s (K-1 for K trees)\n"
            "  --tau-on X --tau-off Y  hysteresis thresholds (tree 0 conservative, last aggressive)\n"
            "  --ucb-exploration X   UCB exploration weight\n"
            "  --prompt TEXT | --prompt-file F   user message (chat template applied)\n"
            "  --raw                 do not apply the chat template\n"
            "  --system TEXT         system prompt for the chat template\n"
            "  --chat-template T     chat template to use instead of the model's: a file or the text\n"
            "                        of a Jinja template, or chatml | llama3 | llama2 | mistral | phi3 |\n"
            "                        gemma | deepseek-r1\n"
            "  -i, --interactive     chat: one message per line from stdin, the conversation kept,\n"
            "                        each reply streamed (/reset starts over, /exit or EOF ends)\n"
            "  --max-tokens N        tokens to generate, per reply in a chat (default 128)\n"
            "  --temperature|--temp T  0 = greedy (default); > 0 samples with typical acceptance\n"
            "  --epsilon E --delta D typical acceptance (defaults 0.09, 0.3)\n"
            "  --top-k K, --top-p P  refused (except the 'off' values 0 and 1): typical acceptance\n"
            "                        decides what is sampled; see docs/acceptance.md\n"
            "  --seed S              RNG seed for T > 0\n"
            "  --ar                  plain autoregressive decoding\n"
            "  --backend B           auto | cpu | cuda (default auto)\n"
            "  --threads N           CPU threads (default: all cores)\n"
            "  --compute C           native (weights in their file type, default) | f32\n"
            CLI_PROMPT_BITS_HELP
            CLI_STEP_BITS_HELP
            CLI_KV_TYPE_HELP
            "  -c, --ctx-size N      context (KV cache capacity) in tokens (alias --kv; default:\n"
            "                        4096, or the model's context when smaller)\n"
            "  --json                print one JSON object instead of text + summary\n"
            "  --compare-ar          also time plain AR on the same prompt: the speedup is measured,\n"
            "                        not estimated from the bank's step costs\n"
            "  --dump-logits F       (AR) write the float32 logits before each token to F\n"
            "  --quiet               no streaming text, summary only\n");
}

typedef struct stream_ctx {
    entmtp_model *model;
    int32_t *gen;
    int32_t n_gen, cap;
    size_t printed;
    int echo;
} stream_ctx;

static char *decode(entmtp_model *m, const int32_t *toks, int32_t n, size_t *len) {
    size_t need = 0;
    entmtp_status st = entmtp_detokenize(m, toks, n, NULL, 0, &need);
    if (st != ENTMTP_OK && st != ENTMTP_ERR_BUFFER_TOO_SMALL) return NULL;
    char *buf = malloc(need + 1);
    if (!buf) return NULL;
    if (entmtp_detokenize(m, toks, n, buf, need + 1, len) != ENTMTP_OK) { free(buf); return NULL; }
    return buf;
}

static int on_tokens(const int32_t *toks, int32_t n, void *user) {
    stream_ctx *c = user;
    for (int32_t i = 0; i < n && c->n_gen < c->cap; i++) c->gen[c->n_gen++] = toks[i];
    if (!c->echo) return 0;
    size_t len = 0;
    int32_t n_show = c->n_gen;
    if (n_show > 0 && entmtp_token_is_eog(c->model, c->gen[n_show - 1])) n_show--;
    char *text = decode(c->model, c->gen, n_show, &len);
    if (!text) return 0;
    /* hold back an incomplete UTF-8 sequence at the end */
    size_t end = len;
    size_t k = 0;
    while (k < 4 && end > c->printed && ((unsigned char)text[end - 1] & 0xC0) == 0x80) { end--; k++; }
    if (end > c->printed && ((unsigned char)text[end - 1] & 0x80)) {
        unsigned char lead = (unsigned char)text[end - 1];
        size_t want = lead >= 0xF0 ? 4 : lead >= 0xE0 ? 3 : lead >= 0xC0 ? 2 : 1;
        if (want == k + 1) end = len; /* complete */
        else end = end - 1;
    } else {
        end = len;
    }
    if (end > c->printed) {
        fwrite(text + c->printed, 1, end - c->printed, stdout);
        fflush(stdout);
        c->printed = end;
    }
    free(text);
    return 0;
}

/* ------------------------------------------------------------- options */

typedef struct generate_options {
    const char *model_path, *heads_path, *bank_path, *trees, *policy_name, *prompt, *prompt_file;
    const char *system_prompt, *thresholds, *dump_path, *chat_template;
    long max_tokens, threads, kv, static_tree;
    unsigned long long seed;
    float temperature, epsilon, delta, tau_on, tau_off, ucb_expl;
    int ar, json, raw, quiet, no_heads, interactive, compare_ar;
    entmtp_backend backend;
    entmtp_compute_type compute;
    int32_t prompt_bits, step_bits, kv_type;
} generate_options;

static int parse_options(int argc, char **argv, generate_options *o) {
    *o = (generate_options){ .max_tokens = 128, .seed = 0x5eed, .epsilon = 0.09f, .delta = 0.3f, .tau_on = -1,
                             .tau_off = -1, .ucb_expl = -1, .backend = ENTMTP_BACKEND_AUTO,
                             .compute = ENTMTP_COMPUTE_NATIVE, .prompt_bits = 0, .step_bits = 16 };
    const cli_option opts[] = {
        { "--model", CLI_STRING, &o->model_path },
        { "--heads", CLI_STRING, &o->heads_path },
        { "--no-heads", CLI_FLAG, &o->no_heads },
        { "--bank", CLI_STRING, &o->bank_path },
        { "--tree", CLI_STRING, &o->trees },
        { "--policy", CLI_STRING, &o->policy_name },
        { "--thresholds", CLI_STRING, &o->thresholds },
        { "--prompt", CLI_STRING, &o->prompt },
        { "--prompt-file", CLI_STRING, &o->prompt_file },
        { "--dump-logits", CLI_STRING, &o->dump_path },
        { "--system", CLI_STRING, &o->system_prompt },
        { "--raw", CLI_FLAG, &o->raw },
        { "--chat-template", CLI_STRING, &o->chat_template },
        { "-i|--interactive", CLI_FLAG, &o->interactive },
        { "--top-k", CLI_CALL, NULL, 0, 0, cli_refuse_top_k },
        { "--top-p", CLI_CALL, NULL, 0, 0, cli_refuse_top_p },
        { "--ar", CLI_FLAG, &o->ar },
        { "--json", CLI_FLAG, &o->json },
        { "--quiet", CLI_FLAG, &o->quiet },
        { "--compare-ar", CLI_FLAG, &o->compare_ar },
        { "--max-tokens", CLI_LONG, &o->max_tokens, 1, INT_MAX },
        { "--threads", CLI_LONG, &o->threads, 0, INT_MAX },
        { "-c|--ctx-size|--kv", CLI_LONG, &o->kv, 0, INT_MAX },
        { "--static-tree", CLI_LONG, &o->static_tree, 0, INT_MAX },
        { "--seed", CLI_SEED, &o->seed },
        { "--temperature|--temp", CLI_FLOAT, &o->temperature, 0 },
        { "--epsilon", CLI_FLOAT, &o->epsilon, -INFINITY },
        { "--delta", CLI_FLOAT, &o->delta, -INFINITY },
        { "--tau-on", CLI_FLOAT, &o->tau_on, -INFINITY },
        { "--tau-off", CLI_FLOAT, &o->tau_off, -INFINITY },
        { "--ucb-exploration", CLI_FLOAT, &o->ucb_expl, -INFINITY },
        { "--compute", CLI_COMPUTE, &o->compute },
        { "--backend", CLI_BACKEND, &o->backend },
        { "--prompt-bits", CLI_CALL, &o->prompt_bits, 0, 0, cli_prompt_bits },
        { "--step-bits", CLI_CALL, &o->step_bits, 0, 0, cli_step_bits },
        { "--kv-type", CLI_CALL, &o->kv_type, 0, 0, cli_kv_type },
    };
    int rc = cli_parse("generate", argc, argv, CLI_TABLE(opts), usage);
    if (rc) return rc;
    if (o->dump_path) o->ar = 1; /* logits are dumped along an AR run */
    if (!o->model_path) { fprintf(stderr, "entmtp generate: --model is required\n"); usage(stderr); return 2; }
    if (o->prompt && o->prompt_file) { fprintf(stderr, "entmtp generate: give --prompt or --prompt-file, not both\n"); return 2; }
    if (o->bank_path && o->trees) { fprintf(stderr, "entmtp generate: give --bank or --tree, not both\n"); return 2; }
    if (o->trees && !cli_check_tree_names("generate", o->trees)) return 2;
    if (o->interactive && (o->prompt || o->prompt_file || o->raw || o->json || o->dump_path)) {
        fprintf(stderr, "entmtp generate: --interactive reads the messages from stdin: it takes no --prompt, "
                        "--prompt-file, --raw, --json or --dump-logits\n");
        return 2;
    }
    return 0;
}

/* --------------------------------------------------------------- steps */

typedef struct generate_run {
    entmtp_model *model;
    entmtp_heads *heads;
    entmtp_heads_info hi;
    entmtp_bank *bank;
    const char *heads_path, *bank_path; /* given or shipped */
    entmtp_policy *policy;
    entmtp_session *session;
    int32_t *ptoks;
    int32_t n_ptoks;
    stream_ctx sc;
    char *chat_template; /* --chat-template's text */
    entmtp_drafter drafter;       /* the shipped drafter looked up for the model */
    char heads_why[1200], bank_why[160]; /* where the heads and the bank came from, for the summary */
} generate_run;

static void generate_run_free(generate_run *g) {
    if (g->session) entmtp_policy_set(g->session, NULL);
    entmtp_session_free(g->session);
    entmtp_policy_free(g->policy);
    entmtp_bank_free(g->bank);
    entmtp_heads_free(g->heads);
    entmtp_model_free(g->model);
    free(g->sc.gen);
    free(g->ptoks);
    free(g->chat_template);
}

/* Heads given or shipped with the model (and a bank searched for them). */
static int load_heads(const generate_options *o, generate_run *g) {
    g->heads_path = o->heads_path;
    g->bank_path = o->bank_path;
    snprintf(g->heads_why, sizeof g->heads_why, "%s", o->ar ? "--ar" : o->no_heads ? "--no-heads" : "given by --heads");
    if (o->ar || o->no_heads) return 0;
    if (!g->heads_path) {
        int found = cli_find_drafter(g->model, &g->drafter);
        snprintf(g->heads_why, sizeof g->heads_why, "%s", g->drafter.reason);
        if (found) g->heads_path = g->drafter.heads_path;
        /* a bank searched for the shipped heads sits next to them: X.bank.json */
        if (found && !g->bank_path && !o->trees && g->drafter.bank_path[0]) {
            g->bank_path = g->drafter.bank_path;
            snprintf(g->bank_why, sizeof g->bank_why, "shipped with the heads");
        }
    }
    if (o->bank_path) snprintf(g->bank_why, sizeof g->bank_why, "given by --bank");
    entmtp_status st;
    if (g->heads_path && (st = entmtp_heads_load(g->model, g->heads_path, &g->heads))) return cli_fail(g->heads_path, st);
    if (!g->heads && !o->json)
        fprintf(stderr, "entmtp generate: no heads given (--heads) or shipped for this model: decoding plain AR (%s)\n",
                g->heads_why);
    g->hi = (entmtp_heads_info){ sizeof g->hi };
    if (g->heads) entmtp_heads_get_info(g->heads, &g->hi);
    return 0;
}

/* The bank file, or the built-in trees named by --tree (default: the heads'). */
static int load_bank(const generate_options *o, generate_run *g) {
    entmtp_bank_params bp = entmtp_bank_default_params();
    bp.max_depth = g->hi.n_heads;
    entmtp_status st;
    if (g->bank_path) return (st = entmtp_bank_load(g->bank_path, &bp, &g->bank)) ? cli_fail(g->bank_path, st) : 0;
    if ((st = entmtp_bank_create(&bp, &g->bank))) return cli_fail("bank", st);
    const char *list = o->trees ? o->trees : (g->hi.kind == ENTMTP_HEADS_HYDRA ? "hydra_default" : "medusa_vicuna_7b_stage2");
    snprintf(g->bank_why, sizeof g->bank_why, "built-in trees %s (%s)", list, o->trees ? "--tree" : "no bank file for these heads");
    char buf[1024];
    snprintf(buf, sizeof buf, "%s", list);
    for (char *tok = strtok(buf, ","); tok; tok = strtok(NULL, ","))
        if ((st = entmtp_bank_add_builtin(g->bank, tok, NULL))) return cli_fail(tok, st);
    return 0;
}

/* "A,B,C" into `out` (at most `cap` numbers); the count, or -1 when malformed. */
static int32_t parse_float_list(const char *list, float *out, int32_t cap) {
    char buf[1024];
    snprintf(buf, sizeof buf, "%s", list);
    int32_t n = 0;
    for (char *tok = strtok(buf, ","); tok; tok = strtok(NULL, ",")) {
        char *end;
        float v = strtof(tok, &end);
        if (n >= cap || !*tok || *end) return -1;
        out[n++] = v;
    }
    return n;
}

/* The policy named by --policy (default: the bank's), with the bank's settings
 * for it where it has them, then the command line's overrides. */
static int make_policy(const generate_options *o, generate_run *g) {
    entmtp_policy_kind kind = ENTMTP_POLICY_STATIC;
    entmtp_policy_config pc = { sizeof pc };
    entmtp_status st;
    if (o->policy_name &&
        ((st = entmtp_policy_kind_from_name(o->policy_name, &kind)) || kind == ENTMTP_POLICY_CUSTOM)) {
        fprintf(stderr, "entmtp generate: --policy: '%s' is not static, ladder, hysteresis, ucb, throughput or dynamic\n",
                o->policy_name);
        return 2;
    }
    /* no --policy: the bank search's best */
    int from_bank = cli_bank_policy_config(g->bank, !o->policy_name, &kind, &pc);
    int32_t n_trees = entmtp_bank_size(g->bank);
    if (kind == ENTMTP_POLICY_STATIC && (o->static_tree || !from_bank)) pc.static_tree = (int32_t)o->static_tree;
    if (kind == ENTMTP_POLICY_HYSTERESIS) {
        if (!from_bank) { pc.conservative_tree = 0; pc.aggressive_tree = n_trees - 1; }
        if (o->tau_on >= 0) pc.tau_on = o->tau_on;
        if (o->tau_off >= 0) pc.tau_off = o->tau_off;
    }
    if (kind == ENTMTP_POLICY_UCB && o->ucb_expl >= 0) pc.ucb_exploration = o->ucb_expl;
    float threshold_list[64];
    if (kind == ENTMTP_POLICY_LADDER && o->thresholds) {
        int32_t cap = entmtp_limit(ENTMTP_LIMIT_MAX_LADDER) - 1;
        int32_t n = parse_float_list(o->thresholds, threshold_list, cap < 64 ? cap : 64);
        if (n < 0) { fprintf(stderr, "entmtp generate: --thresholds: bad list '%s'\n", o->thresholds); return 2; }
        pc.n_thresholds = n;
        pc.thresholds = threshold_list;
        pc.ladder_trees = NULL;
    }
    if ((st = entmtp_policy_create(&pc, &g->policy))) return cli_fail("policy", st);
    return 0;
}

/* Session, policy, and the prompt prefilled. */
static int start_session(const generate_options *o, generate_run *g) {
    entmtp_session_params sp = entmtp_session_default_params();
    sp.kv_capacity = (int32_t)o->kv;
    sp.temperature = o->temperature;
    sp.epsilon = o->epsilon;
    sp.delta = o->delta;
    sp.seed = o->seed;
    sp.prompt_activation_bits = o->prompt_bits;
    sp.step_activation_bits = o->step_bits;
    sp.kv_type = o->kv_type;
    entmtp_status st;
    if ((st = entmtp_session_create(g->model, g->heads, g->bank, &sp, &g->session))) return cli_fail("session", st);
    if (g->policy && (st = entmtp_policy_set(g->session, g->policy))) return cli_fail("policy", st);
    if (o->interactive) return 0; /* the chat prefills each turn */
    char *file_text = NULL;
    const char *prompt = o->prompt ? o->prompt : "Write a Python function that checks whether a number is prime.";
    if (o->prompt_file) { /* the whole file is one user message */
        if ((st = emt_read_file(o->prompt_file, &file_text, NULL))) return cli_fail(o->prompt_file, st);
        prompt = file_text;
    }
    char *rendered = NULL; /* --chat-template: the library renders, then the text is tokenized as is */
    if (g->chat_template && !o->raw) {
        const char *roles[] = { "system", "user" }, *contents[] = { o->system_prompt, prompt };
        int skip = !o->system_prompt;
        if (cli_chat_render(g->model, g->chat_template, roles + skip, contents + skip, 2 - skip, &rendered)) {
            free(file_text);
            return 1;
        }
    }
    int bad = rendered ? chat_tokens(g->model, NULL, rendered, 1, &g->ptoks, &g->n_ptoks)
                       : chat_tokens(g->model, o->system_prompt, prompt, o->raw, &g->ptoks, &g->n_ptoks);
    free(rendered);
    free(file_text);
    if (bad) return 1;
    if ((st = entmtp_session_prefill(g->session, g->ptoks, g->n_ptoks))) return cli_fail("prefill", st);
    return 0;
}

/* Generate, streaming text; --dump-logits: AR steps with the logits saved. */
static int decode_tokens(const generate_options *o, generate_run *g) {
    g->sc.model = g->model;
    g->sc.cap = (int32_t)o->max_tokens;
    g->sc.gen = malloc((size_t)o->max_tokens * sizeof *g->sc.gen);
    g->sc.echo = !o->json && !o->quiet;
    if (!g->sc.gen) return cli_fail("generate", ENTMTP_ERR_OUT_OF_MEMORY);
    entmtp_status st = ENTMTP_OK;
    if (o->dump_path) {
        FILE *df = fopen(o->dump_path, "wb");
        if (!df) { perror(o->dump_path); return 1; }
        for (long i = 0; i < o->max_tokens && st == ENTMTP_OK; i++) {
            const float *lg;
            int32_t nv;
            entmtp_session_logits(g->session, &lg, &nv);
            fwrite(lg, sizeof(float), (size_t)nv, df);
            entmtp_step_result r = { sizeof r };
            st = entmtp_step_ar(g->session, &r);
            if (r.n_tokens) on_tokens(r.tokens, r.n_tokens, &g->sc);
            if (r.stopped) break;
        }
        fclose(df);
    } else {
        st = entmtp_generate(g->session, (int32_t)o->max_tokens, o->ar || !g->heads, on_tokens, &g->sc);
    }
    if (st != ENTMTP_OK && st != ENTMTP_ERR_KV_FULL) return cli_fail("generate", st);
    if (st == ENTMTP_ERR_KV_FULL) fprintf(stderr, "entmtp generate: stopped: %s\n", entmtp_last_error());
    /* the AR baseline for the summary: measured on the same prompt */
    if (o->compare_ar && !o->ar && g->heads && (st = entmtp_session_measure_ar(g->session, 0)))
        return cli_fail("--compare-ar", st);
    return 0;
}

static void print_json(const generate_options *o, const generate_run *g, const char *text, size_t text_len,
                       const entmtp_session_stats *stats, const char *backend, const char *policy_label,
                       double load_seconds) {
    printf("{\"tokens\":[");
    for (int32_t i = 0; i < g->sc.n_gen; i++) printf(i ? ",%d" : "%d", g->sc.gen[i]);
    printf("],\"prompt_ids\":[");
    for (int32_t i = 0; i < g->n_ptoks; i++) printf(i ? ",%d" : "%d", g->ptoks[i]);
    printf("],\"text\":");
    cli_json_string(stdout, text ? text : "", text ? text_len : 0);
    printf(",\"prompt_tokens\":%d,\"steps\":%lld,\"mean_accept_length\":%.4f,"
           "\"tokens_per_second\":%.3f,\"prefill_seconds\":%.4f,\"decode_seconds\":%.4f,"
           "\"mode\":\"%s\",\"policy\":\"%s\",\"backend\":\"%s\",",
           g->n_ptoks, (long long)stats->n_steps, stats->mean_accept_length, stats->tokens_per_second,
           stats->prefill_seconds, stats->decode_seconds, (o->ar || !g->heads) ? "ar" : "entmtp", policy_label, backend);
    static const char *const sources[] = { "none", "estimated", "measured" };
    printf("\"generated\":%lld,\"warm_tokens_per_second\":%.3f,\"warmup_steps\":%lld,\"warmup_seconds\":%.4f,"
           "\"speedup\":%.4f,\"speedup_source\":\"%s\",\"ar_tokens_per_second\":%.3f,\"load_seconds\":%.4f,"
           "\"prefill_tokens_per_second\":%.3f,\"heads\":",
           (long long)stats->n_generated, stats->warm_tokens_per_second, (long long)stats->n_warmup_steps,
           stats->warmup_seconds, stats->speedup, sources[stats->speedup_source <= 2 ? stats->speedup_source : 0],
           stats->ar_tokens_per_second, load_seconds, stats->prefill_tokens_per_second);
    cli_json_string(stdout, g->heads ? g->heads_path : "", g->heads ? strlen(g->heads_path) : 0);
    printf(",\"heads_reason\":");
    cli_json_string(stdout, g->heads_why, strlen(g->heads_why));
    printf(",\"bank\":");
    cli_json_string(stdout, g->bank_path ? g->bank_path : "", g->bank_path ? strlen(g->bank_path) : 0);
    printf(",\"bank_reason\":");
    cli_json_string(stdout, g->bank_why, strlen(g->bank_why));
    printf(",\"tree_usage\":{");
    int32_t n_trees = g->bank ? entmtp_bank_size(g->bank) : 0;
    for (int32_t k = 0; k < n_trees; k++) {
        entmtp_tree_info ti = { sizeof ti };
        entmtp_bank_tree_info(g->bank, k, &ti);
        printf("%s", k ? "," : "");
        cli_json_string(stdout, ti.name, strlen(ti.name));
        printf(":%lld", (long long)entmtp_session_tree_usage(g->session, k));
    }
    printf("}}\n");
}

/* What speculation bought: the warm rate over AR's, measured or estimated. */
static void print_speedup(const generate_options *o, const generate_run *g, const entmtp_session_stats *stats) {
    if (stats->speedup_source == ENTMTP_SPEEDUP_NONE) {
        fprintf(stderr, "-- speedup: none (%s)\n",
                o->ar || !g->heads ? "plain AR decoding" : "the bank has no step costs; --compare-ar measures AR");
    } else if (stats->speedup_source == ENTMTP_SPEEDUP_MEASURED) {
        fprintf(stderr, "-- speedup: %.2fx over AR (measured: AR %.2f tokens/s on the same prompt)\n", stats->speedup,
                stats->ar_tokens_per_second);
    } else {
        fprintf(stderr, "-- speedup: %.2fx over AR (estimated from the bank's step costs: AR about %.2f tokens/s; "
                "--compare-ar measures it)\n", stats->speedup, stats->ar_tokens_per_second);
    }
}

static void print_text(const generate_options *o, const generate_run *g, const char *text, size_t text_len,
                       const entmtp_session_stats *stats, const char *backend, const char *policy_label,
                       double load_seconds) {
    if (g->sc.echo) {
        if (text && text_len > g->sc.printed) fwrite(text + g->sc.printed, 1, text_len - g->sc.printed, stdout);
        printf("\n");
    } else if (!o->quiet && text) {
        fwrite(text, 1, text_len, stdout);
        printf("\n");
    }
    fprintf(stderr, "\n-- %s on %s: %d prompt tokens, %lld generated in %lld steps, mean accept length %.3f, %.2f tokens/s\n",
            (o->ar || !g->heads) ? "AR" : "EntMTP", backend, g->n_ptoks, (long long)stats->n_generated,
            (long long)stats->n_steps, stats->mean_accept_length, stats->warm_tokens_per_second);
    fprintf(stderr, "-- decode: %.2f tokens/s without %lld warm-up steps (first uses of each tree, %.3f s; all steps %.2f tokens/s)\n",
            stats->warm_tokens_per_second, (long long)stats->n_warmup_steps, stats->warmup_seconds, stats->tokens_per_second);
    print_speedup(o, g, stats);
    fprintf(stderr, "-- load %.3f s; prefill %lld tokens in %.3f s (%.1f tokens/s)\n", load_seconds,
            (long long)stats->n_prompt_tokens, stats->prefill_seconds, stats->prefill_tokens_per_second);
    if (!g->heads || o->ar) {
        fprintf(stderr, "-- drafter: none (%s)\n", g->heads_why);
        return;
    }
    if (!g->heads || o->ar) return;
    fprintf(stderr, "-- drafter: heads %s (%s, %d heads): %s\n-- bank: %s (%s); policy %s; tree usage:", g->heads_path,
            g->hi.kind == ENTMTP_HEADS_HYDRA    ? "hydra"
            : g->hi.kind == ENTMTP_HEADS_EAGLE3 ? "eagle3"
                                                : "medusa",
            g->hi.n_heads, g->heads_why, g->bank_path ? g->bank_path : "built-in", g->bank_why, policy_label);
    for (int32_t k = 0; k < entmtp_bank_size(g->bank); k++) {
        entmtp_tree_info ti = { sizeof ti };
        entmtp_bank_tree_info(g->bank, k, &ti);
        fprintf(stderr, " %s=%lld", ti.name, (long long)entmtp_session_tree_usage(g->session, k));
    }
    fprintf(stderr, "\n");
}

/* The text (without a final stop token) and the run's figures. */
static void report(const generate_options *o, const generate_run *g) {
    entmtp_session_stats stats = { sizeof stats };
    entmtp_session_get_stats(g->session, &stats);
    size_t text_len = 0;
    int32_t n_text = g->sc.n_gen;
    if (n_text > 0 && entmtp_token_is_eog(g->model, g->sc.gen[n_text - 1])) n_text--;
    char *text = decode(g->model, g->sc.gen, n_text, &text_len);
    entmtp_model_info mi = { sizeof mi };
    entmtp_model_get_info(g->model, &mi);
    const char *backend = mi.backend == ENTMTP_BACKEND_CUDA ? "cuda" : "cpu";
    const char *policy_label = g->policy ? entmtp_policy_kind_name(entmtp_policy_get_kind(g->policy)) : "none";
    if (o->json) print_json(o, g, text, text_len, &stats, backend, policy_label, mi.load_seconds);
    else print_text(o, g, text, text_len, &stats, backend, policy_label, mi.load_seconds);
    free(text);
}

int cmd_generate(int argc, char **argv) {
    generate_options o;
    int rc = parse_options(argc, argv, &o);
    if (rc) return rc == 1 ? 0 : rc;
    generate_run g = { 0 };
    entmtp_model_params mp = entmtp_model_default_params();
    mp.backend = o.backend;
    mp.n_threads = (int32_t)o.threads;
    mp.compute_type = o.compute;
    mp.progress = o.json ? NULL : cli_progress;
    if (o.chat_template && !(g.chat_template = cli_chat_template_text("generate", o.chat_template))) return 2;
    if ((rc = cli_model_load(o.model_path, &mp, &g.model, !o.json))) {
    } else if (!(rc = load_heads(&o, &g)) && g.heads && !(rc = load_bank(&o, &g))) rc = make_policy(&o, &g);
    if (!rc && !(rc = start_session(&o, &g)) && o.interactive) {
        cli_chat_settings cs = { o.system_prompt, g.chat_template, (int32_t)o.max_tokens, o.ar || !g.heads };
        rc = cli_chat_run(g.model, g.session, &cs);
    } else if (!rc && !(rc = decode_tokens(&o, &g))) {
        report(&o, &g);
    }
    generate_run_free(&g);
    return rc;
}
