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
            "  --temperature T    default 0.7 (typical acceptance; 0 = greedy)\n"
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

int cmd_bench_suite(int argc, char **argv) {
    const char *model_path = NULL, *medusa_path = NULL, *hydra_path = NULL;
    const char *json_path = NULL, *plot_path = NULL, *plot_script = NULL, *md_path = NULL;
    task tasks[MAX_TASKS];
    int n_tasks = 0;
    int every_tree = 0, default_trees = 1;
    const char *static_trees = NULL; /* comma-separated tree names */
    int suite = 0, no_default_trees = 0;
    task_list tl = { tasks, 0 };
    cli_run_settings rs = CLI_RUN_DEFAULTS;
    const cli_option opts[] = {
        { "--suite", CLI_FLAG, &suite },
        { "--every-tree", CLI_FLAG, &every_tree },
        { "--no-default-trees", CLI_FLAG, &no_default_trees },
        { "--model", CLI_STRING, &model_path },
        { "--medusa-heads", CLI_STRING, &medusa_path },
        { "--hydra-heads", CLI_STRING, &hydra_path },
        { "--json", CLI_STRING, &json_path },
        CLI_PLOT_OPTIONS(&plot_path, &plot_script),
        { "--markdown", CLI_STRING, &md_path },
        { "--static-trees", CLI_STRING, &static_trees },
        { "--task", CLI_CALL, &tl, 0, 0, add_task },
        CLI_RUN_OPTIONS(&rs),
    };
    int parsed = cli_parse("bench --suite", argc, argv, CLI_TABLE(opts), usage);
    if (parsed) return parsed == 1 ? 0 : parsed;
    /* the run settings under the names the steps below use */
    const long n_prompts = rs.n_prompts, max_tokens = rs.max_tokens, threads = rs.threads;
    const float temperature = rs.temperature, epsilon = rs.epsilon, delta = rs.delta;
    const unsigned long long seed = rs.seed;
    const entmtp_backend backend = rs.backend;
    default_trees = !no_default_trees;
    n_tasks = tl.n;
    if (!model_path || !medusa_path || !hydra_path || n_tasks == 0 || n_prompts < 1 || max_tokens < 1) {
        fprintf(stderr, "entmtp bench --suite: --model, --medusa-heads, --hydra-heads and at least one --task are required\n");
        usage(stderr);
        return 2;
    }

    int rc = 1;
    entmtp_status st;
    entmtp_model *model = NULL;
    entmtp_heads *medusa = NULL, *hydra = NULL;
    entmtp_bank *defaults = NULL, *bank = NULL;
    entmtp_session *scorer = NULL;
    prompt_set ps = { 0 };
    entmtp_session *sess[N_ROWS] = { 0 };
    entmtp_policy *pols[N_ROWS] = { 0 };
    run_result res[N_ROWS];
    memset(res, 0, sizeof res);
    cJSON *out = cJSON_CreateObject(), *jtasks = cJSON_AddArrayToObject(out, "tasks");
    FILE *md = NULL;
    row rows[MAX_TASKS][N_ROWS];
    memset(rows, 0, sizeof rows);

    entmtp_model_params mp = entmtp_model_default_params();
    mp.backend = backend;
    mp.n_threads = (int32_t)threads;
    if ((st = entmtp_model_load(model_path, &mp, &model))) { rc = cli_fail(model_path, st); goto done; }
    if ((st = entmtp_heads_load(model, medusa_path, &medusa))) { rc = cli_fail(medusa_path, st); goto done; }
    if ((st = entmtp_heads_load(model, hydra_path, &hydra))) { rc = cli_fail(hydra_path, st); goto done; }
    entmtp_bank_params bp = entmtp_bank_default_params();
    bp.max_depth = 4;
    if ((st = entmtp_bank_create(&bp, &defaults)) || (st = entmtp_bank_add_builtin(defaults, "medusa_vicuna_7b_stage2", NULL)) ||
        (st = entmtp_bank_add_builtin(defaults, "hydra_default", NULL))) { rc = cli_fail("default trees", st); goto done; }
    /* the published default trees are 4 deep: rows whose heads draft fewer tokens are skipped */
    int default_ok[2];
    for (int h = 0; h < 2; h++) {
        entmtp_heads_info hi = { sizeof hi };
        entmtp_heads_get_info(h ? hydra : medusa, &hi);
        default_ok[h] = hi.n_heads >= 4 && default_trees;
        if (!default_ok[h] && default_trees)
            fprintf(stderr, "entmtp bench --suite: %s draft %d tokens; the default tree needs 4: row skipped\n",
                    h ? hydra_path : medusa_path, hi.n_heads);
    }
    entmtp_session_params sp = entmtp_session_default_params();
    sp.temperature = temperature;
    sp.epsilon = epsilon;
    sp.delta = delta;
    sp.seed = seed;
    entmtp_session_params scp = entmtp_session_default_params();
    if ((st = emt_session_create_sized(model, NULL, NULL, &scp, 64, 0, 1, &scorer))) { rc = cli_fail("scorer", st); goto done; }
    entmtp_model_info mi = { sizeof mi };
    entmtp_model_get_info(model, &mi);
    run_options ro = { (int32_t)max_tokens, 0, 0, 0, NULL };

    for (int ti = 0; ti < n_tasks; ti++) {
        task *t = &tasks[ti];
        row *R = rows[ti];
        for (int k = 0; k < R_TREE0; k++) R[k].method = row_names[k];
        if (prompt_set_load(model, t->prompts, (int32_t)n_prompts, &ps)) goto done;
        fprintf(stderr, "entmtp bench --suite: task %s: %d prompts, %ld tokens each, temperature %g\n", t->name, ps.n,
                max_tokens, (double)temperature);
        /* one session per row, all alive, so the rows run interleaved prompt by
         * prompt: timing drift on a shared machine then hits them alike */
        entmtp_session_params tsp = sp;
        int32_t longest = 0;
        for (int32_t p = 0; p < ps.n; p++) if (ps.lens[p] > longest) longest = ps.lens[p];
        tsp.kv_capacity = longest + (int32_t)max_tokens + 8 < mi.context_length ? longest + (int32_t)max_tokens + 8
                                                                                 : mi.context_length;
        if ((st = entmtp_session_create(model, NULL, NULL, &tsp, &sess[R_AR]))) { rc = cli_fail("session", st); goto done; }
        for (int h = 0; h < 2; h++) {
            if (!default_ok[h]) continue;
            entmtp_policy_config pc = entmtp_policy_default_config(ENTMTP_POLICY_STATIC);
            pc.static_tree = h;
            if ((st = entmtp_policy_create(&pc, &pols[R_MEDUSA + h])) ||
                (st = entmtp_session_create(model, h ? hydra : medusa, defaults, &tsp, &sess[R_MEDUSA + h])) ||
                (st = entmtp_policy_set(sess[R_MEDUSA + h], pols[R_MEDUSA + h]))) { rc = cli_fail("session", st); goto done; }
        }
        /* the task's bank with each of its policies, on the heads it was searched with */
        if (t->bank) {
            if ((st = entmtp_bank_load(t->bank, NULL, &bank))) { rc = cli_fail(t->bank, st); goto done; }
            entmtp_heads *bh = hydra;
            char *text = NULL;
            if (!emt_read_file(t->bank, &text, NULL)) {
                cJSON *bj = cJSON_Parse(text);
                const cJSON *kind = cJSON_GetObjectItem(cJSON_GetObjectItem(cJSON_GetObjectItem(bj, "search"), "settings"), "heads_kind");
                if (cJSON_IsString(kind) && !strcmp(kind->valuestring, "medusa")) bh = medusa;
                cJSON_Delete(bj);
                free(text);
            }
            const entmtp_policy_kind kinds[] = { ENTMTP_POLICY_STATIC, ENTMTP_POLICY_HYSTERESIS, ENTMTP_POLICY_LADDER,
                                                 ENTMTP_POLICY_UCB, EMT_POLICY_THROUGHPUT, EMT_POLICY_DYNAMIC };
            for (int k = 0; k < 6; k++) {
                entmtp_policy_config pc = { sizeof pc };
                if (entmtp_bank_policy_config(bank, kinds[k], &pc)) {
                    if (kinds[k] != EMT_POLICY_THROUGHPUT && kinds[k] != EMT_POLICY_DYNAMIC) {
                        fprintf(stderr, "entmtp bench --suite: %s holds no %s settings; row skipped\n", t->bank,
                                entmtp_policy_kind_name(kinds[k]));
                        continue;
                    }
                    pc = entmtp_policy_default_config(kinds[k]); /* they have no settings to calibrate */
                }
                if (session_with(model, bh, bank, &tsp, &pc, &sess[R_STATIC + k], &pols[R_STATIC + k])) goto done;
            }
            for (int32_t k = 0; k < entmtp_bank_size(bank) && k < MAX_TREE_ROWS; k++) {
                entmtp_policy_config pc = entmtp_policy_default_config(ENTMTP_POLICY_STATIC);
                pc.static_tree = k;
                entmtp_tree_info ti_ = { sizeof ti_ };
                entmtp_bank_tree_info(bank, k, &ti_);
                if (!every_tree && !cli_name_in_list(ti_.name, static_trees)) continue;
                row *r = &R[R_TREE0 + k];
                snprintf(r->name, sizeof r->name, "static tree %.40s", ti_.name);
                snprintf(r->key, sizeof r->key, "static_%.40s", ti_.name);
                r->method = r->name;
                if (session_with(model, bh, bank, &tsp, &pc, &sess[R_TREE0 + k], &pols[R_TREE0 + k])) goto done;
            }
        }
        run_options ar = ro;
        ar.autoregressive = 1;
        ro.keep_tokens = ar.keep_tokens = 1;
        for (int k = 0; k < N_ROWS; k++)
            if (sess[k] && run_result_init(&res[k], &ps, k == R_AR ? &ar : &ro)) goto done;
        /* warm-up: one generation per row, not timed */
        for (int k = 0; k < N_ROWS; k++) {
            run_result wr = { 0 };
            if (!sess[k]) continue;
            int bad = run_result_init(&wr, &ps, &ro) || run_prompt(sess[k], &ps, 0, k == R_AR ? &ar : &ro, &wr);
            run_result_free(&wr);
            if (bad) goto done;
        }
        char label[160];
        snprintf(label, sizeof label, "bench --suite, task %.60s", t->name);
        for (int32_t p = 0; p < ps.n; p++) {
            for (int k = 0; k < N_ROWS; k++)
                if (sess[k] && run_prompt(sess[k], &ps, p, k == R_AR ? &ar : &ro, &res[k])) goto done;
            cli_progress_long((float)(p + 1) / (float)ps.n, label);
        }
        for (int k = 0; k < N_ROWS; k++) {
            if (!sess[k]) continue;
            row *r = &R[k];
            if (perplexity(scorer, &ps, &res[k], &r->ppl)) goto done;
            r->tps = run_tokens_per_second(&res[k]);
            r->accept = run_accept_length(&res[k]);
            r->tokens = res[k].tokens;
            r->steps = res[k].steps;
            r->ran = 1;
            r->same_as_ar = same_continuations(&ps, &res[R_AR], &res[k]);
        }
        for (int k = 0; k < N_ROWS; k++) {
            free_session(&sess[k], &pols[k]);
            run_result_free(&res[k]);
        }
        entmtp_bank_free(bank);
        bank = NULL;
        cJSON *jt = cJSON_CreateObject();
        cJSON_AddStringToObject(jt, "task", t->name);
        cJSON_AddStringToObject(jt, "prompts_file", t->prompts);
        if (t->bank) cJSON_AddStringToObject(jt, "bank", t->bank);
        cJSON_AddNumberToObject(jt, "prompts", ps.n);
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
        cJSON_AddItemToArray(jtasks, jt);
        if (temperature == 0)
            for (int k = 1; k < N_ROWS; k++)
                if (R[k].ran && !R[k].same_as_ar)
                    fprintf(stderr, "entmtp bench --suite: task %s: %s emitted other tokens than greedy AR\n", t->name, R[k].method);
        prompt_set_free(&ps);
    }

    cJSON *cfg = cJSON_AddObjectToObject(out, "settings");
    cJSON_AddStringToObject(cfg, "model", model_path);
    cJSON_AddStringToObject(cfg, "medusa_heads", medusa_path);
    cJSON_AddStringToObject(cfg, "hydra_heads", hydra_path);
    cJSON_AddNumberToObject(cfg, "max_tokens", (double)max_tokens);
    cJSON_AddNumberToObject(cfg, "temperature", temperature);
    cJSON_AddNumberToObject(cfg, "epsilon", epsilon);
    cJSON_AddNumberToObject(cfg, "delta", delta);
    cJSON_AddNumberToObject(cfg, "seed", (double)seed);
    cJSON_AddStringToObject(cfg, "backend", mi.backend == ENTMTP_BACKEND_CUDA ? "cuda" : "cpu");

    /* the table, as the paper prints it */
    md = md_path ? fopen(md_path, "w") : NULL;
    if (md_path && !md) { fprintf(stderr, "entmtp bench --suite: cannot write %s\n", md_path); goto done; }
    FILE *outs[2] = { stdout, md };
    for (int f = 0; f < 2; f++) {
        if (!outs[f]) continue;
        fprintf(outs[f], "| task | method | tokens/s | speedup | mean accept length | perplexity |\n|---|---|---|---|---|---|\n");
        for (int ti = 0; ti < n_tasks; ti++)
            for (int k = 0; k < N_ROWS; k++) {
                const row *r = &rows[ti][k];
                if (!r->ran) continue;
                fprintf(outs[f], "| %s | %s | %.2f | %.2fx | %.3f | %.4f |\n", tasks[ti].name, r->method, r->tps,
                        rows[ti][R_AR].tps > 0 ? r->tps / rows[ti][R_AR].tps : 0.0, r->accept, r->ppl);
            }
    }
    if (json_path) {
        char *text = cJSON_Print(out);
        FILE *f = text ? fopen(json_path, "w") : NULL;
        int bad = !f || fputs(text, f) == EOF;
        if (f) bad |= fclose(f) != 0;
        cJSON_free(text);
        if (bad) { fprintf(stderr, "entmtp bench --suite: cannot write %s\n", json_path); goto done; }
        if (plot_path) cli_plot("bench --suite", "plot_suite.py", plot_script, json_path, plot_path);
    } else if (plot_path) {
        fprintf(stderr, "entmtp bench --suite: --plot needs --json (the plot reads it)\n");
    }
    rc = 0;
done:
    for (int k = 0; k < N_ROWS; k++) {
        free_session(&sess[k], &pols[k]);
        run_result_free(&res[k]);
    }
    if (md) fclose(md);
    cJSON_Delete(out);
    prompt_set_free(&ps);
    entmtp_session_free(scorer);
    entmtp_bank_free(bank);
    entmtp_bank_free(defaults);
    entmtp_heads_free(medusa);
    entmtp_heads_free(hydra);
    entmtp_model_free(model);
    return rc;
}
