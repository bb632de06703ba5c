/* Prompt sets and timed runs over them (see prompts.h). */
#include "prompts.h"

#include "cli.h"
#include "common/common.h"

#include <cjson/cJSON.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int chat_tokens(entmtp_model *model, const char *system_prompt, const char *user, int raw,
                int32_t **out, int32_t *n_out) {
    char *chat = NULL;
    const char *input = user;
    entmtp_status st;
    *out = NULL;
    if (!raw) {
        size_t need = 0;
        st = entmtp_chat_prompt(model, system_prompt, user, NULL, 0, &need);
        if (st == ENTMTP_ERR_BUFFER_TOO_SMALL || st == ENTMTP_OK) {
            chat = malloc(need + 1);
            if (!chat) return cli_fail("chat template", ENTMTP_ERR_OUT_OF_MEMORY);
            if ((st = entmtp_chat_prompt(model, system_prompt, user, chat, need + 1, &need))) {
                free(chat);
                return cli_fail("chat template", st);
            }
            input = chat;
        } else if (st != ENTMTP_ERR_UNSUPPORTED) {
            return cli_fail("chat template", st);
        } else { /* announced, never silent (docs/models.md: plain fallback) */
            fprintf(stderr, "entmtp: %s; using the plain prompt (the message as is)\n", entmtp_last_error());
        }
    }
    int32_t n = 0;
    st = entmtp_tokenize(model, input, -1, ENTMTP_TOKENIZE_ADD_SPECIAL, 1, NULL, 0, &n);
    int32_t *toks = NULL;
    if (st == ENTMTP_ERR_BUFFER_TOO_SMALL || st == ENTMTP_OK) {
        toks = malloc(((size_t)n + 1) * sizeof *toks);
        st = toks ? entmtp_tokenize(model, input, -1, ENTMTP_TOKENIZE_ADD_SPECIAL, 1, toks, n + 1, &n) : ENTMTP_ERR_OUT_OF_MEMORY;
    }
    free(chat);
    if (st) {
        free(toks);
        return cli_fail("tokenize", st);
    }
    *out = toks;
    *n_out = n;
    return 0;
}

int cli_run_load_model(const cli_run_settings *rs, const char *path, entmtp_model **out) {
    entmtp_model_params mp = entmtp_model_default_params();
    mp.backend = rs->backend;
    mp.n_threads = (int32_t)rs->threads;
    return cli_model_load(path, &mp, out, 1);
}

entmtp_session_params cli_run_session_params(const cli_run_settings *rs) {
    entmtp_session_params sp = entmtp_session_default_params();
    sp.temperature = rs->temperature;
    sp.epsilon = rs->epsilon;
    sp.delta = rs->delta;
    sp.seed = rs->seed;
    return sp;
}

void prompt_set_free(prompt_set *ps) {
    if (!ps) return;
    for (int32_t i = 0; i < ps->n; i++) {
        free(ps->tokens[i]);
        free(ps->ids[i]);
        free(ps->tasks[i]);
    }
    free(ps->tokens);
    free(ps->lens);
    free(ps->ids);
    free(ps->tasks);
    memset(ps, 0, sizeof *ps);
}

/* --prompt-file formats: JSON Lines ({"prompt": ..., "id": ..., "task": ...}
 * per line, as tools/prompts/make_prompts.py writes) or plain text (one
 * prompt per line). A .jsonl/.json name means JSON Lines, .txt plain text;
 * otherwise the first non-blank line decides ('{' starts JSON Lines). */
typedef enum { PROMPTS_JSONL, PROMPTS_TEXT } prompt_format;

static const char *skip_blank(const char *p) {
    while (*p == ' ' || *p == '\t' || *p == '\r') p++;
    return p;
}

static int has_suffix(const char *s, const char *suffix) {
    size_t n = strlen(s), m = strlen(suffix);
    return n >= m && !strcmp(s + n - m, suffix);
}

