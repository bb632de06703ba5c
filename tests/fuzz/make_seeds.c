/* Writes the seed corpora for the fuzz targets: small valid files of every
 * kind (tiny GGUF in several types, safetensors, heads, tree and bank JSON). */
#include "tiny_model.h"

#include <stdio.h>
#include <stdlib.h>
#include <sys/stat.h>

static void put(const char *dir, const char *name, const char *text) {
    char path[512];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    FILE *f = fopen(path, "wb");
    if (!f) { perror(path); exit(1); }
    fputs(text, f);
    fclose(f);
}

int main(int argc, char **argv) {
    if (argc != 2) { fprintf(stderr, "usage: make_fuzz_seeds OUT_DIR\n"); return 2; }
    const char *root = argv[1];
    const char *dirs[] = { "gguf", "safetensors", "heads", "tree_json", "bank_json" };
    char d[512], p[512];
    for (int i = 0; i < 5; i++) {
        snprintf(d, sizeof d, "%s/%s", root, dirs[i]);
        mkdir(root, 0755);
        mkdir(d, 0755);
    }
    emt_tiny_config c = emt_tiny_default_config();
    c.vocab = 16;
    c.hidden = 16;
    c.ffn = 16;
    c.n_layers = 1;
    c.n_heads = 2;
    c.n_kv_heads = 1;
    emt_dtype types[] = { EMT_F32, EMT_F16, EMT_Q8_0, EMT_Q4_0, EMT_Q4_1 };
    for (int i = 0; i < 5; i++) {
        snprintf(p, sizeof p, "%s/gguf/tiny_%d.gguf", root, i);
        if (emt_tiny_write_gguf(p, &c, types[i])) { fprintf(stderr, "%s\n", entmtp_last_error()); return 1; }
    }
    c.vocab = 300;
    c.with_tokenizer = 1;
    snprintf(p, sizeof p, "%s/gguf/tiny_tok.gguf", root);
    if (emt_tiny_write_gguf(p, &c, EMT_F16)) return 1;
    c.vocab = 16;
    c.with_tokenizer = 0;
    snprintf(p, sizeof p, "%s/safetensors/hf", root);
    if (emt_tiny_write_hf(p, &c, EMT_BF16, 1)) return 1;
    char from[600], to[600];
    snprintf(from, sizeof from, "%s/model.safetensors", p);
    snprintf(to, sizeof to, "%s/safetensors/model.safetensors", root);
    rename(from, to);
    emt_tiny_config def = emt_tiny_default_config();
    snprintf(p, sizeof p, "%s/heads/medusa.safetensors", root);
    if (emt_tiny_write_medusa_heads(p, def.hidden, def.vocab, 2, 1, 0, 1)) return 1;
    snprintf(p, sizeof p, "%s/heads/medusa_lm.safetensors", root);
    if (emt_tiny_write_medusa_heads(p, def.hidden, def.vocab, 1, 1, 1, 1)) return 1;
    snprintf(p, sizeof p, "%s/heads/hydra.safetensors", root);
    if (emt_tiny_write_hydra_heads(p, def.hidden, def.vocab, 2, 1, 0, 1)) return 1;
    /* draft vocabularies, shared and own lm_head */
    const int32_t draft[] = { 3, 1, 4, 15, 9, 2, 6, 5, 35, 8, 7, 0, 11 };
    snprintf(p, sizeof p, "%s/heads/medusa_draft.safetensors", root);
    if (emt_tiny_write_heads_draft(p, ENTMTP_HEADS_MEDUSA, def.hidden, def.vocab, 2, 1, 0, 1, draft, 13)) return 1;
    snprintf(p, sizeof p, "%s/heads/hydra_draft_lm.safetensors", root);
    if (emt_tiny_write_heads_draft(p, ENTMTP_HEADS_HYDRA, def.hidden, def.vocab, 2, 1, 1, 1, draft, 13)) return 1;
    snprintf(d, sizeof d, "%s/tree_json", root);
    put(d, "small.json", "[[0],[0,0],[1],[0,1],[0,0,0]]");
    put(d, "empty.json", "[]");
    put(d, "object.json", "{\"choices\":[[0],[1],[2],[0,0]]}");
    put(d, "bad.json", "[[0],[1,2]]");
    snprintf(d, sizeof d, "%s/bank_json", root);
    put(d, "bank.json",
        "{\"trees\":[{\"name\":\"small\",\"choices\":[[0],[0,0]],\"nodes\":3,\"depth\":2,"
        "\"mean_accept_length\":1.5,\"tokens_per_second\":20},"
        "{\"name\":\"wide\",\"choices\":[[0],[1],[2],[0,0],[1,0]]}],"
        "\"policy\":{\"default\":\"hysteresis\",\"hysteresis\":{\"tau_on\":0.02,\"tau_off\":0.01,"
        "\"conservative_tree\":\"small\",\"aggressive_tree\":\"wide\"},"
        "\"ladder\":{\"thresholds\":[0.1],\"trees\":[\"small\",\"wide\"]},"
        "\"static\":{\"tree\":\"wide\"},\"ucb\":{\"exploration\":0.5,\"length_penalty\":0.1}}}");
    printf("seed corpora written under %s\n", root);
    return 0;
}
