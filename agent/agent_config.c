/*
 * The agent's configuration file, read against its typed table (cfgtab.h) in
 * the strict style of the controller's: unknown sections and keys, keys given
 * twice and bad values stop loading with FILE:LINE.
 */
#include "agent.h"

#include "cfgtab.h"
#include "url.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* A whole number in [min, max]; the callers word their own messages. */
static int parse_number(const char *value, unsigned long min, unsigned long max, unsigned long *out)
{
	unsigned long long v;
	char why[128];
	if (cfgtab_uint(value, min, max, &v, why, sizeof(why)) < 0)
		return -EINVAL;
	*out = (unsigned long)v;
	return 0;
}

static int parse_controller(void *c, const char *key, const char *value, char *err, size_t errlen)
{
	struct agent_config *cfg = c;
	(void)key;
	size_t n = 0, len = strlen(value);
	const char *p = value;

	if (len >= sizeof(cfg->controller))
		goto bad;
	for (;;) {
		p += strspn(p, ", \t");
		if (!*p)
			break;
		size_t k = strcspn(p, ", \t");
		struct agent_controller *ctl = &cfg->controllers[n];
		bool tls;
		if (n == AGENT_CONTROLLERS_MAX || k >= sizeof(ctl->url) ||
		    url_split(p, k, &tls, ctl->host, sizeof(ctl->host), &ctl->port) < 0)
			goto bad;
		if (n && tls != cfg->tls) {
			snprintf(err, errlen, "the addresses must all be http:// or all https://");
			return -EINVAL;
		}
		snprintf(ctl->url, sizeof(ctl->url), "%.*s", (int)k, p);
		cfg->tls = tls;
		n++;
		p += k;
	}
	if (!n)
		goto bad;
	cfg->ncontrollers = n;
	snprintf(cfg->controller, sizeof(cfg->controller), "%s", value);
	return 0;
bad:
	snprintf(err, errlen,
	         "expected http://HOST:PORT or https://HOST:PORT (IPv6 as https://[ADDR]:PORT), "
	         "or up to %d of them separated by commas, got \"%s\"",
	         AGENT_CONTROLLERS_MAX, value);
	return -EINVAL;
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

/* An absolute directory path, kept without trailing slashes ("/" stays "/"). */
static int parse_runs_dir(void *c, const char *key, const char *value, char *err, size_t errlen)
{
	struct agent_config *cfg = c;
	size_t n = strlen(value);
	(void)key;
	if (value[0] != '/') {
		snprintf(err, errlen, "expected an absolute directory path, got \"%s\"", value);
		return -EINVAL;
	}
	while (n > 1 && value[n - 1] == '/')
		n--;
	if (n >= sizeof(cfg->runs_dir)) {
		snprintf(err, errlen, "path longer than %zu bytes", sizeof(cfg->runs_dir) - 1);
		return -EINVAL;
	}
	memcpy(cfg->runs_dir, value, n);
	cfg->runs_dir[n] = '\0';
	return 0;
}

#define AGENT(member) CFGTAB_FIELD(struct agent_config, member)

static const struct cfgtab_key agent_keys[] = {
	{ .section = "agent",
	  .key = "controller",
	  .type = CFGTAB_CUSTOM,
	  CFGTAB_SPAN(struct agent_config, controller, tls),
	  .parse = parse_controller,
	  .what = "https://HOST:PORT",
	  .doc =
	      "the controller's REST address: `https://` (its certificate checked against "
	      "`ca_file` and HOST) or `http://` (plain: the token crosses the network in clear); "
	      "IPv6 as `https://[ADDR]:PORT`. For an HA cluster, every member's address, "
	      "separated by commas (up to 8): the agent follows a member's 307 to the leader "
	      "among them, and tries the next one when the one it uses does not answer. Required" },
	{ .section = "agent",
	  .key = "ca_file",
	  .type = CFGTAB_STRING,
	  AGENT(ca_file),
	  .what = "a file path",
	  .doc = "PEM certificates of the CAs that sign the controller's certificate (or that "
	         "certificate itself); the system's CAs when not set. https only" },
	{ .section = "agent",
	  .key = "server",
	  .type = CFGTAB_NAME,
	  AGENT(server),
	  .what = "a server name",
	  .doc = "this server's name in the controller's topology. Required" },
	{ .section = "agent",
	  .key = "token",
	  .type = CFGTAB_CUSTOM,
	  AGENT(token),
	  .parse = parse_token,
	  .what = "SECRET",
	  .doc = "this server's agent secret, 16–128 characters of `[A-Za-z0-9-._~+/=]` "
	         "(`agent:SERVER:SECRET` in the controller's [auth])" },
	{ .section = "agent",
	  .key = "heartbeat",
	  .type = CFGTAB_UINT,
	  AGENT(heartbeat_s),
	  .min = 1,
	  .max = AGENT_HEARTBEAT_MAX,
	  .what = "seconds",
	  .def = CFGTAB_STR(AGENT_HEARTBEAT_DEFAULT),
	  .doc = "seconds between full reports; the server is stale after three missed" },
	{ .section = "agent",
	  .key = "device.N",
	  .type = CFGTAB_CUSTOM,
	  CFGTAB_SPAN(struct agent_config, map, nmap),
	  .parse = parse_device,
	  .what = "DEV:PORT",
	  .doc = "the RDMA port serving device index N, e.g. `device.0 = mlx5_0:1`" },
	{ .section = "agent",
	  .key = "map",
	  .type = CFGTAB_CUSTOM,
	  AGENT(pci_order),
	  .parse = parse_map,
	  .what = "pci-order",
	  .doc = "instead of `device.N`: every port numbered in PCI order at the agent's start" },
	{ .section = "agent",
	  .key = "source",
	  .type = CFGTAB_CUSTOM,
	  AGENT(source),
	  .parse = parse_source,
	  .what = "verbs or recorded",
	  .def = "verbs",
	  .doc = "libibverbs, or a recorded inventory and event script (tests and demos)" },
	{ .section = "agent",
	  .key = "recorded_inventory",
	  .type = CFGTAB_STRING,
	  AGENT(recorded_inventory),
	  .what = "a file path",
	  .doc = "`source = recorded`: the inventory JSON file" },
	{ .section = "agent",
	  .key = "recorded_events",
	  .type = CFGTAB_STRING,
	  AGENT(recorded_events),
	  .what = "a file path",
	  .doc = "`source = recorded`: the event script" },
	{ .section = "agent",
	  .key = "runs_dir",
	  .type = CFGTAB_CUSTOM,
	  AGENT(runs_dir),
	  .parse = parse_runs_dir,
	  .what = "a directory path",
	  .doc = "absolute path of a directory whose `*.json` and `*.nccl` files of measured runs "
	         "the agent sends to the controller, moving each into `done/` or `rejected/` "
	         "(created at start); not set: no collection" },
	{ .section = "log",
	  .key = "level",
	  .type = CFGTAB_ENUM,
	  AGENT(log_level),
	  .choices = log_level_choices,
	  .def = "info",
	  .doc = "most verbose level logged" },
};

const struct cfgtab agent_config_table = { agent_keys, sizeof(agent_keys) / sizeof(agent_keys[0]) };

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
static int agent_validate(struct agent_config *cfg, const char *name, char *err, size_t errlen)
{
	const char *why = NULL;

	if (!cfg->controller[0])
		why = "[agent] controller is required (controller = http://HOST:PORT)";
	else if (!cfg->server[0])
		why = "[agent] server is required (the server's name at the controller)";
	else if (cfg->pci_order && cfg->nmap)
		why = "[agent] map = pci-order and device.N lines exclude each other";
	else if (!cfg->pci_order && !cfg->nmap)
		why = "[agent] needs device.N = DEV:PORT lines or map = pci-order";
	else if (cfg->ca_file[0] && !cfg->tls)
		why = "[agent] ca_file needs an https:// controller";
	else if (cfg->source == &rdma_recorded_source && !cfg->recorded_inventory[0])
		why = "[agent] source = recorded needs recorded_inventory = FILE";
	else if (cfg->source == &rdma_verbs_source &&
	         (cfg->recorded_inventory[0] || cfg->recorded_events[0]))
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
	memset(cfg, 0, sizeof(*cfg));
	snprintf(cfg->path, sizeof(cfg->path), "%s", name);
	int rc = cfgtab_defaults(&agent_config_table, cfg, err, errlen);
	if (rc == 0)
		rc = cfgtab_load(&agent_config_table, cfg, path, text, name, err, errlen);
	return rc < 0 ? rc : agent_validate(cfg, name, err, errlen);
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
