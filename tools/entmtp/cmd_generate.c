/* entmtp generate: text in, text out, with EntMTP or plain AR. */
#include "cli.h"

#include "bank/tree.h"

#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static void usage(FILE *f) {
    fprintf(f,
            "usage: entmtp generate --model PATH [options]\n"
            "\n"
            "  --model PATH          GGUF file or Hugging Face directory\n"
            "  --heads PATH          Medusa/Hydra heads (.safetensors); default: heads shipped\n"
            "                        for the model (heads/<model>.{hydra,medusa}.safetensors), else AR\n"
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
            "  --max-tokens N        tokens to generate (default 128)\n"
            "  --temperature T       0 = greedy (default); > 0 samples with typical acceptance\n"
            "  --epsilon E --delta D typical acceptance (defaults 0.09, 0.3)\n"
            "  --seed S              RNG seed for T > 0\n"
            "  --ar                  plain autoregressive decoding\n"
            "  --backend B           auto | cpu | cuda (default auto)\n"
            "  --threads N           CPU threads (default: all cores)\n"
            "  --compute C           native (weights in their file type, default) | f32\n"
            "  --kv N                KV cache capacity in tokens\n"
            "  --json                print one JSON object instead of text + summary\n"
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

static void json_string(FILE *f, const char *s, size_t n) {
    fputc('"', f);
    for (size_t i = 0; i < n; i++) {
        unsigned char ch = (unsigned char)s[i];
        if (ch == '"' || ch == '\\') fprintf(f, "\\%c", ch);
        else if (ch == '\n') fputs("\\n", f);
        else if (ch == '\r') fputs("\\r", f);
        else if (ch == '\t') fputs("\\t", f);
        else if (ch < 0x20) fprintf(f, "\\u%04x", ch);
        else fputc(ch, f);
    }
    fputc('"', f);
}

static int parse_int(const char *s, long lo, long hi, long *out) {
    char *end;
    long v = strtol(s, &end, 10);
    if (!*s || *end || v < lo || v > hi) return 0;
    *out = v;
    return 1;
}

static int parse_float(const char *s, float *out) {
    char *end;
    float v = strtof(s, &end);
    if (!*s || *end) return 0;
    *out = v;
    return 1;
}

int cmd_generate(int argc, char **argv) {
    const char *model_path = NULL, *heads_path = NULL, *bank_path = NULL, *trees = NULL;
    const char *policy_name = NULL, *prompt = NULL, *prompt_file = NULL, *system_prompt = NULL;
    const char *thresholds = NULL, *dump_path = NULL;
    long max_tokens = 128, threads = 0, kv = 0, static_tree = 0;
    unsigned long long seed = 0x5eed;
    float temperature = 0, epsilon = 0.09f, delta = 0.3f, tau_on = -1, tau_off = -1, ucb_expl = -1;
    int ar = 0, json = 0, raw = 0, quiet = 0, no_heads = 0;
    entmtp_backend backend = ENTMTP_BACKEND_AUTO;
    entmtp_compute_type compute = ENTMTP_COMPUTE_NATIVE;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        const char *v = i + 1 < argc ? argv[i + 1] : NULL;
#define NEED_VALUE() do { if (!v) { fprintf(stderr, "entmtp generate: %s needs a value\n", a); return 2; } i++; } while (0)
        if (!strcmp(a, "--help") || !strcmp(a, "-h")) { usage(stdout); return 0; }
        else if (!strcmp(a, "--model")) { NEED_VALUE(); model_path = v; }
        else if (!strcmp(a, "--heads")) { NEED_VALUE(); heads_path = v; }
        else if (!strcmp(a, "--no-heads")) no_heads = 1;
        else if (!strcmp(a, "--bank")) { NEED_VALUE(); bank_path = v; }
        else if (!strcmp(a, "--tree")) { NEED_VALUE(); trees = v; }
        else if (!strcmp(a, "--policy")) { NEED_VALUE(); policy_name = v; }
        else if (!strcmp(a, "--thresholds")) { NEED_VALUE(); thresholds = v; }
        else if (!strcmp(a, "--prompt")) { NEED_VALUE(); prompt = v; }
        else if (!strcmp(a, "--prompt-file")) { NEED_VALUE(); prompt_file = v; }
        else if (!strcmp(a, "--dump-logits")) { NEED_VALUE(); dump_path = v; ar = 1; }
        else if (!strcmp(a, "--system")) { NEED_VALUE(); system_prompt = v; }
        else if (!strcmp(a, "--raw")) raw = 1;
        else if (!strcmp(a, "--ar")) ar = 1;
        else if (!strcmp(a, "--json")) json = 1;
        else if (!strcmp(a, "--quiet")) quiet = 1;
        else if (!strcmp(a, "--max-tokens") || !strcmp(a, "--threads") || !strcmp(a, "--kv") ||
                 !strcmp(a, "--static-tree")) {
            NEED_VALUE();
            long *dst = !strcmp(a, "--max-tokens") ? &max_tokens : !strcmp(a, "--threads") ? &threads
                        : !strcmp(a, "--kv") ? &kv : &static_tree;
            if (!parse_int(v, 0, INT_MAX, dst)) {
                fprintf(stderr, "entmtp generate: %s: '%s' is not a non-negative integer\n", a, v);
                return 2;
            }
        } else if (!strcmp(a, "--seed")) {
            NEED_VALUE();
            if (!cli_arg_seed("generate", v, &seed)) return 2;
        } else if (!strcmp(a, "--temperature") || !strcmp(a, "--epsilon") || !strcmp(a, "--delta") ||
                   !strcmp(a, "--tau-on") || !strcmp(a, "--tau-off") || !strcmp(a, "--ucb-exploration")) {
            NEED_VALUE();
            float *dst = !strcmp(a, "--temperature") ? &temperature : !strcmp(a, "--epsilon") ? &epsilon
                         : !strcmp(a, "--delta") ? &delta : !strcmp(a, "--tau-on") ? &tau_on
                         : !strcmp(a, "--tau-off") ? &tau_off : &ucb_expl;
            if (!parse_float(v, dst)) { fprintf(stderr, "entmtp generate: %s: '%s' is not a number\n", a, v); return 2; }
        } else if (!strcmp(a, "--compute")) {
            NEED_VALUE();
            if (!cli_arg_compute("generate", v, &compute)) return 2;
        } else if (!strcmp(a, "--backend")) {
            NEED_VALUE();
            if (!cli_arg_backend("generate", v, &backend)) return 2;
        } else {
            fprintf(stderr, "entmtp generate: unknown option '%s'\n", a);
            usage(stderr);
            return 2;
        }
#undef NEED_VALUE
    }
    if (!model_path) { fprintf(stderr, "entmtp generate: --model is required\n"); usage(stderr); return 2; }
    if (prompt && prompt_file) { fprintf(stderr, "entmtp generate: give --prompt or --prompt-file, not both\n"); return 2; }
    if (bank_path && trees) { fprintf(stderr, "entmtp generate: give --bank or --tree, not both\n"); return 2; }
    if (max_tokens <= 0) { fprintf(stderr, "entmtp generate: --max-tokens must be positive\n"); return 2; }

    int rc = 1;
    entmtp_status st;
    entmtp_model *model = NULL;
    entmtp_heads *heads = NULL;
    entmtp_bank *bank = NULL;
    entmtp_policy *policy = NULL;
    entmtp_session *session = NULL;
    char *file_text = NULL, *chat = NULL, *text = NULL;
    int32_t *ptoks = NULL;
    stream_ctx sc = { 0 };
    char shipped[4096], shipped_bank[4200];

    if (prompt_file) {
        FILE *f = fopen(prompt_file, "rb");
        if (!f) { perror(prompt_file); return 1; }
        size_t cap = 1 << 16, len = 0;
        file_text = malloc(cap + 1);
        size_t got;
        while (file_text && (got = fread(file_text + len, 1, cap - len, f)) > 0) {
            len += got;
            if (len == cap) {
                char *nb = realloc(file_text, 2 * cap + 1);
                if (!nb) { free(file_text); file_text = NULL; break; }
                file_text = nb;
                cap *= 2;
            }
        }
        fclose(f);
        if (!file_text) { fprintf(stderr, "entmtp generate: out of memory\n"); return 1; }
        file_text[len] = '\0';
        prompt = file_text;
    }
    if (!prompt) prompt = "Write a Python function that checks whether a number is prime.";

    entmtp_model_params mp = entmtp_model_default_params();
    mp.backend = backend;
    mp.n_threads = (int32_t)threads;
    mp.compute_type = compute;
    mp.progress = json ? NULL : cli_progress;
    if ((st = entmtp_model_load(model_path, &mp, &model))) { rc = cli_fail(model_path, st); goto done; }

    if (!ar && !no_heads && !heads_path && find_shipped_heads(model_path, shipped, sizeof shipped)) {
        heads_path = shipped;
        /* a bank searched for the shipped heads sits next to them: X.bank.json */
        size_t n = strlen(shipped);
        if (!bank_path && !trees && n > 12 && n + 10 < sizeof shipped_bank && !strcmp(shipped + n - 12, ".safetensors")) {
            snprintf(shipped_bank, sizeof shipped_bank, "%.*s.bank.json", (int)(n - 12), shipped);
            if (access(shipped_bank, R_OK) == 0) bank_path = shipped_bank;
        }
    }
    if (!ar && !no_heads && heads_path) {
        if ((st = entmtp_heads_load(model, heads_path, &heads))) { rc = cli_fail(heads_path, st); goto done; }
    }
    if (!ar && !no_heads && !heads && !json)
        fprintf(stderr, "entmtp generate: no heads given (--heads) or shipped for this model: decoding plain AR\n");
    entmtp_heads_info hi = { sizeof hi };
    if (heads) entmtp_heads_get_info(heads, &hi);
    if (heads) {
        entmtp_bank_params bp = entmtp_bank_default_params();
        bp.max_depth = hi.n_heads;
        if (bank_path) {
            if ((st = entmtp_bank_load(bank_path, &bp, &bank))) { rc = cli_fail(bank_path, st); goto done; }
        } else {
            if ((st = entmtp_bank_create(&bp, &bank))) { rc = cli_fail("bank", st); goto done; }
            const char *list = trees ? trees : (hi.kind == ENTMTP_HEADS_HYDRA ? "hydra_default" : "medusa_vicuna_7b_stage2");
            char buf[1024];
            snprintf(buf, sizeof buf, "%s", list);
            for (char *tok = strtok(buf, ","); tok; tok = strtok(NULL, ",")) {
                if ((st = entmtp_bank_add_builtin(bank, tok, NULL))) { rc = cli_fail(tok, st); goto done; }
            }
        }
        entmtp_policy_kind kind = ENTMTP_POLICY_STATIC;
        entmtp_policy_config pc = { sizeof pc };
        int from_bank = 0;
        if (policy_name) {
            if ((st = entmtp_policy_kind_from_name(policy_name, &kind)) || kind == ENTMTP_POLICY_CUSTOM) {
                fprintf(stderr, "entmtp generate: --policy: '%s' is not static, ladder, hysteresis, ucb, throughput or dynamic\n", policy_name);
                rc = 2;
                goto done;
            }
            from_bank = entmtp_bank_policy_config(bank, kind, &pc) == ENTMTP_OK;
        } else if (entmtp_bank_default_policy(bank, &kind) == ENTMTP_OK) {
            /* the policy the bank's search calibrated best */
            from_bank = entmtp_bank_policy_config(bank, kind, &pc) == ENTMTP_OK;
            policy_name = entmtp_policy_kind_name(kind);
        }
        if (!from_bank) pc = entmtp_policy_default_config(kind);
        int32_t n_trees = entmtp_bank_size(bank);
        if (kind == ENTMTP_POLICY_STATIC && (static_tree || !from_bank)) pc.static_tree = (int32_t)static_tree;
        if (kind == ENTMTP_POLICY_HYSTERESIS) {
            if (!from_bank) { pc.conservative_tree = 0; pc.aggressive_tree = n_trees - 1; }
            if (tau_on >= 0) pc.tau_on = tau_on;
            if (tau_off >= 0) pc.tau_off = tau_off;
        }
        if (kind == ENTMTP_POLICY_UCB && ucb_expl >= 0) pc.ucb_exploration = ucb_expl;
        float threshold_list[64];
        if (kind == ENTMTP_POLICY_LADDER && thresholds) {
            char buf[1024];
            snprintf(buf, sizeof buf, "%s", thresholds);
            int32_t max_thresholds = entmtp_limit(ENTMTP_LIMIT_MAX_LADDER) - 1;
            if (max_thresholds > 64) max_thresholds = 64;
            pc.n_thresholds = 0;
            pc.thresholds = threshold_list;
            pc.ladder_trees = NULL;
            for (char *tok = strtok(buf, ","); tok; tok = strtok(NULL, ",")) {
                if (pc.n_thresholds >= max_thresholds || !parse_float(tok, &threshold_list[pc.n_thresholds])) {
                    fprintf(stderr, "entmtp generate: --thresholds: bad list '%s'\n", thresholds);
                    rc = 2;
                    goto done;
                }
                pc.n_thresholds++;
            }
        }
        if ((st = entmtp_policy_create(&pc, &policy))) { rc = cli_fail("policy", st); goto done; }
    }

    entmtp_session_params sp = entmtp_session_default_params();
    sp.kv_capacity = (int32_t)kv;
    sp.temperature = temperature;
    sp.epsilon = epsilon;
    sp.delta = delta;
    sp.seed = seed;
    if ((st = entmtp_session_create(model, heads, bank, &sp, &session))) { rc = cli_fail("session", st); goto done; }
    if (policy && (st = entmtp_policy_set(session, policy))) { rc = cli_fail("policy", st); goto done; }

    const char *input = prompt;
    if (!raw) {
        size_t need = 0;
        st = entmtp_chat_prompt(model, system_prompt, prompt, NULL, 0, &need);
        if (st == ENTMTP_ERR_BUFFER_TOO_SMALL || st == ENTMTP_OK) {
            chat = malloc(need + 1);
            if (!chat || (st = entmtp_chat_prompt(model, system_prompt, prompt, chat, need + 1, &need))) {
                rc = cli_fail("chat template", st);
                goto done;
            }
            input = chat;
        } else if (st != ENTMTP_ERR_UNSUPPORTED) {
            rc = cli_fail("chat template", st);
            goto done;
        } else { /* announced, never silent (docs/models.md: plain fallback) */
            fprintf(stderr, "entmtp: %s; using the plain prompt (the message as is)\n", entmtp_last_error());
        }
    }
    int32_t n_ptoks = 0;
    st = entmtp_tokenize(model, input, -1, 0, 1, NULL, 0, &n_ptoks);
    if (st != ENTMTP_ERR_BUFFER_TOO_SMALL && st != ENTMTP_OK) { rc = cli_fail("tokenize", st); goto done; }
    ptoks = malloc(((size_t)n_ptoks + 1) * sizeof *ptoks);
    if (!ptoks || (st = entmtp_tokenize(model, input, -1, 0, 1, ptoks, n_ptoks + 1, &n_ptoks))) {
        rc = cli_fail("tokenize", st);
        goto done;
    }
    if ((st = entmtp_session_prefill(session, ptoks, n_ptoks))) { rc = cli_fail("prefill", st); goto done; }

    sc.model = model;
    sc.cap = (int32_t)max_tokens;
    sc.gen = malloc((size_t)max_tokens * sizeof *sc.gen);
    sc.echo = !json && !quiet;
    if (!sc.gen) { fprintf(stderr, "entmtp generate: out of memory\n"); goto done; }
    if (dump_path) {
        FILE *df = fopen(dump_path, "wb");
        if (!df) { perror(dump_path); goto done; }
        st = ENTMTP_OK;
        for (long i = 0; i < max_tokens && st == ENTMTP_OK; i++) {
            const float *lg;
            int32_t nv;
            entmtp_session_logits(session, &lg, &nv);
            fwrite(lg, sizeof(float), (size_t)nv, df);
            entmtp_step_result r = { sizeof r };
            st = entmtp_step_ar(session, &r);
            if (r.n_tokens) on_tokens(r.tokens, r.n_tokens, &sc);
            if (r.stopped) break;
        }
        fclose(df);
    } else {
        st = entmtp_generate(session, (int32_t)max_tokens, ar || !heads, on_tokens, &sc);
    }
    if (st != ENTMTP_OK && st != ENTMTP_ERR_KV_FULL) { rc = cli_fail("generate", st); goto done; }
    if (st == ENTMTP_ERR_KV_FULL) fprintf(stderr, "entmtp generate: stopped: %s\n", entmtp_last_error());

    entmtp_session_stats stats = { sizeof stats };
    entmtp_session_get_stats(session, &stats);
    size_t text_len = 0;
    /* the text shows what was generated, without a final stop token */
    int32_t n_text = sc.n_gen;
    if (n_text > 0 && entmtp_token_is_eog(model, sc.gen[n_text - 1])) n_text--;
    text = decode(model, sc.gen, n_text, &text_len);
    entmtp_model_info mi = { sizeof mi };
    entmtp_model_get_info(model, &mi);
    const char *policy_label = policy ? entmtp_policy_kind_name(entmtp_policy_get_kind(policy)) : "none";
    int32_t n_trees = bank ? entmtp_bank_size(bank) : 0;
    if (json) {
        printf("{\"tokens\":[");
        for (int32_t i = 0; i < sc.n_gen; i++) printf(i ? ",%d" : "%d", sc.gen[i]);
        printf("],\"prompt_ids\":[");
        for (int32_t i = 0; i < n_ptoks; i++) printf(i ? ",%d" : "%d", ptoks[i]);
        printf("],\"text\":");
        json_string(stdout, text ? text : "", text ? text_len : 0);
        printf(",\"prompt_tokens\":%d,\"steps\":%lld,\"mean_accept_length\":%.4f,"
               "\"tokens_per_second\":%.3f,\"prefill_seconds\":%.4f,\"decode_seconds\":%.4f,"
               "\"mode\":\"%s\",\"policy\":\"%s\",\"backend\":\"%s\",\"tree_usage\":{",
               n_ptoks, (long long)stats.n_steps, stats.mean_accept_length, stats.tokens_per_second,
               stats.prefill_seconds, stats.decode_seconds, (ar || !heads) ? "ar" : "entmtp",
               policy_label, mi.backend == ENTMTP_BACKEND_CUDA ? "cuda" : "cpu");
        int first = 1;
        for (int32_t k = 0; k < n_trees; k++) {
            entmtp_tree_info ti = { sizeof ti };
            entmtp_bank_tree_info(bank, k, &ti);
            printf("%s", first ? "" : ",");
            json_string(stdout, ti.name, strlen(ti.name));
            printf(":%lld", (long long)entmtp_session_tree_usage(session, k));
            first = 0;
        }
        printf("}}\n");
    } else {
        if (sc.echo) {
            if (text && text_len > sc.printed) fwrite(text + sc.printed, 1, text_len - sc.printed, stdout);
            printf("\n");
        } else if (!quiet && text) {
            fwrite(text, 1, text_len, stdout);
            printf("\n");
        }
        fprintf(stderr, "\n-- %s on %s: %d prompt tokens, %lld generated in %lld steps, mean accept length %.3f, %.2f tokens/s\n",
                (ar || !heads) ? "AR" : "EntMTP", mi.backend == ENTMTP_BACKEND_CUDA ? "cuda" : "cpu",
                n_ptoks, (long long)stats.n_generated, (long long)stats.n_steps,
                stats.mean_accept_length, stats.tokens_per_second);
        if (heads && !ar) {
            fprintf(stderr, "-- heads: %s (%s, %d heads)%s%s; policy %s; tree usage:", heads_path,
                    hi.kind == ENTMTP_HEADS_HYDRA ? "hydra" : "medusa", hi.n_heads, bank_path ? "; bank " : "",
                    bank_path ? bank_path : "", policy_label);
            for (int32_t k = 0; k < n_trees; k++) {
                entmtp_tree_info ti = { sizeof ti };
                entmtp_bank_tree_info(bank, k, &ti);
                fprintf(stderr, " %s=%lld", ti.name, (long long)entmtp_session_tree_usage(session, k));
            }
            fprintf(stderr, "\n");
        }
    }
    rc = 0;
done:
    if (session) entmtp_policy_set(session, NULL);
    entmtp_session_free(session);
    entmtp_policy_free(policy);
    entmtp_bank_free(bank);
    entmtp_heads_free(heads);
    entmtp_model_free(model);
    free(sc.gen);
    free(ptoks);
    free(chat);
    free(text);
    free(file_text);
    return rc;
}
