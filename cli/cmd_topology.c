/* topology get|put, wiring get|put and ocs list|get|cross-connects: the optical side. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cmd.h"
#include "table.h"

static int print_ocs_list(const json_t *list)
{
	static const char *const head[] = { "NAME", "DRIVER", "PORTS", "ENDPOINT" };
	static const char *const keys[] = { "name", "driver", "ports", "endpoint" };
	return cmd_print_rows(list, head, keys, 4);
}

static int show_topology(const json_t *reply)
{
	static const char *const shead[] = { "SERVER", "DEVICES", "PORTS/DEVICE", "P2P",
		                             "INTRA",  "OFFLOAD", "SWITCH" };
	static const char *const skeys[] = { "name",  "devices", "ports_per_device",
		                             "p2p",   "intra",   "offload",
		                             "switch" };
	static const char *const whead[] = { "SWITCH", "AGGREGATING", "OFFLOAD", "BUFFER",
		                             "WINDOW" };
	static const char *const wkeys[] = { "name", "aggregating", "offload", "buffer", "window" };
	const json_t *wiring = json_object_get(reply, "wiring");
	int rc = print_ocs_list(json_object_get(reply, "ocs"));
	putchar('\n');
	rc = rc ? rc : cmd_print_rows(json_object_get(reply, "servers"), shead, skeys, 7);
	if (!rc && json_array_size(json_object_get(reply, "switches"))) {
		putchar('\n');
		rc = cmd_print_rows(json_object_get(reply, "switches"), whead, wkeys, 5);
	}
	putchar('\n');
	if (json_object_get(wiring, "rule"))
		table_kv("wiring", "rule %s", json_string_value(json_object_get(wiring, "rule")));
	else
		table_kv("wiring", "%zu links", json_array_size(json_object_get(wiring, "links")));
	return rc;
}

/* GET path and print it; in the table forms the version to give --if-match follows. */
static int get_versioned(struct cmd_ctx *c, const char *path, cmd_show_fn show)
{
	struct client_reply r = { 0 };
	int rc = cmd_call(c, "GET", path, NULL, 0, &r);
	if (rc == CMD_OK)
		rc = cmd_print(c, &r, show, NULL);
	if (rc == CMD_OK && (c->format == OUT_TABLE || c->format == OUT_WIDE))
		table_kv("version", "%s", r.etag[0] ? r.etag : "-");
	client_reply_free(&r);
	return rc;
}

int cmd_topology_get(struct cmd_ctx *c)
{
	return get_versioned(c, "/v1/topology", show_topology);
}

/*
 * PUT FILE to path, which replaces what is there as a whole: only if it is
 * still the version --if-match names or, without it, the version a GET just
 * before saw, unless --force. what names it in messages; done prints the
 * reply in the table forms.
 */
static int put_whole(struct cmd_ctx *c, const char *path, const char *what, cmd_show_fn done)
{
	struct client_reply r = { 0 };
	struct client_req q = { .method = "PUT", .path = path };
	char err[512], tag[sizeof(r.etag)] = "";
	int rc = CMD_OK;
	if ((c->args.given & OPT_FORCE) && (c->args.given & OPT_IF_MATCH))
		return cmd_usage("--force and --if-match exclude each other");
	char *body = cmd_read_file(c->args.argv[0], err, sizeof(err));
	if (!body)
		return cmd_usage("%s", err);
	if (c->args.given & OPT_IF_MATCH) {
		q.if_match = c->args.if_match;
	} else if (!(c->args.given & OPT_FORCE)) {
		rc = cmd_call(c, "GET", path, NULL, 0, &r);
		snprintf(tag, sizeof(tag), "%s", r.etag);
		client_reply_free(&r);
		q.if_match = tag[0] ? tag : NULL;
	}
	q.body = body;
	if (rc == CMD_OK)
		rc = cmd_send(c, &q, &r);
	if (rc == CMD_OK)
		rc = cmd_print(c, &r, done, NULL);
	else if (r.status == 412)
		fprintf(stderr, "ofcctl: the %s changed since it was read: read it again%s\n", what,
		        c->args.given & OPT_IF_MATCH ? "" : " and retry, or use --force");
	free(body);
	client_reply_free(&r);
	return rc;
}

static int show_topology_put(const json_t *reply)
{
	printf("topology: %zu OCS units, %zu servers, %zu switches\n",
	       json_array_size(json_object_get(reply, "ocs")),
	       json_array_size(json_object_get(reply, "servers")),
	       json_array_size(json_object_get(reply, "switches")));
	return CMD_OK;
}

int cmd_topology_put(struct cmd_ctx *c)
{
	return put_whole(c, "/v1/topology", "topology", show_topology_put);
}

/* The wiring: its rule (or none), then every cable. */
static int show_wiring(const json_t *reply)
{
	static const char *const head[] = { "SERVER", "DEVICE", "PORT", "OCS", "OCS_PORT" };
	static const char *const keys[] = { "server", "device", "port", "ocs", "ocs_port" };
	char buf[256];
	table_kv("rule", "%s", table_text(json_object_get(reply, "rule"), buf, sizeof(buf)));
	table_kv("links", "%zu", json_array_size(json_object_get(reply, "links")));
	putchar('\n');
	return cmd_print_rows(json_object_get(reply, "links"), head, keys, 5);
}

