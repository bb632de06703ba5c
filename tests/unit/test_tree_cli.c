/* `entmtp tree`: the JSON layout other tools rely on, order independence,
 * and a non-zero exit with the library message for a bad tree. */
#include "check.h"
#include "cli_run.h"

#include <cjson/cJSON.h>
#include <stdio.h>

static char *run(const char *args, int *rc) {
    char full[2048];
    snprintf(full, sizeof full, "tree %s", args);
    return emt_cli_run(full, rc);
}

static void write_file(const char *path, const char *text) {
    FILE *f = fopen(path, "w");
    fputs(text, f);
    fclose(f);
}

int main(void) {
    if (!getenv("ENTMTP_CLI")) TEST_SKIP("ENTMTP_CLI not set");
    char a[512], b[512], bad[512], args[1200];
    snprintf(a, sizeof a, "%s/cli_a.json", ENTMTP_TEST_TMP_DIR);
    snprintf(b, sizeof b, "%s/cli_b.json", ENTMTP_TEST_TMP_DIR);
    snprintf(bad, sizeof bad, "%s/cli_bad.json", ENTMTP_TEST_TMP_DIR);
    write_file(a, "[[0],[0,0],[0,1],[0,2],[1],[1,0],[1,1],[1,2]]");
    write_file(b, "{\"choices\":[[1,2],[1],[0,1],[1,0],[0],[0,2],[1,1],[0,0]]}");
    write_file(bad, "[[0],[3,1]]");
    int rc;
    snprintf(args, sizeof args, "--choices %s --json", a);
    char *oa = run(args, &rc);
    CHECK_EQ_INT(rc, 0);
    snprintf(args, sizeof args, "--choices %s --json", b);
    char *ob = run(args, &rc);
    CHECK_EQ_INT(rc, 0);
    CHECK(oa && ob && !strcmp(oa, ob));
    cJSON *j = cJSON_Parse(oa);
    CHECK(j != NULL);
    if (j) {
        /* key order as documented */
        const char *order[] = { "nodes", "depth", "attn_mask", "tree_indices", "position_ids", "retrieve_indices" };
        int k = 0;
        const cJSON *it;
        cJSON_ArrayForEach(it, j) CHECK(k < 6 && !strcmp(it->string, order[k++]));
        CHECK_EQ_INT(k, 6);
        CHECK_EQ_INT(cJSON_GetObjectItem(j, "nodes")->valueint, 9);
        CHECK_EQ_INT(cJSON_GetObjectItem(j, "depth")->valueint, 2);
        const int want_ti[] = { 0, 1, 2, 11, 12, 13, 11, 12, 13 };
        const cJSON *ti = cJSON_GetObjectItem(j, "tree_indices");
        for (int i = 0; i < 9; i++) CHECK_EQ_INT(cJSON_GetArrayItem(ti, i)->valueint, want_ti[i]);
        const cJSON *ret = cJSON_GetObjectItem(j, "retrieve_indices");
        CHECK_EQ_INT(cJSON_GetArraySize(ret), 6);
        CHECK_EQ_INT(cJSON_GetArrayItem(cJSON_GetArrayItem(ret, 0), 2)->valueint, 8);
        const cJSON *mask = cJSON_GetObjectItem(j, "attn_mask");
        CHECK_EQ_INT(cJSON_GetArrayItem(cJSON_GetArrayItem(mask, 7), 2)->valueint, 1);
        CHECK_EQ_INT(cJSON_GetArrayItem(cJSON_GetArrayItem(mask, 7), 1)->valueint, 0);
        cJSON_Delete(j);
    }
    free(oa);
    free(ob);
    char *o = run("--builtin mc_sim_7b_63 --json --topk 10", &rc);
    CHECK_EQ_INT(rc, 0);
    j = cJSON_Parse(o);
    CHECK(j && cJSON_GetObjectItem(j, "nodes")->valueint == 64);
    CHECK(j && cJSON_GetArraySize(cJSON_GetObjectItem(j, "retrieve_indices")) == 42);
    cJSON_Delete(j);
    free(o);
    o = run("--builtin chain_3 --json --topk 4", &rc);
    j = cJSON_Parse(o);
    CHECK(j && cJSON_GetArrayItem(cJSON_GetObjectItem(j, "tree_indices"), 3)->valueint == 9);
    cJSON_Delete(j);
    free(o);
    snprintf(args, sizeof args, "--choices %s --json", bad);
    o = run(args, &rc);
    CHECK(rc != 0);
    CHECK(o && strstr(o, "path [3,1]: prefix [3] missing"));
    free(o);
    o = run("--builtin nope", &rc);
    CHECK(rc != 0 && strstr(o, "nope"));
    free(o);
    o = run("--choices /nonexistent.json", &rc);
    CHECK(rc != 0);
    free(o);
    return emt_test_finish("test_tree_cli");
}
