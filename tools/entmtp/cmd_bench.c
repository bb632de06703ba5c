/* entmtp bench: AR speed, memory bandwidth, and tree-verify cost against
 * tree size, all measured in one run; EntMTP vs AR on a real model; the
 * cost of a whole EntMTP step per tree of a bank, on any model. */
#include "cli.h"

#include "engine/engine.h"
#include "model/synthetic.h"

#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static void usage(FILE *f) {
    fprintf(f,
            "usage: entmtp bench (--synthetic NAME | --model PATH) [--heads PATH [--bank FILE]] [options]\n"
            "       entmtp bench --suite ...   the paper's Table 1 per task (entmtp bench --suite --help)\n"
            "\n"
            "  --synthetic NAME   random weights at a named shape: llama-7b, smollm2-135m, tiny\n"
            "  --weights W        synthetic weight type: f32 (default) | f16 | bf16 | q8_0 | q4_0 | q5_0 | q5_1 |\n"
            "                     q4_k | q5_k | q6_k (rows repeat every 256: a 7B model builds in seconds)\n"
            "  --compute C        native (default: weights in their file type) | f32\n"
            "  --model PATH       a real model (GGUF or HF directory)\n"
            "  --heads PATH       heads for the EntMTP-vs-AR comparison on the real model\n"
            "  --bank FILE        with --heads, on any model (a synthetic one too: heads need only its\n"
            "                     shape): a whole EntMTP step (draft, verify, accept, commit) timed per\n"
            "                     tree of the bank, the static policy on each in turn, --tokens steps\n"
            "                     from the --context prefix; with the bank's accept lengths, EntMTP's\n"
            "                     speed on this device (greedy tokens do not depend on the backend)\n"
            "  --tree NAME        tree for that comparison (default: heads' default)\n"
            "  --prompt TEXT      prompt for that comparison\n"
            "  --context N        tokens in the KV cache while timing (default 256)\n"
            "  --tokens N         AR steps / generated tokens to time (default 32)\n"
            "  --nodes LIST       tree sizes for verify timing (default 1,2,4,8,16,32,64,128)\n"
            "  --reps N           repetitions per verify size (default 5)\n"
            "  --backend B        auto | cpu | cuda;  --threads N   CPU threads\n"
            "  --prompt-bits B    activations of the prefill (and of the comparison's prompts): 8 (default) | 16\n"
            "  --step-bits B      activations of AR steps and verifies: 16 (default) | 8\n"
            "  --kv-type T        KV cache elements: f32 | bf16 (default: the backend's, bf16 on CUDA)\n"
            "  --json             machine-readable output;  --plot FILE.png  verify-cost plot\n"
            "  --plot-script PY   plotting script (default: plot_bench.py installed with entmtp)\n");
}

/* --weights: a dtype the synthetic model can be built in (lower case). */
static int synthetic_weights(const char *name, emt_dtype *out) {
    static const emt_dtype ok[] = { EMT_F32, EMT_F16, EMT_BF16, EMT_Q8_0, EMT_Q4_0, EMT_Q5_0, EMT_Q5_1,
                                    EMT_Q4_K, EMT_Q5_K, EMT_Q6_K };
    for (size_t i = 0; i < sizeof ok / sizeof ok[0]; i++) {
        const char *d = emt_dtype_name(ok[i]);
        size_t k = 0;
        while (d[k] && name[k] && tolower((unsigned char)d[k]) == tolower((unsigned char)name[k])) k++;
        if (!d[k] && !name[k]) { *out = ok[i]; return 1; }
    }
    return 0;
}

/* Choices for a tree of exactly n nodes: 10 children of the root, then up to
 * 4 children per node level by level (depth <= 3). */
static int tree_choices(int32_t n, int32_t *ranks, int32_t *lens, int32_t *n_paths) {
    int32_t paths[160][3], plen[160], np = 0;
    for (int32_t r = 0; r < 10 && np < n - 1; r++) { paths[np][0] = r; plen[np++] = 1; }
    for (int32_t i = 0; i < np && np < n - 1; i++) {
        if (plen[i] >= 3) continue;
        for (int32_t r = 0; r < 4 && np < n - 1; r++) {
            memcpy(paths[np], paths[i], sizeof paths[i]);
            paths[np][plen[i]] = r;
            plen[np] = plen[i] + 1;
            np++;
        }
    }
    if (np != n - 1) return 0;
    int32_t k = 0;
    for (int32_t i = 0; i < np; i++) {
        lens[i] = plen[i];
        for (int32_t d = 0; d < plen[i]; d++) ranks[k++] = paths[i][d];
    }
    *n_paths = np;
    return 1;
}

