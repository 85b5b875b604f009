/*
 * fabric create|delete|list|get, and plan: the commands a scheduler runs.
 * With --wait, create and get succeed only once the fabric is applied (a
 * degraded or failed fabric is exit 3 like a wait that ran out: the job
 * would not get the full mesh it asked for), delete once it is removed.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cmd.h"
#include "hostlist.h"
#include "table.h"

/* A JSON list of server names as a Slurm host list (malloc'd), or NULL when out of memory. */
static char *compress_names(const json_t *names)
{
	size_t n = json_array_size(names);
	char **v = calloc(n ? n : 1, sizeof(*v));
	char *s = NULL;
	if (v) {
		for (size_t i = 0; i < n; i++) {
			const char *name = json_string_value(json_array_get(names, i));
			v[i] = (char *)(name ? name : "?");
		}
		s = hostlist_compress(v, n);
	}
	free(v);
	return s;
}

static void print_servers(const char *key, const json_t *names)
{
	char *s = compress_names(names);
	table_kv(key, "%s (%zu)", s ? s : "?", json_array_size(names));
	free(s);
}

static void servers_cell(struct table *t, const json_t *names)
{
	char *s = compress_names(names);
	table_cell(t, "%s", s ? (s[0] ? s : "-") : "?");
	free(s);
}

/* The full view of one fabric: its summary, then its circuits. */
static int print_fabric(const json_t *f)
{
	char buf[4096];
	static const char *const keys[] = { "name",   "state",       "revision", "formula",
		                            "planes", "min_devices", "created",  "updated" };
	for (size_t i = 0; i < sizeof(keys) / sizeof(keys[0]); i++) {
		if (i == 2)
			print_servers("servers", json_object_get(f, "servers"));
		table_kv(keys[i], "%s", table_text(json_object_get(f, keys[i]), buf, sizeof(buf)));
	}
	if (json_object_get(f, "error"))
		table_kv("error", "%s", table_text(json_object_get(f, "error"), buf, sizeof(buf)));

	const json_t *missing = json_object_get(f, "missing"), *pair;
	size_t i, used = 0;
	buf[0] = '\0';
	json_array_foreach(missing, i, pair)
	{
		int w = snprintf(buf + used, sizeof(buf) - used, "%s%s-%s", i ? " " : "",
		                 json_string_value(json_array_get(pair, 0)),
		                 json_string_value(json_array_get(pair, 1)));
		if (w < 0 || (size_t)w >= sizeof(buf) - used)
			break;
		used += (size_t)w;
	}
	table_kv("missing", "%s", used ? buf : "none");

	static const char *const head[] = { "PLANE",    "OCS", "A",      "DEVICE", "PORT",
		                            "OCS_PORT", "B",   "DEVICE", "PORT",   "OCS_PORT" };
	struct table t;
	const json_t *l;
	table_init(&t, 10, head);
	json_array_foreach(json_object_get(f, "links"), i, l)
	{
		const json_t *a = json_object_get(l, "a"), *b = json_object_get(l, "b");
		table_json(&t, json_object_get(l, "plane"));
		table_json(&t, json_object_get(a, "ocs"));
		for (int end = 0; end < 2; end++) {
			const json_t *e = end ? b : a;
			table_json(&t, json_object_get(e, "server"));
			table_json(&t, json_object_get(e, "device"));
			table_json(&t, json_object_get(e, "port"));
			table_json(&t, json_object_get(e, "ocs_port"));
		}
	}
	putchar('\n');
	int rc = table_print(&t, stdout);
	table_free(&t);
	return rc ? CMD_UNREACHABLE : CMD_OK;
}

/*
 * After a --wait on create or get: applied is done; anything else is exit 3,
 * with why on stderr. Without --wait the state is only reported.
 */
static int judge_state(struct cmd_ctx *c, const json_t *f, double wait_s)
{
	const char *name = json_string_value(json_object_get(f, "name"));
	const char *state = json_string_value(json_object_get(f, "state"));
	if (!(c->args.given & OPT_WAIT) || (state && strcmp(state, "applied") == 0))
		return CMD_OK;
	if (state && strcmp(state, "degraded") == 0)
		return cmd_fail(CMD_WAIT,
		                "fabric %s is degraded: %zu pairs of servers have no circuit", name,
		                json_array_size(json_object_get(f, "missing")));
	if (state && strcmp(state, "failed") == 0)
		return cmd_fail(CMD_WAIT, "fabric %s failed: %s", name,
		                json_string_value(json_object_get(f, "error"))
		                    ? json_string_value(json_object_get(f, "error"))
		                    : "no reason given");
	return cmd_fail(CMD_WAIT, "fabric %s is still %s after %g s", name, state ? state : "?",
	                wait_s);
}

