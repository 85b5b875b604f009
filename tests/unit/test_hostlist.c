/* Slurm host lists: expansion with its edge cases, and compression back. */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "hostlist.h"

/* Expands expr and compares with the space-separated names in want. */
static void assert_expands(const char *expr, const char *want)
{
	struct hostlist hl = { 0 };
	char err[256] = "";
	int rc = hostlist_expand(&hl, expr, err, sizeof(err));
	if (rc)
		fail_msg("%s: %s", expr, err);
	char got[4096] = "";
	for (size_t i = 0; i < hl.n; i++) {
		if (i)
			strcat(got, " ");
		strcat(got, hl.names[i]);
	}
	assert_string_equal(got, want);
	hostlist_free(&hl);
}

/* Expansion fails with rc and a message containing why. */
static void assert_refused(const char *expr, int rc, const char *why)
{
	struct hostlist hl = { 0 };
	char err[256] = "";
	assert_int_equal(hostlist_expand(&hl, expr, err, sizeof(err)), rc);
	if (!strstr(err, why))
		fail_msg("%s: \"%s\" lacks \"%s\"", expr, err, why);
	assert_int_equal(hl.n, 0);
	hostlist_free(&hl);
}

static void test_expand(void **state)
{
	(void)state;
	assert_expands("srv0", "srv0");
	assert_expands("srv0,srv1", "srv0 srv1");
	assert_expands("srv[0-4,7],gpu[01-03]", "srv0 srv1 srv2 srv3 srv4 srv7 gpu01 gpu02 gpu03");
	/* The low end sets the width, as Slurm prints it. */
	assert_expands("n[8-10]", "n8 n9 n10");
	assert_expands("n[08-10]", "n08 n09 n10");
	assert_expands("n[0-1]", "n0 n1");
	assert_expands("n[007]", "n007");
	/* As many digits as Slurm gives its nodes. */
	assert_expands("n[0001234567-0001234568]", "n0001234567 n0001234568");
	/* Several groups: leftmost slowest; text after a group. */
	assert_expands("r[1-2]n[1-3]", "r1n1 r1n2 r1n3 r2n1 r2n2 r2n3");
	assert_expands("rack[1-2]-ib", "rack1-ib rack2-ib");
	assert_expands("[1-2]", "1 2");
	/* Order and repeats are kept: the daemon judges them. */
	assert_expands("b,a,b", "b a b");
	assert_expands("n[3,1]", "n3 n1");
}

static void test_refused(void **state)
{
	(void)state;
	assert_refused("", -EINVAL, "empty name");
	assert_refused("a,,b", -EINVAL, "empty name");
	assert_refused(",a", -EINVAL, "empty name");
	assert_refused("a,", -EINVAL, "empty name");
	assert_refused("srv[0-4", -EINVAL, "unbalanced \"[\"");
	assert_refused("srv0-4]", -EINVAL, "unbalanced \"]\"");
	assert_refused("srv[[0]]", -EINVAL, "nested");
	assert_refused("srv[4-0]", -EINVAL, "reversed range \"4-0\"");
	assert_refused("srv[]", -EINVAL, "bad range");
	assert_refused("srv[1,]", -EINVAL, "bad range");
	assert_refused("srv[a-b]", -EINVAL, "bad range");
	assert_refused("srv[1-]", -EINVAL, "bad range");
	assert_refused("srv[1-2-3]", -EINVAL, "bad range");
	assert_refused("srv[1234567890123456789]", -EINVAL, "bad range");
	assert_refused("srv 1", -EINVAL, "white space");
	assert_refused("n[0-99999]", -E2BIG, "more than");
	assert_refused("a[0-999]b[0-999]", -E2BIG, "more than");
}

/* A failed expansion leaves what the list held; a good one appends. */
static void test_append(void **state)
{
	(void)state;
	struct hostlist hl = { 0 };
	char err[256];
	assert_int_equal(hostlist_expand(&hl, "a[1-2]", err, sizeof(err)), 0);
	assert_int_equal(hostlist_expand(&hl, "b[1-2],c[", err, sizeof(err)), -EINVAL);
	assert_int_equal(hl.n, 2);
	assert_int_equal(hostlist_expand(&hl, "b", err, sizeof(err)), 0);
	assert_int_equal(hl.n, 3);
	assert_string_equal(hl.names[2], "b");
	hostlist_free(&hl);
	assert_null(hl.names);
}

/* Compresses the space-separated names, checks the text, and that it expands back. */
static void assert_compresses(const char *names, const char *want)
{
	char buf[1024], *v[64], *save = NULL;
	size_t n = 0;
	strcpy(buf, names);
	for (char *t = strtok_r(buf, " ", &save); t; t = strtok_r(NULL, " ", &save))
		v[n++] = t;
	char *s = hostlist_compress(v, n);
	assert_non_null(s);
	assert_string_equal(s, want);
	if (n)
		assert_expands(s, names);
	free(s);
}

static void test_compress(void **state)
{
	(void)state;
	assert_compresses("", "");
	assert_compresses("srv0", "srv0");
	assert_compresses("srv0 srv1 srv2 srv3 srv4", "srv[0-4]");
	assert_compresses("srv0 srv1 srv2 srv4 srv7 srv8", "srv[0-2,4,7-8]");
	assert_compresses("gpu01 gpu02 gpu03 srv5", "gpu[01-03],srv5");
	/* Widths differ: separate runs, so that the text expands to the same names. */
	assert_compresses("n8 n9 n10 n11", "n[8-9],n[10-11]");
	assert_compresses("n08 n09 n10", "n[08-10]");
	/* Order is kept (a fabric's server order is its plan). */
	assert_compresses("srv3 srv1 srv2", "srv[3,1-2]");
	assert_compresses("head srv1 srv2", "head,srv[1-2]");
	assert_compresses("r1n1 r1n2 r2n1", "r1n[1-2],r2n1");
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_expand),
		cmocka_unit_test(test_refused),
		cmocka_unit_test(test_append),
		cmocka_unit_test(test_compress),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