typedef struct bench_options {
    const char *synthetic, *model_path, *heads_path, *bank_path, *tree, *plot, *plot_script, *prompt, *nodes_list,
        *weights;
    emt_dtype weights_type; /* --weights, parsed */
    entmtp_compute_type compute;
    entmtp_backend backend;
    long context, tokens, reps, threads;
    int json;
    int32_t prompt_bits, step_bits, kv_type;
    int32_t sizes[32], n_sizes; /* --nodes, parsed */
} bench_options;

static int parse_options(int argc, char **argv, bench_options *o) {
    *o = (bench_options){ .prompt = "Write a Python function that returns the n-th Fibonacci number.",
                          .nodes_list = "1,2,4,8,16,32,64,128", .weights = "f32", .compute = ENTMTP_COMPUTE_NATIVE,
                          .backend = ENTMTP_BACKEND_AUTO, .context = 256, .tokens = 32, .reps = 5, .prompt_bits = 0,
                          .step_bits = 16 };
    const cli_option opts[] = {
        { "--synthetic", CLI_STRING, &o->synthetic },
        { "--model", CLI_STRING, &o->model_path },
        { "--heads", CLI_STRING, &o->heads_path },
        { "--bank", CLI_STRING, &o->bank_path },
        { "--tree", CLI_STRING, &o->tree },
        { "--prompt", CLI_STRING, &o->prompt },
        CLI_PLOT_OPTIONS(&o->plot, &o->plot_script),
        { "--nodes", CLI_STRING, &o->nodes_list },
        { "--weights", CLI_STRING, &o->weights },
        { "--compute", CLI_COMPUTE, &o->compute },
        { "--context", CLI_LONG, &o->context, 0, 1000000 },
        { "--tokens", CLI_LONG, &o->tokens, 0, 1000000 },
        { "--reps", CLI_LONG, &o->reps, 0, 1000000 },
        { "--threads", CLI_LONG, &o->threads, 0, 1000000 },
        { "--backend", CLI_BACKEND, &o->backend },
        { "--json", CLI_FLAG, &o->json },
        { "--prompt-bits", CLI_CALL, &o->prompt_bits, 0, 0, cli_prompt_bits },
        { "--step-bits", CLI_CALL, &o->step_bits, 0, 0, cli_step_bits },
        { "--kv-type", CLI_CALL, &o->kv_type, 0, 0, cli_kv_type },
    };
    int rc = cli_parse("bench", argc, argv, CLI_TABLE(opts), usage);
    if (rc) return rc;
    if (!synthetic_weights(o->weights, &o->weights_type)) {
        fprintf(stderr, "entmtp bench: --weights: '%s' is not one of f32 f16 bf16 q8_0 q4_0 q5_0 q5_1 q4_k q5_k q6_k\n",
                o->weights);
        return 2;
    }
    if (!!o->synthetic == !!o->model_path) { fprintf(stderr, "entmtp bench: give exactly one of --synthetic or --model\n"); return 2; }
    if (o->synthetic && o->heads_path && !o->bank_path) {
        fprintf(stderr, "entmtp bench: --heads on a synthetic model times steps per tree of a --bank; give one\n");
        return 2;
    }
    if (o->bank_path && !o->heads_path) {
        fprintf(stderr, "entmtp bench: --bank '%s' needs --heads (the drafter whose steps are timed)\n", o->bank_path);
        return 2;
    }
    if (o->context < 1 || o->tokens < 1 || o->reps < 1) {
        fprintf(stderr, "entmtp bench: --context, --tokens and --reps must be positive\n");
        return 2;
    }
    char buf[256];
    snprintf(buf, sizeof buf, "%s", o->nodes_list);
    for (char *t = strtok(buf, ","); t && o->n_sizes < 32; t = strtok(NULL, ",")) {
        long x = strtol(t, NULL, 10);
        if (x < 1 || x > 150) { fprintf(stderr, "entmtp bench: --nodes: %ld outside [1, 150]\n", x); return 2; }
        o->sizes[o->n_sizes++] = (int32_t)x;
    }
    return 0;
}

/* One bank tree's EntMTP steps (--bank). */
typedef struct tree_steps {
    entmtp_tree_info info;   /* name owned by the bank; mean_accept_length is the bank's figure */
    double seconds;          /* wall time per timed step */
    double accepted;         /* mean accepted tokens per timed step on this model */
    emt_step_counters count; /* the timed steps alone */
} tree_steps;

