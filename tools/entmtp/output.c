/* What every command prints the same way: library errors and progress. */
#include "cli.h"

#include "common/common.h"

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

int cli_model_load(const char *path, const entmtp_model_params *params, entmtp_model **out, int announce) {
    /* a bar on a terminal comes on its own lines; in a log the line is completed */
    int bar = announce && params && params->progress && isatty(STDERR_FILENO);
    if (announce) {
        fprintf(stderr, "entmtp: loading model %s ...%s", path, bar ? "\n" : " ");
        fflush(stderr);
    }
    double t0 = emt_now();
    entmtp_status st = entmtp_model_load(path, params, out);
    if (announce) {
        if (bar) fprintf(stderr, "entmtp: model ");
        if (st) fprintf(stderr, "failed\n");
        else fprintf(stderr, "%s in %.2f s\n", bar ? "loaded" : "done", emt_now() - t0);
    }
    return st ? cli_fail(path, st) : 0;
}
