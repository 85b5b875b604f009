/* Configuration parsing: defaults, every key, and the error messages. */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "base/config.h"

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
		/* A syntax error before a bad key is reported first, at its own line. */
		{ "[http]\ngarbage line\nlisten = 127.0.0.1:1\nmax_body = 1\n",
		  "t.ini:2: syntax error" },
		{ "[http]\n\n\nmax_body = 1\nbroken\n", "t.ini:4: [http] max_body:" },
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
	/* Tokens off loopback: over TLS, or plain HTTP only when said so. */
	assert_int_equal(
	    load("[http]\nlisten = 0.0.0.0:80\n[auth]\ntoken.a = read:0123456789abcdef\n", &cfg,
	         err, sizeof(err)),
	    -EINVAL);
	assert_non_null(strstr(err, "would cross the network in clear"));
	config_free(&cfg);
	assert_int_equal(load("[http]\nlisten = 0.0.0.0:80\nallow_plaintext_tokens = true\n"
	                      "[auth]\ntoken.a = read:0123456789abcdef\n",
	                      &cfg, err, sizeof(err)),
	                 0);
	config_free(&cfg);
	assert_int_equal(load("[http]\nlisten = 0.0.0.0:443\ntls_cert = /c.pem\ntls_key = /k.pem\n"
	                      "[auth]\ntoken.a = read:0123456789abcdef\n",
	                      &cfg, err, sizeof(err)),
	                 0);
	/* A reload is judged against the running listener: plain, public. */
	assert_false(config_auth_safe(&cfg, "0.0.0.0", false, err, sizeof(err)));
	assert_true(config_auth_safe(&cfg, "0.0.0.0", true, err, sizeof(err)));
	assert_true(config_auth_safe(&cfg, "::1", false, err, sizeof(err)));
	config_free(&cfg);
	/* A file without tokens, fine on loopback, not on a public listener. */
	assert_int_equal(load("[http]\nlisten = 127.0.0.1:80\n", &cfg, err, sizeof(err)), 0);
	assert_false(config_auth_safe(&cfg, "0.0.0.0", true, err, sizeof(err)));
	assert_non_null(strstr(err, "no [auth] token is configured"));
	config_free(&cfg);
	assert_int_equal(load("[http]\ntls_key = /k.pem\n", &cfg, err, sizeof(err)), -EINVAL);
	assert_non_null(strstr(err, "tls_key is set without tls_cert"));
	config_free(&cfg);
	assert_true(config_host_is_loopback("127.0.0.2"));
	assert_true(config_host_is_loopback("::1"));
	assert_true(config_host_is_loopback("localhost"));
	assert_false(config_host_is_loopback("::"));
	assert_false(config_host_is_loopback("10.0.0.1"));
	/* A name could resolve to anything: only numeric loopback addresses count. */
	assert_false(config_host_is_loopback("127.foo.example"));
	assert_true(config_host_is_loopback("127.255.0.1"));
	assert_false(config_host_is_loopback("127.0.0.1.example"));
}

