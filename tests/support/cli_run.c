#include "cli_run.h"

#include <stdio.h>
#include <stdlib.h>
#include <sys/wait.h>

char *emt_cli_run(const char *args, int *rc) {
    char cmd[4096];
    const char *cli = getenv("ENTMTP_CLI");
    snprintf(cmd, sizeof cmd, "%s %s 2>&1", cli ? cli : "entmtp", args);
    FILE *p = popen(cmd, "r");
    if (!p) return NULL;
    size_t cap = 1 << 16, n = 0, got;
    char *out = malloc(cap + 1);
    while (out && (got = fread(out + n, 1, cap - n, p)) > 0) {
        n += got;
        if (n == cap) {
            char *bigger = realloc(out, 2 * cap + 1);
            if (!bigger) break;
            out = bigger;
            cap *= 2;
        }
    }
    if (out) out[n] = '\0';
    int status = pclose(p);
    *rc = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
    return out;
}
