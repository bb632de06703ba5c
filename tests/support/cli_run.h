/* Runs the entmtp CLI ($ENTMTP_CLI) with arguments, capturing stdout and
 * stderr together; *rc receives the exit status. The result is malloc'ed. */
#ifndef EMT_CLI_RUN_H
#define EMT_CLI_RUN_H

char *emt_cli_run(const char *args, int *rc);

#endif
