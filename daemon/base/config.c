#include "config.h"

#include "cfgtab.h"
#include "log.h"
#include "secret_file.h"
#include "url.h"

#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* HOST:PORT into host (hostsz bytes, zeroed first: a reload compares it byte by byte). */
static int parse_host_port(const char *value, char *host_out, size_t hostsz, uint16_t *port_out,
                           char *err, size_t errlen)
{
	const char *colon = strrchr(value, ':');
	if (!colon || colon == value)
		goto bad;
	size_t hostlen = (size_t)(colon - value);
	const char *host = value;
	if (host[0] == '[') { /* [v6addr]:port */
		if (hostlen < 3 || host[hostlen - 1] != ']')
			goto bad;
		host++;
		hostlen -= 2;
	} else if (memchr(host, ':', hostlen)) {
		goto bad; /* a bare IPv6 address is ambiguous with the port */
	}
	if (hostlen >= hostsz)
		goto bad;
	unsigned long long port;
	if (cfgtab_uint(colon + 1, 0, 65535, &port, err, errlen) < 0)
		goto bad;
	memset(host_out, 0, hostsz);
	memcpy(host_out, host, hostlen);
	*port_out = (uint16_t)port;
	return 0;
bad:
	snprintf(err, errlen, "expected HOST:PORT (IPv6 as [ADDR]:PORT), got \"%s\"", value);
	return -EINVAL;
}

static int parse_listen(void *c, const char *key, const char *value, char *err, size_t errlen)
{
	struct ofcd_config *cfg = c;
	(void)key;
	return parse_host_port(value, cfg->listen_host, sizeof(cfg->listen_host), &cfg->listen_port,
	                       err, errlen);
}

static int parse_admin_listen(void *c, const char *key, const char *value, char *err, size_t errlen)
{
	struct ofcd_config *cfg = c;
	(void)key;
	return parse_host_port(value, cfg->admin_listen_host, sizeof(cfg->admin_listen_host),
	                       &cfg->admin_listen_port, err, errlen);
}

static int parse_token(void *c, const char *key, const char *value, char *err, size_t errlen)
{
	struct ofcd_config *cfg = c;
	const char *name = key + strlen("token.");
	const char *colon = strchr(value, ':');
	char role_s[16];
	enum auth_role role;

	if (!auth_valid_name(name)) {
		snprintf(err, errlen, "token name must be 1 to %d characters of [A-Za-z0-9._-]",
		         AUTH_NAME_MAX);
		return -EINVAL;
	}
	if (!colon || (size_t)(colon - value) >= sizeof(role_s))
		goto bad_role;
	memcpy(role_s, value, (size_t)(colon - value));
	role_s[colon - value] = '\0';
	if (auth_parse_role(role_s, &role) < 0)
		goto bad_role;
	int rc;
	if (role == AUTH_AGENT) {
		/* agent:SERVER:SECRET: the token may write only for that server. */
		const char *colon2 = strchr(colon + 1, ':');
		char server[AUTH_NAME_MAX + 1];
		size_t slen = colon2 ? (size_t)(colon2 - colon - 1) : 0;
		if (!colon2 || slen == 0 || slen >= sizeof(server))
			goto bad_role;
		memcpy(server, colon + 1, slen);
		server[slen] = '\0';
		if (!auth_valid_name(server))
			goto bad_role;
		rc = auth_tokens_add_agent(&cfg->tokens, name, server, colon2 + 1);
	} else {
		rc = auth_tokens_add(&cfg->tokens, name, role, colon + 1);
	}
	if (rc == -EINVAL)
		snprintf(err, errlen, "secret must be %d to %d characters of [A-Za-z0-9-._~+/=]",
		         AUTH_SECRET_MIN, AUTH_SECRET_MAX);
	else if (rc == -EEXIST)
		snprintf(err, errlen, "token %s given twice", name);
	else if (rc < 0)
		snprintf(err, errlen, "out of memory");
	return rc < 0 ? -EINVAL : 0;
bad_role:
	snprintf(err, errlen,
	         "expected ROLE:SECRET with ROLE read or admin, or "
	         "agent:SERVER:SECRET with SERVER a server name");
	return -EINVAL;
}

