/*
 * entmtp.h - EntMTP: speculative decoding with multi-token-prediction heads,
 * tree attention, typical acceptance and a per-step tree scheduler.
 *
 * This is the only header a user includes. C11, usable from C++.
 *
 * Conventions a caller must know
 * ------------------------------
 * - Every function that can fail returns an entmtp_status. On failure the
 *   calling thread's last-error message (entmtp_last_error()) names what was
 *   wrong: the file, tensor, field, index or value. Output parameters are left
 *   untouched (or set to NULL for handles) on failure.
 * - Handles are opaque. Whoever receives a handle from a create or load call owns it
 *   and releases it with the matching _free function, which accepts NULL.
 * - Versioned structs start with `struct_size`, the size the caller compiled
 *   against. Initialise a parameter struct with its entmtp_*_init(&p, sizeof p)
 *   function (or the header-inline entmtp_*_default_params(), which does the
 *   same with the caller's sizeof) and then change fields. The library reads
 *   and writes only the first struct_size bytes, so a program compiled against
 *   an older header keeps working with a newer library; bytes past the size the
 *   library knows must be zero (ENTMTP_ERR_INVALID_ARGUMENT otherwise), so a
 *   newer program's settings are never silently ignored by an older library.
 *   Variable-length data is passed as pointer + count, never as fixed arrays:
 *   the limits are run-time values (entmtp_limit()), not part of the ABI.
 * - Thread-safety: a model and a bank are immutable after loading/building and
 *   may be shared by any number of sessions on any number of threads (adding a
 *   tree to a bank that a running session uses is not allowed). A session and a
 *   policy are single-threaded objects: use each from one thread at a time.
 *   entmtp_last_error() is per thread.
 * - Tokens are int32_t ids of the model's vocabulary. Out-of-range ids are an
 *   error (ENTMTP_ERR_OUT_OF_RANGE), never undefined behaviour.
 *
 * Stability: everything outside the EXPERIMENTAL section is the stable ABI
 * (SONAME libentmtp.so.ENTMTP_ABI_VERSION), checked by scripts/check-abi.sh.
 * The EXPERIMENTAL section is visible only to code that defines
 * ENTMTP_EXPERIMENTAL_API before including this header (as zstd's
 * ZSTD_STATIC_LINKING_ONLY); its functions may change between minor versions
 * and are kept out of the ABI baseline. They are still checked for errors.
 * Declarations marked ENTMTP_DEPRECATED warn at compile time and are removed
 * at the next ABI version.
 */
#ifndef ENTMTP_H
#define ENTMTP_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* ---------------------------------------------------------------- version */

#define ENTMTP_VERSION_MAJOR 0
#define ENTMTP_VERSION_MINOR 2
#define ENTMTP_VERSION_PATCH 0
#define ENTMTP_VERSION_NUMBER \
    (ENTMTP_VERSION_MAJOR * 10000 + ENTMTP_VERSION_MINOR * 100 + ENTMTP_VERSION_PATCH)
/* The ABI major version: the number in the SONAME (libentmtp.so.1). */
#define ENTMTP_ABI_VERSION 1

#if defined(_WIN32)
#  if defined(ENTMTP_BUILDING_LIBRARY)
#    define ENTMTP_API __declspec(dllexport)
#  else
#    define ENTMTP_API
#  endif
#elif defined(__GNUC__) || defined(__clang__)
#  define ENTMTP_API __attribute__((visibility("default")))
#else
#  define ENTMTP_API
#endif

/* Marks a declaration that will be removed at the next ABI version; `msg`
 * names the replacement. Define ENTMTP_NO_DEPRECATION_WARNINGS to silence. */
#if defined(ENTMTP_NO_DEPRECATION_WARNINGS)
#  define ENTMTP_DEPRECATED(msg)
#elif defined(__cplusplus) && __cplusplus >= 201402L
#  define ENTMTP_DEPRECATED(msg) [[deprecated(msg)]]
#elif defined(__GNUC__) || defined(__clang__)
#  define ENTMTP_DEPRECATED(msg) __attribute__((deprecated(msg)))
#elif defined(_MSC_VER)
#  define ENTMTP_DEPRECATED(msg) __declspec(deprecated(msg))
#else
#  define ENTMTP_DEPRECATED(msg)
#endif

/* Runtime version: ENTMTP_VERSION_NUMBER of the library actually loaded. */
ENTMTP_API unsigned entmtp_version_number(void);
/* "MAJOR.MINOR.PATCH", static storage. */
ENTMTP_API const char *entmtp_version_string(void);

/* ----------------------------------------------------------------- status */

typedef enum entmtp_status {
    ENTMTP_OK = 0,
    ENTMTP_ERR_INVALID_ARGUMENT = 1, /* NULL pointer, bad size, bad flag value */
    ENTMTP_ERR_OUT_OF_MEMORY = 2,
    ENTMTP_ERR_IO = 3,               /* cannot open/read/write/map a file */
    ENTMTP_ERR_FORMAT = 4,           /* file present but malformed or corrupt */
    ENTMTP_ERR_UNSUPPORTED = 5,      /* valid input we do not support (arch, dtype) */
    ENTMTP_ERR_INVALID_TREE = 6,     /* tree choices fail validation */
    ENTMTP_ERR_INVALID_CONFIG = 7,   /* policy/session/bank settings inconsistent */
    ENTMTP_ERR_OUT_OF_RANGE = 8,     /* index or token id outside its range */
    ENTMTP_ERR_KV_FULL = 9,          /* KV cache capacity reached */
    ENTMTP_ERR_MISMATCH = 10,        /* heads/bank do not fit the model */
    ENTMTP_ERR_BACKEND = 11,         /* backend (CUDA) unavailable or failed */
    ENTMTP_ERR_CALLBACK = 12,        /* a user callback reported failure */
    ENTMTP_ERR_STATE = 13,           /* call not valid in the object's state */
    ENTMTP_ERR_NOT_FOUND = 14,       /* named object (tree, key) does not exist */
    ENTMTP_ERR_BUFFER_TOO_SMALL = 15,/* output buffer too small; size reported */
    ENTMTP_STOPPED = 16              /* not an error: entmtp_generate's token
                                      * callback asked to stop (last error untouched) */
} entmtp_status;

