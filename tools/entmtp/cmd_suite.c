/* entmtp bench --suite: Table 1 of the EntMTP paper for one model. Per task
 * (a prompt set and the bank `entmtp search` built for it), in one run:
 *
 *   AR, Medusa default tree, Hydra default tree, EntMTP static task-optimal
 *   tree, EntMTP-tau (hysteresis), threshold ladder, UCB bandit
 *
 * with tokens/s (prompt prefill inside the timed region, one warm-up
 * generation excluded), speedup over AR, mean accept length, and the
 * continuation perplexity under the base model (lossless rows equal AR's). */
#include "cli.h"
#include "prompts.h"

#include "common/common.h"
#include "engine/engine.h"
#include "policy/policy_internal.h"

#include <cjson/cJSON.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MAX_TASKS 8

static void usage(FILE *f) {
    fprintf(f,
            "usage: entmtp bench --suite --model PATH --medusa-heads PATH --hydra-heads PATH\n"
            "                    --task NAME=PROMPTS.jsonl[,BANK.json] [--task ...] [options]\n"
            "\n"
            "  --task NAME=P[,B]  a task: its prompt set and the bank `entmtp search` made for it\n"
            "                     (without a bank the EntMTP rows are skipped)\n"
            "  --prompts N        prompts per task (default 100)\n"
            "  --max-tokens N     tokens per prompt (default 256)\n"
            "  --temperature T    default 0.7 (typical acceptance; 0 = greedy; alias --temp)\n"
            "  --epsilon E --delta D --seed S\n"
            "  --every-tree       also a static row for every bank tree (the best static tree, measured)\n"
            "  --static-trees A,B also a static row for each named bank tree\n"
            "  --no-default-trees skip the Medusa and Hydra default-tree rows\n"
            "  --json F           all figures;  --plot F.png  bar chart;  --markdown F  the table\n"
            "  --plot-script PY   plotting script (default: plot_suite.py installed with entmtp)\n"
            "  --backend B --threads N\n");
}

typedef struct task {
    char name[64];
    char spec[1024]; /* "PROMPTS.jsonl[,BANK.json]", split in place */
    const char *prompts, *bank;
} task;

typedef struct row {
    const char *method;
    char key[80], name[96]; /* per-tree rows */
    double tps, accept, ppl;
    int64_t tokens, steps;
    int ran;
    int same_as_ar; /* greedy: every continuation equals AR's */
} row;

/* --every-tree adds one static row per bank tree (R_TREE0 + k, k < MAX_TREE_ROWS) */
#define MAX_TREE_ROWS 16
enum { R_AR, R_MEDUSA, R_HYDRA, R_STATIC, R_TAU, R_LADDER, R_UCB, R_THROUGHPUT, R_DYNAMIC, R_TREE0,
       N_ROWS = R_TREE0 + MAX_TREE_ROWS };
static const char *row_names[R_TREE0] = { "AR", "Medusa (default tree)", "Hydra (default tree)",
                                          "EntMTP (static task-optimal tree)", "EntMTP-tau (hysteresis)",
                                          "threshold ladder", "UCB bandit", "EntMTP expected throughput",
                                          "EntMTP dynamic tree" };
static const char *row_keys[R_TREE0] = { "ar", "medusa_default", "hydra_default", "entmtp_static",
                                         "entmtp_tau", "ladder", "ucb", "entmtp_throughput", "entmtp_dynamic" };

/* Perplexity of every prompt's continuation, pooled over tokens. */
static int perplexity(entmtp_session *scorer, const prompt_set *ps, const run_result *rr, double *ppl) {
    double nll = 0;
    int64_t n = 0;
    for (int32_t p = 0; p < ps->n; p++) {
        int32_t len = ps->lens[p] + rr->out_lens[p];
        if (rr->out_lens[p] == 0) continue;
        int32_t *all = malloc((size_t)len * sizeof *all);
        if (!all) return cli_fail("perplexity", ENTMTP_ERR_OUT_OF_MEMORY);
        memcpy(all, ps->tokens[p], (size_t)ps->lens[p] * sizeof *all);
        memcpy(all + ps->lens[p], rr->out_tokens[p], (size_t)rr->out_lens[p] * sizeof *all);
        double s = 0;
        int32_t k = 0;
        entmtp_status st = emt_session_score(scorer, all, len, ps->lens[p], &s, &k);
        free(all);
        if (st) return cli_fail("perplexity", st);
        nll += s;
        n += k;
    }
    *ppl = n ? exp(nll / (double)n) : 0;
    return 0;
}

