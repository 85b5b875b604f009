/*
 * Switch routes: the electrical switches that servers' NICs reach, with the
 * capabilities the collective cost model reads (documents 003 and 004), and
 * the helpers PUT /v1/topology uses to replace them all at once.
 */
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "api_handlers.h"
#include "config.h"
#include "store_sql.h"

/* Largest switch buffer B (and window W) accepted, in messages. */
#define SWITCH_MAX_MESSAGES (1u << 20)

/* Validated fields of one switch; 0 for a buffer or window not given. */
struct switch_in {
	const char *name;
	bool aggregating, offload;
	uint64_t buffer, window;
};

static int parse_switch(struct api_req *req, json_t *o, const char *prefix, struct switch_in *out)
{
	static const char *const members[] = { "name",   "aggregating", "offload",
		                               "buffer", "window",      NULL };
	char f[96], fb[96];

	*out = (struct switch_in){ 0 };
	if (!json_is_object(o)) {
		api_error(req, OFCD_E_INVALID_FIELD, prefix, "%s must be an object",
		          prefix ? prefix : "body");
		return -EINVAL;
	}
	if (api_check_members(req, o, prefix, members) < 0 ||
	    api_get_name(req, o, prefix, "name", true, &out->name) < 0 ||
	    api_get_bool(req, o, prefix, "aggregating", false, &out->aggregating) < 0 ||
	    api_get_bool(req, o, prefix, "offload", false, &out->offload) < 0 ||
	    api_get_uint(req, o, prefix, "buffer", false, 1, SWITCH_MAX_MESSAGES, &out->buffer) <
	        0 ||
	    api_get_uint(req, o, prefix, "window", false, 1, SWITCH_MAX_MESSAGES, &out->window) < 0)
		return -EINVAL;
	/* Without B and W the window protocol of an aggregating switch cannot be priced. */
	if (out->aggregating && (!out->buffer || !out->window)) {
		api_field(f, sizeof(f), prefix, out->buffer ? "window" : "buffer");
		api_error(req, OFCD_E_INVALID_FIELD, f, "%s is required for an aggregating switch",
		          f);
		return -EINVAL;
	}
	if (out->buffer && out->window > out->buffer) {
		api_field(f, sizeof(f), prefix, "window");
		api_field(fb, sizeof(fb), prefix, "buffer");
		api_error_details(
		    req, OFCD_E_UNPROCESSABLE, f,
		    json_pack("{s:I, s:I}", "window", (json_int_t)out->window, "buffer",
		              (json_int_t)out->buffer),
		    "%s W=%llu exceeds %s B=%llu: the switch holds at most B messages "
		    "per job, so W must be <= B",
		    f, (unsigned long long)out->window, fb, (unsigned long long)out->buffer);
		return -EINVAL;
	}
	return 0;
}

static void bind_opt(sqlite3_stmt *st, int col, uint64_t v)
{
	if (v)
		sqlite3_bind_int64(st, col, (sqlite3_int64)v);
	else
		sqlite3_bind_null(st, col);
}

/* Inserts the switch, or updates the one of that name. */
static int upsert_switch(struct store *s, const struct switch_in *v)
{
	sqlite3_stmt *st = store_stmt(s, "INSERT INTO switch(name, aggregating, offload, buffer, "
	                                 "window) VALUES (?1, ?2, ?3, ?4, ?5) "
	                                 "ON CONFLICT(name) DO UPDATE SET aggregating = ?2, "
	                                 "offload = ?3, buffer = ?4, window = ?5");
	if (!st)
		return -EIO;
	sqlite3_bind_text(st, 1, v->name, -1, SQLITE_STATIC);
	sqlite3_bind_int(st, 2, v->aggregating);
	sqlite3_bind_int(st, 3, v->offload);
	bind_opt(st, 4, v->buffer);
	bind_opt(st, 5, v->window);
	return store_step_done(st);
}

