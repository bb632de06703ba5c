/* entmtp search: the two-stage offline tree search of the EntMTP paper.
 *
 *  stage 1  acceptance frontier: Algorithm 1 (greedy node addition scored by
 *           what-if probes over self-rollouts), or the Medusa paper's
 *           accuracy-based construction (--builder accuracy);
 *  debias   every frontier tree re-run with its own proposals, mask and KV
 *           (the canonical self-rollout), timed end to end with prefill:
 *  stage 2  the Pareto set over (nodes, tokens/s) becomes the bank;
 *  policies static / hysteresis / ladder settings by one-dimensional sweeps
 *           on the same prompts, written into the bank with the figures. */
#include "cli.h"
#include "prompts.h"

#include "common/common.h"
#include "search/search.h"

#include <cjson/cJSON.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static void usage(FILE *f) {
    fprintf(f,
            "usage: entmtp search --model PATH --heads PATH --prompt-file F.jsonl|F.txt --out bank.json [options]\n"
            "\n"
            "  --prompt-file F   calibration prompts: JSON Lines {\"prompt\": ...} (tools/prompts/make_prompts.py)\n"
            "                    or plain text, one prompt per line (*.txt, or any file not starting with '{')\n"
            "  --prompts N       use the first N prompts (default 100)\n"
            "  --budget NODES    largest tree, root included (default 32)\n"
            "  --depth D         deepest path (default: min(4, heads))\n"
            "  --max-tokens N    tokens generated per prompt in every rollout (default 256)\n"
            "  --temperature T   rollout temperature (default 0.7, typical acceptance)\n"
            "  --epsilon E --delta D   typical acceptance (defaults 0.09, 0.3)\n"
            "  --seed S          sampling seed (default 0x5eed)\n"
            "  --builder B       greedy (Algorithm 1, default) | accuracy (Medusa's, cheaper)\n"
            "  --no-calibrate    skip the policy threshold sweeps\n"
            "  --plot F.png      frontier plot (default: the bank path with .png)\n"
            "  --plot-script PY  plotting script (default: plot_search.py installed with entmtp)\n"
            "  --backend B --threads N\n"
            "\n"
            "Paper settings are the defaults; on a CPU use small ones, e.g.\n"
            "  --prompts 8 --budget 12 --max-tokens 64\n");
}

/* ------------------------------------------------------------ progress */

typedef struct progress_state {
    double t0;
    cli_progress_log log;
} progress_state;

/* A bar on a terminal; otherwise a line when a stage step starts and at each
 * tenth of it (logs stay readable). */
static int search_progress(float fraction, const char *what, void *user) {
    progress_state *p = user;
    if (isatty(STDERR_FILENO)) return cli_progress(fraction, what, NULL);
    if (cli_progress_log_due(&p->log, fraction, what) >= 0) {
        fprintf(stderr, "entmtp search: %s (%.0f%%, %.1f min)\n", what, 100.0 * fraction, (emt_now() - p->t0) / 60.0);
    }
    return 0;
}

/* ------------------------------------------------------------- helpers */

typedef struct eval_row {
    char name[32];
    int32_t nodes, depth;
    double biased, self, tps;
    int keep;
} eval_row;

static int set_static(entmtp_session *s, int32_t tree, entmtp_policy **pol) {
    entmtp_policy_config pc = entmtp_policy_default_config(ENTMTP_POLICY_STATIC);
    pc.static_tree = tree;
    entmtp_policy_set(s, NULL);
    entmtp_policy_free(*pol);
    *pol = NULL;
    entmtp_status st = entmtp_policy_create(&pc, pol);
    if (!st) st = entmtp_policy_set(s, *pol);
    return st ? cli_fail("policy", st) : 0;
}

static int run_with(entmtp_session *s, entmtp_policy **pol, const entmtp_policy_config *pc,
                    const prompt_set *ps, const run_options *ro, run_result *rr) {
    entmtp_policy_set(s, NULL);
    entmtp_policy_free(*pol);
    *pol = NULL;
    entmtp_status st = entmtp_policy_create(pc, pol);
    if (!st) st = entmtp_policy_set(s, *pol);
    if (st) return cli_fail("policy", st);
    return run_prompt_set(s, ps, ro, rr);
}

