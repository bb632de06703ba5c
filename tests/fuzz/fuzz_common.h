/* Shared by the fuzz targets: parsers take paths, so each input is written
 * to a per-process temporary file first. */
#ifndef EMT_FUZZ_COMMON_H
#define EMT_FUZZ_COMMON_H

#include "entmtp.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static inline const char *fuzz_write_tmp(const uint8_t *data, size_t size, const char *suffix) {
    static char path[256];
    snprintf(path, sizeof path, "/tmp/entmtp-fuzz-%d%s", (int)getpid(), suffix);
    FILE *f = fopen(path, "wb");
    if (!f) abort();
    if (size && fwrite(data, 1, size, f) != size) abort();
    fclose(f);
    return path;
}

/* Every failure must carry a message. */
static inline void fuzz_check_error(entmtp_status st) {
    if (st != ENTMTP_OK && entmtp_last_error()[0] == '\0') {
        fprintf(stderr, "status %d without a message\n", (int)st);
        abort();
    }
}

#endif
