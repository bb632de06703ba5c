#include "cli.h"

#include <stdio.h>

int cmd_tree(int argc, char **argv) {
    (void)argc;
    (void)argv;
    fprintf(stderr, "entmtp tree: not built yet\n");
    return 1;
}
