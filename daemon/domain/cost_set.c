/* Named parameter sets of the collective cost model: the table cost_param_set. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "coll_fit.h"
#include "domain/cost_set.h"
#include "state/store_sql.h"

json_t *cost_set_params_json(const struct coll_params *p)
{
	json_t *o = json_object();

	for (unsigned t = 0; t < COLL_FIT__COUNT; t++) {
		double v = coll_fit_term_get(p, (enum coll_fit_term)t);

		/* A launch per algorithm only when set: 17 zeros would hide the rest. */
		if (t >= COLL_FIT_LAUNCH_ALG && v == 0)
			continue;
		json_object_set_new(o, coll_fit_term_name((enum coll_fit_term)t), json_real(v));
	}
	json_object_set_new(o, "relay", json_string(coll_relay_name(p->relay)));
	/* Only when set, as the launches: a release before sync can still read the set. */
	if (p->sync != COLL_SYNC_BARRIER)
		json_object_set_new(o, "sync", json_string(coll_sync_name(p->sync)));
	return o;
}

int cost_set_params_apply(json_t *params, struct coll_params *p, const char **bad)
{
	const char *key;
	json_t *v;

	json_object_foreach(params, key, v)
	{
		enum coll_fit_term t;

		if (!strcmp(key, "relay")) {
			if (coll_relay_from_name(json_string_value(v), &p->relay) < 0)
				goto fail;
		} else if (!strcmp(key, "sync")) {
			if (coll_sync_from_name(json_string_value(v), &p->sync) < 0)
				goto fail;
		} else if (coll_fit_term_from_name(key, &t) == 0 && json_is_number(v)) {
			coll_fit_term_set(p, t, json_number_value(v));
		} else {
			goto fail;
		}
		continue;
	fail:
		*bad = key;
		return -EINVAL;
	}
	return 0;
}

int cost_set_load(struct store *s, const char *name, struct coll_params *p)
{
	sqlite3_stmt *st =
	    name ? store_stmt(s, "SELECT params FROM cost_param_set WHERE name = ?")
	         : store_stmt(s, "SELECT params FROM cost_param_set WHERE active = 1");
	const char *bad;
	json_t *o = NULL;
	int rc;

	if (!st)
		return -EIO;
	if (name)
		sqlite3_bind_text(st, 1, name, -1, SQLITE_STATIC);
	rc = sqlite3_step(st);
	if (rc == SQLITE_ROW)
		o = json_loads((const char *)sqlite3_column_text(st, 0), 0, NULL);
	sqlite3_reset(st);
	if (rc == SQLITE_DONE)
		return 0;
	if (!o)
		return -EIO;
	/* Written by cost_set_add() from a checked fit: a bad member would be a bug, and then
	 * nothing of the set applies. */
	struct coll_params q = *p;
	q.sync = COLL_SYNC_BARRIER; /* a set without the member was fitted with the barrier */
	rc = cost_set_params_apply(o, &q, &bad);
	json_decref(o);
	if (rc < 0 || coll_params_validate(&q, NULL) < 0)
		return -EIO;
	*p = q;
	return 1;
}

static bool exists(struct store *s, const char *name)
{
	sqlite3_stmt *st = store_stmt(s, "SELECT 1 FROM cost_param_set WHERE name = ?");
	bool found;

	if (!st)
		return false;
	sqlite3_bind_text(st, 1, name, -1, SQLITE_STATIC);
	found = sqlite3_step(st) == SQLITE_ROW;
	sqlite3_reset(st);
	return found;
}

static int bind_json(sqlite3_stmt *st, int col, json_t *o)
{
	char *text = json_dumps(o, JSON_COMPACT);

	if (!text)
		return -ENOMEM;
	return sqlite3_bind_text(st, col, text, -1, free) == SQLITE_OK ? 0 : -EIO;
}

int cost_set_add(struct store *s, const char *name, json_t *params, json_t *fit, json_t *provenance,
                 bool activate, struct ofcd_error *e)
{
	sqlite3_stmt *st;

	if (exists(s, name))
		return ofcd_fail(
		    e, -EEXIST, OFCD_E_CONFLICT, "name", NULL,
		    "a parameter set %s exists; choose another name or delete it first", name);
	if (activate && cost_set_activate(s, NULL, e) < 0)
		return -EIO;
	st = store_stmt(s, "INSERT INTO cost_param_set (name, params, fit, provenance, active) "
	                   "VALUES (?, ?, ?, ?, ?)");
	if (!st || sqlite3_bind_text(st, 1, name, -1, SQLITE_STATIC) != SQLITE_OK ||
	    bind_json(st, 2, params) || bind_json(st, 3, fit) || bind_json(st, 4, provenance) ||
	    sqlite3_bind_int(st, 5, activate) != SQLITE_OK || store_step_done(st) < 0) {
		if (st)
			sqlite3_reset(st);
		return ofcd_fail(e, -EIO, OFCD_E_STORE, NULL, NULL, "cannot store parameter set %s",
		                 name);
	}
	return 0;
}

