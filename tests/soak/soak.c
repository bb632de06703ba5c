/* Reliability runs (docs/reliability.md):
 *   entmtp_soak generate N   one session, N greedy tokens in one context (lean model), the
 *                            policy switched every 1000 steps, compared token
 *                            for token with AR; RSS sampled every 10%
 *   entmtp_soak reload N [MODEL]   load and free a model N times; RSS per 10%
 * Exit status 0 only when the output is lossless and memory stays flat. */
#include "entmtp.h"
#include "tiny_model.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static long rss_kb(void) {
    FILE *f = fopen("/proc/self/statm", "r");
    long pages = 0, resident = 0;
    if (f) {
        if (fscanf(f, "%ld %ld", &pages, &resident) != 2) resident = 0;
        fclose(f);
    }
    return resident * (sysconf(_SC_PAGESIZE) / 1024);
}

static int fail(const char *what, entmtp_status st) {
    fprintf(stderr, "soak: %s: %s: %s\n", what, entmtp_status_string(st), entmtp_last_error());
    return 1;
}

/* What both soak runs use: a tiny model with random Medusa heads (files in
 * /tmp), a bank of three small trees and the four policies they rotate. */
typedef struct soak_setup {
    char model_path[64], heads_path[64];
    entmtp_model *m;
    entmtp_heads *h;
    entmtp_bank *b;
    entmtp_policy *pol[4];
} soak_setup;

static void teardown(soak_setup *x) {
    for (int k = 0; k < 4; k++) entmtp_policy_free(x->pol[k]);
    entmtp_bank_free(x->b);
    entmtp_heads_free(x->h);
    entmtp_model_free(x->m);
    unlink(x->model_path);
    unlink(x->heads_path);
}

/* lean: a one-layer, one-head, hidden-8 model, so that the O(context) attention
 * of a single 100k-token context stays affordable on a CPU */
static int setup(int32_t ctx, int lean, soak_setup *x) {
    memset(x, 0, sizeof *x);
    snprintf(x->model_path, sizeof x->model_path, "/tmp/entmtp-soak-%d.gguf", (int)getpid());
    snprintf(x->heads_path, sizeof x->heads_path, "/tmp/entmtp-soak-%d.safetensors", (int)getpid());
    emt_tiny_config c = emt_tiny_default_config();
    c.vocab = 32;
    c.ctx = ctx;
    c.seed = lean ? 4 : 5; /* 4: the lean model's text is neither constant nor unguessable (accept length ~2.5) */
    if (lean) {
        c.vocab = 16; /* random heads then guess right often enough to accept multi-token paths */
        c.hidden = 8;
        c.ffn = 16;
        c.n_layers = 1;
        c.n_heads = c.n_kv_heads = 1;
    }
    entmtp_status st;
    if ((st = emt_tiny_write_gguf(x->model_path, &c, lean ? EMT_F32 : EMT_Q8_0))) return fail("write model", st);
    if ((st = emt_tiny_write_medusa_heads(x->heads_path, c.hidden, c.vocab, 4, 1, 0, 6))) return fail("write heads", st);
    entmtp_model_params mp = entmtp_model_default_params();
    mp.backend = ENTMTP_BACKEND_CPU;
    mp.n_threads = 1;
    if ((st = entmtp_model_load(x->model_path, &mp, &x->m)) || (st = entmtp_heads_load(x->m, x->heads_path, &x->h)) ||
        (st = entmtp_bank_create(NULL, &x->b)) || (st = entmtp_bank_add_builtin(x->b, "chain_2", NULL)) ||
        (st = entmtp_bank_add_tree_json(x->b, "small", "[[0],[1],[0,0],[0,1],[1,0]]", NULL)) ||
        (st = entmtp_bank_add_builtin(x->b, "chain_4", NULL)))
        return fail("setup", st);
    const entmtp_policy_kind kinds[] = { ENTMTP_POLICY_STATIC, ENTMTP_POLICY_HYSTERESIS, ENTMTP_POLICY_UCB, ENTMTP_POLICY_LADDER };
    for (int k = 0; k < 4; k++) {
        entmtp_policy_config pc = entmtp_policy_default_config(kinds[k]);
        pc.static_tree = 1;
        pc.tau_on = 0.3f;
        pc.tau_off = 0.1f;
        pc.aggressive_tree = 1;
        pc.n_thresholds = 2;
        static const float thresholds[2] = { 0.1f, 0.5f };
        pc.thresholds = thresholds;
        if ((st = entmtp_policy_create(&pc, &x->pol[k]))) return fail("policy", st);
    }
    return 0;
}