/* Short English name of a status code ("ENTMTP_ERR_FORMAT: malformed file"). */
ENTMTP_API const char *entmtp_status_string(entmtp_status status);
/* Message of the last failing call on this thread ("" if none). The pointer
 * stays valid until the next failing call on the same thread. */
ENTMTP_API const char *entmtp_last_error(void);
/* Clear this thread's last-error message. */
ENTMTP_API void entmtp_clear_error(void);
/* Record `message` (copied; NULL = the status's name) as this thread's last
 * error and return `status`, so a callback (a custom policy's select) can
 * explain its failure: `return entmtp_set_error(ENTMTP_ERR_CALLBACK, "...");`.
 * The library passes that message through instead of writing its own. */
ENTMTP_API entmtp_status entmtp_set_error(entmtp_status status, const char *message);

/* ----------------------------------------------------------------- limits */

/* Limits of the library actually loaded; a newer library may raise them. */
typedef enum entmtp_limit_kind {
    ENTMTP_LIMIT_MAX_HEADS = 0,       /* drafting depth (heads per model, tree depth) */
    ENTMTP_LIMIT_MAX_LADDER = 1,      /* trees in a threshold ladder (thresholds + 1) */
    ENTMTP_LIMIT_MAX_STOP_TOKENS = 2, /* entmtp_session_params.n_stop_tokens */
    ENTMTP_LIMIT_MAX_TREE_NODES = 3,  /* entmtp_bank_params.max_nodes */
    ENTMTP_LIMIT_MAX_TOPK = 4         /* entmtp_bank_params.topk */
} entmtp_limit_kind;

/* The limit's value, or -1 for a kind this library does not know. */
ENTMTP_API int32_t entmtp_limit(entmtp_limit_kind kind);

/* ================================================================= model */

typedef struct entmtp_model entmtp_model;

typedef enum entmtp_backend {
    ENTMTP_BACKEND_AUTO = 0, /* CUDA when a usable GPU and the CUDA plugin exist, else CPU */
    ENTMTP_BACKEND_CPU = 1,
    ENTMTP_BACKEND_CUDA = 2
} entmtp_backend;

/* How weight matrices are computed with. NATIVE keeps each in its stored
 * type where the backend has kernels for it (GGUF Q4_0/Q4_1/Q8_0, F16, BF16
 * on CPU; activations quantized to Q8 per 32 values for the integer types);
 * F32 converts every weight to F32 at load (exact F32 arithmetic, about 4x
 * the memory and bytes per token of a 4-bit file). Either way greedy
 * speculative decoding emits exactly greedy AR's tokens. */
typedef enum entmtp_compute_type {
    ENTMTP_COMPUTE_NATIVE = 0,
    ENTMTP_COMPUTE_F32 = 1
} entmtp_compute_type;

/* Progress of long operations; fraction in [0,1]. Return non-zero to cancel
 * (the operation then fails with ENTMTP_ERR_CALLBACK). */
typedef int (*entmtp_progress_fn)(float fraction, const char *what, void *user_data);

typedef struct entmtp_model_params {
    size_t struct_size;
    entmtp_backend backend;      /* default ENTMTP_BACKEND_AUTO */
    int32_t n_threads;           /* CPU threads; 0 = all online cores */
    int32_t device;              /* CUDA device ordinal, default 0 */
    entmtp_progress_fn progress; /* may be NULL */
    void *progress_user_data;
    entmtp_compute_type compute_type; /* default ENTMTP_COMPUTE_NATIVE */
} entmtp_model_params;

/* Writes the defaults into the first `size` bytes of *params (pass sizeof
 * *params) and sets struct_size = size. ENTMTP_ERR_INVALID_ARGUMENT for NULL
 * or a size smaller than struct_size itself. */
ENTMTP_API entmtp_status entmtp_model_params_init(entmtp_model_params *params, size_t size);

/* Load a Llama-family model: a GGUF file, or a Hugging Face directory holding
 * config.json and model.safetensors (or model.safetensors.index.json shards).
 * The file is memory-mapped and converted for the chosen backend. Any
 * structural problem is ENTMTP_ERR_FORMAT naming file and tensor; an
 * unsupported architecture is ENTMTP_ERR_UNSUPPORTED. `params` may be NULL. */
ENTMTP_API entmtp_status entmtp_model_load(const char *path, const entmtp_model_params *params,
                                           entmtp_model **out_model);
/* Frees the model. All sessions using it must have been freed first. */
ENTMTP_API void entmtp_model_free(entmtp_model *model);

typedef struct entmtp_model_info {
    size_t struct_size;
    char architecture[32];  /* "llama" */
    char name[128];         /* general.name or directory name */
    int32_t vocab_size;
    int32_t hidden_size;
    int32_t intermediate_size;
    int32_t n_layers;
    int32_t n_heads;
    int32_t n_kv_heads;
    int32_t head_dim;
    int32_t context_length;
    float rope_theta;
    float rms_norm_eps;
    int32_t tied_embeddings;    /* 1 when lm_head shares the token embedding */
    int32_t bos_token;          /* -1 if none */
    int32_t eos_token;          /* -1 if none */
    int64_t n_params;
    entmtp_backend backend;     /* backend actually in use (never AUTO) */
    /* Appended (a library older than these fields leaves them as the caller set them): */
    double load_seconds;        /* wall time of entmtp_model_load (mapping, conversion, tokenizer) */
    /* 64-bit FNV-1a of the tokenizer's token texts in id order, each followed
     * by a 0 byte: the same vocabulary gives the same value whatever the file
     * name or format. 0 when the model has no tokenizer. Shipped heads record
     * it (entmtp_drafter_find). */
    uint64_t vocab_hash;
} entmtp_model_info;

