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
