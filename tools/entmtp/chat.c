/* Chat prompts with an optional --chat-template, and the interactive chat of
 * `entmtp chat` / `entmtp generate -i`: lines from stdin, the conversation
 * kept and re-rendered each turn, the reply streamed. */
#include "chat.h"

#include "prompts.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* The same fallback chat_tokens announces: no template known, the turns'
 * texts joined by blank lines. */
static char *joined(const char *const *contents, int32_t n) {
    size_t len = 1;
    for (int32_t i = 0; i < n; i++) len += strlen(contents[i]) + 2;
    char *out = malloc(len);
    if (!out) return NULL;
    out[0] = '\0';
    for (int32_t i = 0; i < n; i++) {
        if (i) strcat(out, "\n\n");
        strcat(out, contents[i]);
    }
    return out;
}

int cli_chat_render(entmtp_model *model, const char *chat_template, const char *const *roles,
                    const char *const *contents, int32_t n, char **out) {
    size_t need = 0;
    *out = NULL;
    entmtp_status st = entmtp_chat_prompt_template(model, chat_template, roles, contents, n, NULL, 0, &need);
    if (st == ENTMTP_ERR_UNSUPPORTED && !chat_template) {
        fprintf(stderr, "entmtp: %s; using the plain prompt (the messages as they are)\n", entmtp_last_error());
        *out = joined(contents, n);
        return *out ? 0 : cli_fail("chat template", ENTMTP_ERR_OUT_OF_MEMORY);
    }
    if (st != ENTMTP_OK && st != ENTMTP_ERR_BUFFER_TOO_SMALL)
        return cli_fail(chat_template ? "--chat-template" : "chat template", st);
    if (!(*out = malloc(need + 1))) return cli_fail("chat template", ENTMTP_ERR_OUT_OF_MEMORY);
    if ((st = entmtp_chat_prompt_template(model, chat_template, roles, contents, n, *out, need + 1, &need))) {
        free(*out);
        *out = NULL;
        return cli_fail("chat template", st);
    }
    return 0;
}

/* ----------------------------------------------------------- the chat loop */

typedef struct reply {
    entmtp_model *model;
    int32_t *gen;
    int32_t n_gen, cap;
    size_t printed;
} reply;

/* The reply's text without a final stop token; malloc'ed, NULL on failure. */
static char *reply_text(const reply *r, size_t *len) {
    int32_t n = r->n_gen;
    if (n > 0 && entmtp_token_is_eog(r->model, r->gen[n - 1])) n--;
    size_t need = 0;
    entmtp_status st = entmtp_detokenize(r->model, r->gen, n, NULL, 0, &need);
    if (st != ENTMTP_OK && st != ENTMTP_ERR_BUFFER_TOO_SMALL) return NULL;
    char *text = malloc(need + 1);
    if (text && entmtp_detokenize(r->model, r->gen, n, text, need + 1, len)) {
        free(text);
        return NULL;
    }
    return text;
}

/* Bytes of text[0..len) that end on a character boundary: a token may end
 * inside a UTF-8 sequence, whose rest comes with the next token. */
static size_t complete_utf8(const char *text, size_t len) {
    size_t i = len, back = 0;
    while (i > 0 && back < 4 && ((unsigned char)text[i - 1] & 0xC0) == 0x80) { i--; back++; }
    if (i == 0 || !((unsigned char)text[i - 1] & 0x80)) return len;
    unsigned char lead = (unsigned char)text[i - 1];
    size_t want = lead >= 0xF0 ? 4 : lead >= 0xE0 ? 3 : lead >= 0xC0 ? 2 : 1;
    return want == back + 1 ? len : i - 1;
}

static int on_reply_tokens(const int32_t *toks, int32_t n, void *user) {
    reply *r = user;
    for (int32_t i = 0; i < n && r->n_gen < r->cap; i++) r->gen[r->n_gen++] = toks[i];
    size_t len = 0;
    char *text = reply_text(r, &len);
    if (!text) return 0;
    size_t end = complete_utf8(text, len);
    if (end > r->printed) {
        fwrite(text + r->printed, 1, end - r->printed, stdout);
        fflush(stdout);
        r->printed = end;
    }
    free(text);
    return 0;
}

typedef struct conversation {
    char **roles, **contents;
    int32_t n, cap;
} conversation;

static int conversation_add(conversation *c, const char *role, const char *content, size_t len) {
    if (c->n == c->cap) {
        int32_t cap = c->cap ? 2 * c->cap : 16;
        char **r = realloc(c->roles, (size_t)cap * sizeof *r);
        if (r) c->roles = r;
        char **t = realloc(c->contents, (size_t)cap * sizeof *t);
        if (t) c->contents = t;
        if (!r || !t) return 1;
        c->cap = cap;
    }
    c->roles[c->n] = strdup(role);
    c->contents[c->n] = strndup(content, len);
    if (!c->roles[c->n] || !c->contents[c->n]) {
        free(c->roles[c->n]);
        free(c->contents[c->n]);
        return 1;
    }
    c->n++;
    return 0;
}

static void conversation_pop(conversation *c) {
    if (c->n == 0) return;
    c->n--;
    free(c->roles[c->n]);
    free(c->contents[c->n]);
}

static void conversation_clear(conversation *c, int32_t keep) {
    while (c->n > keep) conversation_pop(c);
}

/* The conversation's tokens into the session: only the part past what the
 * session already holds when that is a prefix (the usual case: the last
 * reply re-renders as it was generated), else from a reset. */
