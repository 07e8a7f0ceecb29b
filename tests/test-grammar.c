/*
 * test-grammar.c - the JSON-schema compiler (each keyword, refusals naming
 * the keyword, $ref and recursion, hostile schemas), the byte matcher
 * (accepts / rejects, UTF-8 split across tokens, shortest completion) and
 * token masks over a small vocabulary.
 */
#include "test-common.h"

#include "text/grammar.h"

static infer_grammar *compile_ok(const char *schema)
{
    infer_grammar *g = NULL;
    infer_status st = infer_grammar_from_json_schema(&g, schema, strlen(schema));
    if (st != INFER_OK)
        fail_msg("schema %s refused: %s", schema, infer_last_error());
    return g;
}

static void expect_refused(const char *schema, const char *needle)
{
    infer_grammar *g = NULL;
    infer_status st = infer_grammar_from_json_schema(&g, schema, strlen(schema));
    if (st == INFER_OK) {
        infer_grammar_free(g);
        fail_msg("schema %s was accepted", schema);
    }
    assert_null(g);
    if (!strstr(infer_last_error(), needle))
        fail_msg("error for %s is \"%s\", without \"%s\"", schema, infer_last_error(), needle);
}

/* yes[] must match, no[] must not (NULL-terminated lists). */
static void check(const char *schema, const char *const *yes, const char *const *no)
{
    infer_grammar *g = compile_ok(schema);
    for (; yes && *yes; yes++)
        if (!infer_grammar_match(g, *yes, strlen(*yes)))
            fail_msg("%s should match %s", *yes, schema);
    for (; no && *no; no++)
        if (infer_grammar_match(g, *no, strlen(*no)))
            fail_msg("%s should not match %s", *no, schema);
    infer_grammar_free(g);
}

#define L(...) ((const char *const[]){__VA_ARGS__, NULL})

static void test_object(void **state)
{
    (void)state;
    const char *s = "{\"type\":\"object\",\"properties\":{\"a\":{\"type\":\"integer\"},\"b\":{\"type\":\"string\"},"
                    "\"c\":{\"type\":\"boolean\"}},\"required\":[\"a\"]}";
    check(s,
          L("{\"a\":1}", "{\"a\":-12,\"b\":\"x\"}", "{ \"a\": 1, \"c\": true }", "{\"a\":0,\"b\":\"\",\"c\":false}",
            "{\n  \"a\": 5,\n  \"b\": \"y\"\n}"),
          L("{}", "{\"b\":\"x\"}", "{\"a\":1,\"d\":2}", "{\"a\":1,}", "{\"a\":01}", "{\"a\":1.5}", "{\"a\":1",
            "{\"a\":1} ", "[1]"));
    /* no properties: any object; additionalProperties schema: a map */
    check("{\"type\":\"object\"}", L("{}", "{\"x\":[1,{\"y\":null}]}"), L("[]", "1"));
    check("{\"type\":\"object\",\"additionalProperties\":{\"type\":\"number\"}}", L("{}", "{\"k\":1.5e3,\"j\":-2}"),
          L("{\"k\":\"s\"}"));
    check("{\"type\":\"object\",\"properties\":{},\"additionalProperties\":false}", L("{}"), L("{\"a\":1}"));
}

static void test_array(void **state)
{
    (void)state;
    check("{\"type\":\"array\",\"items\":{\"type\":\"integer\"},\"minItems\":1,\"maxItems\":3}",
          L("[1]", "[1,2]", "[1, 2, 3]"), L("[]", "[1,2,3,4]", "[1,]", "[\"a\"]"));
    check("{\"type\":\"array\"}", L("[]", "[1,\"a\",null,[true]]"), L("{}"));
    check("{\"type\":\"array\",\"maxItems\":0}", L("[]"), L("[1]"));
    check("{\"type\":\"array\",\"items\":{\"type\":\"null\"},\"minItems\":2}", L("[null,null]", "[null,null,null]"),
          L("[null]"));
}