static prompt_format detect_format(const char *path, const char *text) {
    if (has_suffix(path, ".jsonl") || has_suffix(path, ".json")) return PROMPTS_JSONL;
    if (has_suffix(path, ".txt")) return PROMPTS_TEXT;
    const char *p = text;
    while (*p == ' ' || *p == '\t' || *p == '\r' || *p == '\n') p++;
    return *p == '{' ? PROMPTS_JSONL : PROMPTS_TEXT;
}

/* One line's prompt, id and task (each malloc'ed); 0 on success. */
static int parse_line(const char *path, int line_no, const char *line, prompt_format format, char **prompt,
                      char **id, char **task) {
    char fallback[32];
    snprintf(fallback, sizeof fallback, "line-%d", line_no);
    if (format == PROMPTS_TEXT) {
        size_t n = strlen(line);
        while (n && (line[n - 1] == '\r' || line[n - 1] == ' ' || line[n - 1] == '\t')) n--;
        *prompt = strndup(line, n);
        *id = strdup(fallback);
        *task = strdup("");
        return !*prompt || !*id || !*task;
    }
    cJSON *o = cJSON_Parse(line);
    const cJSON *text = cJSON_GetObjectItemCaseSensitive(o, "prompt");
    if (!cJSON_IsObject(o) || !cJSON_IsString(text)) {
        fprintf(stderr,
                "entmtp: %s:%d: expected a JSON object with a string \"prompt\" (JSON Lines, as "
                "tools/prompts/make_prompts.py writes); for plain text, one prompt per line, name the file *.txt\n",
                path, line_no);
        cJSON_Delete(o);
        return 1;
    }
    const cJSON *jid = cJSON_GetObjectItemCaseSensitive(o, "id"), *jtask = cJSON_GetObjectItemCaseSensitive(o, "task");
    *prompt = strdup(text->valuestring);
    *id = strdup(cJSON_IsString(jid) ? jid->valuestring : fallback);
    *task = strdup(cJSON_IsString(jtask) ? jtask->valuestring : "");
    cJSON_Delete(o);
    return !*prompt || !*id || !*task;
}

/* Room for one more prompt in `out`; 0 on success. */
static int grow(prompt_set *out, int32_t *cap) {
    if (out->n < *cap) return 0;
    int32_t ncap = *cap ? 2 * *cap : 64;
    int32_t **t = realloc(out->tokens, (size_t)ncap * sizeof *t);
    if (t) out->tokens = t;
    int32_t *l = realloc(out->lens, (size_t)ncap * sizeof *l);
    if (l) out->lens = l;
    char **ids = realloc(out->ids, (size_t)ncap * sizeof *ids);
    if (ids) out->ids = ids;
    char **tasks = realloc(out->tasks, (size_t)ncap * sizeof *tasks);
    if (tasks) out->tasks = tasks;
    if (!t || !l || !ids || !tasks) return 1;
    *cap = ncap;
    return 0;
}

int prompt_set_load(entmtp_model *model, const char *path, int32_t limit, prompt_set *out) {
    memset(out, 0, sizeof *out);
    char *text = NULL;
    entmtp_status st = emt_read_file(path, &text, NULL);
    if (st) return cli_fail(path, st);
    prompt_format format = detect_format(path, text);
    int32_t cap = 0, line_no = 0, rc = 0;
    for (char *line = text, *next; line && *line && (!limit || out->n < limit); line = next) {
        next = strchr(line, '\n');
        if (next) *next++ = '\0';
        line_no++;
        const char *p = skip_blank(line);
        if (!*p) continue;
        char *prompt = NULL;
        if (grow(out, &cap)) { rc = cli_fail(path, ENTMTP_ERR_OUT_OF_MEMORY); break; }
        int32_t i = out->n;
        out->ids[i] = out->tasks[i] = NULL;
        out->tokens[i] = NULL;
        out->n++; /* owned from here on: prompt_set_free releases it */
        if (parse_line(path, line_no, p, format, &prompt, &out->ids[i], &out->tasks[i]) ||
            chat_tokens(model, NULL, prompt, 0, &out->tokens[i], &out->lens[i])) {
            if (prompt) fprintf(stderr, "entmtp: %s:%d: prompt could not be prepared\n", path, line_no);
            free(prompt);
            rc = 1;
            break;
        }
        free(prompt);
    }
    free(text);
    if (!rc && out->n == 0) {
        fprintf(stderr, "entmtp: %s: no prompts\n", path);
        rc = 1;
    }
    if (rc) prompt_set_free(out);
    return rc;
}

