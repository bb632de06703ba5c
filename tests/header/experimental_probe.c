/* Compiled by CTest (header_experimental_*): calls an EXPERIMENTAL function
 * and a deprecated declaration's macro. Without ENTMTP_EXPERIMENTAL_API the
 * call has no prototype and -Werror=implicit-function-declaration fails the
 * compile; with it the file compiles. */
#include <entmtp.h>

ENTMTP_DEPRECATED("use probe_new") static inline int probe_old(void) { return 0; }

int probe(const entmtp_session *s) {
    const float *logits;
    int32_t n;
    return (int)entmtp_session_logits(s, &logits, &n);
}
