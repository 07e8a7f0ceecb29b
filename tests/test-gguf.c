/*
 * test-gguf.c - the GGUF loader: well-formed files of every value type, and
 * real files from ../shared/fixtures.
 */
#include "test-common.h"

static void test_fixture_vocab(void **state)
{
    (void)state;
    infer_gguf *g;
    const char *p = test_path(test_shared(), "fixtures/tokenizer/ggml-vocab-llama-spm.gguf");
    assert_int_equal(infer_gguf_open(&g, p, 0), INFER_OK);
    assert_string_equal(infer_gguf_get_str(g, "tokenizer.ggml.model", ""), "llama");
    int64_t k = infer_gguf_find_key(g, "tokenizer.ggml.tokens");
    assert_true(k >= 0);
    assert_int_equal(infer_gguf_kv_arr_n(g, k), 32000);
    infer_residency r;
    assert_int_equal(infer_gguf_residency(g, &r), INFER_OK);
    assert_int_equal(r.bytes_total, infer_gguf_file_size(g));
    infer_gguf_close(g);
}

static void test_missing_file(void **state)
{
    (void)state;
    infer_gguf *g = (infer_gguf *)1;
    assert_int_equal(infer_gguf_open(&g, "/nonexistent/x.gguf", 0), INFER_ERR_IO);
    assert_null(g);
    assert_non_null(strstr(infer_last_error(), "/nonexistent/x.gguf"));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_fixture_vocab),
        cmocka_unit_test(test_missing_file),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