static int same_continuations(const prompt_set *ps, const run_result *a, const run_result *b) {
    for (int32_t p = 0; p < ps->n; p++)
        if (a->out_lens[p] != b->out_lens[p] ||
            memcmp(a->out_tokens[p], b->out_tokens[p], (size_t)a->out_lens[p] * sizeof(int32_t)))
            return 0;
    return 1;
}

/* Whether `name` is one of the comma-separated names in `list` (NULL: none). */
static int cli_name_in_list(const char *name, const char *list) {
    size_t n = strlen(name);
    for (const char *p = list; p && *p;) {
        const char *end = strchr(p, ',');
        size_t len = end ? (size_t)(end - p) : strlen(p);
        if (len == n && !strncmp(p, name, n)) return 1;
        p = end ? end + 1 : NULL;
    }
    return 0;
}

/* A session over `heads` and `bank` with policy settings `pc`. */
static int session_with(entmtp_model *m, entmtp_heads *h, entmtp_bank *b, const entmtp_session_params *sp,
                        const entmtp_policy_config *pc, entmtp_session **s, entmtp_policy **pol) {
    entmtp_status st;
    if ((st = entmtp_policy_create(pc, pol))) return cli_fail("policy", st);
    if ((st = entmtp_session_create(m, h, b, sp, s))) return cli_fail("session", st);
    if ((st = entmtp_policy_set(*s, *pol))) return cli_fail("policy", st);
    return 0;
}

static void free_session(entmtp_session **s, entmtp_policy **pol) {
    if (*s) entmtp_policy_set(*s, NULL);
    entmtp_session_free(*s);
    entmtp_policy_free(*pol);
    *s = NULL;
    *pol = NULL;
}

typedef struct task_list {
    task *tasks; /* MAX_TASKS */
    int n;
} task_list;

/* --task NAME=PROMPTS[,BANK.json] */
static int add_task(const char *cmd, const char *v, void *out) {
    task_list *tl = out;
    const char *eq = strchr(v, '=');
    if (!eq || eq == v || eq - v >= (long)sizeof tl->tasks[0].name || strlen(eq + 1) >= sizeof tl->tasks[0].spec ||
        tl->n == MAX_TASKS) {
        fprintf(stderr, "entmtp %s: --task '%s': expected NAME=PROMPTS.jsonl[,BANK.json] (at most %d tasks)\n", cmd, v,
                MAX_TASKS);
        return 0;
    }
    task *t = &tl->tasks[tl->n++];
    memset(t, 0, sizeof *t);
    memcpy(t->name, v, (size_t)(eq - v));
    char *rest = t->spec;
    memcpy(rest, eq + 1, strlen(eq + 1) + 1);
    char *comma = strchr(rest, ',');
    if (comma) { *comma = '\0'; t->bank = comma + 1; }
    t->prompts = rest;
    return 1;
}

typedef struct suite_options {
    const char *model_path, *medusa_path, *hydra_path, *json_path, *plot_path, *plot_script, *md_path;
    const char *static_trees; /* comma-separated tree names */
    task tasks[MAX_TASKS];
    int n_tasks, every_tree, no_default_trees;
    cli_run_settings rs;
} suite_options;

static int parse_options(int argc, char **argv, suite_options *o) {
    memset(o, 0, sizeof *o);
    o->rs = (cli_run_settings)CLI_RUN_DEFAULTS;
    int suite = 0;
    task_list tl = { o->tasks, 0 };
    const cli_option opts[] = {
        { "--suite", CLI_FLAG, &suite },
        { "--every-tree", CLI_FLAG, &o->every_tree },
        { "--no-default-trees", CLI_FLAG, &o->no_default_trees },
        { "--model", CLI_STRING, &o->model_path },
        { "--medusa-heads", CLI_STRING, &o->medusa_path },
        { "--hydra-heads", CLI_STRING, &o->hydra_path },
        { "--json", CLI_STRING, &o->json_path },
        CLI_PLOT_OPTIONS(&o->plot_path, &o->plot_script),
        { "--markdown", CLI_STRING, &o->md_path },
        { "--static-trees", CLI_STRING, &o->static_trees },
        { "--task", CLI_CALL, &tl, 0, 0, add_task },
        CLI_RUN_OPTIONS(&o->rs),
    };
    int rc = cli_parse("bench --suite", argc, argv, CLI_TABLE(opts), usage);
    if (rc) return rc;
    o->n_tasks = tl.n;
    if (!o->model_path || !o->medusa_path || !o->hydra_path || o->n_tasks == 0 || o->rs.n_prompts < 1 ||
        o->rs.max_tokens < 1) {
        fprintf(stderr, "entmtp bench --suite: --model, --medusa-heads, --hydra-heads and at least one --task are required\n");
        usage(stderr);
        return 2;
    }
    return 0;
}

