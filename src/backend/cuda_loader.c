/* Finds and loads the CUDA backend plugin (libentmtp-cuda.so) at run time, so
 * that libentmtp never links the CUDA runtime and runs where there is none.
 * Search order: $ENTMTP_CUDA_PLUGIN, the directory of libentmtp itself, then
 * the dynamic loader's path. */
#include "backend/backend.h"
#include "backend/cuda_plugin.h"

#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>

static void *open_plugin(char *tried, size_t cap) {
    const char *env = getenv("ENTMTP_CUDA_PLUGIN");
    if (env && env[0]) {
        snprintf(tried, cap, "%s", env);
        return dlopen(env, RTLD_NOW | RTLD_LOCAL);
    }
    Dl_info info;
    if (dladdr((void *)&open_plugin, &info) && info.dli_fname) {
        char path[4096];
        snprintf(path, sizeof path, "%s", info.dli_fname);
        char *slash = strrchr(path, '/');
        if (slash) {
            snprintf(slash + 1, sizeof path - (size_t)(slash + 1 - path), "%s", ENTMTP_CUDA_PLUGIN_NAME);
            void *h = dlopen(path, RTLD_NOW | RTLD_LOCAL);
            if (h) return h;
        }
    }
    snprintf(tried, cap, "%s", ENTMTP_CUDA_PLUGIN_NAME);
    return dlopen(ENTMTP_CUDA_PLUGIN_NAME, RTLD_NOW | RTLD_LOCAL);
}

entmtp_status emt_backend_cuda_create(int32_t device, emt_backend **out) {
    char tried[4096] = "";
    void *h = open_plugin(tried, sizeof tried);
    if (!h) {
        const char *why = dlerror();
        return emt_fail(ENTMTP_ERR_BACKEND, "CUDA backend unavailable: cannot load plugin '%s' (%s)",
                        tried, why ? why : "not found");
    }
    emt_cuda_plugin_entry_fn entry;
    *(void **)&entry = dlsym(h, EMT_CUDA_PLUGIN_ENTRY);
    if (!entry) {
        dlclose(h);
        return emt_fail(ENTMTP_ERR_BACKEND, "CUDA backend unavailable: '%s' lacks %s", tried,
                        EMT_CUDA_PLUGIN_ENTRY);
    }
    char err[512] = "";
    emt_backend *be = NULL;
    int rc = entry(EMT_CUDA_PLUGIN_ABI, device, &be, err, sizeof err);
    if (rc != 0 || !be) {
        dlclose(h);
        return emt_fail(ENTMTP_ERR_BACKEND, "CUDA backend unavailable: %s", err[0] ? err : "plugin failed");
    }
    /* the plugin stays loaded for the life of the process: its code backs
     * the backend's function table */
    *out = be;
    return ENTMTP_OK;
}

entmtp_status emt_backend_sync(const emt_backend *be, emt_exec *ex) {
    entmtp_status st = be->ops->sync(ex);
    if (st != ENTMTP_OK)
        return emt_fail(st, "%s backend: %s", be->ops->name, be->ops->error_text ? be->ops->error_text(ex) : "failed");
    return ENTMTP_OK;
}
