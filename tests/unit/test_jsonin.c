/* JSON input checks: results, the member to blame and every message. */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "jsonin.h"

static json_t *obj(const char *text)
{
	json_t *j = json_loads(text, 0, NULL);
	assert_non_null(j);
	return j;
}

static void expect_fail(int rc, const struct jsonin_err *e, const char *field, const char *msg)
{
	assert_int_equal(rc, -EINVAL);
	assert_string_equal(e->field, field);
	assert_string_equal(e->msg, msg);
}

static void test_member(void **state)
{
	(void)state;
	struct jsonin_err e;
	json_t *o = obj("{\"a\": 1, \"n\": null}");
	json_t *v;
	assert_int_equal(jsonin_member(&e, o, NULL, "a", true, &v), 0);
	assert_int_equal(json_integer_value(v), 1);
	/* null is missing, like an absent member. */
	assert_int_equal(jsonin_member(&e, o, NULL, "n", false, &v), 1);
	assert_null(v);
	expect_fail(jsonin_member(&e, o, NULL, "n", true, &v), &e, "n", "n is required");
	expect_fail(jsonin_member(&e, o, "x[2]", "b", true, &v), &e, "x[2].b",
	            "x[2].b is required");
	/* "" is no prefix, as NULL. */
	expect_fail(jsonin_member(&e, o, "", "b", true, &v), &e, "b", "b is required");
	json_decref(o);
}

static void test_uint(void **state)
{
	(void)state;
	struct jsonin_err e;
	json_t *o = obj("{\"i\": 5, \"r\": 5.0, \"neg\": -1, \"s\": \"5\", \"big\": 70000}");
	uint64_t v = 42;
	assert_int_equal(jsonin_uint(&e, o, NULL, "i", true, 1, 10, &v), 0);
	assert_int_equal(v, 5);
	v = 42;
	assert_int_equal(jsonin_uint(&e, o, NULL, "absent", false, 1, 10, &v), 1);
	assert_int_equal(v, 42);
	/* A real is not an integer, even a whole one. */
	expect_fail(jsonin_uint(&e, o, NULL, "r", true, 1, 10, &v), &e, "r",
	            "r must be an integer from 1 to 10");
	expect_fail(jsonin_uint(&e, o, NULL, "s", true, 1, 10, &v), &e, "s",
	            "s must be an integer from 1 to 10");
	expect_fail(jsonin_uint(&e, o, NULL, "neg", true, 0, 10, &v), &e, "neg",
	            "neg must be from 0 to 10, got -1");
	expect_fail(jsonin_uint(&e, o, "p", "big", true, 1, 65536, &v), &e, "p.big",
	            "p.big must be from 1 to 65536, got 70000");
	expect_fail(jsonin_uint(&e, o, NULL, "i", true, 6, 10, &v), &e, "i",
	            "i must be from 6 to 10, got 5");
	assert_int_equal(v, 42);
	json_decref(o);
}

static void test_double(void **state)
{
	(void)state;
	struct jsonin_err e;
	json_t *o = obj("{\"i\": 2, \"r\": 2.5, \"s\": \"2\", \"low\": 0}");
	double d = 0;
	/* An integer is a number. */
	assert_int_equal(jsonin_double(&e, o, NULL, "i", true, 1e-6, 1e9, &d), 0);
	assert_true(d == 2.0);
	assert_int_equal(jsonin_double(&e, o, NULL, "r", true, 1e-6, 1e9, &d), 0);
	assert_true(d == 2.5);
	assert_int_equal(jsonin_double(&e, o, NULL, "absent", false, 0, 1, &d), 1);
	expect_fail(jsonin_double(&e, o, "params", "s", true, 1e-6, 1e9, &d), &e, "params.s",
	            "params.s must be a number from 1e-06 to 1e+09");
	expect_fail(jsonin_double(&e, o, "params", "low", true, 1e-6, 1e9, &d), &e, "params.low",
	            "params.low must be from 1e-06 to 1e+09, got 0");
	json_decref(o);
}