static void test_scalars(void **state)
{
    (void)state;
    check("{\"type\":\"string\",\"minLength\":2,\"maxLength\":4}",
          L("\"ab\"", "\"abcd\"", "\"h\xc3\xa9\"", "\"\\n\\u00e9\"", "\"\xe2\x82\xac\xf0\x9f\x98\x80\""),
          L("\"a\"", "\"abcde\"", "\"h\xc3\"", "\"\\x\"", "\"a\nb\"", "\"\xc0\xaf\"", "\"\xed\xa0\x80\""));
    check("{\"type\":\"number\"}", L("0", "-1", "3.25", "1e5", "-0.5E-3"), L("01", "1.", ".5", "+1", "1e", "NaN"));
    check("{\"type\":\"integer\",\"minimum\":0}", L("0", "7", "120"), L("-1", "1.0"));
    check("{\"type\":\"integer\",\"minimum\":1,\"maximum\":5}", L("1", "3", "5"), L("0", "6", "-1"));
    check("{\"type\":\"boolean\"}", L("true", "false"), L("1", "null", "True"));
    check("{\"type\":\"null\"}", L("null"), L("nul", "\"null\""));
    check("{\"enum\":[\"red\",\"green\",3,null,{\"a\":1}]}", L("\"red\"", "\"green\"", "3", "null", "{\"a\":1}"),
          L("\"blue\"", "\"Red\"", "4"));
    check("{\"const\":\"on\"}", L("\"on\""), L("\"off\""));
    check("{\"type\":[\"string\",\"null\"]}", L("\"x\"", "null"), L("1"));
    check("{\"anyOf\":[{\"type\":\"integer\"},{\"type\":\"string\",\"maxLength\":1}]}", L("1", "\"a\""),
          L("\"ab\"", "true"));
    check("{\"oneOf\":[{\"const\":1},{\"const\":2}]}", L("1", "2"), L("3"));
    check("{\"allOf\":[{\"type\":\"boolean\"}],\"description\":\"d\"}", L("true"), L("1"));
    check("{\"type\":\"string\",\"format\":\"date\"}", L("\"2026-12-02\""), L("\"2026-13-02\"", "\"26-12-02\""));
    check("{\"type\":\"string\",\"format\":\"date-time\"}", L("\"2026-12-02T01:30:00Z\"", "\"2026-12-02T23:59:59.5+01:00\""),
          L("\"2026-12-02 01:30:00\""));
    check("{\"type\":\"string\",\"format\":\"uuid\"}", L("\"123e4567-e89b-12d3-a456-426614174000\""),
          L("\"123e4567\""));
    check("true", L("1", "{\"a\":[]}"), L("{"));
    check("{}", L("\"s\"", "[null]"), L("]"));
}

static void test_refs(void **state)
{
    (void)state;
    check("{\"$defs\":{\"p\":{\"type\":\"object\",\"properties\":{\"x\":{\"type\":\"integer\"}},\"required\":[\"x\"]}},"
          "\"type\":\"array\",\"items\":{\"$ref\":\"#/$defs/p\"}}",
          L("[{\"x\":1},{\"x\":2}]"), L("[{\"y\":1}]"));
    check("{\"definitions\":{\"n\":{\"type\":\"null\"}},\"$ref\":\"#/definitions/n\"}", L("null"), L("1"));
    /* recursion through a property: a tree */
    check("{\"type\":\"object\",\"properties\":{\"v\":{\"type\":\"integer\"},\"kids\":{\"type\":\"array\","
          "\"items\":{\"$ref\":\"#\"}}},\"required\":[\"v\"]}",
          L("{\"v\":1}", "{\"v\":1,\"kids\":[{\"v\":2,\"kids\":[{\"v\":3}]}]}"), L("{\"v\":1,\"kids\":[{}]}"));
}

