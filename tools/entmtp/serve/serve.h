/* entmtp serve: an OpenAI-compatible HTTP server over one loaded model.
 * Layers: gen.c runs one request's generation on the public library API
 * (prompt, steps, stop strings, UTF-8 boundaries); api.c turns OpenAI JSON
 * into requests and results into JSON; http.c is the libmicrohttpd plumbing
 * (routing, body limits, SSE, the concurrency gate); cmd_serve.c parses the
 * command line, loads the model and waits for a signal. */
#ifndef ENTMTP_SERVE_H
#define ENTMTP_SERVE_H

#include "entmtp.h"

#include <cjson/cJSON.h>
#include <pthread.h>
#include <stddef.h>

#define SERVE_MAX_STOP 4

/* What every request shares, read-only after start-up. */
typedef struct serve_model {
    entmtp_model *model;
    entmtp_heads *heads;          /* NULL: plain AR */
    entmtp_bank *bank;            /* NULL without heads */
    entmtp_policy_config policy;  /* a fresh policy per request (policies hold state) */
    char model_id[128];
    const char *chat_template;    /* --chat-template's text, NULL: the model's */
    const char *api_key;          /* --api-key: required as "Authorization: Bearer KEY"; NULL: open */
    int32_t ctx;                  /* KV capacity of each session, in tokens */
    int32_t prompt_bits;          /* --prompt-bits: each session's prompt_activation_bits */
    int32_t step_bits;            /* --step-bits: each session's step_activation_bits */
    int32_t kv_type;              /* --kv-type: each session's kv_type (0: the default) */
    int32_t max_tokens_default;
    float temperature_default;
    size_t max_body;              /* bytes */
} serve_model;

/* A refusal: HTTP status plus OpenAI's error object. */
typedef struct serve_error {
    int status;
    const char *type;  /* invalid_request_error, server_error, ... */
    const char *param; /* the field at fault, or NULL */
    const char *code;  /* NULL or e.g. context_length_exceeded */
    char message[384];
} serve_error;

int serve_fail(serve_error *e, int status, const char *param, const char *code, const char *fmt, ...)
    __attribute__((format(printf, 5, 6)));

/* One request, parsed. */
typedef struct serve_request {
    int chat;           /* /v1/chat/completions */
    int stream;
    char *prompt;       /* text fed to the tokenizer (chat template applied) */
    const char *prompt_field; /* "prompt" or "messages", for errors */
    int32_t max_tokens; /* 0: the server default */
    float temperature;
    unsigned long long seed;
    int has_seed; /* the request named a seed: its sampled text must repeat */
    int return_prompt_ids; /* "entmtp": {"return_prompt_ids": true}: the prefilled ids in the reply */
    char *stop[SERVE_MAX_STOP];
    int n_stop;
    /* the "entmtp" object of a request: decoding knobs beyond OpenAI's */
    int autoregressive;       /* plain AR for this request */
    int has_policy;
    entmtp_policy_kind policy;
} serve_request;

void serve_request_clear(serve_request *r);

/* The step just taken, for the "entmtp" extension of a stream chunk. */
typedef struct serve_step {
    int64_t index;
    int32_t tree_index, n_nodes, accept_length, n_tokens;
    double seconds;
} serve_step;

typedef struct serve_job {
    const serve_model *sm;
    entmtp_session *session;
    entmtp_policy *policy;
    int32_t n_prompt;
    int32_t *gen;
    int32_t n_gen, max_tokens;
    char *stop[SERVE_MAX_STOP];
    int n_stop;
    char *text;          /* the visible text so far (stop strings cut) */
    size_t text_len;
    size_t sent;         /* bytes of text already handed out */
    const char *finish;  /* NULL while running, else "stop" or "length" */
    int autoregressive;
    int return_prompt_ids;
    serve_step last;
} serve_job;

/* The settings of a policy kind: the bank's calibrated ones when it has
 * them, else the library defaults (hysteresis spanning the whole bank). */
entmtp_policy_config serve_policy_config(const entmtp_bank *bank, entmtp_policy_kind kind);
/* Tokenizes, checks limits, creates the session and prefills. */
int serve_job_start(const serve_model *sm, const serve_request *req, serve_job **out, serve_error *err);
/* One decoding step; delta and delta_len receive the text that became final. */
int serve_job_step(serve_job *j, const char **delta, size_t *delta_len, serve_error *err);
void serve_job_free(serve_job *j);

/* api.c: request parsing and response bodies (JSON text from malloc). */
/* A request's "model" names the served one: its id, or the id plus .gguf. */
int serve_model_matches(const serve_model *sm, const char *name);
int serve_parse_request(const serve_model *sm, int chat, const char *body, size_t len,
                        serve_request *out, serve_error *err);
char *serve_error_json(const serve_error *e);
char *serve_result_json(const serve_job *j, int chat, const char *id, long created);
/* One SSE event ("data: {...}\n\n") for the step just taken or, when the job
 * finished, the last chunk with finish_reason and usage. */
char *serve_chunk_json(const serve_job *j, int chat, const char *id, long created,
                       const char *delta, size_t delta_len, int first);
char *serve_models_json(const serve_model *sm);
char *serve_trees_json(const serve_model *sm);

/* http.c */
typedef struct serve_gate {
    pthread_mutex_t mu;
    pthread_cond_t cv;
    int active, waiting, parallel, queue_max, draining;
} serve_gate;

typedef struct serve_server serve_server;
int serve_http_start(const serve_model *sm, serve_gate *gate, const char *host, int port,
                     serve_server **out, int *bound_port);
/* Stop accepting, let running generations finish, then stop. */
void serve_http_drain_and_stop(serve_server *s);

extern const unsigned char serve_chat_html[];
extern const size_t serve_chat_html_len;

#endif