/* [netconf] KEY.UNIT: one unit's own value of KEY. */
static int parse_unit_setting(void *c, const char *key, const char *value, char *err, size_t errlen)
{
	struct ofcd_config *cfg = c;
	const char *dot = strchr(key, '.');
	struct config_unit_setting *u;
	if (!dot || !auth_valid_name(dot + 1)) {
		snprintf(err, errlen,
		         "the unit name after the dot must be 1 to %d characters of "
		         "[A-Za-z0-9._-]",
		         AUTH_NAME_MAX);
		return -EINVAL;
	}
	if (strlen(value) >= sizeof(u->value)) {
		snprintf(err, errlen, "longer than %zu bytes", sizeof(u->value) - 1);
		return -EINVAL;
	}
	for (unsigned i = 0; i < cfg->netconf_nunits; i++) {
		if (strcmp(cfg->netconf_units[i].key, key) == 0 &&
		    strcmp(cfg->netconf_units[i].unit, dot + 1) == 0) {
			snprintf(err, errlen, "given twice");
			return -EINVAL;
		}
	}
	if (cfg->netconf_nunits == CONFIG_UNIT_SETTINGS_MAX) {
		snprintf(err, errlen, "more than %d per-unit settings", CONFIG_UNIT_SETTINGS_MAX);
		return -EINVAL;
	}
	u = &cfg->netconf_units[cfg->netconf_nunits++];
	snprintf(u->key, sizeof(u->key), "%.*s", (int)(dot - key), key);
	snprintf(u->unit, sizeof(u->unit), "%s", dot + 1);
	snprintf(u->value, sizeof(u->value), "%s", value);
	return 0;
}

/* http://HOST:PORT with nothing after the port: an etcd endpoint or an advertised URL. */
static bool valid_http_url(const char *u, size_t len)
{
	bool tls;
	uint16_t port;
	char host[128];
	return len > 0 && u[len - 1] != '/' &&
	       url_split(u, len, &tls, host, sizeof(host), &port) == 0 && !tls;
}

static int parse_endpoints(void *c, const char *key, const char *value, char *err, size_t errlen)
{
	struct ofcd_config *cfg = c;
	(void)key;
	unsigned n = 0;
	const char *p = value;

	memset(cfg->cluster_endpoints, 0, sizeof(cfg->cluster_endpoints));
	for (;;) {
		while (*p == ' ')
			p++;
		const char *end = strchr(p, ',');
		size_t len = end ? (size_t)(end - p) : strlen(p);
		while (len > 0 && p[len - 1] == ' ')
			len--;
		if (n == CONFIG_CLUSTER_MAX_ENDPOINTS) {
			snprintf(err, errlen, "at most %d endpoints", CONFIG_CLUSTER_MAX_ENDPOINTS);
			return -EINVAL;
		}
		if (len >= sizeof(cfg->cluster_endpoints[0]) || !valid_http_url(p, len)) {
			snprintf(err, errlen,
			         "expected a comma-separated list of http://HOST:PORT, got \"%s\"",
			         value);
			return -EINVAL;
		}
		memcpy(cfg->cluster_endpoints[n++], p, len);
		if (!end)
			break;
		p = end + 1;
	}
	cfg->cluster_nendpoints = n;
	return 0;
}

static int parse_advertise(void *c, const char *key, const char *value, char *err, size_t errlen)
{
	struct ofcd_config *cfg = c;
	(void)key;
	size_t len = strlen(value);
	if (len >= sizeof(cfg->cluster_advertise) || !valid_http_url(value, len)) {
		snprintf(err, errlen, "expected http://HOST:PORT, got \"%s\"", value);
		return -EINVAL;
	}
	memset(cfg->cluster_advertise, 0, sizeof(cfg->cluster_advertise));
	memcpy(cfg->cluster_advertise, value, len);
	return 0;
}

static int parse_prefix(void *c, const char *key, const char *value, char *err, size_t errlen)
{
	struct ofcd_config *cfg = c;
	(void)key;
	size_t len = strlen(value);
	bool ok = len >= 2 && len < sizeof(cfg->cluster_prefix) && value[0] == '/' &&
	          value[len - 1] != '/';
	for (size_t i = 0; ok && i < len; i++)
		ok = value[i] > ' ' && value[i] < 0x7f;
	if (!ok) {
		snprintf(err, errlen,
		         "expected a key prefix such as /ofcd (starts with /, no trailing /, "
		         "printable ASCII, at most %zu characters), got \"%s\"",
		         sizeof(cfg->cluster_prefix) - 1, value);
		return -EINVAL;
	}
	memset(cfg->cluster_prefix, 0, sizeof(cfg->cluster_prefix));
	memcpy(cfg->cluster_prefix, value, len);
	return 0;
}

