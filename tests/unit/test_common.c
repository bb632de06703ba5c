/* Status strings, version query, versioned-struct copying. */
#include "check.h"
#include "common/common.h"

int main(void) {
    CHECK_EQ_INT(entmtp_version_number(), ENTMTP_VERSION_NUMBER);
    CHECK(strcmp(entmtp_version_string(), "0.2.0") == 0);
    for (int s = 0; s <= ENTMTP_ERR_BUFFER_TOO_SMALL; s++)
        CHECK(strncmp(entmtp_status_string((entmtp_status)s), "ENTMTP_", 7) == 0);
    CHECK(strstr(entmtp_status_string((entmtp_status)999), "UNKNOWN") != NULL);

    CHECK_EQ_INT(emt_fail(ENTMTP_ERR_FORMAT, "file %s tensor %s", "a.gguf", "w"), ENTMTP_ERR_FORMAT);
    CHECK(strcmp(entmtp_last_error(), "file a.gguf tensor w") == 0);
    emt_error_prefix("ctx: ");
    CHECK(strcmp(entmtp_last_error(), "ctx: file a.gguf tensor w") == 0);
    entmtp_clear_error();
    CHECK(entmtp_last_error()[0] == '\0');

    /* an "old caller" passes a smaller struct: only its bytes are read */
    /* (new fields are appended past the old sizeof, so an old struct's tail
     * padding never overlaps them: int64 fields here for that reason) */
    struct big { size_t struct_size; int64_t a; int64_t b; } dst = { sizeof dst, 1, 2 };
    struct small { size_t struct_size; int64_t a; } src = { sizeof src, 7 };
    CHECK_OK(emt_copy_versioned(&dst, sizeof dst, &src, "params"));
    CHECK_EQ_INT(dst.a, 7);
    CHECK_EQ_INT(dst.b, 2);
    struct small bad = { 0, 1 };
    CHECK_ERR(emt_copy_versioned(&dst, sizeof dst, &bad, "params"), ENTMTP_ERR_INVALID_ARGUMENT,
              "params.struct_size");
    /* a newer caller's struct: a zero tail is fine, a set byte is refused */
    struct newer { size_t struct_size; int64_t a; int64_t b; int64_t c; } nw = { sizeof nw, 5, 6, 0 };
    CHECK_OK(emt_copy_versioned(&dst, sizeof dst, &nw, "params"));
    CHECK_EQ_INT(dst.b, 6);
    nw.c = 1;
    CHECK_ERR(emt_copy_versioned(&dst, sizeof dst, &nw, "params"), ENTMTP_ERR_INVALID_ARGUMENT, "newer field");
    CHECK(emt_malloc(SIZE_MAX / 2, 4) == NULL);
    return emt_test_finish("test_common");
}
