/* The entmtp command-line tool: one file per subcommand. */
#ifndef ENTMTP_CLI_H
#define ENTMTP_CLI_H

#include "entmtp.h"

/* Each subcommand gets argv starting at its own name; returns the exit code. */
int cmd_tree(int argc, char **argv);
int cmd_generate(int argc, char **argv);
int cmd_info(int argc, char **argv);
int cmd_bench(int argc, char **argv);

/* Print "entmtp: <what>: <library message>" to stderr; returns 1. */
int cli_fail(const char *what, entmtp_status st);
/* Prints a progress bar on stderr when it is a terminal. */
int cli_progress(float fraction, const char *what, void *user_data);

#endif
