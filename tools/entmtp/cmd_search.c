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

typedef struct search_options {
    const char *model_path, *heads_path, *prompt_file, *out_path, *plot, *plot_script, *builder;
    long budget, depth;
    int no_calibrate;
    cli_run_settings rs;
} search_options;

static int parse_options(int argc, char **argv, search_options *o) {
    *o = (search_options){ .builder = "greedy", .budget = 32, .rs = CLI_RUN_DEFAULTS };
    const cli_option opts[] = {
        { "--model", CLI_STRING, &o->model_path },
        { "--heads", CLI_STRING, &o->heads_path },
        { "--prompt-file", CLI_STRING, &o->prompt_file },
        { "--out", CLI_STRING, &o->out_path },
        CLI_PLOT_OPTIONS(&o->plot, &o->plot_script),
        { "--builder", CLI_STRING, &o->builder },
        { "--no-calibrate", CLI_FLAG, &o->no_calibrate },
        { "--budget", CLI_LONG, &o->budget, 0, 1000000 },
        { "--depth", CLI_LONG, &o->depth, 0, 1000000 },
        CLI_RUN_OPTIONS(&o->rs),
    };
    int rc = cli_parse("search", argc, argv, CLI_TABLE(opts), usage);
    if (rc) return rc;
    if (!o->model_path || !o->prompt_file || !o->out_path) {
        fprintf(stderr, "entmtp search: --model, --prompt-file and --out are required\n");
        usage(stderr);
        return 2;
    }
    if (strcmp(o->builder, "greedy") && strcmp(o->builder, "accuracy")) {
        fprintf(stderr, "entmtp search: --builder: '%s' is not greedy or accuracy\n", o->builder);
        return 2;
    }
    if (o->budget < 2 || o->budget > EMT_GROW_MAX_NODES / 2 || o->rs.n_prompts < 1 || o->rs.max_tokens < 1) {
        fprintf(stderr, "entmtp search: need 2 <= --budget <= %d, --prompts >= 1, --max-tokens >= 1\n", EMT_GROW_MAX_NODES / 2);
        return 2;
    }
    return 0;
}

/* Everything one search holds, released by search_job_free. */
typedef struct search_job {
    const search_options *o;
    entmtp_model *model;
    entmtp_heads *heads;
    entmtp_heads_info hi;
    const char *heads_path;
    entmtp_bank *eval_bank, *bank;
    entmtp_session *s, *fs; /* over the frontier trees; over the bank (calibration) */
    entmtp_policy *pol;
    entmtp_session_params sp;
    run_options ro;
    prompt_set ps;
    emt_frontier fr;
    double t_stage1;
    eval_row *rows; /* root-only tree, then the frontier */
    int32_t n_rows;
    run_result rr, *timing, *cal;
    double ar_tps;
    int32_t best, n_kept;
    /* policies stored in the bank, and the figures of the calibration */
    entmtp_policy_config stat, hyst, ladder;
    float ladder_thresholds[3];
    int32_t ladder_trees[4];
    double best_tps, hyst_tps, ladder_tps;
    int have_hyst, have_ladder;
    cJSON *sweeps;
    progress_state prog;
    char shipped[4096];
} search_job;

static void search_job_free(search_job *j) {
    cJSON_Delete(j->sweeps);
    run_result_free(&j->rr);
    free(j->timing); /* timing and calibration runs keep neither s nor tokens */
    free(j->cal);
    free(j->rows);
    emt_frontier_free(&j->fr);
    prompt_set_free(&j->ps);
    entmtp_session_free(j->fs);
    entmtp_session_free(j->s);
    entmtp_policy_free(j->pol);
    entmtp_bank_free(j->bank);
    entmtp_bank_free(j->eval_bank);
    entmtp_heads_free(j->heads);
    entmtp_model_free(j->model);
}

/* Model, heads (given or shipped), prompts. */
static int load_inputs(search_job *j) {
    const search_options *o = j->o;
    if (cli_run_load_model(&o->rs, o->model_path, &j->model)) return 1;
    entmtp_status st;
    j->heads_path = o->heads_path;
    if (!j->heads_path && find_shipped_heads(o->model_path, j->shipped, sizeof j->shipped)) j->heads_path = j->shipped;
    if (!j->heads_path) { fprintf(stderr, "entmtp search: no --heads given and none shipped for this model\n"); return 1; }
    if ((st = entmtp_heads_load(j->model, j->heads_path, &j->heads))) return cli_fail(j->heads_path, st);
    j->hi = (entmtp_heads_info){ sizeof j->hi };
    entmtp_heads_get_info(j->heads, &j->hi);
    if (prompt_set_load(j->model, o->prompt_file, (int32_t)o->rs.n_prompts, &j->ps)) return 1;
    j->sp = cli_run_session_params(&o->rs);
    j->ro = (run_options){ (int32_t)o->rs.max_tokens, 0, 0, 0, NULL };
    return 0;
}

