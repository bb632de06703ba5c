/* The OpenAI wire format: request JSON -> serve_request, results -> JSON. */
#include "serve.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---------------------------------------------------------------- requests */

static int get_int(const cJSON *o, const char *field, long lo, long hi, long *out, serve_error *e) {
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, field);
    if (!v || cJSON_IsNull(v)) return 1;
    double d = cJSON_IsNumber(v) ? v->valuedouble : NAN;
    if (!(d >= (double)lo && d <= (double)hi) || d != floor(d))
        return serve_fail(e, 400, field, NULL, "%s: must be an integer in [%ld, %ld]", field, lo, hi);
    *out = (long)d;
    return 1;
}

static int get_stop(const cJSON *o, serve_request *r, serve_error *e) {
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, "stop");
    if (!v || cJSON_IsNull(v)) return 1;
    int n = cJSON_IsString(v) ? 1 : cJSON_IsArray(v) ? cJSON_GetArraySize(v) : -1;
    if (n < 0 || n > SERVE_MAX_STOP)
        return serve_fail(e, 400, "stop", NULL, "stop: must be a string or an array of at most %d strings", SERVE_MAX_STOP);
    for (int i = 0; i < n; i++) {
        const cJSON *s = cJSON_IsString(v) ? v : cJSON_GetArrayItem(v, i);
        if (!cJSON_IsString(s) || !s->valuestring[0] || strlen(s->valuestring) > 256)
            return serve_fail(e, 400, "stop", NULL, "stop: each stop string must be 1 to 256 bytes of text");
        if (!(r->stop[r->n_stop] = strdup(s->valuestring))) return serve_fail(e, 500, NULL, NULL, "out of memory");
        r->n_stop++;
    }
    return 1;
}

/* A message's content: a string or OpenAI's array of {"type":"text","text":...}. */
static const char *message_text(const cJSON *content, char **owned) {
    *owned = NULL;
    if (cJSON_IsString(content)) return content->valuestring;
    if (!cJSON_IsArray(content)) return NULL;
    size_t len = 0;
    const cJSON *part;
    cJSON_ArrayForEach(part, content) {
        const cJSON *t = cJSON_GetObjectItemCaseSensitive(part, "text");
        if (!cJSON_IsString(t)) return NULL;
        len += strlen(t->valuestring);
    }
    if (!(*owned = malloc(len + 1))) return NULL;
    (*owned)[0] = '\0';
    cJSON_ArrayForEach(part, content) strcat(*owned, cJSON_GetObjectItemCaseSensitive(part, "text")->valuestring);
    return *owned;
}

/* Without a template in the model the turns' texts are the prompt, joined
 * by blank lines. */
static char *joined_text(const char *const *contents, int n) {
    size_t len = 0;
    for (int i = 0; i < n; i++) len += strlen(contents[i]) + 2;
    char *out = malloc(len + 1);
    if (!out) return NULL;
    out[0] = '\0';
    for (int i = 0; i < n; i++) {
        if (i) strcat(out, "\n\n");
        strcat(out, contents[i]);
    }
    return out;
}

/* The library formats the conversation (entmtp_chat_prompt_messages) */
static int render_chat(const serve_model *sm, const char *const *roles, const char *const *contents, int n,
                       serve_request *r, serve_error *e) {
    size_t need = 0;
    entmtp_status st = entmtp_chat_prompt_template(sm->model, sm->chat_template, roles, contents, n, NULL, 0, &need);
    if (st == ENTMTP_ERR_UNSUPPORTED) { /* --chat-template was checked at start-up */
        r->prompt = joined_text(contents, n);
    } else if (st == ENTMTP_ERR_INVALID_ARGUMENT) {
        return serve_fail(e, 400, "messages", NULL, "messages: %s", entmtp_last_error());
    } else if (st == ENTMTP_OK || st == ENTMTP_ERR_BUFFER_TOO_SMALL) {
        if ((r->prompt = malloc(need + 1)) &&
            entmtp_chat_prompt_template(sm->model, sm->chat_template, roles, contents, n, r->prompt, need + 1, &need)) {
            free(r->prompt);
            r->prompt = NULL;
            return serve_fail(e, 500, NULL, NULL, "chat template: %s", entmtp_last_error());
        }
    } else {
        return serve_fail(e, 500, NULL, NULL, "chat template: %s", entmtp_last_error());
    }
    return r->prompt ? 1 : serve_fail(e, 500, NULL, NULL, "out of memory");
}

