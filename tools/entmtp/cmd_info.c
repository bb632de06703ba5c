#include "cli.h"

#include <stdio.h>

int cmd_info(int argc, char **argv) {
    (void)argc;
    (void)argv;
    fprintf(stderr, "entmtp info: not built yet\n");
    return 1;
}
