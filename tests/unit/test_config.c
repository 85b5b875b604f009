/* Configuration parsing: defaults, every key, and the error messages. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "config.h"

static int load(const char *text, struct ofcd_config *cfg, char *err, size_t len)
{
	return config_load_string(text, "t.ini", cfg, err, len);
}

static void test_defaults(void **state)
{
	(void)state;
	struct ofcd_config cfg;
	char err[512];
	assert_int_equal(load("", &cfg, err, sizeof(err)), 0);
	assert_string_equal(cfg.listen_host, "127.0.0.1");
	assert_int_equal(cfg.listen_port, 8470);
	assert_int_equal(cfg.max_body, 1024 * 1024);
	assert_int_equal(cfg.log_level, LOG_LVL_INFO);
	assert_int_equal(cfg.tokens.n, 0);
	assert_false(cfg.allow_unauthenticated);
	assert_int_equal(cfg.audit_interval_s, 30);
	config_free(&cfg);
}

static void test_all_keys(void **state)
{
	(void)state;
	struct ofcd_config cfg;
	char err[512];
	const char *text = "[http]\nlisten = [::1]:9000\nmax_body = 2048\nmax_connections = 10\n"
	                   "[store]\npath = /tmp/x.db\n[log]\nlevel = debug\n"
	                   "[auth]\ntoken.ops = admin:0123456789abcdef\n"
	                   "token.mon = read:fedcba9876543210\nallow_unauthenticated = true\n"
	                   "[debug]\nfaults = true\n[reconcile]\naudit_interval = 5\n";
	assert_int_equal(load(text, &cfg, err, sizeof(err)), 0);
	assert_string_equal(cfg.listen_host, "::1");
	assert_int_equal(cfg.listen_port, 9000);
	assert_int_equal(cfg.max_body, 2048);
	assert_int_equal(cfg.max_connections, 10);
	assert_string_equal(cfg.store_path, "/tmp/x.db");
	assert_int_equal(cfg.log_level, LOG_LVL_DEBUG);
	assert_int_equal(cfg.tokens.n, 2);
	assert_string_equal(cfg.tokens.v[0].name, "ops");
	assert_int_equal(cfg.tokens.v[0].role, AUTH_ADMIN);
	assert_int_equal(cfg.tokens.v[1].role, AUTH_READ);
	assert_true(cfg.allow_unauthenticated);
	assert_true(cfg.debug_faults);
	assert_int_equal(cfg.audit_interval_s, 5);
	config_free(&cfg);
}

/* Each bad file must fail with a message naming file, line and key. */
static void test_errors(void **state)
{
	(void)state;
	static const struct {
		const char *text;
		const char *want;
	} cases[] = {
		{ "[bogus]\nx = 1\n", "t.ini:2: [bogus] x: unknown section" },
		{ "[http]\nport = 1\n", "t.ini:2: [http] port: unknown key" },
		{ "[http]\nlisten = nocolon\n", "t.ini:2: [http] listen: expected HOST:PORT" },
		{ "[http]\nlisten = 1.2.3.4:70000\n", "t.ini:2: [http] listen:" },
		{ "[http]\nlisten = ::1:80\n", "t.ini:2: [http] listen:" },
		{ "\n[http]\nmax_body = -1\n",
		  "t.ini:3: [http] max_body: expected a whole number" },
		{ "[http]\nmax_body = 10\n",
		  "t.ini:2: [http] max_body: expected a whole number from 1024" },
		{ "[http]\nmax_body = 12ab\n", "t.ini:2: [http] max_body:" },
		{ "[log]\nlevel = loud\n",
		  "t.ini:2: [log] level: expected error, warn, info or debug" },
		{ "[auth]\ntoken.a = root:0123456789abcdef\n",
		  "t.ini:2: [auth] token.a: expected ROLE:SECRET" },
		{ "[auth]\ntoken.a = admin:short\n", "t.ini:2: [auth] token.a: secret must be" },
		{ "[auth]\ntoken.a b = admin:0123456789abcdef\n",
		  "t.ini:2: [auth] token.a b: token name" },
		{ "[auth]\ntoken.a = admin:0123456789abcdef\ntoken.a = read:0123456789abcdef\n",
		  "t.ini:3: [auth] token.a: token a given twice" },
		{ "[auth]\nallow_unauthenticated = maybe\n",
		  "t.ini:2: [auth] allow_unauthenticated: expected true or false" },
		{ "[log]\nlevel = info\nlevel = warn\n", "t.ini:3: [log] level: key given twice" },
		{ "[http\n", "t.ini:1: syntax error" },
		{ "[http]\nlisten = 0.0.0.0:80\n",
		  "t.ini: [http] listen: 0.0.0.0 is not a loopback address" },
		{ "[reconcile]\naudit_interval = 0\n", "t.ini:2: [reconcile] audit_interval:" },
	};
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		struct ofcd_config cfg;
		char err[512] = "";
		int rc = load(cases[i].text, &cfg, err, sizeof(err));
		config_free(&cfg);
		if (rc == 0 || strncmp(err, cases[i].want, strlen(cases[i].want)) != 0)
			fail_msg("case %zu: rc %d, message \"%s\", want prefix \"%s\"", i, rc, err,
			         cases[i].want);
	}
}

static void test_non_loopback(void **state)
{
	(void)state;
	struct ofcd_config cfg;
	char err[512];
	assert_int_equal(load("[http]\nlisten = 0.0.0.0:80\n[auth]\nallow_unauthenticated = true\n",
	                      &cfg, err, sizeof(err)),
	                 0);
	config_free(&cfg);
	assert_int_equal(
	    load("[http]\nlisten = 0.0.0.0:80\n[auth]\ntoken.a = read:0123456789abcdef\n", &cfg,
	         err, sizeof(err)),
	    0);
	config_free(&cfg);
	assert_true(config_host_is_loopback("127.0.0.2"));
	assert_true(config_host_is_loopback("::1"));
	assert_true(config_host_is_loopback("localhost"));
	assert_false(config_host_is_loopback("::"));
	assert_false(config_host_is_loopback("10.0.0.1"));
}

static void test_file(void **state)
{
	(void)state;
	struct ofcd_config cfg;
	char err[512];
	char path[] = "/tmp/ofcd-cfg-XXXXXX";
	int fd = mkstemp(path);
	assert_true(fd >= 0);
	const char *text = "[log]\nlevel = warn\n";
	assert_int_equal(write(fd, text, strlen(text)), (ssize_t)strlen(text));
	close(fd);
	assert_int_equal(config_load(path, &cfg, err, sizeof(err)), 0);
	assert_int_equal(cfg.log_level, LOG_LVL_WARN);
	assert_string_equal(cfg.source, path);
	config_free(&cfg);
	unlink(path);
	assert_true(config_load(path, &cfg, err, sizeof(err)) < 0);
	assert_non_null(strstr(err, "cannot open"));
	config_free(&cfg);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_defaults), cmocka_unit_test(test_all_keys),
		cmocka_unit_test(test_errors),   cmocka_unit_test(test_non_loopback),
		cmocka_unit_test(test_file),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