/* messages -> the model's chat template: an optional system (or developer)
 * message, then user and assistant turns ending with a user turn. */
static int chat_prompt(const serve_model *sm, const cJSON *msgs, serve_request *r, serve_error *e) {
    int n = cJSON_IsArray(msgs) ? cJSON_GetArraySize(msgs) : 0;
    if (n < 1) return serve_fail(e, 400, "messages", NULL, "messages: must be a non-empty array");
    const char **roles = calloc((size_t)n, sizeof *roles), **contents = calloc((size_t)n, sizeof *contents);
    char **owned = calloc((size_t)n, sizeof *owned);
    int ok = roles && contents && owned ? 1 : serve_fail(e, 500, NULL, NULL, "out of memory");
    for (int i = 0; ok && i < n; i++) {
        const cJSON *m = cJSON_GetArrayItem(msgs, i);
        const cJSON *role = cJSON_GetObjectItemCaseSensitive(m, "role");
        const char *rs = cJSON_IsString(role) ? role->valuestring : "";
        roles[i] = !strcmp(rs, "developer") ? "system" : rs;
        contents[i] = message_text(cJSON_GetObjectItemCaseSensitive(m, "content"), &owned[i]);
        if (strcmp(roles[i], "system") && strcmp(roles[i], "user") && strcmp(roles[i], "assistant"))
            ok = serve_fail(e, 400, "messages", NULL, "messages[%d].role: '%s' is not system, user or assistant", i, rs);
        else if (!contents[i])
            ok = serve_fail(e, 400, "messages", NULL, "messages[%d].content: must be text", i);
    }
    if (ok) ok = render_chat(sm, roles, contents, n, r, e);
    for (int i = 0; owned && i < n; i++) free(owned[i]);
    free(owned);
    free(roles);
    free(contents);
    return ok;
}

static int completion_prompt(const cJSON *p, serve_request *r, serve_error *e) {
    if (cJSON_IsArray(p) && cJSON_GetArraySize(p) == 1) p = cJSON_GetArrayItem(p, 0);
    if (!cJSON_IsString(p)) return serve_fail(e, 400, "prompt", NULL, "prompt: must be a string (or an array of one string)");
    if (!(r->prompt = strdup(p->valuestring))) return serve_fail(e, 500, NULL, NULL, "out of memory");
    return 1;
}

/* {"entmtp": {"autoregressive": bool, "policy": "<built-in policy kind>"}} */
static int get_knobs(const serve_model *sm, const cJSON *o, serve_request *r, serve_error *e) {
    const cJSON *x = cJSON_GetObjectItemCaseSensitive(o, "entmtp");
    if (!x || cJSON_IsNull(x)) return 1;
    if (!cJSON_IsObject(x)) return serve_fail(e, 400, "entmtp", NULL, "entmtp: must be an object");
    const cJSON *ar = cJSON_GetObjectItemCaseSensitive(x, "autoregressive");
    if (ar && !cJSON_IsBool(ar))
        return serve_fail(e, 400, "entmtp.autoregressive", NULL, "entmtp.autoregressive: must be true or false");
    r->autoregressive = cJSON_IsTrue(ar);
    const cJSON *ids = cJSON_GetObjectItemCaseSensitive(x, "return_prompt_ids");
    if (ids && !cJSON_IsBool(ids))
        return serve_fail(e, 400, "entmtp.return_prompt_ids", NULL, "entmtp.return_prompt_ids: must be true or false");
    r->return_prompt_ids = cJSON_IsTrue(ids);
    const cJSON *p = cJSON_GetObjectItemCaseSensitive(x, "policy");
    if (!p || cJSON_IsNull(p)) return 1;
    if (!cJSON_IsString(p) || entmtp_policy_kind_from_name(p->valuestring, &r->policy) || r->policy == ENTMTP_POLICY_CUSTOM)
        return serve_fail(e, 400, "entmtp.policy", NULL, "entmtp.policy: must be a built-in policy kind (static, ladder, hysteresis, ucb, throughput, dynamic)");
    if (!sm->bank) return serve_fail(e, 400, "entmtp.policy", NULL, "entmtp.policy: the server runs without heads (plain AR)");
    r->has_policy = 1;
    return 1;
}

