/* topology get|put and ocs list|get|cross-connects: the optical side of the cluster. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cmd.h"
#include "table.h"

/* Topology files are read whole; the daemon's own body limit is far below this. */
#define TOPOLOGY_MAX (64u << 20)

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

int cmd_topology_get(struct cmd_ctx *c)
{
	return cmd_get_show(c, "/v1/topology", show_topology);
}

/* Reads a whole file, or standard input for "-"; malloc'd and NUL-terminated. */
static char *read_all(const char *path, char *err, size_t errlen)
{
	FILE *f = strcmp(path, "-") == 0 ? stdin : fopen(path, "r");
	char *buf = NULL;
	size_t len = 0, cap = 0;
	if (!f) {
		snprintf(err, errlen, "%s: %s", path, strerror(errno));
		return NULL;
	}
	for (;;) {
		if (len + 1 >= cap) {
			char *nb = cap >= TOPOLOGY_MAX ? NULL : realloc(buf, cap ? cap * 2 : 65536);
			if (!nb) {
				snprintf(err, errlen, "%s: too large or out of memory", path);
				free(buf);
				buf = NULL;
				break;
			}
			buf = nb;
			cap = cap ? cap * 2 : 65536;
		}
		size_t got = fread(buf + len, 1, cap - len - 1, f);
		len += got;
		if (got == 0) {
			if (ferror(f)) {
				snprintf(err, errlen, "%s: read error", path);
				free(buf);
				buf = NULL;
			}
			break;
		}
	}
	if (buf)
		buf[len] = '\0';
	if (f != stdin)
		fclose(f);
	return buf;
}

int cmd_topology_put(struct cmd_ctx *c)
{
	struct client_reply r = { 0 };
	char err[512];
	char *body = read_all(c->args.argv[0], err, sizeof(err));
	if (!body)
		return cmd_usage("%s", err);
	int rc = cmd_call(c, "PUT", "/v1/topology", body, 0, &r);
	free(body);
	if (rc == CMD_OK && c->format == OUT_JSON)
		cmd_print_body(&r);
	else if (rc == CMD_OK)
		printf("topology: %zu OCS units, %zu servers, %zu switches\n",
		       json_array_size(json_object_get(r.json, "ocs")),
		       json_array_size(json_object_get(r.json, "servers")),
		       json_array_size(json_object_get(r.json, "switches")));
	client_reply_free(&r);
	return rc;
}

static int show_ocs_list(const json_t *reply)
{
	return print_ocs_list(json_object_get(reply, "ocs"));
}

int cmd_ocs_list(struct cmd_ctx *c)
{
	return cmd_get_show(c, "/v1/ocs", show_ocs_list);
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
	int rc = cmd_get_show(c, path, show_ocs);
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
	int rc = cmd_get_show(c, path, show_cross_connects);
	free(path);
	return rc;
}