/* Stage 1: the acceptance frontier (Algorithm 1, or Medusa's accuracy builder). */
static int run_stage1(search_job *j, long depth) {
    const search_options *o = j->o;
    emt_search_config cfg = { (int32_t)o->budget, (int32_t)depth, 10, (int32_t)o->rs.max_tokens, j->sp, search_progress, &j->prog };
    emt_prompts ep = { j->ps.n, j->ps.tokens, j->ps.lens };
    double t0 = emt_now();
    entmtp_status st = !strcmp(o->builder, "greedy") ? emt_search_acceptance(j->model, j->heads, &ep, &cfg, &j->fr)
                                                     : emt_search_accuracy(j->model, j->heads, &ep, &cfg, &j->fr);
    if (st) return cli_fail("stage 1", st);
    j->t_stage1 = emt_now() - t0;
    fprintf(stderr, "entmtp search: stage 1 (%s) done in %.1f min: %d trees\n", o->builder, j->t_stage1 / 60.0, j->fr.n);
    return 0;
}

/* The frontier trees (and the root-only one) as a bank to time. */
static int frontier_bank(search_job *j, const entmtp_bank_params *bp) {
    j->n_rows = j->fr.n + 1;
    j->rows = calloc((size_t)j->n_rows, sizeof *j->rows);
    entmtp_status st = j->rows ? entmtp_bank_create(bp, &j->eval_bank) : ENTMTP_ERR_OUT_OF_MEMORY;
    if (st) return cli_fail("bank", st);
    for (int32_t i = 0; i < j->n_rows; i++) {
        eval_row *r = &j->rows[i];
        if (i == 0) {
            r->nodes = 1;
            r->biased = 1.0;
            snprintf(r->name, sizeof r->name, "n01d0");
            st = entmtp_bank_add_tree_json(j->eval_bank, r->name, "[]", NULL);
        } else {
            const emt_frontier_tree *t = &j->fr.trees[i - 1];
            r->nodes = t->n_nodes;
            r->depth = t->depth;
            r->biased = t->accept;
            snprintf(r->name, sizeof r->name, "n%02dd%d", t->n_nodes, t->depth);
            st = entmtp_bank_add_tree(j->eval_bank, r->name, t->ranks, t->lens, t->n_paths, NULL);
        }
        if (st) return cli_fail(r->name, st);
    }
    return 0;
}

/* Debias + stage 2: every tree re-run with its own proposals and timed end to
 * end with prefill, beside AR, prompt by prompt (drift on a shared machine
 * hits them alike); the throughput-Pareto rows are kept. */
static int time_frontier(search_job *j) {
    entmtp_status st;
    if ((st = entmtp_session_create(j->model, j->heads, j->eval_bank, &j->sp, &j->s))) return cli_fail("session", st);
    prompt_set first = j->ps; /* one warm-up generation, excluded from every figure */
    first.n = 1;
    if (set_static(j->s, j->n_rows - 1, &j->pol) || run_prompt_set(j->s, &first, &j->ro, &j->rr)) return 1;
    run_result_free(&j->rr);
    run_options ar_opt = j->ro;
    ar_opt.autoregressive = 1;
    j->timing = calloc((size_t)j->n_rows + 1, sizeof *j->timing);
    if (!j->timing) return cli_fail("search", ENTMTP_ERR_OUT_OF_MEMORY);
    for (int32_t p = 0; p < j->ps.n; p++) {
        if (run_prompt(j->s, &j->ps, p, &ar_opt, &j->timing[j->n_rows])) return 1;
        for (int32_t i = 0; i < j->n_rows; i++)
            if (set_static(j->s, i, &j->pol) || run_prompt(j->s, &j->ps, p, &j->ro, &j->timing[i])) return 1;
        search_progress((float)(p + 1) / (float)j->ps.n, "timing the frontier trees", &j->prog);
    }
    j->ar_tps = run_tokens_per_second(&j->timing[j->n_rows]);
    fprintf(stderr, "entmtp search: AR %.2f tokens/s\n", j->ar_tps);
    for (int32_t i = 0; i < j->n_rows; i++) {
        eval_row *r = &j->rows[i];
        r->self = run_accept_length(&j->timing[i]);
        r->tps = run_tokens_per_second(&j->timing[i]);
        fprintf(stderr, "entmtp search: %-7s accept %.3f (%s %.3f), %.2f tokens/s\n", r->name, r->self, j->o->builder,
                r->biased, r->tps);
    }
    int32_t *nodes = malloc((size_t)j->n_rows * sizeof *nodes);
    double *tps = malloc((size_t)j->n_rows * sizeof *tps);
    uint8_t *keep = malloc((size_t)j->n_rows);
    int ok = nodes && tps && keep;
    if (ok) {
        for (int32_t i = 0; i < j->n_rows; i++) { nodes[i] = j->rows[i].nodes; tps[i] = j->rows[i].tps; }
        emt_pareto_max(j->n_rows, nodes, tps, keep);
        for (int32_t i = 0; i < j->n_rows; i++) j->rows[i].keep = keep[i];
    }
    free(nodes);
    free(tps);
    free(keep);
    return ok ? 0 : cli_fail("search", ENTMTP_ERR_OUT_OF_MEMORY);
}

