/* One request's generation on the public API: prompt tokens, a session with
 * its own policy, one step at a time, and the text that is final after each
 * step (stop strings cut, incomplete UTF-8 and a possible stop-string prefix
 * held back until the next step decides them). */
#include "../cli.h"
#include "serve.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int serve_fail(serve_error *e, int status, const char *param, const char *code, const char *fmt, ...) {
    e->status = status;
    e->type = status >= 500 ? (status == 503 ? "server_busy" : "server_error") : "invalid_request_error";
    e->param = param;
    e->code = code;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(e->message, sizeof e->message, fmt, ap);
    va_end(ap);
    return 0;
}

static int library_fail(serve_error *e, const char *what, entmtp_status st) {
    return serve_fail(e, 500, NULL, NULL, "%s: %s: %s", what, entmtp_status_string(st), entmtp_last_error());
}

void serve_request_clear(serve_request *r) {
    free(r->prompt);
    for (int i = 0; i < r->n_stop; i++) free(r->stop[i]);
    memset(r, 0, sizeof *r);
}

void serve_job_free(serve_job *j) {
    if (!j) return;
    if (j->session) entmtp_policy_set(j->session, NULL);
    entmtp_session_free(j->session);
    entmtp_policy_free(j->policy);
    for (int i = 0; i < j->n_stop; i++) free(j->stop[i]);
    free(j->gen);
    free(j->text);
    free(j);
}

entmtp_policy_config serve_policy_config(const entmtp_bank *bank, entmtp_policy_kind kind) {
    entmtp_policy_config pc = { sizeof pc }; /* the library writes struct_size bytes */
    if (!cli_bank_policy_config(bank, 0, &kind, &pc) && kind == ENTMTP_POLICY_HYSTERESIS)
        pc.aggressive_tree = entmtp_bank_size(bank) - 1;
    return pc;
}

int serve_job_start(const serve_model *sm, const serve_request *req, serve_job **out, serve_error *err) {
    *out = NULL;
    serve_job *j = calloc(1, sizeof *j);
    if (!j) return serve_fail(err, 500, NULL, NULL, "out of memory");
    j->sm = sm;
    for (int i = 0; i < req->n_stop; i++) {
        if (!(j->stop[i] = strdup(req->stop[i]))) goto oom;
        j->n_stop++;
    }
    int32_t n_prompt = 0;
    entmtp_status st = entmtp_tokenize(sm->model, req->prompt, -1, ENTMTP_TOKENIZE_ADD_SPECIAL, 1, NULL, 0, &n_prompt);
    if (st != ENTMTP_OK && st != ENTMTP_ERR_BUFFER_TOO_SMALL) { library_fail(err, "tokenize", st); goto fail; }
    if (n_prompt < 1) { serve_fail(err, 400, req->prompt_field, NULL, "%s: the prompt is empty", req->prompt_field); goto fail; }
    if (n_prompt >= sm->ctx) {
        serve_fail(err, 400, req->prompt_field, "context_length_exceeded",
                   "%s: the prompt is %d tokens; the context holds %d", req->prompt_field, n_prompt, sm->ctx);
        goto fail;
    }
    int32_t room = sm->ctx - n_prompt;
    j->max_tokens = req->max_tokens ? req->max_tokens : (sm->max_tokens_default < room ? sm->max_tokens_default : room);
    if (j->max_tokens > room) {
        serve_fail(err, 400, "max_tokens", "context_length_exceeded",
                   "max_tokens: %d tokens after a %d-token prompt exceed the context of %d tokens",
                   j->max_tokens, n_prompt, sm->ctx);
        goto fail;
    }
    int32_t *ptoks = malloc((size_t)n_prompt * sizeof *ptoks);
    j->gen = malloc((size_t)j->max_tokens * sizeof *j->gen);
    if (!ptoks || !j->gen) { free(ptoks); goto oom; }
    st = entmtp_tokenize(sm->model, req->prompt, -1, ENTMTP_TOKENIZE_ADD_SPECIAL, 1, ptoks, n_prompt, &n_prompt);
    j->n_prompt = n_prompt;
    j->return_prompt_ids = req->return_prompt_ids;

    entmtp_session_params sp = entmtp_session_default_params();
    sp.kv_capacity = sm->ctx;
    sp.temperature = req->temperature;
    sp.seed = req->seed;
    sp.prompt_activation_bits = sm->prompt_bits;
    sp.step_activation_bits = sm->step_bits;
    sp.kv_type = sm->kv_type;
    sp.reproducible = req->has_seed; /* no clock in the tree choice: same seed, same text */
    if (!st) st = entmtp_session_create(sm->model, sm->heads, sm->bank, &sp, &j->session);
    j->autoregressive = req->autoregressive || !sm->heads;
    if (!st && !j->autoregressive) {
        entmtp_policy_config pc = req->has_policy ? serve_policy_config(sm->bank, req->policy) : sm->policy;
        st = entmtp_policy_create(&pc, &j->policy);
        if (!st) st = entmtp_policy_set(j->session, j->policy);
    }
    if (!st) st = entmtp_session_prefill(j->session, ptoks, n_prompt);
    free(ptoks);
    if (st) { library_fail(err, "session", st); goto fail; }
    *out = j;
    return 1;
oom:
    serve_fail(err, 500, NULL, NULL, "out of memory");
fail:
    serve_job_free(j);
    return 0;
}

