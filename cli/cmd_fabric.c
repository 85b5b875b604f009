/*
 * fabric create|delete|list|get, and plan: the commands a scheduler runs.
 * With --wait, create and get succeed only once the fabric is applied (a
 * degraded or failed fabric is exit 3 like a wait that ran out: the job
 * would not get the circuits it asked for), delete once it is removed.
 * create and plan take the layout (--topology, --shape, --traffic: by
 * default a full mesh where it fits, else a HyperX or torus grid);
 * the views show it, and for topology auto the candidates weighed.
 */
#include <errno.h>
#include <stdbool.h>
#include <stdint.h>
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

/* ---- layouts ------------------------------------------------------------ */

/* A grid's sizes [32, 32] as "32x32" into buf; "" when v is not an array. */
static const char *grid_text(const json_t *v, char *buf, size_t len)
{
	const json_t *k;
	size_t i, used = 0;
	buf[0] = '\0';
	json_array_foreach(v, i, k)
	{
		int w = snprintf(buf + used, len - used, "%s%" JSON_INTEGER_FORMAT, i ? "x" : "",
		                 json_integer_value(k));
		if (w < 0 || (size_t)w >= len - used)
			break;
		used += (size_t)w;
	}
	return buf;
}

/* A layout in one cell: "full-mesh", "hyperx 32x32", or "-" when the view has none. */
static void layout_cell(struct table *t, const json_t *f)
{
	const char *topology = json_string_value(json_object_get(f, "topology"));
	char grid[128];
	grid_text(json_object_get(f, "shape"), grid, sizeof(grid));
	table_cell(t, "%s%s%s", topology ? topology : "-", grid[0] ? " " : "", grid);
}

/* The layout's lines of a view or a plan: topology, shape, diameter, degree (those it has). */
static void print_layout(const json_t *v)
{
	char buf[128];
	if (json_object_get(v, "topology"))
		table_kv("topology", "%s",
		         table_text(json_object_get(v, "topology"), buf, sizeof(buf)));
	if (json_is_array(json_object_get(v, "shape")))
		table_kv("shape", "%s", grid_text(json_object_get(v, "shape"), buf, sizeof(buf)));
	static const char *const keys[] = { "diameter", "degree" };
	for (size_t i = 0; i < sizeof(keys) / sizeof(keys[0]); i++) {
		if (json_object_get(v, keys[i]))
			table_kv(keys[i], "%s",
			         table_text(json_object_get(v, keys[i]), buf, sizeof(buf)));
	}
}

/* A time in microseconds, to a tenth ("-" when the candidate was not priced). */
static void us_cell(struct table *t, const json_t *v)
{
	if (json_is_number(v))
		table_cell(t, "%.1f", json_number_value(v));
	else
		table_cell(t, "-");
}

/*
 * An auto choice: why, for what traffic, then (after a blank line) the
 * candidates weighed, best first; wide adds their bisection and the parts
 * of their predicted time. Nothing when choice is NULL.
 */
static int print_choice(const json_t *choice, bool wide)
{
	static const char *const head[] = { "SHAPE",        "TOPOLOGY",  "DIAMETER",
		                            "DEGREE",       "PLANES",    "FITS",
		                            "PREDICTED_US", "BISECTION", "ALLREDUCE_US",
		                            "ALLTOALL_US" };
	char buf[1024];
	struct table t;
	const json_t *cand;
	size_t i;
	if (!json_is_object(choice))
		return CMD_OK;
	table_kv("choice", "%s", table_text(json_object_get(choice, "reason"), buf, sizeof(buf)));
	table_kv(
	    "traffic", "%s%s", table_text(json_object_get(choice, "traffic"), buf, sizeof(buf)),
	    json_is_true(json_object_get(choice, "traffic_declared")) ? "" : " (none declared)");
	table_init(&t, wide ? 10 : 7, head);
	json_array_foreach(json_object_get(choice, "candidates"), i, cand)
	{
		static const char *const keys[] = { "shape",  "topology", "diameter",
			                            "degree", "planes",   "fits" };
		for (size_t k = 0; k < sizeof(keys) / sizeof(keys[0]); k++)
			table_json(&t, json_object_get(cand, keys[k]));
		us_cell(&t, json_object_get(cand, "predicted_us"));
		if (wide) {
			table_json(&t, json_object_get(cand, "bisection"));
			us_cell(&t, json_object_get(cand, "allreduce_us"));
			us_cell(&t, json_object_get(cand, "alltoall_us"));
		}
	}
	putchar('\n');
	int rc = table_print(&t, stdout) ? CMD_UNREACHABLE : CMD_OK;
	table_free(&t);
	return rc;
}

