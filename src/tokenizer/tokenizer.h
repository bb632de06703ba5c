/* Byte-level BPE (GPT-2 family, incl. SmolLM and Llama 3) and SentencePiece
 * BPE (Llama 2) tokenizers, built from GGUF metadata or tokenizer.json, with
 * multi-turn chat formatting. */
#ifndef EMT_TOKENIZER_H
#define EMT_TOKENIZER_H

#include "common/common.h"

typedef struct emt_tokenizer emt_tokenizer;

typedef enum emt_token_type { /* GGUF tokenizer.ggml.token_type values */
    EMT_TOKEN_NORMAL = 1, EMT_TOKEN_UNKNOWN = 2, EMT_TOKEN_CONTROL = 3,
    EMT_TOKEN_USER_DEFINED = 4, EMT_TOKEN_UNUSED = 5, EMT_TOKEN_BYTE = 6
} emt_token_type;

typedef struct emt_tokenizer_spec {
    const char *model;          /* "gpt2" (byte-level BPE) or "llama" (SentencePiece) */
    const char *pre;            /* pre-tokenizer name: "smollm", "llama-bpe", "default", ... */
    int32_t n_tokens;
    const char *const *tokens;  /* token strings (NUL-terminated) */
    const size_t *token_lens;   /* may be NULL (strlen) */
    const int32_t *token_types; /* may be NULL (all normal) */
    const float *scores;        /* SentencePiece scores, may be NULL */
    int32_t n_merges;
    const char *const *merges;  /* "a b" strings */
    int32_t bos, eos, unk, pad, eot; /* -1 when absent */
    int add_bos;                /* add_bos_token: a BOS first under EMT_TOKENIZE_ADD_SPECIAL */
    int add_eos;                /* add_eos_token: an EOS last under EMT_TOKENIZE_ADD_SPECIAL */
    const char *chat_template;  /* may be NULL */
} emt_tokenizer_spec;

entmtp_status emt_tokenizer_create(const emt_tokenizer_spec *spec, emt_tokenizer **out);
void emt_tokenizer_free(emt_tokenizer *t);

/* `specials`: the values of entmtp_tokenize's add_bos argument
 * (ENTMTP_TOKENIZE_NO_SPECIAL, _FORCE_BOS, _ADD_SPECIAL; any other non-zero
 * value as _FORCE_BOS). Same buffer protocol as entmtp_tokenize. */
entmtp_status emt_tokenize(const emt_tokenizer *t, const char *text, size_t len, int specials,
                           int parse_special, int32_t *tokens, int32_t capacity, int32_t *n_out);
entmtp_status emt_detokenize(const emt_tokenizer *t, const int32_t *tokens, int32_t n, char *text,
                             size_t capacity, size_t *len_out);
entmtp_status emt_chat_prompt(const emt_tokenizer *t, const char *system_prompt, const char *user,
                              char *text, size_t capacity, size_t *len_out);
/* A conversation: roles[i] "system" (first only), "user" or "assistant", the
 * last turn the user's; the text ends where the assistant's reply begins. */
entmtp_status emt_chat_render(const emt_tokenizer *t, const char *const *roles, const char *const *contents,
                              int32_t n, char *text, size_t capacity, size_t *len_out);
/* Same with `chat_template` (Jinja text recognised by its markers, or a
 * family name: chatml, llama3, llama2, mistral, phi3, gemma, deepseek-r1) in
 * place of the model's; NULL: the model's. */
entmtp_status emt_chat_render_template(const emt_tokenizer *t, const char *chat_template,
                                       const char *const *roles, const char *const *contents, int32_t n,
                                       char *text, size_t capacity, size_t *len_out);
/* Same, with "today" given (Unix seconds; the templates that print the
 * date, Llama 3.2's, read it): emt_chat_render passes time(NULL). */
entmtp_status emt_chat_render_at(const emt_tokenizer *t, const char *const *roles,
                                 const char *const *contents, int32_t n, int64_t now, char *text,
                                 size_t capacity, size_t *len_out);
int emt_tokenizer_is_eog(const emt_tokenizer *t, int32_t token);
int32_t emt_tokenizer_n_vocab(const emt_tokenizer *t);
/* 64-bit FNV-1a of the token texts in id order, each followed by a 0 byte:
 * identifies a vocabulary whatever file it came from (entmtp_model_info). */
uint64_t emt_tokenizer_vocab_hash(const emt_tokenizer *t);
int32_t emt_tokenizer_bos(const emt_tokenizer *t);
int32_t emt_tokenizer_eos(const emt_tokenizer *t);

/* Constructors from model files. ENTMTP_ERR_NOT_FOUND when the file or
 * directory carries no tokenizer (the model then runs on token ids only).
 * Other errors name the file and the value at fault. */
struct emt_gguf;
entmtp_status emt_tokenizer_from_gguf(const struct emt_gguf *g, emt_tokenizer **out);
/* tokenizer.json (+ tokenizer_config.json for the chat template and the
 * bos/eos names, when present) in the directory `dir`. */
entmtp_status emt_tokenizer_from_hf_dir(const char *dir, emt_tokenizer **out);
/* Same, from the text of tokenizer.json (and of tokenizer_config.json, may
 * be NULL); `name` is used in error messages. */
entmtp_status emt_tokenizer_from_hf_json(const char *tokenizer_json, const char *config_json,
                                         const char *name, emt_tokenizer **out);

/* Introspection. */
const char *emt_tokenizer_model(const emt_tokenizer *t);      /* "gpt2" or "llama" */
const char *emt_tokenizer_pre(const emt_tokenizer *t);        /* pre-tokenizer name */
const char *emt_tokenizer_chat_template(const emt_tokenizer *t); /* NULL when absent */
/* Text of token `id` as stored in the vocabulary (byte-level form for
 * "gpt2"), NULL when out of range; *len receives its length (may be NULL). */
const char *emt_tokenizer_token_text(const emt_tokenizer *t, int32_t id, size_t *len);
int emt_tokenizer_token_type(const emt_tokenizer *t, int32_t id); /* 0 when out of range */
/* First id whose text is exactly `text` (any type), -1 when none. */
int32_t emt_tokenizer_find(const emt_tokenizer *t, const char *text, size_t len);
int emt_tokenizer_add_bos(const emt_tokenizer *t);
int emt_tokenizer_add_eos(const emt_tokenizer *t);
int32_t emt_tokenizer_eot(const emt_tokenizer *t);
int32_t emt_tokenizer_unk(const emt_tokenizer *t);
int32_t emt_tokenizer_pad(const emt_tokenizer *t);

#endif