static int cmp_float(const void *a, const void *b) {
    float x = *(const float *)a, y = *(const float *)b;
    return x < y ? -1 : x > y;
}

/* q-quantile of sorted values */
static float quantile(const float *sorted, int64_t n, double q) {
    if (n <= 0) return 0.5f;
    int64_t i = (int64_t)(q * (double)(n - 1) + 0.5);
    if (i < 0) i = 0;
    if (i >= n) i = n - 1;
    return sorted[i];
}

static cJSON *choices_json(const int32_t *ranks, const int32_t *lens, int32_t n_paths) {
    cJSON *a = cJSON_CreateArray();
    for (int32_t p = 0, k = 0; p < n_paths; p++) {
        cJSON *path = cJSON_CreateArray();
        for (int32_t d = 0; d < lens[p]; d++) cJSON_AddItemToArray(path, cJSON_CreateNumber(ranks[k++]));
        cJSON_AddItemToArray(a, path);
    }
    return a;
}

/* Adds the "search" record to the bank file entmtp_bank_save wrote. */
static int annotate_bank(const char *path, cJSON *search) {
    char *text = NULL;
    entmtp_status st = emt_read_file(path, &text, NULL);
    if (st) return cli_fail(path, st);
    cJSON *root = cJSON_Parse(text);
    free(text);
    if (!root) return cli_fail(path, ENTMTP_ERR_FORMAT);
    cJSON_AddItemToObject(root, "search", search);
    char *out = cJSON_Print(root);
    cJSON_Delete(root);
    FILE *f = out ? fopen(path, "w") : NULL;
    int bad = !f || fputs(out, f) == EOF || fputc('\n', f) == EOF;
    if (f) bad |= fclose(f) != 0;
    cJSON_free(out);
    if (bad) { fprintf(stderr, "entmtp search: cannot write %s\n", path); return 1; }
    return 0;
}

/* ---------------------------------------------------------------- main */