static entmtp_status prefill_conversation(entmtp_session *s, const int32_t *toks, int32_t n) {
    const int32_t *held;
    int32_t n_held = 0;
    entmtp_session_tokens(s, &held, &n_held);
    if (n_held > 0 && (n_held >= n || memcmp(held, toks, (size_t)n_held * sizeof *toks))) {
        entmtp_session_reset(s);
        n_held = 0;
    }
    return entmtp_session_prefill(s, toks + n_held, n - n_held);
}

static char *trim_line(char *line) {
    size_t n = strlen(line);
    while (n && (line[n - 1] == '\n' || line[n - 1] == '\r')) line[--n] = '\0';
    return line;
}

int cli_chat_run(entmtp_model *model, entmtp_session *session, const cli_chat_settings *cs) {
    conversation conv = { 0 };
    reply r = { .model = model, .cap = cs->max_tokens };
    r.gen = malloc((size_t)cs->max_tokens * sizeof *r.gen);
    int rc = r.gen ? 0 : cli_fail("chat", ENTMTP_ERR_OUT_OF_MEMORY);
    int32_t keep = 0; /* the system turn stays across /reset */
    if (!rc && cs->system_prompt) {
        rc = conversation_add(&conv, "system", cs->system_prompt, strlen(cs->system_prompt))
                 ? cli_fail("chat", ENTMTP_ERR_OUT_OF_MEMORY) : 0;
        keep = 1;
    }
    int tty = isatty(STDIN_FILENO);
    if (!rc && tty)
        fprintf(stderr, "entmtp chat: type a message and press Enter; /reset starts over, /exit or Ctrl-D ends\n");
    char *line = NULL;
    size_t line_cap = 0;
    while (!rc) {
        if (tty) { fprintf(stderr, "> "); fflush(stderr); }
        if (getline(&line, &line_cap, stdin) < 0) break;
        const char *msg = trim_line(line);
        if (!*msg) continue;
        if (!strcmp(msg, "/exit") || !strcmp(msg, "/quit")) break;
        if (!strcmp(msg, "/reset")) {
            conversation_clear(&conv, keep);
            entmtp_session_reset(session);
            fprintf(stderr, "entmtp chat: conversation cleared\n");
            continue;
        }
        if (conversation_add(&conv, "user", msg, strlen(msg))) { rc = cli_fail("chat", ENTMTP_ERR_OUT_OF_MEMORY); break; }
        char *text = NULL;
        int32_t *toks = NULL, n_toks = 0;
        if (cli_chat_render(model, cs->chat_template, (const char *const *)conv.roles,
                            (const char *const *)conv.contents, conv.n, &text) ||
            chat_tokens(model, NULL, text, 1, &toks, &n_toks)) {
            free(text);
            rc = 1;
            break;
        }
        free(text);
        entmtp_status st = prefill_conversation(session, toks, n_toks);
        free(toks);
        if (st == ENTMTP_ERR_KV_FULL || st == ENTMTP_ERR_OUT_OF_RANGE) {
            fprintf(stderr, "entmtp chat: %s\nentmtp chat: the conversation no longer fits the context "
                            "(-c/--ctx-size); /reset to start over\n", entmtp_last_error());
            conversation_pop(&conv);
            entmtp_session_reset(session);
            continue;
        }
        if (st) { rc = cli_fail("prefill", st); break; }
        entmtp_session_stats before = { sizeof before }; /* counts restart after a reset */
        entmtp_session_get_stats(session, &before);
        r.n_gen = 0;
        r.printed = 0;
        st = entmtp_generate(session, cs->max_tokens, cs->autoregressive, on_reply_tokens, &r);
        if (st != ENTMTP_OK && st != ENTMTP_ERR_KV_FULL) { rc = cli_fail("generate", st); break; }
        size_t len = 0;
        char *answer = reply_text(&r, &len);
        if (!answer) { rc = cli_fail("detokenize", ENTMTP_ERR_OUT_OF_MEMORY); break; }
        if (len > r.printed) fwrite(answer + r.printed, 1, len - r.printed, stdout);
        printf("\n");
        fflush(stdout);
        if (conversation_add(&conv, "assistant", answer, len)) rc = cli_fail("chat", ENTMTP_ERR_OUT_OF_MEMORY);
        free(answer);
        entmtp_session_stats after = { sizeof after };
        entmtp_session_get_stats(session, &after);
        int64_t n_gen = after.n_generated - before.n_generated, n_steps = after.n_steps - before.n_steps;
        double secs = after.decode_seconds - before.decode_seconds;
        fprintf(stderr, "-- %lld tokens in %lld steps, accept length %.2f, %.1f tokens/s%s\n", (long long)n_gen,
                (long long)n_steps, n_steps ? (double)n_gen / (double)n_steps : 0.0,
                secs > 0 ? (double)n_gen / secs : 0.0,
                st == ENTMTP_ERR_KV_FULL ? "; the context is full: /reset to go on" : "");
    }
    free(line);
    conversation_clear(&conv, 0);
    free(conv.roles);
    free(conv.contents);
    free(r.gen);
    return rc;
}

int cmd_chat(int argc, char **argv) {
    /* `entmtp chat ARGS` is `entmtp generate ARGS --interactive` */
    char **args = malloc(((size_t)argc + 2) * sizeof *args);
    if (!args) return cli_fail("chat", ENTMTP_ERR_OUT_OF_MEMORY);
    for (int i = 0; i < argc; i++) args[i] = argv[i];
    args[argc] = "--interactive";
    args[argc + 1] = NULL;
    int rc = cmd_generate(argc + 1, args);
    free(args);
    return rc;
}