void run_result_free(run_result *r) {
    if (!r) return;
    free(r->s);
    if (r->out_tokens) {
        for (int32_t i = 0; r->out_lens && r->out_tokens[i]; i++) free(r->out_tokens[i]);
    }
    free(r->out_tokens);
    free(r->out_lens);
    memset(r, 0, sizeof *r);
}

static int keep_s(run_result *r, float s) {
    if (r->n_s == r->s_cap) {
        r->s_cap = r->s_cap ? 2 * r->s_cap : 1024;
        float *n = realloc(r->s, (size_t)r->s_cap * sizeof *n);
        if (!n) return 1;
        r->s = n;
    }
    r->s[r->n_s++] = s;
    return 0;
}

int run_result_init(run_result *out, const prompt_set *ps, const run_options *opt) {
    memset(out, 0, sizeof *out);
    if (!opt->keep_tokens) return 0;
    out->out_tokens = calloc((size_t)ps->n + 1, sizeof *out->out_tokens);
    out->out_lens = calloc((size_t)ps->n + 1, sizeof *out->out_lens);
    if (!out->out_tokens || !out->out_lens) return cli_fail("run", ENTMTP_ERR_OUT_OF_MEMORY);
    return 0;
}

int run_prompt(entmtp_session *s, const prompt_set *ps, int32_t p, const run_options *opt, run_result *out) {
    entmtp_session_reset(s);
    double t0 = emt_now();
    entmtp_status st = entmtp_session_prefill(s, ps->tokens[p], ps->lens[p]);
    if (st) {
        char what[160];
        snprintf(what, sizeof what, "prompt %s", ps->ids[p]);
        return cli_fail(what, st);
    }
    double t1 = emt_now();
    int32_t generated = 0;
    while (generated < opt->max_tokens) {
        entmtp_step_result r = { .struct_size = sizeof r };
        st = opt->autoregressive ? entmtp_step_ar(s, &r) : entmtp_step(s, opt->max_tokens - generated, &r);
        if (st && st != ENTMTP_ERR_KV_FULL) {
            char what[160];
            snprintf(what, sizeof what, "prompt %s, step %lld", ps->ids[p], (long long)out->steps);
            return cli_fail(what, st);
        }
        if (r.n_tokens > 0) {
            out->steps++;
            generated += r.n_tokens;
            if (opt->keep_s && keep_s(out, r.s)) return cli_fail("run", ENTMTP_ERR_OUT_OF_MEMORY);
        }
        if (st || r.stopped) break;
    }
    double t2 = emt_now();
    out->tokens += generated;
    out->prompt_tokens += ps->lens[p];
    out->seconds += t2 - t0;
    out->prefill_seconds += t1 - t0;
    if (opt->keep_tokens) {
        const int32_t *all;
        int32_t n_all;
        entmtp_session_tokens(s, &all, &n_all);
        free(out->out_tokens[p]);
        out->out_lens[p] = n_all - ps->lens[p];
        out->out_tokens[p] = malloc(((size_t)out->out_lens[p] + 1) * sizeof(int32_t));
        if (!out->out_tokens[p]) return cli_fail("run", ENTMTP_ERR_OUT_OF_MEMORY);
        memcpy(out->out_tokens[p], all + ps->lens[p], (size_t)out->out_lens[p] * sizeof(int32_t));
    }
    return 0;
}

int run_prompt_set(entmtp_session *s, const prompt_set *ps, const run_options *opt, run_result *out) {
    if (run_result_init(out, ps, opt)) return 1;
    for (int32_t p = 0; p < ps->n; p++) {
        if (run_prompt(s, ps, p, opt, out)) return 1;
        if (opt->label) cli_progress_long((float)(p + 1) / (float)ps->n, opt->label);
    }
    return 0;
}
