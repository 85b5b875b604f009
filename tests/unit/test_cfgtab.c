/* The configuration table engine: every type, bounds, messages, key rules, reload, reference. */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "cfgtab.h"

struct conf {
	bool flag;
	uint8_t u8;
	uint16_t port;
	unsigned secs;
	size_t big;
	double ratio;
	char path[8];
	char name[65];
	int mode;
	unsigned items; /* item.N lines seen */
	char last[16];  /* the last item's key */
};

static int parse_item(void *c, const char *key, const char *value, char *err, size_t errlen)
{
	struct conf *cf = c;
	if (strcmp(value, "bad") == 0) {
		snprintf(err, errlen, "items are never bad");
		return -EINVAL;
	}
	cf->items++;
	snprintf(cf->last, sizeof(cf->last), "%s", key);
	return 0;
}

static const struct cfgtab_choice modes[] = { { "x", 1 }, { "y", 2 }, { "z", 7 }, { NULL, 0 } };

#define F(member) CFGTAB_FIELD(struct conf, member)

static const struct cfgtab_key keys[] = {
	{ .section = "a",
	  .key = "flag",
	  .type = CFGTAB_BOOL,
	  F(flag),
	  .def = "false",
	  .flags = CFGTAB_LIVE,
	  .doc = "a flag" },
	{ .section = "a",
	  .key = "u8",
	  .type = CFGTAB_UINT,
	  F(u8),
	  .min = 0,
	  .max = 255,
	  .doc = "a byte" },
	{ .section = "a",
	  .key = "port",
	  .type = CFGTAB_UINT,
	  F(port),
	  .min = 1,
	  .max = 65535,
	  .def = "80",
	  .doc = "a port" },
	{ .section = "a",
	  .key = "secs",
	  .type = CFGTAB_UINT,
	  F(secs),
	  .min = 1,
	  .max = 10,
	  .what = "seconds",
	  .def = "5",
	  .flags = CFGTAB_LIVE,
	  .doc = "a delay" },
	{ .section = "a",
	  .key = "big",
	  .type = CFGTAB_UINT,
	  F(big),
	  .min = 0,
	  .max = SIZE_MAX,
	  .doc = "a size" },
	{ .section = "b",
	  .key = "ratio",
	  .type = CFGTAB_DOUBLE,
	  F(ratio),
	  .dmin = 0.5,
	  .dmax = 2,
	  .what = "a ratio",
	  .def = "1",
	  .flags = CFGTAB_LIVE,
	  .doc = "a ratio" },
	{ .section = "b",
	  .key = "path",
	  .type = CFGTAB_STRING,
	  F(path),
	  .what = "a path",
	  .def = "x.db",
	  .doc = "a file" },
	{ .section = "b", .key = "name", .type = CFGTAB_NAME, F(name), .doc = "a name" },
	{ .section = "b",
	  .key = "mode",
	  .type = CFGTAB_ENUM,
	  F(mode),
	  .choices = modes,
	  .def = "y",
	  .doc = "a mode" },
	{ .section = "c",
	  .key = "item.N",
	  .type = CFGTAB_CUSTOM,
	  CFGTAB_SPAN(struct conf, items, last),
	  .parse = parse_item,
	  .what = "ITEM",
	  .flags = CFGTAB_LIVE,
	  .doc = "an item" },
};

static const struct cfgtab table = { keys, sizeof(keys) / sizeof(keys[0]) };

static int load(const char *text, struct conf *c, char *err, size_t len)
{
	memset(c, 0, sizeof(*c));
	int rc = cfgtab_defaults(&table, c, err, len);
	return rc < 0 ? rc : cfgtab_load(&table, c, NULL, text, "t.ini", err, len);
}

static void test_defaults(void **state)
{
	(void)state;
	struct conf c;
	char err[512];
	assert_int_equal(load("", &c, err, sizeof(err)), 0);
	assert_false(c.flag);
	assert_int_equal(c.port, 80);
	assert_int_equal(c.secs, 5);
	assert_true(c.ratio == 1.0);
	assert_string_equal(c.path, "x.db");
	assert_int_equal(c.mode, 2);
	/* Without a default, the field keeps what the caller put there. */
	assert_int_equal(c.u8, 0);
	assert_string_equal(c.name, "");

	static const struct cfgtab_key broken_keys[] = {
		{ .section = "a",
		  .key = "port",
		  .type = CFGTAB_UINT,
		  F(port),
		  .min = 1,
		  .max = 10,
		  .def = "80" },
	};
	static const struct cfgtab broken = { broken_keys, 1 };
	assert_int_equal(cfgtab_defaults(&broken, &c, err, sizeof(err)), -EINVAL);
	assert_string_equal(err, "built-in default of [a] port: expected a whole number from 1 "
	                         "to 10, got \"80\"");
}