static int run_generate(int32_t n) {
    soak_setup x;
    if (setup(n + 1024, 1, &x)) { teardown(&x); return 1; }
    entmtp_model *m = x.m;
    entmtp_heads *h = x.h;
    entmtp_bank *b = x.b;
    entmtp_policy **pol = x.pol;
    entmtp_status st;
    const int32_t prompt[] = { 1, 2, 3, 4, 5 };
    int32_t *ar = malloc((size_t)n * sizeof *ar);
    entmtp_session_params sp = entmtp_session_default_params();
    sp.kv_capacity = n + 16;
    sp.n_stop_tokens = 0;
    entmtp_session *s = NULL;
    /* AR reference */
    if ((st = entmtp_session_create(m, h, b, &sp, &s)) || (st = entmtp_session_prefill(s, prompt, 5)) ||
        (st = entmtp_generate(s, n, 1, NULL, NULL)))
        return fail("AR", st);
    const int32_t *toks;
    int32_t nt;
    entmtp_session_tokens(s, &toks, &nt);
    memcpy(ar, toks + 5, (size_t)n * sizeof *ar);
    entmtp_session_free(s);
    /* EntMTP with a policy switch every 1000 steps */
    /* the KV cache is allocated at creation but its pages are first touched
     * as it fills: one AR pass over the whole capacity, then a reset, so the
     * measured run shows growth the library causes, not first-touch paging */
    if ((st = entmtp_session_create(m, h, b, &sp, &s)) || (st = entmtp_session_prefill(s, prompt, 5)) ||
        (st = entmtp_generate(s, n, 1, NULL, NULL)))
        return fail("session warm-up", st);
    entmtp_session_reset(s);
    if ((st = entmtp_session_prefill(s, prompt, 5))) return fail("session", st);
    long rss0 = rss_kb(), rss_max = rss0;
    int32_t produced = 0, steps = 0, next_report = n / 10;
    double t0 = 0;
    (void)t0;
    printf("generate: %d tokens, RSS at start %ld kB\n", n, rss0);
    while (produced < n) {
        if (steps % 1000 == 0 && (st = entmtp_policy_set(s, pol[(steps / 1000) % 4]))) return fail("policy_set", st);
        entmtp_step_result r = { sizeof r };
        if ((st = entmtp_step(s, n - produced, &r))) return fail("step", st);
        produced += r.n_tokens;
        steps++;
        long rss = rss_kb();
        if (rss > rss_max) rss_max = rss;
        if (produced >= next_report) {
            printf("  %7d tokens  %6d steps  RSS %ld kB\n", produced, steps, rss);
            next_report += n / 10;
        }
    }
    entmtp_session_tokens(s, &toks, &nt);
    int lossless = nt == n + 5 && !memcmp(toks + 5, ar, (size_t)n * sizeof *ar);
    entmtp_session_stats ss = { sizeof ss };
    entmtp_session_get_stats(s, &ss);
    printf("EntMTP: %lld tokens in %lld steps (mean accept length %.3f), %s AR; RSS growth %ld kB\n",
           (long long)ss.n_generated, (long long)ss.n_steps, ss.mean_accept_length,
           lossless ? "identical to" : "DIFFERENT FROM", rss_max - rss0);
    entmtp_policy_set(s, NULL);
    entmtp_session_free(s);
    teardown(&x);
    free(ar);
    return lossless && rss_max - rss0 < 1024 ? 0 : 1;
}

/* N tokens in one session object, in chunks of `chunk` tokens: reset, a new
 * prompt, EntMTP with the policy switched every 1000 steps, compared with an
 * AR session over the same prompt. Bounds the O(context^2) attention cost of
 * the CPU so that 100k+ tokens run in minutes. */