/* Everything one bench run holds and measures, released by bench_job_free. */
typedef struct bench_job {
    const bench_options *o;
    entmtp_model *model;
    entmtp_model_info mi;
    entmtp_heads *heads;
    entmtp_bank *bank, *hbank; /* one tree per --nodes size; the heads' tree */
    entmtp_session *s;         /* over `bank`, prefilled with --context tokens */
    double copy_gbs, prefill_s, ar_step, step_bytes, bw;
    double verify[32];
    /* the same in CPU time of the whole process (every thread; spinning
     * counts), per AR step and per verify: with --threads 1 a figure that a
     * machine shared with other jobs inflates far less than wall time */
    double ar_cpu, verify_cpu[32];
    double spec_tps, spec_accept, ar_tps;
    char spec_drafts[300];        /* what the EntMTP generation drafted with */
    entmtp_policy *spec_policy;   /* its policy with --bank (its sessions are freed before it) */
    int have_spec;
    emt_step_counters ar_count, spec_count; /* the AR steps timed; the EntMTP generation */
    entmtp_bank *tbank;                     /* --bank */
    tree_steps *trees;                      /* one per tree of tbank */
    tree_steps tree_ar;                     /* AR steps timed as the trees' steps are */
    int32_t n_trees;
} bench_job;

static void bench_job_free(bench_job *j) {
    entmtp_session_free(j->s);
    entmtp_bank_free(j->bank);
    entmtp_bank_free(j->hbank);
    entmtp_bank_free(j->tbank);
    entmtp_policy_free(j->spec_policy);
    free(j->trees);
    entmtp_heads_free(j->heads);
    entmtp_model_free(j->model);
}

/* A synthetic model at a named shape, or a real one. */
static int load_model(bench_job *j) {
    const bench_options *o = j->o;
    entmtp_status st;
    entmtp_model_params mp = entmtp_model_default_params();
    mp.backend = o->backend;
    mp.n_threads = (int32_t)o->threads;
    mp.compute_type = o->compute;
    mp.progress = o->json ? NULL : cli_progress;
    if (o->synthetic) {
        emt_model_config c;
        if ((st = emt_synthetic_config(o->synthetic, &c))) return cli_fail("--synthetic", st);
        if ((st = emt_model_create_synthetic(&c, 1234, o->weights_type, &mp, &j->model))) return cli_fail(o->synthetic, st);
    } else if ((st = entmtp_model_load(o->model_path, &mp, &j->model))) {
        return cli_fail(o->model_path, st);
    }
    j->mi = (entmtp_model_info){ sizeof j->mi };
    entmtp_model_get_info(j->model, &j->mi);
    return 0;
}

/* The --context tokens every timed session starts from (malloc'd). */
static int32_t *context_tokens(const bench_job *j) {
    int32_t *t = malloc((size_t)j->o->context * sizeof *t);
    if (t)
        for (long i = 0; i < j->o->context; i++) t[i] = (int32_t)((i * 31 + 7) % j->mi.vocab_size);
    return t;
}

/* --heads and --bank, loaded before anything is timed so that a bad file
 * fails at once. */
static int load_drafter(bench_job *j) {
    const bench_options *o = j->o;
    entmtp_status st;
    if (o->heads_path && (st = entmtp_heads_load(j->model, o->heads_path, &j->heads))) return cli_fail(o->heads_path, st);
    if (o->bank_path && (st = entmtp_bank_load(o->bank_path, NULL, &j->tbank))) return cli_fail(o->bank_path, st);
    return 0;
}

/* A bank with one tree per size and a session over it, prefilled with
 * --context synthetic tokens (timed: prompt processing). */
static int prefilled_session(bench_job *j) {
    const bench_options *o = j->o;
    entmtp_status st;
    if ((st = entmtp_bank_create(NULL, &j->bank))) return cli_fail("bank", st);
    for (int32_t i = 0; i < o->n_sizes; i++) {
        int32_t ranks[600], lens[200], np = 0;
        char name[32];
        snprintf(name, sizeof name, "n%d", o->sizes[i]);
        if (!tree_choices(o->sizes[i], ranks, lens, &np)) {
            fprintf(stderr, "entmtp bench: cannot build a %d-node tree\n", o->sizes[i]);
            return 1;
        }
        if ((st = entmtp_bank_add_tree(j->bank, name, ranks, lens, np, NULL))) return cli_fail(name, st);
    }
    entmtp_session_params sp = entmtp_session_default_params();
    int32_t need = (int32_t)(o->context + o->tokens + 8);
    sp.kv_capacity = need < j->mi.context_length ? need : j->mi.context_length;
    sp.n_stop_tokens = 0;
    sp.prompt_activation_bits = o->prompt_bits;
    sp.step_activation_bits = o->step_bits;
    sp.kv_type = o->kv_type;
    if ((st = entmtp_session_create(j->model, NULL, j->bank, &sp, &j->s))) return cli_fail("session", st);
    int32_t *ctx_tokens = context_tokens(j);
    if (!ctx_tokens) return cli_fail("bench", ENTMTP_ERR_OUT_OF_MEMORY);
    double t0 = emt_now();
    st = entmtp_session_prefill(j->s, ctx_tokens, (int32_t)o->context);
    j->prefill_s = emt_now() - t0;
    free(ctx_tokens);
    return st ? cli_fail("prefill", st) : 0;
}

