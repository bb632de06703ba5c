/* The entmtp command-line tool: one file per subcommand. */
#ifndef ENTMTP_CLI_H
#define ENTMTP_CLI_H

#include "entmtp.h"

#include <stddef.h>
#include <stdio.h>

/* Each subcommand gets argv starting at its own name; returns the exit code. */
int cmd_tree(int argc, char **argv);
int cmd_generate(int argc, char **argv);
int cmd_chat(int argc, char **argv);        /* chat.c: generate --interactive */
int cmd_info(int argc, char **argv);
int cmd_bench(int argc, char **argv);
int cmd_search(int argc, char **argv);
int cmd_bench_suite(int argc, char **argv); /* entmtp bench --suite */
int cmd_serve(int argc, char **argv);       /* serve/cmd_serve.c, with libmicrohttpd */

/* paths.c: files found at run time. The drafter (heads + bank) shipped for
 * a model, matched by its identity (entmtp_drafter_find) in
 * $ENTMTP_HEADS_DIR, <prefix>/share/entmtp/heads beside the executable, the
 * configured install directory (and the source tree's heads/ for the binary
 * in its build tree). 1 when found; out->reason says why or why not. */
int cli_find_drafter(const entmtp_model *model, entmtp_drafter *out);
/* A plotting script (plot_bench.py, ...): `explicit_path` (--plot-script)
 * when given, else $ENTMTP_SCRIPTS_DIR, <prefix>/share/entmtp/scripts beside
 * the executable, the configured install directory. 1 when found. */
int cli_find_plot_script(const char *script, const char *explicit_path, char *out, size_t cap);
/* Run `python3 SCRIPT DATA IMAGE` (no shell). When the script is missing or
 * fails, says where the data is and how to plot it; returns 1 then. */
int cli_plot(const char *cmd, const char *script, const char *explicit_path, const char *data, const char *image);

/* Option values (args.c): print "entmtp <cmd>: <option>: ..." and return 0
 * on a bad value, else store it and return 1. */
int cli_arg_long(const char *cmd, const char *opt, const char *v, long lo, long hi, long *out);
int cli_arg_float(const char *cmd, const char *opt, const char *v, float lo, float *out);
int cli_arg_seed(const char *cmd, const char *v, unsigned long long *out);
int cli_arg_backend(const char *cmd, const char *v, entmtp_backend *out);
/* --compute native | f32 */
int cli_arg_compute(const char *cmd, const char *v, entmtp_compute_type *out);

/* --top-k / --top-p (CLI_CALL): refused with the reason (typical acceptance
 * decides what is sampled), except the values that mean "off" (0 and 1). */
int cli_refuse_top_k(const char *cmd, const char *v, void *out);
/* --prompt-bits 8 | 16 into *(int32_t *)out (entmtp_session_params.prompt_activation_bits) */
int cli_prompt_bits(const char *cmd, const char *v, void *out);
#define CLI_PROMPT_BITS_HELP                                                                       \
    "  --prompt-bits B       activations of prompt processing: 8 (default; about 2x faster prefill\n" \
    "                        than 16, greedy text still nearer a float64 reference than\n"        \
    "                        llama.cpp's) | 16 (the precision of every step: float64-equal\n"      \
    "                        greedy text in our checks) (docs/performance.md)\n"
/* --step-bits 8 | 16 into *(int32_t *)out (entmtp_session_params.step_activation_bits) */
int cli_step_bits(const char *cmd, const char *v, void *out);
#define CLI_STEP_BITS_HELP                                                                         \
    "  --step-bits B         activations of every step (AR and tree verify): 16 (default) | 8:\n" \
    "                        llama.cpp's precision, faster steps on AVX-512 VNNI CPUs (much\n"    \
    "                        slower on others), some fidelity lost (docs/performance.md)\n"
/* --kv-type f32 | bf16 into *(int32_t *)out (entmtp_session_params.kv_type) */
int cli_kv_type(const char *cmd, const char *v, void *out);
#define CLI_KV_TYPE_HELP                                                                             \
    "  --kv-type T           KV cache elements: f32 | bf16: half the cache's memory and attention's\n" \
    "                        bytes, K/V rounded to BF16 (docs/architecture.md); default: the\n"     \
    "                        backend's (f32 on the CPU, bf16 on CUDA)\n"
int cli_refuse_top_p(const char *cmd, const char *v, void *out);
/* --tree NAME[,NAME..]: 1 when every name is a built-in tree, else prints the
 * valid names and returns 0. */
int cli_check_tree_names(const char *cmd, const char *list);
/* --chat-template VALUE: the file's text when VALUE names a readable file,
 * else VALUE itself (a template or a family name, see
 * entmtp_chat_prompt_template); malloc'ed, NULL after printing why. */
char *cli_chat_template_text(const char *cmd, const char *value);

/* One table-driven parser for every command: each option names where its
 * value goes and how it is checked. */