static int run_chunks(int32_t n, int32_t chunk) {
    soak_setup x;
    if (setup(chunk + 64, 0, &x)) { teardown(&x); return 1; }
    entmtp_policy **pol = x.pol;
    entmtp_status st;
    entmtp_session_params sp = entmtp_session_default_params();
    sp.kv_capacity = chunk + 16;
    sp.n_stop_tokens = 0;
    entmtp_session *s = NULL, *ref = NULL;
    if ((st = entmtp_session_create(x.m, x.h, x.b, &sp, &s)) || (st = entmtp_session_create(x.m, x.h, x.b, &sp, &ref)))
        return fail("session", st);
    long rss_first = 0, rss_max = 0;
    int64_t total = 0, steps = 0, mismatches = 0;
    for (int32_t ck = 0; total < n; ck++) {
        int32_t want = n - total < chunk ? (int32_t)(n - total) : chunk;
        int32_t prompt[4] = { ck % 32, (ck * 7 + 1) % 32, (ck * 13 + 2) % 32, 3 };
        entmtp_session_reset(s);
        entmtp_session_reset(ref);
        if ((st = entmtp_session_prefill(ref, prompt, 4)) || (st = entmtp_generate(ref, want, 1, NULL, NULL)) ||
            (st = entmtp_session_prefill(s, prompt, 4)))
            return fail("chunk", st);
        int32_t produced = 0;
        while (produced < want) {
            if (steps % 1000 == 0 && (st = entmtp_policy_set(s, pol[(steps / 1000) % 4]))) return fail("policy_set", st);
            entmtp_step_result r = { sizeof r };
            if ((st = entmtp_step(s, want - produced, &r))) return fail("step", st);
            produced += r.n_tokens;
            steps++;
        }
        const int32_t *a, *bt;
        int32_t na, nb;
        entmtp_session_tokens(s, &a, &na);
        entmtp_session_tokens(ref, &bt, &nb);
        if (na != nb || memcmp(a, bt, (size_t)na * sizeof *a)) mismatches++;
        total += want;
        long rss = rss_kb();
        if (ck == 0) rss_first = rss;
        if (rss > rss_max) rss_max = rss;
        printf("  %8lld tokens  %8lld steps  RSS %ld kB\n", (long long)total, (long long)steps, rss);
        fflush(stdout);
    }
    printf("chunked soak: %lld tokens in one session (chunks of %d, reset between), %lld steps, %lld chunks differing from AR, RSS after chunk 1 %ld kB, max %ld kB\n",
           (long long)total, chunk, (long long)steps, (long long)mismatches, rss_first, rss_max);
    entmtp_policy_set(s, NULL);
    entmtp_session_free(s);
    entmtp_session_free(ref);
    teardown(&x);
    return mismatches == 0 && rss_max - rss_first < 1024 ? 0 : 1;
}

static int run_reload(int32_t n, const char *path) {
    char tiny[] = "/tmp/entmtp-soak-reload.gguf";
    if (!path) {
        emt_tiny_config c = emt_tiny_default_config();
        entmtp_status st = emt_tiny_write_gguf(tiny, &c, EMT_Q4_1);
        if (st) return fail("write model", st);
        path = tiny;
    }
    entmtp_model_params mp = entmtp_model_default_params();
    mp.backend = ENTMTP_BACKEND_CPU;
    long first = 0, last = 0;
    for (int32_t i = 0; i < n; i++) {
        entmtp_model *m = NULL;
        entmtp_status st = entmtp_model_load(path, &mp, &m);
        if (st) return fail(path, st);
        entmtp_model_free(m);
        long rss = rss_kb();
        if (i == (n / 10 ? n / 10 : 1) - 1) first = rss; /* after the first 10% of loads */
        last = rss;
        if ((i + 1) % (n / 10 ? n / 10 : 1) == 0) printf("  %4d loads  RSS %ld kB\n", i + 1, rss);
    }
    printf("reload %s x%d: RSS after 10%% %ld kB, at the end %ld kB (growth %ld kB)\n", path, n, first, last, last - first);
    if (path == tiny) unlink(tiny);
    return last - first < 8192 ? 0 : 1;
}

int main(int argc, char **argv) {
    setvbuf(stdout, NULL, _IOLBF, 0); /* progress shows when redirected to a log */
    if (argc >= 3 && !strcmp(argv[1], "generate")) return run_generate(atoi(argv[2]));
    if (argc >= 4 && !strcmp(argv[1], "chunks")) return run_chunks(atoi(argv[2]), atoi(argv[3]));
    if (argc >= 3 && !strcmp(argv[1], "reload")) return run_reload(atoi(argv[2]), argc > 3 ? argv[3] : NULL);
    fprintf(stderr, "usage: entmtp_soak generate N | chunks N CHUNK | reload N [MODEL]\n");
    return 2;
}