/* The bank: the throughput-Pareto trees, smallest first; static on the fastest. */
static int pareto_bank(search_job *j, const entmtp_bank_params *bp) {
    entmtp_status st;
    if ((st = entmtp_bank_create(bp, &j->bank))) return cli_fail("bank", st);
    j->best = -1;
    for (int32_t i = 0; i < j->n_rows; i++) {
        if (!j->rows[i].keep) continue;
        int32_t idx;
        const emt_frontier_tree *t = i ? &j->fr.trees[i - 1] : NULL;
        st = t ? entmtp_bank_add_tree(j->bank, j->rows[i].name, t->ranks, t->lens, t->n_paths, &idx)
               : entmtp_bank_add_tree_json(j->bank, j->rows[i].name, "[]", &idx);
        if (!st) st = entmtp_bank_set_figures(j->bank, idx, (float)j->rows[i].self, (float)j->rows[i].tps);
        if (st) return cli_fail(j->rows[i].name, st);
        if (j->best < 0 || j->rows[i].tps > j->rows[j->best].tps) j->best = i;
        j->n_kept++;
    }
    int32_t best_idx = 0;
    entmtp_bank_find(j->bank, j->rows[j->best].name, &best_idx);
    j->stat = entmtp_policy_default_config(ENTMTP_POLICY_STATIC);
    j->stat.static_tree = best_idx;
    j->best_tps = j->rows[j->best].tps;
    j->hyst = entmtp_policy_default_config(ENTMTP_POLICY_HYSTERESIS);
    j->ladder = entmtp_policy_default_config(ENTMTP_POLICY_LADDER);
    return 0;
}

/* One calibration sweep entry: the record and the best of its shape. */
static void record_candidate(search_job *j, const entmtp_policy_config *pc, double knob, const run_result *r) {
    double tps = run_tokens_per_second(r);
    int is_hyst = pc->kind == ENTMTP_POLICY_HYSTERESIS;
    cJSON *o = cJSON_CreateObject();
    cJSON_AddStringToObject(o, "policy", is_hyst ? "hysteresis" : "ladder");
    if (is_hyst) {
        cJSON_AddNumberToObject(o, "conservative_tree", pc->conservative_tree);
        cJSON_AddNumberToObject(o, "aggressive_tree", pc->aggressive_tree);
        cJSON_AddNumberToObject(o, "quantile", knob);
        cJSON_AddNumberToObject(o, "tau", pc->tau_on);
    } else {
        cJSON_AddNumberToObject(o, "alpha", knob);
        cJSON_AddItemToObject(o, "thresholds", cJSON_CreateFloatArray(pc->thresholds, pc->n_thresholds));
    }
    cJSON_AddNumberToObject(o, "tokens_per_second", tps);
    cJSON_AddNumberToObject(o, "mean_accept_length", run_accept_length(r));
    cJSON_AddItemToArray(j->sweeps, o);
    entmtp_tree_info ci = { sizeof ci };
    entmtp_bank_tree_info(j->bank, is_hyst ? pc->conservative_tree : pc->ladder_trees[0], &ci);
    fprintf(stderr, "entmtp search: %s from %s, %s %.3g: %.2f tokens/s (static %.2f)\n", is_hyst ? "hysteresis" : "ladder",
            ci.name, is_hyst ? "tau" : "alpha", is_hyst ? (double)pc->tau_on : knob, tps, j->best_tps);
    if (is_hyst && (!j->have_hyst || tps > j->hyst_tps)) { j->hyst = *pc; j->hyst_tps = tps; j->have_hyst = 1; }
    if (!is_hyst && (!j->have_ladder || tps > j->ladder_tps)) {
        j->ladder = *pc; /* keep its arrays: the candidates' go away */
        memcpy(j->ladder_thresholds, pc->thresholds, (size_t)pc->n_thresholds * sizeof *pc->thresholds);
        memcpy(j->ladder_trees, pc->ladder_trees, (size_t)(pc->n_thresholds + 1) * sizeof *pc->ladder_trees);
        j->ladder.thresholds = j->ladder_thresholds;
        j->ladder.ladder_trees = j->ladder_trees;
        j->ladder_tps = tps;
        j->have_ladder = 1;
    }
}

