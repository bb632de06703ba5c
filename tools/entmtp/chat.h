/* Chat prompts with a --chat-template override, and the interactive chat
 * (`entmtp chat`, `entmtp generate -i`). */
#ifndef ENTMTP_CLI_CHAT_H
#define ENTMTP_CLI_CHAT_H

#include "cli.h"

/* The conversation in `chat_template` (see entmtp_chat_prompt_template;
 * NULL: the model's, with the announced plain fallback when it has none).
 * *out is malloc'ed; 0, or 1 after printing the error. */
int cli_chat_render(entmtp_model *model, const char *chat_template, const char *const *roles,
                    const char *const *contents, int32_t n, char **out);

typedef struct cli_chat_settings {
    const char *system_prompt; /* NULL: none */
    const char *chat_template; /* NULL: the model's */
    int32_t max_tokens;        /* per reply */
    int autoregressive;
} cli_chat_settings;

/* Reads one user message per line from stdin until EOF or /exit (/reset
 * clears the conversation), streams each reply to stdout followed by a
 * newline, and a figures line per reply to stderr. `session` is empty, its
 * policy attached. 0, or 1 after printing the error. */
int cli_chat_run(entmtp_model *model, entmtp_session *session, const cli_chat_settings *cs);

#endif
