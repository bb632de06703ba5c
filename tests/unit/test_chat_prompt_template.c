/* entmtp_chat_prompt_template: NULL is the model's template; a family name or
 * another template's text renders that family's format over the same
 * tokenizer; an empty or unknown template is an error naming it. */
#include "check.h"
#include "tiny_model.h"

#include <stdio.h>
#include <string.h>

/* The rendered text (static buffer), or NULL with the status in *st. */
static const char *render(entmtp_model *m, const char *tmpl, const char *const *roles, const char *const *contents,
                          int32_t n, entmtp_status *st) {
    static char buf[4096];
    size_t len = 0;
    *st = entmtp_chat_prompt_template(m, tmpl, roles, contents, n, buf, sizeof buf, &len);
    return *st ? NULL : buf;
}

int main(void) {
    char path[512];
    snprintf(path, sizeof path, "%s/chat_template_tiny.gguf", ENTMTP_TEST_TMP_DIR);
    emt_tiny_config c = emt_tiny_default_config();
    c.vocab = 300;
    c.with_tokenizer = 1; /* its template is ChatML without a default system prompt */
    CHECK_OK(emt_tiny_write_gguf(path, &c, EMT_F32));
    entmtp_model *m = NULL;
    CHECK_OK(entmtp_model_load(path, NULL, &m));
    if (!m) return emt_test_finish("test_chat_prompt_template");
    const char *roles[] = { "system", "user", "assistant", "user" };
    const char *contents[] = { "Be brief.", "hi", "hello", "bye" };
    entmtp_status st;

    /* NULL: exactly entmtp_chat_prompt_messages */
    char own[4096];
    size_t own_len = 0;
    CHECK_OK(entmtp_chat_prompt_messages(m, roles, contents, 4, own, sizeof own, &own_len));
    const char *t = render(m, NULL, roles, contents, 4, &st);
    CHECK(t && !strcmp(t, own));
    t = render(m, "chatml", roles, contents, 4, &st);
    CHECK(t && !strcmp(t, own));
    CHECK(strstr(own, "<|im_start|>user\nbye<|im_end|>\n<|im_start|>assistant\n") != NULL);

    /* other families by name */
    t = render(m, "llama3", roles + 1, contents + 1, 3, &st);
    CHECK(t && strstr(t, "<|start_header_id|>user<|end_header_id|>\n\nhi<|eot_id|>") &&
          strstr(t, "<|start_header_id|>assistant<|end_header_id|>\n\n") && !strstr(t, "<|im_start|>"));
    t = render(m, "gemma", roles + 1, contents + 1, 3, &st);
    CHECK(t && strstr(t, "<start_of_turn>user\nhi<end_of_turn>\n") && strstr(t, "<start_of_turn>model\n"));
    /* a template's text, recognised by its markers (Mistral's [INST] without <<SYS>>) */
    t = render(m, "{{ bos_token }}{% for m in messages %}[INST] {{ m['content'] }} [/INST]{% endfor %}", roles + 1,
               contents + 1, 3, &st);
    CHECK(t && strstr(t, "[INST]") && strstr(t, "hi") && !strstr(t, "<<SYS>>"));
    /* Gemma alternates strictly: the same checks as the model's own template */
    const char *bad_roles[] = { "user", "user" }, *bad_contents[] = { "a", "b" };
    CHECK_ERR(entmtp_chat_prompt_template(m, "gemma", bad_roles, bad_contents, 2, NULL, 0, &own_len),
              ENTMTP_ERR_INVALID_ARGUMENT, "alternate");

    /* errors name what is wrong */
    size_t need = 0;
    CHECK_ERR(entmtp_chat_prompt_template(m, "", roles, contents, 4, NULL, 0, &need), ENTMTP_ERR_INVALID_ARGUMENT, "empty");
    CHECK_ERR(entmtp_chat_prompt_template(m, "{{ messages }}", roles, contents, 4, NULL, 0, &need), ENTMTP_ERR_UNSUPPORTED,
              "{{ messages }}");
    CHECK_ERR(entmtp_chat_prompt_template(m, "chatml", roles, contents, 4, NULL, 0, &need), ENTMTP_ERR_BUFFER_TOO_SMALL, "bytes needed");
    CHECK(need == own_len);
    CHECK_ERR(entmtp_chat_prompt_template(NULL, "chatml", roles, contents, 4, NULL, 0, &need), ENTMTP_ERR_INVALID_ARGUMENT, "");
    entmtp_model_free(m);
    return emt_test_finish("test_chat_prompt_template");
}
