/* Prompt sets (JSON Lines) and timed runs of a session over them: what
 * `entmtp search` and `entmtp bench --suite` measure with. */
#ifndef ENTMTP_CLI_PROMPTS_H
#define ENTMTP_CLI_PROMPTS_H

#include "entmtp.h"

/* The user message in the model's chat template (as-is when raw or when the
 * model has no template), tokenized; *out is malloc'ed. Prints the error and
 * returns non-zero on failure. */
int chat_tokens(entmtp_model *model, const char *system_prompt, const char *user, int raw,
                int32_t **out, int32_t *n_out);

/* One {"prompt": "...", "id": "...", "task": "..."} object per line (the
 * format tools/prompts/make_prompts.py writes); "id" and "task" are
 * optional. Each prompt is wrapped in the model's chat template and
 * tokenized. */
typedef struct prompt_set {
    int32_t n;
    int32_t **tokens;
    int32_t *lens;
    char **ids;
    char **tasks;
} prompt_set;

/* Loads at most `limit` prompts (0 = all) from JSON Lines ({"prompt": ...})
 * or plain text (one prompt per line): .jsonl/.json and .txt decide, else the
 * first non-blank line ('{' = JSON Lines). On error prints a message naming
 * the file and line and returns non-zero. */
int prompt_set_load(entmtp_model *model, const char *path, int32_t limit, prompt_set *out);
void prompt_set_free(prompt_set *ps);

/* What one run of a prompt set produced. */
typedef struct run_result {
    int64_t tokens;          /* generated */
    int64_t steps;
    int64_t prompt_tokens;
    double seconds;          /* wall time, prefill included */
    double prefill_seconds;
    /* optional, when keep_s: the path value s seen at every step */
    float *s;
    int64_t n_s, s_cap;
    /* optional, when keep_tokens: each prompt's continuation */
    int32_t **out_tokens;
    int32_t *out_lens;
} run_result;

typedef struct run_options {
    int32_t max_tokens;      /* per prompt */
    int autoregressive;      /* plain AR steps */
    int keep_s, keep_tokens;
    const char *label;       /* progress label; NULL = quiet */
} run_options;

/* Resets the session, then for every prompt: prefill + steps until a stop
 * token, max_tokens or a full KV cache. Returns 0, or prints the library
 * error and returns 1. */
int run_prompt_set(entmtp_session *s, const prompt_set *ps, const run_options *opt, run_result *out);

/* The same one prompt at a time, so that several configurations can be
 * interleaved prompt by prompt (timing drift on a shared machine then hits
 * them alike): run_result_init once, then run_prompt for each prompt p,
 * accumulating into `out`. */
int run_result_init(run_result *out, const prompt_set *ps, const run_options *opt);
int run_prompt(entmtp_session *s, const prompt_set *ps, int32_t p, const run_options *opt, run_result *out);
void run_result_free(run_result *r);

static inline double run_tokens_per_second(const run_result *r) {
    return r->seconds > 0 ? (double)r->tokens / r->seconds : 0.0;
}
static inline double run_accept_length(const run_result *r) {
    return r->steps > 0 ? (double)r->tokens / (double)r->steps : 0.0;
}

#endif