/* [cluster]: absent means a single node; present needs name and advertise. */
static void test_cluster(void **state)
{
	(void)state;
	struct ofcd_config cfg;
	char err[512] = "";
	assert_int_equal(load("", &cfg, err, sizeof(err)), 0);
	assert_int_equal(cfg.cluster_nendpoints, 0);
	assert_int_equal(cfg.cluster_lease_ttl_s, 5);
	assert_string_equal(cfg.cluster_prefix, "/ofcd");
	config_free(&cfg);

	assert_int_equal(load("[cluster]\netcd = http://127.0.0.1:2379, http://[::1]:2380\n"
	                      "name = a-1\nadvertise = http://127.0.0.1:8470\nlease_ttl = 3\n"
	                      "prefix = /x/y\n",
	                      &cfg, err, sizeof(err)),
	                 0);
	assert_int_equal(cfg.cluster_nendpoints, 2);
	assert_string_equal(cfg.cluster_endpoints[0], "http://127.0.0.1:2379");
	assert_string_equal(cfg.cluster_endpoints[1], "http://[::1]:2380");
	assert_string_equal(cfg.cluster_name, "a-1");
	assert_string_equal(cfg.cluster_advertise, "http://127.0.0.1:8470");
	assert_int_equal(cfg.cluster_lease_ttl_s, 3);
	assert_string_equal(cfg.cluster_prefix, "/x/y");
	config_free(&cfg);

	static const struct {
		const char *text;
		const char *want;
	} bad[] = {
		{ "[cluster]\netcd = 127.0.0.1:2379\n", "t.ini:2: [cluster] etcd:" },
		{ "[cluster]\netcd = http://h:1,\n", "t.ini:2: [cluster] etcd:" },
		{ "[cluster]\netcd = http://h:1/v3\n", "t.ini:2: [cluster] etcd:" },
		{ "[cluster]\netcd = http://u@h:1\n", "t.ini:2: [cluster] etcd:" },
		{ "[cluster]\netcd = https://h:1\n", "t.ini:2: [cluster] etcd:" },
		{ "[cluster]\netcd = http://h:0\n", "t.ini:2: [cluster] etcd:" },
		{ "[cluster]\netcd = http://a:1,http://a:2,http://a:3,http://a:4,http://a:5,"
		  "http://a:6,http://a:7,http://a:8,http://a:9\n",
		  "t.ini:2: [cluster] etcd: at most 8" },
		{ "[cluster]\nlease_ttl = 61\n", "t.ini:2: [cluster] lease_ttl:" },
		{ "[cluster]\nlease_ttl = 0\n", "t.ini:2: [cluster] lease_ttl:" },
		{ "[cluster]\nprefix = ofcd\n", "t.ini:2: [cluster] prefix:" },
		{ "[cluster]\nprefix = /ofcd/\n", "t.ini:2: [cluster] prefix:" },
		{ "[cluster]\nadvertise = https://a:1\n", "t.ini:2: [cluster] advertise:" },
		{ "[cluster]\netcd = http://h:1\nname = a\n",
		  "t.ini: [cluster] etcd needs [cluster] name and advertise" },
		{ "[cluster]\nname = a\n", "t.ini: [cluster] name and advertise need" },
	};
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		int rc = load(bad[i].text, &cfg, err, sizeof(err));
		config_free(&cfg);
		if (rc == 0 || strncmp(err, bad[i].want, strlen(bad[i].want)) != 0)
			fail_msg("case %zu: rc %d, message \"%s\", want prefix \"%s\"", i, rc, err,
			         bad[i].want);
	}
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

/* [cost]: defaults, every key, SIGHUP-style reload values, and bad values by name. */
static void test_cost(void **state)
{
	(void)state;
	struct ofcd_config cfg;
	char err[512];
	struct cost_params def = cost_params_default();

	assert_int_equal(load("", &cfg, err, sizeof(err)), 0);
	assert_memory_equal(&cfg.cost, &def, sizeof(def));
	config_free(&cfg);

	const char *text = "[cost]\ninter_gbps = 800\ninter_latency_us = 2.5\nintra_gbps = 1e3\n"
	                   "intra_latency_us = 0\nbridge_gbps = 0.000001\np2p_read_us = 4\n"
	                   "p2p_write_us = 1000000000\n";
	assert_int_equal(load(text, &cfg, err, sizeof(err)), 0);
	assert_true(cfg.cost.inter_gbps == 800.0);
	assert_true(cfg.cost.inter_latency_us == 2.5);
	assert_true(cfg.cost.intra_gbps == 1000.0);
	assert_true(cfg.cost.intra_latency_us == 0.0);
	assert_true(cfg.cost.bridge_gbps == 1e-6);
	assert_true(cfg.cost.p2p_read_us == 4.0);
	assert_true(cfg.cost.p2p_write_us == 1e9);
	assert_int_equal(cost_params_validate(&cfg.cost, NULL), 0);
	config_free(&cfg);

	/* One key set, the others keep their defaults. */
	assert_int_equal(load("[cost]\nbridge_gbps = 4000\n", &cfg, err, sizeof(err)), 0);
	assert_true(cfg.cost.bridge_gbps == 4000.0);
	assert_true(cfg.cost.inter_gbps == COST_DEFAULT_INTER_GBPS);
	assert_true(cfg.cost.p2p_write_us == COST_DEFAULT_P2P_WRITE_US);
	config_free(&cfg);

	static const struct {
		const char *text;
		const char *want;
	} cases[] = {
		{ "[cost]\ninter_gbps = 0\n",
		  "t.ini:2: [cost] inter_gbps: expected a bandwidth in Gb/s from 1e-06 to 1e+09, "
		  "got \"0\"" },
		{ "[log]\nlevel = info\n[cost]\nintra_gbps = -5\n", "t.ini:4: [cost] intra_gbps:" },
		{ "[cost]\nbridge_gbps = 2e9\n",
		  "t.ini:2: [cost] bridge_gbps: expected a bandwidth" },
		{ "[cost]\ninter_latency_us = -1\n",
		  "t.ini:2: [cost] inter_latency_us: expected a delay in us from 0 to 1e+09, "
		  "got \"-1\"" },
		{ "[cost]\np2p_read_us = 1e10\n", "t.ini:2: [cost] p2p_read_us: expected a delay" },
		{ "[cost]\np2p_write_us = fast\n",
		  "t.ini:2: [cost] p2p_write_us: expected a delay" },
		{ "[cost]\nintra_latency_us = 2us\n", "t.ini:2: [cost] intra_latency_us:" },
		{ "[cost]\ninter_gbps = inf\n", "t.ini:2: [cost] inter_gbps:" },
		{ "[cost]\ninter_gbps = nan\n", "t.ini:2: [cost] inter_gbps:" },
		{ "[cost]\ninter_gbps =\n", "t.ini:2: [cost] inter_gbps:" },
		{ "[cost]\ninter_gbps = 1\ninter_gbps = 2\n",
		  "t.ini:3: [cost] inter_gbps: key given twice" },
		{ "[cost]\ninter_bps = 1\n", "t.ini:2: [cost] inter_bps: unknown key" },
	};
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		char e[512] = "";
		int rc = load(cases[i].text, &cfg, e, sizeof(e));
		config_free(&cfg);
		if (rc == 0 || strncmp(e, cases[i].want, strlen(cases[i].want)) != 0)
			fail_msg("case %zu: rc %d, message \"%s\", want prefix \"%s\"", i, rc, e,
			         cases[i].want);
	}
	assert_string_equal(config_cost_range("inter_gbps"),
	                    "a bandwidth in Gb/s from 1e-06 to 1e+09");
	assert_string_equal(config_cost_range("p2p_read_us"), "a delay in us from 0 to 1e+09");
	assert_null(config_cost_range("bogus"));
	assert_null(config_cost_range(NULL));
}