static void test_refusals(void **state)
{
    (void)state;
    expect_refused("{\"type\":\"string\",\"pattern\":\"^a+$\"}", "'pattern'");
    expect_refused("{\"type\":\"array\",\"uniqueItems\":true}", "'uniqueItems'");
    expect_refused("{\"type\":\"object\",\"minProperties\":1}", "'minProperties'");
    expect_refused("{\"not\":{\"type\":\"string\"}}", "'not'");
    expect_refused("{\"properties\":{\"a\":{\"type\":\"string\",\"contentEncoding\":\"base64\"}}}", "'contentEncoding'");
    expect_refused("{\"properties\":{\"a\":{\"type\":\"string\",\"contentEncoding\":\"base64\"}}}", "/properties/a");
    expect_refused("{\"allOf\":[{\"type\":\"string\"},{\"maxLength\":3}]}", "allOf");
    expect_refused("{\"type\":\"number\",\"maximum\":3}", "'maximum'");
    expect_refused("{\"type\":\"string\",\"format\":\"email\"}", "email");
    expect_refused("{\"type\":\"array\",\"items\":[{\"type\":\"string\"}]}", "'items'");
    expect_refused("{\"type\":\"integer\",\"anyOf\":[{\"minimum\":1}]}", "'type' next to 'anyOf'");
    expect_refused("{\"$ref\":\"http://example.com/s.json\"}", "$ref");
    expect_refused("{\"$ref\":\"#/$defs/missing\"}", "#/$defs/missing");
    expect_refused("{\"type\":\"strnig\"}", "strnig");
    expect_refused("{\"type\":\"object\",\"required\":[\"a\"],\"properties\":{\"b\":{}}}", "\"a\"");
    expect_refused("{\"type\": ", "not valid JSON");
    expect_refused("{\"enum\":[]}", "enum");
    expect_refused("false", "cannot be satisfied");
    expect_refused("{\"type\":\"string\",\"minLength\":5,\"maxLength\":2}", "maxLength");
}

static void test_hostile(void **state)
{
    (void)state;
    /* cycles that never match a byte */
    expect_refused("{\"$ref\":\"#\"}", "cycle");
    expect_refused("{\"$defs\":{\"a\":{\"$ref\":\"#/$defs/b\"},\"b\":{\"anyOf\":[{\"$ref\":\"#/$defs/a\"}]}},"
                   "\"$ref\":\"#/$defs/a\"}",
                   "cycle");
    /* recursion with no way out: every branch needs another level */
    expect_refused("{\"type\":\"object\",\"properties\":{\"n\":{\"$ref\":\"#\"}},\"required\":[\"n\"]}",
                   "cannot be satisfied");
    /* deep nesting */
    char *deep = malloc(200 * 20 + 64);
    strcpy(deep, "");
    for (int i = 0; i < 200; i++)
        strcat(deep, "{\"items\":");
    strcat(deep, "{}");
    for (int i = 0; i < 200; i++)
        strcat(deep, "}");
    expect_refused(deep, "deeper than");
    free(deep);
    /* huge enum, huge lengths */
    size_t cap = 20001 * 8 + 32;
    char *big = malloc(cap);
    strcpy(big, "{\"enum\":[");
    size_t n = strlen(big);
    for (int i = 0; i < 20001; i++)
        n += (size_t)snprintf(big + n, cap - n, "%s%d", i ? "," : "", i);
    snprintf(big + n, cap - n, "]}");
    expect_refused(big, "more than");
    free(big);
    /* the largest lengths accepted compile (10,000 chained rules) */
    check("{\"type\":\"array\",\"items\":{\"type\":\"string\",\"maxLength\":10000},\"maxItems\":10000}",
          L("[]", "[\"abc\",\"\"]"), L("[1]"));
    expect_refused("{\"type\":\"string\",\"maxLength\":1000000000}", "too large");
    expect_refused("{\"type\":\"array\",\"minItems\":99999999}", "too large");
    expect_refused("{\"type\":\"string\",\"maxLength\":-1}", "non-negative");
    expect_refused("{\"type\":\"integer\",\"minimum\":0,\"maximum\":1e12}", "1,000");
    expect_refused("[1,2]", "must be an object");

    /* ambiguity: 100 identical alternatives keep the matcher within its
     * stack limit and still match */
    size_t acap = 100 * 20 + 32;
    char *amb = malloc(acap);
    strcpy(amb, "{\"anyOf\":[");
    for (int i = 0; i < 100; i++)
        strcat(amb, i ? ",{\"type\":\"string\"}" : "{\"type\":\"string\"}");
    strcat(amb, "]}");
    check(amb, L("\"abc\"", "\"\""), L("\"abc", "1"));
    free(amb);

    /* recursion in the input: nesting past the matcher's depth limit is
     * refused, not a crash */
    infer_grammar *g = compile_ok("{\"type\":\"array\",\"items\":{\"$ref\":\"#\"}}");
    enum { DEEP = 3000 };
    char *nest = malloc(2 * DEEP + 1);
    for (int i = 0; i < DEEP; i++)
        nest[i] = '[', nest[2 * DEEP - 1 - i] = ']';
    nest[2 * DEEP] = '\0';
    assert_true(infer_grammar_match(g, nest + DEEP - 50, 100)); /* 50 levels */
    assert_false(infer_grammar_match(g, nest, 2 * DEEP));       /* 3000 levels */
    free(nest);
    infer_grammar_free(g);
}