int serve_model_matches(const serve_model *sm, const char *name) {
    size_t n = strlen(sm->model_id);
    return !strcmp(name, sm->model_id) || (!strncmp(name, sm->model_id, n) && !strcmp(name + n, ".gguf"));
}

int serve_parse_request(const serve_model *sm, int chat, const char *body, size_t len,
                        serve_request *r, serve_error *e) {
    memset(r, 0, sizeof *r);
    memset(e, 0, sizeof *e);
    r->chat = chat;
    r->prompt_field = chat ? "messages" : "prompt";
    r->temperature = sm->temperature_default;
    r->seed = 0x5eed;
    cJSON *o = cJSON_ParseWithLength(body, len);
    int ok = 1;
    if (!cJSON_IsObject(o)) {
        const char *at = cJSON_GetErrorPtr();
        ok = o ? serve_fail(e, 400, "body", NULL, "body: must be a JSON object")
               : serve_fail(e, 400, "body", NULL, "body: not valid JSON (at byte %ld)",
                            at && at >= body && at <= body + len ? (long)(at - body) : 0L);
        goto done;
    }
    const cJSON *v;
    if ((v = cJSON_GetObjectItemCaseSensitive(o, "model")) && !cJSON_IsString(v) && !cJSON_IsNull(v)) {
        ok = serve_fail(e, 400, "model", NULL, "model: must be a string");
        goto done;
    }
    if (cJSON_IsString(v) && !serve_model_matches(sm, v->valuestring)) { /* as OpenAI and vLLM answer */
        ok = serve_fail(e, 404, "model", "model_not_found", "The model '%.100s' does not exist: this server serves '%s' (GET /v1/models)",
                        v->valuestring, sm->model_id);
        goto done;
    }
    if ((v = cJSON_GetObjectItemCaseSensitive(o, "stream")) && !cJSON_IsBool(v) && !cJSON_IsNull(v)) {
        ok = serve_fail(e, 400, "stream", NULL, "stream: must be true or false");
        goto done;
    }
    r->stream = cJSON_IsTrue(v);
    long n = 1, max_tokens = 0, seed = 0x5eed;
    const char *max_field = cJSON_GetObjectItemCaseSensitive(o, "max_completion_tokens") ? "max_completion_tokens" : "max_tokens";
    if (!get_int(o, "n", 1, 1, &n, e) || !get_int(o, max_field, 1, sm->ctx, &max_tokens, e) ||
        !get_int(o, "seed", 0, 9007199254740991L, &seed, e) || !get_stop(o, r, e) || !get_knobs(sm, o, r, e)) {
        ok = 0;
        goto done;
    }
    r->max_tokens = (int32_t)max_tokens;
    r->seed = (unsigned long long)seed;
    r->has_seed = cJSON_GetObjectItemCaseSensitive(o, "seed") != NULL;
    if ((v = cJSON_GetObjectItemCaseSensitive(o, "temperature")) && !cJSON_IsNull(v)) {
        if (!cJSON_IsNumber(v) || !(v->valuedouble >= 0 && v->valuedouble <= 2)) {
            ok = serve_fail(e, 400, "temperature", NULL, "temperature: must be a number in [0, 2]");
            goto done;
        }
        r->temperature = (float)v->valuedouble;
    }
    v = cJSON_GetObjectItemCaseSensitive(o, r->prompt_field);
    if (!v) { ok = serve_fail(e, 400, r->prompt_field, NULL, "%s: required", r->prompt_field); goto done; }
    ok = chat ? chat_prompt(sm, v, r, e) : completion_prompt(v, r, e);
done:
    cJSON_Delete(o);
    if (!ok) serve_request_clear(r);
    return ok;
}

/* --------------------------------------------------------------- responses */

static char *print_and_free(cJSON *o) {
    char *s = o ? cJSON_PrintUnformatted(o) : NULL;
    cJSON_Delete(o);
    return s;
}

char *serve_error_json(const serve_error *e) {
    cJSON *o = cJSON_CreateObject(), *err = cJSON_AddObjectToObject(o, "error");
    cJSON_AddStringToObject(err, "message", e->message);
    cJSON_AddStringToObject(err, "type", e->type ? e->type : "server_error");
    if (e->param) cJSON_AddStringToObject(err, "param", e->param); else cJSON_AddNullToObject(err, "param");
    if (e->code) cJSON_AddStringToObject(err, "code", e->code); else cJSON_AddNullToObject(err, "code");
    return print_and_free(o);
}