ENTMTP_API entmtp_status entmtp_model_get_info(const entmtp_model *model, entmtp_model_info *out);

/* Values of entmtp_tokenize's `add_bos` argument: which special tokens go
 * around the text's tokens. */
typedef enum entmtp_tokenize_special {
    /* The text's tokens only. */
    ENTMTP_TOKENIZE_NO_SPECIAL = 0,
    /* A BOS first (when the vocabulary has one) whatever the model's
     * tokenizer config says; never an EOS. Any other non-zero value not
     * listed here means this too (the argument was a plain on/off switch). */
    ENTMTP_TOKENIZE_FORCE_BOS = 1,
    /* What the model's tokenizer config asks for, as llama.cpp's
     * add_special = true: a BOS first when it sets add_bos_token (GGUF
     * tokenizer.ggml.add_bos_token; default on for SentencePiece and for
     * Llama 3's pre-tokenizer, as in llama.cpp; tokenizer_config.json's
     * add_bos_token, else tokenizer.json's post_processor), an EOS last when
     * it sets add_eos_token. add_sep_token adds nothing (llama.cpp appends a
     * SEP only for BERT vocabularies, which EntMTP does not load). A text
     * that already starts with the BOS gets a second one, as in llama.cpp:
     * give chat text from entmtp_chat_prompt*, which leaves the template's
     * leading BOS to this call. Use this for prompts. */
    ENTMTP_TOKENIZE_ADD_SPECIAL = 2
} entmtp_tokenize_special;

/* Text -> tokens with the model's own tokenizer. `add_bos` is one of
 * entmtp_tokenize_special (ENTMTP_TOKENIZE_ADD_SPECIAL for a prompt).
 * `parse_special` lets special token text such as "<|im_start|>" map to its
 * id. When `capacity` is too small, returns ENTMTP_ERR_BUFFER_TOO_SMALL and
 * sets *n_tokens to the size needed. `text` is UTF-8 of length `text_len`
 * (-1: NUL-terminated). */
ENTMTP_API entmtp_status entmtp_tokenize(const entmtp_model *model, const char *text,
                                         int64_t text_len, int add_bos, int parse_special,
                                         int32_t *tokens, int32_t capacity, int32_t *n_tokens);
/* Tokens -> UTF-8 text (NUL-terminated when it fits). Same BUFFER_TOO_SMALL
 * protocol: *text_len receives the length needed, excluding the NUL. */
ENTMTP_API entmtp_status entmtp_detokenize(const entmtp_model *model, const int32_t *tokens,
                                           int32_t n_tokens, char *text, size_t capacity,
                                           size_t *text_len);
/* Formats a single-turn chat prompt with the model's chat template (system
 * prompt may be NULL for the template's default). Same buffer protocol. */
ENTMTP_API entmtp_status entmtp_chat_prompt(const entmtp_model *model, const char *system_prompt,
                                            const char *user_message, char *text, size_t capacity,
                                            size_t *text_len);
/* Formats a conversation with the model's chat template: n_messages turns,
 * roles[i] "system" (first turn only), "user" or "assistant" with its text in
 * contents[i], the last turn the user's; the text ends where the assistant's
 * reply begins. Llama 2 and Gemma templates need user and assistant turns to
 * alternate. Same buffer protocol; ENTMTP_ERR_INVALID_ARGUMENT names the
 * message at fault. */
ENTMTP_API entmtp_status entmtp_chat_prompt_messages(const entmtp_model *model, const char *const *roles,
                                                     const char *const *contents, int32_t n_messages,
                                                     char *text, size_t capacity, size_t *text_len);
/* entmtp_chat_prompt_messages with another chat template than the model's
 * (a front end's --chat-template): `chat_template` is a Jinja template text,
 * recognised by its markers as the model's own is (ChatML, Llama 3, Llama 2,
 * Mistral [INST], Phi-3, Gemma, DeepSeek-R1), or one of the names "chatml",
 * "llama3", "llama2", "mistral", "phi3", "gemma", "deepseek-r1"; NULL uses
 * the model's. A template of no known family is ENTMTP_ERR_UNSUPPORTED. */
ENTMTP_API entmtp_status entmtp_chat_prompt_template(const entmtp_model *model, const char *chat_template,
                                                     const char *const *roles, const char *const *contents,
                                                     int32_t n_messages, char *text, size_t capacity,
                                                     size_t *text_len);
/* 1 when the token ends generation (eos, eot, im_end...), else 0. */
ENTMTP_API int entmtp_token_is_eog(const entmtp_model *model, int32_t token);

/* ================================================================= heads */

typedef struct entmtp_heads entmtp_heads;

typedef enum entmtp_heads_kind {
    ENTMTP_HEADS_MEDUSA = 1, /* independent ResBlock heads on the last hidden state */
    ENTMTP_HEADS_HYDRA = 2,  /* head d also sees the tokens drafted before it */
    ENTMTP_HEADS_EAGLE3 = 3  /* EAGLE-3: one decoder layer over the target's low, mid and
                              * high hidden states, drafting autoregressively */
} entmtp_heads_kind;

/* Load a drafter for `model`: MTP heads from a safetensors file in the
 * Medusa or Hydra checkpoint layout (detected from tensor names; heads
 * without lm_head weights share the model's lm_head), or an EAGLE-3 drafter
 * as SafeAILab/EAGLE and SpecForge publish it: a directory with config.json
 * and model.safetensors, or such a safetensors file (tensors fc, midlayer.*,
 * norm, lm_head, d2t/t2d; docs/drafters.md). The model must outlive the
 * heads. A hidden size, vocabulary or layer choice that does not fit the
 * model is ENTMTP_ERR_MISMATCH, naming the tensor or field and the shapes. */
ENTMTP_API entmtp_status entmtp_heads_load(entmtp_model *model, const char *path,
                                           entmtp_heads **out_heads);
ENTMTP_API void entmtp_heads_free(entmtp_heads *heads);

