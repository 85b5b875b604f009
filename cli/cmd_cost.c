/*
 * cost calibrate|params|activate|delete|runs: the collective cost model's named
 * parameter sets. calibrate sends measured runs, as JSON or as the output of
 * an nccl-tests binary, or takes those servers' agents collected (cost runs),
 * for the daemon to fit the model's terms to; the one set made active prices
 * every selection (docs/cost-model.md, "Calibration").
 * The daemon's calibration refusals often name their field only in the error
 * body (runs[3].algorithm), so these commands print it (cmd_ctx.name_field).
 */
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cmd.h"
#include "table.h"

/* ---- calibrate: the request ---------------------------------------------- */

/* FILE as messages name it. */
static const char *file_name(const char *path)
{
	return strcmp(path, "-") == 0 ? "standard input" : path;
}

/* Sets member key of o to v (stolen); a NULL v is text that is not UTF-8, named by what. */
static int set(json_t *o, const char *key, json_t *v, const char *what)
{
	if (!v || json_object_set_new(o, key, v) < 0)
		return cmd_usage("%s: not UTF-8", what);
	return CMD_OK;
}

/*
 * True when text opens a JSON object or array. nccl-tests output never does,
 * so a JSON file with a mistake in it is reported as bad JSON, at its line
 * and column, instead of being taken for nccl-tests output.
 */
static bool looks_like_json(const char *text)
{
	text += strspn(text, " \t\r\n");
	return *text == '{' || *text == '[';
}

/*
 * The body from FILE's JSON: an object is the body (its name, if any, must
 * be NAME), an array its runs. NULL after a message, with the exit code in *rc.
 */
static json_t *json_body(const struct cmd_args *a, const char *text, int *rc)
{
	const char *file = file_name(a->argv[1]), *given;
	uint64_t nccl = a->given & OPT_NCCL_TESTS;
	json_error_t je;
	json_t *doc = json_loads(text, JSON_REJECT_DUPLICATES, &je), *body;

	if (!doc) {
		*rc = cmd_usage("%s:%d:%d: %s", file, je.line, je.column, je.text);
		return NULL;
	}
	/* The runs of a JSON file say what they are: an option would be ignored or contradict. */
	if (nccl) {
		json_decref(doc);
		*rc = cmd_usage("%s is JSON: %s is for a file of nccl-tests output", file,
		                cmd_option_name(nccl & (~nccl + 1)));
		return NULL;
	}
	if (json_is_array(doc)) {
		body = json_object();
		if (!body) {
			json_decref(doc);
			*rc = cmd_fail(CMD_UNREACHABLE, "out of memory");
			return NULL;
		}
		/* set() takes doc in every case. */
		if ((*rc = set(body, "runs", doc, file))) {
			json_decref(body);
			return NULL;
		}
		return body;
	}
	given = json_string_value(json_object_get(doc, "name"));
	if (given && strcmp(given, a->argv[0]) != 0) {
		json_decref(doc);
		*rc = cmd_usage("%s: its name is not the one given", file);
		return NULL;
	}
	return doc;
}

/* The options nccl-tests output needs that a lacks, as "--servers, --devices" in buf. */
static void list_missing(const struct cmd_args *a, char *buf, size_t len)
{
	static const uint64_t needed[] = { OPT_COLLECTIVE, OPT_ALGORITHM, OPT_SERVERS,
		                           OPT_DEVICES };
	buf[0] = '\0';
	for (size_t i = 0; i < sizeof(needed) / sizeof(needed[0]); i++) {
		size_t used = strlen(buf);
		if (!(a->given & needed[i]))
			snprintf(buf + used, len - used, "%s%s", used ? ", " : "",
			         cmd_option_name(needed[i]));
	}
}

/*
 * True when nccl-tests output carries the line "# ofcd: ..." that says what it ran, its words
 * apart as the daemon reads them: "#", then "ofcd:".
 */
static bool has_ofcd_line(const char *text)
{
	static const char blank[] = " \t\r";
	for (const char *s = text; s; s = strchr(s, '\n'), s = s ? s + 1 : NULL) {
		s += strspn(s, blank);
		if (*s != '#' || !s[1] || !strchr(blank, s[1]))
			continue;
		const char *w = s + 1 + strspn(s + 1, blank);
		if (strncmp(w, "ofcd:", 5) == 0 && (!w[5] || w[5] == '\n' || strchr(blank, w[5])))
			return true;
	}
	return false;
}

