#include "check.h"

#include <string.h>

int emt_test_failures = 0;

int emt_test_finish(const char *name) {
    if (emt_test_failures) {
        fprintf(stderr, "%s: %d check(s) failed\n", name, emt_test_failures);
        return 1;
    }
    printf("%s: all checks passed\n", name);
    return 0;
}

char *emt_test_read_file(const char *path, size_t *len) {
    FILE *f = fopen(path, "rb");
    if (!f) return NULL;
    char *s = NULL;
    long n = fseek(f, 0, SEEK_END) == 0 ? ftell(f) : -1;
    if (n >= 0 && fseek(f, 0, SEEK_SET) == 0 && (s = malloc((size_t)n + 1)) &&
        fread(s, 1, (size_t)n, f) != (size_t)n) {
        free(s);
        s = NULL;
    }
    fclose(f);
    if (s) {
        s[n] = '\0';
        if (len) *len = (size_t)n;
    }
    return s;
}