typedef struct entmtp_heads_info {
    size_t struct_size;
    entmtp_heads_kind kind;
    int32_t n_heads;        /* drafting depth the heads support */
    int32_t n_layers;       /* ResBlocks per head (EAGLE-3: its decoder layers, 1) */
    int32_t shares_lm_head; /* 1 when the base lm_head is reused */
} entmtp_heads_info;

ENTMTP_API entmtp_status entmtp_heads_get_info(const entmtp_heads *heads, entmtp_heads_info *out);

/* Drafters (heads + bank) shipped for a model, matched by what identifies the
 * model, never by file name. A drafter is X.safetensors with X.train.json,
 * whose "model" object records the model the heads were trained for:
 *   "model": {"architecture": "llama", "hidden_size": 576, "n_layers": 30,
 *             "vocab_size": 49152, "vocab_hash": "fnv1a64:<16 hex digits>"}
 * (entmtp_model_info's fields; `entmtp info` prints them), and optionally a
 * bank searched for the heads, X.bank.json. */
typedef struct entmtp_drafter {
    size_t struct_size;
    char heads_path[4096]; /* the matching heads file; "" when none matched */
    char bank_path[4096];  /* its X.bank.json; "" when there is none */
    char reason[1024];     /* why it matched ("matched by identity: ..."), or why none did */
} entmtp_drafter;

/* Looks through the directories of `search_path` (separated by ':', searched
 * in order; within one, Hydra heads before Medusa, then by name) for the
 * first drafter whose recorded model identity equals `model`'s: architecture,
 * hidden size, layer count, vocabulary size and vocabulary hash. ENTMTP_OK
 * with out filled; ENTMTP_ERR_NOT_FOUND when none matched, with out->reason
 * (and the last error) naming each candidate and the field that differed. A
 * directory that does not exist is skipped. */
ENTMTP_API entmtp_status entmtp_drafter_find(const entmtp_model *model, const char *search_path,
                                             entmtp_drafter *out);

/* ================================================================== bank */

/* A TopologyBank: a list of draft trees compiled into verifier buffers.
 * Selecting a tree is an index change; nothing is compiled at step time. */
typedef struct entmtp_bank entmtp_bank;

typedef struct entmtp_bank_params {
    size_t struct_size;
    int32_t max_depth; /* deepest allowed path (= heads available); default 16 */
    int32_t topk;      /* candidates per head: ranks must be < topk; default 10 */
    int32_t max_nodes; /* nodes per tree including the root; default 256 */
} entmtp_bank_params;

ENTMTP_API entmtp_status entmtp_bank_params_init(entmtp_bank_params *params, size_t size);
/* `params` may be NULL (defaults). */
ENTMTP_API entmtp_status entmtp_bank_create(const entmtp_bank_params *params, entmtp_bank **out_bank);
ENTMTP_API void entmtp_bank_free(entmtp_bank *bank);

/* Compile a tree given in the Medusa "choices" encoding and append it.
 * Path i is ranks[offset_i .. offset_i + path_lengths[i]) where offset_i is the
 * sum of the previous lengths. Paths may come in any order. Validation: every
 * prefix of a path present, no duplicates, ranks in [0, topk), depth <=
 * max_depth, nodes <= max_nodes, name unique and non-empty. Failure is
 * ENTMTP_ERR_INVALID_TREE (message names the offending path) and leaves the
 * bank unchanged. *out_index (may be NULL) receives the tree's index. */
ENTMTP_API entmtp_status entmtp_bank_add_tree(entmtp_bank *bank, const char *name,
                                              const int32_t *ranks, const int32_t *path_lengths,
                                              int32_t n_paths, int32_t *out_index);
/* Same, with choices as JSON text: [[0],[0,0],[1],...] (an empty list [] is
 * the root-only tree, i.e. plain autoregressive decoding). */
ENTMTP_API entmtp_status entmtp_bank_add_tree_json(entmtp_bank *bank, const char *name,
                                                   const char *choices_json, int32_t *out_index);
/* Built-in trees: "medusa_vicuna_7b_stage2" (Medusa default), "mc_sim_7b_63"
 * (the 63-node Medusa tree, also Hydra's default), "hydra_default" (alias of
 * mc_sim_7b_63), "chain_1".."chain_5" (single path), "ar" (root only). */
ENTMTP_API entmtp_status entmtp_bank_add_builtin(entmtp_bank *bank, const char *builtin_name,
                                                 int32_t *out_index);
/* Name of built-in tree i, NULL when i is past the end. */
ENTMTP_API const char *entmtp_builtin_tree_name(int32_t i);

/* Bank files are JSON: {"trees":[{"name":..,"choices":[[..]..],
 * "nodes":N,"depth":D,"mean_accept_length":x,"tokens_per_second":y}, ...],
 * "policy":{...}}; see docs/bank-format.md. `params` may be NULL. */
ENTMTP_API entmtp_status entmtp_bank_load(const char *path, const entmtp_bank_params *params,
                                          entmtp_bank **out_bank);
ENTMTP_API entmtp_status entmtp_bank_save(const entmtp_bank *bank, const char *path);

ENTMTP_API int32_t entmtp_bank_size(const entmtp_bank *bank);
ENTMTP_API entmtp_status entmtp_bank_find(const entmtp_bank *bank, const char *name,
                                          int32_t *out_index);

typedef struct entmtp_tree_info {
    size_t struct_size;
    const char *name;         /* owned by the bank */
    int32_t n_nodes;          /* including the root */
    int32_t depth;            /* longest path length (root excluded) */
    int32_t n_paths;          /* number of choices */
    int32_t n_leaves;         /* rows of retrieve_indices */
    float mean_accept_length; /* measured figure, 0 if unknown */
    float tokens_per_second;  /* measured figure, 0 if unknown */
} entmtp_tree_info;

ENTMTP_API entmtp_status entmtp_bank_tree_info(const entmtp_bank *bank, int32_t index,
                                               entmtp_tree_info *out);
