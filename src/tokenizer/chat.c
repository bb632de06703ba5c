/* Chat prompts, without a Jinja engine: the template is recognised by its
 * markers and a conversation rendered in the matching fixed format. */
#include "tokenizer/tokenizer_internal.h"

#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

typedef enum chat_format {
    CHAT_CHATML, CHAT_LLAMA3, CHAT_LLAMA2, CHAT_PHI3, CHAT_GEMMA, CHAT_MISTRAL, CHAT_DEEPSEEK
} chat_format;

/* DeepSeek-R1's markers: full-width bars (U+FF5C), U+2581 for spaces */
#define DS_BAR "\xEF\xBD\x9C"
#define DS_USER "<" DS_BAR "User" DS_BAR ">"
#define DS_ASSISTANT "<" DS_BAR "Assistant" DS_BAR ">"
#define DS_END "<" DS_BAR "end\xE2\x96\x81of\xE2\x96\x81sentence" DS_BAR ">"

static const char *const g_family[] = { "ChatML", "Llama 3", "Llama 2", "Phi-3", "Gemma", "Mistral",
                                        "DeepSeek-R1" };

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

/* The text of a special token (Llama 2's bos and eos between turns), "" when
 * the tokenizer has none. */
static const char *special_text(const emt_tokenizer *t, int32_t id) {
    return id >= 0 && id < t->n_tokens ? t->text_arena + t->text_off[id] : "";
}

static int is_role(const char *role, const char *name) { return strcmp(role, name) == 0; }

/* Turn order every family accepts: an optional system turn first, then user
 * and assistant turns, the last one a user turn (the prompt ends with the
 * assistant's header). Llama 2 and Gemma also need user and assistant to
 * alternate (their templates raise an exception otherwise). */
static entmtp_status check_turns(const char *const *roles, const char *const *contents, int32_t n,
                                 int alternate, const char *family) {
    int32_t first = n > 0 && roles[0] && is_role(roles[0], "system");
    for (int32_t i = 0; i < n; i++) {
        const char *r = roles[i];
        if (!r || !contents[i])
            return emt_fail(ENTMTP_ERR_INVALID_ARGUMENT, "chat prompt: message %d: %s is NULL", i,
                            r ? "content" : "role");
        if (!is_role(r, "system") && !is_role(r, "user") && !is_role(r, "assistant"))
            return emt_fail(ENTMTP_ERR_INVALID_ARGUMENT,
                            "chat prompt: message %d: role '%s' is not system, user or assistant", i, r);
        if (is_role(r, "system") && i > 0)
            return emt_fail(ENTMTP_ERR_INVALID_ARGUMENT,
                            "chat prompt: message %d: a system message may only come first", i);
        if (alternate && i >= first && !is_role(r, (i - first) % 2 ? "assistant" : "user"))
            return emt_fail(ENTMTP_ERR_INVALID_ARGUMENT,
                            "chat prompt: message %d: the %s template needs user and assistant turns to "
                            "alternate, starting with user", i, family);
    }
    if (n <= first || !is_role(roles[n - 1], "user"))
        return emt_fail(ENTMTP_ERR_INVALID_ARGUMENT, "chat prompt: the last of the %d messages must be a user message", n);
    return ENTMTP_OK;
}

static entmtp_status detect_format(const emt_tokenizer *t, chat_format *fmt) {
    const char *tmpl = t->chat_template;
    if (tmpl) {
        if (strstr(tmpl, "[SYSTEM_PROMPT]"))
            return emt_fail(ENTMTP_ERR_UNSUPPORTED,
                            "chat template not rendered: Mistral's [SYSTEM_PROMPT] format (Mistral "
                            "Small 3, Devstral) with its built-in system prompt: '%.80s%s'", tmpl,
                            strlen(tmpl) > 80 ? "..." : "");
        if (strstr(tmpl, DS_USER)) *fmt = CHAT_DEEPSEEK; /* <｜User｜> */
        else if (strstr(tmpl, "<|im_start|>")) *fmt = CHAT_CHATML;
        else if (strstr(tmpl, "<|start_header_id|>")) *fmt = CHAT_LLAMA3;
        else if (strstr(tmpl, "[INST]")) *fmt = strstr(tmpl, "<<SYS>>") ? CHAT_LLAMA2 : CHAT_MISTRAL;
        else if (strstr(tmpl, "<|user|>") && strstr(tmpl, "<|end|>")) *fmt = CHAT_PHI3;
        else if (strstr(tmpl, "<start_of_turn>")) *fmt = CHAT_GEMMA;
        else
            return emt_fail(ENTMTP_ERR_UNSUPPORTED,
                            "chat template not recognised (supported: ChatML, Llama 3, Llama 2, "
                            "Mistral [INST], Phi-3, Gemma, DeepSeek-R1): '%.80s%s'", tmpl,
                            strlen(tmpl) > 80 ? "..." : "");
    } else if (emt_tokenizer_find(t, "<|im_start|>", 12) >= 0) {
        *fmt = CHAT_CHATML;
    } else if (emt_tokenizer_find(t, "<|start_header_id|>", 19) >= 0) {
        *fmt = CHAT_LLAMA3;
    } else {
        return emt_fail(ENTMTP_ERR_UNSUPPORTED,
                        "the tokenizer has no chat template and no ChatML or Llama 3 tokens");
    }
    return ENTMTP_OK;
}

