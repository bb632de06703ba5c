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
#include "search/calibrate.h"

#include <cjson/cJSON.h>
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

/* The static policy on bank tree `tree` (or any config) into the session. */
static int use_policy(entmtp_session *s, entmtp_policy **pol, const entmtp_policy_config *pc) {
    entmtp_policy_set(s, NULL);
    entmtp_policy_free(*pol);
    *pol = NULL;
    entmtp_status st = entmtp_policy_create(pc, pol);
    if (!st) st = entmtp_policy_set(s, *pol);
    return st ? cli_fail("policy", st) : 0;
}

static int set_static(entmtp_session *s, int32_t tree, entmtp_policy **pol) {
    entmtp_policy_config pc;
    entmtp_policy_config_init(&pc, sizeof pc, ENTMTP_POLICY_STATIC);
    pc.static_tree = tree;
    return use_policy(s, pol, &pc);
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
    emt_frontier_row *rows; /* root-only tree, then the frontier */
    int32_t n_rows;
    run_result rr, *timing, *cal;
    double ar_tps;
    int32_t best, n_kept;
    emt_policy_choice choice; /* policies stored in the bank, with their figures */
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
    entmtp_status st = emt_frontier_rows(&j->fr, bp, &j->rows, &j->eval_bank);
    if (st) return cli_fail("frontier bank", st);
    j->n_rows = j->fr.n + 1;
    return 0;
}

/* Debias: every tree re-run with its own proposals and timed end to end with
 * prefill, beside AR, prompt by prompt (drift on a shared machine hits them
 * alike). */
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
        emt_frontier_row *r = &j->rows[i];
        r->self = run_accept_length(&j->timing[i]);
        r->tps = run_tokens_per_second(&j->timing[i]);
        fprintf(stderr, "entmtp search: %-7s accept %.3f (%s %.3f), %.2f tokens/s\n", r->name, r->self, j->o->builder,
                r->biased, r->tps);
    }
    return 0;
}

/* Stage 2: the bank of the throughput-Pareto trees, smallest first; static
 * on the fastest. */
static int pareto_bank(search_job *j, const entmtp_bank_params *bp) {
    int32_t static_tree;
    entmtp_status st = emt_stage2_bank(&j->fr, j->rows, j->n_rows, bp, &j->bank, &j->best, &static_tree);
    if (st) return cli_fail("stage 2", st);
    for (int32_t i = 0; i < j->n_rows; i++) j->n_kept += j->rows[i].keep;
    emt_policy_choice_init(&j->choice, static_tree, j->rows[j->best].tps);
    return 0;
}

/* One calibration sweep entry: the record and a line. */
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
            ci.name, is_hyst ? "tau" : "alpha", is_hyst ? (double)pc->tau_on : knob, tps, j->choice.static_tps);
}

/* Policy calibration: s as the fastest static tree sees it gives the grid
 * (emt_calibration_grid); every candidate runs on each prompt in turn; the
 * library keeps the best of each shape. */
static int calibrate_policies(search_job *j) {
    entmtp_status st;
    if ((st = entmtp_session_create(j->model, j->heads, j->bank, &j->sp, &j->fs))) return cli_fail("session", st);
    run_options so = j->ro;
    so.keep_s = 1;
    so.label = "collecting s";
    if (use_policy(j->fs, &j->pol, &j->choice.stat) || run_prompt_set(j->fs, &j->ps, &so, &j->rr)) return 1;
    emt_calibration *cal = malloc(sizeof *cal);
    if (!cal) return cli_fail("search", ENTMTP_ERR_OUT_OF_MEMORY);
    emt_calibration_grid(cal, j->rr.s, j->rr.n_s, &j->choice);
    run_result_free(&j->rr);
    int rc = 0;
    j->cal = calloc((size_t)cal->n, sizeof *j->cal);
    if (!j->cal) rc = cli_fail("search", ENTMTP_ERR_OUT_OF_MEMORY);
    for (int32_t p = 0; !rc && p < j->ps.n; p++) {
        for (int32_t k = 0; !rc && k < cal->n; k++)
            rc = use_policy(j->fs, &j->pol, &cal->cand[k]) || run_prompt(j->fs, &j->ps, p, &j->ro, &j->cal[k]);
        search_progress((float)(p + 1) / (float)j->ps.n, "calibrating the policies", &j->prog);
    }
    if (!rc) {
        for (int32_t k = 0; k < cal->n; k++) cal->tps[k] = run_tokens_per_second(&j->cal[k]);
        emt_calibration_pick(cal, &j->choice);
        for (int32_t k = 1; k < cal->n; k++) record_candidate(j, &cal->cand[k], cal->knob[k], &j->cal[k]);
    }
    free(cal);
    return rc;
}

/* The policies into the bank, the calibration's best first (the default). */
static int store_policies(search_job *j) {
    entmtp_status st = emt_policy_choice_store(&j->choice, j->bank);
    if (st) return cli_fail("policy", st);
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
    cJSON_AddStringToObject(settings, "heads_kind", j->hi.kind == ENTMTP_HEADS_HYDRA ? "hydra" : j->hi.kind == ENTMTP_HEADS_EAGLE3 ? "eagle3" : "medusa");
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
        const emt_frontier_row *r = &j->rows[i];
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
    const emt_policy_choice *c = &j->choice;
    cJSON_AddNumberToObject(jcal, "static_tokens_per_second", c->static_tps);
    if (c->have_hyst) cJSON_AddNumberToObject(jcal, "hysteresis_tokens_per_second", c->hyst_tps);
    if (c->have_ladder) cJSON_AddNumberToObject(jcal, "ladder_tokens_per_second", c->ladder_tps);
    cJSON_AddItemToObject(jcal, "sweeps", j->sweeps);
    j->sweeps = NULL;
    if (annotate_bank(o->out_path, search)) return 1; /* annotate_bank owns `search` */
    fprintf(stderr, "entmtp search: wrote %s: %d trees (Pareto over %d), static %s at %.2f tokens/s (AR %.2f)%s\n",
            o->out_path, j->n_kept, j->n_rows, j->rows[j->best].name, c->static_tps, j->ar_tps,
            c->have_hyst ? "; hysteresis calibrated" : "");
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
                    "rollout, temperature %g\n", j.ps.n, o.prompt_file, j.hi.kind == ENTMTP_HEADS_HYDRA ? "Hydra" : j.hi.kind == ENTMTP_HEADS_EAGLE3 ? "EAGLE-3" : "Medusa",
            j.hi.n_heads, o.budget, depth, o.rs.max_tokens, (double)o.rs.temperature);
    entmtp_bank_params bp = entmtp_bank_default_params();
    bp.max_depth = (int32_t)depth;
    if ((rc = run_stage1(&j, depth)) || (rc = frontier_bank(&j, &bp)) || (rc = time_frontier(&j)) ||
        (rc = pareto_bank(&j, &bp)))
        goto done;
    if (!o.no_calibrate && j.choice.stat.static_tree > 0 && (rc = calibrate_policies(&j))) goto done;
    if ((rc = store_policies(&j)) || (rc = write_record(&j, depth))) goto done;
    plot_frontier(&o);
done:
    search_job_free(&j);
    return rc;
}
