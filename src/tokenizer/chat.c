/* Single-turn chat prompts, without a Jinja engine: the template is
 * recognised by its markers and rendered in the matching fixed format. */
#include "tokenizer/tokenizer_internal.h"

#include <stdlib.h>

typedef enum chat_format { CHAT_CHATML, CHAT_LLAMA3, CHAT_LLAMA2, CHAT_PHI3, CHAT_GEMMA } chat_format;

typedef struct sbuf {
    char *p;
    size_t n, cap;
    int oom;
} sbuf;

static void sb_add(sbuf *b, const char *s, size_t n) {
    if (b->oom) return;
    if (b->n + n + 1 > b->cap) {
        size_t nc = b->cap ? b->cap : 256;
        while (nc < b->n + n + 1) nc *= 2;
        char *np = emt_realloc(b->p, nc, 1);
        if (!np) { b->oom = 1; return; }
        b->p = np;
        b->cap = nc;
    }
    memcpy(b->p + b->n, s, n);
    b->n += n;
    b->p[b->n] = '\0';
}

static void sb_str(sbuf *b, const char *s) { sb_add(b, s, strlen(s)); }

static int is_ws(char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\f' || c == '\v'; }

/* Jinja's `| trim` / Python's strip() on ASCII whitespace. */
static void sb_trimmed(sbuf *b, const char *s) {
    size_t n = strlen(s), a = 0;
    while (a < n && is_ws(s[a])) a++;
    while (n > a && is_ws(s[n - 1])) n--;
    sb_add(b, s + a, n - a);
}

/* A ChatML template's built-in system prompt: a literal
 * '<|im_start|>system\n...<|im_end|>' whose text holds no template syntax
 * (SmolLM2's "You are a helpful AI assistant named SmolLM, ..."). The "\n"
 * may be a real newline or the two characters of a Jinja string escape. */
static char *default_system(const char *tmpl) {
    static const char head[] = "<|im_start|>system";
    for (const char *p = strstr(tmpl, head); p; p = strstr(p + 1, head)) {
        const char *q = p + sizeof head - 1;
        if (*q == '\n') q += 1;
        else if (q[0] == '\\' && q[1] == 'n') q += 2;
        else continue;
        const char *end = strstr(q, "<|im_end|>");
        if (!end || end == q) continue;
        int plain = 1;
        for (const char *c = q; c < end; c++)
            if (strchr("{}'\"+", *c) || (*c == '\\' && c[1] != 'n')) { plain = 0; break; }
        if (!plain) continue;
        char *out = emt_malloc((size_t)(end - q) + 1, 1);
        if (!out) return NULL;
        size_t m = 0;
        for (const char *c = q; c < end; c++) {
            if (*c == '\\' && c[1] == 'n') { out[m++] = '\n'; c++; }
            else out[m++] = *c;
        }
        out[m] = '\0';
        return out;
    }
    return NULL;
}

entmtp_status emt_chat_prompt(const emt_tokenizer *t, const char *system_prompt, const char *user,
                              char *text, size_t capacity, size_t *len_out) {
    if (!t) return emt_fail(ENTMTP_ERR_INVALID_ARGUMENT, "chat prompt: tokenizer is NULL");
    if (!user) return emt_fail(ENTMTP_ERR_INVALID_ARGUMENT, "chat prompt: user message is NULL");
    if (!len_out) return emt_fail(ENTMTP_ERR_INVALID_ARGUMENT, "chat prompt: text_len output is NULL");
    if (!text && capacity > 0)
        return emt_fail(ENTMTP_ERR_INVALID_ARGUMENT, "chat prompt: text is NULL with capacity %zu", capacity);
    const char *tmpl = t->chat_template;
    chat_format fmt;
    if (tmpl) {
        if (strstr(tmpl, "<|im_start|>")) fmt = CHAT_CHATML;
        else if (strstr(tmpl, "<|start_header_id|>")) fmt = CHAT_LLAMA3;
        else if (strstr(tmpl, "[INST]")) fmt = CHAT_LLAMA2;
        else if (strstr(tmpl, "<|user|>") && strstr(tmpl, "<|end|>")) fmt = CHAT_PHI3;
        else if (strstr(tmpl, "<start_of_turn>")) fmt = CHAT_GEMMA;
        else
            return emt_fail(ENTMTP_ERR_UNSUPPORTED,
                            "chat template not recognised (supported: ChatML, Llama 3, Llama 2/Mistral, "
                            "Phi-3, Gemma): '%.80s%s'", tmpl, strlen(tmpl) > 80 ? "..." : "");
    } else if (emt_tokenizer_find(t, "<|im_start|>", 12) >= 0) {
        fmt = CHAT_CHATML;
    } else if (emt_tokenizer_find(t, "<|start_header_id|>", 19) >= 0) {
        fmt = CHAT_LLAMA3;
    } else {
        return emt_fail(ENTMTP_ERR_UNSUPPORTED,
                        "the tokenizer has no chat template and no ChatML or Llama 3 tokens");
    }
    sbuf b = { 0 };
    char *dflt = NULL;
    switch (fmt) {
    case CHAT_CHATML:
        if (!system_prompt && tmpl) system_prompt = dflt = default_system(tmpl);
        if (system_prompt) {
            sb_str(&b, "<|im_start|>system\n");
            sb_str(&b, system_prompt);
            sb_str(&b, "<|im_end|>\n");
        }
        sb_str(&b, "<|im_start|>user\n");
        sb_str(&b, user);
        sb_str(&b, "<|im_end|>\n<|im_start|>assistant\n");
        break;
    case CHAT_LLAMA3:
        if (system_prompt) {
            sb_str(&b, "<|start_header_id|>system<|end_header_id|>\n\n");
            sb_trimmed(&b, system_prompt);
            sb_str(&b, "<|eot_id|>");
        }
        sb_str(&b, "<|start_header_id|>user<|end_header_id|>\n\n");
        sb_trimmed(&b, user);
        sb_str(&b, "<|eot_id|><|start_header_id|>assistant<|end_header_id|>\n\n");
        break;
    case CHAT_LLAMA2:
        sb_str(&b, "[INST] ");
        if (system_prompt) {
            sb_str(&b, "<<SYS>>\n");
            sb_str(&b, system_prompt);
            sb_str(&b, "\n<</SYS>>\n\n");
        }
        sb_trimmed(&b, user);
        sb_str(&b, " [/INST]");
        break;
    case CHAT_PHI3:
        if (system_prompt) {
            sb_str(&b, "<|system|>\n");
            sb_str(&b, system_prompt);
            sb_str(&b, "<|end|>\n");
        }
        sb_str(&b, "<|user|>\n");
        sb_str(&b, user);
        sb_str(&b, "<|end|>\n<|assistant|>\n");
        break;
    case CHAT_GEMMA: /* no system role: Gemma's template prepends it to the user turn */
        sb_str(&b, "<start_of_turn>user\n");
        if (system_prompt) {
            sb_str(&b, system_prompt);
            sb_str(&b, "\n\n");
        }
        sb_trimmed(&b, user);
        sb_str(&b, "<end_of_turn>\n<start_of_turn>model\n");
        break;
    }
    free(dflt);
    if (b.oom) {
        free(b.p);
        return ENTMTP_ERR_OUT_OF_MEMORY;
    }
    *len_out = b.n;
    entmtp_status st = ENTMTP_OK;
    if (b.n > capacity)
        st = emt_fail(ENTMTP_ERR_BUFFER_TOO_SMALL,
                      "chat prompt: %zu bytes needed (plus 1 for the NUL), capacity is %zu", b.n,
                      capacity);
    else if (b.n) {
        memcpy(text, b.p, b.n);
    }
    if (st == ENTMTP_OK && b.n < capacity) text[b.n] = '\0';
    free(b.p);
    return st;
}
