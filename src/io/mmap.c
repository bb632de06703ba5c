#include "io/tensor.h"

#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

entmtp_status emt_map_file(const char *path, emt_mapping *out) {
    memset(out, 0, sizeof *out);
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) return emt_fail(ENTMTP_ERR_IO, "%s: cannot open: %s", path, strerror(errno));
    struct stat sb;
    if (fstat(fd, &sb) != 0) {
        int e = errno;
        close(fd);
        return emt_fail(ENTMTP_ERR_IO, "%s: cannot stat: %s", path, strerror(e));
    }
    if (!S_ISREG(sb.st_mode)) {
        close(fd);
        return emt_fail(ENTMTP_ERR_IO, "%s: not a regular file", path);
    }
    out->path = emt_strdup(path);
    if (!out->path) { close(fd); return ENTMTP_ERR_OUT_OF_MEMORY; }
    out->size = (size_t)sb.st_size;
    if (out->size > 0) {
        void *p = mmap(NULL, out->size, PROT_READ, MAP_PRIVATE, fd, 0);
        if (p == MAP_FAILED) {
            int e = errno;
            close(fd);
            free(out->path);
            out->path = NULL;
            return emt_fail(ENTMTP_ERR_IO, "%s: cannot map %zu bytes: %s", path, (size_t)sb.st_size, strerror(e));
        }
        out->data = p;
    }
    close(fd);
    return ENTMTP_OK;
}

void emt_unmap_file(emt_mapping *m) {
    if (!m) return;
    if (m->data && m->size) munmap((void *)m->data, m->size);
    free(m->path);
    memset(m, 0, sizeof *m);
}

void emt_mapping_drop(const void *p, size_t bytes) {
    uintptr_t page = (uintptr_t)sysconf(_SC_PAGESIZE);
    uintptr_t a = ((uintptr_t)p + page - 1) & ~(page - 1), e = ((uintptr_t)p + bytes) & ~(page - 1);
    if (e > a) (void)madvise((void *)a, e - a, MADV_DONTNEED); /* advice: a failure costs memory, never bits */
}