static void test_json_object(void **state)
{
    (void)state;
    infer_grammar *g = NULL;
    assert_int_equal(infer_grammar_json_object(&g), INFER_OK);
    const char *yes[] = {"{}", "{\"a\":{\"b\":[1,2,{\"c\":\"\xc3\xa9\"}]},\"d\":null}", "{ \"x\" : true }"};
    const char *no[] = {"[]", "\"s\"", "{\"a\"}", "{\"a\":1,}", "{'a':1}", "{\"a\":1}}"};
    for (size_t i = 0; i < sizeof(yes) / sizeof(*yes); i++)
        assert_true(infer_grammar_match(g, yes[i], strlen(yes[i])));
    for (size_t i = 0; i < sizeof(no) / sizeof(*no); i++)
        assert_false(infer_grammar_match(g, no[i], strlen(no[i])));
    infer_grammar_free(g);
}

static struct grammar *raw(const char *schema)
{
    char err[256];
    struct grammar *g = grammar_from_json_schema_text(schema, strlen(schema), err, sizeof(err));
    if (!g)
        fail_msg("%s: %s", schema, err);
    return g;
}

static void test_matcher_and_completion(void **state)
{
    (void)state;
    struct grammar *g = raw("{\"type\":\"object\",\"properties\":{\"name\":{\"type\":\"string\",\"minLength\":2},"
                            "\"tags\":{\"type\":\"array\",\"items\":{\"enum\":[\"x\",\"yy\"]},\"minItems\":2}},"
                            "\"required\":[\"name\",\"tags\"]}");
    struct gmatcher m;
    assert_true(gmatcher_init(&m, g));
    assert_false(gmatcher_accept(&m, "[", 1));
    assert_true(gmatcher_accept(&m, "{\"na", 4));
    assert_false(gmatcher_check(&m, "x", 1));
    assert_true(gmatcher_accept(&m, "me\": \"\xc3", 7)); /* a character split across calls */
    assert_false(gmatcher_check(&m, "\"", 1));            /* the character is not finished */
    assert_true(gmatcher_accept(&m, "\xa9", 1));
    assert_false(gmatcher_complete(&m));
    /* cut here: the shortest completion closes the string (one more
     * character for minLength), gives two tags and closes the object */
    char buf[256];
    size_t n = gmatcher_shortest_completion(&m, buf, sizeof(buf));
    assert_true(n > 0 && n < sizeof(buf));
    assert_true(gmatcher_accept(&m, buf, n));
    assert_true(gmatcher_complete(&m));
    uint64_t next[4];
    gmatcher_next_bytes(&m, next);
    assert_true((next[0] | next[1] | next[2] | next[3]) == 0);
    gmatcher_free(&m);
    grammar_free(g);
}