static int tmpl_has(const emt_tokenizer *t, const char *marker) {
    return t->chat_template && strstr(t->chat_template, marker);
}

/* "26 Jul 2024": strftime("%d %b %Y") of a UTC day, without the C locale's
 * help (days since 1970-01-01 to a civil date, H. Hinnant's algorithm). */
static void format_day(int64_t unix_time, char out[16]) {
    static const char *const mon[] = { "Jan", "Feb", "Mar", "Apr", "May", "Jun",
                                       "Jul", "Aug", "Sep", "Oct", "Nov", "Dec" };
    int64_t z = (unix_time >= 0 ? unix_time : unix_time - 86399) / 86400 + 719468;
    int64_t era = (z >= 0 ? z : z - 146096) / 146097;
    int64_t doe = z - era * 146097;
    int64_t yoe = (doe - doe / 1460 + doe / 36524 - doe / 146096) / 365;
    int64_t doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    int64_t mp = (5 * doy + 2) / 153;
    int64_t d = doy - (153 * mp + 2) / 5 + 1, m = mp < 10 ? mp + 3 : mp - 9;
    int64_t y = yoe + era * 400 + (m <= 2);
    snprintf(out, 16, "%02d %s %04d", (int)d, mon[m - 1], (int)(y % 10000));
}

/* Llama 3.1-3.3 open every conversation with a system turn naming the
 * knowledge cut-off and today's date: the template's `strftime_now` when it
 * calls it (3.2: the day of `now`, UTC), else its literal date_string. */
static void llama3_date_header(sbuf *b, const emt_tokenizer *t, int64_t now) {
    char day[16] = "26 Jul 2024";
    const char *lit = strstr(t->chat_template, "set date_string = \"");
    if (tmpl_has(t, "strftime_now")) {
        format_day(now, day);
    } else if (lit) {
        lit += strlen("set date_string = \"");
        const char *end = strchr(lit, '"');
        if (end && end - lit < (ptrdiff_t)sizeof day) {
            memcpy(day, lit, (size_t)(end - lit));
            day[end - lit] = '\0';
        }
    }
    sb_str(b, "Cutting Knowledge Date: December 2023\nToday Date: ");
    sb_str(b, day);
    sb_str(b, "\n\n");
}

/* A turn of ChatML, Llama 3 or Phi-3: head role mid content tail */
typedef struct turn_format {
    const char *head, *mid, *tail;
    int trim; /* the template's `| trim` on the content */
} turn_format;

static const turn_format g_turn_formats[] = {
    [CHAT_CHATML] = { "<|im_start|>", "\n", "<|im_end|>\n", 0 },
    [CHAT_LLAMA3] = { "<|start_header_id|>", "<|end_header_id|>\n\n", "<|eot_id|>", 1 },
    [CHAT_PHI3] = { "<|", "|>\n", "<|end|>\n", 0 },
};

static void turn(sbuf *b, const turn_format *f, const char *role, const char *content) {
    sb_str(b, f->head);
    sb_str(b, role);
    sb_str(b, f->mid);
    if (!content) return; /* the generation prompt: the header alone */
    if (f->trim) sb_trimmed(b, content);
    else sb_str(b, content);
    sb_str(b, f->tail);
}

/* Each family's turns as its template writes them (add_generation_prompt
 * on; the template's leading bos token is the caller's, see
 * emt_chat_render_at). */