/* The model, both heads, the published default trees and the scorer, shared
 * by every task; the rows' sessions and results of the task being run. */
typedef struct suite_job {
    const suite_options *o;
    entmtp_model *model;
    entmtp_model_info mi;
    entmtp_heads *medusa, *hydra;
    entmtp_bank *defaults, *bank;
    int default_ok[2]; /* Medusa, Hydra: heads deep enough for their default tree */
    entmtp_session *scorer;
    entmtp_session_params sp;
    prompt_set ps;
    entmtp_session *sess[N_ROWS];
    entmtp_policy *pols[N_ROWS];
    run_result res[N_ROWS];
    row rows[MAX_TASKS][N_ROWS];
} suite_job;

static void release_task(suite_job *j) {
    for (int k = 0; k < N_ROWS; k++) {
        free_session(&j->sess[k], &j->pols[k]);
        run_result_free(&j->res[k]);
    }
    entmtp_bank_free(j->bank);
    j->bank = NULL;
    prompt_set_free(&j->ps);
}

static void suite_job_free(suite_job *j) {
    release_task(j);
    entmtp_session_free(j->scorer);
    entmtp_bank_free(j->defaults);
    entmtp_heads_free(j->medusa);
    entmtp_heads_free(j->hydra);
    entmtp_model_free(j->model);
}

static int load_shared(suite_job *j) {
    const suite_options *o = j->o;
    if (cli_run_load_model(&o->rs, o->model_path, &j->model)) return 1;
    entmtp_status st;
    if ((st = entmtp_heads_load(j->model, o->medusa_path, &j->medusa))) return cli_fail(o->medusa_path, st);
    if ((st = entmtp_heads_load(j->model, o->hydra_path, &j->hydra))) return cli_fail(o->hydra_path, st);
    entmtp_bank_params bp = entmtp_bank_default_params();
    bp.max_depth = 4;
    if ((st = entmtp_bank_create(&bp, &j->defaults)) ||
        (st = entmtp_bank_add_builtin(j->defaults, "medusa_vicuna_7b_stage2", NULL)) ||
        (st = entmtp_bank_add_builtin(j->defaults, "hydra_default", NULL)))
        return cli_fail("default trees", st);
    /* the published default trees are 4 deep: rows whose heads draft fewer tokens are skipped */
    for (int h = 0; h < 2; h++) {
        entmtp_heads_info hi = { sizeof hi };
        entmtp_heads_get_info(h ? j->hydra : j->medusa, &hi);
        j->default_ok[h] = hi.n_heads >= 4 && !o->no_default_trees;
        if (!j->default_ok[h] && !o->no_default_trees)
            fprintf(stderr, "entmtp bench --suite: %s draft %d tokens; the default tree needs 4: row skipped\n",
                    h ? o->hydra_path : o->medusa_path, hi.n_heads);
    }
    j->sp = cli_run_session_params(&o->rs);
    entmtp_session_params scp = entmtp_session_default_params();
    if ((st = emt_session_create_sized(j->model, NULL, NULL, &scp, 64, 0, 1, &j->scorer))) return cli_fail("scorer", st);
    j->mi = (entmtp_model_info){ sizeof j->mi };
    entmtp_model_get_info(j->model, &j->mi);
    return 0;
}