int cost_set_activate(struct store *s, const char *name, struct ofcd_error *e)
{
	sqlite3_stmt *st;

	if (name && !exists(s, name))
		return ofcd_fail(e, -ENOENT, OFCD_E_NOT_FOUND, "name", NULL, "no parameter set %s",
		                 name);
	st = store_stmt(s, "UPDATE cost_param_set SET active = 0 WHERE active = 1");
	if (!st || store_step_done(st) < 0)
		goto fail;
	if (!name)
		return 0;
	st = store_stmt(s, "UPDATE cost_param_set SET active = 1 WHERE name = ?");
	if (!st)
		goto fail;
	sqlite3_bind_text(st, 1, name, -1, SQLITE_STATIC);
	if (store_step_done(st) < 0)
		goto fail;
	return 0;
fail:
	return ofcd_fail(e, -EIO, OFCD_E_STORE, NULL, NULL,
	                 "cannot change the active parameter set");
}

int cost_set_remove(struct store *s, const char *name, struct ofcd_error *e)
{
	char active[128];
	sqlite3_stmt *st;

	if (!exists(s, name))
		return ofcd_fail(e, -ENOENT, OFCD_E_NOT_FOUND, "name", NULL, "no parameter set %s",
		                 name);
	if (cost_set_active_name(s, active, sizeof(active)) < 0)
		return ofcd_fail(e, -EIO, OFCD_E_STORE, NULL, NULL,
		                 "cannot read the parameter sets");
	if (!strcmp(active, name))
		return ofcd_fail(e, -EBUSY, OFCD_E_IN_USE, "name", NULL,
		                 "parameter set %s is the active one; activate another (or none) "
		                 "first",
		                 name);
	st = store_stmt(s, "DELETE FROM cost_param_set WHERE name = ?");
	if (st)
		sqlite3_bind_text(st, 1, name, -1, SQLITE_STATIC);
	if (!st || store_step_done(st) < 0)
		return ofcd_fail(e, -EIO, OFCD_E_STORE, NULL, NULL,
		                 "cannot delete parameter set %s", name);
	return 0;
}

static json_t *column_json(sqlite3_stmt *st, int col)
{
	json_t *o = json_loads((const char *)sqlite3_column_text(st, col), 0, NULL);
	return o ? o : json_null();
}

/* One row of SELECT name, active, created, params, provenance, fit. */
static json_t *row_json(sqlite3_stmt *st, bool whole)
{
	json_t *fit = column_json(st, 5);

	if (!whole)
		json_object_del(fit, "residuals");
	return json_pack("{s:s, s:b, s:s, s:o, s:o, s:o}", "name",
	                 (const char *)sqlite3_column_text(st, 0), "active",
	                 sqlite3_column_int(st, 1), "created",
	                 (const char *)sqlite3_column_text(st, 2), "params", column_json(st, 3),
	                 "provenance", column_json(st, 4), "fit", fit);
}

#define SET_COLUMNS "SELECT name, active, created, params, provenance, fit FROM cost_param_set"

json_t *cost_set_json(struct store *s, const char *name, bool whole)
{
	sqlite3_stmt *st = store_stmt(s, SET_COLUMNS " WHERE name = ?");
	json_t *o = NULL;

	if (!st)
		return NULL;
	sqlite3_bind_text(st, 1, name, -1, SQLITE_STATIC);
	if (sqlite3_step(st) == SQLITE_ROW)
		o = row_json(st, whole);
	sqlite3_reset(st);
	return o;
}

json_t *cost_set_list(struct store *s)
{
	sqlite3_stmt *st = store_stmt(s, SET_COLUMNS " ORDER BY name");
	json_t *a = json_array();

	while (st && sqlite3_step(st) == SQLITE_ROW)
		json_array_append_new(a, row_json(st, false));
	if (st)
		sqlite3_reset(st);
	return a;
}

int cost_set_active_name(struct store *s, char *buf, size_t len)
{
	sqlite3_stmt *st = store_stmt(s, "SELECT name FROM cost_param_set WHERE active = 1");
	int rc;

	if (!st)
		return -EIO;
	buf[0] = '\0';
	rc = sqlite3_step(st);
	if (rc == SQLITE_ROW)
		snprintf(buf, len, "%s", (const char *)sqlite3_column_text(st, 0));
	sqlite3_reset(st);
	return rc == SQLITE_ROW || rc == SQLITE_DONE ? 0 : -EIO;
}
