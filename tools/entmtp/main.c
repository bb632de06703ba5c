/* The entmtp command: dispatches to one command per file. */
#include "cli.h"

#include <stdio.h>
#include <string.h>

static void usage(FILE *f) {
    fprintf(f,
            "usage: entmtp <command> [options]\n"
            "\n"
            "commands:\n"
            "  tree      compile a draft tree and print its verifier buffers\n"
            "  generate  generate text with EntMTP (or plain AR with --ar)\n"
            "  chat      interactive chat on stdin (generate -i)\n"
            "  info      print a model's configuration and tensors\n"
            "  bench     measure AR and tree-verify speed\n"
            "  search    build a bank of task-specific trees (two-stage offline search)\n"
            "  serve     OpenAI-compatible HTTP server with a chat page\n"
            "  version   print the library version\n"
            "\n"
            "Run 'entmtp <command> --help' for the options of a command.\n");
}

static const struct {
    const char *name;
    int (*run)(int argc, char **argv);
} commands[] = {
    { "tree", cmd_tree },
    { "generate", cmd_generate },
    { "info", cmd_info },
    { "bench", cmd_bench },
    { "search", cmd_search },
#ifdef ENTMTP_HAVE_SERVE
    { "serve", cmd_serve },
#endif
};

/* `bench --suite` is its own command (cmd_suite.c) behind bench's name */
static int is_bench_suite(int argc, char **argv) {
    for (int i = 1; i < argc; i++)
        if (!strcmp(argv[i], "--suite")) return 1;
    return 0;
}

int main(int argc, char **argv) {
    if (argc < 2) { usage(stderr); return 2; }
    const char *cmd = argv[1];
    if (!strcmp(cmd, "bench") && is_bench_suite(argc - 1, argv + 1)) return cmd_bench_suite(argc - 1, argv + 1);
    if (!strcmp(cmd, "chat")) return cmd_chat(argc - 1, argv + 1);
    for (size_t k = 0; k < sizeof commands / sizeof commands[0]; k++)
        if (!strcmp(cmd, commands[k].name)) return commands[k].run(argc - 1, argv + 1);
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
