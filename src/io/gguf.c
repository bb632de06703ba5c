/* GGUF v2/v3 reader. Every length, count and offset is checked against the
 * file size before use; no byte sequence makes it read out of bounds. */
#include "io/gguf.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>

typedef struct kv {
    char *key;
    emt_gguf_type type;
    const uint8_t *value;      /* scalar or string record; for arrays the first element */
    emt_gguf_type elem_type;   /* arrays */
    int64_t n;                 /* arrays */
    const uint8_t **strs;      /* string arrays: each element's record */
} kv;

struct emt_gguf {
    emt_mapping map;
    uint32_t version;
    int64_t n_kv, n_tensors;
    kv *kvs;
    emt_tensor *tensors;
    char **names;
    size_t alignment;
};

typedef struct cursor {
    const uint8_t *p, *end, *start;
    const char *path;
} cursor;

static entmtp_status need(cursor *c, uint64_t n, const char *what) {
    if ((uint64_t)(c->end - c->p) < n)
        return emt_fail(ENTMTP_ERR_FORMAT, "%s: truncated: %s needs %llu bytes at offset %zu, %zu left",
                        c->path, what, (unsigned long long)n, (size_t)(c->p - c->start), (size_t)(c->end - c->p));
    return ENTMTP_OK;
}

static uint64_t rd_u64(const uint8_t *p) { uint64_t v; memcpy(&v, p, 8); return v; }
static uint32_t rd_u32(const uint8_t *p) { uint32_t v; memcpy(&v, p, 4); return v; }

static size_t scalar_size(emt_gguf_type t) {
    switch (t) {
    case EMT_GGUF_UINT8: case EMT_GGUF_INT8: case EMT_GGUF_BOOL: return 1;
    case EMT_GGUF_UINT16: case EMT_GGUF_INT16: return 2;
    case EMT_GGUF_UINT32: case EMT_GGUF_INT32: case EMT_GGUF_FLOAT32: return 4;
    case EMT_GGUF_UINT64: case EMT_GGUF_INT64: case EMT_GGUF_FLOAT64: return 8;
    default: return 0;
    }
}

static entmtp_status read_string(cursor *c, const char *what, const uint8_t **rec, uint64_t *len) {
    entmtp_status st = need(c, 8, what);
    if (st) return st;
    uint64_t n = rd_u64(c->p);
    if (n > (uint64_t)(c->end - c->p) - 8)
        return emt_fail(ENTMTP_ERR_FORMAT, "%s: %s: string length %llu runs past the end of the file",
                        c->path, what, (unsigned long long)n);
    if (rec) *rec = c->p;
    if (len) *len = n;
    c->p += 8 + n;
    return ENTMTP_OK;
}

static entmtp_status skip_value(cursor *c, emt_gguf_type t, const char *key) {
    if (t == EMT_GGUF_STRING) return read_string(c, key, NULL, NULL);
    size_t sz = scalar_size(t);
    if (!sz) return emt_fail(ENTMTP_ERR_FORMAT, "%s: key '%s': unknown value type %u", c->path, key, (unsigned)t);
    entmtp_status st = need(c, sz, key);
    if (!st) c->p += sz;
    return st;
}

void emt_gguf_close(emt_gguf *g) {
    if (!g) return;
    for (int64_t i = 0; g->kvs && i < g->n_kv; i++) {
        free(g->kvs[i].key);
        free(g->kvs[i].strs);
    }
    free(g->kvs);
    for (int64_t i = 0; g->names && i < g->n_tensors; i++) free(g->names[i]);
    free(g->names);
    free(g->tensors);
    emt_unmap_file(&g->map);
    free(g);
}

const char *emt_gguf_path(const emt_gguf *g) { return g->map.path; }

