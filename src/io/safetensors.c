/* safetensors reader: single files and sharded directories. */
#include "io/safetensors.h"

#include <cjson/cJSON.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

#define EMT_ST_MAX_HEADER (100u << 20)

typedef struct st_file {
    emt_mapping map;
    const cJSON *meta; /* "__metadata__" object (owned by header) */
    cJSON *header;
} st_file;

struct emt_st {
    st_file *files;
    int32_t n_files;
    emt_tensor *tensors;
    int64_t n_tensors;
    char **names;
    int64_t *sorted; /* tensor indices sorted by name */
};

static int parse_dtype(const char *s, emt_dtype *out) {
    if (!strcmp(s, "F32")) *out = EMT_F32;
    else if (!strcmp(s, "F16")) *out = EMT_F16;
    else if (!strcmp(s, "BF16")) *out = EMT_BF16;
    else if (!strcmp(s, "I32")) *out = EMT_I32;
    else if (!strcmp(s, "I64")) *out = EMT_I64;
    else if (!strcmp(s, "BOOL")) *out = EMT_BOOL;
    else return 0;
    return 1;
}

static size_t elem_size(emt_dtype t) { return t == EMT_F32 || t == EMT_I32 ? 4 : t == EMT_I64 ? 8 : t == EMT_BOOL ? 1 : 2; }

typedef struct range { uint64_t begin, end; const char *name; } range;

static int cmp_range(const void *a, const void *b) {
    const range *x = a, *y = b;
    return x->begin < y->begin ? -1 : x->begin > y->begin;
}