/* Policy calibration: s as the fastest static tree sees it gives the grid.
 * Candidates: static (the in-run reference), hysteresis with the best static
 * tree as aggressive and each smaller bank tree (up to 3) as conservative,
 * tau at a quantile of s; the ladder over the (up to) four bank trees ending
 * at the static one, thresholds at the alpha*b/K quantiles of s. One
 * dimension swept per shape, every candidate on each prompt in turn. */
static int calibrate_policies(search_job *j) {
    int32_t best_idx = j->stat.static_tree;
    entmtp_status st;
    if ((st = entmtp_session_create(j->model, j->heads, j->bank, &j->sp, &j->fs))) return cli_fail("session", st);
    run_options so = j->ro;
    so.keep_s = 1;
    so.label = "collecting s";
    if (run_with(j->fs, &j->pol, &j->stat, &j->ps, &so, &j->rr)) return 1;
    qsort(j->rr.s, (size_t)j->rr.n_s, sizeof *j->rr.s, cmp_float);
    const double qs[] = { 0.1, 0.25, 0.5, 0.75, 0.9 }, alphas[] = { 0.25, 0.5, 0.75, 1.0 };
    entmtp_policy_config cand[1 + 3 * 5 + 4];
    double knob[1 + 3 * 5 + 4];
    int n_cand = 0;
    cand[n_cand] = j->stat;
    knob[n_cand++] = 0;
    for (int32_t c = 0; c < best_idx && c < 3; c++)
        for (size_t q = 0; q < sizeof qs / sizeof qs[0]; q++) {
            entmtp_policy_config pc = j->hyst;
            pc.conservative_tree = c;
            pc.aggressive_tree = best_idx;
            pc.tau_on = pc.tau_off = quantile(j->rr.s, j->rr.n_s, qs[q]);
            cand[n_cand] = pc;
            knob[n_cand++] = qs[q];
        }
    int32_t K = best_idx + 1 < 4 ? best_idx + 1 : 4;
    float ladder_thresholds[4][3]; /* one ladder per alpha; K <= 4 */
    int32_t ladder_trees[4][4];
    for (size_t ai = 0; K >= 3 && ai < sizeof alphas / sizeof alphas[0]; ai++) {
        entmtp_policy_config pc = j->ladder;
        pc.n_thresholds = K - 1;
        for (int32_t b = 0; b < K; b++) ladder_trees[ai][b] = best_idx - (K - 1) + b;
        for (int32_t b = 1; b < K; b++) ladder_thresholds[ai][b - 1] = quantile(j->rr.s, j->rr.n_s, alphas[ai] * b / K);
        pc.thresholds = ladder_thresholds[ai];
        pc.ladder_trees = ladder_trees[ai];
        int distinct = 1;
        for (int32_t b = 1; b < K - 1; b++) distinct &= pc.thresholds[b] > pc.thresholds[b - 1];
        if (!distinct) continue; /* s too concentrated for distinct thresholds */
        cand[n_cand] = pc;
        knob[n_cand++] = alphas[ai];
    }
    run_result_free(&j->rr);
    j->cal = calloc((size_t)n_cand, sizeof *j->cal);
    if (!j->cal) return cli_fail("search", ENTMTP_ERR_OUT_OF_MEMORY);
    for (int32_t p = 0; p < j->ps.n; p++) {
        for (int k = 0; k < n_cand; k++) {
            entmtp_policy_set(j->fs, NULL);
            entmtp_policy_free(j->pol);
            j->pol = NULL;
            if ((st = entmtp_policy_create(&cand[k], &j->pol)) || (st = entmtp_policy_set(j->fs, j->pol)))
                return cli_fail("policy", st);
            if (run_prompt(j->fs, &j->ps, p, &j->ro, &j->cal[k])) return 1;
        }
        search_progress((float)(p + 1) / (float)j->ps.n, "calibrating the policies", &j->prog);
    }
    /* static's figure in this run is the reference the policies must beat */
    j->best_tps = run_tokens_per_second(&j->cal[0]);
    for (int k = 1; k < n_cand; k++) record_candidate(j, &cand[k], knob[k], &j->cal[k]);
    return 0;
}