/*
 * The body from nccl-tests output: its result lines are the runs, and the
 * options (or the output's "# ofcd:" line) say what it measured, which the
 * output itself does not. NULL after a message, with the exit code in *rc.
 */
static json_t *nccl_body(const struct cmd_args *a, const char *text, int *rc)
{
	const char *file = file_name(a->argv[1]);
	char missing[128];

	list_missing(a, missing, sizeof(missing));
	if (missing[0] && !has_ofcd_line(text)) {
		*rc =
		    cmd_usage("%s is not JSON, so it is read as nccl-tests output, which needs "
		              "--collective, --algorithm, --servers and --devices (missing %s), "
		              "or a line \"# ofcd: collective=C algorithm=A servers=N devices=D\"",
		              file, missing);
		return NULL;
	}
	json_t *nt = json_object();
	json_t *body = json_object();
	if (!nt || !body) {
		*rc = cmd_fail(CMD_UNREACHABLE, "out of memory");
	} else {
		/* The options given replace the line's values (the daemon fills in the rest). */
		*rc = set(nt, "text", json_string(text), file);
		if (!*rc && (a->given & OPT_COLLECTIVE))
			*rc = set(nt, "collective", json_string(a->collective), "--collective");
		if (!*rc && (a->given & OPT_ALGORITHM))
			*rc = set(nt, "algorithm", json_string(a->algorithm), "--algorithm");
		if (!*rc && (a->given & OPT_SERVERS))
			*rc = set(nt, "servers", json_integer(a->servers), "--servers");
		if (!*rc && (a->given & OPT_DEVICES))
			*rc = set(nt, "devices", json_integer(a->devices), "--devices");
		if (!*rc && (a->given & OPT_IN_PLACE))
			*rc = set(nt, "in_place", json_true(), "--in-place");
		*rc = *rc ? *rc : set(body, "nccl_tests", json_incref(nt), file);
	}
	json_decref(nt);
	if (*rc) {
		json_decref(body);
		return NULL;
	}
	return body;
}

/* --fit "alpha_us,link_efficiency" as ["alpha_us", "link_efficiency"]; NULL when a name is
 * empty (or not UTF-8, or memory ran out). */
static json_t *fit_terms(const char *s)
{
	json_t *a = json_array();
	while (a) {
		size_t len = strcspn(s, ",");
		json_t *term = len ? json_stringn(s, len) : NULL;
		if (!term || json_array_append_new(a, term) < 0) {
			json_decref(a);
			return NULL;
		}
		if (!s[len])
			break;
		s += len + 1;
	}
	return a;
}

/* Sets NAME and what the options say in body: they replace the members FILE gave. */
static int add_options(const struct cmd_args *a, json_t *body)
{
	int rc = set(body, "name", json_string(a->argv[0]), "NAME");
	if (!rc && (a->given & OPT_ACTIVATE))
		rc = set(body, "activate", json_true(), "--activate");
	if (!rc && (a->given & OPT_FIT)) {
		json_t *terms = fit_terms(a->fit);
		if (!terms)
			return cmd_usage("--fit takes term names joined by commas, got \"%s\"",
			                 a->fit);
		rc = set(body, "fit", terms, "--fit");
	}
	if (!rc && (a->given & OPT_RELAY))
		rc = set(body, "relay", json_string(a->relay), "--relay");
	if (!rc && (a->given & OPT_SYNC)) {
		json_t *params = json_object_get(body, "params");
		if (!json_is_object(params)) {
			params = json_object();
			rc = set(body, "params", params, "--sync");
		}
		if (!rc)
			rc = set(params, "sync", json_string(a->sync), "--sync");
	}
	if (!rc && (a->given & OPT_COLLECTED))
		rc = set(body, "collected", json_true(), "--collected");
	if (!rc && (a->given & OPT_FABRIC))
		rc = set(body, "fabric", json_string(a->fabric), "--fabric");
	/* The daemon keeps provenance as given, beside the source it records itself. */
	if (!rc && (a->given & OPT_NOTE))
		rc = set(body, "provenance", json_string(a->note), "--note");
	return rc;
}

/* The request body of cost calibrate NAME FILE; NULL after a message, with the exit code in
 * *rc. */