/* Record measured figures for tree `index` (kept by entmtp_bank_save). */
ENTMTP_API entmtp_status entmtp_bank_set_figures(entmtp_bank *bank, int32_t index,
                                                 float mean_accept_length, float tokens_per_second);

/* The compiled verifier buffers of a tree, in the layout of the public Medusa
 * reference (generate_medusa_buffers). Pointers are owned by the bank and
 * stay valid until the bank is freed. */
typedef struct entmtp_tree_buffers {
    size_t struct_size;
    int32_t n_nodes;                 /* N, root included */
    int32_t depth;                   /* D */
    int32_t topk;                    /* stride used by tree_indices */
    const uint8_t *attn_mask;        /* N*N row-major; [i][j]=1 when j is i or an ancestor */
    const int32_t *tree_indices;     /* N; index into [root, head0 top-k, head1 top-k, ...] */
    const int32_t *position_ids;     /* N; depth of each node */
    const int32_t *retrieve_indices; /* n_leaves * (D+1), padded with -1 */
    int32_t n_leaves;
    const int32_t *parents;          /* N; parent node index, -1 for the root */
    const int32_t *node_ranks;       /* N; child rank of each node, -1 for the root */
} entmtp_tree_buffers;

ENTMTP_API entmtp_status entmtp_bank_tree_buffers(const entmtp_bank *bank, int32_t index,
                                                  entmtp_tree_buffers *out);

/* ================================================================ policy */

/* Features of the current position, computed from logits the step already
 * has. Passed to a policy's select(). Fields were appended over versions:
 * read one only when struct_size covers it (ENTMTP_FEATURES_HAS below); a
 * session always passes the whole struct of the library it runs. */
typedef struct entmtp_features {
    size_t struct_size;
    float p0;                         /* base model top-1 probability */
    int32_t n_heads;                  /* entries in head_p and g; rows of head_topk_p */
    const float *head_p;              /* n_heads: top-1 probability of head d (p1..pD) */
    const float *g;                   /* n_heads: g_d = p0 * p1 * ... * pd */
    float s;                          /* max(p0, g_1..g_D) */
    float entropy;                    /* base distribution entropy, nats */
    int32_t last_accept_length;       /* tokens emitted by the previous step (0 at start) */
    float accept_length_ema;          /* exponential moving average of it */
    int64_t step;                     /* steps taken in this session so far */
    /* appended: every rank of every head, and what each tree of the
     * bank is expected to give and cost at this step */
    int32_t topk;                     /* ranks per head in head_topk_p (0 without heads) */
    int32_t n_trees;                  /* the bank's trees: entries in expected_accept and
                                       * expected_seconds (0 without a bank) */
    const float *head_topk_p;         /* n_heads * topk: head d's rank-r probability at
                                       * [d * topk + r], ranks in descending order (Hydra:
                                       * given the rank-0 tokens of the levels before d);
                                       * head_p[d] == head_topk_p[d * topk] */
    const float *expected_accept;     /* n_trees: tokens a step with tree k is expected to
                                       * emit (>= 1), from head_topk_p calibrated by the
                                       * session's observed acceptances; NULL when the
                                       * session has no outlook (see below) */
    const double *expected_seconds;   /* n_trees: expected seconds of a step with tree k
                                       * (bank timings, then measured step times); NULL
                                       * with expected_accept */
} entmtp_features;

/* Whether `f` (an entmtp_features *) carries `field`: a struct from an older
 * library or caller stops before the fields appended after it. */
#define ENTMTP_FEATURES_HAS(f, field) \
    ((f)->struct_size >= offsetof(entmtp_features, field) + sizeof((f)->field))

/* What a step produced; passed to a policy's observe(). */
typedef struct entmtp_outcome {
    size_t struct_size;
    int32_t tree_index;    /* tree used */
    int32_t n_nodes;       /* its node count (root included) */
    int32_t draft_length;  /* its depth (gamma in the UCB reward) */
    int32_t accept_length; /* tokens emitted, root included (>= 1) */
    double seconds;        /* wall time of the step */
} entmtp_outcome;
/* The arrays a session shows its policy (features.head_p, g, head_topk_p,
 * expected_accept, expected_seconds) stay valid until the session's next
 * step; copy them to keep them.
 *
 * The outlook (expected_accept, expected_seconds, n_trees = the bank's tree
 * count) is computed for the throughput, dynamic and custom policies; the
 * static, ladder, hysteresis and UCB policies do not read it and see NULL
 * (n_trees is still the bank's size). For the dynamic policy entry k
 * describes the tree built this step with tree k's node count. n_heads is
 * the head levels the step ran: on a CPU the throughput and dynamic policies'
 * Hydra chain may stop before the last head (a deeper tree could not pay);
 * a custom policy always sees every level.
 *
 * entmtp_policy_select() outside a session: a throughput or dynamic policy
 * takes the outlook from the caller's features (expected_accept and
 * expected_seconds set, n_trees equal to the n_trees argument); a features
 * struct smaller than the library's is read only up to its struct_size,
 * and a custom policy's callback is shown a copy with the missing fields
 * zero (NULL arrays). */

typedef enum entmtp_policy_kind {
    ENTMTP_POLICY_STATIC = 0,     /* always one tree */
    ENTMTP_POLICY_LADDER = 1,     /* K-1 ascending thresholds on s pick one of K trees */
    ENTMTP_POLICY_HYSTERESIS = 2, /* EntMTP-tau: conservative/aggressive with tau_off <= tau_on */
    ENTMTP_POLICY_UCB = 3,        /* UCB1 bandit over the whole bank */
    ENTMTP_POLICY_CUSTOM = 4,     /* caller's callbacks */
    ENTMTP_POLICY_THROUGHPUT = 5, /* argmax over trees of expected accepted tokens / expected step
                                   * seconds (calibrated head probabilities, learnt step costs) */
    ENTMTP_POLICY_DYNAMIC = 6     /* the same over node budgets, drafting each step the best tree
                                   * of that size built from the heads' probabilities */
} entmtp_policy_kind;