int cmd_search(int argc, char **argv) {
    const char *model_path = NULL, *heads_path = NULL, *prompt_file = NULL, *out_path = NULL;
    const char *plot = NULL, *plot_script = NULL, *builder = "greedy";
    long budget = 32, depth = 0;
    int calibrate = 1;
    int no_calibrate = 0;
    cli_run_settings rs = CLI_RUN_DEFAULTS;
    const cli_option opts[] = {
        { "--model", CLI_STRING, &model_path },
        { "--heads", CLI_STRING, &heads_path },
        { "--prompt-file", CLI_STRING, &prompt_file },
        { "--out", CLI_STRING, &out_path },
        CLI_PLOT_OPTIONS(&plot, &plot_script),
        { "--builder", CLI_STRING, &builder },
        { "--no-calibrate", CLI_FLAG, &no_calibrate },
        { "--budget", CLI_LONG, &budget, 0, 1000000 },
        { "--depth", CLI_LONG, &depth, 0, 1000000 },
        CLI_RUN_OPTIONS(&rs),
    };
    int parsed = cli_parse("search", argc, argv, CLI_TABLE(opts), usage);
    if (parsed) return parsed == 1 ? 0 : parsed;
    /* the run settings under the names the steps below use */
    const long n_prompts = rs.n_prompts, max_tokens = rs.max_tokens, threads = rs.threads;
    const float temperature = rs.temperature, epsilon = rs.epsilon, delta = rs.delta;
    const unsigned long long seed = rs.seed;
    const entmtp_backend backend = rs.backend;
    calibrate = !no_calibrate;
    if (!model_path || !prompt_file || !out_path) {
        fprintf(stderr, "entmtp search: --model, --prompt-file and --out are required\n");
        usage(stderr);
        return 2;
    }
    if (strcmp(builder, "greedy") && strcmp(builder, "accuracy")) {
        fprintf(stderr, "entmtp search: --builder: '%s' is not greedy or accuracy\n", builder);
        return 2;
    }
    if (budget < 2 || budget > EMT_GROW_MAX_NODES / 2 || n_prompts < 1 || max_tokens < 1) {
        fprintf(stderr, "entmtp search: need 2 <= --budget <= %d, --prompts >= 1, --max-tokens >= 1\n", EMT_GROW_MAX_NODES / 2);
        return 2;
    }

    int rc = 1;
    entmtp_status st;
    entmtp_model *model = NULL;
    entmtp_heads *heads = NULL;
    entmtp_bank *eval_bank = NULL, *bank = NULL;
    entmtp_session *s = NULL, *fs = NULL;
    entmtp_policy *pol = NULL;
    prompt_set ps = { 0 };
    emt_frontier fr = { 0 };
    eval_row *rows = NULL;
    run_result rr = { 0 }, *timing = NULL, *cal = NULL;
    cJSON *search = NULL, *sweeps = NULL;
    char shipped[4096], plot_path[4096];
    progress_state prog = { emt_now(), { "", -1 } };

    entmtp_model_params mp = entmtp_model_default_params();
    mp.backend = backend;
    mp.n_threads = (int32_t)threads;
    if ((st = entmtp_model_load(model_path, &mp, &model))) return cli_fail(model_path, st);
    if (!heads_path && find_shipped_heads(model_path, shipped, sizeof shipped)) heads_path = shipped;
    if (!heads_path) { fprintf(stderr, "entmtp search: no --heads given and none shipped for this model\n"); goto done; }
    if ((st = entmtp_heads_load(model, heads_path, &heads))) { rc = cli_fail(heads_path, st); goto done; }
    entmtp_heads_info hi = { sizeof hi };
    entmtp_heads_get_info(heads, &hi);
    if (depth == 0) depth = hi.n_heads < 4 ? hi.n_heads : 4;
    if (depth < 1 || depth > hi.n_heads) {
        fprintf(stderr, "entmtp search: --depth %ld: the heads draft at most %d tokens\n", depth, hi.n_heads);
        goto done;
    }
    if (prompt_set_load(model, prompt_file, (int32_t)n_prompts, &ps)) goto done;
    fprintf(stderr, "entmtp search: %d prompts from %s; %s heads (%d); budget %ld nodes, depth %ld, %ld tokens per "
                    "rollout, temperature %g\n", ps.n, prompt_file, hi.kind == ENTMTP_HEADS_HYDRA ? "Hydra" : "Medusa",
            hi.n_heads, budget, depth, max_tokens, (double)temperature);

    entmtp_session_params sp = entmtp_session_default_params();
    sp.temperature = temperature;
    sp.epsilon = epsilon;
    sp.delta = delta;
    sp.seed = seed;

    /* ---- stage 1: acceptance frontier */
    emt_search_config cfg = { (int32_t)budget, (int32_t)depth, 10, (int32_t)max_tokens, sp, search_progress, &prog };
    emt_prompts ep = { ps.n, ps.tokens, ps.lens };
    double t_stage1 = emt_now();
    if (!strcmp(builder, "greedy")) st = emt_search_acceptance(model, heads, &ep, &cfg, &fr);
    else st = emt_search_accuracy(model, heads, &ep, &cfg, &fr);
    if (st) { rc = cli_fail("stage 1", st); goto done; }
    t_stage1 = emt_now() - t_stage1;
    fprintf(stderr, "entmtp search: stage 1 (%s) done in %.1f min: %d trees\n", builder, t_stage1 / 60.0, fr.n);

    /* ---- debias + stage 2: every tree (and the root-only one) re-run with
     * its own proposals, timed end to end with prefill */
    int32_t n_rows = fr.n + 1;
    rows = calloc((size_t)n_rows, sizeof *rows);
    entmtp_bank_params bp = entmtp_bank_default_params();
    bp.max_depth = (int32_t)depth;
    if (!rows || (st = entmtp_bank_create(&bp, &eval_bank))) { rc = cli_fail("bank", st ? st : ENTMTP_ERR_OUT_OF_MEMORY); goto done; }
    for (int32_t i = 0; i < n_rows; i++) {
        eval_row *r = &rows[i];
        if (i == 0) {
            r->nodes = 1;
            r->biased = 1.0;
            st = entmtp_bank_add_tree_json(eval_bank, "n01d0", "[]", NULL);
            snprintf(r->name, sizeof r->name, "n01d0");
        } else {
            const emt_frontier_tree *t = &fr.trees[i - 1];
            r->nodes = t->n_nodes;
            r->depth = t->depth;
            r->biased = t->accept;
            snprintf(r->name, sizeof r->name, "n%02dd%d", t->n_nodes, t->depth);
            st = entmtp_bank_add_tree(eval_bank, r->name, t->ranks, t->lens, t->n_paths, NULL);
        }
        if (st) { rc = cli_fail(r->name, st); goto done; }
    }
    if ((st = entmtp_session_create(model, heads, eval_bank, &sp, &s))) { rc = cli_fail("session", st); goto done; }
    run_options ro = { (int32_t)max_tokens, 0, 0, 0, NULL };
    /* one warm-up generation, excluded from every figure */
    prompt_set first = ps;
    first.n = 1;
    if (set_static(s, n_rows - 1, &pol) || run_prompt_set(s, &first, &ro, &rr)) goto done;
    run_result_free(&rr);
    /* every tree and AR on each prompt in turn: drift on a shared machine
     * hits them alike */
    run_options ar_opt = ro;
    ar_opt.autoregressive = 1;
    timing = calloc((size_t)n_rows + 1, sizeof *timing);
    if (!timing) { rc = cli_fail("search", ENTMTP_ERR_OUT_OF_MEMORY); goto done; }
    for (int32_t p = 0; p < ps.n; p++) {
        if (run_prompt(s, &ps, p, &ar_opt, &timing[n_rows])) goto done;
        for (int32_t i = 0; i < n_rows; i++)
            if (set_static(s, i, &pol) || run_prompt(s, &ps, p, &ro, &timing[i])) goto done;
        search_progress((float)(p + 1) / (float)ps.n, "timing the frontier trees", &prog);
    }
    double ar_tps = run_tokens_per_second(&timing[n_rows]);
    fprintf(stderr, "entmtp search: AR %.2f tokens/s\n", ar_tps);
    for (int32_t i = 0; i < n_rows; i++) {
        rows[i].self = run_accept_length(&timing[i]);
        rows[i].tps = run_tokens_per_second(&timing[i]);
        fprintf(stderr, "entmtp search: %-7s accept %.3f (%s %.3f), %.2f tokens/s\n", rows[i].name, rows[i].self,
                builder, rows[i].biased, rows[i].tps);
    }
    {
        int32_t *nodes = malloc((size_t)n_rows * sizeof *nodes);
        double *tps = malloc((size_t)n_rows * sizeof *tps);
        uint8_t *keep = malloc((size_t)n_rows);
        if (!nodes || !tps || !keep) { free(nodes); free(tps); free(keep); rc = cli_fail("search", ENTMTP_ERR_OUT_OF_MEMORY); goto done; }
        for (int32_t i = 0; i < n_rows; i++) { nodes[i] = rows[i].nodes; tps[i] = rows[i].tps; }
        emt_pareto_max(n_rows, nodes, tps, keep);
        for (int32_t i = 0; i < n_rows; i++) rows[i].keep = keep[i];
        free(nodes); free(tps); free(keep);
    }

    /* ---- the bank: the throughput-Pareto trees, smallest first */
    if ((st = entmtp_bank_create(&bp, &bank))) { rc = cli_fail("bank", st); goto done; }
    int32_t best = -1, n_kept = 0;
    for (int32_t i = 0; i < n_rows; i++) {
        if (!rows[i].keep) continue;
        int32_t idx;
        if (i == 0) st = entmtp_bank_add_tree_json(bank, rows[i].name, "[]", &idx);
        else st = entmtp_bank_add_tree(bank, rows[i].name, fr.trees[i - 1].ranks, fr.trees[i - 1].lens,
                                       fr.trees[i - 1].n_paths, &idx);
        if (!st) st = entmtp_bank_set_figures(bank, idx, (float)rows[i].self, (float)rows[i].tps);
        if (st) { rc = cli_fail(rows[i].name, st); goto done; }
        if (best < 0 || rows[i].tps > rows[best].tps) best = i;
        n_kept++;
    }
    int32_t best_idx = 0;
    entmtp_bank_find(bank, rows[best].name, &best_idx);
    entmtp_policy_config stat = entmtp_policy_default_config(ENTMTP_POLICY_STATIC);
    stat.static_tree = best_idx;
    double best_tps = rows[best].tps;
    sweeps = cJSON_CreateArray();
    entmtp_policy_config hyst = entmtp_policy_default_config(ENTMTP_POLICY_HYSTERESIS);
    entmtp_policy_config ladder = entmtp_policy_default_config(ENTMTP_POLICY_LADDER);
    double hyst_tps = 0, ladder_tps = 0;
    int have_hyst = 0, have_ladder = 0;
    if (calibrate && best_idx > 0) {
        /* s as the aggressive tree sees it: the grid for the thresholds */
        if ((st = entmtp_session_create(model, heads, bank, &sp, &fs))) { rc = cli_fail("session", st); goto done; }
        run_options so = ro;
        so.keep_s = 1;
        so.label = "collecting s";
        if (run_with(fs, &pol, &stat, &ps, &so, &rr)) goto done;
        qsort(rr.s, (size_t)rr.n_s, sizeof *rr.s, cmp_float);
        /* the candidates: static (the reference), hysteresis with the best
         * static tree as aggressive and each smaller bank tree (up to 3) as
         * conservative, tau at a quantile of s; the ladder over the (up to)
         * four bank trees ending at the static one, thresholds at the
         * alpha*b/K quantiles of s. One dimension swept per shape. */
        const double qs[] = { 0.1, 0.25, 0.5, 0.75, 0.9 }, alphas[] = { 0.25, 0.5, 0.75, 1.0 };
        entmtp_policy_config cand[1 + 3 * 5 + 4];
        double knob[1 + 3 * 5 + 4];
        int n_cand = 0;
        cand[n_cand] = stat;
        knob[n_cand++] = 0;
        for (int32_t c = 0; c < best_idx && c < 3; c++)
            for (size_t q = 0; q < sizeof qs / sizeof qs[0]; q++) {
                entmtp_policy_config pc = hyst;
                pc.conservative_tree = c;
                pc.aggressive_tree = best_idx;
                pc.tau_on = pc.tau_off = quantile(rr.s, rr.n_s, qs[q]);
                cand[n_cand] = pc;
                knob[n_cand++] = qs[q];
            }
        int32_t K = best_idx + 1 < 4 ? best_idx + 1 : 4;
        float ladder_thresholds[4][3]; /* one ladder per alpha; K <= 4 */
        int32_t ladder_trees[4][4];
        for (size_t ai = 0; K >= 3 && ai < sizeof alphas / sizeof alphas[0]; ai++) {
            entmtp_policy_config pc = ladder;
            pc.n_thresholds = K - 1;
            for (int32_t b = 0; b < K; b++) ladder_trees[ai][b] = best_idx - (K - 1) + b;
            for (int32_t b = 1; b < K; b++) ladder_thresholds[ai][b - 1] = quantile(rr.s, rr.n_s, alphas[ai] * b / K);
            pc.thresholds = ladder_thresholds[ai];
            pc.ladder_trees = ladder_trees[ai];
            int distinct = 1;
            for (int32_t b = 1; b < K - 1; b++) distinct &= pc.thresholds[b] > pc.thresholds[b - 1];
            if (!distinct) continue; /* s too concentrated for distinct thresholds */
            cand[n_cand] = pc;
            knob[n_cand++] = alphas[ai];
        }
        run_result_free(&rr);
        cal = calloc((size_t)n_cand, sizeof *cal);
        if (!cal) { rc = cli_fail("search", ENTMTP_ERR_OUT_OF_MEMORY); goto done; }
        for (int32_t p = 0; p < ps.n; p++) {
            for (int k = 0; k < n_cand; k++) {
                entmtp_policy_set(fs, NULL);
                entmtp_policy_free(pol);
                pol = NULL;
                if ((st = entmtp_policy_create(&cand[k], &pol)) || (st = entmtp_policy_set(fs, pol))) {
                    rc = cli_fail("policy", st);
                    goto done;
                }
                if (run_prompt(fs, &ps, p, &ro, &cal[k])) goto done;
            }
            search_progress((float)(p + 1) / (float)ps.n, "calibrating the policies", &prog);
        }
        /* static's figure in this run is the reference the policies must beat */
        best_tps = run_tokens_per_second(&cal[0]);
        for (int k = 1; k < n_cand; k++) {
            const entmtp_policy_config *pc = &cand[k];
            double tps = run_tokens_per_second(&cal[k]);
            int is_hyst = pc->kind == ENTMTP_POLICY_HYSTERESIS;
            cJSON *o = cJSON_CreateObject();
            cJSON_AddStringToObject(o, "policy", is_hyst ? "hysteresis" : "ladder");
            if (is_hyst) {
                cJSON_AddNumberToObject(o, "conservative_tree", pc->conservative_tree);
                cJSON_AddNumberToObject(o, "aggressive_tree", pc->aggressive_tree);
                cJSON_AddNumberToObject(o, "quantile", knob[k]);
                cJSON_AddNumberToObject(o, "tau", pc->tau_on);
            } else {
                cJSON_AddNumberToObject(o, "alpha", knob[k]);
                cJSON_AddItemToObject(o, "thresholds", cJSON_CreateFloatArray(pc->thresholds, pc->n_thresholds));
            }
            cJSON_AddNumberToObject(o, "tokens_per_second", tps);
            cJSON_AddNumberToObject(o, "mean_accept_length", run_accept_length(&cal[k]));
            cJSON_AddItemToArray(sweeps, o);
            entmtp_tree_info ci = { sizeof ci };
            entmtp_bank_tree_info(bank, is_hyst ? pc->conservative_tree : pc->ladder_trees[0], &ci);
            fprintf(stderr, "entmtp search: %s from %s, %s %.3g: %.2f tokens/s (static %.2f)\n", is_hyst ? "hysteresis" : "ladder",
                    ci.name, is_hyst ? "tau" : "alpha", is_hyst ? (double)pc->tau_on : knob[k], tps, best_tps);
            if (is_hyst && (!have_hyst || tps > hyst_tps)) { hyst = *pc; hyst_tps = tps; have_hyst = 1; }
            if (!is_hyst && (!have_ladder || tps > ladder_tps)) { ladder = *pc; ladder_tps = tps; have_ladder = 1; }
        }
    }
    /* the bank's default policy is the first one stored: the calibration's best */
    entmtp_policy_config ucb = entmtp_policy_default_config(ENTMTP_POLICY_UCB);
    const entmtp_policy_config *order[4] = { &stat, have_hyst ? &hyst : NULL, have_ladder ? &ladder : NULL, &ucb };
    if (have_hyst && hyst_tps > best_tps && (!have_ladder || hyst_tps >= ladder_tps)) { order[0] = &hyst; order[1] = &stat; }
    else if (have_ladder && ladder_tps > best_tps && (!have_hyst || ladder_tps > hyst_tps)) { order[0] = &ladder; order[2] = &stat; }
    for (int k = 0; k < 4; k++) {
        if (!order[k]) continue;
        if ((st = entmtp_bank_set_policy_config(bank, order[k]))) {
            rc = cli_fail(entmtp_policy_kind_name(order[k]->kind), st);
            goto done;
        }
    }
    if ((st = entmtp_bank_save(bank, out_path))) { rc = cli_fail(out_path, st); goto done; }

    /* ---- the record of how the bank was made */
    search = cJSON_CreateObject();
    cJSON *settings = cJSON_AddObjectToObject(search, "settings");
    cJSON_AddStringToObject(settings, "model", model_path);
    cJSON_AddStringToObject(settings, "heads", heads_path);
    cJSON_AddStringToObject(settings, "heads_kind", hi.kind == ENTMTP_HEADS_HYDRA ? "hydra" : "medusa");
    cJSON_AddStringToObject(settings, "prompt_file", prompt_file);
    cJSON_AddNumberToObject(settings, "prompts", ps.n);
    cJSON_AddStringToObject(settings, "builder", builder);
    cJSON_AddNumberToObject(settings, "budget", (double)budget);
    cJSON_AddNumberToObject(settings, "depth", (double)depth);
    cJSON_AddNumberToObject(settings, "max_tokens", (double)max_tokens);
    cJSON_AddNumberToObject(settings, "temperature", temperature);
    cJSON_AddNumberToObject(settings, "epsilon", epsilon);
    cJSON_AddNumberToObject(settings, "delta", delta);
    cJSON_AddNumberToObject(settings, "seed", (double)seed);
    entmtp_model_info mi = { sizeof mi };
    entmtp_model_get_info(model, &mi);
    cJSON_AddStringToObject(settings, "backend", mi.backend == ENTMTP_BACKEND_CUDA ? "cuda" : "cpu");
    cJSON_AddNumberToObject(search, "stage1_seconds", t_stage1);
    cJSON_AddNumberToObject(search, "probe_steps", (double)fr.probe_steps);
    cJSON_AddNumberToObject(search, "ar_tokens_per_second", ar_tps);
    if (fr.accuracy) {
        cJSON *acc = cJSON_AddArrayToObject(search, "head_accuracy"); /* [level][rank] */
        for (int32_t d = 0; d < fr.accuracy_levels; d++)
            cJSON_AddItemToArray(acc, cJSON_CreateDoubleArray(fr.accuracy + (size_t)d * fr.accuracy_topk, fr.accuracy_topk));
    }
    cJSON *trees = cJSON_AddArrayToObject(search, "frontier");
    for (int32_t i = 0; i < n_rows; i++) {
        cJSON *o = cJSON_CreateObject();
        cJSON_AddStringToObject(o, "name", rows[i].name);
        cJSON_AddNumberToObject(o, "nodes", rows[i].nodes);
        cJSON_AddNumberToObject(o, "depth", rows[i].depth);
        cJSON_AddNumberToObject(o, "biased_accept_length", rows[i].biased);
        cJSON_AddNumberToObject(o, "self_accept_length", rows[i].self);
        cJSON_AddNumberToObject(o, "bias", rows[i].self > 0 ? (rows[i].biased - rows[i].self) / rows[i].self : 0);
        cJSON_AddNumberToObject(o, "tokens_per_second", rows[i].tps);
        cJSON_AddBoolToObject(o, "pareto", rows[i].keep);
        if (i > 0) cJSON_AddItemToObject(o, "choices", choices_json(fr.trees[i - 1].ranks, fr.trees[i - 1].lens, fr.trees[i - 1].n_paths));
        else cJSON_AddItemToObject(o, "choices", cJSON_CreateArray());
        cJSON_AddItemToArray(trees, o);
    }
    cJSON *jcal = cJSON_AddObjectToObject(search, "calibration");
    cJSON_AddNumberToObject(jcal, "static_tokens_per_second", best_tps);
    if (have_hyst) cJSON_AddNumberToObject(jcal, "hysteresis_tokens_per_second", hyst_tps);
    if (have_ladder) cJSON_AddNumberToObject(jcal, "ladder_tokens_per_second", ladder_tps);
    cJSON_AddItemToObject(jcal, "sweeps", sweeps);
    sweeps = NULL;
    if (annotate_bank(out_path, search)) { search = NULL; goto done; }
    search = NULL;
    fprintf(stderr, "entmtp search: wrote %s: %d trees (Pareto over %d), static %s at %.2f tokens/s (AR %.2f)%s\n",
            out_path, n_kept, n_rows, rows[best].name, best_tps, ar_tps,
            have_hyst ? "; hysteresis calibrated" : "");

    if (!plot) {
        snprintf(plot_path, sizeof plot_path, "%s", out_path);
        char *dot = strrchr(plot_path, '.');
        if (dot && !strchr(dot, '/')) *dot = '\0';
        strncat(plot_path, ".png", sizeof plot_path - strlen(plot_path) - 1);
        plot = plot_path;
    }
    cli_plot("search", "plot_search.py", plot_script, out_path, plot); /* the bank stands without it */
    rc = 0;
done:
    cJSON_Delete(sweeps);
    cJSON_Delete(search);
    run_result_free(&rr);
    free(timing); /* timing and calibration runs keep neither s nor tokens */
    free(cal);
    free(rows);
    emt_frontier_free(&fr);
    prompt_set_free(&ps);
    entmtp_session_free(fs);
    entmtp_session_free(s);
    entmtp_policy_free(pol);
    entmtp_bank_free(bank);
    entmtp_bank_free(eval_bank);
    entmtp_heads_free(heads);
    entmtp_model_free(model);
    return rc;
}
