/* Internals shared by the tokenizer's translation units (core, chat, file
 * constructors). Not part of the internal API other layers use. */
#ifndef EMT_TOKENIZER_INTERNAL_H
#define EMT_TOKENIZER_INTERNAL_H

#define PCRE2_CODE_UNIT_WIDTH 8
#include <pcre2.h>

#include "tokenizer/tokenizer.h"

#define EMT_TOK_MAX_PATTERNS 4

typedef enum emt_tok_kind { EMT_TOK_BPE = 1, EMT_TOK_SPM = 2 } emt_tok_kind;

/* A byte string that is not NUL-terminated. */
typedef struct emt_strref {
    const char *s;
    size_t n;
} emt_strref;

/* Everything emt_tokenizer_create takes, in the form the file constructors
 * have it: token texts and merges may point into a mapping (no NUL). */
typedef struct emt_tok_build {
    const emt_tokenizer_spec *spec;  /* ids, add_bos, model, pre, types, scores, template */
    const emt_strref *tokens;        /* overrides spec->tokens when set */
    const emt_strref *merge_strs;    /* "a b" (n = spec->n_merges), overrides spec->merges */
    const emt_strref *merge_pairs;   /* 2 * n_merges parts, overrides both */
    int n_patterns;                  /* > 0: explicit pre-tokenizer regexes */
    const char *patterns[EMT_TOK_MAX_PATTERNS];
    const char *pre_name;            /* name reported for explicit patterns */
    int unk_for_missing;             /* byte-level: a byte absent from the vocab -> unk */
    int add_space_prefix;            /* SentencePiece: -1 default (1), 0 never, 1 at the start and
                                        after each special token, 2 at the start only */
    int no_byte_fallback;            /* SentencePiece: <0xNN> tokens are not used for unknown
                                        characters (HF byte_fallback = false) */
    int fuse_unk;                    /* SentencePiece with merges: consecutive unk become one */
    int spm_merges;                  /* SentencePiece: merge by the merge list (HF), not by
                                        scores (GGUF); implied by n_merges > 0 */
    int prefix_if_no_space;          /* SentencePiece: no prefix when the text already starts
                                        with a space (HF's Metaspace pre-tokenizer) */
    int ignore_merges;               /* -1 default (on for llama-bpe), 0, 1: a pre-token
                                        that is itself a token is not merged (Llama 3) */
    const uint8_t *strip;            /* per token EMT_TOK_LSTRIP | EMT_TOK_RSTRIP, may be NULL:
                                        whitespace left / right of a matched literal token
                                        is dropped (HF added_tokens lstrip/rstrip) */
} emt_tok_build;

enum { EMT_TOK_LSTRIP = 1, EMT_TOK_RSTRIP = 2 };

typedef struct emt_tok_map_entry {
    uint32_t hash;
    int32_t id;     /* first id with this text, -1 = empty slot */
    int32_t bpe_id; /* first id usable as a BPE symbol, -1 when none */
} emt_tok_map_entry;

typedef struct emt_merge_entry {
    uint64_t key; /* (left << 32) | right; UINT64_MAX = empty */
    int32_t rank;
    int32_t result;
} emt_merge_entry;

struct emt_tokenizer {
    emt_tok_kind kind;
    char *model_name;
    char *pre_name;
    int32_t n_tokens;
    char *text_arena;     /* token texts, each NUL-terminated */
    size_t *text_off;
    uint32_t *text_len;
    uint8_t *types;
    float *scores;        /* SentencePiece only */
    char *dec_arena;      /* bytes each token renders to */
    size_t *dec_off;
    uint32_t *dec_len;
    uint8_t *eog;
    uint8_t *strip;       /* EMT_TOK_LSTRIP | EMT_TOK_RSTRIP per token, NULL when none */

    emt_tok_map_entry *map;
    size_t map_mask;
    emt_merge_entry *merges;
    size_t merges_mask;
    int32_t n_merges;

    int32_t byte_tok[256];     /* byte-level: symbol of each byte, -1 if absent */
    char byte_chr[256][2];     /* byte-level: UTF-8 of each byte's character */
    uint8_t byte_chr_len[256];
    int32_t byte_fallback[256]; /* SentencePiece: <0xNN> ids, -1 if absent */

    /* literal tokens matched before pre-tokenisation, bucketed by first byte,
     * longest first within a bucket */
    int32_t *lit_ids;
    int32_t n_lit;
    int32_t lit_start[257];

    int n_patterns;
    pcre2_code *patterns[EMT_TOK_MAX_PATTERNS];

    int32_t bos, eos, unk, pad, eot;
    int add_bos, add_eos; /* what ENTMTP_TOKENIZE_ADD_SPECIAL adds */
    int unk_for_missing;
    int add_space_prefix;   /* 0, 1, 2 as in emt_tok_build */
    int use_byte_fallback;
    int fuse_unk;
    int spm_merges;
    int prefix_if_no_space;
    int ignore_merges;
    char *chat_template;
};

entmtp_status emt_tokenizer_build(const emt_tok_build *b, emt_tokenizer **out);

/* Known pre-tokenizer regexes. */
extern const char emt_pat_gpt2[];
extern const char emt_pat_llama3[];
extern const char emt_pat_digit[];
extern const char emt_pat_qwen2[];

#endif