/* The heads a bank was searched with (its "search" record), Hydra by default. */
static entmtp_heads *bank_heads(const suite_job *j, const char *bank_path) {
    entmtp_heads *bh = j->hydra;
    char *text = NULL;
    if (!emt_read_file(bank_path, &text, NULL)) {
        cJSON *bj = cJSON_Parse(text);
        const cJSON *kind = cJSON_GetObjectItem(cJSON_GetObjectItem(cJSON_GetObjectItem(bj, "search"), "settings"), "heads_kind");
        if (cJSON_IsString(kind) && !strcmp(kind->valuestring, "medusa")) bh = j->medusa;
        cJSON_Delete(bj);
        free(text);
    }
    return bh;
}

/* The task's bank with each of its policies (and static rows per tree when
 * asked), on the heads it was searched with. */
static int open_bank_rows(suite_job *j, const task *t, row *R, const entmtp_session_params *tsp) {
    entmtp_status st;
    if ((st = entmtp_bank_load(t->bank, NULL, &j->bank))) return cli_fail(t->bank, st);
    entmtp_heads *bh = bank_heads(j, t->bank);
    const entmtp_policy_kind kinds[] = { ENTMTP_POLICY_STATIC, ENTMTP_POLICY_HYSTERESIS, ENTMTP_POLICY_LADDER,
                                         ENTMTP_POLICY_UCB, EMT_POLICY_THROUGHPUT, EMT_POLICY_DYNAMIC };
    for (int k = 0; k < 6; k++) {
        entmtp_policy_config pc = { sizeof pc };
        if (entmtp_bank_policy_config(j->bank, kinds[k], &pc)) {
            if (kinds[k] != EMT_POLICY_THROUGHPUT && kinds[k] != EMT_POLICY_DYNAMIC) {
                fprintf(stderr, "entmtp bench --suite: %s holds no %s settings; row skipped\n", t->bank,
                        entmtp_policy_kind_name(kinds[k]));
                continue;
            }
            pc = entmtp_policy_default_config(kinds[k]); /* they have no settings to calibrate */
        }
        if (session_with(j->model, bh, j->bank, tsp, &pc, &j->sess[R_STATIC + k], &j->pols[R_STATIC + k])) return 1;
    }
    for (int32_t k = 0; k < entmtp_bank_size(j->bank) && k < MAX_TREE_ROWS; k++) {
        entmtp_policy_config pc = entmtp_policy_default_config(ENTMTP_POLICY_STATIC);
        pc.static_tree = k;
        entmtp_tree_info ti = { sizeof ti };
        entmtp_bank_tree_info(j->bank, k, &ti);
        if (!j->o->every_tree && !cli_name_in_list(ti.name, j->o->static_trees)) continue;
        row *r = &R[R_TREE0 + k];
        snprintf(r->name, sizeof r->name, "static tree %.40s", ti.name);
        snprintf(r->key, sizeof r->key, "static_%.40s", ti.name);
        r->method = r->name;
        if (session_with(j->model, bh, j->bank, tsp, &pc, &j->sess[R_TREE0 + k], &j->pols[R_TREE0 + k])) return 1;
    }
    return 0;
}

/* One session per row, all alive, so the rows run interleaved prompt by
 * prompt: timing drift on a shared machine then hits them alike. */
static int open_rows(suite_job *j, const task *t, row *R) {
    entmtp_session_params tsp = j->sp;
    int32_t longest = 0, max_tokens = (int32_t)j->o->rs.max_tokens;
    for (int32_t p = 0; p < j->ps.n; p++) if (j->ps.lens[p] > longest) longest = j->ps.lens[p];
    tsp.kv_capacity = longest + max_tokens + 8 < j->mi.context_length ? longest + max_tokens + 8 : j->mi.context_length;
    entmtp_status st;
    if ((st = entmtp_session_create(j->model, NULL, NULL, &tsp, &j->sess[R_AR]))) return cli_fail("session", st);
    for (int h = 0; h < 2; h++) {
        if (!j->default_ok[h]) continue;
        entmtp_policy_config pc = entmtp_policy_default_config(ENTMTP_POLICY_STATIC);
        pc.static_tree = h;
        if (session_with(j->model, h ? j->hydra : j->medusa, j->defaults, &tsp, &pc, &j->sess[R_MEDUSA + h],
                         &j->pols[R_MEDUSA + h]))
            return 1;
    }
    return t->bank ? open_bank_rows(j, t, R, &tsp) : 0;
}

/* A warm-up generation per row, then every prompt through every row; the
 * rows' figures, perplexity and whether they emitted AR's tokens. */