/* Prints a fabric reply in the chosen form and judges its state. */
static int fabric_reply(struct cmd_ctx *c, const struct client_reply *r, double wait_s)
{
	int rc = cmd_print(c, r, print_fabric, NULL);
	return rc ? rc : judge_state(c, r->json, wait_s);
}

int cmd_fabric_create(struct cmd_ctx *c)
{
	struct hostlist hl = { 0 };
	struct client_reply r = { 0 };
	char err[512], q[32], *body = NULL;
	double wait_s;
	int rc = cmd_wait_param(c, q, sizeof(q), &wait_s);
	if (rc)
		return rc;
	for (int i = 1; i < c->args.argc; i++) {
		int e = hostlist_expand(&hl, c->args.argv[i], err, sizeof(err));
		if (e) {
			rc = cmd_usage("bad host list: %s", err);
			goto out;
		}
	}
	json_t *servers = json_array(), *req = NULL;
	for (size_t i = 0; servers && i < hl.n; i++) {
		if (json_array_append_new(servers, json_string(hl.names[i]))) {
			json_decref(servers);
			rc = cmd_usage("server name \"%s\" is not UTF-8", hl.names[i]);
			goto out;
		}
	}
	req = json_pack("{s:s, s:o*}", "name", c->args.argv[0], "servers", servers);
	body = req ? json_dumps(req, JSON_COMPACT) : NULL;
	json_decref(req);
	if (!body) {
		rc = cmd_fail(CMD_UNREACHABLE, "out of memory (or a name that is not UTF-8)");
		goto out;
	}
	char path[64];
	snprintf(path, sizeof(path), "/v1/fabrics%s", q);
	rc = cmd_call(c, "POST", path, body, wait_s, &r);
	if (rc == CMD_OK)
		rc = fabric_reply(c, &r, wait_s);
out:
	client_reply_free(&r);
	free(body);
	hostlist_free(&hl);
	return rc;
}

/* METHOD /v1/fabrics/NAME[?wait=S] for the fabric named by the first argument. */
static int fabric_named_call(struct cmd_ctx *c, const char *method, struct client_reply *r,
                             double *wait_s)
{
	char q[32];
	int rc = cmd_wait_param(c, q, sizeof(q), wait_s);
	if (rc)
		return rc;
	char *path = cmd_path(c, "/v1/fabrics/", c->args.argv[0], q);
	if (!path)
		return CMD_UNREACHABLE;
	rc = cmd_call(c, method, path, NULL, *wait_s, r);
	free(path);
	return rc;
}

/* What changes a fabric's view: its own events, and the operations that carry its circuits. */
static const char *const fabric_events[] = { "fabric", "fabric_state", "operation", NULL };

int cmd_fabric_get(struct cmd_ctx *c)
{
	struct client_reply r = { 0 };
	double wait_s;
	if (c->args.given & OPT_WATCH) {
		if (c->args.given & OPT_WAIT)
			return cmd_usage("--wait and --watch exclude each other");
		char *path = cmd_path(c, "/v1/fabrics/", c->args.argv[0], "");
		if (!path)
			return CMD_UNREACHABLE;
		const struct watch_spec w = { .path = path,
			                      .fabric = c->args.argv[0],
			                      .kinds = fabric_events,
			                      .resource = "fabric",
			                      .name = c->args.argv[0],
			                      .table = print_fabric };
		int rc = cmd_watch(c, &w);
		free(path);
		return rc;
	}
	int rc = fabric_named_call(c, "GET", &r, &wait_s);
	if (rc == CMD_OK)
		rc = fabric_reply(c, &r, wait_s);
	client_reply_free(&r);
	return rc;
}

int cmd_fabric_delete(struct cmd_ctx *c)
{
	struct client_reply r = { 0 };
	double wait_s;
	int rc = fabric_named_call(c, "DELETE", &r, &wait_s);
	/* --ignore-not-found: nothing to delete, nothing to say. */
	if (rc == CMD_OK && r.status != 404) {
		const char *state = json_string_value(json_object_get(r.json, "state"));
		if (!cmd_print_doc(c, r.json))
			printf("fabric %s: %s\n", c->args.argv[0], state ? state : "?");
		/* removing after a wait: the units still hold some of its circuits. */
		if ((c->args.given & OPT_WAIT) && (!state || strcmp(state, "removed") != 0))
			rc = cmd_fail(CMD_WAIT, "fabric %s is still %s after %g s", c->args.argv[0],
			              state ? state : "?", wait_s);
	}
	client_reply_free(&r);
	return rc;
}