/* cJSON strings are NUL-terminated: copy the bytes out of the job's text. */
static cJSON *add_text(cJSON *o, const char *name, const char *s, size_t n) {
    char *t = malloc(n + 1);
    if (!t) return NULL;
    memcpy(t, s, n);
    t[n] = '\0';
    cJSON *item = cJSON_AddStringToObject(o, name, t);
    free(t);
    return item;
}

static cJSON *envelope(const serve_job *j, const char *object, const char *id, long created) {
    cJSON *o = cJSON_CreateObject();
    cJSON_AddStringToObject(o, "id", id);
    cJSON_AddStringToObject(o, "object", object);
    cJSON_AddNumberToObject(o, "created", (double)created);
    cJSON_AddStringToObject(o, "model", j->sm->model_id);
    return o;
}

static void add_usage(cJSON *o, const serve_job *j) {
    cJSON *u = cJSON_AddObjectToObject(o, "usage");
    cJSON_AddNumberToObject(u, "prompt_tokens", j->n_prompt);
    cJSON_AddNumberToObject(u, "completion_tokens", j->n_gen);
    cJSON_AddNumberToObject(u, "total_tokens", j->n_prompt + j->n_gen);
}

/* The "entmtp" extension of a finished response: what the decoding did. */
static void add_summary(cJSON *o, const serve_job *j) {
    entmtp_session_stats st = { sizeof st };
    entmtp_session_get_stats(j->session, &st);
    cJSON *x = cJSON_AddObjectToObject(o, "entmtp");
    cJSON_AddStringToObject(x, "mode", j->autoregressive ? "ar" : "entmtp");
    cJSON_AddStringToObject(x, "policy", j->policy ? entmtp_policy_kind_name(entmtp_policy_get_kind(j->policy)) : "none");
    cJSON_AddNumberToObject(x, "steps", (double)st.n_steps);
    cJSON_AddNumberToObject(x, "mean_accept_length", st.mean_accept_length);
    cJSON_AddNumberToObject(x, "tokens_per_second", st.tokens_per_second);
    cJSON_AddNumberToObject(x, "prefill_seconds", st.prefill_seconds);
    cJSON_AddNumberToObject(x, "decode_seconds", st.decode_seconds);
    if (j->return_prompt_ids) { /* the ids prefilled: what the tokenizer made of the prompt */
        const int32_t *ids;
        int32_t n_ids = 0;
        entmtp_session_tokens(j->session, &ids, &n_ids);
        cJSON *arr = cJSON_AddArrayToObject(x, "prompt_ids");
        for (int32_t i = 0; i < j->n_prompt && i < n_ids; i++) cJSON_AddItemToArray(arr, cJSON_CreateNumber(ids[i]));
    }
    cJSON *usage = cJSON_AddObjectToObject(x, "tree_usage");
    for (int32_t k = 0; j->sm->bank && k < entmtp_bank_size(j->sm->bank); k++) {
        entmtp_tree_info ti = { sizeof ti };
        if (!entmtp_bank_tree_info(j->sm->bank, k, &ti))
            cJSON_AddNumberToObject(usage, ti.name, (double)entmtp_session_tree_usage(j->session, k));
    }
}

char *serve_result_json(const serve_job *j, int chat, const char *id, long created) {
    cJSON *o = envelope(j, chat ? "chat.completion" : "text_completion", id, created);
    cJSON *c = cJSON_CreateObject();
    cJSON_AddItemToArray(cJSON_AddArrayToObject(o, "choices"), c);
    cJSON_AddNumberToObject(c, "index", 0);
    if (chat) {
        cJSON *m = cJSON_AddObjectToObject(c, "message");
        cJSON_AddStringToObject(m, "role", "assistant");
        add_text(m, "content", j->text ? j->text : "", j->text_len);
    } else {
        add_text(c, "text", j->text ? j->text : "", j->text_len);
        cJSON_AddNullToObject(c, "logprobs");
    }
    cJSON_AddStringToObject(c, "finish_reason", j->finish ? j->finish : "length");
    add_usage(o, j);
    add_summary(o, j);
    return print_and_free(o);
}