/* The policies into the bank, the calibration's best first (the default). */
static int store_policies(search_job *j) {
    entmtp_policy_config ucb = entmtp_policy_default_config(ENTMTP_POLICY_UCB);
    const entmtp_policy_config *order[4] = { &j->stat, j->have_hyst ? &j->hyst : NULL, j->have_ladder ? &j->ladder : NULL, &ucb };
    if (j->have_hyst && j->hyst_tps > j->best_tps && (!j->have_ladder || j->hyst_tps >= j->ladder_tps)) {
        order[0] = &j->hyst;
        order[1] = &j->stat;
    } else if (j->have_ladder && j->ladder_tps > j->best_tps && (!j->have_hyst || j->ladder_tps > j->hyst_tps)) {
        order[0] = &j->ladder;
        order[2] = &j->stat;
    }
    entmtp_status st;
    for (int k = 0; k < 4; k++)
        if (order[k] && (st = entmtp_bank_set_policy_config(j->bank, order[k])))
            return cli_fail(entmtp_policy_kind_name(order[k]->kind), st);
    if ((st = entmtp_bank_save(j->bank, j->o->out_path))) return cli_fail(j->o->out_path, st);
    return 0;
}

/* The record of how the bank was made, added to the bank file as "search". */
static int write_record(search_job *j, long depth) {
    const search_options *o = j->o;
    cJSON *search = cJSON_CreateObject();
    cJSON *settings = cJSON_AddObjectToObject(search, "settings");
    cJSON_AddStringToObject(settings, "model", o->model_path);
    cJSON_AddStringToObject(settings, "heads", j->heads_path);
    cJSON_AddStringToObject(settings, "heads_kind", j->hi.kind == ENTMTP_HEADS_HYDRA ? "hydra" : "medusa");
    cJSON_AddStringToObject(settings, "prompt_file", o->prompt_file);
    cJSON_AddNumberToObject(settings, "prompts", j->ps.n);
    cJSON_AddStringToObject(settings, "builder", o->builder);
    cJSON_AddNumberToObject(settings, "budget", (double)o->budget);
    cJSON_AddNumberToObject(settings, "depth", (double)depth);
    cJSON_AddNumberToObject(settings, "max_tokens", (double)o->rs.max_tokens);
    cJSON_AddNumberToObject(settings, "temperature", o->rs.temperature);
    cJSON_AddNumberToObject(settings, "epsilon", o->rs.epsilon);
    cJSON_AddNumberToObject(settings, "delta", o->rs.delta);
    cJSON_AddNumberToObject(settings, "seed", (double)o->rs.seed);
    entmtp_model_info mi = { sizeof mi };
    entmtp_model_get_info(j->model, &mi);
    cJSON_AddStringToObject(settings, "backend", mi.backend == ENTMTP_BACKEND_CUDA ? "cuda" : "cpu");
    cJSON_AddNumberToObject(search, "stage1_seconds", j->t_stage1);
    cJSON_AddNumberToObject(search, "probe_steps", (double)j->fr.probe_steps);
    cJSON_AddNumberToObject(search, "ar_tokens_per_second", j->ar_tps);
    if (j->fr.accuracy) {
        cJSON *acc = cJSON_AddArrayToObject(search, "head_accuracy"); /* [level][rank] */
        for (int32_t d = 0; d < j->fr.accuracy_levels; d++)
            cJSON_AddItemToArray(acc, cJSON_CreateDoubleArray(j->fr.accuracy + (size_t)d * j->fr.accuracy_topk,
                                                              j->fr.accuracy_topk));
    }
    cJSON *trees = cJSON_AddArrayToObject(search, "frontier");
    for (int32_t i = 0; i < j->n_rows; i++) {
        const eval_row *r = &j->rows[i];
        cJSON *t = cJSON_CreateObject();
        cJSON_AddStringToObject(t, "name", r->name);
        cJSON_AddNumberToObject(t, "nodes", r->nodes);
        cJSON_AddNumberToObject(t, "depth", r->depth);
        cJSON_AddNumberToObject(t, "biased_accept_length", r->biased);
        cJSON_AddNumberToObject(t, "self_accept_length", r->self);
        cJSON_AddNumberToObject(t, "bias", r->self > 0 ? (r->biased - r->self) / r->self : 0);
        cJSON_AddNumberToObject(t, "tokens_per_second", r->tps);
        cJSON_AddBoolToObject(t, "pareto", r->keep);
        const emt_frontier_tree *ft = i ? &j->fr.trees[i - 1] : NULL;
        cJSON_AddItemToObject(t, "choices", ft ? choices_json(ft->ranks, ft->lens, ft->n_paths) : cJSON_CreateArray());
        cJSON_AddItemToArray(trees, t);
    }
    cJSON *jcal = cJSON_AddObjectToObject(search, "calibration");
    cJSON_AddNumberToObject(jcal, "static_tokens_per_second", j->best_tps);
    if (j->have_hyst) cJSON_AddNumberToObject(jcal, "hysteresis_tokens_per_second", j->hyst_tps);
    if (j->have_ladder) cJSON_AddNumberToObject(jcal, "ladder_tokens_per_second", j->ladder_tps);
    cJSON_AddItemToObject(jcal, "sweeps", j->sweeps);
    j->sweeps = NULL;
    if (annotate_bank(o->out_path, search)) return 1; /* annotate_bank owns `search` */
    fprintf(stderr, "entmtp search: wrote %s: %d trees (Pareto over %d), static %s at %.2f tokens/s (AR %.2f)%s\n",
            o->out_path, j->n_kept, j->n_rows, j->rows[j->best].name, j->best_tps, j->ar_tps,
            j->have_hyst ? "; hysteresis calibrated" : "");
    return 0;
}

