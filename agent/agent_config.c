/*
 * The agent's configuration file, read with libinih in the strict style of
 * config.c: one table of {section, key, parser}; unknown sections and keys,
 * keys given twice and bad values stop loading with FILE:LINE.
 */
#include "agent.h"

#include "conffile.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* A whole number in [min, max]; the callers word their own messages. */
static int parse_number(const char *value, unsigned long min, unsigned long max, unsigned long *out)
{
	unsigned long long v;
	char why[128];
	if (conffile_uint(value, min, max, &v, why, sizeof(why)) < 0)
		return -EINVAL;
	*out = (unsigned long)v;
	return 0;
}

static int parse_controller(void *c, const char *key, const char *value, char *err, size_t errlen)
{
	struct agent_config *cfg = c;
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

static int parse_server(void *c, const char *key, const char *value, char *err, size_t errlen)
{
	struct agent_config *cfg = c;
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

/* The controller's own rule, so a secret that loads here is one the controller can hold. */
static int parse_token(void *c, const char *key, const char *value, char *err, size_t errlen)
{
	struct agent_config *cfg = c;
	(void)key;
	if (!auth_valid_secret(value)) {
		snprintf(err, errlen, "secret must be %d to %d characters of [A-Za-z0-9-._~+/=]",
		         AUTH_SECRET_MIN, AUTH_SECRET_MAX);
		return -EINVAL;
	}
	snprintf(cfg->token, sizeof(cfg->token), "%s", value);
	return 0;
}

static int parse_heartbeat(void *c, const char *key, const char *value, char *err, size_t errlen)
{
	struct agent_config *cfg = c;
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

static int parse_device(void *c, const char *key, const char *value, char *err, size_t errlen)
{
	struct agent_config *cfg = c;
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

static int parse_map(void *c, const char *key, const char *value, char *err, size_t errlen)
{
	struct agent_config *cfg = c;
	(void)key;
	if (strcmp(value, "pci-order") != 0) {
		snprintf(err, errlen, "expected pci-order (or device.N = DEV:PORT lines instead)");
		return -EINVAL;
	}
	cfg->pci_order = true;
	return 0;
}

static int parse_source(void *c, const char *key, const char *value, char *err, size_t errlen)
{
	struct agent_config *cfg = c;
	(void)key;
	cfg->source = rdma_source_find(value);
	if (!cfg->source) {
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

static int parse_recorded_inventory(void *c, const char *key, const char *value, char *err,
                                    size_t errlen)
{
	struct agent_config *cfg = c;
	(void)key;
	return parse_path(cfg->recorded_inventory, sizeof(cfg->recorded_inventory), value, err,
	                  errlen);
}

static int parse_recorded_events(void *c, const char *key, const char *value, char *err,
                                 size_t errlen)
{
	struct agent_config *cfg = c;
	(void)key;
	return parse_path(cfg->recorded_events, sizeof(cfg->recorded_events), value, err, errlen);
}

static int parse_log_level(void *c, const char *key, const char *value, char *err, size_t errlen)
{
	struct agent_config *cfg = c;
	(void)key;
	if (log_parse_level(value, &cfg->log_level) < 0) {
		snprintf(err, errlen, "expected error, warn, info or debug, got \"%s\"", value);
		return -EINVAL;
	}
	return 0;
}

static const struct conffile_key agent_keys[] = {
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

static void agent_defaults(struct agent_config *cfg, const char *name)
{
	memset(cfg, 0, sizeof(*cfg));
	snprintf(cfg->path, sizeof(cfg->path), "%s", name);
	cfg->heartbeat_s = AGENT_HEARTBEAT_DEFAULT;
	cfg->source = &rdma_verbs_source;
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
static int agent_validate(const struct conffile *ctx, const char *name, char *err, size_t errlen)
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
	else if (cfg->source == &rdma_recorded_source && !cfg->recorded_inventory[0])
		why = "[agent] source = recorded needs recorded_inventory = FILE";
	else if (cfg->source == &rdma_verbs_source &&
	         (conffile_seen(ctx, parse_recorded_inventory) ||
	          conffile_seen(ctx, parse_recorded_events)))
		why = "[agent] recorded_inventory and recorded_events need source = recorded";
	if (why) {
		snprintf(err, errlen, "%s: %s", name, why);
		return -EINVAL;
	}
	if (cfg->nmap)
		qsort(cfg->map, cfg->nmap, sizeof(*cfg->map), cmp_entry);
	return 0;
}

static int load(const char *path, const char *text, const char *name, struct agent_config *cfg,
                char *err, size_t errlen)
{
	struct conffile c = { .keys = agent_keys, .nkeys = AGENT_NKEYS, .cfg = cfg };
	agent_defaults(cfg, name);
	int rc = conffile_load(&c, path, text, name, err, errlen);
	return rc < 0 ? rc : agent_validate(&c, name, err, errlen);
}

int agent_config_load(const char *path, struct agent_config *cfg, char *err, size_t errlen)
{
	return load(path, NULL, path, cfg, err, errlen);
}

int agent_config_load_string(const char *text, const char *name, struct agent_config *cfg,
                             char *err, size_t errlen)
{
	return load(NULL, text, name, cfg, err, errlen);
}
