/*
 * The electrical switches that servers' NICs reach, with the capabilities
 * the collective cost model reads (documents 003 and 004): their rows, their
 * views and their changes.
 */
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "state/store_sql.h"
#include "topo.h"
#include "topo_apply.h"

int topo_switch_check(const struct topo_switch_spec *w, const char *prefix, struct ofcd_error *e)
{
	char f[160], fb[160];
	/* Without B and W the window protocol of an aggregating switch cannot be priced. */
	if (w->aggregating && (!w->buffer || !w->window)) {
		ofcd_field(f, sizeof(f), prefix, w->buffer ? "window" : "buffer");
		return ofcd_fail(e, -EINVAL, OFCD_E_INVALID_FIELD, f, NULL,
		                 "%s is required for an aggregating switch", f);
	}
	if (w->buffer && w->window > w->buffer) {
		ofcd_field(f, sizeof(f), prefix, "window");
		ofcd_field(fb, sizeof(fb), prefix, "buffer");
		return ofcd_fail(e, -EINVAL, OFCD_E_UNPROCESSABLE, f,
		                 json_pack("{s:I, s:I}", "window", (json_int_t)w->window, "buffer",
		                           (json_int_t)w->buffer),
		                 "%s W=%u exceeds %s B=%u: the switch holds at most B messages "
		                 "per job, so W must be <= B",
		                 f, w->window, fb, w->buffer);
	}
	return 0;
}

static void bind_opt(sqlite3_stmt *st, int col, uint32_t v)
{
	if (v)
		sqlite3_bind_int64(st, col, v);
	else
		sqlite3_bind_null(st, col);
}