static void render(sbuf *b, const emt_tokenizer *t, chat_format fmt, const char *system,
                   const char *const *roles, const char *const *contents, int32_t n, int64_t now) {
    switch (fmt) {
    case CHAT_LLAMA3:
        if (tmpl_has(t, "Cutting Knowledge Date")) {
            sb_str(b, "<|start_header_id|>system<|end_header_id|>\n\n");
            llama3_date_header(b, t, now);
            if (system) sb_trimmed(b, system);
            sb_str(b, "<|eot_id|>");
            system = NULL;
        }
        /* fall through */
    case CHAT_CHATML:
    case CHAT_PHI3:
        if (system) turn(b, &g_turn_formats[fmt], "system", system);
        for (int32_t i = 0; i < n; i++) turn(b, &g_turn_formats[fmt], roles[i], contents[i]);
        turn(b, &g_turn_formats[fmt], "assistant", NULL);
        /* QwQ and other reasoning templates open the answer with <think> */
        if (fmt == CHAT_CHATML && tmpl_has(t, "<|im_start|>assistant\\n<think>\\n")) sb_str(b, "<think>\n");
        break;
    case CHAT_LLAMA2: /* [INST] user [/INST] assistant </s><s>[INST] user [/INST] */
        for (int32_t i = 0; i < n; i++) {
            if (is_role(roles[i], "assistant")) {
                sb_str(b, " ");
                sb_trimmed(b, contents[i]);
                sb_str(b, " ");
                sb_str(b, special_text(t, t->eos));
                continue;
            }
            if (i > 0) sb_str(b, special_text(t, t->bos));
            sb_str(b, "[INST] ");
            if (i == 0 && system) {
                sb_str(b, "<<SYS>>\n");
                sb_str(b, system);
                sb_str(b, "\n<</SYS>>\n\n");
            }
            sb_trimmed(b, contents[i]);
            sb_str(b, " [/INST]");
        }
        break;
    case CHAT_MISTRAL: { /* [INST]user[/INST]assistant</s>...; the system text opens the last user turn */
        int spaced = tmpl_has(t, "[INST] ");
        for (int32_t i = 0; i < n; i++) {
            if (is_role(roles[i], "assistant")) {
                sb_str(b, contents[i]);
                sb_str(b, special_text(t, t->eos));
                continue;
            }
            sb_str(b, spaced ? "[INST] " : "[INST]");
            if (i == n - 1 && system) {
                sb_str(b, system);
                sb_str(b, "\n\n");
            }
            sb_str(b, contents[i]);
            sb_str(b, spaced ? " [/INST]" : "[/INST]");
        }
        break;
    }
    case CHAT_GEMMA: /* no system role: Gemma 3's template prepends it to the first user turn */
        for (int32_t i = 0; i < n; i++) {
            sb_str(b, is_role(roles[i], "user") ? "<start_of_turn>user\n" : "<start_of_turn>model\n");
            if (i == 0 && system) {
                sb_str(b, system);
                sb_str(b, "\n\n");
            }
            sb_trimmed(b, contents[i]);
            sb_str(b, "<end_of_turn>\n");
        }
        sb_str(b, "<start_of_turn>model\n");
        break;
    case CHAT_DEEPSEEK: /* system text first, then <｜User｜>u<｜Assistant｜>a<｜end▁of▁sentence｜> */
        if (system) sb_str(b, system);
        for (int32_t i = 0; i < n; i++) {
            int user = is_role(roles[i], "user");
            sb_str(b, user ? DS_USER : DS_ASSISTANT);
            sb_str(b, contents[i]);
            if (!user) sb_str(b, DS_END);
        }
        sb_str(b, DS_ASSISTANT);
        if (tmpl_has(t, DS_ASSISTANT "<think>\\n")) sb_str(b, "<think>\n");
        break;
    }
}

entmtp_status emt_chat_render(const emt_tokenizer *t, const char *const *roles, const char *const *contents,
                              int32_t n, char *text, size_t capacity, size_t *len_out) {
    return emt_chat_render_at(t, roles, contents, n, (int64_t)time(NULL), text, capacity, len_out);
}