/* Bytes at the end of s[0..n) that start a UTF-8 sequence not yet complete. */
static size_t incomplete_utf8_tail(const char *s, size_t n) {
    for (size_t k = 1; k <= 4 && k <= n; k++) {
        unsigned char c = (unsigned char)s[n - k];
        if ((c & 0xC0) == 0x80) continue; /* continuation byte: look further back */
        size_t want = c >= 0xF0 ? 4 : c >= 0xE0 ? 3 : c >= 0xC0 ? 2 : 1;
        return want > k ? k : 0;
    }
    return 0;
}

/* Length of the longest proper prefix of `stop` that s[0..n) ends with. */
static size_t stop_prefix_tail(const char *s, size_t n, const char *stop) {
    size_t m = strlen(stop);
    for (size_t k = m - 1; k > 0; k--)
        if (k <= n && !memcmp(s + n - k, stop, k)) return k;
    return 0;
}

static int decode_text(serve_job *j, serve_error *err) {
    int32_t n = j->n_gen;
    if (n > 0 && entmtp_token_is_eog(j->sm->model, j->gen[n - 1])) n--; /* the stop token is not text */
    size_t need = 0;
    entmtp_status st = entmtp_detokenize(j->sm->model, j->gen, n, NULL, 0, &need);
    if (st != ENTMTP_OK && st != ENTMTP_ERR_BUFFER_TOO_SMALL) return library_fail(err, "detokenize", st);
    char *t = malloc(need + 1);
    if (!t) return serve_fail(err, 500, NULL, NULL, "out of memory");
    if ((st = entmtp_detokenize(j->sm->model, j->gen, n, t, need + 1, &need))) {
        free(t);
        return library_fail(err, "detokenize", st);
    }
    free(j->text);
    j->text = t;
    j->text_len = need;
    return 1;
}

int serve_job_step(serve_job *j, const char **delta, size_t *delta_len, serve_error *err) {
    *delta = NULL;
    *delta_len = 0;
    if (j->finish) return 1;
    entmtp_step_result r = { sizeof r };
    int32_t left = j->max_tokens - j->n_gen;
    entmtp_status st = j->autoregressive ? entmtp_step_ar(j->session, &r) : entmtp_step(j->session, left, &r);
    if (st != ENTMTP_OK && st != ENTMTP_ERR_KV_FULL) return library_fail(err, "step", st);
    for (int32_t i = 0; i < r.n_tokens && j->n_gen < j->max_tokens; i++) j->gen[j->n_gen++] = r.tokens[i];
    j->last = (serve_step){ j->last.index + 1, r.tree_index, r.n_nodes, r.accept_length, r.n_tokens, r.seconds };
    if (r.stopped) j->finish = "stop";
    else if (st == ENTMTP_ERR_KV_FULL || j->n_gen >= j->max_tokens) j->finish = "length";
    if (!decode_text(j, err)) return 0;

    /* the earliest stop string ends the text (OpenAI: it is not returned) */
    size_t cut = j->text_len;
    for (int i = 0; i < j->n_stop; i++) {
        size_t m = strlen(j->stop[i]);
        size_t from = j->sent >= m ? j->sent - m + 1 : 0;
        char *hit = memmem(j->text + from, j->text_len - from, j->stop[i], m);
        if (hit && (size_t)(hit - j->text) < cut) cut = (size_t)(hit - j->text);
    }
    size_t final_len = cut;
    if (cut < j->text_len) {
        j->finish = "stop";
        j->text_len = cut;
        j->text[cut] = '\0';
    } else if (!j->finish) {
        size_t hold = incomplete_utf8_tail(j->text, j->text_len);
        for (int i = 0; i < j->n_stop; i++) {
            size_t k = stop_prefix_tail(j->text, j->text_len, j->stop[i]);
            if (k > hold) hold = k;
        }
        final_len = j->text_len - hold;
    }
    if (final_len > j->sent) {
        *delta = j->text + j->sent;
        *delta_len = final_len - j->sent;
        j->sent = final_len;
    }
    return 1;
}
