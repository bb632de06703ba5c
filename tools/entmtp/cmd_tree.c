/* entmtp tree: compile a tree and print its verifier buffers in the layout of
 * the public Medusa reference (generate_medusa_buffers). */
#include "cli.h"

#include "common/common.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static void usage(FILE *f) {
    fprintf(f,
            "usage: entmtp tree (--choices FILE | --builtin NAME) [--topk K] [--json]\n"
            "       entmtp tree --list\n"
            "\n"
            "  --choices FILE  JSON list of paths of child ranks, [[0],[0,0],[1],...], or {\"choices\": [...]}\n"
            "  --builtin NAME  a built-in tree (see --list)\n"
            "  --topk K        candidates per head, the tree_indices stride (default 10)\n"
            "  --json          print {nodes, depth, attn_mask, tree_indices, position_ids, retrieve_indices}\n");
}

static void print_ints(const int32_t *v, int32_t n) {
    printf("[");
    for (int32_t i = 0; i < n; i++) printf(i ? ",%d" : "%d", v[i]);
    printf("]");
}

static void draw(const entmtp_tree_buffers *b, int32_t node, int32_t depth) {
    for (int32_t c = 1; c < b->n_nodes; c++) {
        if (b->parents[c] != node) continue;
        printf("%*s%s rank %d (node %d, candidate %d)\n", 2 * depth, "", "+-", b->node_ranks[c], c, b->tree_indices[c]);
        draw(b, c, depth + 1);
    }
}

int cmd_tree(int argc, char **argv) {
    const char *choices = NULL, *builtin = NULL;
    long topk = 10;
    int json = 0, list = 0;
    const cli_option opts[] = {
        { "--choices", CLI_STRING, &choices },
        { "--builtin", CLI_STRING, &builtin },
        { "--topk", CLI_LONG, &topk, 1, 64 },
        { "--json", CLI_FLAG, &json },
        { "--list", CLI_FLAG, &list },
    };
    int rc = cli_parse("tree", argc, argv, CLI_TABLE(opts), usage);
    if (rc) return rc == 1 ? 0 : rc;
    if (list) {
        for (int32_t k = 0; entmtp_builtin_tree_name(k); k++) printf("%s\n", entmtp_builtin_tree_name(k));
        return 0;
    }
    if (!!choices == !!builtin) { fprintf(stderr, "entmtp tree: give exactly one of --choices or --builtin\n"); return 2; }

    entmtp_bank_params bp = entmtp_bank_default_params();
    bp.topk = (int32_t)topk;
    bp.max_nodes = entmtp_limit(ENTMTP_LIMIT_MAX_TREE_NODES);
    entmtp_bank *bank = NULL;
    entmtp_status st = entmtp_bank_create(&bp, &bank);
    if (st) return cli_fail("bank", st);
    int32_t idx = 0;
    if (builtin) {
        st = entmtp_bank_add_builtin(bank, builtin, &idx);
    } else {
        char *text = NULL;
        if (!(st = emt_read_file(choices, &text, NULL)))
            st = entmtp_bank_add_tree_json(bank, choices, text, &idx);
        free(text);
    }
    if (st) {
        rc = cli_fail(builtin ? builtin : choices, st);
        entmtp_bank_free(bank);
        return rc;
    }
    entmtp_tree_buffers b = { sizeof b };
    entmtp_bank_tree_buffers(bank, idx, &b);
    int32_t w = b.depth + 1;
    if (json) {
        printf("{\"nodes\":%d,\"depth\":%d,\"attn_mask\":[", b.n_nodes, b.depth);
        for (int32_t i = 0; i < b.n_nodes; i++) {
            printf(i ? ",[" : "[");
            for (int32_t j = 0; j < b.n_nodes; j++) printf(j ? ",%d" : "%d", b.attn_mask[(size_t)i * b.n_nodes + j]);
            printf("]");
        }
        printf("],\"tree_indices\":");
        print_ints(b.tree_indices, b.n_nodes);
        printf(",\"position_ids\":");
        print_ints(b.position_ids, b.n_nodes);
        printf(",\"retrieve_indices\":[");
        for (int32_t r = 0; r < b.n_leaves; r++) {
            if (r) printf(",");
            print_ints(b.retrieve_indices + (size_t)r * w, w);
        }
        printf("]}\n");
    } else {
        entmtp_tree_info ti = { sizeof ti };
        entmtp_bank_tree_info(bank, idx, &ti);
        printf("tree %s: %d nodes (root included), depth %d, %d leaves, top-k stride %d\n", ti.name, ti.n_nodes,
               ti.depth, ti.n_leaves, b.topk);
        printf("root\n");
        draw(&b, 0, 1);
    }
    entmtp_bank_free(bank);
    return 0;
}