/* --tokens AR steps, and the bandwidth they achieve (weights as loaded + KV). */
static double process_cpu_seconds(void) {
    struct timespec ts;
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static int time_ar(bench_job *j) {
    const bench_options *o = j->o;
    double c0 = process_cpu_seconds();
    double t0 = emt_now();
    for (long i = 0; i < o->tokens; i++) {
        entmtp_step_result r = { sizeof r };
        entmtp_status st = entmtp_step_ar(j->s, &r);
        if (st) return cli_fail("AR step", st);
    }
    j->ar_step = (emt_now() - t0) / (double)o->tokens;
    j->ar_cpu = (process_cpu_seconds() - c0) / (double)o->tokens;
    emt_session_step_counters(j->s, &j->ar_count);
    const entmtp_model_info *mi = &j->mi;
    double kv_bytes = 2.0 * mi->n_layers * (double)(o->context + o->tokens / 2) * mi->n_kv_heads * mi->head_dim * 4.0;
    j->step_bytes = (double)emt_model_streamed_bytes(j->model) + kv_bytes;
    j->bw = j->step_bytes / j->ar_step / 1e9;
    return 0;
}

static int time_verify(bench_job *j) {
    for (int32_t i = 0; i < j->o->n_sizes; i++) {
        double c0 = process_cpu_seconds();
        entmtp_status st = emt_session_time_verify(j->s, i, (int32_t)j->o->reps, &j->verify[i]);
        if (st) return cli_fail("verify", st);
        j->verify_cpu[i] = (process_cpu_seconds() - c0) / (double)j->o->reps;
    }
    return 0;
}

/* EntMTP vs AR generation on the real model with heads (mode 0 AR, 1 EntMTP). */
static int compare_generation(bench_job *j) {
    const bench_options *o = j->o;
    entmtp_status st;
    entmtp_heads_info hi = { sizeof hi };
    entmtp_heads_get_info(j->heads, &hi);
    /* with --bank (and no --tree): that bank under its default policy, as
     * entmtp generate runs it; else one built-in tree, by default the
     * papers' 64-node GPU tree (on a CPU its verify costs tens of AR steps) */
    const entmtp_bank *bank = j->tbank;
    if (j->tbank && !o->tree) {
        entmtp_policy_kind kind = ENTMTP_POLICY_STATIC;
        entmtp_policy_config pc = { sizeof pc };
        cli_bank_policy_config(bank, 1, &kind, &pc);
        if ((st = entmtp_policy_create(&pc, &j->spec_policy))) return cli_fail("policy", st);
        snprintf(j->spec_drafts, sizeof j->spec_drafts, "bank %s, policy %s", o->bank_path, entmtp_policy_kind_name(pc.kind));
    } else {
        entmtp_bank_params bp = entmtp_bank_default_params();
        bp.max_depth = hi.n_heads;
        const char *tree = o->tree ? o->tree : (hi.kind == ENTMTP_HEADS_HYDRA ? "hydra_default" : "medusa_vicuna_7b_stage2");
        if ((st = entmtp_bank_create(&bp, &j->hbank)) || (st = entmtp_bank_add_builtin(j->hbank, tree, NULL)))
            return cli_fail("bank", st);
        bank = j->hbank;
        snprintf(j->spec_drafts, sizeof j->spec_drafts, "tree %s", tree);
    }
    char chat[4096];
    size_t len = 0;
    const char *text = o->prompt;
    if (entmtp_chat_prompt(j->model, NULL, o->prompt, chat, sizeof chat, &len) == ENTMTP_OK) text = chat;
    for (int mode = 0; mode < 2; mode++) {
        entmtp_session *g = NULL;
        entmtp_session_params gp = entmtp_session_default_params();
        gp.kv_capacity = 1024 < j->mi.context_length ? 1024 : j->mi.context_length;
        gp.prompt_activation_bits = o->prompt_bits;
        gp.step_activation_bits = o->step_bits;
        gp.kv_type = o->kv_type;
        int32_t ptoks[2048], np = 0;
        if ((st = entmtp_session_create(j->model, j->heads, bank, &gp, &g)) || (j->spec_policy && (st = entmtp_policy_set(g, j->spec_policy))) ||
            (st = entmtp_tokenize(j->model, text, -1, ENTMTP_TOKENIZE_ADD_SPECIAL, 1, ptoks, 2048, &np)) ||
            (st = entmtp_session_prefill(g, ptoks, np))) {
            entmtp_session_free(g);
            return cli_fail("prompt", st);
        }
        st = entmtp_generate(g, (int32_t)o->tokens * 4, mode == 0, NULL, NULL);
        entmtp_session_stats gs = { sizeof gs };
        entmtp_session_get_stats(g, &gs);
        if (mode == 1) emt_session_step_counters(g, &j->spec_count);
        entmtp_session_free(g);
        if (st) return cli_fail("generate", st);
        if (mode == 0) j->ar_tps = gs.tokens_per_second;
        else { j->spec_tps = gs.tokens_per_second; j->spec_accept = gs.mean_accept_length; }
    }
    j->have_spec = 1;
    return 0;
}

/* Steps per tree before the timed ones: the first step of a tree records
 * its graph on CUDA, and caches warm up. */
#define TREE_WARMUP_STEPS 2

/* One tree's session: the heads, the bank, the static policy on `tree`,
 * prefilled with the --context tokens; --tokens steps timed after the
 * warm-up. tree -1: the same session timing plain AR steps, the baseline
 * of the trees' ratios (timed alike, unlike the AR figure above, which
 * starts cold after the load). */
static int time_one_tree(bench_job *j, int32_t tree, const int32_t *ctx_tokens, tree_steps *out) {
    const bench_options *o = j->o;
    entmtp_status st;
    entmtp_session_params sp = entmtp_session_default_params();
    const int ar = tree < 0;
    long need = o->context + (o->tokens + TREE_WARMUP_STEPS) * (long)(out->info.depth + 1) + out->info.n_nodes + 8;
    if (need > j->mi.context_length) {
        fprintf(stderr, "entmtp bench: --bank tree '%s': %ld cache rows needed (--context %ld, --tokens %ld), the model holds %d\n",
                out->info.name, need, o->context, o->tokens, (int)j->mi.context_length);
        return 2;
    }
    sp.kv_capacity = (int32_t)need;
    sp.n_stop_tokens = 0;
    sp.prompt_activation_bits = o->prompt_bits;
    sp.step_activation_bits = o->step_bits;
    sp.kv_type = o->kv_type;
    entmtp_session *s = NULL;
    entmtp_policy *pol = NULL;
    entmtp_policy_config pc;
    if ((st = entmtp_session_create(j->model, j->heads, j->tbank, &sp, &s)) ||
        (st = entmtp_policy_config_init(&pc, sizeof pc, ENTMTP_POLICY_STATIC)))
        goto fail;
    pc.static_tree = ar ? 0 : tree;
    if ((st = entmtp_policy_create(&pc, &pol)) || (st = entmtp_policy_set(s, pol)) ||
        (st = entmtp_session_prefill(s, ctx_tokens, (int32_t)o->context)))
        goto fail;
    long accepted = 0;
    double t0 = 0;
    for (long i = 0; i < TREE_WARMUP_STEPS + o->tokens; i++) {
        if (i == TREE_WARMUP_STEPS) {
            emt_session_reset_step_counters(s); /* the counts of the timed steps alone */
            t0 = emt_now();
        }
        entmtp_step_result r = { sizeof r };
        if ((st = ar ? entmtp_step_ar(s, &r) : entmtp_step(s, 0, &r))) goto fail;
        if (i >= TREE_WARMUP_STEPS) accepted += r.accept_length;
    }
    out->seconds = (emt_now() - t0) / (double)o->tokens;
    out->accepted = (double)accepted / (double)o->tokens;
    emt_session_step_counters(s, &out->count);
fail:
    entmtp_session_free(s); /* before the policy it borrows */
    entmtp_policy_free(pol);
    return st ? cli_fail(out->info.name, st) : 0;
}

/* --bank: every tree of the bank in turn. */
static int time_tree_steps(bench_job *j) {
    const bench_options *o = j->o;
    entmtp_status st;
    j->n_trees = entmtp_bank_size(j->tbank);
    j->trees = calloc((size_t)(j->n_trees > 0 ? j->n_trees : 1), sizeof *j->trees);
    int32_t *ctx_tokens = context_tokens(j);
    if (!j->trees || !ctx_tokens) {
        free(ctx_tokens);
        return cli_fail("bench", ENTMTP_ERR_OUT_OF_MEMORY);
    }
    j->tree_ar = (tree_steps){ .info = { sizeof j->tree_ar.info, "AR", 1, 0, 0, 0, 0, 0 } };
    int rc = time_one_tree(j, -1, ctx_tokens, &j->tree_ar);
    for (int32_t t = 0; t < j->n_trees && !rc; t++) {
        j->trees[t].info = (entmtp_tree_info){ sizeof j->trees[t].info };
        if ((st = entmtp_bank_tree_info(j->tbank, t, &j->trees[t].info))) rc = cli_fail(o->bank_path, st);
        else rc = time_one_tree(j, t, ctx_tokens, &j->trees[t]);
        if (!rc && !o->json) fprintf(stderr, "entmtp bench: tree %d/%d (%s) timed\n", t + 1, j->n_trees, j->trees[t].info.name);
    }
    free(ctx_tokens);
    return rc;
}

static const char *device_name(const bench_job *j) { return j->mi.backend == ENTMTP_BACKEND_CUDA ? "cuda" : "cpu"; }

/* Per-step means of a session's step counters, as a JSON object (null
 * counts on a backend that counts nothing). */
static void json_counters(FILE *f, const char *key, const emt_step_counters *c) {
    double n = c->n_steps > 0 ? (double)c->n_steps : 1;
    fprintf(f, ",\"%s\":{\"steps\":%lld,\"host_seconds\":%.7f", key, (long long)c->n_steps, c->host_seconds / n);
    if (c->counted)
        fprintf(f, ",\"launches\":%.2f,\"graph_launches\":%.2f,\"syncs\":%.2f,\"d2h_copies\":%.2f,\"d2h_bytes\":%.1f,"
                   "\"h2d_copies\":%.2f,\"h2d_bytes\":%.1f",
                (double)c->device.launches / n, (double)c->device.graph_launches / n, (double)c->device.syncs / n,
                (double)c->device.d2h_copies / n, (double)c->device.d2h_bytes / n, (double)c->device.h2d_copies / n,
                (double)c->device.h2d_bytes / n);
    if (c->counted)
        fprintf(f, ",\"replayed_steps\":%lld,\"replayed_host_seconds\":%.7f", (long long)c->replayed_steps,
                c->replayed_steps > 0 ? c->replayed_host_seconds / (double)c->replayed_steps : 0.0);
    fprintf(f, "}");
}

static void print_counters(const char *what, const emt_step_counters *c) {
    double n = c->n_steps > 0 ? (double)c->n_steps : 1;
    if (!c->counted) {
        printf("%-28s host time %.1f us (all work is host work on the CPU backend)\n", what, 1e6 * c->host_seconds / n);
        return;
    }
    printf("%-28s %.1f launches + %.2f graph launches, %.1f syncs, %.1f device-to-host copies (%.0f bytes), "
           "%.1f host-to-device (%.0f bytes), host time %.1f us\n",
           what, (double)c->device.launches / n, (double)c->device.graph_launches / n, (double)c->device.syncs / n,
           (double)c->device.d2h_copies / n,
           (double)c->device.d2h_bytes / n, (double)c->device.h2d_copies / n, (double)c->device.h2d_bytes / n,
           1e6 * c->host_seconds / n);
    if (c->replayed_steps > 0)
        printf("%-28s %lld of %lld steps replayed a step graph: host time %.1f us each\n", "", (long long)c->replayed_steps,
               (long long)c->n_steps, 1e6 * c->replayed_host_seconds / (double)c->replayed_steps);
}

/* s as a JSON string (cli_json_string) */
static void json_string(FILE *f, const char *s) { cli_json_string(f, s, strlen(s)); }

static void write_json(const bench_job *j, FILE *f) {
    const bench_options *o = j->o;
    fputs("{\"model\":", f);
    json_string(f, j->mi.name);
    fprintf(f, ",\"backend\":\"%s\",\"params\":%lld,\"context\":%ld,"
               "\"copy_bandwidth_gbs\":%.3f,\"ar_step_seconds\":%.6f,\"ar_tokens_per_second\":%.3f,"
               "\"ar_step_cpu_seconds\":%.6f,\"ar_step_bytes\":%.0f,\"ar_bandwidth_gbs\":%.3f,\"ar_bandwidth_fraction\":%.4f,"
               "\"host_seconds_per_step\":%.7f,\"prefill_tokens_per_second\":%.3f,\"kernels\":\"%s\",\"verify\":[",
            device_name(j), (long long)j->mi.n_params, o->context, j->copy_gbs, j->ar_step,
            1.0 / j->ar_step, j->ar_cpu, j->step_bytes, j->bw, j->copy_gbs > 0 ? j->bw / j->copy_gbs : 0,
            j->ar_count.host_seconds / (double)(j->ar_count.n_steps > 0 ? j->ar_count.n_steps : 1),
            (double)o->context / j->prefill_s, emt_model_kernels(j->model));
    for (int32_t i = 0; i < o->n_sizes; i++)
        fprintf(f, "%s{\"nodes\":%d,\"seconds\":%.6f,\"ratio_to_ar\":%.4f,\"cpu_seconds\":%.6f,\"cpu_ratio_to_ar\":%.4f}",
                i ? "," : "", o->sizes[i], j->verify[i], j->verify[i] / j->ar_step, j->verify_cpu[i],
                j->ar_cpu > 0 ? j->verify_cpu[i] / j->ar_cpu : 0);
    fprintf(f, "]");
    json_counters(f, "ar_step", &j->ar_count);
    if (j->have_spec) json_counters(f, "entmtp_step", &j->spec_count);
    if (j->have_spec) {
        fprintf(f, ",\"entmtp_tokens_per_second\":%.3f,\"entmtp_mean_accept_length\":%.4f,\"ar_generate_tokens_per_second\":%.3f"
                   ",\"entmtp_drafts\":",
                j->spec_tps, j->spec_accept, j->ar_tps);
        json_string(f, j->spec_drafts);
    }
    if (j->trees) {
        fprintf(f, ",\"tree_ar_step_seconds\":%.9g", j->tree_ar.seconds);
        json_counters(f, "tree_ar_counters", &j->tree_ar.count);
        fprintf(f, ",\"tree_steps\":[");
        for (int32_t t = 0; t < j->n_trees; t++) {
            const tree_steps *ts = &j->trees[t];
            double bank_accept = ts->info.mean_accept_length;
            fprintf(f, "%s{\"index\":%d,\"name\":", t ? "," : "", t);
            json_string(f, ts->info.name);
            fprintf(f, ",\"nodes\":%d,\"depth\":%d,\"step_seconds\":%.9g,\"ratio_to_ar\":%.4f,"
                       "\"accepted_here\":%.4f,\"bank_mean_accept_length\":%.4f,\"estimated_speedup\":%.4f",
                    ts->info.n_nodes, ts->info.depth, ts->seconds,
                    ts->seconds / j->tree_ar.seconds, ts->accepted, bank_accept,
                    bank_accept > 0 ? bank_accept * j->tree_ar.seconds / ts->seconds : 0.0);
            json_counters(f, "counters", &ts->count);
            fprintf(f, "}");
        }
        fprintf(f, "]");
    }
    fprintf(f, "}\n");
}

/* The figures as JSON (--json) and as data for the plot (--plot). */
static int write_outputs(const bench_job *j) {
    const bench_options *o = j->o;
    if (o->json) write_json(j, stdout);
    if (!o->plot || o->json) return 0;
    char tmp[256];
    snprintf(tmp, sizeof tmp, "%s.json", o->plot);
    FILE *f = fopen(tmp, "w");
    if (!f) { perror(tmp); return 1; }
    write_json(j, f);
    fclose(f);
    cli_plot("bench", "plot_bench.py", o->plot_script, tmp, o->plot);
    return 0;
}

/* A device's counts per step of c (nothing on a backend that counts nothing). */
static void print_step_counts(const char *what, const emt_step_counters *c) {
    if (!c->counted) return;
    double n = c->n_steps > 0 ? (double)c->n_steps : 1;
    printf("   %4s  %.1f launches + %.2f graph launches, %.1f syncs, %.1f device-to-host copies per step\n", what,
           (double)c->device.launches / n, (double)c->device.graph_launches / n, (double)c->device.syncs / n,
           (double)c->device.d2h_copies / n);
}

/* --bank: the step per tree, and EntMTP's speed with the bank's accept
 * lengths (measured on the real model; the estimate ignores nothing but
 * the policy's own switching). */
static void print_tree_steps(const bench_job *j) {
    const double ar = j->tree_ar.seconds;
    printf("EntMTP step by bank tree (static policy on each tree; %d warm-up + %ld timed steps from the --context prefix;\n"
           "the AR step timed the same way: %.3f ms):\n"
           "   tree  %-12s nodes depth  ms/step  x AR step  accepted here  bank accept  est. x AR  host us/step\n",
           TREE_WARMUP_STEPS, j->o->tokens, ar * 1e3, "name");
    print_step_counts("AR", &j->tree_ar.count);
    int32_t best = -1;
    double best_x = 0;
    for (int32_t t = 0; t < j->n_trees; t++) {
        const tree_steps *ts = &j->trees[t];
        double acc = ts->info.mean_accept_length, x = acc > 0 ? acc * ar / ts->seconds : 0;
        if (x > best_x) { best_x = x; best = t; }
        double n = ts->count.n_steps > 0 ? (double)ts->count.n_steps : 1;
        printf("   %4d  %-12s %5d %5d %8.3f %10.2f %14.2f %12.2f %10.2f %12.1f\n", t, ts->info.name, ts->info.n_nodes,
               ts->info.depth, ts->seconds * 1e3, ts->seconds / ar, ts->accepted, acc, x,
               1e6 * ts->count.host_seconds / n);
        print_step_counts("", &ts->count);
    }
    if (best >= 0)
        printf("with the bank's accept lengths: best static tree %s, EntMTP about %.2fx AR on this device\n",
               j->trees[best].info.name, best_x);
    else
        printf("the bank has no accept lengths: est. x AR needs its trees' mean_accept_length (docs/bank-format.md)\n");
}

static void print_report(const bench_job *j) {
    const bench_options *o = j->o;
    double ar_step = j->ar_step;
    printf("model %s (%lld params) on %s, context %ld tokens\n", j->mi.name, (long long)j->mi.n_params, device_name(j),
           o->context);
    printf("kernels                      %s\n", emt_model_kernels(j->model));
    printf("prompt processing            %8.2f tokens/s  (%ld tokens)\n", (double)o->context / j->prefill_s, o->context);
    printf("memory copy bandwidth        %8.2f GB/s (read+write, %s, measured now)\n", j->copy_gbs,
           j->mi.backend == ENTMTP_BACKEND_CUDA ? "device-to-device copy" : "memcpy");
    printf("AR                           %8.2f tokens/s  (%.2f ms/step)\n", 1.0 / ar_step, ar_step * 1e3);
    printf("bytes per AR step            %8.1f MB (weights as loaded + KV)\n", j->step_bytes / 1e6);
    printf("achieved bandwidth           %8.2f GB/s = %.0f%% of copy bandwidth\n", j->bw,
           j->copy_gbs > 0 ? 100 * j->bw / j->copy_gbs : 0);
    print_counters("per AR step", &j->ar_count);
    if (j->have_spec) print_counters("per EntMTP step", &j->spec_count);
    printf("verify cost by tree size (CPU time: all threads, spinning included):\n"
           "   nodes   ms/verify   x AR step   CPU ms   x AR step CPU\n");
    for (int32_t i = 0; i < o->n_sizes; i++)
        printf("   %5d   %9.2f   %9.2f   %6.2f   %9.2f\n", o->sizes[i], j->verify[i] * 1e3, j->verify[i] / ar_step,
               j->verify_cpu[i] * 1e3, j->ar_cpu > 0 ? j->verify_cpu[i] / j->ar_cpu : 0);
    if (j->have_spec)
        printf("generation: AR %.2f tokens/s, EntMTP %.2f tokens/s (%s; mean accept length %.2f, %.2fx)\n", j->ar_tps,
               j->spec_tps, j->spec_drafts, j->spec_accept, j->ar_tps > 0 ? j->spec_tps / j->ar_tps : 0);
    if (j->trees) print_tree_steps(j);
}

int cmd_bench(int argc, char **argv) {
    bench_options o;
    int rc = parse_options(argc, argv, &o);
    if (rc) return rc == 1 ? 0 : rc;
    bench_job j = { .o = &o };
    if ((rc = load_model(&j)) || (rc = load_drafter(&j))) goto done;
    j.copy_gbs = emt_model_copy_bandwidth(j.model);
    if ((rc = prefilled_session(&j)) || (rc = time_ar(&j)) || (rc = time_verify(&j))) goto done;
    if (o.model_path && o.heads_path && (rc = compare_generation(&j))) goto done;
    if (o.bank_path && (rc = time_tree_steps(&j))) goto done;
    if ((rc = write_outputs(&j))) goto done;
    if (!o.json) print_report(&j);
done:
    bench_job_free(&j);
    return rc;
}