static int ggml_to_dtype(uint32_t t, emt_dtype *out) {
    switch (t) {
    case 0: *out = EMT_F32; return 1;
    case 1: *out = EMT_F16; return 1;
    case 2: *out = EMT_Q4_0; return 1;
    case 3: *out = EMT_Q4_1; return 1;
    case 6: *out = EMT_Q5_0; return 1;
    case 7: *out = EMT_Q5_1; return 1;
    case 8: *out = EMT_Q8_0; return 1;
    case 12: *out = EMT_Q4_K; return 1;
    case 13: *out = EMT_Q5_K; return 1;
    case 14: *out = EMT_Q6_K; return 1;
    case 30: *out = EMT_BF16; return 1;
    default: return 0;
    }
}

static int cmp_tensor_offset(const void *a, const void *b) {
    const emt_tensor *x = *(const emt_tensor *const *)a, *y = *(const emt_tensor *const *)b;
    return x->data < y->data ? -1 : x->data > y->data;
}

static entmtp_status parse(emt_gguf *g) {
    const char *path = g->map.path;
    entmtp_status st;
    /* (checked before any pointer arithmetic: an empty file maps to NULL) */
    if (g->map.size < 24 || memcmp(g->map.data, "GGUF", 4) != 0)
        return emt_fail(ENTMTP_ERR_FORMAT, "%s: not a GGUF file (bad magic or shorter than its header)", path);
    cursor c = { g->map.data, g->map.data + g->map.size, g->map.data, path };
    c.p += 4;
    g->version = rd_u32(c.p);
    c.p += 4;
    if (g->version == 0x03000000u || g->version == 0x02000000u)
        return emt_fail(ENTMTP_ERR_UNSUPPORTED, "%s: big-endian GGUF files are not supported", path);
    if (g->version != 2 && g->version != 3)
        return emt_fail(ENTMTP_ERR_UNSUPPORTED, "%s: GGUF version %u is not supported (2 or 3)", path, g->version);
    uint64_t nt = rd_u64(c.p), nk = rd_u64(c.p + 8);
    c.p += 16;
    /* every tensor info takes >= 24 bytes and every key/value >= 12 */
    if (nt > g->map.size / 24 || nk > g->map.size / 12)
        return emt_fail(ENTMTP_ERR_FORMAT, "%s: header claims %llu tensors and %llu keys, more than the file can hold",
                        path, (unsigned long long)nt, (unsigned long long)nk);
    g->n_tensors = (int64_t)nt;
    g->n_kv = (int64_t)nk;
    g->kvs = emt_calloc((size_t)nk, sizeof *g->kvs);
    g->tensors = emt_calloc((size_t)nt, sizeof *g->tensors);
    g->names = emt_calloc((size_t)nt, sizeof *g->names);
    if (!g->kvs || !g->tensors || !g->names) return ENTMTP_ERR_OUT_OF_MEMORY;
    g->alignment = 32;
    for (int64_t i = 0; i < g->n_kv; i++) {
        kv *e = &g->kvs[i];
        const uint8_t *rec = NULL;
        uint64_t len = 0;
        char what[64];
        snprintf(what, sizeof what, "key %lld", (long long)i);
        if ((st = read_string(&c, what, &rec, &len))) return st;
        e->key = emt_malloc((size_t)len + 1, 1);
        if (!e->key) return ENTMTP_ERR_OUT_OF_MEMORY;
        memcpy(e->key, rec + 8, (size_t)len);
        e->key[len] = '\0';
        if ((st = need(&c, 4, e->key))) return st;
        e->type = (emt_gguf_type)rd_u32(c.p);
        c.p += 4;
        e->value = c.p;
        if (e->type == EMT_GGUF_ARRAY) {
            if ((st = need(&c, 12, e->key))) return st;
            e->elem_type = (emt_gguf_type)rd_u32(c.p);
            uint64_t n = rd_u64(c.p + 4);
            c.p += 12;
            e->value = c.p;
            if (e->elem_type == EMT_GGUF_ARRAY)
                return emt_fail(ENTMTP_ERR_UNSUPPORTED, "%s: key '%s': nested arrays are not supported", path, e->key);
            if (e->elem_type == EMT_GGUF_STRING) {
                if (n > (uint64_t)(c.end - c.p) / 8)
                    return emt_fail(ENTMTP_ERR_FORMAT, "%s: key '%s': %llu strings cannot fit in the file", path, e->key, (unsigned long long)n);
                e->strs = emt_malloc((size_t)n ? (size_t)n : 1, sizeof *e->strs);
                if (!e->strs) return ENTMTP_ERR_OUT_OF_MEMORY;
                for (uint64_t k = 0; k < n; k++)
                    if ((st = read_string(&c, e->key, &e->strs[k], NULL))) return st;
            } else {
                size_t sz = scalar_size(e->elem_type);
                if (!sz) return emt_fail(ENTMTP_ERR_FORMAT, "%s: key '%s': unknown array element type %u", path, e->key, (unsigned)e->elem_type);
                if (n > (uint64_t)(c.end - c.p) / sz)
                    return emt_fail(ENTMTP_ERR_FORMAT, "%s: key '%s': array of %llu elements runs past the end of the file", path, e->key, (unsigned long long)n);
                c.p += n * sz;
            }
            e->n = (int64_t)n;
        } else if ((st = skip_value(&c, e->type, e->key))) {
            return st;
        }
        for (int64_t j = 0; j < i; j++)
            if (!strcmp(g->kvs[j].key, e->key))
                return emt_fail(ENTMTP_ERR_FORMAT, "%s: key '%s' appears twice", path, e->key);
        if (!strcmp(e->key, "general.alignment")) {
            int64_t a;
            if (emt_gguf_get_i64(g, "general.alignment", &a) || a <= 0 || a > 1 << 20 || (a & (a - 1)))
                return emt_fail(ENTMTP_ERR_FORMAT, "%s: general.alignment must be a power of two", path);
            g->alignment = (size_t)a;
        }
    }
    /* tensor infos */
    for (int64_t i = 0; i < g->n_tensors; i++) {
        emt_tensor *t = &g->tensors[i];
        const uint8_t *rec = NULL;
        uint64_t len = 0;
        char what[64];
        snprintf(what, sizeof what, "tensor %lld name", (long long)i);
        if ((st = read_string(&c, what, &rec, &len))) return st;
        g->names[i] = emt_malloc((size_t)len + 1, 1);
        if (!g->names[i]) return ENTMTP_ERR_OUT_OF_MEMORY;
        memcpy(g->names[i], rec + 8, (size_t)len);
        g->names[i][len] = '\0';
        t->name = g->names[i];
        t->file = path;
        if ((st = need(&c, 4, t->name))) return st;
        uint32_t nd = rd_u32(c.p);
        c.p += 4;
        if (nd < 1 || nd > EMT_MAX_DIMS)
            return emt_fail(ENTMTP_ERR_FORMAT, "%s: tensor '%s': %u dimensions (1..%d supported)", path, t->name, nd, EMT_MAX_DIMS);
        if ((st = need(&c, 8ull * nd + 12, t->name))) return st;
        t->n_dims = (int32_t)nd;
        uint64_t numel = 1;
        for (uint32_t d = 0; d < nd; d++) {
            uint64_t ne = rd_u64(c.p + 8 * d);
            if (ne == 0 || ne > (1ull << 40) || numel > (1ull << 48) / ne)
                return emt_fail(ENTMTP_ERR_FORMAT, "%s: tensor '%s': dimension %u = %llu is invalid", path, t->name, d, (unsigned long long)ne);
            numel *= ne;
            t->shape[nd - 1 - d] = (int64_t)ne; /* outermost first */
        }
        c.p += 8ull * nd;
        uint32_t type = rd_u32(c.p);
        uint64_t off = rd_u64(c.p + 4);
        c.p += 12;
        if (!ggml_to_dtype(type, &t->dtype))
            return emt_fail(ENTMTP_ERR_UNSUPPORTED, "%s: tensor '%s': ggml type %u is not supported (F32, F16, BF16, Q8_0, Q4_0, Q4_1, Q5_0, Q5_1, Q4_K, Q5_K, Q6_K)", path, t->name, type);
        t->nbytes = emt_dtype_nbytes(t->dtype, (int64_t)numel);
        if (!t->nbytes)
            return emt_fail(ENTMTP_ERR_FORMAT, "%s: tensor '%s': %llu elements are not whole %s blocks", path, t->name, (unsigned long long)numel, emt_dtype_name(t->dtype));
        if (emt_dtype_is_quantized(t->dtype) && t->shape[t->n_dims - 1] % (int64_t)emt_dtype_block_elems(t->dtype))
            return emt_fail(ENTMTP_ERR_FORMAT, "%s: tensor '%s': rows of %lld are not whole %s blocks of %zu", path, t->name,
                            (long long)t->shape[t->n_dims - 1], emt_dtype_name(t->dtype), emt_dtype_block_elems(t->dtype));
        t->data = (const void *)(uintptr_t)off; /* resolved below */
        for (int64_t j = 0; j < i; j++)
            if (!strcmp(g->names[j], t->name)) return emt_fail(ENTMTP_ERR_FORMAT, "%s: tensor '%s' appears twice", path, t->name);
    }
    size_t header_end = (size_t)(c.p - g->map.data);
    size_t data_start = (header_end + g->alignment - 1) / g->alignment * g->alignment;
    if (g->n_tensors > 0 && data_start > g->map.size)
        return emt_fail(ENTMTP_ERR_FORMAT, "%s: tensor data section starts past the end of the file", path);
    for (int64_t i = 0; i < g->n_tensors; i++) {
        emt_tensor *t = &g->tensors[i];
        uint64_t off = (uint64_t)(uintptr_t)t->data;
        if (off % g->alignment)
            return emt_fail(ENTMTP_ERR_FORMAT, "%s: tensor '%s': offset %llu is not aligned to %zu", path, t->name, (unsigned long long)off, g->alignment);
        if (off > g->map.size - data_start || t->nbytes > g->map.size - data_start - off)
            return emt_fail(ENTMTP_ERR_FORMAT, "%s: tensor '%s': data [%llu, %llu) past the end of the file (size %zu)",
                            path, t->name, (unsigned long long)(data_start + off), (unsigned long long)(data_start + off + t->nbytes), g->map.size);
        t->data = g->map.data + data_start + off;
    }
    if (g->n_tensors > 1) {
        const emt_tensor **order = emt_malloc((size_t)g->n_tensors, sizeof *order);
        if (!order) return ENTMTP_ERR_OUT_OF_MEMORY;
        for (int64_t i = 0; i < g->n_tensors; i++) order[i] = &g->tensors[i];
        qsort(order, (size_t)g->n_tensors, sizeof *order, cmp_tensor_offset);
        for (int64_t i = 1; i < g->n_tensors; i++) {
            const uint8_t *prev_end = (const uint8_t *)order[i - 1]->data + order[i - 1]->nbytes;
            if ((const uint8_t *)order[i]->data < prev_end) {
                st = emt_fail(ENTMTP_ERR_FORMAT, "%s: tensors '%s' and '%s' overlap", path, order[i - 1]->name, order[i]->name);
                free(order);
                return st;
            }
        }
        free(order);
    }
    return ENTMTP_OK;
}

