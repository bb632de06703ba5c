/* entmtp bench: AR speed, memory bandwidth, and tree-verify cost against
 * tree size, all measured in one run; EntMTP vs AR on a real model. */
#include "cli.h"

#include "engine/engine.h"
#include "model/synthetic.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static void usage(FILE *f) {
    fprintf(f,
            "usage: entmtp bench (--synthetic NAME | --model PATH [--heads PATH]) [options]\n"
            "       entmtp bench --suite ...   the paper's Table 1 per task (entmtp bench --suite --help)\n"
            "\n"
            "  --synthetic NAME   random weights at a named shape: llama-7b, smollm2-135m, tiny\n"
            "  --weights W        synthetic weight type: f32 (default) | q4_0\n"
            "  --compute C        native (default: weights in their file type) | f32\n"
            "  --model PATH       a real model (GGUF or HF directory)\n"
            "  --heads PATH       heads for the EntMTP-vs-AR comparison on the real model\n"
            "  --tree NAME        tree for that comparison (default: heads' default)\n"
            "  --prompt TEXT      prompt for that comparison\n"
            "  --context N        tokens in the KV cache while timing (default 256)\n"
            "  --tokens N         AR steps / generated tokens to time (default 32)\n"
            "  --nodes LIST       tree sizes for verify timing (default 1,2,4,8,16,32,64,128)\n"
            "  --reps N           repetitions per verify size (default 5)\n"
            "  --backend B        auto | cpu | cuda;  --threads N   CPU threads\n"
            "  --json             machine-readable output;  --plot FILE.png  verify-cost plot\n"
            "  --plot-script PY   plotting script (default: plot_bench.py installed with entmtp)\n");
}