static json_t *opt_int(sqlite3_stmt *st, int col)
{
	if (sqlite3_column_type(st, col) == SQLITE_NULL)
		return json_null();
	return json_integer(sqlite3_column_int64(st, col));
}

static json_t *switch_servers(struct store *s, const char *name)
{
	sqlite3_stmt *st = store_stmt(s, "SELECT name FROM server WHERE switch = ? ORDER BY id");
	json_t *a = json_array();
	if (!st)
		return a;
	sqlite3_bind_text(st, 1, name, -1, SQLITE_TRANSIENT);
	while (sqlite3_step(st) == SQLITE_ROW)
		json_array_append_new(a, json_string((const char *)sqlite3_column_text(st, 0)));
	sqlite3_reset(st);
	return a;
}

static json_t *switch_row(struct store *s, sqlite3_stmt *st, bool detail)
{
	const char *name = (const char *)sqlite3_column_text(st, 0);
	json_t *o = json_pack("{s:s, s:b, s:b, s:o, s:o}", "name", name, "aggregating",
	                      sqlite3_column_int(st, 1), "offload", sqlite3_column_int(st, 2),
	                      "buffer", opt_int(st, 3), "window", opt_int(st, 4));
	if (o && detail)
		json_object_set_new(o, "servers", switch_servers(s, name));
	return o;
}

json_t *api_switch_list_json(struct store *s, bool detail)
{
	sqlite3_stmt *st = store_stmt(s, "SELECT name, aggregating, offload, buffer, window "
	                                 "FROM switch ORDER BY name");
	json_t *a = json_array();
	while (st && sqlite3_step(st) == SQLITE_ROW)
		json_array_append_new(a, switch_row(s, st, detail));
	if (st)
		sqlite3_reset(st);
	return a;
}

/* The switch with its servers, or NULL when there is none. */
static json_t *switch_json(struct store *s, const char *name)
{
	sqlite3_stmt *st = store_stmt(s, "SELECT name, aggregating, offload, buffer, window "
	                                 "FROM switch WHERE name = ?");
	json_t *o = NULL;
	if (!st)
		return NULL;
	sqlite3_bind_text(st, 1, name, -1, SQLITE_TRANSIENT);
	if (sqlite3_step(st) == SQLITE_ROW)
		o = switch_row(s, st, true);
	sqlite3_reset(st);
	return o;
}

bool api_switch_exists(struct store *s, const char *name)
{
	sqlite3_stmt *st = store_stmt(s, "SELECT 1 FROM switch WHERE name = ?");
	bool found;
	if (!st)
		return false;
	sqlite3_bind_text(st, 1, name, -1, SQLITE_STATIC);
	found = sqlite3_step(st) == SQLITE_ROW;
	sqlite3_reset(st);
	return found;
}

void api_switch_create(struct api_req *req)
{
	struct store *s = req->env->store;
	struct switch_in v;
	json_t *body = api_body_object(req);

	if (!body || parse_switch(req, body, NULL, &v) < 0)
		return;
	if (api_switch_exists(s, v.name)) {
		api_error(req, OFCD_E_CONFLICT, "name", "switch %s already exists", v.name);
		return;
	}
	if (upsert_switch(s, &v) < 0) {
		api_error(req, OFCD_E_STORE, NULL, "cannot store switch %s", v.name);
		return;
	}
	api_reply(req, 201, switch_json(s, v.name));
}

void api_switch_list(struct api_req *req)
{
	api_reply(req, 200,
	          json_pack("{s:o}", "switches", api_switch_list_json(req->env->store, true)));
}

void api_switch_get(struct api_req *req)
{
	json_t *o = switch_json(req->env->store, req->params[0]);
	if (!o) {
		api_error(req, OFCD_E_NOT_FOUND, "name", "no switch %s", req->params[0]);
		return;
	}
	api_reply(req, 200, o);
}

