/* entmtp_drafter_find: the shipped heads (and bank) for a model, matched by
 * the identity recorded in the heads' X.train.json ("model": architecture,
 * shapes, vocabulary hash), so a renamed copy of a model still finds its
 * heads and a different model with the same file name does not. */
#include "model/model.h"

#include <cjson/cJSON.h>
#include <dirent.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define SUFFIX ".safetensors"

typedef struct candidate {
    char *heads;    /* dir/X.safetensors */
    char *stem;     /* dir/X */
    int hydra;      /* kind "hydra" in X.train.json: searched first */
    int dir_index;  /* position of its directory in the search path */
} candidate;

/* Appends to a bounded text (the reason); a full buffer ends in "...". */
static void appendf(char *buf, size_t cap, const char *fmt, ...) {
    size_t len = strlen(buf);
    if (len + 4 >= cap) return;
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(buf + len, cap - len, fmt, ap);
    va_end(ap);
    if (n >= 0 && (size_t)n >= cap - len) memcpy(buf + cap - 4, "...", 4);
}

static cJSON *read_json(const char *path) {
    char *text = NULL;
    if (access(path, R_OK) != 0 || emt_read_file(path, &text, NULL) != ENTMTP_OK) {
        entmtp_clear_error();
        return NULL;
    }
    cJSON *j = cJSON_Parse(text);
    free(text);
    return j;
}

static int cmp_candidates(const void *a, const void *b) {
    const candidate *x = a, *y = b;
    if (x->dir_index != y->dir_index) return x->dir_index - y->dir_index;
    if (x->hydra != y->hydra) return y->hydra - x->hydra;
    return strcmp(x->heads, y->heads);
}

/* The heads files of one directory, appended to *list. */
static entmtp_status list_dir(const char *dir, int dir_index, candidate **list, int *n, int *cap) {
    DIR *d = opendir(dir);
    if (!d) return ENTMTP_OK; /* a directory that is not there holds no drafter */
    entmtp_status st = ENTMTP_OK;
    for (struct dirent *e; (e = readdir(d)) != NULL;) {
        size_t len = strlen(e->d_name), sl = strlen(SUFFIX);
        if (len <= sl || strcmp(e->d_name + len - sl, SUFFIX) != 0) continue;
        if (*n == *cap) {
            int ncap = *cap ? 2 * *cap : 16;
            candidate *grown = realloc(*list, (size_t)ncap * sizeof **list);
            if (!grown) { st = ENTMTP_ERR_OUT_OF_MEMORY; break; }
            *list = grown;
            *cap = ncap;
        }
        candidate *c = &(*list)[*n];
        size_t path_len = strlen(dir) + 1 + len + 1;
        if (path_len + 16 > sizeof ((entmtp_drafter *)0)->bank_path) continue; /* a path too long to report */
        c->heads = malloc(path_len);
        c->stem = malloc(path_len);
        if (!c->heads || !c->stem) {
            free(c->heads);
            free(c->stem);
            st = ENTMTP_ERR_OUT_OF_MEMORY;
            break;
        }
        snprintf(c->heads, path_len, "%s/%s", dir, e->d_name);
        snprintf(c->stem, path_len, "%s/%.*s", dir, (int)(len - sl), e->d_name);
        c->hydra = 0;
        c->dir_index = dir_index;
        (*n)++;
    }
    closedir(d);
    return st;
}

/* NULL when the recorded identity is the model's, else what differs
 * (written into why). */
static const char *identity_mismatch(const entmtp_model *m, const cJSON *id, char *why, size_t cap) {
    const emt_model_config *c = &m->cfg;
    const cJSON *arch = cJSON_GetObjectItemCaseSensitive(id, "architecture");
    if (!cJSON_IsString(arch)) return snprintf(why, cap, "model.architecture missing"), why;
    if (strcmp(arch->valuestring, c->arch) != 0)
        return snprintf(why, cap, "architecture '%s' != the model's '%s'", arch->valuestring, c->arch), why;
    const char *fields[] = { "hidden_size", "n_layers", "vocab_size" };
    const int32_t values[] = { c->hidden, c->n_layers, c->vocab };
    for (int i = 0; i < 3; i++) {
        const cJSON *v = cJSON_GetObjectItemCaseSensitive(id, fields[i]);
        if (!cJSON_IsNumber(v)) return snprintf(why, cap, "model.%s missing", fields[i]), why;
        if (v->valuedouble != values[i])
            return snprintf(why, cap, "%s %g != the model's %d", fields[i], v->valuedouble, values[i]), why;
    }
    const cJSON *h = cJSON_GetObjectItemCaseSensitive(id, "vocab_hash");
    char mine[40];
    snprintf(mine, sizeof mine, "fnv1a64:%016" PRIx64, m->vocab_hash);
    if (!cJSON_IsString(h)) return snprintf(why, cap, "model.vocab_hash missing"), why;
    if (strcmp(h->valuestring, mine) != 0)
        return snprintf(why, cap, "vocabulary hash %s != the model's %s (another tokenizer)", h->valuestring, mine), why;
    return NULL;
}