static int run_rows(suite_job *j, const task *t, row *R) {
    run_options ro = { (int32_t)j->o->rs.max_tokens, 0, 0, 0, NULL };
    ro.keep_tokens = 1;
    run_options ar = ro;
    ar.autoregressive = 1;
    for (int k = 0; k < N_ROWS; k++)
        if (j->sess[k] && run_result_init(&j->res[k], &j->ps, k == R_AR ? &ar : &ro)) return 1;
    for (int k = 0; k < N_ROWS; k++) {
        run_result wr = { 0 };
        if (!j->sess[k]) continue;
        int bad = run_result_init(&wr, &j->ps, &ro) || run_prompt(j->sess[k], &j->ps, 0, k == R_AR ? &ar : &ro, &wr);
        run_result_free(&wr);
        if (bad) return 1;
    }
    char label[160];
    snprintf(label, sizeof label, "bench --suite, task %.60s", t->name);
    for (int32_t p = 0; p < j->ps.n; p++) {
        for (int k = 0; k < N_ROWS; k++)
            if (j->sess[k] && run_prompt(j->sess[k], &j->ps, p, k == R_AR ? &ar : &ro, &j->res[k])) return 1;
        cli_progress_long((float)(p + 1) / (float)j->ps.n, label);
    }
    for (int k = 0; k < N_ROWS; k++) {
        if (!j->sess[k]) continue;
        row *r = &R[k];
        if (perplexity(j->scorer, &j->ps, &j->res[k], &r->ppl)) return 1;
        r->tps = run_tokens_per_second(&j->res[k]);
        r->accept = run_accept_length(&j->res[k]);
        r->tokens = j->res[k].tokens;
        r->steps = j->res[k].steps;
        r->ran = 1;
        r->same_as_ar = same_continuations(&j->ps, &j->res[R_AR], &j->res[k]);
    }
    return 0;
}

static cJSON *task_json(const task *t, const row *R, int32_t n_prompts) {
    cJSON *jt = cJSON_CreateObject();
    cJSON_AddStringToObject(jt, "task", t->name);
    cJSON_AddStringToObject(jt, "prompts_file", t->prompts);
    if (t->bank) cJSON_AddStringToObject(jt, "bank", t->bank);
    cJSON_AddNumberToObject(jt, "prompts", n_prompts);
    cJSON *jr = cJSON_AddArrayToObject(jt, "rows");
    for (int k = 0; k < N_ROWS; k++) {
        if (!R[k].ran) continue;
        cJSON *o = cJSON_CreateObject();
        cJSON_AddStringToObject(o, "key", k < R_TREE0 ? row_keys[k] : R[k].key);
        cJSON_AddStringToObject(o, "method", R[k].method);
        cJSON_AddNumberToObject(o, "tokens_per_second", R[k].tps);
        cJSON_AddNumberToObject(o, "speedup", R[R_AR].tps > 0 ? R[k].tps / R[R_AR].tps : 0);
        cJSON_AddNumberToObject(o, "mean_accept_length", R[k].accept);
        cJSON_AddNumberToObject(o, "perplexity", R[k].ppl);
        cJSON_AddNumberToObject(o, "tokens", (double)R[k].tokens);
        cJSON_AddNumberToObject(o, "steps", (double)R[k].steps);
        cJSON_AddBoolToObject(o, "same_tokens_as_ar", R[k].same_as_ar);
        cJSON_AddItemToArray(jr, o);
    }
    return jt;
}

/* One task: its prompts, its rows run, its JSON record appended to `jtasks`. */
static int run_task(suite_job *j, int ti, cJSON *jtasks) {
    const task *t = &j->o->tasks[ti];
    row *R = j->rows[ti];
    for (int k = 0; k < R_TREE0; k++) R[k].method = row_names[k];
    if (prompt_set_load(j->model, t->prompts, (int32_t)j->o->rs.n_prompts, &j->ps)) return 1;
    fprintf(stderr, "entmtp bench --suite: task %s: %d prompts, %ld tokens each, temperature %g\n", t->name, j->ps.n,
            j->o->rs.max_tokens, (double)j->o->rs.temperature);
    if (open_rows(j, t, R) || run_rows(j, t, R)) return 1;
    cJSON_AddItemToArray(jtasks, task_json(t, R, j->ps.n));
    if (j->o->rs.temperature == 0)
        for (int k = 1; k < N_ROWS; k++)
            if (R[k].ran && !R[k].same_as_ar)
                fprintf(stderr, "entmtp bench --suite: task %s: %s emitted other tokens than greedy AR\n", t->name, R[k].method);
    release_task(j);
    return 0;
}

