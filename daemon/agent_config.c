/*
 * The agent's configuration file, read with libinih in the strict style of
 * config.c: one table of {section, key, parser}; unknown sections and keys,
 * keys given twice and bad values stop loading with FILE:LINE.
 */
#include "agent.h"

#include <errno.h>
#include <ini.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef int (*agent_parse_fn)(struct agent_config *cfg, const char *key, const char *value,
                              char *err, size_t errlen);

struct agent_key {
	const char *section;
	const char *key; /* a key ending in '.' is a prefix: "device." matches device.N */
	agent_parse_fn parse;
};

static int parse_number(const char *value, unsigned long min, unsigned long max, unsigned long *out)
{
	char *end;
	if (value[0] < '0' || value[0] > '9')
		return -EINVAL;
	errno = 0;
	unsigned long v = strtoul(value, &end, 10);
	if (errno || *end || v < min || v > max)
		return -EINVAL;
	*out = v;
	return 0;
}

static int parse_controller(struct agent_config *cfg, const char *key, const char *value, char *err,
                            size_t errlen)
{
	(void)key;
	const char *p = value + strlen("http://");
	size_t len;
	unsigned long port;
	char portbuf[8];

	if (strncmp(value, "http://", 7) != 0 || strlen(value) >= sizeof(cfg->controller))
		goto bad;
	len = strlen(p);
	if (len && p[len - 1] == '/')
		len--;
	const char *colon = NULL;
	for (size_t i = 0; i < len; i++)
		if (p[i] == ':')
			colon = p + i;
	if (!colon || colon == p)
		goto bad;
	size_t hostlen = (size_t)(colon - p);
	const char *host = p;
	if (host[0] == '[') {
		if (hostlen < 3 || host[hostlen - 1] != ']')
			goto bad;
		host++;
		hostlen -= 2;
	} else if (memchr(host, ':', hostlen) || memchr(host, '/', hostlen)) {
		goto bad;
	}
	size_t portlen = len - hostlen - (size_t)(host != p ? 2 : 0) - 1;
	if (hostlen >= sizeof(cfg->host) || portlen == 0 || portlen >= sizeof(portbuf))
		goto bad;
	memcpy(portbuf, colon + 1, portlen);
	portbuf[portlen] = '\0';
	if (parse_number(portbuf, 1, 65535, &port) < 0)
		goto bad;
	memcpy(cfg->host, host, hostlen);
	cfg->host[hostlen] = '\0';
	cfg->port = (uint16_t)port;
	snprintf(cfg->controller, sizeof(cfg->controller), "%s", value);
	return 0;
bad:
	snprintf(err, errlen,
	         "expected http://HOST:PORT (IPv6 as http://[ADDR]:PORT; https is not supported), "
	         "got \"%s\"",
	         value);
	return -EINVAL;
}

static int parse_server(struct agent_config *cfg, const char *key, const char *value, char *err,
                        size_t errlen)
{
	(void)key;
	if (!auth_valid_name(value)) {
		snprintf(err, errlen,
		         "expected a server name of 1 to %d characters of "
		         "[A-Za-z0-9._-]",
		         AUTH_NAME_MAX);
		return -EINVAL;
	}
	snprintf(cfg->server, sizeof(cfg->server), "%s", value);
	return 0;
}

/* The same character set auth.c accepts, so a secret that loads here is one the controller knows.
 */
static int parse_token(struct agent_config *cfg, const char *key, const char *value, char *err,
                       size_t errlen)
{
	(void)key;
	size_t len = strlen(value);
	bool ok = len >= AUTH_SECRET_MIN && len <= AUTH_SECRET_MAX;
	for (size_t i = 0; ok && i < len; i++) {
		char c = value[i];
		ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
		     strchr("-._~+/=", c);
	}
	if (!ok) {
		snprintf(err, errlen, "secret must be %d to %d characters of [A-Za-z0-9-._~+/=]",
		         AUTH_SECRET_MIN, AUTH_SECRET_MAX);
		return -EINVAL;
	}
	snprintf(cfg->token, sizeof(cfg->token), "%s", value);
	return 0;
}

static int parse_heartbeat(struct agent_config *cfg, const char *key, const char *value, char *err,
                           size_t errlen)
{
	(void)key;
	unsigned long v;
	if (parse_number(value, 1, AGENT_HEARTBEAT_MAX, &v) < 0) {
		snprintf(err, errlen, "expected seconds from 1 to %d, got \"%s\"",
		         AGENT_HEARTBEAT_MAX, value);
		return -EINVAL;
	}
	cfg->heartbeat_s = (unsigned)v;
	return 0;
}