/* Parse one file's header and append its tensors. */
static entmtp_status load_file(emt_st *st, int32_t fi, const char *path) {
    st_file *f = &st->files[fi];
    entmtp_status s = emt_map_file(path, &f->map);
    if (s) return s;
    if (f->map.size < 8) return emt_fail(ENTMTP_ERR_FORMAT, "%s: too short for a safetensors header (%zu bytes)", path, f->map.size);
    uint64_t hlen;
    memcpy(&hlen, f->map.data, 8);
    if (hlen > f->map.size - 8 || hlen > EMT_ST_MAX_HEADER)
        return emt_fail(ENTMTP_ERR_FORMAT, "%s: header length %llu exceeds the file (%zu bytes)", path, (unsigned long long)hlen, f->map.size);
    f->header = cJSON_ParseWithLength((const char *)f->map.data + 8, (size_t)hlen);
    if (!f->header || !cJSON_IsObject(f->header))
        return emt_fail(ENTMTP_ERR_FORMAT, "%s: header is not a JSON object", path);
    const uint8_t *data = f->map.data + 8 + hlen;
    uint64_t data_len = f->map.size - 8 - hlen;
    int64_t count = 0;
    const cJSON *it;
    cJSON_ArrayForEach(it, f->header) count++;
    emt_tensor *nt = emt_realloc(st->tensors, (size_t)(st->n_tensors + count), sizeof *nt);
    if (!nt) return ENTMTP_ERR_OUT_OF_MEMORY;
    st->tensors = nt;
    char **nn = emt_realloc(st->names, (size_t)(st->n_tensors + count), sizeof *nn);
    if (!nn) return ENTMTP_ERR_OUT_OF_MEMORY;
    st->names = nn;
    range *ranges = emt_malloc((size_t)count ? (size_t)count : 1, sizeof *ranges);
    if (!ranges) return ENTMTP_ERR_OUT_OF_MEMORY;
    int64_t nr = 0;
    s = ENTMTP_OK;
    cJSON_ArrayForEach(it, f->header) {
        const char *name = it->string ? it->string : "";
        if (!strcmp(name, "__metadata__")) {
            if (!cJSON_IsObject(it)) { s = emt_fail(ENTMTP_ERR_FORMAT, "%s: __metadata__ is not an object", path); break; }
            f->meta = it;
            continue;
        }
        if (!cJSON_IsObject(it)) { s = emt_fail(ENTMTP_ERR_FORMAT, "%s: tensor '%s': entry is not an object", path, name); break; }
        const cJSON *dt = cJSON_GetObjectItemCaseSensitive(it, "dtype");
        const cJSON *shape = cJSON_GetObjectItemCaseSensitive(it, "shape");
        const cJSON *offs = cJSON_GetObjectItemCaseSensitive(it, "data_offsets");
        emt_tensor *t = &st->tensors[st->n_tensors];
        memset(t, 0, sizeof *t);
        if (!cJSON_IsString(dt)) { s = emt_fail(ENTMTP_ERR_FORMAT, "%s: tensor '%s': dtype missing", path, name); break; }
        if (!parse_dtype(dt->valuestring, &t->dtype)) {
            s = emt_fail(ENTMTP_ERR_UNSUPPORTED, "%s: tensor '%s': dtype %s is not supported (F32, F16, BF16, I32, I64)", path, name, dt->valuestring);
            break;
        }
        if (!cJSON_IsArray(shape) || cJSON_GetArraySize(shape) > EMT_MAX_DIMS) {
            s = emt_fail(ENTMTP_ERR_FORMAT, "%s: tensor '%s': shape must be an array of at most %d integers", path, name, EMT_MAX_DIMS);
            break;
        }
        uint64_t numel = 1;
        int nd = 0;
        const cJSON *dim;
        cJSON_ArrayForEach(dim, shape) {
            double d = dim->valuedouble;
            if (!cJSON_IsNumber(dim) || d < 0 || d > 1e12 || d != (double)(uint64_t)d) {
                s = emt_fail(ENTMTP_ERR_FORMAT, "%s: tensor '%s': shape[%d] is not a non-negative integer", path, name, nd);
                break;
            }
            uint64_t v = (uint64_t)d;
            if (v && numel > (1ull << 48) / v) { s = emt_fail(ENTMTP_ERR_FORMAT, "%s: tensor '%s': shape too large", path, name); break; }
            numel *= v;
            t->shape[nd++] = (int64_t)v;
        }
        if (s) break;
        t->n_dims = nd;
        if (!cJSON_IsArray(offs) || cJSON_GetArraySize(offs) != 2) {
            s = emt_fail(ENTMTP_ERR_FORMAT, "%s: tensor '%s': data_offsets must be [begin, end]", path, name);
            break;
        }
        double b = cJSON_GetArrayItem(offs, 0)->valuedouble, e = cJSON_GetArrayItem(offs, 1)->valuedouble;
        if (!cJSON_IsNumber(cJSON_GetArrayItem(offs, 0)) || !cJSON_IsNumber(cJSON_GetArrayItem(offs, 1)) || b < 0 ||
            e < b || e > (double)data_len || b != (double)(uint64_t)b || e != (double)(uint64_t)e) {
            s = emt_fail(ENTMTP_ERR_FORMAT, "%s: tensor '%s': data_offsets [%.0f, %.0f] outside the data (%llu bytes)", path, name, b, e, (unsigned long long)data_len);
            break;
        }
        uint64_t need = numel * elem_size(t->dtype);
        if ((uint64_t)e - (uint64_t)b != need) {
            s = emt_fail(ENTMTP_ERR_FORMAT, "%s: tensor '%s': %llu bytes of data for %llu %s elements (needs %llu)", path, name,
                         (unsigned long long)((uint64_t)e - (uint64_t)b), (unsigned long long)numel, emt_dtype_name(t->dtype), (unsigned long long)need);
            break;
        }
        st->names[st->n_tensors] = emt_strdup(name);
        if (!st->names[st->n_tensors]) { s = ENTMTP_ERR_OUT_OF_MEMORY; break; }
        t->name = st->names[st->n_tensors];
        t->data = data + (uint64_t)b;
        t->nbytes = (size_t)need;
        t->file = f->map.path;
        ranges[nr].begin = (uint64_t)b;
        ranges[nr].end = (uint64_t)e;
        ranges[nr].name = t->name;
        nr++;
        st->n_tensors++;
    }
    if (!s && nr > 1) {
        qsort(ranges, (size_t)nr, sizeof *ranges, cmp_range);
        for (int64_t i = 1; i < nr; i++)
            if (ranges[i].begin < ranges[i - 1].end) {
                s = emt_fail(ENTMTP_ERR_FORMAT, "%s: tensors '%s' and '%s' overlap", path, ranges[i - 1].name, ranges[i].name);
                break;
            }
    }
    free(ranges);
    return s;
}

