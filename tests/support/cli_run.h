/* Runs the entmtp CLI ($ENTMTP_CLI) with arguments, capturing stdout and
 * stderr together; *rc receives the exit status. The result is malloc'ed. */
#ifndef EMT_CLI_RUN_H
#define EMT_CLI_RUN_H

#include <stddef.h>

char *emt_cli_run(const char *args, int *rc);
/* The same with the CLI's stdout alone (stderr dropped), for comparing texts. */
char *emt_cli_run_stdout(const char *args, int *rc);

/* Writes the CLI tests' fixture under the test folder: <name>_tiny_tok.gguf
 * (the tiny model, vocabulary 300 with a tokenizer, Q8_0) and
 * <name>_tiny_heads.safetensors (4 Medusa heads); their paths go to model and
 * heads. Failures are CHECK failures. */
void emt_cli_tiny_files(const char *name, char *model, size_t model_cap, char *heads, size_t heads_cap);

#endif