int cmd_wiring_get(struct cmd_ctx *c)
{
	return get_versioned(c, "/v1/wiring", show_wiring);
}

static int show_wiring_put(const json_t *reply)
{
	const char *rule = json_string_value(json_object_get(reply, "rule"));
	printf("wiring: %zu links%s%s\n", json_array_size(json_object_get(reply, "links")),
	       rule ? ", rule " : "", rule ? rule : "");
	return CMD_OK;
}

int cmd_wiring_put(struct cmd_ctx *c)
{
	return put_whole(c, "/v1/wiring", "wiring", show_wiring_put);
}

static int show_ocs_list(const json_t *reply)
{
	return print_ocs_list(json_object_get(reply, "ocs"));
}

/* What changes an OCS unit's view: the topology and the units' live side. */
static const char *const ocs_events[] = { "topology", "device_state", "ocs_connection",
	                                  "port_state", NULL };

int cmd_ocs_list(struct cmd_ctx *c)
{
	const struct watch_spec w = {
		.path = "/v1/ocs", .kinds = ocs_events, .resource = "ocs", .table = show_ocs_list
	};
	if (c->args.given & OPT_WATCH)
		return cmd_watch(c, &w);
	return cmd_get_show(c, w.path, show_ocs_list, NULL);
}

static int show_ocs(const json_t *o)
{
	static const char *const keys[] = { "name", "driver", "ports", "endpoint" };
	static const char *const ckeys[] = { "state", "last_error", "in_sync" };
	char buf[4096];
	for (size_t i = 0; i < sizeof(keys) / sizeof(keys[0]); i++)
		table_kv(keys[i], "%s", table_text(json_object_get(o, keys[i]), buf, sizeof(buf)));
	for (size_t i = 0; i < sizeof(ckeys) / sizeof(ckeys[0]); i++)
		table_kv(ckeys[i], "%s",
		         table_text(json_object_get(json_object_get(o, "connection"), ckeys[i]),
		                    buf, sizeof(buf)));
	table_kv("ports_down", "%s",
	         table_text(json_object_get(o, "ports_down"), buf, sizeof(buf)));
	table_kv("foreign", "%s", table_text(json_object_get(o, "foreign"), buf, sizeof(buf)));
	return CMD_OK;
}

int cmd_ocs_get(struct cmd_ctx *c)
{
	char *path = cmd_path(c, "/v1/ocs/", c->args.argv[0], "");
	if (!path)
		return CMD_UNREACHABLE;
	const struct watch_spec w = { .path = path,
		                      .kinds = ocs_events,
		                      .resource = "ocs",
		                      .name = c->args.argv[0],
		                      .table = show_ocs };
	int rc =
	    c->args.given & OPT_WATCH ? cmd_watch(c, &w) : cmd_get_show(c, path, show_ocs, NULL);
	free(path);
	return rc;
}

/* Orders two [x, y] port pairs (NULL, past the end of a list, after all). */
static int pair_cmp(const json_t *a, const json_t *b)
{
	if (!a || !b)
		return a ? -1 : b ? 1 : 0;
	for (size_t k = 0; k < 2; k++) {
		json_int_t u = json_integer_value(json_array_get(a, k));
		json_int_t v = json_integer_value(json_array_get(b, k));
		if (u != v)
			return u < v ? -1 : 1;
	}
	return 0;
}

/*
 * One row per port pair desired or held, saying which of the two it is: a
 * merge of the two lists, which the daemon sends sorted.
 */
static int show_cross_connects(const json_t *reply)
{
	static const char *const head[] = { "PORT_A", "PORT_B", "DESIRED", "ACTUAL" };
	static const char *const keys[] = { "ocs", "in_sync", "partial", "foreign" };
	const json_t *desired = json_object_get(reply, "desired");
	const json_t *actual = json_object_get(reply, "actual");
	char buf[4096];
	struct table t;

	for (size_t k = 0; k < sizeof(keys) / sizeof(keys[0]); k++)
		table_kv(keys[k], "%s",
		         table_text(json_object_get(reply, keys[k]), buf, sizeof(buf)));
	putchar('\n');
	table_init(&t, 4, head);
	for (size_t i = 0, j = 0; i < json_array_size(desired) || j < json_array_size(actual);) {
		const json_t *d = json_array_get(desired, i), *a = json_array_get(actual, j);
		int cmp = pair_cmp(d, a);
		const json_t *p = cmp <= 0 ? d : a;
		table_json(&t, json_array_get(p, 0));
		table_json(&t, json_array_get(p, 1));
		table_cell(&t, "%s", cmp <= 0 ? "yes" : "no");
		table_cell(&t, "%s", cmp >= 0 ? "yes" : "no");
		i += cmp <= 0;
		j += cmp >= 0;
	}
	int rc = table_print(&t, stdout) ? CMD_UNREACHABLE : CMD_OK;
	table_free(&t);
	return rc;
}

int cmd_ocs_cross_connects(struct cmd_ctx *c)
{
	char *path = cmd_path(c, "/v1/ocs/", c->args.argv[0], "/cross-connects");
	if (!path)
		return CMD_UNREACHABLE;
	int rc = cmd_get_show(c, path, show_cross_connects, NULL);
	free(path);
	return rc;
}