const char *config_cost_range(const char *key)
{
	size_t len = key ? strlen(key) : 0;
	double v;

	/* cost_params_get() rejects names that are not parameters. */
	if (!key || cost_params_get(&(struct cost_params){ 0 }, key, &v) < 0)
		return NULL;
	if (len > 5 && strcmp(key + len - 5, "_gbps") == 0)
		return "a bandwidth in Gb/s from 1e-06 to 1e+09";
	return "a delay in us from 0 to 1e+09";
}

#define CFG(member) CFGTAB_FIELD(struct ofcd_config, member)

/* A [cost] key: the cost_params field of the same name, live. */
#define COST_KEY(field, lo, hi, noun, def_, doc_)                                                  \
	{                                                                                          \
		.section = "cost", .key = #field, .type = CFGTAB_DOUBLE, CFG(cost.field),          \
		.dmin = lo, .dmax = hi, .what = noun, .def = CFGTAB_STR(def_),                     \
		.flags = CFGTAB_LIVE, .doc = doc_                                                  \
	}
#define COST_GBPS(field, def_, doc_)                                                               \
	COST_KEY(field, COST_GBPS_MIN, COST_GBPS_MAX, "a bandwidth in Gb/s", def_, doc_)
#define COST_US(field, def_, doc_) COST_KEY(field, 0, COST_DELAY_MAX, "a delay in us", def_, doc_)