entmtp_status emt_gguf_open(const char *path, emt_gguf **out) {
    *out = NULL;
    emt_gguf *g = emt_calloc(1, sizeof *g);
    if (!g) return ENTMTP_ERR_OUT_OF_MEMORY;
    entmtp_status st = emt_map_file(path, &g->map);
    if (!st) st = parse(g);
    if (st) {
        emt_gguf_close(g);
        return st;
    }
    *out = g;
    return ENTMTP_OK;
}

static const kv *find(const emt_gguf *g, const char *key) {
    for (int64_t i = 0; i < g->n_kv; i++)
        if (g->kvs[i].key && !strcmp(g->kvs[i].key, key)) return &g->kvs[i];
    return NULL;
}


static entmtp_status to_i64(emt_gguf_type t, const uint8_t *p, int64_t *out, int *ok) {
    *ok = 1;
    switch (t) {
    case EMT_GGUF_UINT8: *out = p[0]; break;
    case EMT_GGUF_INT8: *out = (int8_t)p[0]; break;
    case EMT_GGUF_BOOL: *out = p[0] != 0; break;
    case EMT_GGUF_UINT16: { uint16_t v; memcpy(&v, p, 2); *out = v; break; }
    case EMT_GGUF_INT16: { int16_t v; memcpy(&v, p, 2); *out = v; break; }
    case EMT_GGUF_UINT32: { uint32_t v; memcpy(&v, p, 4); *out = v; break; }
    case EMT_GGUF_INT32: { int32_t v; memcpy(&v, p, 4); *out = v; break; }
    case EMT_GGUF_UINT64: { uint64_t v; memcpy(&v, p, 8); if (v > INT64_MAX) *ok = 0; *out = (int64_t)v; break; }
    case EMT_GGUF_INT64: { int64_t v; memcpy(&v, p, 8); *out = v; break; }
    default: *ok = 0;
    }
    return ENTMTP_OK;
}