static void test_token_masks(void **state)
{
    (void)state;
    /* a small vocabulary: ids 0..n-1; "\xc3" and "\xa9" are the halves of é */
    const char *texts[] = {"{", "}", "\"", "a", "\"a\"", ":", "1", "12", " ", "\xc3\xa9", "\xc3", "\xa9",
                           "{\"", "\":", "", "b\"", "<eos>"};
    enum { N = sizeof(texts) / sizeof(*texts) };
    uint32_t lens[N];
    bool eog[N] = {0};
    for (int i = 0; i < N; i++)
        lens[i] = (uint32_t)strlen(texts[i]);
    eog[N - 1] = true;
    struct gvocab *v = gvocab_new(texts, lens, eog, N);
    assert_non_null(v);
    struct grammar *g = raw("{\"type\":\"object\",\"properties\":{\"a\":{\"type\":\"integer\"}},\"required\":[\"a\"]}");
    struct gmatcher m;
    assert_true(gmatcher_init(&m, g));
    uint64_t mask[N / 64 + 1];
    /* start: "{" and "{\"" */
    assert_int_equal(gvocab_mask(v, &m, mask), 2);
    assert_true(mask[0] == ((1ull << 0) | (1ull << 12)));
    for (int i = 0; i < N; i++)
        assert_int_equal(gvocab_token_ok(v, &m, i), (mask[0] >> i & 1) != 0);
    assert_true(gvocab_accept(v, &m, 12)); /* {" */
    gvocab_mask(v, &m, mask);
    assert_true(mask[0] == (1ull << 3)); /* only "a" */
    assert_true(gvocab_accept(v, &m, 3));
    assert_true(gvocab_accept(v, &m, 13)); /* ": */
    gvocab_mask(v, &m, mask);
    assert_true(mask[0] == ((1ull << 6) | (1ull << 7) | (1ull << 8))); /* 1, 12, space */
    assert_true(gvocab_accept(v, &m, 7));
    gvocab_mask(v, &m, mask);
    /* more digits ("121", "1212"), } or space; not EOS yet */
    assert_true(mask[0] == ((1ull << 1) | (1ull << 6) | (1ull << 7) | (1ull << 8)));
    assert_false(gvocab_token_ok(v, &m, N - 1));
    assert_true(gvocab_accept(v, &m, 1));
    gvocab_mask(v, &m, mask);
    assert_true(mask[0] == (1ull << (N - 1))); /* only EOS */
    assert_int_equal(gvocab_eog(v), N - 1);
    gmatcher_free(&m);
    grammar_free(g);

    /* inside a string: the halves of a character, in order only */
    g = raw("{\"type\":\"string\"}");
    assert_true(gmatcher_init(&m, g));
    assert_true(gvocab_accept(v, &m, 2));
    gvocab_mask(v, &m, mask);
    assert_true(mask[0] >> 9 & 1);   /* é */
    assert_true(mask[0] >> 10 & 1);  /* its first byte */
    assert_false(mask[0] >> 11 & 1); /* a lone continuation byte */
    assert_false(mask[0] >> 14 & 1); /* an empty (control) token, never */
    assert_true(gvocab_accept(v, &m, 10));
    gvocab_mask(v, &m, mask);
    assert_true(mask[0] == (1ull << 11)); /* only the continuation */
    gmatcher_free(&m);
    grammar_free(g);
    gvocab_free(v);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_object),     cmocka_unit_test(test_array),
        cmocka_unit_test(test_scalars),    cmocka_unit_test(test_refs),
        cmocka_unit_test(test_refusals),   cmocka_unit_test(test_hostile),
        cmocka_unit_test(test_json_object), cmocka_unit_test(test_matcher_and_completion),
        cmocka_unit_test(test_token_masks),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