static const struct cfgtab_key config_keys[] = {
	{ .section = "http",
	  .key = "listen",
	  .type = CFGTAB_CUSTOM,
	  CFGTAB_SPAN(struct ofcd_config, listen_host, listen_port),
	  .parse = parse_listen,
	  .what = "HOST:PORT",
	  .def = "127.0.0.1:8470",
	  .doc = "address and port of the REST API (IPv6 as `[ADDR]:PORT`); a non-loopback "
	         "address needs [auth] tokens" },
	{ .section = "http",
	  .key = "admin_listen",
	  .type = CFGTAB_CUSTOM,
	  CFGTAB_SPAN(struct ofcd_config, admin_listen_host, admin_listen_port),
	  .parse = parse_admin_listen,
	  .what = "HOST:PORT",
	  .doc = "a second listener, plain HTTP, for probes and scrapes only (the routes that need "
	         "no token: `/v1/health`, `/metrics`, ...): its own 32 connections, so that they "
	         "answer whatever clients do to `listen`; unset, none" },
	{ .section = "http",
	  .key = "max_body",
	  .type = CFGTAB_UINT,
	  CFG(max_body),
	  .min = 1024,
	  .max = CONFIG_MAX_BODY_LIMIT,
	  .def = "1048576",
	  .flags = CFGTAB_LIVE,
	  .doc = "largest request body, bytes (larger: 413)" },
	{ .section = "http",
	  .key = "max_connections",
	  .type = CFGTAB_UINT,
	  CFG(max_connections),
	  .min = 1,
	  .max = 65536,
	  .def = "1024",
	  .doc = "simultaneous HTTP connections (a few more are kept for `GET /v1/health` "
	         "and `/metrics`; keep the file descriptor limit above it: `LimitNOFILE` in "
	         "the unit)" },
	{ .section = "http",
	  .key = "max_connections_per_ip",
	  .type = CFGTAB_UINT,
	  CFG(max_connections_per_ip),
	  .min = 1,
	  .max = 65536,
	  .def = "64",
	  .doc = "simultaneous connections from one client address (more are closed at once)" },
	{ .section = "http",
	  .key = "request_timeout",
	  .type = CFGTAB_UINT,
	  CFG(request_timeout_s),
	  .min = 1,
	  .max = 3600,
	  .what = "seconds",
	  .def = "10",
	  .doc = "a connection that sends nothing for this long while a request is due (a new "
	         "connection, half a request) is closed" },
	{ .section = "http",
	  .key = "idle_timeout",
	  .type = CFGTAB_UINT,
	  CFG(idle_timeout_s),
	  .min = 1,
	  .max = 3600,
	  .what = "seconds",
	  .def = "120",
	  .doc = "a keep-alive connection idle this long between requests is closed" },
	{ .section = "http",
	  .key = "header_timeout",
	  .type = CFGTAB_UINT,
	  CFG(header_timeout_s),
	  .min = 1,
	  .max = 3600,
	  .what = "seconds",
	  .def = "10",
	  .doc = "a new connection must send its whole request header within this long, however "
	         "it trickles (a kept-alive one its next header within `idle_timeout`); past it "
	         "the connection is cut" },
	{ .section = "http",
	  .key = "body_min_rate",
	  .type = CFGTAB_UINT,
	  CFG(body_min_rate),
	  .min = 1,
	  .max = 1073741824,
	  .what = "bytes per second",
	  .def = "1024",
	  .doc = "a request body must arrive at this rate on average once `header_timeout` has "
	         "passed since its header, or the connection is cut" },
	{ .section = "http",
	  .key = "tls_cert",
	  .type = CFGTAB_STRING,
	  CFG(tls_cert),
	  .what = "a file path",
	  .doc = "PEM certificate (chain) to serve HTTPS with, with `tls_key`; read at start, so "
	         "a renewed certificate needs a restart" },
	{ .section = "http",
	  .key = "tls_key",
	  .type = CFGTAB_STRING,
	  CFG(tls_key),
	  .what = "a file path",
	  .doc = "PEM private key of `tls_cert` (readable by the service only)" },
	{ .section = "http",
	  .key = "tls_priorities",
	  .type = CFGTAB_STRING,
	  CFG(tls_priorities),
	  .what = "a GnuTLS priority string",
	  .def = "NORMAL:-VERS-ALL:+VERS-TLS1.3:+VERS-TLS1.2:-CIPHER-ALL:+AES-128-GCM:+AES-256-GCM:"
	         "+CHACHA20-POLY1305",
	  .doc = "the TLS versions and cipher suites HTTPS offers; the default is TLS 1.2 and 1.3 "
	         "with AEAD ciphers only (no CBC, no TLS 1.0 or 1.1)" },
	{ .section = "http",
	  .key = "allow_plaintext_tokens",
	  .type = CFGTAB_BOOL,
	  CFG(allow_plaintext_tokens),
	  .def = "false",
	  .flags = CFGTAB_LIVE,
	  .doc = "accept bearer tokens over plain HTTP on a non-loopback address (without TLS they "
	         "cross the network in clear)" },
	{ .section = "store",
	  .key = "path",
	  .type = CFGTAB_STRING,
	  CFG(store_path),
	  .what = "a file path",
	  .def = "var/ofcd.db",
	  .doc = "SQLite file (`-wal` and `-shm` files beside it)" },
	{ .section = "log",
	  .key = "level",
	  .type = CFGTAB_ENUM,
	  CFG(log_level),
	  .choices = log_level_choices,
	  .def = "info",
	  .flags = CFGTAB_LIVE,
	  .doc = "most verbose level logged" },
	{ .section = "auth",
	  .key = "token.NAME",
	  .type = CFGTAB_CUSTOM,
	  CFG(tokens),
	  .parse = parse_token,
	  .what = "ROLE:SECRET",
	  .flags = CFGTAB_LIVE,
	  .doc = "a bearer token: ROLE `read` or `admin`, or `agent:SERVER:SECRET` for the host "
	         "agent of one server; SECRET 16–128 characters of `[A-Za-z0-9-._~+/=]`" },
	{ .section = "auth",
	  .key = "allow_unauthenticated",
	  .type = CFGTAB_BOOL,
	  CFG(allow_unauthenticated),
	  .def = "false",
	  .flags = CFGTAB_LIVE,
	  .doc = "allow a non-loopback listen address with no tokens" },
	{ .section = "reconcile",
	  .key = "audit_interval",
	  .type = CFGTAB_UINT,
	  CFG(audit_interval_s),
	  .min = 1,
	  .max = 86400,
	  .def = "30",
	  .flags = CFGTAB_LIVE,
	  .doc = "seconds between OCS read-back audits" },
	{ .section = "debug",
	  .key = "faults",
	  .type = CFGTAB_BOOL,
	  CFG(debug_faults),
	  .def = "false",
	  .flags = CFGTAB_LIVE,
	  .doc = "enable fault injection routes for sim units" },
	{ .section = "cluster",
	  .key = "etcd",
	  .type = CFGTAB_CUSTOM,
	  CFGTAB_SPAN(struct ofcd_config, cluster_endpoints, cluster_nendpoints),
	  .parse = parse_endpoints,
	  .what = "URL,URL,...",
	  .doc = "etcd client URLs (`http://HOST:PORT`, at most 8), tried in turn; unset: the "
	         "single embedded daemon, no cluster (see docs/ha.md)" },
	{ .section = "cluster",
	  .key = "name",
	  .type = CFGTAB_NAME,
	  CFG(cluster_name),
	  .doc = "this member's name, unique in the cluster (needed with `etcd`)" },
	{ .section = "cluster",
	  .key = "advertise",
	  .type = CFGTAB_CUSTOM,
	  CFG(cluster_advertise),
	  .parse = parse_advertise,
	  .what = "URL",
	  .doc = "`http://HOST:PORT` where clients reach this member's REST API: followers "
	         "redirect writes there (needed with `etcd`)" },
	{ .section = "cluster",
	  .key = "lease_ttl",
	  .type = CFGTAB_UINT,
	  CFG(cluster_lease_ttl_s),
	  .min = 1,
	  .max = 60,
	  .what = "seconds",
	  .def = "5",
	  .doc = "TTL of the leader's etcd lease: a leader that cannot renew it steps down "
	         "before it expires; a dead leader is replaced after about this long. At "
	         "least 3× the longest write: a topology `PUT` of thousands of servers holds "
	         "the loop for seconds (docs/ha.md)" },
	{ .section = "cluster",
	  .key = "prefix",
	  .type = CFGTAB_CUSTOM,
	  CFG(cluster_prefix),
	  .parse = parse_prefix,
	  .what = "/KEY",
	  .def = "/ofcd",
	  .doc = "etcd key prefix of this cluster (leader key, replication log); the stores "
	         "belong to its log: moving a running cluster to another prefix takes the steps "
	         "of ha.md, \"etcd restored\"" },
	{ .section = "cluster",
	  .key = "log_keep",
	  .type = CFGTAB_UINT,
	  CFG(cluster_log_keep),
	  .min = 1,
	  .max = 10000000,
	  .what = "entries",
	  .def = "10000",
	  .doc = "replicated changes the leader keeps in etcd; a member further behind "
	         "(down for long) copies a snapshot of the leader's store instead; the leader "
	         "keeps more (up to 4 ×) while another member that is up is further behind" },
	{ .section = "cluster",
	  .key = "token",
	  .type = CFGTAB_STRING,
	  CFG(cluster_token),
	  .what = "secret",
	  .doc = "bearer token (an admin token of the other members' `[auth]`) this member "
	         "presents when it fetches a snapshot; needed when they have tokens" },
	{ .section = "netconf",
	  .key = "key",
	  .type = CFGTAB_STRING,
	  CFG(netconf_key),
	  .what = "a file path",
	  .doc = "SSH private key (OpenSSH or PEM, no passphrase) the `netconf` driver logs in "
	         "to every unit with; never stored nor shown by the API" },
	{ .section = "netconf",
	  .key = "key.UNIT",
	  .type = CFGTAB_CUSTOM,
	  CFGTAB_SPAN(struct ofcd_config, netconf_units, netconf_nunits),
	  .parse = parse_unit_setting,
	  .what = "a file path",
	  .doc = "the private key of the one OCS unit named UNIT, instead of `key`" },
	{ .section = "netconf",
	  .key = "known_hosts",
	  .type = CFGTAB_STRING,
	  CFG(netconf_known_hosts),
	  .what = "a file path",
	  .doc = "OpenSSH known-hosts file holding every unit's host key: a unit whose key is not "
	         "there, or differs, is refused (no trust on first use)" },
	{ .section = "netconf",
	  .key = "known_hosts.UNIT",
	  .type = CFGTAB_CUSTOM,
	  CFGTAB_SPAN(struct ofcd_config, netconf_units, netconf_nunits),
	  .parse = parse_unit_setting,
	  .what = "a file path",
	  .doc = "the known-hosts file of the one OCS unit named UNIT" },
	{ .section = "netconf",
	  .key = "model",
	  .type = CFGTAB_STRING,
	  CFG(netconf_model),
	  .what = "a model",
	  .def = "ofcd",
	  .doc =
	      "the units' YANG model of cross-connects: `ofcd`, `polatis`, or "
	      "`NAMESPACE CONTAINER LIST INGRESS EGRESS` (docs/drivers.md); a unit whose model is "
	      "not one of these stays down and says why" },
	{ .section = "netconf",
	  .key = "model.UNIT",
	  .type = CFGTAB_CUSTOM,
	  CFGTAB_SPAN(struct ofcd_config, netconf_units, netconf_nunits),
	  .parse = parse_unit_setting,
	  .what = "a model",
	  .doc = "the model of the one OCS unit named UNIT" },
	{ .section = "netconf",
	  .key = "yang_dir",
	  .type = CFGTAB_STRING,
	  CFG(netconf_yang_dir),
	  .what = "a directory",
	  .doc = "YANG modules the driver reads before asking a unit for them (`<get-schema>`)" },
	COST_GBPS(inter_gbps, COST_DEFAULT_INTER_GBPS,
	          "circuit bandwidth between two servers, one direction, Gb/s"),
	COST_US(inter_latency_us, COST_DEFAULT_INTER_LATENCY_US,
	        "fixed cost of one send over a circuit, µs"),
	COST_GBPS(intra_gbps, COST_DEFAULT_INTRA_GBPS,
	          "one device-to-device link inside a server, one direction, Gb/s"),
	COST_US(intra_latency_us, COST_DEFAULT_INTRA_LATENCY_US,
	        "fixed cost of one in-server hop or collective step, µs"),
	COST_GBPS(bridge_gbps, COST_DEFAULT_BRIDGE_GBPS,
	          "the PCIe bridge joining the two groups of a `two-groups` server (Gen5 x16), "
	          "Gb/s"),
	COST_US(p2p_read_us, COST_DEFAULT_P2P_READ_US,
	        "delay of a P2P read of a peer device's memory, µs"),
	COST_US(p2p_write_us, COST_DEFAULT_P2P_WRITE_US,
	        "delay of a P2P write into a peer device's memory, µs"),
};