entmtp_status emt_gguf_get_i64(const emt_gguf *g, const char *key, int64_t *out) {
    const kv *e = find(g, key);
    if (!e) return emt_fail(ENTMTP_ERR_NOT_FOUND, "%s: key '%s' not found", g->map.path, key);
    int ok;
    to_i64(e->type, e->value, out, &ok);
    if (!ok) return emt_fail(ENTMTP_ERR_FORMAT, "%s: key '%s' is not an integer", g->map.path, key);
    return ENTMTP_OK;
}

entmtp_status emt_gguf_get_f32(const emt_gguf *g, const char *key, float *out) {
    const kv *e = find(g, key);
    if (!e) return emt_fail(ENTMTP_ERR_NOT_FOUND, "%s: key '%s' not found", g->map.path, key);
    if (e->type == EMT_GGUF_FLOAT32) { memcpy(out, e->value, 4); return ENTMTP_OK; }
    if (e->type == EMT_GGUF_FLOAT64) { double d; memcpy(&d, e->value, 8); *out = (float)d; return ENTMTP_OK; }
    int64_t v;
    int ok;
    to_i64(e->type, e->value, &v, &ok);
    if (!ok) return emt_fail(ENTMTP_ERR_FORMAT, "%s: key '%s' is not a number", g->map.path, key);
    *out = (float)v;
    return ENTMTP_OK;
}

