#include "cli.h"

#include <stdio.h>

int cmd_generate(int argc, char **argv) {
    (void)argc;
    (void)argv;
    fprintf(stderr, "entmtp generate: not built yet\n");
    return 1;
}