typedef entmtp_status (*entmtp_policy_select_fn)(void *user_data, const entmtp_features *features,
                                                 int32_t n_trees, int32_t *out_index);
typedef void (*entmtp_policy_observe_fn)(void *user_data, const entmtp_outcome *outcome);
typedef void (*entmtp_policy_reset_fn)(void *user_data);

typedef struct entmtp_policy_config {
    size_t struct_size;
    entmtp_policy_kind kind;
    /* static */
    int32_t static_tree;                            /* default 0 */
    /* ladder: bin b = number of thresholds t with s > t; tree = ladder_trees[b] */
    int32_t n_thresholds;                           /* K-1, K <= entmtp_limit(ENTMTP_LIMIT_MAX_LADDER) */
    const float *thresholds;                        /* n_thresholds, strictly ascending */
    const int32_t *ladder_trees;                    /* n_thresholds + 1; NULL: bin b -> tree b */
    /* hysteresis */
    float tau_on;                                   /* switch to aggressive when s > tau_on */
    float tau_off;                                  /* back to conservative when s <= tau_off */
    int32_t conservative_tree;                      /* default 0 */
    int32_t aggressive_tree;                        /* default 1 */
    /* ucb: k* = argmax mean_reward_k + exploration * sqrt(2 ln t / n_k),
     * reward = -(1 + length_penalty * draft_length) / accept_length */
    float ucb_exploration;                          /* default 1.0 */
    float ucb_length_penalty;                       /* lambda_gamma, default 0.0 */
    /* custom */
    entmtp_policy_select_fn select;
    entmtp_policy_observe_fn observe;               /* may be NULL */
    entmtp_policy_reset_fn reset;                   /* may be NULL */
    void *user_data;
} entmtp_policy_config;

typedef struct entmtp_policy entmtp_policy;

/* Defaults for `kind` into the first `size` bytes (pass sizeof *config). */
ENTMTP_API entmtp_status entmtp_policy_config_init(entmtp_policy_config *config, size_t size,
                                                   entmtp_policy_kind kind);
/* Validates the config (thresholds ascending and finite, tau_off <= tau_on,
 * indices >= 0, callbacks present for CUSTOM): ENTMTP_ERR_INVALID_CONFIG
 * names the field and value. The config and its arrays are copied. */
ENTMTP_API entmtp_status entmtp_policy_create(const entmtp_policy_config *config,
                                              entmtp_policy **out_policy);
/* Frees a policy. Detach it first (entmtp_policy_set(session, NULL)) from any
 * session it is attached to: a session does not own its policy. */
ENTMTP_API void entmtp_policy_free(entmtp_policy *policy);
/* Checks every tree index the policy can return against a bank of n_trees. */
ENTMTP_API entmtp_status entmtp_policy_validate(const entmtp_policy *policy, int32_t n_trees);
/* Pick a tree for the next step. An index outside [0, n_trees) is
 * ENTMTP_ERR_OUT_OF_RANGE (a custom callback's error is passed through). */
ENTMTP_API entmtp_status entmtp_policy_select(entmtp_policy *policy, const entmtp_features *features,
                                              int32_t n_trees, int32_t *out_index);
ENTMTP_API entmtp_status entmtp_policy_observe(entmtp_policy *policy, const entmtp_outcome *outcome);
ENTMTP_API void entmtp_policy_reset(entmtp_policy *policy);
ENTMTP_API entmtp_policy_kind entmtp_policy_get_kind(const entmtp_policy *policy);
/* "static", "ladder", "hysteresis", "ucb", "custom"; NULL for unknown kinds. */
ENTMTP_API const char *entmtp_policy_kind_name(entmtp_policy_kind kind);
ENTMTP_API entmtp_status entmtp_policy_kind_from_name(const char *name, entmtp_policy_kind *out_kind);
/* The policy settings stored in a bank file, if any (ENTMTP_ERR_NOT_FOUND if
 * not). Only out->struct_size bytes are written; its arrays are owned by the
 * bank and stay valid until the bank is freed or the kind is set again. */
ENTMTP_API entmtp_status entmtp_bank_policy_config(const entmtp_bank *bank,
                                                   entmtp_policy_kind kind,
                                                   entmtp_policy_config *out);
/* Store policy settings in the bank (written by entmtp_bank_save). The first
 * kind stored becomes the bank's default policy. */
ENTMTP_API entmtp_status entmtp_bank_set_policy_config(entmtp_bank *bank,
                                                       const entmtp_policy_config *config);
/* The policy kind a bank file names as its default ("policy.default", else the
 * first kind stored): the one its search calibrated best. ENTMTP_ERR_NOT_FOUND
 * when the bank holds no policy settings. */
ENTMTP_API entmtp_status entmtp_bank_default_policy(const entmtp_bank *bank,
                                                    entmtp_policy_kind *out_kind);

/* =============================================================== session */

typedef struct entmtp_session entmtp_session;

/* entmtp_session_params.kv_type */
typedef enum entmtp_kv_type {
    ENTMTP_KV_DEFAULT = 0, /* the backend's default: F32 on the CPU, BF16 on CUDA */
    ENTMTP_KV_F32 = 1,
    ENTMTP_KV_BF16 = 2,
} entmtp_kv_type;