/* Inserts the switch, or updates the one of that name. */
static int upsert_switch(struct store *s, const struct topo_switch_spec *w)
{
	sqlite3_stmt *st = store_stmt(s, "INSERT INTO switch(name, aggregating, offload, buffer, "
	                                 "window) VALUES (?1, ?2, ?3, ?4, ?5) "
	                                 "ON CONFLICT(name) DO UPDATE SET aggregating = ?2, "
	                                 "offload = ?3, buffer = ?4, window = ?5");
	if (!st)
		return -EIO;
	sqlite3_bind_text(st, 1, w->name, -1, SQLITE_STATIC);
	sqlite3_bind_int(st, 2, w->aggregating);
	sqlite3_bind_int(st, 3, w->offload);
	bind_opt(st, 4, w->buffer);
	bind_opt(st, 5, w->window);
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

json_t *topo_switch_list(struct store *s, bool detail)
{
	sqlite3_stmt *st = store_stmt(s, "SELECT name, aggregating, offload, buffer, window "
	                                 "FROM switch ORDER BY name");
	json_t *a = json_array();
	int step = SQLITE_ERROR;
	while (st && (step = sqlite3_step(st)) == SQLITE_ROW)
		json_array_append_new(a, switch_row(s, st, detail));
	if (st)
		sqlite3_reset(st);
	return topo_list_end(a, step);
}

json_t *topo_switch_json(struct store *s, const char *name)
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

bool topo_switch_exists(struct store *s, const char *name)
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

int topo_switch_add(struct store *s, const struct topo_switch_spec *w, struct ofcd_error *e)
{
	if (topo_switch_exists(s, w->name))
		return ofcd_fail(e, -EEXIST, OFCD_E_CONFLICT, "name", NULL,
		                 "switch %s already exists", w->name);
	if (upsert_switch(s, w) < 0)
		return ofcd_fail(e, -EIO, OFCD_E_STORE, NULL, NULL, "cannot store switch %s",
		                 w->name);
	return 0;
}

/* "n" or "null" for an optional count of a switch view. */
static const char *count_text(char *buf, size_t len, json_t *v)
{
	if (json_is_integer(v))
		snprintf(buf, len, "%lld", (long long)json_integer_value(v));
	else
		snprintf(buf, len, "null");
	return buf;
}

int topo_switch_put(struct store *s, const struct topo_switch_spec *w, bool *created,
                    struct ofcd_error *e)
{
	char a[32], b[32];
	*created = false;
	json_t *j = topo_switch_json(s, w->name);
	if (!j) {
		*created = true;
		return topo_switch_add(s, w, e);
	}
	json_object_del(j, "servers");
	const char *member = NULL, *stored = NULL, *given = NULL;
	bool agg = json_is_true(json_object_get(j, "aggregating"));
	bool off = json_is_true(json_object_get(j, "offload"));
	json_t *buffer = json_object_get(j, "buffer"), *window = json_object_get(j, "window");
	json_t *want_buffer = w->buffer ? json_integer(w->buffer) : json_null();
	json_t *want_window = w->window ? json_integer(w->window) : json_null();
	if (agg != w->aggregating) {
		member = "aggregating";
		stored = agg ? "true" : "false";
		given = w->aggregating ? "true" : "false";
	} else if (off != w->offload) {
		member = "offload";
		stored = off ? "true" : "false";
		given = w->offload ? "true" : "false";
	} else if (!json_equal(buffer, want_buffer)) {
		member = "buffer";
		stored = count_text(a, sizeof(a), buffer);
		given = count_text(b, sizeof(b), want_buffer);
	} else if (!json_equal(window, want_window)) {
		member = "window";
		stored = count_text(a, sizeof(a), window);
		given = count_text(b, sizeof(b), want_window);
	}
	int rc = 0;
	if (member)
		rc = ofcd_fail(e, -EEXIST, OFCD_E_CONFLICT, member, json_pack("{s:O}", "switch", j),
		               "switch %s exists with %s %s, not %s: a PUT only creates or "
		               "confirms; change it with PUT /v1/topology or delete it first",
		               w->name, member, stored, given);
	json_decref(want_buffer);
	json_decref(want_window);
	json_decref(j);
	return rc;
}

int topo_switch_remove(struct store *s, const char *name, struct ofcd_error *e)
{
	if (!topo_switch_exists(s, name))
		return ofcd_fail(e, -ENOENT, OFCD_E_NOT_FOUND, "name", NULL, "no switch %s", name);
	json_t *users = switch_servers(s, name);
	size_t n = json_array_size(users);
	if (n) {
		const char *first = json_string_value(json_array_get(users, 0));
		char msg[256];
		snprintf(msg, sizeof(msg),
		         "switch %s is reached by %zu server%s (first %s); change their switch "
		         "first",
		         name, n, n == 1 ? "" : "s", first);
		return ofcd_fail(e, -EBUSY, OFCD_E_IN_USE, "name",
		                 json_pack("{s:o}", "servers", users), "%s", msg);
	}
	json_decref(users);
	sqlite3_stmt *st = store_stmt(s, "DELETE FROM switch WHERE name = ?");
	if (st)
		sqlite3_bind_text(st, 1, name, -1, SQLITE_STATIC);
	if (!st || store_step_done(st) < 0)
		return ofcd_fail(e, -EIO, OFCD_E_STORE, NULL, NULL, "cannot delete switch %s",
		                 name);
	return 0;
}

int topo_switches_replace(struct store *s, const struct topo_switch_spec *v, size_t n)
{
	for (size_t i = 0; i < n; i++)
		if (upsert_switch(s, &v[i]) < 0)
			return -EIO;
	return 0;
}

int topo_switches_prune(struct store *s, const struct topo_switch_spec *keep, size_t n)
{
	sqlite3_stmt *st = store_stmt(s, "SELECT id, name FROM switch");
	int rc = 0;

	if (!st)
		return -EIO;
	while (rc == 0 && sqlite3_step(st) == SQLITE_ROW) {
		const char *name = (const char *)sqlite3_column_text(st, 1);
		size_t k;
		for (k = 0; k < n && strcmp(keep[k].name, name) != 0; k++)
			;
		if (k < n)
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