/* Copy bandwidth of the machine's memory (read + write counted), GB/s. */
static double copy_bandwidth(void) {
    size_t n = (size_t)256 << 20;
    char *a = malloc(n), *b = malloc(n);
    if (!a || !b) { free(a); free(b); return 0; }
    memset(a, 1, n);
    memset(b, 2, n);
    double best = 0;
    for (int r = 0; r < 5; r++) {
        double t0 = emt_now();
        memcpy(b, a, n);
        double dt = emt_now() - t0;
        double gbs = 2.0 * (double)n / dt / 1e9;
        if (gbs > best) best = gbs;
        a[r] = b[n - 1 - (size_t)r]; /* keep the copies observable */
    }
    free(a);
    free(b);
    return best;
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

int cmd_bench(int argc, char **argv) {
    const char *synthetic = NULL, *model_path = NULL, *heads_path = NULL, *tree = NULL;
    const char *plot = NULL, *plot_script = NULL, *prompt = "Write a Python function that returns the n-th Fibonacci number.";
    const char *nodes_list = "1,2,4,8,16,32,64,128";
    emt_dtype synth_type = EMT_F32;
    entmtp_compute_type compute = ENTMTP_COMPUTE_NATIVE;
    long context = 256, tokens = 32, reps = 5, threads = 0;
    int json = 0;
    entmtp_backend backend = ENTMTP_BACKEND_AUTO;
    const char *weights = "f32";
    const cli_option opts[] = {
        { "--synthetic", CLI_STRING, &synthetic },
        { "--model", CLI_STRING, &model_path },
        { "--heads", CLI_STRING, &heads_path },
        { "--tree", CLI_STRING, &tree },
        { "--prompt", CLI_STRING, &prompt },
        CLI_PLOT_OPTIONS(&plot, &plot_script),
        { "--nodes", CLI_STRING, &nodes_list },
        { "--weights", CLI_STRING, &weights },
        { "--compute", CLI_COMPUTE, &compute },
        { "--context", CLI_LONG, &context, 0, 1000000 },
        { "--tokens", CLI_LONG, &tokens, 0, 1000000 },
        { "--reps", CLI_LONG, &reps, 0, 1000000 },
        { "--threads", CLI_LONG, &threads, 0, 1000000 },
        { "--backend", CLI_BACKEND, &backend },
        { "--json", CLI_FLAG, &json },
    };
    int parsed = cli_parse("bench", argc, argv, CLI_TABLE(opts), usage);
    if (parsed) return parsed == 1 ? 0 : parsed;
    if (strcmp(weights, "f32") && strcmp(weights, "q4_0")) {
        fprintf(stderr, "entmtp bench: --weights: '%s' is not f32 or q4_0\n", weights);
        return 2;
    }
    synth_type = weights[0] == 'q' ? EMT_Q4_0 : EMT_F32;
    if (!!synthetic == !!model_path) { fprintf(stderr, "entmtp bench: give exactly one of --synthetic or --model\n"); return 2; }
    if (context < 1 || tokens < 1 || reps < 1) { fprintf(stderr, "entmtp bench: --context, --tokens and --reps must be positive\n"); return 2; }

    int32_t sizes[32], n_sizes = 0;
    {
        char buf[256];
        snprintf(buf, sizeof buf, "%s", nodes_list);
        for (char *t = strtok(buf, ","); t && n_sizes < 32; t = strtok(NULL, ",")) {
            long x = strtol(t, NULL, 10);
            if (x < 1 || x > 150) { fprintf(stderr, "entmtp bench: --nodes: %ld outside [1, 150]\n", x); return 2; }
            sizes[n_sizes++] = (int32_t)x;
        }
    }

    int rc = 1;
    entmtp_status st;
    entmtp_model *model = NULL;
    entmtp_heads *heads = NULL;
    entmtp_bank *bank = NULL, *hbank = NULL;
    entmtp_session *s = NULL;
    entmtp_model_params mp = entmtp_model_default_params();
    mp.backend = backend;
    mp.n_threads = (int32_t)threads;
    mp.compute_type = compute;
    mp.progress = json ? NULL : cli_progress;
    if (synthetic) {
        emt_model_config c;
        if ((st = emt_synthetic_config(synthetic, &c))) return cli_fail("--synthetic", st);
        if ((st = emt_model_create_synthetic(&c, 1234, synth_type, &mp, &model))) return cli_fail(synthetic, st);
    } else if ((st = entmtp_model_load(model_path, &mp, &model))) {
        return cli_fail(model_path, st);
    }
    entmtp_model_info mi = { sizeof mi };
    entmtp_model_get_info(model, &mi);
    double copy_gbs = copy_bandwidth();

    /* a bank with one tree per size */
    if ((st = entmtp_bank_create(NULL, &bank))) { rc = cli_fail("bank", st); goto done; }
    for (int32_t i = 0; i < n_sizes; i++) {
        int32_t ranks[600], lens[200], np = 0;
        char name[32];
        snprintf(name, sizeof name, "n%d", sizes[i]);
        if (!tree_choices(sizes[i], ranks, lens, &np)) { fprintf(stderr, "entmtp bench: cannot build a %d-node tree\n", sizes[i]); goto done; }
        if ((st = entmtp_bank_add_tree(bank, name, ranks, lens, np, NULL))) { rc = cli_fail(name, st); goto done; }
    }
    entmtp_session_params sp = entmtp_session_default_params();
    sp.kv_capacity = (int32_t)(context + tokens + 8) < mi.context_length ? (int32_t)(context + tokens + 8) : mi.context_length;
    sp.n_stop_tokens = 0;
    if ((st = entmtp_session_create(model, NULL, bank, &sp, &s))) { rc = cli_fail("session", st); goto done; }
    int32_t *ctx_tokens = malloc((size_t)context * sizeof *ctx_tokens);
    if (!ctx_tokens) goto done;
    for (long i = 0; i < context; i++) ctx_tokens[i] = (int32_t)((i * 31 + 7) % mi.vocab_size);
    double tp = emt_now();
    st = entmtp_session_prefill(s, ctx_tokens, (int32_t)context);
    double prefill_s = emt_now() - tp;
    free(ctx_tokens);
    if (st) { rc = cli_fail("prefill", st); goto done; }

    /* AR */
    double t0 = emt_now();
    for (long i = 0; i < tokens; i++) {
        entmtp_step_result r = { sizeof r };
        if ((st = entmtp_step_ar(s, &r))) { rc = cli_fail("AR step", st); goto done; }
    }
    double ar_step = (emt_now() - t0) / (double)tokens;
    double kv_bytes = 2.0 * mi.n_layers * (double)(context + tokens / 2) * mi.n_kv_heads * mi.head_dim * 4.0;
    double weight_bytes = (double)emt_model_streamed_bytes(model);
    double step_bytes = weight_bytes + kv_bytes;
    double bw = step_bytes / ar_step / 1e9;

    double verify[32];
    for (int32_t i = 0; i < n_sizes; i++)
        if ((st = emt_session_time_verify(s, i, (int32_t)reps, &verify[i]))) { rc = cli_fail("verify", st); goto done; }

    /* EntMTP vs AR on the real model with heads */
    double spec_tps = 0, spec_accept = 0, ar_tps = 0;
    int have_spec = 0;
    if (model_path && heads_path) {
        if ((st = entmtp_heads_load(model, heads_path, &heads))) { rc = cli_fail(heads_path, st); goto done; }
        entmtp_heads_info hi = { sizeof hi };
        entmtp_heads_get_info(heads, &hi);
        entmtp_bank_params bp = entmtp_bank_default_params();
        bp.max_depth = hi.n_heads;
        if ((st = entmtp_bank_create(&bp, &hbank)) ||
            (st = entmtp_bank_add_builtin(hbank, tree ? tree : (hi.kind == ENTMTP_HEADS_HYDRA ? "hydra_default" : "medusa_vicuna_7b_stage2"), NULL))) {
            rc = cli_fail("bank", st);
            goto done;
        }
        for (int mode = 0; mode < 2; mode++) {
            entmtp_session *g = NULL;
            entmtp_session_params gp = entmtp_session_default_params();
            gp.kv_capacity = 1024 < mi.context_length ? 1024 : mi.context_length;
            if ((st = entmtp_session_create(model, heads, hbank, &gp, &g))) { rc = cli_fail("session", st); goto done; }
            char chat[4096];
            size_t len = 0;
            const char *text = prompt;
            if (entmtp_chat_prompt(model, NULL, prompt, chat, sizeof chat, &len) == ENTMTP_OK) text = chat;
            int32_t ptoks[2048], np = 0;
            if ((st = entmtp_tokenize(model, text, -1, 0, 1, ptoks, 2048, &np)) ||
                (st = entmtp_session_prefill(g, ptoks, np))) { entmtp_session_free(g); rc = cli_fail("prompt", st); goto done; }
            st = entmtp_generate(g, (int32_t)tokens * 4, mode == 0, NULL, NULL);
            entmtp_session_stats gs = { sizeof gs };
            entmtp_session_get_stats(g, &gs);
            entmtp_session_free(g);
            if (st) { rc = cli_fail("generate", st); goto done; }
            if (mode == 0) ar_tps = gs.tokens_per_second;
            else { spec_tps = gs.tokens_per_second; spec_accept = gs.mean_accept_length; }
        }
        have_spec = 1;
    }

    const char *dev = mi.backend == ENTMTP_BACKEND_CUDA ? "cuda" : "cpu";
    if (json || plot) {
        FILE *f = stdout;
        char tmp[256];
        if (!json) {
            snprintf(tmp, sizeof tmp, "%s.json", plot);
            f = fopen(tmp, "w");
            if (!f) { perror(tmp); goto done; }
        }
        fprintf(f, "{\"model\":\"%s\",\"backend\":\"%s\",\"params\":%lld,\"context\":%ld,"
                   "\"copy_bandwidth_gbs\":%.3f,\"ar_step_seconds\":%.6f,\"ar_tokens_per_second\":%.3f,"
                   "\"ar_step_bytes\":%.0f,\"ar_bandwidth_gbs\":%.3f,\"ar_bandwidth_fraction\":%.4f,"
                   "\"host_seconds_per_step\":null,\"prefill_tokens_per_second\":%.3f,\"kernels\":\"%s\",\"verify\":[",
                mi.name, dev, (long long)mi.n_params, context, copy_gbs, ar_step, 1.0 / ar_step, step_bytes,
                bw, copy_gbs > 0 ? bw / copy_gbs : 0, (double)context / prefill_s, emt_model_kernels(model));
        for (int32_t i = 0; i < n_sizes; i++)
            fprintf(f, "%s{\"nodes\":%d,\"seconds\":%.6f,\"ratio_to_ar\":%.4f}", i ? "," : "", sizes[i],
                    verify[i], verify[i] / ar_step);
        fprintf(f, "]");
        if (have_spec)
            fprintf(f, ",\"entmtp_tokens_per_second\":%.3f,\"entmtp_mean_accept_length\":%.4f,\"ar_generate_tokens_per_second\":%.3f",
                    spec_tps, spec_accept, ar_tps);
        fprintf(f, "}\n");
        if (f != stdout) {
            fclose(f);
            cli_plot("bench", "plot_bench.py", plot_script, tmp, plot);
        }
    }
    if (!json) {
        printf("model %s (%lld params) on %s, context %ld tokens\n", mi.name, (long long)mi.n_params, dev, context);
        printf("kernels                      %s\n", emt_model_kernels(model));
        printf("prompt processing            %8.2f tokens/s  (%ld tokens)\n", (double)context / prefill_s, context);
        printf("memory copy bandwidth        %8.2f GB/s (read+write, measured now)\n", copy_gbs);
        printf("AR                           %8.2f tokens/s  (%.2f ms/step)\n", 1.0 / ar_step, ar_step * 1e3);
        printf("bytes per AR step            %8.1f MB (weights as loaded + KV)\n", step_bytes / 1e6);
        printf("achieved bandwidth           %8.2f GB/s = %.0f%% of copy bandwidth\n", bw, copy_gbs > 0 ? 100 * bw / copy_gbs : 0);
        printf("host time per step           n/a on the CPU backend (all work is host work)\n");
        printf("verify cost by tree size:\n   nodes   ms/verify   x AR step\n");
        for (int32_t i = 0; i < n_sizes; i++) printf("   %5d   %9.2f   %9.2f\n", sizes[i], verify[i] * 1e3, verify[i] / ar_step);
        if (have_spec)
            printf("generation: AR %.2f tokens/s, EntMTP %.2f tokens/s (mean accept length %.2f, %.2fx)\n",
                   ar_tps, spec_tps, spec_accept, ar_tps > 0 ? spec_tps / ar_tps : 0);
    }
    rc = 0;
done:
    entmtp_session_free(s);
    entmtp_bank_free(bank);
    entmtp_bank_free(hbank);
    entmtp_heads_free(heads);
    entmtp_model_free(model);
    return rc;
}