static json_t *calibrate_body(const struct cmd_args *a, int *rc)
{
	char err[512];
	json_t *body;

	/* Only what the agents collected: no file. */
	if (a->argc < 2) {
		if (!(a->given & OPT_COLLECTED)) {
			*rc = cmd_usage("cost calibrate needs a FILE of runs, or --collected");
			return NULL;
		}
		body = json_object();
		*rc = body ? add_options(a, body) : cmd_fail(CMD_UNREACHABLE, "out of memory");
		if (*rc) {
			json_decref(body);
			return NULL;
		}
		return body;
	}
	char *text = cmd_read_file(a->argv[1], err, sizeof(err));
	if (!text) {
		*rc = cmd_usage("%s", err);
		return NULL;
	}
	body = looks_like_json(text) ? json_body(a, text, rc) : nccl_body(a, text, rc);
	free(text);
	if (body && (*rc = add_options(a, body))) {
		json_decref(body);
		body = NULL;
	}
	return body;
}

/* ---- a parameter set, for people ----------------------------------------- */

/* A relative error (0.012) in percent (1.2); one that rounds to nothing is 0, not -0.00. */
static double percent(const json_t *v)
{
	double p = json_number_value(v) * 100;
	return p > -0.005 && p < 0.005 ? 0 : p;
}

/* A fit's relative error (0.012) as a percentage ("1.2%"): what the runs were off by. */
static void print_ratio(const char *key, const json_t *v)
{
	if (json_is_number(v))
		table_kv(key, "%.3g%%", json_number_value(v) * 100);
	else
		table_kv(key, "-");
}

/* The terms the fit determined, with their values: "alpha_us 7, link_efficiency 0.85". */
static void print_fitted(const json_t *params, const json_t *fit)
{
	char buf[2048];
	size_t used = 0;
	const char *term;
	const json_t *why;

	buf[0] = '\0';
	json_object_foreach((json_t *)json_object_get(fit, "terms"), term, why)
	{
		const char *w = json_string_value(why);
		if (!w || strcmp(w, "fitted") != 0 || used >= sizeof(buf))
			continue;
		used +=
		    (size_t)snprintf(buf + used, sizeof(buf) - used, "%s%s %g", used ? ", " : "",
		                     term, json_number_value(json_object_get(params, term)));
	}
	/* The relay is a mode, not a number: the fit chose it only when relay_determined. */
	if (json_is_true(json_object_get(fit, "relay_determined")) && used < sizeof(buf))
		used +=
		    (size_t)snprintf(buf + used, sizeof(buf) - used, "%srelay %s", used ? ", " : "",
		                     json_string_value(json_object_get(fit, "relay")));
	table_kv("fitted", "%s", used ? buf : "none");
}

/* What a fit achieved: its runs, its error before and after, what it could not tell. */
static void print_fit(const json_t *params, const json_t *fit)
{
	const json_t *und = json_object_get(fit, "undetermined");
	char buf[2048];
	table_kv("runs", "%" JSON_INTEGER_FORMAT, json_integer_value(json_object_get(fit, "runs")));
	print_ratio("rms", json_object_get(fit, "rms"));
	table_kv("within 10%", "%" JSON_INTEGER_FORMAT " of %" JSON_INTEGER_FORMAT,
	         json_integer_value(json_object_get(fit, "within_10")),
	         json_integer_value(json_object_get(fit, "runs")));
	print_ratio("start rms", json_object_get(fit, "start_rms"));
	table_kv("undetermined", "%s",
	         json_array_size(und) ? table_text(und, buf, sizeof(buf)) : "none");
	print_fitted(params, fit);
}

/* A set's name, state and origin, then its fit. */
static void print_set(const json_t *set)
{
	const json_t *prov = json_object_get(set, "provenance");
	char buf[2048];
	table_kv("name", "%s", table_text(json_object_get(set, "name"), buf, sizeof(buf)));
	table_kv("active", "%s", table_text(json_object_get(set, "active"), buf, sizeof(buf)));
	table_kv("created", "%s", table_text(json_object_get(set, "created"), buf, sizeof(buf)));
	table_kv("source", "%s", table_text(json_object_get(prov, "source"), buf, sizeof(buf)));
	if (json_object_get(prov, "note"))
		table_kv("note", "%s", table_text(json_object_get(prov, "note"), buf, sizeof(buf)));
	print_fit(json_object_get(set, "params"), json_object_get(set, "fit"));
}

static int show_calibrated(const json_t *set)
{
	print_set(set);
	return CMD_OK;
}

/* ---- the commands --------------------------------------------------------- */

int cmd_cost_calibrate(struct cmd_ctx *c)
{
	struct client_reply r = { 0 };
	int rc;
	c->name_field = true;
	json_t *body = calibrate_body(&c->args, &rc);
	if (!body)
		return rc;
	char *text = json_dumps(body, JSON_COMPACT);
	json_decref(body);
	if (!text)
		return cmd_fail(CMD_UNREACHABLE, "out of memory");
	rc = cmd_call(c, "POST", "/v1/cost/calibrate", text, 0, &r);
	free(text);
	if (rc == CMD_OK)
		rc = cmd_print(c, &r, show_calibrated, NULL);
	client_reply_free(&r);
	return rc;
}

