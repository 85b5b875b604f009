/* server list|get and device fail|ok: the servers and their devices. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cmd.h"
#include "table.h"

static int show_servers(const json_t *reply)
{
	static const char *const head[] = { "NAME",    "DEVICES", "PORTS/DEVICE", "P2P",  "INTRA",
		                            "OFFLOAD", "SWITCH",  "FABRIC",       "STALE" };
	static const char *const keys[] = { "name",   "devices", "ports_per_device",
		                            "p2p",    "intra",   "offload",
		                            "switch", "fabric",  "stale" };
	return cmd_print_rows(json_object_get(reply, "servers"), head, keys, 9);
}

int cmd_server_list(struct cmd_ctx *c)
{
	return cmd_get_show(c, "/v1/servers", show_servers);
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
	return rc;
}

int cmd_server_get(struct cmd_ctx *c)
{
	char *path = cmd_path(c, "/v1/servers/", c->args.argv[0], "");
	if (!path)
		return CMD_UNREACHABLE;
	int rc = cmd_get_show(c, path, show_server);
	free(path);
	return rc;
}

/* PUT /v1/servers/SERVER/devices/INDEX {"state": state}, then the fabrics it re-planned. */
static int device_put(struct cmd_ctx *c, const char *state)
{
	static const char *const head[] = { "FABRIC", "STATE", "REVISION", "MISSING" };
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
	if (rc == CMD_OK && c->format == OUT_JSON) {
		cmd_print_body(&r);
	} else if (rc == CMD_OK) {
		const json_t *f;
		size_t i;
		struct table t;
		printf("%s device %ld: %s (%s)\n", c->args.argv[0], v,
		       json_string_value(json_object_get(r.json, "state")),
		       json_is_true(json_object_get(r.json, "changed")) ? "changed" : "unchanged");
		if (json_array_size(json_object_get(r.json, "fabrics"))) {
			putchar('\n');
			table_init(&t, 4, head);
			json_array_foreach(json_object_get(r.json, "fabrics"), i, f)
			{
				table_json(&t, json_object_get(f, "name"));
				table_json(&t, json_object_get(f, "state"));
				table_json(&t, json_object_get(f, "revision"));
				table_cell(&t, "%zu",
				           json_array_size(json_object_get(f, "missing")));
			}
			rc = table_print(&t, stdout) ? CMD_UNREACHABLE : CMD_OK;
			table_free(&t);
		}
	}
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