/* The fabric list; wide adds the devices each server needs and a failed fabric's error. */
static int fabrics_table(const json_t *reply, bool wide)
{
	static const char *const head[] = { "NAME",    "STATE",       "REVISION", "CIRCUITS",
		                            "MISSING", "MIN_DEVICES", "ERROR",    "SERVERS" };
	static const char *const keys[] = { "name",    "state",       "revision", "circuits",
		                            "missing", "min_devices", "error" };
	static const char *const narrow[] = { "NAME",     "STATE",   "REVISION",
		                              "CIRCUITS", "MISSING", "SERVERS" };
	size_t nkeys = wide ? 7 : 5;
	struct table t;
	const json_t *f;
	size_t i;
	table_init(&t, nkeys + 1, wide ? head : narrow);
	json_array_foreach(json_object_get(reply, "fabrics"), i, f)
	{
		for (size_t k = 0; k < nkeys; k++)
			table_json(&t, json_object_get(f, keys[k]));
		servers_cell(&t, json_object_get(f, "servers"));
	}
	int rc = table_print(&t, stdout) ? CMD_UNREACHABLE : CMD_OK;
	table_free(&t);
	return rc;
}

static int show_fabrics(const json_t *reply)
{
	return fabrics_table(reply, false);
}

static int show_fabrics_wide(const json_t *reply)
{
	return fabrics_table(reply, true);
}

int cmd_fabric_list(struct cmd_ctx *c)
{
	const struct watch_spec w = { .path = "/v1/fabrics",
		                      .kinds = fabric_events,
		                      .resource = "fabric",
		                      .table = show_fabrics,
		                      .wide = show_fabrics_wide };
	if (c->args.given & OPT_WATCH)
		return cmd_watch(c, &w);
	return cmd_get_show(c, w.path, show_fabrics, show_fabrics_wide);
}

/* The plan's figures, then its links. */
static int show_plan(const json_t *reply)
{
	static const char *const keys[] = { "servers", "devices",     "ports_per_device", "formula",
		                            "planes",  "min_devices", "feasible" };
	static const char *const head[] = { "PLANE", "A", "DEVICE", "PORT", "B", "DEVICE", "PORT" };
	char buf[256];
	struct table t;
	const json_t *l;
	size_t i;
	for (i = 0; i < sizeof(keys) / sizeof(keys[0]); i++)
		table_kv(keys[i], "%s",
		         table_text(json_object_get(reply, keys[i]), buf, sizeof(buf)));
	table_init(&t, 7, head);
	json_array_foreach(json_object_get(reply, "links"), i, l)
	{
		table_json(&t, json_object_get(l, "plane"));
		for (int end = 0; end < 2; end++) {
			const json_t *e = json_object_get(l, end ? "b" : "a");
			table_json(&t, json_object_get(e, "server"));
			table_json(&t, json_object_get(e, "device"));
			table_json(&t, json_object_get(e, "port"));
		}
	}
	putchar('\n');
	int rc = table_print(&t, stdout) ? CMD_UNREACHABLE : CMD_OK;
	table_free(&t);
	return rc;
}

int cmd_plan(struct cmd_ctx *c)
{
	struct client_reply r = { 0 };
	const struct cmd_args *a = &c->args;
	if ((a->given & (OPT_SERVERS | OPT_DEVICES)) != (OPT_SERVERS | OPT_DEVICES))
		return cmd_usage("plan needs --servers and --devices");
	json_t *req = json_pack("{s:I, s:I}", "servers", (json_int_t)a->servers, "devices",
	                        (json_int_t)a->devices);
	if (req && (a->given & OPT_PORTS_PER_DEVICE))
		json_object_set_new(req, "ports_per_device", json_integer(a->ports_per_device));
	if (req && (a->given & OPT_FORMULA))
		json_object_set_new(req, "formula", json_string(a->formula));
	char *body = req ? json_dumps(req, JSON_COMPACT) : NULL;
	json_decref(req);
	if (!body)
		return cmd_fail(CMD_UNREACHABLE, "out of memory");
	int rc = cmd_call(c, "POST", "/v1/plan", body, 0, &r);
	free(body);
	if (rc == CMD_OK)
		rc = cmd_print(c, &r, show_plan, NULL);
	client_reply_free(&r);
	return rc;
}