typedef enum cli_value_kind {
    CLI_FLAG,    /* no value: *(int *)out = 1 */
    CLI_STRING,  /* *(const char **)out = the value */
    CLI_LONG,    /* *(long *)out, an integer in [lo, hi] */
    CLI_FLOAT,   /* *(float *)out, a finite number >= lo (lo = -INFINITY: any) */
    CLI_SEED,    /* *(unsigned long long *)out */
    CLI_BACKEND, /* *(entmtp_backend *)out: auto | cpu | cuda */
    CLI_COMPUTE, /* *(entmtp_compute_type *)out: native | f32 */
    CLI_CALL     /* call(cmd, value, out): 1 on success, else it printed why */
} cli_value_kind;

typedef struct cli_option {
    const char *name; /* "--model"; aliases after '|': "--temperature|--temp" */
    cli_value_kind kind;
    void *out;
    double lo, hi;
    int (*call)(const char *cmd, const char *value, void *out);
} cli_option;

/* Parse argv[1..] against `opts`: 0 when parsed, 1 when --help printed the
 * usage (exit 0), 2 on a bad option or value (a message was printed). */
int cli_parse(const char *cmd, int argc, char **argv, const cli_option *opts, size_t n_opts, void (*usage)(FILE *));
#define CLI_TABLE(opts) (opts), sizeof(opts) / sizeof((opts)[0])

/* Settings of commands that decode a prompt set (search, bench --suite), and
 * their options, spliced into a command's table with CLI_RUN_OPTIONS(&rs). */
typedef struct cli_run_settings {
    long n_prompts, max_tokens, threads;
    float temperature, epsilon, delta;
    unsigned long long seed;
    entmtp_backend backend;
} cli_run_settings;
#define CLI_RUN_DEFAULTS { 100, 256, 0, 0.7f, 0.09f, 0.3f, 0x5eed, ENTMTP_BACKEND_AUTO }
#define CLI_RUN_OPTIONS(rs)                                              \
    { "--prompts", CLI_LONG, &(rs)->n_prompts, 0, 1000000, NULL },       \
    { "--max-tokens", CLI_LONG, &(rs)->max_tokens, 0, 1000000, NULL },   \
    { "--threads", CLI_LONG, &(rs)->threads, 0, 1000000, NULL },         \
    { "--temperature|--temp", CLI_FLOAT, &(rs)->temperature, 0, 0, NULL }, \
    { "--epsilon", CLI_FLOAT, &(rs)->epsilon, 0, 0, NULL },              \
    { "--delta", CLI_FLOAT, &(rs)->delta, 0, 0, NULL },                  \
    { "--seed", CLI_SEED, &(rs)->seed, 0, 0, NULL },                     \
    { "--backend", CLI_BACKEND, &(rs)->backend, 0, 0, NULL }

/* The model for a prompt-set run (its backend and threads), and the session
 * params (temperature, typical acceptance, seed) of one (prompts.c). */
int cli_run_load_model(const cli_run_settings *rs, const char *path, entmtp_model **out);
entmtp_session_params cli_run_session_params(const cli_run_settings *rs);

/* --plot IMAGE and --plot-script PY (see cli_plot), the same in every command */
#define CLI_PLOT_OPTIONS(image, script)                  \
    { "--plot", CLI_STRING, (image), 0, 0, NULL },       \
    { "--plot-script", CLI_STRING, (script), 0, 0, NULL }

/* entmtp_model_load, announced on stderr when `announce` ("entmtp: loading
 * model PATH ... done in X s"; the load is otherwise silent in a log). 0, or
 * 1 after printing the library's error. */
int cli_model_load(const char *path, const entmtp_model_params *params, entmtp_model **out, int announce);
/* Print "entmtp: <what>: <library message>" to stderr; returns 1. */
int cli_fail(const char *what, entmtp_status st);
/* Prints a progress bar on stderr when it is a terminal. */
int cli_progress(float fraction, const char *what, void *user_data);
/* Progress written to a log: a line is due when `what` changes or the work
 * reaches a new tenth of itself. */
typedef struct cli_progress_log {
    char last_what[96];
    int last_tenth;
} cli_progress_log;
/* Returns the tenth (0..10) reached when a line is due, -1 otherwise. */
int cli_progress_log_due(cli_progress_log *log, float fraction, const char *what);
/* long CLI work (suite rows, prompt sets): the bar on a terminal, a line per 10% in a log */
int cli_progress_long(float fraction, const char *what);
/* s[0..n) as a JSON string: quotes, backslashes and control characters
 * escaped, bytes that are not well-formed UTF-8 written as U+FFFD. */
void cli_json_string(FILE *f, const char *s, size_t n);
/* The settings `bank` holds for policy *kind, else that kind's library
 * defaults; 1 when they came from the bank. With bank_default, *kind is
 * first set to the bank's default policy (its search's best); a bank that
 * names none leaves *kind and gets the library defaults. */
int cli_bank_policy_config(const entmtp_bank *bank, int bank_default, entmtp_policy_kind *kind,
                           entmtp_policy_config *pc);

#endif