const struct cfgtab config_table = { config_keys, sizeof(config_keys) / sizeof(config_keys[0]) };

int config_defaults(struct ofcd_config *cfg, char *err, size_t errlen)
{
	memset(cfg, 0, sizeof(*cfg));
	strcpy(cfg->source, "(built-in)");
	return cfgtab_defaults(&config_table, cfg, err, errlen);
}

void config_free(struct ofcd_config *cfg)
{
	auth_tokens_free(&cfg->tokens);
}

const char *config_driver_setting(const struct ofcd_config *cfg, const char *driver,
                                  const char *unit, const char *key)
{
	static const struct {
		const char *key;
		size_t offset;
	} section[] = {
		{ "key", offsetof(struct ofcd_config, netconf_key) },
		{ "known_hosts", offsetof(struct ofcd_config, netconf_known_hosts) },
		{ "model", offsetof(struct ofcd_config, netconf_model) },
		{ "yang_dir", offsetof(struct ofcd_config, netconf_yang_dir) },
	};
	if (!driver || strcmp(driver, "netconf") != 0)
		return NULL;
	for (unsigned i = 0; unit && i < cfg->netconf_nunits; i++) {
		if (strcmp(cfg->netconf_units[i].key, key) == 0 &&
		    strcmp(cfg->netconf_units[i].unit, unit) == 0)
			return cfg->netconf_units[i].value;
	}
	for (size_t i = 0; i < sizeof(section) / sizeof(section[0]); i++) {
		if (strcmp(section[i].key, key) == 0) {
			const char *v = (const char *)cfg + section[i].offset;
			return *v ? v : NULL;
		}
	}
	return NULL;
}