static void test_types(void **state)
{
	(void)state;
	struct conf c;
	char err[512];
	const char *text = "[a]\nflag = yes\nu8 = 255\nport = 65535\nsecs = 10\n"
	                   "big = 18446744073709551615\n[b]\nratio = 0.5\npath = 1234567\n"
	                   "name = srv-0.a_b\nmode = z\n[c]\nitem.1 = a\nitem.2 = b\n";
	assert_int_equal(load(text, &c, err, sizeof(err)), 0);
	assert_true(c.flag);
	assert_int_equal(c.u8, 255);
	assert_int_equal(c.port, 65535);
	assert_int_equal(c.secs, 10);
	assert_true(c.big == SIZE_MAX);
	assert_true(c.ratio == 0.5);
	assert_string_equal(c.path, "1234567");
	assert_string_equal(c.name, "srv-0.a_b");
	assert_int_equal(c.mode, 7);
	/* A family of keys may repeat; the parser sees each key as written. */
	assert_int_equal(c.items, 2);
	assert_string_equal(c.last, "item.2");
	assert_int_equal(load("[a]\nflag = 0\n", &c, err, sizeof(err)), 0);
	assert_false(c.flag);
}

static void test_errors(void **state)
{
	(void)state;
	static const struct {
		const char *text, *want;
	} cases[] = {
		{ "[a]\nflag = maybe\n",
		  "t.ini:2: [a] flag: expected true or false, got \"maybe\"" },
		{ "[a]\nu8 = 256\n", "t.ini:2: [a] u8: expected a whole number from 0 to 255, got "
		                     "\"256\"" },
		{ "[a]\nport = 0\n", "t.ini:2: [a] port: expected a whole number from 1 to 65535, "
		                     "got \"0\"" },
		{ "[a]\nport = -1\n", "t.ini:2: [a] port: expected a whole number" },
		{ "[a]\nport = 8o\n", "t.ini:2: [a] port: expected a whole number" },
		{ "[a]\nbig = 18446744073709551616\n",
		  "t.ini:2: [a] big: expected a whole number" },
		{ "[a]\nsecs = 11\n",
		  "t.ini:2: [a] secs: expected seconds from 1 to 10, got \"11\"" },
		{ "[b]\nratio = 3\n",
		  "t.ini:2: [b] ratio: expected a ratio from 0.5 to 2, got \"3\"" },
		{ "[b]\nratio = nan\n", "t.ini:2: [b] ratio: expected a ratio" },
		{ "[b]\nratio = 1e999\n", "t.ini:2: [b] ratio: expected a ratio" },
		{ "[b]\nratio = 1x\n", "t.ini:2: [b] ratio: expected a ratio" },
		{ "[b]\nratio =\n", "t.ini:2: [b] ratio: expected a ratio" },
		{ "[b]\npath = 12345678\n",
		  "t.ini:2: [b] path: expected a path of 1 to 7 characters" },
		{ "[b]\npath =\n", "t.ini:2: [b] path: expected a path of 1 to 7 characters" },
		{ "[b]\nname = a b\n",
		  "t.ini:2: [b] name: expected a name of 1 to 64 characters of [A-Za-z0-9._-]" },
		{ "[b]\nmode = w\n", "t.ini:2: [b] mode: expected x, y or z, got \"w\"" },
		{ "[c]\nitem.1 = bad\n", "t.ini:2: [c] item.1: items are never bad" },
		{ "[d]\nx = 1\n", "t.ini:2: [d] x: unknown section" },
		{ "[a]\nport2 = 1\n", "t.ini:2: [a] port2: unknown key" },
		/* A family matches its prefix only. */
		{ "[c]\nitem = 1\n", "t.ini:2: [c] item: unknown key" },
		{ "[a]\nport = 1\n\nport = 2\n", "t.ini:4: [a] port: key given twice" },
		{ "[a\n", "t.ini:1: syntax error (expected [section] or key = value)" },
		{ "[a]\nport = 1\njunk\nport = 0\n", "t.ini:3: syntax error" },
		{ "[a]\n\n\nport = 0\njunk\n", "t.ini:4: [a] port:" },
	};
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		struct conf c;
		char err[512] = "";
		int rc = load(cases[i].text, &c, err, sizeof(err));
		if (rc != -EINVAL || strncmp(err, cases[i].want, strlen(cases[i].want)) != 0)
			fail_msg("case %zu: rc %d, \"%s\", want \"%s\"", i, rc, err, cases[i].want);
	}
	struct conf c;
	char err[512];
	memset(&c, 0, sizeof(c));
	assert_int_equal(cfgtab_load(&table, &c, "/nonexistent/t.ini", NULL, "/nonexistent/t.ini",
	                             err, sizeof(err)),
	                 -ENOENT);
	assert_non_null(strstr(err, "/nonexistent/t.ini: cannot open: "));

	/* A row whose field no integer fits is the table's fault, and says so. */
	static const struct cfgtab_key odd_keys[] = {
		{ .section = "a",
		  .key = "path",
		  .type = CFGTAB_UINT,
		  .offset = 0,
		  .size = 3,
		  .max = 9 },
	};
	static const struct cfgtab odd = { odd_keys, 1 };
	assert_int_equal(cfgtab_load(&odd, &c, NULL, "[a]\npath = 1\n", "t.ini", err, sizeof(err)),
	                 -EINVAL);
	assert_string_equal(err, "t.ini:2: [a] path: the table gives this key a field of 3 bytes");

	unsigned long long v;
	assert_int_equal(cfgtab_uint("42", 1, 100, &v, err, sizeof(err)), 0);
	assert_int_equal(v, 42);
	assert_int_equal(cfgtab_uint("+1", 1, 100, &v, err, sizeof(err)), -EINVAL);
	assert_string_equal(err, "expected a whole number from 1 to 100, got \"+1\"");
}