typedef struct entmtp_session_params {
    size_t struct_size;
    int32_t kv_capacity;      /* tokens the KV cache holds; 0 = min(4096, context) */
    float temperature;        /* 0 = greedy (lossless w.r.t. greedy AR) */
    float epsilon;            /* typical acceptance hard threshold, default 0.09 */
    float delta;              /* typical acceptance entropy factor, default 0.3 */
    uint64_t seed;            /* RNG seed for temperature > 0, default 0x5eed */
    float ema_decay;          /* accept_length_ema = d*ema + (1-d)*last; default 0.8 */
    int32_t n_stop_tokens;    /* -1 = the model's end-of-generation tokens */
    const int32_t *stop_tokens; /* n_stop_tokens ids (copied by entmtp_session_create) */
    /* 1: the session's step-cost model keeps the bank's timings and never
     * learns from the clock, so a sampled run (temperature > 0) with the same
     * seed repeats exactly under every policy. 0 (default): the throughput
     * and dynamic policies follow measured step times, which makes the tree
     * sequence, and so the sampled text, depend on machine timing. Greedy
     * output equals greedy AR either way. */
    int32_t reproducible;
    /* Never read: it names the padding that followed `reproducible`, so the
     * field below starts past the struct_size of older callers, whose
     * padding bytes may hold anything. */
    int32_t reserved0;
    /* Activations of the typed weight products while a prompt is prefilled:
     * 8 (the default; 0 means 8; it was 16 until the change that the
     * CHANGELOG lists under "Changed") quantizes prompt rows to 8 bits per
     * 32 values, as llama.cpp does: about 2x faster prompt processing on
     * CPUs with AVX-512 VNNI for Q4_0, Q4_1, Q5_0, Q8_0, Q4_K, Q5_K and Q6_K
     * weights, about 1.3x with AVX2 alone (other types keep 16 bits; CPUs
     * without AVX2 run a slow scalar path). 16 keeps the 16-bit integer
     * activations that every step uses: greedy text equal to a float64
     * reference on every prompt we checked, where 8 agreed on 9 and 13 of
     * 24 and llama.cpp on 6 and 3 (docs/performance.md). Only prefill: AR
     * steps and verified trees always take step_activation_bits, so greedy
     * output still equals greedy AR of a session with the same setting.
     * Ignored by the CUDA backend. */
    int32_t prompt_activation_bits;
    /* Activations of the typed weight products in every step (AR steps and
     * tree verifies, the drafter's products included): 16 (default; 0 means
     * 16) or 8, llama.cpp's precision: faster AR steps and cheaper verifies
     * on CPUs with AVX-512 VNNI for the types prompt_activation_bits lists,
     * at llama.cpp's fidelity (docs/performance.md); AVX2-only CPUs have
     * slower 8-bit kernels, CPUs without AVX2 the scalar reference. Greedy output equals
     * greedy AR of a session with the same setting (both run every step at
     * this precision). Ignored by the CUDA backend. */
    int32_t step_activation_bits;
    /* The element type of the session's KV cache (entmtp_kv_type):
     * ENTMTP_KV_DEFAULT (0: F32 on the CPU backend; BF16 on the CUDA
     * backend, F32 there for a model whose KV row width is odd),
     * ENTMTP_KV_F32, or
     * ENTMTP_KV_BF16: K and V rounded to BF16 (nearest even) when stored,
     * half the cache's memory and of attention's bytes. Attention then reads
     * the rounded values on every backend (the CPU twin computes from the
     * same BF16 keys and values as the device), and greedy output equals
     * greedy AR of a session with the same setting; it may differ from an
     * F32-cache run (docs/architecture.md, "KV cache element type"). */
    int32_t kv_type;
    /* Never read: the tail padding after kv_type, named so that a later field
     * starts past the struct_size of callers compiled with this header. */
    int32_t reserved1;
} entmtp_session_params;

ENTMTP_API entmtp_status entmtp_session_params_init(entmtp_session_params *params, size_t size);

/* A decoding session over `model`. `heads` and `bank` may be NULL (plain
 * autoregressive decoding only). Both are borrowed and must outlive the
 * session. With heads and a bank, every tree must be no deeper than the heads
 * (ENTMTP_ERR_MISMATCH otherwise). The session starts with a static policy
 * on tree 0. `params` may be NULL. */
ENTMTP_API entmtp_status entmtp_session_create(const entmtp_model *model, const entmtp_heads *heads,
                                               const entmtp_bank *bank,
                                               const entmtp_session_params *params,
                                               entmtp_session **out_session);
ENTMTP_API void entmtp_session_free(entmtp_session *session);

/* Attach a policy (borrowed; NULL restores the default static policy on
 * tree 0). Validated against the session's bank. The policy is reset. */
ENTMTP_API entmtp_status entmtp_policy_set(entmtp_session *session, entmtp_policy *policy);

/* Append prompt tokens and run them through the model. May be called again
 * to extend the context. Empty input, out-of-range ids or a full cache are
 * errors that leave the session unchanged. */
ENTMTP_API entmtp_status entmtp_session_prefill(entmtp_session *session, const int32_t *tokens,
                                               int32_t n_tokens);

typedef struct entmtp_step_result {
    size_t struct_size;
    const int32_t *tokens;  /* emitted tokens; valid until the next call on the session */
    int32_t n_tokens;       /* tokens emitted (may be 0 only on error) */
    int32_t tree_index;     /* tree used (-1 for a plain AR step) */
    int32_t n_nodes;        /* nodes verified */
    int32_t accept_length;  /* tokens the tree accepted before truncation (>= 1) */
    float s;                /* path value the policy saw */
    float p0;               /* base top-1 probability */
    float entropy;          /* base entropy (nats) */
    double seconds;         /* wall time of the step */
    int32_t stopped;        /* 1 when a stop token was emitted (it is the last token) */
} entmtp_step_result;

/* One draft-verify-accept cycle: draft a tree chosen by the policy with the
 * heads, verify it in one forward pass, accept the longest acceptable path
 * and commit its KV. Emits at most `max_tokens` tokens (<= 0: no limit) and
 * never tokens after a stop token. When the KV cache cannot hold all accepted
 * tokens, the ones that fit are committed and reported in *result and the
 * call returns ENTMTP_ERR_KV_FULL; the session stays readable. Requires a
 * prior prefill. Without heads or bank this is a plain AR step. Arguments
 * (result->struct_size included) are checked before anything is committed. */
ENTMTP_API entmtp_status entmtp_step(entmtp_session *session, int32_t max_tokens,
                                     entmtp_step_result *result);
/* One plain autoregressive step (one token), same kernels. */
ENTMTP_API entmtp_status entmtp_step_ar(entmtp_session *session, entmtp_step_result *result);