/* Numeric addresses only (and "localhost"): a name could resolve to anything. */
bool config_host_is_loopback(const char *host)
{
	struct in_addr v4;
	struct in6_addr v6;
	if (strcmp(host, "localhost") == 0)
		return true;
	if (inet_pton(AF_INET, host, &v4) == 1)
		return (ntohl(v4.s_addr) >> 24) == 127;
	return inet_pton(AF_INET6, host, &v6) == 1 && IN6_IS_ADDR_LOOPBACK(&v6);
}

bool config_auth_safe(const struct ofcd_config *next, const char *host, bool tls, char *err,
                      size_t errlen)
{
	if (config_host_is_loopback(host))
		return true;
	if (next->tokens.n == 0 && !next->allow_unauthenticated) {
		snprintf(err, errlen,
		         "%s: [http] listen: %s is not a loopback address and no [auth] token is "
		         "configured; add tokens or set [auth] allow_unauthenticated = true",
		         next->source, host);
		return false;
	}
	if (next->tokens.n == 0 || tls || next->allow_plaintext_tokens)
		return true;
	snprintf(err, errlen,
	         "%s: [http] listen: %s is not a loopback address and there is no TLS, so the "
	         "[auth] tokens would cross the network in clear; set [http] tls_cert and tls_key, "
	         "or [http] allow_plaintext_tokens = true",
	         next->source, host);
	return false;
}

