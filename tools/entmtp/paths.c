/* Files the CLI finds at run time, never in the source tree it was built
 * from: the shipped heads and the plotting scripts, looked up next to the
 * installed executable (<prefix>/bin/entmtp -> <prefix>/share/entmtp/...),
 * in the configured install directory, or where an environment variable or
 * an option says. */
#include "cli.h"

#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

/* The directory of the running executable; 0 when /proc/self/exe cannot be read. */
static int exe_dir(char *out, size_t cap) {
    ssize_t n = readlink("/proc/self/exe", out, cap - 1);
    if (n <= 0) return 0;
    out[n] = '\0';
    char *slash = strrchr(out, '/');
    if (!slash) return 0;
    *slash = '\0';
    return 1;
}

/* <prefix>/share/entmtp/<sub> for the running executable's prefix. */
static int exe_share_dir(const char *sub, char *out, size_t cap) {
    char exe[PATH_MAX];
    if (!exe_dir(exe, sizeof exe)) return 0; /* <prefix>/bin */
    char *slash = strrchr(exe, '/');
    if (!slash) return 0;
    *slash = '\0'; /* <prefix> */
    return snprintf(out, cap, "%s/share/entmtp/%s", exe, sub) < (int)cap;
}

/* The first of `dirs` (NULL entries skipped) holding `name`: its path in `out`. */
static int find_in(const char *const *dirs, int n_dirs, const char *name, char *out, size_t cap) {
    for (int d = 0; d < n_dirs; d++) {
        if (!dirs[d] || !dirs[d][0]) continue;
        if (snprintf(out, cap, "%s/%s", dirs[d], name) >= (int)cap) continue;
        if (access(out, R_OK) == 0) return 1;
    }
    return 0;
}

/* The source tree's heads/, only for the binary in the build tree it was
 * built in: an installed copy never reads the source tree. */
static const char *source_heads_dir(void) {
#if defined(ENTMTP_HEADS_SOURCE_DIR) && defined(ENTMTP_BUILD_DIR)
    char dir[PATH_MAX];
    if (exe_dir(dir, sizeof dir) && !strcmp(dir, ENTMTP_BUILD_DIR)) return ENTMTP_HEADS_SOURCE_DIR;
#endif
    return NULL;
}

/* The drafter search path: $ENTMTP_HEADS_DIR, <prefix>/share/entmtp/heads
 * beside the executable, the configured install directory, the source
 * tree's heads/ (for the binary in its build tree), ':'-separated. */
static void drafter_search_path(char *out, size_t cap) {
    char beside_exe[PATH_MAX];
    const char *dirs[] = {
        getenv("ENTMTP_HEADS_DIR"),
        exe_share_dir("heads", beside_exe, sizeof beside_exe) ? beside_exe : NULL,
#ifdef ENTMTP_HEADS_INSTALL_DIR
        ENTMTP_HEADS_INSTALL_DIR,
#endif
        source_heads_dir(),
    };
    out[0] = '\0';
    size_t len = 0;
    for (size_t d = 0; d < sizeof dirs / sizeof dirs[0]; d++) {
        if (!dirs[d] || !dirs[d][0]) continue;
        int n = snprintf(out + len, cap - len, "%s%s", len ? ":" : "", dirs[d]);
        if (n < 0 || (size_t)n >= cap - len) { out[len] = '\0'; break; }
        len += (size_t)n;
    }
}

int cli_find_drafter(const entmtp_model *model, entmtp_drafter *out) {
    char search_path[4 * PATH_MAX];
    drafter_search_path(search_path, sizeof search_path);
    *out = (entmtp_drafter){ sizeof *out };
    if (!search_path[0]) {
        snprintf(out->reason, sizeof out->reason, "no heads directory to search ($ENTMTP_HEADS_DIR unset, none installed)");
        return 0;
    }
    return entmtp_drafter_find(model, search_path, out) == ENTMTP_OK;
}

int cli_find_plot_script(const char *script, const char *explicit_path, char *out, size_t cap) {
    if (explicit_path) {
        snprintf(out, cap, "%s", explicit_path);
        return access(out, R_OK) == 0;
    }
    char beside_exe[PATH_MAX];
    const char *dirs[] = {
        getenv("ENTMTP_SCRIPTS_DIR"),
        exe_share_dir("scripts", beside_exe, sizeof beside_exe) ? beside_exe : NULL,
#ifdef ENTMTP_SCRIPTS_INSTALL_DIR
        ENTMTP_SCRIPTS_INSTALL_DIR,
#endif
    };
    return find_in(dirs, (int)(sizeof dirs / sizeof dirs[0]), script, out, cap);
}

int cli_plot(const char *cmd, const char *script, const char *explicit_path, const char *data, const char *image) {
    char path[PATH_MAX];
    if (!cli_find_plot_script(script, explicit_path, path, sizeof path)) {
        fprintf(stderr,
                "entmtp %s: no plot: %s not found (%s); the data is in %s: plot it with "
                "`python3 %s %s %s`, or pass --plot-script PATH\n",
                cmd, explicit_path ? explicit_path : script,
                explicit_path ? "--plot-script" : "$ENTMTP_SCRIPTS_DIR, <prefix>/share/entmtp/scripts", data,
                script, data, image);
        return 1;
    }
    pid_t pid = fork();
    if (pid < 0) {
        fprintf(stderr, "entmtp %s: cannot start python3: %s\n", cmd, strerror(errno));
        return 1;
    }
    if (pid == 0) { /* no shell: the paths are arguments, not command text */
        execlp("python3", "python3", path, data, image, (char *)NULL);
        _exit(127);
    }
    int status = 0;
    while (waitpid(pid, &status, 0) < 0 && errno == EINTR) {}
    if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
        fprintf(stderr, "entmtp %s: plotting with %s failed (needs python3 + matplotlib); the data is in %s\n", cmd,
                path, data);
        return 1;
    }
    fprintf(stderr, "entmtp %s: plot %s\n", cmd, image);
    return 0;
}
