/* server list|get and device fail|ok: the servers and their devices. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cmd.h"
#include "table.h"

/* The server list; wide adds the failed devices. */
static const char *const list_head[] = { "NAME",    "DEVICES", "PORTS/DEVICE", "P2P",   "INTRA",
	                                 "OFFLOAD", "SWITCH",  "FABRIC",       "STALE", "FAILED" };
static const char *const list_keys[] = { "name",  "devices",       "ports_per_device", "p2p",
	                                 "intra", "offload",       "switch",           "fabric",
	                                 "stale", "failed_devices" };

static int show_servers(const json_t *reply)
{
	return cmd_print_rows(json_object_get(reply, "servers"), list_head, list_keys, 9);
}

static int show_servers_wide(const json_t *reply)
{
	return cmd_print_rows(json_object_get(reply, "servers"), list_head, list_keys, 10);
}

/*
 * What changes a server's view: the topology, its devices, the units its
 * ports are cabled to, and a fabric taking or releasing it.
 */
static const char *const server_events[] = { "topology",   "device_state", "ocs_connection",
	                                     "port_state", "fabric",       NULL };

/* A server's joined ports, a line each: "joined: [SERVER ]device D port P: why". */
static void print_joined(const char *server, const json_t *joined)
{
	const json_t *p;
	size_t i;
	json_array_foreach(joined, i, p)
	{
		printf("joined: %s%sdevice %" JSON_INTEGER_FORMAT " port %" JSON_INTEGER_FORMAT
		       ": %s\n",
		       server ? server : "", server ? " " : "",
		       json_integer_value(json_object_get(p, "device")),
		       json_integer_value(json_object_get(p, "port")),
		       json_string_value(json_object_get(p, "why")));
	}
}

/* server list --joined: the list (cols columns), then each server's joined ports. */
static int show_joined_list(const json_t *reply, size_t cols)
{
	const json_t *servers = json_object_get(reply, "servers"), *s;
	size_t i;
	int rc = cmd_print_rows(servers, list_head, list_keys, cols);
	json_array_foreach(servers, i, s)
	{
		if (i == 0)
			putchar('\n');
		print_joined(json_string_value(json_object_get(s, "name")),
		             json_object_get(s, "joined"));
	}
	return rc;
}

static int show_joined(const json_t *reply)
{
	return show_joined_list(reply, 9);
}

static int show_joined_wide(const json_t *reply)
{
	return show_joined_list(reply, 10);
}

int cmd_server_list(struct cmd_ctx *c)
{
	if (c->args.given & OPT_JOINED) {
		/* A unit's read-back that frees a port sends no server event to watch for. */
		if (c->args.given & OPT_WATCH)
			return cmd_usage("--joined and --watch exclude each other");
		return cmd_get_show(c, "/v1/servers?joined=true", show_joined, show_joined_wide);
	}
	const struct watch_spec w = { .path = "/v1/servers",
		                      .kinds = server_events,
		                      .resource = "server",
		                      .table = show_servers,
		                      .wide = show_servers_wide };
	if (c->args.given & OPT_WATCH)
		return cmd_watch(c, &w);
	return cmd_get_show(c, w.path, show_servers, show_servers_wide);
}

/* One server: its settings, its inventory's heartbeat, then a row per device. */
static int show_server(const json_t *s)
{
	static const char *const keys[] = { "name",   "devices", "ports_per_device",
		                            "p2p",    "intra",   "offload",
		                            "switch", "fabric",  "stale" };
	static const char *const head[] = { "DEVICE", "STATE", "PORTS" };
	const json_t *inv = json_object_get(s, "inventory"), *d;
	char buf[4096];
	struct table t;
	size_t i;

	for (i = 0; i < sizeof(keys) / sizeof(keys[0]); i++)
		table_kv(keys[i], "%s", table_text(json_object_get(s, keys[i]), buf, sizeof(buf)));
	table_kv("heartbeat", "%s",
	         table_text(json_object_get(inv, "heartbeat"), buf, sizeof(buf)));
	putchar('\n');
	table_init(&t, 3, head);
	json_array_foreach(json_object_get(s, "device_info"), i, d)
	{
		const json_t *p;
		size_t k, used = 0;
		table_json(&t, json_object_get(d, "index"));
		table_json(&t, json_object_get(d, "state"));
		/* Each port as port:ocs/ocs_port, the cable it is on. */
		buf[0] = '\0';
		json_array_foreach(json_object_get(d, "ports"), k, p)
		{
			int w =
			    snprintf(buf + used, sizeof(buf) - used,
			             "%s%" JSON_INTEGER_FORMAT ":%s/%" JSON_INTEGER_FORMAT,
			             k ? "," : "", json_integer_value(json_object_get(p, "port")),
			             json_string_value(json_object_get(p, "ocs")),
			             json_integer_value(json_object_get(p, "ocs_port")));
			if (w < 0 || (size_t)w >= sizeof(buf) - used)
				break;
			used += (size_t)w;
		}
		table_cell(&t, "%s", used ? buf : "-");
	}
	int rc = table_print(&t, stdout) ? CMD_UNREACHABLE : CMD_OK;
	table_free(&t);
	if (json_array_size(json_object_get(s, "joined")))
		putchar('\n');
	print_joined(NULL, json_object_get(s, "joined"));
	return rc;
}