char *serve_chunk_json(const serve_job *j, int chat, const char *id, long created,
                       const char *delta, size_t delta_len, int first) {
    cJSON *o = envelope(j, chat ? "chat.completion.chunk" : "text_completion", id, created);
    cJSON *c = cJSON_CreateObject();
    cJSON_AddItemToArray(cJSON_AddArrayToObject(o, "choices"), c);
    cJSON_AddNumberToObject(c, "index", 0);
    int closing = delta == NULL; /* the last chunk carries finish_reason and usage */
    if (chat) {
        cJSON *d = cJSON_AddObjectToObject(c, "delta");
        if (first) cJSON_AddStringToObject(d, "role", "assistant");
        if (!closing) add_text(d, "content", delta, delta_len);
    } else {
        add_text(c, "text", closing ? "" : delta, closing ? 0 : delta_len);
        cJSON_AddNullToObject(c, "logprobs");
    }
    if (closing) {
        cJSON_AddStringToObject(c, "finish_reason", j->finish ? j->finish : "length");
        add_usage(o, j);
        add_summary(o, j);
    } else {
        cJSON_AddNullToObject(c, "finish_reason");
        /* per step: which tree the policy chose and how much of it held */
        entmtp_session_stats st = { sizeof st };
        entmtp_session_get_stats(j->session, &st);
        cJSON *x = cJSON_AddObjectToObject(o, "entmtp");
        cJSON_AddNumberToObject(x, "step", (double)j->last.index);
        cJSON_AddNumberToObject(x, "tree_index", j->last.tree_index);
        entmtp_tree_info ti = { sizeof ti };
        if (j->sm->bank && j->last.tree_index >= 0 && !entmtp_bank_tree_info(j->sm->bank, j->last.tree_index, &ti))
            cJSON_AddStringToObject(x, "tree", ti.name);
        cJSON_AddNumberToObject(x, "n_nodes", j->last.n_nodes);
        cJSON_AddNumberToObject(x, "accept_length", j->last.accept_length);
        cJSON_AddNumberToObject(x, "n_tokens", j->last.n_tokens);
        cJSON_AddNumberToObject(x, "step_seconds", j->last.seconds);
        cJSON_AddNumberToObject(x, "mean_accept_length", st.mean_accept_length);
        cJSON_AddNumberToObject(x, "tokens_per_second", st.tokens_per_second);
    }
    char *json = print_and_free(o);
    if (!json) return NULL;
    size_t n = strlen(json);
    char *event = malloc(n + 9);
    if (event) snprintf(event, n + 9, "data: %s\n\n", json);
    free(json);
    return event;
}

char *serve_models_json(const serve_model *sm) {
    cJSON *o = cJSON_CreateObject(), *m = cJSON_CreateObject();
    cJSON_AddStringToObject(o, "object", "list");
    cJSON_AddItemToArray(cJSON_AddArrayToObject(o, "data"), m);
    cJSON_AddStringToObject(m, "id", sm->model_id);
    cJSON_AddStringToObject(m, "object", "model");
    cJSON_AddNumberToObject(m, "created", 0);
    cJSON_AddStringToObject(m, "owned_by", "entmtp");
    return print_and_free(o);
}

/* The bank's trees as parent arrays, for the chat page's drawings. */
char *serve_trees_json(const serve_model *sm) {
    cJSON *o = cJSON_CreateObject(), *arr = cJSON_AddArrayToObject(o, "trees");
    cJSON_AddStringToObject(o, "mode", sm->heads ? "entmtp" : "ar");
    for (int32_t k = 0; sm->bank && k < entmtp_bank_size(sm->bank); k++) {
        entmtp_tree_info ti = { sizeof ti };
        entmtp_tree_buffers tb = { sizeof tb };
        if (entmtp_bank_tree_info(sm->bank, k, &ti) || entmtp_bank_tree_buffers(sm->bank, k, &tb)) continue;
        cJSON *t = cJSON_CreateObject();
        cJSON_AddStringToObject(t, "name", ti.name);
        cJSON_AddNumberToObject(t, "depth", ti.depth);
        cJSON_AddItemToObject(t, "parents", cJSON_CreateIntArray(tb.parents, tb.n_nodes));
        cJSON_AddItemToArray(arr, t);
    }
    return print_and_free(o);
}