static void test_bool_string(void **state)
{
	(void)state;
	struct jsonin_err e;
	json_t *o = json_pack("{s:b, s:i, s:s, s:s, s:s#}", "t", 1, "one", 1, "str", "abc", "empty",
	                      "", "nul", "a\0b", (size_t)3);
	bool b = false;
	const char *s = NULL;
	assert_int_equal(jsonin_bool(&e, o, NULL, "t", true, &b), 0);
	assert_true(b);
	expect_fail(jsonin_bool(&e, o, NULL, "one", true, &b), &e, "one",
	            "one must be true or false");
	assert_int_equal(jsonin_string(&e, o, NULL, "str", true, 1, 3, &s), 0);
	assert_string_equal(s, "abc");
	expect_fail(jsonin_string(&e, o, NULL, "str", true, 1, 2, &s), &e, "str",
	            "str must be 1 to 2 characters (no NUL)");
	expect_fail(jsonin_string(&e, o, NULL, "empty", true, 1, 8, &s), &e, "empty",
	            "empty must be 1 to 8 characters (no NUL)");
	assert_int_equal(jsonin_string(&e, o, NULL, "empty", true, 0, 8, &s), 0);
	assert_string_equal(s, "");
	expect_fail(jsonin_string(&e, o, NULL, "nul", true, 0, 8, &s), &e, "nul",
	            "nul must be 0 to 8 characters (no NUL)");
	expect_fail(jsonin_string(&e, o, NULL, "one", true, 1, 8, &s), &e, "one",
	            "one must be a string");
	json_decref(o);
}

static void test_name_enum(void **state)
{
	(void)state;
	static const char *const choices[] = { "min-cost", "patent", NULL };
	struct jsonin_err e;
	char long_name[80];
	memset(long_name, 'x', 65);
	long_name[65] = '\0';
	json_t *o = json_pack("{s:s, s:s, s:s, s:i, s:s}", "ok", "srv-0.a_b", "space", "a b",
	                      "long", long_name, "num", 1, "policy", "patent");
	const char *s;
	int idx = -1;
	assert_int_equal(jsonin_name(&e, o, NULL, "ok", true, &s), 0);
	assert_string_equal(s, "srv-0.a_b");
	expect_fail(jsonin_name(&e, o, "servers[1]", "space", true, &s), &e, "servers[1].space",
	            "servers[1].space must be a name of 1 to 64 characters of [A-Za-z0-9._-]");
	expect_fail(jsonin_name(&e, o, NULL, "long", true, &s), &e, "long",
	            "long must be a name of 1 to 64 characters of [A-Za-z0-9._-]");
	expect_fail(jsonin_name(&e, o, NULL, "num", true, &s), &e, "num",
	            "num must be a name of 1 to 64 characters of [A-Za-z0-9._-]");
	assert_int_equal(jsonin_enum(&e, o, NULL, "policy", true, choices, &idx), 0);
	assert_int_equal(idx, 1);
	expect_fail(jsonin_enum(&e, o, NULL, "ok", true, choices, &idx), &e, "ok",
	            "ok must be one of: min-cost, patent");
	expect_fail(jsonin_enum(&e, o, NULL, "num", true, choices, &idx), &e, "num",
	            "num must be one of: min-cost, patent");
	assert_int_equal(jsonin_enum(&e, o, NULL, "absent", false, choices, &idx), 1);
	json_decref(o);
}

static void test_members_fail(void **state)
{
	(void)state;
	static const char *const allowed[] = { "a", "b", NULL };
	struct jsonin_err e;
	json_t *o = obj("{\"a\": 1, \"b\": 2}");
	assert_int_equal(jsonin_check_members(&e, o, NULL, allowed), 0);
	json_object_set_new(o, "c", json_null());
	expect_fail(jsonin_check_members(&e, o, "source", allowed), &e, "source.c",
	            "unknown field source.c");
	/* The field may be the context's own, as when a caller rewords a message. */
	expect_fail(jsonin_fail(&e, e.field, "%s again", e.field), &e, "source.c",
	            "source.c again");
	json_decref(o);
}

static void test_members_strict_null(void **state)
{
	(void)state;
	static const char *const allowed[] = { "a", "b?", NULL };
	struct jsonin_err e;
	json_t *o = obj("{\"a\": 1, \"b\": null}");
	/* Lenient: null counts as absent everywhere, "b?" still names b. */
	assert_int_equal(jsonin_check_members(&e, o, NULL, allowed), 0);
	assert_non_null(json_object_get(o, "b"));
	/* Strict: a nullable member's null is removed... */
	assert_int_equal(jsonin_check_members_strict(&e, o, NULL, allowed), 0);
	assert_null(json_object_get(o, "b"));
	/* ...any other null is an error. */
	json_object_set_new(o, "a", json_null());
	expect_fail(jsonin_check_members_strict(&e, o, "x", allowed), &e, "x.a",
	            "x.a must not be null: leave it out for the default");
	json_decref(o);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_member),
		cmocka_unit_test(test_uint),
		cmocka_unit_test(test_double),
		cmocka_unit_test(test_bool_string),
		cmocka_unit_test(test_name_enum),
		cmocka_unit_test(test_members_fail),
		cmocka_unit_test(test_members_strict_null),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