/* After --wait: exit 3 while a unit may still join one of the server's ports to another. */
static int judge_joined(struct cmd_ctx *c, const json_t *s, double wait_s)
{
	const json_t *joined = json_object_get(s, "joined");
	size_t n = json_array_size(joined);
	if (!(c->args.given & OPT_WAIT) || (json_is_array(joined) && n == 0))
		return CMD_OK;
	if (!json_is_array(joined))
		return cmd_fail(CMD_WAIT,
		                "server %s: the daemon did not say whether its ports are free",
		                json_string_value(json_object_get(s, "name")));
	return cmd_fail(CMD_WAIT, "server %s: %zu port%s still joined to another server after %g s",
	                json_string_value(json_object_get(s, "name")), n, n == 1 ? "" : "s",
	                wait_s);
}

int cmd_server_get(struct cmd_ctx *c)
{
	char q[32];
	double wait_s;
	if ((c->args.given & OPT_WATCH) && (c->args.given & OPT_WAIT))
		return cmd_usage("--wait and --watch exclude each other");
	int rc = cmd_wait_param(c, q, sizeof(q), &wait_s);
	if (rc)
		return rc;
	char *path = cmd_path(c, "/v1/servers/", c->args.argv[0], q);
	if (!path)
		return CMD_UNREACHABLE;
	const struct watch_spec w = { .path = path,
		                      .kinds = server_events,
		                      .resource = "server",
		                      .name = c->args.argv[0],
		                      .table = show_server };
	if (c->args.given & OPT_WATCH) {
		rc = cmd_watch(c, &w);
	} else {
		struct client_reply r = { 0 };
		rc = cmd_call(c, "GET", path, NULL, wait_s, &r);
		if (rc == CMD_OK)
			rc = cmd_print(c, &r, show_server, NULL);
		if (rc == CMD_OK)
			rc = judge_joined(c, r.json, wait_s);
		client_reply_free(&r);
	}
	free(path);
	return rc;
}

/* A device's new state, then the fabrics it re-planned. */
static int show_device(const json_t *reply)
{
	static const char *const head[] = { "FABRIC", "STATE", "REVISION", "MISSING" };
	const json_t *f;
	size_t i;
	struct table t;
	printf("%s device %" JSON_INTEGER_FORMAT ": %s (%s)\n",
	       json_string_value(json_object_get(reply, "server")),
	       json_integer_value(json_object_get(reply, "device")),
	       json_string_value(json_object_get(reply, "state")),
	       json_is_true(json_object_get(reply, "changed")) ? "changed" : "unchanged");
	if (!json_array_size(json_object_get(reply, "fabrics")))
		return CMD_OK;
	putchar('\n');
	table_init(&t, 4, head);
	json_array_foreach(json_object_get(reply, "fabrics"), i, f)
	{
		table_json(&t, json_object_get(f, "name"));
		table_json(&t, json_object_get(f, "state"));
		table_json(&t, json_object_get(f, "revision"));
		table_cell(&t, "%zu", json_array_size(json_object_get(f, "missing")));
	}
	int rc = table_print(&t, stdout) ? CMD_UNREACHABLE : CMD_OK;
	table_free(&t);
	return rc;
}

/* PUT /v1/servers/SERVER/devices/INDEX {"state": state}. */
static int device_put(struct cmd_ctx *c, const char *state)
{
	struct client_reply r = { 0 };
	const char *index = c->args.argv[1];
	char *end, after[64];
	errno = 0;
	long v = strtol(index, &end, 10);
	if (errno || end == index || *end || v < 0 || index[0] == '+' || index[0] == '-')
		return cmd_usage("device index must be a whole number from 0, got \"%s\"", index);
	snprintf(after, sizeof(after), "/devices/%ld", v);
	char *path = cmd_path(c, "/v1/servers/", c->args.argv[0], after);
	if (!path)
		return CMD_UNREACHABLE;
	char body[64];
	snprintf(body, sizeof(body), "{\"state\":\"%s\"}", state);
	int rc = cmd_call(c, "PUT", path, body, 0, &r);
	free(path);
	if (rc == CMD_OK)
		rc = cmd_print(c, &r, show_device, NULL);
	client_reply_free(&r);
	return rc;
}

int cmd_device_fail(struct cmd_ctx *c)
{
	return device_put(c, "failed");
}

int cmd_device_ok(struct cmd_ctx *c)
{
	return device_put(c, "ok");
}
