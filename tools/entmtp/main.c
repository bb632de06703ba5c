#include "cli.h"

#include <stdio.h>
#include <string.h>
#include <unistd.h>

int cli_fail(const char *what, entmtp_status st) {
    const char *msg = entmtp_last_error();
    fprintf(stderr, "entmtp: %s: %s%s%s\n", what, entmtp_status_string(st), msg[0] ? ": " : "",
            msg);
    return 1;
}

int cli_progress(float fraction, const char *what, void *user_data) {
    (void)user_data;
    if (!isatty(STDERR_FILENO)) return 0;
    int width = 30, filled = (int)(fraction * (float)width + 0.5f);
    fprintf(stderr, "\r%-24.24s [", what);
    for (int i = 0; i < width; i++) fputc(i < filled ? '#' : '.', stderr);
    fprintf(stderr, "] %3d%%", (int)(fraction * 100.0f + 0.5f));
    if (fraction >= 1.0f) fputc('\n', stderr);
    fflush(stderr);
    return 0;
}

int cli_progress_log_due(cli_progress_log *log, float fraction, const char *what) {
    int tenth = (int)(fraction * 10.0f + 1e-4f);
    if (strncmp(what, log->last_what, sizeof log->last_what - 1) != 0) {
        snprintf(log->last_what, sizeof log->last_what, "%s", what);
        log->last_tenth = -1;
    }
    if (tenth <= log->last_tenth) return -1;
    log->last_tenth = tenth;
    return tenth;
}

int cli_progress_long(float fraction, const char *what) {
    if (isatty(STDERR_FILENO)) return cli_progress(fraction, what, NULL);
    static cli_progress_log log = { "", -1 };
    int tenth = cli_progress_log_due(&log, fraction, what);
    if (tenth > 0) fprintf(stderr, "entmtp %s: %d%%\n", what, tenth * 10);
    return 0;
}

static void usage(FILE *f) {
    fprintf(f,
            "usage: entmtp <command> [options]\n"
            "\n"
            "commands:\n"
            "  tree      compile a draft tree and print its verifier buffers\n"
            "  generate  generate text with EntMTP (or plain AR with --ar)\n"
            "  info      print a model's configuration and tensors\n"
            "  bench     measure AR and tree-verify speed\n"
            "  search    build a bank of task-specific trees (two-stage offline search)\n"
            "  serve     OpenAI-compatible HTTP server with a chat page\n"
            "  version   print the library version\n"
            "\n"
            "Run 'entmtp <command> --help' for the options of a command.\n");
}

int main(int argc, char **argv) {
    if (argc < 2) { usage(stderr); return 2; }
    const char *cmd = argv[1];
    if (!strcmp(cmd, "tree")) return cmd_tree(argc - 1, argv + 1);
    if (!strcmp(cmd, "generate")) return cmd_generate(argc - 1, argv + 1);
    if (!strcmp(cmd, "info")) return cmd_info(argc - 1, argv + 1);
    if (!strcmp(cmd, "bench")) return cmd_bench(argc - 1, argv + 1);
    if (!strcmp(cmd, "search")) return cmd_search(argc - 1, argv + 1);
#ifdef ENTMTP_HAVE_SERVE
    if (!strcmp(cmd, "serve")) return cmd_serve(argc - 1, argv + 1);
#endif
    if (!strcmp(cmd, "version") || !strcmp(cmd, "--version")) {
        printf("entmtp %s\n", entmtp_version_string());
        return 0;
    }
    if (!strcmp(cmd, "help") || !strcmp(cmd, "--help") || !strcmp(cmd, "-h")) {
        usage(stdout);
        return 0;
    }
    fprintf(stderr, "entmtp: unknown command '%s'\n", cmd);
    usage(stderr);
    return 2;
}