/* One set: as calibrate shows it, then every run with what the fitted model predicts. */
static int show_set(const json_t *set)
{
	static const char *const head[] = {
		"COLLECTIVE", "ALGORITHM",   "SERVERS",      "DEVICES",
		"BYTES",      "MEASURED_US", "PREDICTED_US", "RESIDUAL"
	};
	static const char *const keys[] = { "collective", "algorithm", "servers", "devices",
		                            "bytes" };
	const json_t *run;
	struct table t;
	size_t i;

	print_set(set);
	putchar('\n');
	table_init(&t, 8, head);
	json_array_foreach(json_object_get(json_object_get(set, "fit"), "residuals"), i, run)
	{
		for (size_t k = 0; k < sizeof(keys) / sizeof(keys[0]); k++)
			table_json(&t, json_object_get(run, keys[k]));
		table_cell(&t, "%.2f", json_number_value(json_object_get(run, "measured_us")));
		table_cell(&t, "%.2f", json_number_value(json_object_get(run, "predicted_us")));
		table_cell(&t, "%+.2f%%", percent(json_object_get(run, "residual")));
	}
	int rc = table_print(&t, stdout) ? CMD_UNREACHABLE : CMD_OK;
	table_free(&t);
	return rc;
}

/* The sets, one row each; wide adds the error before the fit and what it could not tell. */
static int print_sets(const json_t *sets, bool wide)
{
	static const char *const head[] = { "NAME",    "ACTIVE",    "SOURCE",
		                            "RUNS",    "RMS",       "WITHIN_10",
		                            "CREATED", "START_RMS", "UNDETERMINED" };
	const json_t *s;
	struct table t;
	size_t i;

	table_init(&t, wide ? 9 : 7, head);
	json_array_foreach(sets, i, s)
	{
		const json_t *fit = json_object_get(s, "fit");
		table_json(&t, json_object_get(s, "name"));
		table_json(&t, json_object_get(s, "active"));
		table_json(&t, json_object_get(json_object_get(s, "provenance"), "source"));
		table_json(&t, json_object_get(fit, "runs"));
		table_cell(&t, "%.3g%%", json_number_value(json_object_get(fit, "rms")) * 100);
		table_json(&t, json_object_get(fit, "within_10"));
		table_json(&t, json_object_get(s, "created"));
		if (wide) {
			table_cell(&t, "%.3g%%",
			           json_number_value(json_object_get(fit, "start_rms")) * 100);
			table_json(&t, json_object_get(fit, "undetermined"));
		}
	}
	int rc = table_print(&t, stdout) ? CMD_UNREACHABLE : CMD_OK;
	table_free(&t);
	return rc;
}

/* The active set, the parameters selections are priced with now, then every set. */
static int show_params(const json_t *view, bool wide)
{
	static const char *const head[] = { "PARAMETER", "VALUE" };
	const json_t *v;
	const char *key;
	struct table t;
	char buf[256];

	table_kv("active", "%s", table_text(json_object_get(view, "active"), buf, sizeof(buf)));
	putchar('\n');
	table_init(&t, 2, head);
	json_object_foreach((json_t *)json_object_get(view, "params"), key, v)
	{
		table_cell(&t, "%s", key);
		table_json(&t, v);
	}
	int rc = table_print(&t, stdout) ? CMD_UNREACHABLE : CMD_OK;
	table_free(&t);
	putchar('\n');
	return rc ? rc : print_sets(json_object_get(view, "sets"), wide);
}

static int show_params_table(const json_t *view)
{
	return show_params(view, false);
}

static int show_params_wide(const json_t *view)
{
	return show_params(view, true);
}

int cmd_cost_params(struct cmd_ctx *c)
{
	c->name_field = true;
	if (c->args.argc == 0)
		return cmd_get_show(c, "/v1/cost/params", show_params_table, show_params_wide);
	char *path = cmd_path(c, "/v1/cost/params/", c->args.argv[0], "");
	if (!path)
		return CMD_UNREACHABLE;
	int rc = cmd_get_show(c, path, show_set, NULL);
	free(path);
	return rc;
}

static int show_active(const json_t *reply)
{
	const char *name = json_string_value(json_object_get(reply, "active"));
	if (name)
		printf("parameter set %s is active\n", name);
	else
		printf("no parameter set is active\n");
	return CMD_OK;
}

