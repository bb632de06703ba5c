#include "cli_run.h"

#include "check.h"
#include "tiny_model.h"

#include <stdio.h>
#include <stdlib.h>
#include <sys/wait.h>

/* `redirect`: where the CLI's stderr goes */
static char *run_cli(const char *args, const char *redirect, int *rc) {
    char cmd[4096];
    const char *cli = getenv("ENTMTP_CLI");
    snprintf(cmd, sizeof cmd, "%s %s %s", cli ? cli : "entmtp", args, redirect);
    FILE *p = popen(cmd, "r");
    if (!p) return NULL;
    size_t cap = 1 << 16, n = 0, got;
    char *out = malloc(cap + 1);
    while (out && (got = fread(out + n, 1, cap - n, p)) > 0) {
        n += got;
        if (n == cap) {
            char *bigger = realloc(out, 2 * cap + 1);
            if (!bigger) break;
            out = bigger;
            cap *= 2;
        }
    }
    if (out) out[n] = '\0';
    int status = pclose(p);
    *rc = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
    return out;
}

char *emt_cli_run(const char *args, int *rc) { return run_cli(args, "2>&1", rc); }
char *emt_cli_run_stdout(const char *args, int *rc) { return run_cli(args, "2>/dev/null", rc); }

void emt_cli_tiny_files(const char *name, char *model, size_t model_cap, char *heads, size_t heads_cap) {
    snprintf(model, model_cap, "%s/%s_tiny_tok.gguf", ENTMTP_TEST_TMP_DIR, name);
    snprintf(heads, heads_cap, "%s/%s_tiny_heads.safetensors", ENTMTP_TEST_TMP_DIR, name);
    emt_tiny_config c = emt_tiny_default_config();
    c.vocab = 300;
    c.with_tokenizer = 1;
    CHECK_OK(emt_tiny_write_gguf(model, &c, EMT_Q8_0));
    CHECK_OK(emt_tiny_write_medusa_heads(heads, c.hidden, c.vocab, 4, 1, 0, 2));
}
