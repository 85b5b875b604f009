#include "config.h"

#include "conffile.h"

#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int parse_listen(void *c, const char *key, const char *value, char *err, size_t errlen)
{
	struct ofcd_config *cfg = c;
	(void)key;
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
	if (hostlen >= sizeof(cfg->listen_host))
		goto bad;
	unsigned long long port;
	if (conffile_uint(colon + 1, 0, 65535, &port, err, errlen) < 0)
		goto bad;
	memcpy(cfg->listen_host, host, hostlen);
	cfg->listen_host[hostlen] = '\0';
	cfg->listen_port = (uint16_t)port;
	return 0;
bad:
	snprintf(err, errlen, "expected HOST:PORT (IPv6 as [ADDR]:PORT), got \"%s\"", value);
	return -EINVAL;
}

static int parse_max_body(void *c, const char *key, const char *value, char *err, size_t errlen)
{
	struct ofcd_config *cfg = c;
	(void)key;
	unsigned long long v;
	if (conffile_uint(value, 1024, CONFIG_MAX_BODY_LIMIT, &v, err, errlen) < 0)
		return -EINVAL;
	cfg->max_body = (size_t)v;
	return 0;
}

static int parse_max_connections(void *c, const char *key, const char *value, char *err,
                                 size_t errlen)
{
	struct ofcd_config *cfg = c;
	(void)key;
	unsigned long long v;
	if (conffile_uint(value, 1, 65536, &v, err, errlen) < 0)
		return -EINVAL;
	cfg->max_connections = (unsigned)v;
	return 0;
}

static int parse_store_path(void *c, const char *key, const char *value, char *err, size_t errlen)
{
	struct ofcd_config *cfg = c;
	(void)key;
	if (value[0] == '\0' || strlen(value) >= sizeof(cfg->store_path)) {
		snprintf(err, errlen, "expected a file path of 1 to %zu characters",
		         sizeof(cfg->store_path) - 1);
		return -EINVAL;
	}
	strcpy(cfg->store_path, value);
	return 0;
}

static int parse_log_level(void *c, const char *key, const char *value, char *err, size_t errlen)
{
	struct ofcd_config *cfg = c;
	(void)key;
	if (log_parse_level(value, &cfg->log_level) < 0) {
		snprintf(err, errlen, "expected error, warn, info or debug, got \"%s\"", value);
		return -EINVAL;
	}
	return 0;
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

static int parse_allow_unauth(void *c, const char *key, const char *value, char *err, size_t errlen)
{
	struct ofcd_config *cfg = c;
	(void)key;
	return conffile_bool(value, &cfg->allow_unauthenticated, err, errlen);
}

static int parse_debug_faults(void *c, const char *key, const char *value, char *err, size_t errlen)
{
	struct ofcd_config *cfg = c;
	(void)key;
	return conffile_bool(value, &cfg->debug_faults, err, errlen);
}

static int parse_audit_interval(void *c, const char *key, const char *value, char *err,
                                size_t errlen)
{
	struct ofcd_config *cfg = c;
	(void)key;
	unsigned long long v;
	if (conffile_uint(value, 1, 86400, &v, err, errlen) < 0)
		return -EINVAL;
	cfg->audit_interval_s = (unsigned)v;
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

/* Every [cost] key is a cost_params field of the same name. */
static int parse_cost(void *c, const char *key, const char *value, char *err, size_t errlen)
{
	struct ofcd_config *cfg = c;
	struct cost_params next = cfg->cost;
	char *end;

	errno = 0;
	double v = strtod(value, &end);
	if (value[0] == '\0' || *end != '\0' || errno || !isfinite(v) ||
	    cost_params_set(&next, key, v) < 0 || cost_params_validate(&next, NULL) < 0) {
		snprintf(err, errlen, "expected %s, got \"%s\"", config_cost_range(key), value);
		return -EINVAL;
	}
	cfg->cost = next;
	return 0;
}

static const struct conffile_key config_keys[] = {
	{ "http", "listen", parse_listen },
	{ "http", "max_body", parse_max_body },
	{ "http", "max_connections", parse_max_connections },
	{ "store", "path", parse_store_path },
	{ "log", "level", parse_log_level },
	{ "auth", "token.", parse_token },
	{ "auth", "allow_unauthenticated", parse_allow_unauth },
	{ "debug", "faults", parse_debug_faults },
	{ "reconcile", "audit_interval", parse_audit_interval },
	{ "cost", "inter_gbps", parse_cost },
	{ "cost", "inter_latency_us", parse_cost },
	{ "cost", "intra_gbps", parse_cost },
	{ "cost", "intra_latency_us", parse_cost },
	{ "cost", "bridge_gbps", parse_cost },
	{ "cost", "p2p_read_us", parse_cost },
	{ "cost", "p2p_write_us", parse_cost },
};

#define CONFIG_NKEYS (sizeof(config_keys) / sizeof(config_keys[0]))

void config_defaults(struct ofcd_config *cfg)
{
	memset(cfg, 0, sizeof(*cfg));
	strcpy(cfg->source, "(built-in)");
	strcpy(cfg->listen_host, "127.0.0.1");
	cfg->listen_port = 8470;
	cfg->max_body = 1024 * 1024;
	cfg->max_connections = 1024;
	strcpy(cfg->store_path, "var/ofcd.db");
	cfg->log_level = LOG_LVL_INFO;
	cfg->audit_interval_s = 30;
	cfg->cost = cost_params_default();
}

void config_free(struct ofcd_config *cfg)
{
	auth_tokens_free(&cfg->tokens);
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

/* Checks that span several keys, after all keys are read. */
static int config_validate(const struct ofcd_config *cfg, char *err, size_t errlen)
{
	if (!config_host_is_loopback(cfg->listen_host) && cfg->tokens.n == 0 &&
	    !cfg->allow_unauthenticated) {
		snprintf(err, errlen,
		         "%s: [http] listen: %s is not a loopback address and no [auth] token is "
		         "configured; add tokens or set [auth] allow_unauthenticated = true",
		         cfg->source, cfg->listen_host);
		return -EINVAL;
	}
	return 0;
}

static int load(const char *path, const char *text, const char *name, struct ofcd_config *cfg,
                char *err, size_t errlen)
{
	struct conffile c = { .keys = config_keys, .nkeys = CONFIG_NKEYS, .cfg = cfg };
	config_defaults(cfg);
	snprintf(cfg->source, sizeof(cfg->source), "%s", name);
	int rc = conffile_load(&c, path, text, name, err, errlen);
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