/* Checks that span several keys, after all keys are read. */
static int config_validate(const struct ofcd_config *cfg, char *err, size_t errlen)
{
	if (!cfg->tls_cert[0] != !cfg->tls_key[0]) {
		snprintf(err, errlen, "%s: [http] %s is set without %s: TLS needs both",
		         cfg->source, cfg->tls_cert[0] ? "tls_cert" : "tls_key",
		         cfg->tls_cert[0] ? "tls_key" : "tls_cert");
		return -EINVAL;
	}
	if (!config_auth_safe(cfg, cfg->listen_host, cfg->tls_cert[0] != '\0', err, errlen))
		return -EINVAL;
	bool named = cfg->cluster_name[0] || cfg->cluster_advertise[0];
	if (cfg->cluster_nendpoints > 0 && !(cfg->cluster_name[0] && cfg->cluster_advertise[0])) {
		snprintf(err, errlen, "%s: [cluster] etcd needs [cluster] name and advertise",
		         cfg->source);
		return -EINVAL;
	}
	if (cfg->cluster_nendpoints == 0 && named) {
		snprintf(err, errlen, "%s: [cluster] name and advertise need [cluster] etcd",
		         cfg->source);
		return -EINVAL;
	}
	return 0;
}

static int load(const char *path, const char *text, const char *name, struct ofcd_config *cfg,
                char *err, size_t errlen)
{
	int rc = config_defaults(cfg, err, errlen);
	snprintf(cfg->source, sizeof(cfg->source), "%s", name);
	if (rc == 0)
		rc = cfgtab_load(&config_table, cfg, path, text, name, err, errlen);
	return rc < 0 ? rc : config_validate(cfg, err, errlen);
}

int config_load(const char *path, struct ofcd_config *cfg, char *err, size_t errlen)
{
	return load(path, NULL, path, cfg, err, errlen);
}

int config_load_string(const char *text, const char *name, struct ofcd_config *cfg, char *err,
                       size_t errlen)
{
	return load(NULL, text, name, cfg, err, errlen);
}

static void warn_if_exposed(const char *path, const char *what)
{
	char msg[1024];
	if (path[0] && secret_file_exposed(path, what, msg, sizeof(msg)))
		log_warn("config", "%s", msg);
}

/* Whether [netconf] key.UNIT entry i names a file warned of before it: units often share one. */
static bool netconf_key_seen(const struct ofcd_config *cfg, unsigned i)
{
	const char *file = cfg->netconf_units[i].value;
	if (strcmp(file, cfg->netconf_key) == 0)
		return true;
	for (unsigned j = 0; j < i; j++)
		if (strcmp(cfg->netconf_units[j].key, "key") == 0 &&
		    strcmp(cfg->netconf_units[j].value, file) == 0)
			return true;
	return false;
}

void config_warn_exposed(const char *path, const struct ofcd_config *cfg)
{
	if (cfg->tokens.n || cfg->cluster_token[0])
		warn_if_exposed(path, "token secrets");
	warn_if_exposed(cfg->tls_key, "the API's TLS private key");
	warn_if_exposed(cfg->netconf_key, "an SSH private key of the NETCONF units");
	for (unsigned i = 0; i < cfg->netconf_nunits; i++)
		if (strcmp(cfg->netconf_units[i].key, "key") == 0 && !netconf_key_seen(cfg, i))
			warn_if_exposed(cfg->netconf_units[i].value,
			                "an SSH private key of the NETCONF units");
}