/* --shape "32x32" as [32, 32] into *out: positive whole numbers joined by x. */
static int parse_shape(const char *s, json_t **out)
{
	json_t *k = json_array();
	const char *p = s;
	if (!k)
		return cmd_fail(CMD_UNREACHABLE, "out of memory");
	do {
		char *end = (char *)p;
		unsigned long v = 0;
		errno = 0;
		if (*p >= '0' && *p <= '9')
			v = strtoul(p, &end, 10);
		bool sep = *end == 'x' || *end == 'X';
		if (!v || errno || v > INT32_MAX || (*end && !sep) || (sep && !end[1])) {
			json_decref(k);
			return cmd_usage(
			    "--shape takes the grid's sizes joined by x, such as 32x32 "
			    "or 8x8x16, got \"%s\"",
			    s);
		}
		if (json_array_append_new(k, json_integer((json_int_t)v)) < 0) {
			json_decref(k);
			return cmd_fail(CMD_UNREACHABLE, "out of memory");
		}
		p = sep ? end + 1 : end;
	} while (*p);
	*out = k;
	return CMD_OK;
}

/*
 * Adds --topology, --shape and --traffic to a create's or a plan's body (the
 * daemon judges the names and whether the grid makes the servers). CMD_OK,
 * or an exit code after a message.
 */
static int add_layout(const struct cmd_args *a, json_t *req)
{
	json_t *k = NULL;
	int rc;
	if (a->given & OPT_SHAPE) {
		if ((rc = parse_shape(a->shape, &k)))
			return rc;
		json_object_set_new(req, "shape", k);
	}
	if ((a->given & OPT_TOPOLOGY) &&
	    json_object_set_new(req, "topology", json_string(a->topology)) < 0)
		return cmd_usage("--topology: not UTF-8");
	if ((a->given & OPT_TRAFFIC) &&
	    json_object_set_new(req, "traffic", json_string(a->traffic)) < 0)
		return cmd_usage("--traffic: not UTF-8");
	return CMD_OK;
}

/* ---- fabric create, get, delete ------------------------------------------ */

/*
 * The full view of one fabric: its summary and layout, for auto the
 * candidates weighed, then its circuits.
 */