ENTMTP_API entmtp_status entmtp_drafter_find(const entmtp_model *m, const char *search_path, entmtp_drafter *out) {
    if (!m || !search_path || !out)
        return emt_fail(ENTMTP_ERR_INVALID_ARGUMENT, "entmtp_drafter_find: model, search_path and out must not be NULL");
    if (out->struct_size < sizeof(size_t))
        return emt_fail(ENTMTP_ERR_INVALID_ARGUMENT, "entmtp_drafter_find: out->struct_size = %zu; set it to sizeof(entmtp_drafter)",
                        out->struct_size);
    entmtp_drafter *d = emt_calloc(1, sizeof *d);
    char *dirs = emt_strdup(search_path);
    candidate *list = NULL;
    int n = 0, cap = 0, found = -1;
    entmtp_status st = d && dirs ? ENTMTP_OK : ENTMTP_ERR_OUT_OF_MEMORY;
    int dir_index = 0;
    for (char *save = NULL, *dir = dirs ? strtok_r(dirs, ":", &save) : NULL; !st && dir; dir = strtok_r(NULL, ":", &save))
        st = list_dir(dir, dir_index++, &list, &n, &cap);
    if (st) goto done;
    char path[4200];
    for (int i = 0; i < n; i++) { /* the kind decides the order: Hydra first */
        snprintf(path, sizeof path, "%s.train.json", list[i].stem);
        cJSON *j = read_json(path);
        const cJSON *kind = j ? cJSON_GetObjectItemCaseSensitive(j, "kind") : NULL;
        list[i].hydra = cJSON_IsString(kind) && !strcmp(kind->valuestring, "hydra");
        cJSON_Delete(j);
    }
    if (n > 1) qsort(list, (size_t)n, sizeof *list, cmp_candidates); /* list is NULL when n == 0 */
    char model_id[200];
    snprintf(model_id, sizeof model_id, "%s, hidden %d, %d layers, vocab %d, vocab hash fnv1a64:%016" PRIx64, m->cfg.arch,
             m->cfg.hidden, m->cfg.n_layers, m->cfg.vocab, m->vocab_hash);
    if (!m->tokenizer) {
        snprintf(d->reason, sizeof d->reason, "the model has no tokenizer, so no vocabulary to match heads by");
        goto done;
    }
    for (int i = 0; i < n && found < 0; i++) {
        snprintf(path, sizeof path, "%s.train.json", list[i].stem);
        cJSON *j = read_json(path);
        const cJSON *id = j ? cJSON_GetObjectItemCaseSensitive(j, "model") : NULL;
        char why[300];
        const char *mismatch = !j ? "no readable .train.json beside it"
                             : !cJSON_IsObject(id) ? "its .train.json records no \"model\" identity"
                                                   : identity_mismatch(m, id, why, sizeof why);
        if (!mismatch) {
            found = i;
            snprintf(d->heads_path, sizeof d->heads_path, "%s", list[i].heads);
            snprintf(path, sizeof path, "%s.bank.json", list[i].stem);
            if (access(path, R_OK) == 0) memcpy(d->bank_path, path, strlen(path) + 1);
            snprintf(d->reason, sizeof d->reason, "matched by identity (%s) recorded in %s.train.json", model_id,
                     list[i].stem);
        } else {
            appendf(d->reason, sizeof d->reason, "%s%s: %s", d->reason[0] ? "; " : "", list[i].heads, mismatch);
        }
        cJSON_Delete(j);
    }
    if (found < 0) {
        char tried[sizeof d->reason];
        snprintf(tried, sizeof tried, "%s", d->reason);
        d->reason[0] = '\0';
        appendf(d->reason, sizeof d->reason, "no drafter in %s matches the model (%s)%s%s", search_path, model_id,
                n ? ": " : ": no heads (*.safetensors) there", tried);
    }
done:
    if (!st) {
        emt_copy_out(out, d, sizeof *d, "entmtp_drafter");
        if (found < 0) st = emt_fail(ENTMTP_ERR_NOT_FOUND, "entmtp_drafter_find: %s", d->reason);
    }
    for (int i = 0; i < n; i++) {
        free(list[i].heads);
        free(list[i].stem);
    }
    free(list);
    free(dirs);
    free(d);
    return st;
}