static int parse_device(struct agent_config *cfg, const char *key, const char *value, char *err,
                        size_t errlen)
{
	unsigned long index, port;
	const char *colon = strrchr(value, ':');
	size_t devlen = colon ? (size_t)(colon - value) : 0;

	if (parse_number(key + strlen("device."), 0, RDMA_MAX_DEVICES - 1, &index) < 0) {
		snprintf(err, errlen, "expected device.N with N a device index from 0 to %d",
		         RDMA_MAX_DEVICES - 1);
		return -EINVAL;
	}
	if (!colon || devlen == 0 || devlen >= RDMA_NAME_MAX ||
	    parse_number(colon + 1, 1, RDMA_MAX_PORTS, &port) < 0) {
		snprintf(err, errlen, "expected DEV:PORT (e.g. mlx5_0:1), got \"%s\"", value);
		return -EINVAL;
	}
	for (size_t i = 0; i < cfg->nmap; i++) {
		const struct agent_map_entry *m = &cfg->map[i];
		if (m->index == index) {
			snprintf(err, errlen, "device %lu is already mapped to %s:%u", index,
			         m->device, m->port);
			return -EINVAL;
		}
		if (m->port == port && strlen(m->device) == devlen &&
		    memcmp(m->device, value, devlen) == 0) {
			snprintf(err, errlen, "%s is already mapped to device %u", value, m->index);
			return -EINVAL;
		}
	}
	struct agent_map_entry *v = realloc(cfg->map, (cfg->nmap + 1) * sizeof(*v));
	if (!v) {
		snprintf(err, errlen, "out of memory");
		return -ENOMEM;
	}
	cfg->map = v;
	struct agent_map_entry *m = &cfg->map[cfg->nmap++];
	memset(m, 0, sizeof(*m));
	m->index = (uint32_t)index;
	memcpy(m->device, value, devlen);
	m->port = (uint8_t)port;
	return 0;
}

static int parse_map(struct agent_config *cfg, const char *key, const char *value, char *err,
                     size_t errlen)
{
	(void)key;
	if (strcmp(value, "pci-order") != 0) {
		snprintf(err, errlen, "expected pci-order (or device.N = DEV:PORT lines instead)");
		return -EINVAL;
	}
	cfg->pci_order = true;
	return 0;
}

static int parse_source(struct agent_config *cfg, const char *key, const char *value, char *err,
                        size_t errlen)
{
	(void)key;
	if (strcmp(value, "verbs") == 0)
		cfg->source = AGENT_SOURCE_VERBS;
	else if (strcmp(value, "recorded") == 0)
		cfg->source = AGENT_SOURCE_RECORDED;
	else {
		snprintf(err, errlen, "expected verbs or recorded, got \"%s\"", value);
		return -EINVAL;
	}
	return 0;
}

static int parse_path(char *out, size_t size, const char *value, char *err, size_t errlen)
{
	if (value[0] == '\0' || strlen(value) >= size) {
		snprintf(err, errlen, "expected a file path of 1 to %zu characters", size - 1);
		return -EINVAL;
	}
	snprintf(out, size, "%s", value);
	return 0;
}

static int parse_recorded_inventory(struct agent_config *cfg, const char *key, const char *value,
                                    char *err, size_t errlen)
{
	(void)key;
	return parse_path(cfg->recorded_inventory, sizeof(cfg->recorded_inventory), value, err,
	                  errlen);
}

static int parse_recorded_events(struct agent_config *cfg, const char *key, const char *value,
                                 char *err, size_t errlen)
{
	(void)key;
	return parse_path(cfg->recorded_events, sizeof(cfg->recorded_events), value, err, errlen);
}

static int parse_log_level(struct agent_config *cfg, const char *key, const char *value, char *err,
                           size_t errlen)
{
	(void)key;
	if (log_parse_level(value, &cfg->log_level) < 0) {
		snprintf(err, errlen, "expected error, warn, info or debug, got \"%s\"", value);
		return -EINVAL;
	}
	return 0;
}

static const struct agent_key agent_keys[] = {
	{ "agent", "controller", parse_controller },
	{ "agent", "server", parse_server },
	{ "agent", "token", parse_token },
	{ "agent", "heartbeat", parse_heartbeat },
	{ "agent", "device.", parse_device },
	{ "agent", "map", parse_map },
	{ "agent", "source", parse_source },
	{ "agent", "recorded_inventory", parse_recorded_inventory },
	{ "agent", "recorded_events", parse_recorded_events },
	{ "log", "level", parse_log_level },
};

#define AGENT_NKEYS (sizeof(agent_keys) / sizeof(agent_keys[0]))

struct agent_ctx {
	struct agent_config *cfg;
	bool seen[AGENT_NKEYS];
	char err[512];
};

static const struct agent_key *find_key(const char *section, const char *name, bool *known_sect)
{
	*known_sect = false;
	for (size_t i = 0; i < AGENT_NKEYS; i++) {
		const struct agent_key *k = &agent_keys[i];
		if (strcmp(k->section, section) != 0)
			continue;
		*known_sect = true;
		size_t klen = strlen(k->key);
		if (k->key[klen - 1] == '.' ? strncmp(k->key, name, klen) == 0
		                            : strcmp(k->key, name) == 0)
			return k;
	}
	return NULL;
}

static bool was_seen(const struct agent_ctx *ctx, agent_parse_fn fn)
{
	for (size_t i = 0; i < AGENT_NKEYS; i++)
		if (agent_keys[i].parse == fn && ctx->seen[i])
			return true;
	return false;
}