/* Called for each emitted token batch; return non-zero to stop. */
typedef int (*entmtp_token_fn)(const int32_t *tokens, int32_t n_tokens, void *user_data);

/* Where entmtp_session_stats.speedup comes from. */
typedef enum entmtp_speedup_source {
    ENTMTP_SPEEDUP_NONE = 0,      /* not known (AR session, no bank figures, no steps) */
    ENTMTP_SPEEDUP_ESTIMATED = 1, /* the bank's per-tree step costs */
    ENTMTP_SPEEDUP_MEASURED = 2   /* an AR run of the same prompt (entmtp_session_measure_ar) */
} entmtp_speedup_source;

typedef struct entmtp_session_stats {
    size_t struct_size;
    int64_t n_prompt_tokens;
    int64_t n_generated;      /* tokens emitted by steps */
    int64_t n_steps;
    double mean_accept_length;/* n_generated / n_steps */
    double prefill_seconds;
    double decode_seconds;
    double tokens_per_second; /* n_generated / decode_seconds */
    /* Appended (a library older than these fields leaves them as the caller set them). */
    double prefill_tokens_per_second; /* n_prompt_tokens / prefill_seconds */
    /* Steps that paid one-time costs: the first step with each tree (and the
     * first AR step); on a backend that records step graphs (CUDA) the first
     * two, which run directly and then capture. Their time is in
     * decode_seconds but not in warm_tokens_per_second. */
    int64_t n_warmup_steps;
    double warmup_seconds;
    int64_t n_warm_generated;         /* tokens of the other steps */
    double warm_tokens_per_second;    /* n_warm_generated / (decode_seconds - warmup_seconds); 0 before a warm step */
    /* The decode rate against plain AR's on the same model. ESTIMATED: from
     * the bank's per-tree step costs (trees[].tokens_per_second and
     * mean_accept_length: a step with tree k costs c_k AR steps), speedup =
     * n_generated / sum of the steps' c_k; ar_tokens_per_second =
     * warm_tokens_per_second / speedup. MEASURED: entmtp_session_measure_ar
     * ran AR on the same prompt; speedup = warm_tokens_per_second /
     * ar_tokens_per_second. NONE: an AR session, or no bank. */
    double speedup;
    double ar_tokens_per_second;
    entmtp_speedup_source speedup_source;
} entmtp_session_stats;

/* Step (or step_ar when `autoregressive`) until a stop token or `max_tokens`
 * tokens (ENTMTP_OK), a KV-full condition (ENTMTP_ERR_KV_FULL after emitting
 * what fit) or the callback asks to stop (ENTMTP_STOPPED, after the batch it
 * was shown was committed). `on_tokens` may be NULL. */
ENTMTP_API entmtp_status entmtp_generate(entmtp_session *session, int32_t max_tokens,
                                         int autoregressive, entmtp_token_fn on_tokens,
                                         void *user_data);

/* All tokens of the session (prompt then generated); valid until the next
 * call that changes the session. */
ENTMTP_API entmtp_status entmtp_session_tokens(const entmtp_session *session,
                                               const int32_t **tokens, int32_t *n_tokens);
ENTMTP_API entmtp_status entmtp_session_get_stats(const entmtp_session *session,
                                                  entmtp_session_stats *out);
/* Measures plain AR on the session's prompt (the tokens before its first
 * step) in a scratch session over the same model and settings: `n_tokens`
 * AR steps (<= 0: as many as the session generated, at least 8), the
 * first left out as warm-up by the session's own rule. Afterwards the session's stats report
 * speedup_source = ENTMTP_SPEEDUP_MEASURED, ar_tokens_per_second and speedup
 * (until entmtp_session_reset). The session itself is not changed.
 * ENTMTP_ERR_STATE before the session's first step. */
ENTMTP_API entmtp_status entmtp_session_measure_ar(entmtp_session *session, int32_t n_tokens);
/* Steps that used tree `index` since the last reset; -1 for a NULL session or
 * an index outside the bank. */
ENTMTP_API int64_t entmtp_session_tree_usage(const entmtp_session *session, int32_t index);
/* Forget all tokens and KV; reset the attached policy and statistics. */
ENTMTP_API void entmtp_session_reset(entmtp_session *session);

/* ======================================================= inline defaults */
/* Defaults by value, sized by the caller's compiler (so never larger than the
 * caller's struct). Header-inline: no symbol, nothing in the ABI. */

static inline entmtp_model_params entmtp_model_default_params(void) {
    entmtp_model_params p;
    entmtp_model_params_init(&p, sizeof p);
    return p;
}

static inline entmtp_bank_params entmtp_bank_default_params(void) {
    entmtp_bank_params p;
    entmtp_bank_params_init(&p, sizeof p);
    return p;
}

static inline entmtp_session_params entmtp_session_default_params(void) {
    entmtp_session_params p;
    entmtp_session_params_init(&p, sizeof p);
    return p;
}

static inline entmtp_policy_config entmtp_policy_default_config(entmtp_policy_kind kind) {
    entmtp_policy_config c;
    entmtp_policy_config_init(&c, sizeof c, kind);
    return c;
}

/* ========================================================== EXPERIMENTAL */
/* Defined only with ENTMTP_EXPERIMENTAL_API; may change between minor
 * versions and is not part of the ABI baseline (abi/libentmtp.abi). */
#if defined(ENTMTP_EXPERIMENTAL_API)

/* Base-model logits (vocab_size floats) for the next token, as of the last
 * prefill or step; owned by the session. */
ENTMTP_API entmtp_status entmtp_session_logits(const entmtp_session *session, const float **logits,
                                               int32_t *n_vocab);

/* The features the policy was shown at the last step (zeros before the first). */
ENTMTP_API entmtp_status entmtp_session_features(const entmtp_session *session, entmtp_features *out);

#endif /* ENTMTP_EXPERIMENTAL_API */

#ifdef __cplusplus
}
#endif

#endif /* ENTMTP_H */