entmtp_status emt_chat_render_at(const emt_tokenizer *t, const char *const *roles,
                                 const char *const *contents, int32_t n, int64_t now, char *text,
                                 size_t capacity, size_t *len_out) {
    if (!t) return emt_fail(ENTMTP_ERR_INVALID_ARGUMENT, "chat prompt: tokenizer is NULL");
    if (!len_out) return emt_fail(ENTMTP_ERR_INVALID_ARGUMENT, "chat prompt: text_len output is NULL");
    if (!text && capacity > 0)
        return emt_fail(ENTMTP_ERR_INVALID_ARGUMENT, "chat prompt: text is NULL with capacity %zu", capacity);
    if (n > 0 && (!roles || !contents))
        return emt_fail(ENTMTP_ERR_INVALID_ARGUMENT, "chat prompt: %s is NULL with %d messages",
                        roles ? "contents" : "roles", n);
    chat_format fmt = CHAT_CHATML;
    entmtp_status st = detect_format(t, &fmt);
    if (st) return st;
    int alternate = fmt == CHAT_LLAMA2 || fmt == CHAT_GEMMA || fmt == CHAT_MISTRAL;
    if ((st = check_turns(roles, contents, n, alternate, g_family[fmt]))) return st;
    if (is_role(roles[0], "system") && tmpl_has(t, "System role not supported"))
        return emt_fail(ENTMTP_ERR_INVALID_ARGUMENT,
                        "chat prompt: the %s template refuses a system message ('System role not "
                        "supported', Gemma 2's); leave the system prompt out", g_family[fmt]);
    /* the system turn is rendered apart: Llama 2 and Gemma fold it into the first user turn */
    const char *system = NULL;
    char *dflt = NULL;
    if (is_role(roles[0], "system")) {
        system = contents[0];
        roles++;
        contents++;
        n--;
    } else if (fmt == CHAT_CHATML && t->chat_template) {
        system = dflt = default_system(t->chat_template);
    }
    sbuf b = { 0 };
    /* A template that prints bos_token opens with it. As llama.cpp does
     * (common/chat.cpp), the text leaves it out when the tokenizer adds a
     * BOS itself (ENTMTP_TOKENIZE_ADD_SPECIAL: one BOS, never two) and keeps
     * it when it does not (parse_special then gives its id). */
    if (!t->add_bos && t->bos >= 0 && tmpl_has(t, "bos_token")) sb_str(&b, special_text(t, t->bos));
    render(&b, t, fmt, system, roles, contents, n, now);
    free(dflt);
    if (b.oom) {
        free(b.p);
        return ENTMTP_ERR_OUT_OF_MEMORY;
    }
    *len_out = b.n;
    st = ENTMTP_OK;
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

/* --chat-template NAME: the markers that make detect_format pick each family */
static const struct {
    const char *name, *markers;
} g_template_names[] = {
    { "chatml", "<|im_start|>" },          { "llama3", "<|start_header_id|>" },
    { "llama2", "[INST] <<SYS>>" },        { "mistral", "[INST]" },
    { "phi3", "<|user|><|end|>" },         { "gemma", "<start_of_turn>" },
    { "deepseek-r1", DS_USER },
};

entmtp_status emt_chat_render_template(const emt_tokenizer *t, const char *chat_template,
                                       const char *const *roles, const char *const *contents, int32_t n,
                                       char *text, size_t capacity, size_t *len_out) {
    if (!t) return emt_fail(ENTMTP_ERR_INVALID_ARGUMENT, "chat prompt: tokenizer is NULL");
    if (!chat_template) return emt_chat_render(t, roles, contents, n, text, capacity, len_out);
    if (!*chat_template) return emt_fail(ENTMTP_ERR_INVALID_ARGUMENT, "chat prompt: the chat template is empty");
    /* the same tokenizer with another template: rendering only reads it */
    emt_tokenizer with = *t;
    with.chat_template = (char *)chat_template;
    for (size_t i = 0; i < sizeof g_template_names / sizeof g_template_names[0]; i++)
        if (!strcmp(chat_template, g_template_names[i].name)) with.chat_template = (char *)g_template_names[i].markers;
    return emt_chat_render(&with, roles, contents, n, text, capacity, len_out);
}

entmtp_status emt_chat_prompt(const emt_tokenizer *t, const char *system_prompt, const char *user,
                              char *text, size_t capacity, size_t *len_out) {
    if (!user) return emt_fail(ENTMTP_ERR_INVALID_ARGUMENT, "chat prompt: user message is NULL");
    const char *roles[] = { "system", "user" }, *contents[] = { system_prompt, user };
    int with_system = system_prompt != NULL;
    return emt_chat_render(t, roles + !with_system, contents + !with_system, 1 + with_system, text, capacity,
                           len_out);
}