/* Which keys SIGHUP applies: the table's live rows, and nothing else. */
static void test_reload_flags(void **state)
{
	(void)state;
	static const char *const live[] = {
		"max_body",
		"level",
		"token.NAME",
		"allow_unauthenticated",
		"allow_plaintext_tokens",
		"audit_interval",
		"faults",
		"inter_gbps",
		"inter_latency_us",
		"intra_gbps",
		"intra_latency_us",
		"bridge_gbps",
		"p2p_read_us",
		"p2p_write_us",
		NULL,
	};
	for (size_t i = 0; i < config_table.nkeys; i++) {
		const struct cfgtab_key *k = &config_table.keys[i];
		bool want = false;
		for (size_t l = 0; live[l]; l++)
			want |= strcmp(live[l], k->key) == 0;
		if (want != !!(k->flags & CFGTAB_LIVE))
			fail_msg("[%s] %s: live is %d", k->section, k->key, !want);
	}

	struct ofcd_config running, next;
	char err[512], fixed[256];
	assert_int_equal(
	    load("[auth]\ntoken.a = read:0123456789abcdef\n", &running, err, sizeof(err)), 0);
	assert_int_equal(load("[http]\nlisten = 127.0.0.1:9\nmax_connections = 5\nmax_body = 4096\n"
	                      "[store]\npath = /x.db\n[auth]\ntoken.b = admin:0123456789abcdef\n"
	                      "[log]\nlevel = debug\n[cost]\ninter_gbps = 100\n",
	                      &next, err, sizeof(err)),
	                 0);
	assert_int_equal(cfgtab_changed_fixed(&config_table, &running, &next, fixed, sizeof(fixed)),
	                 3);
	assert_string_equal(fixed, "[http] listen, max_connections, [store] path");
	cfgtab_swap_live(&config_table, &running, &next);
	assert_int_equal(running.tokens.n, 1);
	assert_string_equal(running.tokens.v[0].name, "b");
	assert_int_equal(running.log_level, LOG_LVL_DEBUG);
	assert_int_equal(running.max_body, 4096);
	assert_true(running.cost.inter_gbps == 100.0);
	assert_int_equal(running.listen_port, 8470);
	assert_int_equal(running.max_connections, 1024);
	assert_string_equal(running.store_path, "var/ofcd.db");
	/* The replaced tokens went to next, which frees them. */
	assert_string_equal(next.tokens.v[0].name, "a");
	config_free(&next);
	config_free(&running);

	/* The same file twice: nothing waits for a restart. */
	assert_int_equal(load("[http]\nlisten = [::1]:80\n", &running, err, sizeof(err)), 0);
	assert_int_equal(load("[http]\nlisten = [::1]:80\n", &next, err, sizeof(err)), 0);
	assert_int_equal(cfgtab_changed_fixed(&config_table, &running, &next, fixed, sizeof(fixed)),
	                 0);
	config_free(&next);
	config_free(&running);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_defaults),     cmocka_unit_test(test_all_keys),
		cmocka_unit_test(test_errors),       cmocka_unit_test(test_non_loopback),
		cmocka_unit_test(test_file),         cmocka_unit_test(test_cost),
		cmocka_unit_test(test_reload_flags), cmocka_unit_test(test_cluster),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