/* "none" is the daemon's null: no set active, the configuration's [cost] keys price. */
int cmd_cost_activate(struct cmd_ctx *c)
{
	struct client_reply r = { 0 };
	const char *name = c->args.argv[0];
	c->name_field = true;
	json_t *body = json_object();
	int rc =
	    body ? set(body, "name", strcmp(name, "none") ? json_string(name) : json_null(), "NAME")
	         : cmd_fail(CMD_UNREACHABLE, "out of memory");
	char *text = rc ? NULL : json_dumps(body, JSON_COMPACT);
	json_decref(body);
	if (rc)
		return rc;
	if (!text)
		return cmd_fail(CMD_UNREACHABLE, "out of memory");
	rc = cmd_call(c, "PUT", "/v1/cost/active", text, 0, &r);
	free(text);
	if (rc == CMD_OK)
		rc = cmd_print(c, &r, show_active, NULL);
	client_reply_free(&r);
	return rc;
}

static int show_deleted(const json_t *reply)
{
	printf("parameter set %s deleted\n", json_string_value(json_object_get(reply, "deleted")));
	return CMD_OK;
}

int cmd_cost_delete(struct cmd_ctx *c)
{
	struct client_reply r = { 0 };
	c->name_field = true;
	char *path = cmd_path(c, "/v1/cost/params/", c->args.argv[0], "");
	if (!path)
		return CMD_UNREACHABLE;
	int rc = cmd_call(c, "DELETE", path, NULL, 0, &r);
	/* A 404 spared by --ignore-not-found prints nothing, as every delete. */
	if (rc == CMD_OK && r.status != 404)
		rc = cmd_print(c, &r, show_deleted, NULL);
	free(path);
	client_reply_free(&r);
	return rc;
}

/* ---- runs the agents collected ------------------------------------------- */

static int show_runs(const json_t *reply)
{
	static const char *const head[] = { "ID",          "COLLECTOR", "FABRIC",  "COLLECTIVE",
		                            "ALGORITHM",   "SERVERS",   "DEVICES", "BYTES",
		                            "MEASURED_US", "COLLECTED" };
	static const char *const keys[] = { "id",          "collector", "fabric",  "collective",
		                            "algorithm",   "servers",   "devices", "bytes",
		                            "measured_us", "collected" };
	const json_t *r;
	struct table t;
	size_t i;

	table_init(&t, 10, head);
	json_array_foreach(json_object_get(reply, "runs"), i, r)
	{
		for (size_t k = 0; k < 10; k++)
			table_json(&t, json_object_get(r, keys[k]));
	}
	int rc = table_print(&t, stdout) ? CMD_UNREACHABLE : CMD_OK;
	table_free(&t);
	if (rc == CMD_OK)
		printf("%zu of %lld runs kept\n", json_array_size(json_object_get(reply, "runs")),
		       (long long)json_integer_value(json_object_get(reply, "total")));
	return rc;
}

/* /v1/cost/runs with --fabric (and --limit) as its query; NULL after a message. */
static char *runs_path(struct cmd_ctx *c, bool limit)
{
	char *path = strdup("/v1/cost/runs"), n[24];

	snprintf(n, sizeof(n), "%ld", c->args.limit);
	if (path && (c->args.given & OPT_FABRIC))
		cmd_add_query(c, &path, "fabric", c->args.fabric);
	if (path && limit && (c->args.given & OPT_LIMIT))
		cmd_add_query(c, &path, "limit", n);
	if (!path)
		cmd_fail(CMD_UNREACHABLE, "out of memory");
	return path;
}

int cmd_cost_runs(struct cmd_ctx *c)
{
	char *path = runs_path(c, true);
	if (!path)
		return CMD_UNREACHABLE;
	int rc = cmd_get_show(c, path, show_runs, NULL);
	free(path);
	return rc;
}

static int show_runs_deleted(const json_t *reply)
{
	printf("%lld collected runs deleted\n",
	       (long long)json_integer_value(json_object_get(reply, "deleted")));
	return CMD_OK;
}

int cmd_cost_runs_delete(struct cmd_ctx *c)
{
	struct client_reply r = { 0 };
	char *path = runs_path(c, false);
	if (!path)
		return CMD_UNREACHABLE;
	int rc = cmd_call(c, "DELETE", path, NULL, 0, &r);
	if (rc == CMD_OK)
		rc = cmd_print(c, &r, show_runs_deleted, NULL);
	free(path);
	client_reply_free(&r);
	return rc;
}