entmtp_status emt_gguf_get_bool(const emt_gguf *g, const char *key, int *out) {
    int64_t v;
    entmtp_status st = emt_gguf_get_i64(g, key, &v);
    if (!st) *out = v != 0;
    return st;
}

entmtp_status emt_gguf_get_str(const emt_gguf *g, const char *key, const char **s, size_t *len) {
    const kv *e = find(g, key);
    if (!e) return emt_fail(ENTMTP_ERR_NOT_FOUND, "%s: key '%s' not found", g->map.path, key);
    if (e->type != EMT_GGUF_STRING) return emt_fail(ENTMTP_ERR_FORMAT, "%s: key '%s' is not a string", g->map.path, key);
    *len = (size_t)rd_u64(e->value);
    *s = (const char *)e->value + 8;
    return ENTMTP_OK;
}

entmtp_status emt_gguf_get_arr(const emt_gguf *g, const char *key, emt_gguf_type *elem_type, int64_t *n) {
    const kv *e = find(g, key);
    if (!e) return emt_fail(ENTMTP_ERR_NOT_FOUND, "%s: key '%s' not found", g->map.path, key);
    if (e->type != EMT_GGUF_ARRAY) return emt_fail(ENTMTP_ERR_FORMAT, "%s: key '%s' is not an array", g->map.path, key);
    *elem_type = e->elem_type;
    *n = e->n;
    return ENTMTP_OK;
}