void emt_st_close(emt_st *st) {
    if (!st) return;
    for (int32_t i = 0; i < st->n_files; i++) {
        cJSON_Delete(st->files[i].header);
        emt_unmap_file(&st->files[i].map);
    }
    for (int64_t i = 0; i < st->n_tensors; i++) free(st->names[i]);
    free(st->names);
    free(st->files);
    free(st->tensors);
    free(st->sorted);
    free(st);
}

static entmtp_status index_names(emt_st *st, const char *path) {
    st->sorted = emt_malloc((size_t)st->n_tensors ? (size_t)st->n_tensors : 1, sizeof *st->sorted);
    if (!st->sorted) return ENTMTP_ERR_OUT_OF_MEMORY;
    for (int64_t i = 0; i < st->n_tensors; i++) st->sorted[i] = i;
    /* bottom-up merge sort by name (qsort has no context argument in C11) */
    int64_t n = st->n_tensors;
    int64_t *tmp = emt_malloc((size_t)n ? (size_t)n : 1, sizeof *tmp);
    if (!tmp) return ENTMTP_ERR_OUT_OF_MEMORY;
    for (int64_t w = 1; w < n; w *= 2) {
        for (int64_t lo = 0; lo < n; lo += 2 * w) {
            int64_t mid = lo + w < n ? lo + w : n, hi = lo + 2 * w < n ? lo + 2 * w : n;
            int64_t i = lo, j = mid, k = lo;
            while (i < mid && j < hi)
                tmp[k++] = strcmp(st->tensors[st->sorted[i]].name, st->tensors[st->sorted[j]].name) <= 0 ? st->sorted[i++] : st->sorted[j++];
            while (i < mid) tmp[k++] = st->sorted[i++];
            while (j < hi) tmp[k++] = st->sorted[j++];
        }
        memcpy(st->sorted, tmp, (size_t)n * sizeof *tmp);
    }
    free(tmp);
    for (int64_t i = 1; i < n; i++)
        if (!strcmp(st->tensors[st->sorted[i]].name, st->tensors[st->sorted[i - 1]].name))
            return emt_fail(ENTMTP_ERR_FORMAT, "%s: tensor '%s' appears twice", path, st->tensors[st->sorted[i]].name);
    return ENTMTP_OK;
}