static int show_fabric(const json_t *f, bool wide)
{
	char buf[4096];
	static const char *const keys[] = { "name",   "state",       "revision", "formula",
		                            "planes", "min_devices", "created",  "updated" };
	for (size_t i = 0; i < sizeof(keys) / sizeof(keys[0]); i++) {
		if (i == 2)
			print_servers("servers", json_object_get(f, "servers"));
		if (i == 3)
			print_layout(f);
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
	if (print_choice(json_object_get(f, "choice"), wide))
		return CMD_UNREACHABLE;

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

static int print_fabric(const json_t *f)
{
	return show_fabric(f, false);
}

static int print_fabric_wide(const json_t *f)
{
	return show_fabric(f, true);
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
	int rc = cmd_print(c, r, print_fabric, print_fabric_wide);
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
	if (req && (rc = add_layout(&c->args, req))) {
		json_decref(req);
		goto out;
	}
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
	if (path && (c->args.given & OPT_CONSISTENT) &&
	    cmd_add_query(c, &path, "consistent", "true") < 0)
		cmd_fail(CMD_UNREACHABLE, "out of memory");
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
		if (c->args.given & (OPT_WAIT | OPT_CONSISTENT))
			return cmd_usage("%s and --watch exclude each other",
			                 c->args.given & OPT_WAIT ? "--wait" : "--consistent");
		char *path = cmd_path(c, "/v1/fabrics/", c->args.argv[0], "");
		if (!path)
			return CMD_UNREACHABLE;
		const struct watch_spec w = { .path = path,
			                      .fabric = c->args.argv[0],
			                      .kinds = fabric_events,
			                      .resource = "fabric",
			                      .name = c->args.argv[0],
			                      .table = print_fabric,
			                      .wide = print_fabric_wide };
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

/* ---- fabric list --------------------------------------------------------- */

/*
 * The fabric list; wide adds the devices each server needs, the grid's
 * diameter and degree, and a failed fabric's error.
 */
static int fabrics_table(const json_t *reply, bool wide)
{
	static const char *const head[] = { "NAME",    "STATE",       "REVISION", "CIRCUITS",
		                            "MISSING", "MIN_DEVICES", "TOPOLOGY", "DIAMETER",
		                            "DEGREE",  "ERROR",       "SERVERS" };
	static const char *const narrow[] = { "NAME",    "STATE",    "REVISION", "CIRCUITS",
		                              "MISSING", "TOPOLOGY", "SERVERS" };
	static const char *const counts[] = { "name", "state", "revision", "circuits", "missing" };
	static const char *const more[] = { "diameter", "degree", "error" };
	struct table t;
	const json_t *f;
	size_t i;
	table_init(&t, wide ? 11 : 7, wide ? head : narrow);
	json_array_foreach(json_object_get(reply, "fabrics"), i, f)
	{
		for (size_t k = 0; k < sizeof(counts) / sizeof(counts[0]); k++)
			table_json(&t, json_object_get(f, counts[k]));
		if (wide)
			table_json(&t, json_object_get(f, "min_devices"));
		layout_cell(&t, f);
		for (size_t k = 0; wide && k < sizeof(more) / sizeof(more[0]); k++)
			table_json(&t, json_object_get(f, more[k]));
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

/*
 * The list with its server names (GET /v1/fabrics) carries no layout; its
 * summary form (?view=summary) has the layout but no names. The tables show
 * both: this copies each fabric's layout from the summary into the list.
 */
#define SUMMARY_PATH "/v1/fabrics?view=summary"

static void merge_layouts(json_t *list, const json_t *summary)
{
	static const char *const keys[] = { "topology", "shape", "diameter", "degree" };
	json_t *by_name = json_object(), *f;
	const json_t *s;
	size_t i;
	json_array_foreach(json_object_get(summary, "fabrics"), i, s)
	{
		const char *name = json_string_value(json_object_get(s, "name"));
		if (by_name && name)
			json_object_set(by_name, name, (json_t *)s);
	}
	json_array_foreach(json_object_get(list, "fabrics"), i, f)
	{
		const char *name = json_string_value(json_object_get(f, "name"));
		const json_t *from = name ? json_object_get(by_name, name) : NULL;
		for (size_t k = 0; from && k < sizeof(keys) / sizeof(keys[0]); k++) {
			json_t *v = json_object_get(from, keys[k]);
			if (v && !json_object_get(f, keys[k]))
				json_object_set(f, keys[k], v);
		}
	}
	json_decref(by_name);
}

/* For a --watch: the same, read over the watch's free connection; a failure leaves "-". */
static void complete_fabrics(struct client *cl, json_t *list)
{
	struct client_reply s = { 0 };
	struct client_req q = { .path = SUMMARY_PATH, .timeout_ms = CMD_REPLY_TIMEOUT_MS };
	char err[512];
	if (client_send(cl, &q, &s, err, sizeof(err)) == 0 && s.status >= 200 && s.status < 300)
		merge_layouts(list, s.json);
	client_reply_free(&s);
}

int cmd_fabric_list(struct cmd_ctx *c)
{
	const struct watch_spec w = { .path = "/v1/fabrics",
		                      .kinds = fabric_events,
		                      .resource = "fabric",
		                      .table = show_fabrics,
		                      .wide = show_fabrics_wide,
		                      .complete = complete_fabrics };
	struct client_reply r = { 0 }, s = { 0 };
	bool consistent = c->args.given & OPT_CONSISTENT;
	if (c->args.given & OPT_WATCH)
		return consistent ? cmd_usage("--consistent and --watch exclude each other")
		                  : cmd_watch(c, &w);
	/* -o json and yaml print the list as the daemon sends it. */
	int rc =
	    cmd_call(c, "GET", consistent ? "/v1/fabrics?consistent=true" : w.path, NULL, 0, &r);
	if (rc == CMD_OK && (c->format == OUT_TABLE || c->format == OUT_WIDE)) {
		rc = cmd_call(c, "GET", consistent ? SUMMARY_PATH "&consistent=true" : SUMMARY_PATH,
		              NULL, 0, &s);
		if (rc == CMD_OK)
			merge_layouts(r.json, s.json);
	}
	if (rc == CMD_OK)
		rc = cmd_print(c, &r, show_fabrics, show_fabrics_wide);
	client_reply_free(&s);
	client_reply_free(&r);
	return rc;
}

/* ---- plan ----------------------------------------------------------------- */

/*
 * A grid's what-if (the daemon lists no links for one): the figures, the
 * layout, and for auto the candidates weighed.
 */
static int show_plan_layout(const json_t *reply, bool wide)
{
	static const char *const sizes[] = { "servers", "devices", "ports_per_device" };
	static const char *const after[] = { "planes", "feasible" };
	char buf[256];
	for (size_t i = 0; i < sizeof(sizes) / sizeof(sizes[0]); i++)
		table_kv(sizes[i], "%s",
		         table_text(json_object_get(reply, sizes[i]), buf, sizeof(buf)));
	print_layout(reply);
	for (size_t i = 0; i < sizeof(after) / sizeof(after[0]); i++)
		table_kv(after[i], "%s",
		         table_text(json_object_get(reply, after[i]), buf, sizeof(buf)));
	return print_choice(json_object_get(reply, "choice"), wide);
}

/* The plan's figures, then its links; or a grid's layout. */
static int plan_table(const json_t *reply, bool wide)
{
	static const char *const keys[] = { "servers", "devices",     "ports_per_device", "formula",
		                            "planes",  "min_devices", "feasible" };
	static const char *const head[] = { "PLANE", "A", "DEVICE", "PORT", "B", "DEVICE", "PORT" };
	char buf[256];
	struct table t;
	const json_t *l;
	size_t i;
	if (!json_object_get(reply, "links"))
		return show_plan_layout(reply, wide);
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

static int show_plan(const json_t *reply)
{
	return plan_table(reply, false);
}

static int show_plan_wide(const json_t *reply)
{
	return plan_table(reply, true);
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
	int rc = req ? add_layout(a, req) : CMD_OK;
	if (rc) {
		json_decref(req);
		return rc;
	}
	char *body = req ? json_dumps(req, JSON_COMPACT) : NULL;
	json_decref(req);
	if (!body)
		return cmd_fail(CMD_UNREACHABLE, "out of memory");
	rc = cmd_call(c, "POST", "/v1/plan", body, 0, &r);
	free(body);
	if (rc == CMD_OK)
		rc = cmd_print(c, &r, show_plan, show_plan_wide);
	client_reply_free(&r);
	return rc;
}