static entmtp_status arr_elem(const emt_gguf *g, const char *key, int64_t i, const kv **out) {
    const kv *e = find(g, key);
    if (!e) return emt_fail(ENTMTP_ERR_NOT_FOUND, "%s: key '%s' not found", g->map.path, key);
    if (e->type != EMT_GGUF_ARRAY) return emt_fail(ENTMTP_ERR_FORMAT, "%s: key '%s' is not an array", g->map.path, key);
    if (i < 0 || i >= e->n)
        return emt_fail(ENTMTP_ERR_OUT_OF_RANGE, "%s: key '%s': index %lld outside [0, %lld)", g->map.path, key, (long long)i, (long long)e->n);
    *out = e;
    return ENTMTP_OK;
}

entmtp_status emt_gguf_arr_str(const emt_gguf *g, const char *key, int64_t i, const char **s, size_t *len) {
    const kv *e;
    entmtp_status st = arr_elem(g, key, i, &e);
    if (st) return st;
    if (e->elem_type != EMT_GGUF_STRING) return emt_fail(ENTMTP_ERR_FORMAT, "%s: key '%s' is not a string array", g->map.path, key);
    *len = (size_t)rd_u64(e->strs[i]);
    *s = (const char *)e->strs[i] + 8;
    return ENTMTP_OK;
}

entmtp_status emt_gguf_arr_i64(const emt_gguf *g, const char *key, int64_t i, int64_t *out) {
    const kv *e;
    entmtp_status st = arr_elem(g, key, i, &e);
    if (st) return st;
    size_t sz = scalar_size(e->elem_type);
    int ok = 0;
    if (sz) to_i64(e->elem_type, e->value + (size_t)i * sz, out, &ok);
    if (!ok) return emt_fail(ENTMTP_ERR_FORMAT, "%s: key '%s' is not an integer array", g->map.path, key);
    return ENTMTP_OK;
}

entmtp_status emt_gguf_arr_f32(const emt_gguf *g, const char *key, int64_t i, float *out) {
    const kv *e;
    entmtp_status st = arr_elem(g, key, i, &e);
    if (st) return st;
    size_t sz = scalar_size(e->elem_type);
    const uint8_t *p = e->value + (size_t)i * sz;
    if (e->elem_type == EMT_GGUF_FLOAT32) { memcpy(out, p, 4); return ENTMTP_OK; }
    if (e->elem_type == EMT_GGUF_FLOAT64) { double d; memcpy(&d, p, 8); *out = (float)d; return ENTMTP_OK; }
    int64_t v;
    int ok = 0;
    if (sz) to_i64(e->elem_type, p, &v, &ok);
    if (!ok) return emt_fail(ENTMTP_ERR_FORMAT, "%s: key '%s' is not a numeric array", g->map.path, key);
    *out = (float)v;
    return ENTMTP_OK;
}

int64_t emt_gguf_n_kv(const emt_gguf *g) { return g->n_kv; }
const char *emt_gguf_kv_key(const emt_gguf *g, int64_t i) { return i >= 0 && i < g->n_kv ? g->kvs[i].key : NULL; }
int64_t emt_gguf_n_tensors(const emt_gguf *g) { return g->n_tensors; }
const emt_tensor *emt_gguf_tensor(const emt_gguf *g, int64_t i) {
    return i >= 0 && i < g->n_tensors ? &g->tensors[i] : NULL;
}
const emt_tensor *emt_gguf_find_tensor(const emt_gguf *g, const char *name) {
    for (int64_t i = 0; i < g->n_tensors; i++)
        if (!strcmp(g->tensors[i].name, name)) return &g->tensors[i];
    return NULL;
}