static entmtp_status open_index(emt_st *st, const char *dir, const char *index_path) {
    char *text;
    entmtp_status s = emt_read_file(index_path, &text, NULL);
    if (s) return s;
    cJSON *root = cJSON_Parse(text);
    free(text);
    const cJSON *wm = root ? cJSON_GetObjectItemCaseSensitive(root, "weight_map") : NULL;
    if (!cJSON_IsObject(wm)) {
        cJSON_Delete(root);
        return emt_fail(ENTMTP_ERR_FORMAT, "%s: no \"weight_map\" object", index_path);
    }
    /* distinct shard names, in first-seen order */
    const cJSON *it;
    int32_t n = 0;
    cJSON_ArrayForEach(it, wm) n++;
    const char **shards = emt_calloc((size_t)n ? (size_t)n : 1, sizeof *shards);
    if (!shards) { cJSON_Delete(root); return ENTMTP_ERR_OUT_OF_MEMORY; }
    int32_t ns = 0;
    s = ENTMTP_OK;
    cJSON_ArrayForEach(it, wm) {
        if (!cJSON_IsString(it)) { s = emt_fail(ENTMTP_ERR_FORMAT, "%s: weight_map['%s'] is not a file name", index_path, it->string); break; }
        const char *f = it->valuestring;
        if (!*f || strchr(f, '/') || strstr(f, "..")) { s = emt_fail(ENTMTP_ERR_FORMAT, "%s: shard name '%s' is not a plain file name", index_path, f); break; }
        int seen = 0;
        for (int32_t k = 0; k < ns && !seen; k++) seen = !strcmp(shards[k], f);
        if (!seen) shards[ns++] = f;
    }
    if (!s) {
        st->files = emt_calloc((size_t)ns ? (size_t)ns : 1, sizeof *st->files);
        if (!st->files) s = ENTMTP_ERR_OUT_OF_MEMORY;
    }
    for (int32_t k = 0; !s && k < ns; k++) {
        char path[4096];
        snprintf(path, sizeof path, "%s/%s", dir, shards[k]);
        st->n_files = k + 1;
        s = load_file(st, k, path);
    }
    if (!s) s = index_names(st, index_path);
    if (!s) {
        cJSON_ArrayForEach(it, wm) {
            if (!emt_st_find(st, it->string)) {
                s = emt_fail(ENTMTP_ERR_FORMAT, "%s: tensor '%s' is listed for shard '%s' but missing there", index_path, it->string, it->valuestring);
                break;
            }
        }
    }
    free(shards);
    cJSON_Delete(root);
    return s;
}

entmtp_status emt_st_open(const char *path, emt_st **out) {
    *out = NULL;
    emt_st *st = emt_calloc(1, sizeof *st);
    if (!st) return ENTMTP_ERR_OUT_OF_MEMORY;
    entmtp_status s;
    struct stat sb;
    if (stat(path, &sb) == 0 && S_ISDIR(sb.st_mode)) {
        char p[4096];
        snprintf(p, sizeof p, "%s/model.safetensors.index.json", path);
        if (access(p, R_OK) == 0) {
            s = open_index(st, path, p);
        } else {
            snprintf(p, sizeof p, "%s/model.safetensors", path);
            st->files = emt_calloc(1, sizeof *st->files);
            st->n_files = 1;
            s = st->files ? load_file(st, 0, p) : ENTMTP_ERR_OUT_OF_MEMORY;
            if (!s) s = index_names(st, p);
        }
    } else {
        st->files = emt_calloc(1, sizeof *st->files);
        st->n_files = 1;
        s = st->files ? load_file(st, 0, path) : ENTMTP_ERR_OUT_OF_MEMORY;
        if (!s) s = index_names(st, path);
    }
    if (s) { emt_st_close(st); return s; }
    *out = st;
    return ENTMTP_OK;
}

int64_t emt_st_n_tensors(const emt_st *st) { return st->n_tensors; }
const emt_tensor *emt_st_tensor(const emt_st *st, int64_t i) {
    return i >= 0 && i < st->n_tensors ? &st->tensors[i] : NULL;
}

const emt_tensor *emt_st_find(const emt_st *st, const char *name) {
    int64_t lo = 0, hi = st->n_tensors - 1;
    if (!st->sorted) return NULL;
    while (lo <= hi) {
        int64_t mid = lo + (hi - lo) / 2;
        int c = strcmp(st->tensors[st->sorted[mid]].name, name);
        if (!c) return &st->tensors[st->sorted[mid]];
        if (c < 0) lo = mid + 1; else hi = mid - 1;
    }
    return NULL;
}

const char *emt_st_metadata(const emt_st *st, const char *key) {
    if (st->n_files < 1 || !st->files[0].meta) return NULL;
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(st->files[0].meta, key);
    return cJSON_IsString(v) ? v->valuestring : NULL;
}