static void test_reload(void **state)
{
	(void)state;
	struct conf running, next;
	char err[512], out[128];
	assert_int_equal(load("[a]\nu8 = 1\nsecs = 2\n[b]\nratio = 1.5\n[c]\nitem.a = 1\n",
	                      &running, err, sizeof(err)),
	                 0);
	assert_int_equal(load("[a]\nu8 = 1\nsecs = 3\n[b]\nratio = 2\n", &next, err, sizeof(err)),
	                 0);
	/* Only live keys differ: nothing waits for a restart. */
	assert_int_equal(cfgtab_changed_fixed(&table, &running, &next, out, sizeof(out)), 0);
	assert_string_equal(out, "");

	assert_int_equal(load("[a]\nport = 81\nbig = 7\nsecs = 9\n[b]\npath = y.db\nname = n\n",
	                      &next, err, sizeof(err)),
	                 0);
	assert_int_equal(cfgtab_changed_fixed(&table, &running, &next, out, sizeof(out)), 5);
	assert_string_equal(out, "[a] u8, port, big, [b] path, name");
	/* A short buffer keeps a cut list, the count stays right. */
	assert_int_equal(cfgtab_changed_fixed(&table, &running, &next, out, 8), 5);
	assert_string_equal(out, "[a] u8,");

	/* Live fields trade places; the others stay. */
	cfgtab_swap_live(&table, &running, &next);
	assert_int_equal(running.secs, 9);
	assert_true(running.ratio == 1.0);
	assert_int_equal(running.items, 0);
	assert_int_equal(running.port, 80);
	assert_string_equal(running.path, "x.db");
	assert_int_equal(next.secs, 2);
	assert_true(next.ratio == 1.5);
	assert_int_equal(next.items, 1);
	assert_string_equal(next.last, "item.a");
}

static void test_doc(void **state)
{
	(void)state;
	char *buf = NULL;
	size_t len = 0;
	FILE *f = open_memstream(&buf, &len);
	assert_non_null(f);
	cfgtab_doc(&table, f);
	fclose(f);
	static const char *const want[] = {
		"| section | key | type | default | range | on SIGHUP | meaning |\n"
		"| --- | --- | --- | --- | --- | --- | --- |\n",
		"| a | `flag` | bool | `false` | `true`, `false` | live | a flag |\n",
		"| a | `u8` | uint | none | 0–255 | restart | a byte |\n",
		"| a | `secs` | uint | `5` | 1–10 seconds | live | a delay |\n",
		"| b | `ratio` | double | `1` | 0.5–2 | live | a ratio |\n",
		"| b | `path` | string | `x.db` | 1–7 bytes | restart | a file |\n",
		"| b | `name` | name | none | 1–64 of `[A-Za-z0-9._-]` | restart | a name |\n",
		"| b | `mode` | enum | `y` | `x`, `y`, `z` | restart | a mode |\n",
		"| c | `item.N` | ITEM | none |  | live | an item |\n",
	};
	for (size_t i = 0; i < sizeof(want) / sizeof(want[0]); i++)
		if (!strstr(buf, want[i]))
			fail_msg("reference lacks \"%s\":\n%s", want[i], buf);
	size_t lines = 0;
	for (const char *p = buf; *p; p++)
		lines += *p == '\n';
	assert_int_equal(lines, 2 + table.nkeys);
	free(buf);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_defaults), cmocka_unit_test(test_types),
		cmocka_unit_test(test_errors),   cmocka_unit_test(test_reload),
		cmocka_unit_test(test_doc),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