void api_switch_delete(struct api_req *req)
{
	struct store *s = req->env->store;
	const char *name = req->params[0];

	if (!api_switch_exists(s, name)) {
		api_error(req, OFCD_E_NOT_FOUND, "name", "no switch %s", name);
		return;
	}
	json_t *users = switch_servers(s, name);
	size_t n = json_array_size(users);
	if (n) {
		api_error_details(req, OFCD_E_IN_USE, "name", json_pack("{s:o}", "servers", users),
		                  "switch %s is reached by %zu server%s (first %s); change their "
		                  "switch first",
		                  name, n, n == 1 ? "" : "s",
		                  json_string_value(json_array_get(users, 0)));
		return;
	}
	json_decref(users);
	sqlite3_stmt *st = store_stmt(s, "DELETE FROM switch WHERE name = ?");
	if (!st) {
		api_error(req, OFCD_E_STORE, NULL, "cannot delete switch %s", name);
		return;
	}
	sqlite3_bind_text(st, 1, name, -1, SQLITE_STATIC);
	if (store_step_done(st) < 0) {
		api_error(req, OFCD_E_STORE, NULL, "cannot delete switch %s", name);
		return;
	}
	api_reply(req, 200, json_pack("{s:s}", "deleted", name));
}

int api_switches_parse(struct api_req *req, json_t *switches, const char *field)
{
	struct switch_in v;
	char f[64];
	size_t i;
	json_t *o;

	if (!switches || json_is_null(switches))
		return 0;
	if (!json_is_array(switches)) {
		api_error(req, OFCD_E_INVALID_FIELD, field, "%s must be an array", field);
		return -EINVAL;
	}
	json_array_foreach(switches, i, o)
	{
		snprintf(f, sizeof(f), "%s[%zu]", field, i);
		if (parse_switch(req, o, f, &v) < 0)
			return -EINVAL;
		for (size_t j = 0; j < i; j++) {
			json_t *other = json_object_get(json_array_get(switches, j), "name");
			if (strcmp(json_string_value(other), v.name) == 0) {
				api_error(req, OFCD_E_INVALID_FIELD, f,
				          "%s: switch %s is given twice", f, v.name);
				return -EINVAL;
			}
		}
	}
	return 0;
}

bool api_switches_has(json_t *switches, const char *name)
{
	size_t i;
	json_t *o;

	json_array_foreach(switches, i, o)
	{
		if (strcmp(json_string_value(json_object_get(o, "name")), name) == 0)
			return true;
	}
	return false;
}

/* Re-reads an entry that api_switches_parse() accepted. */
static void switch_from_json(json_t *o, struct switch_in *v)
{
	json_t *b = json_object_get(o, "buffer"), *w = json_object_get(o, "window");

	*v = (struct switch_in){
		.name = json_string_value(json_object_get(o, "name")),
		.aggregating = json_is_true(json_object_get(o, "aggregating")),
		.offload = json_is_true(json_object_get(o, "offload")),
		.buffer = json_is_integer(b) ? (uint64_t)json_integer_value(b) : 0,
		.window = json_is_integer(w) ? (uint64_t)json_integer_value(w) : 0,
	};
}

int api_switches_store(struct store *s, json_t *switches)
{
	struct switch_in v;
	size_t i;
	json_t *o;

	json_array_foreach(switches, i, o)
	{
		switch_from_json(o, &v);
		if (upsert_switch(s, &v) < 0)
			return -EIO;
	}
	return 0;
}

int api_switches_prune(struct store *s, json_t *switches)
{
	sqlite3_stmt *st = store_stmt(s, "SELECT id, name FROM switch");
	int rc = 0;

	if (!st)
		return -EIO;
	while (rc == 0 && sqlite3_step(st) == SQLITE_ROW) {
		if (switches &&
		    api_switches_has(switches, (const char *)sqlite3_column_text(st, 1)))
			continue;
		sqlite3_stmt *del = store_stmt(s, "DELETE FROM switch WHERE id = ?");
		if (!del) {
			rc = -EIO;
			break;
		}
		sqlite3_bind_int64(del, 1, sqlite3_column_int64(st, 0));
		rc = store_step_done(del);
	}
	sqlite3_reset(st);
	return rc;
}