static int agent_handler(void *user, const char *section, const char *name, const char *value)
{
	struct agent_ctx *ctx = user;
	bool known_sect;
	const struct agent_key *k = find_key(section, name, &known_sect);
	char why[400] = "";

	if (ctx->err[0])
		return 0;
	if (!known_sect) {
		snprintf(ctx->err, sizeof(ctx->err), "[%s] %s: unknown section", section, name);
		return 0;
	}
	if (!k) {
		snprintf(ctx->err, sizeof(ctx->err), "[%s] %s: unknown key", section, name);
		return 0;
	}
	size_t idx = (size_t)(k - agent_keys);
	bool prefix = k->key[strlen(k->key) - 1] == '.';
	if (!prefix && ctx->seen[idx]) {
		snprintf(ctx->err, sizeof(ctx->err), "[%s] %s: key given twice", section, name);
		return 0;
	}
	ctx->seen[idx] = true;
	if (k->parse(ctx->cfg, name, value, why, sizeof(why)) < 0) {
		snprintf(ctx->err, sizeof(ctx->err), "[%s] %s: %s", section, name, why);
		return 0;
	}
	return 1;
}

static void agent_defaults(struct agent_config *cfg, const char *name)
{
	memset(cfg, 0, sizeof(*cfg));
	snprintf(cfg->path, sizeof(cfg->path), "%s", name);
	cfg->heartbeat_s = AGENT_HEARTBEAT_DEFAULT;
	cfg->source = AGENT_SOURCE_VERBS;
	cfg->log_level = LOG_LVL_INFO;
}

void agent_config_free(struct agent_config *cfg)
{
	free(cfg->map);
	cfg->map = NULL;
	cfg->nmap = 0;
	explicit_bzero(cfg->token, sizeof(cfg->token));
}

static int cmp_entry(const void *a, const void *b)
{
	const struct agent_map_entry *x = a, *y = b;
	return x->index < y->index ? -1 : x->index > y->index;
}

/* Checks that span several keys, after the whole file is read. */
static int agent_validate(struct agent_ctx *ctx, const char *name, char *err, size_t errlen)
{
	struct agent_config *cfg = ctx->cfg;
	const char *why = NULL;

	if (!cfg->controller[0])
		why = "[agent] controller is required (controller = http://HOST:PORT)";
	else if (!cfg->server[0])
		why = "[agent] server is required (the server's name at the controller)";
	else if (cfg->pci_order && cfg->nmap)
		why = "[agent] map = pci-order and device.N lines exclude each other";
	else if (!cfg->pci_order && !cfg->nmap)
		why = "[agent] needs device.N = DEV:PORT lines or map = pci-order";
	else if (cfg->source == AGENT_SOURCE_RECORDED && !cfg->recorded_inventory[0])
		why = "[agent] source = recorded needs recorded_inventory = FILE";
	else if (cfg->source == AGENT_SOURCE_VERBS &&
	         (was_seen(ctx, parse_recorded_inventory) || was_seen(ctx, parse_recorded_events)))
		why = "[agent] recorded_inventory and recorded_events need source = recorded";
	if (why) {
		snprintf(err, errlen, "%s: %s", name, why);
		return -EINVAL;
	}
	if (cfg->nmap)
		qsort(cfg->map, cfg->nmap, sizeof(*cfg->map), cmp_entry);
	return 0;
}

static int agent_finish(int rc, struct agent_ctx *ctx, const char *name, char *err, size_t errlen)
{
	if (rc == -1) {
		snprintf(err, errlen, "%s: cannot open: %s", name, strerror(errno));
		return -ENOENT;
	}
	if (rc == -2) {
		snprintf(err, errlen, "%s: out of memory", name);
		return -ENOMEM;
	}
	if (rc > 0) {
		if (ctx->err[0])
			snprintf(err, errlen, "%s:%d: %s", name, rc, ctx->err);
		else
			snprintf(err, errlen,
			         "%s:%d: syntax error (expected [section] or key = value)", name,
			         rc);
		return -EINVAL;
	}
	return agent_validate(ctx, name, err, errlen);
}

int agent_config_load(const char *path, struct agent_config *cfg, char *err, size_t errlen)
{
	struct agent_ctx ctx = { .cfg = cfg };
	FILE *f;
	int rc;

	agent_defaults(cfg, path);
	errno = 0;
	f = fopen(path, "r");
	if (!f)
		return agent_finish(-1, &ctx, path, err, errlen);
	rc = ini_parse_file(f, agent_handler, &ctx);
	fclose(f);
	return agent_finish(rc, &ctx, path, err, errlen);
}

int agent_config_load_string(const char *text, const char *name, struct agent_config *cfg,
                             char *err, size_t errlen)
{
	struct agent_ctx ctx = { .cfg = cfg };
	agent_defaults(cfg, name);
	int rc = ini_parse_string(text, agent_handler, &ctx);
	return agent_finish(rc, &ctx, name, err, errlen);
}