/* The table as the paper prints it, on stdout and in --markdown. */
static int print_tables(const suite_job *j) {
    const suite_options *o = j->o;
    FILE *md = o->md_path ? fopen(o->md_path, "w") : NULL;
    if (o->md_path && !md) { fprintf(stderr, "entmtp bench --suite: cannot write %s\n", o->md_path); return 1; }
    FILE *outs[2] = { stdout, md };
    for (int f = 0; f < 2; f++) {
        if (!outs[f]) continue;
        fprintf(outs[f], "| task | method | tokens/s | speedup | mean accept length | perplexity |\n|---|---|---|---|---|---|\n");
        for (int ti = 0; ti < o->n_tasks; ti++)
            for (int k = 0; k < N_ROWS; k++) {
                const row *r = &j->rows[ti][k];
                if (!r->ran) continue;
                fprintf(outs[f], "| %s | %s | %.2f | %.2fx | %.3f | %.4f |\n", o->tasks[ti].name, r->method, r->tps,
                        j->rows[ti][R_AR].tps > 0 ? r->tps / j->rows[ti][R_AR].tps : 0.0, r->accept, r->ppl);
            }
    }
    if (md) fclose(md);
    return 0;
}

/* --json (all figures and settings) and its --plot. */
static int write_json(const suite_job *j, cJSON *out) {
    const suite_options *o = j->o;
    cJSON *cfg = cJSON_AddObjectToObject(out, "settings");
    cJSON_AddStringToObject(cfg, "model", o->model_path);
    cJSON_AddStringToObject(cfg, "medusa_heads", o->medusa_path);
    cJSON_AddStringToObject(cfg, "hydra_heads", o->hydra_path);
    cJSON_AddNumberToObject(cfg, "max_tokens", (double)o->rs.max_tokens);
    cJSON_AddNumberToObject(cfg, "temperature", o->rs.temperature);
    cJSON_AddNumberToObject(cfg, "epsilon", o->rs.epsilon);
    cJSON_AddNumberToObject(cfg, "delta", o->rs.delta);
    cJSON_AddNumberToObject(cfg, "seed", (double)o->rs.seed);
    cJSON_AddStringToObject(cfg, "backend", j->mi.backend == ENTMTP_BACKEND_CUDA ? "cuda" : "cpu");
    if (!o->json_path) {
        if (o->plot_path) fprintf(stderr, "entmtp bench --suite: --plot needs --json (the plot reads it)\n");
        return 0;
    }
    char *text = cJSON_Print(out);
    FILE *f = text ? fopen(o->json_path, "w") : NULL;
    int bad = !f || fputs(text, f) == EOF;
    if (f) bad |= fclose(f) != 0;
    cJSON_free(text);
    if (bad) { fprintf(stderr, "entmtp bench --suite: cannot write %s\n", o->json_path); return 1; }
    if (o->plot_path) cli_plot("bench --suite", "plot_suite.py", o->plot_script, o->json_path, o->plot_path);
    return 0;
}

int cmd_bench_suite(int argc, char **argv) {
    suite_options *o = calloc(1, sizeof *o); /* tasks hold 1 kB specs: off the stack */
    suite_job *j = calloc(1, sizeof *j);
    int rc = (o && j) ? parse_options(argc, argv, o) : cli_fail("bench --suite", ENTMTP_ERR_OUT_OF_MEMORY);
    cJSON *out = cJSON_CreateObject(), *jtasks = cJSON_AddArrayToObject(out, "tasks");
    if (rc) {
        rc = rc == 1 && o && j ? 0 : rc;
    } else {
        j->o = o;
        rc = load_shared(j);
        for (int ti = 0; !rc && ti < o->n_tasks; ti++) rc = run_task(j, ti, jtasks);
        if (!rc) rc = print_tables(j) || write_json(j, out);
    }
    cJSON_Delete(out);
    if (j) suite_job_free(j);
    free(o);
    free(j);
    return rc;
}