/* The frontier plot (default: the bank path with .png); the bank stands without it. */
static void plot_frontier(const search_options *o) {
    char plot_path[4096];
    const char *plot = o->plot;
    if (!plot) {
        snprintf(plot_path, sizeof plot_path, "%s", o->out_path);
        char *dot = strrchr(plot_path, '.');
        if (dot && !strchr(dot, '/')) *dot = '\0';
        strncat(plot_path, ".png", sizeof plot_path - strlen(plot_path) - 1);
        plot = plot_path;
    }
    cli_plot("search", "plot_search.py", o->plot_script, o->out_path, plot);
}

int cmd_search(int argc, char **argv) {
    search_options o;
    int rc = parse_options(argc, argv, &o);
    if (rc) return rc == 1 ? 0 : rc;
    search_job j = { .o = &o, .prog = { emt_now(), { "", -1 } }, .sweeps = cJSON_CreateArray() };
    if ((rc = load_inputs(&j))) goto done;
    long depth = o.depth ? o.depth : (j.hi.n_heads < 4 ? j.hi.n_heads : 4);
    if (depth < 1 || depth > j.hi.n_heads) {
        fprintf(stderr, "entmtp search: --depth %ld: the heads draft at most %d tokens\n", depth, j.hi.n_heads);
        rc = 1;
        goto done;
    }
    fprintf(stderr, "entmtp search: %d prompts from %s; %s heads (%d); budget %ld nodes, depth %ld, %ld tokens per "
                    "rollout, temperature %g\n", j.ps.n, o.prompt_file, j.hi.kind == ENTMTP_HEADS_HYDRA ? "Hydra" : "Medusa",
            j.hi.n_heads, o.budget, depth, o.rs.max_tokens, (double)o.rs.temperature);
    entmtp_bank_params bp = entmtp_bank_default_params();
    bp.max_depth = (int32_t)depth;
    if ((rc = run_stage1(&j, depth)) || (rc = frontier_bank(&j, &bp)) || (rc = time_frontier(&j)) ||
        (rc = pareto_bank(&j, &bp)))
        goto done;
    if (!o.no_calibrate && j.stat.static_tree > 0 && (rc = calibrate_policies(&j))) goto done;
    if ((rc = store_policies(&j)) || (rc = write_record(&j, depth))) goto done;
    plot_frontier(&o);
done:
    search_job_free(&j);
    return rc;
}
