#include "operations.h"

#include <errno.h>
#include <stdbool.h>

#include "state/store_sql.h"

/*
 * Renders the current row of st: columns 0-8 as operations_list() selects
 * them, with detail also 9-10, the cross-connects.
 */
static int operation_row(struct store *s, sqlite3_stmt *st, bool detail, json_t **out)
{
	int64_t id = sqlite3_column_int64(st, 0);
	json_t *o = json_pack("{s:I, s:s, s:s, s:I, s:I, s:s, s:s}", "id", (json_int_t)id, "ocs",
	                      sqlite3_column_text(st, 1), "trigger", sqlite3_column_text(st, 2),
	                      "nadds", (json_int_t)sqlite3_column_int64(st, 3), "ndeletes",
	                      (json_int_t)sqlite3_column_int64(st, 4), "status",
	                      sqlite3_column_text(st, 5), "started", sqlite3_column_text(st, 7));
	int step = SQLITE_ERROR;

	if (!o)
		return -ENOMEM;
	json_object_set_new(o, "error",
	                    sqlite3_column_type(st, 6) == SQLITE_NULL
	                        ? json_null()
	                        : json_string((const char *)sqlite3_column_text(st, 6)));
	json_object_set_new(o, "ended",
	                    sqlite3_column_type(st, 8) == SQLITE_NULL
	                        ? json_null()
	                        : json_string((const char *)sqlite3_column_text(st, 8)));
	if (detail) {
		json_object_set_new(o, "adds",
		                    json_loads((const char *)sqlite3_column_text(st, 9), 0, NULL));
		json_object_set_new(o, "deletes",
		                    json_loads((const char *)sqlite3_column_text(st, 10), 0, NULL));
	}
	json_t *fabrics = json_array();
	sqlite3_stmt *fs = store_stmt(s, "SELECT fabric FROM operation_fabric WHERE "
	                                 "operation_id = ? ORDER BY fabric");
	if (fs) {
		sqlite3_bind_int64(fs, 1, id);
		while ((step = sqlite3_step(fs)) == SQLITE_ROW)
			json_array_append_new(
			    fabrics, json_string((const char *)sqlite3_column_text(fs, 0)));
		sqlite3_reset(fs);
	}
	json_object_set_new(o, "fabrics", fabrics);
	if (step != SQLITE_DONE) {
		json_decref(o);
		return -EIO;
	}
	*out = o;
	return 0;
}

int operations_get(struct store *s, int64_t id, json_t **out)
{
	sqlite3_stmt *st =
	    store_stmt(s, "SELECT o.id, o.ocs, o.trigger, o.nadds, o.ndeletes, o.status, "
	                  "o.error, o.started, o.ended, x.adds, x.deletes FROM operation o "
	                  "LEFT JOIN operation_xc x ON x.operation_id = o.id WHERE o.id = ?");
	int step, rc;

	if (!st)
		return -EIO;
	sqlite3_bind_int64(st, 1, id);
	step = sqlite3_step(st);
	rc = step == SQLITE_ROW    ? operation_row(s, st, true, out)
	     : step == SQLITE_DONE ? -ENOENT
	                           : -EIO;
	sqlite3_reset(st);
	return rc;
}

int operations_list(struct store *s, const char *ocs, const char *fabric, int64_t before,
                    uint32_t limit, json_t **out)
{
	/* Newest first; filters are optional (NULL matches everything). */
	sqlite3_stmt *st = store_stmt(
	    s, "SELECT o.id, o.ocs, o.trigger, o.nadds, o.ndeletes, o.status, o.error, "
	       "o.started, o.ended FROM operation o WHERE o.id < ?4 AND (?1 IS NULL OR "
	       "o.ocs = ?1) AND (?2 IS NULL OR EXISTS (SELECT 1 FROM operation_fabric f WHERE "
	       "f.operation_id = o.id AND f.fabric = ?2)) ORDER BY o.id DESC LIMIT ?3");
	json_t *list;
	int step, rc = 0;

	if (!st)
		return -EIO;
	if (ocs)
		sqlite3_bind_text(st, 1, ocs, -1, SQLITE_STATIC);
	if (fabric)
		sqlite3_bind_text(st, 2, fabric, -1, SQLITE_STATIC);
	sqlite3_bind_int64(st, 3, limit);
	sqlite3_bind_int64(st, 4, before > 0 ? before : INT64_MAX);
	list = json_array();
	while ((step = sqlite3_step(st)) == SQLITE_ROW) {
		json_t *o;
		rc = operation_row(s, st, false, &o);
		if (rc < 0)
			break;
		json_array_append_new(list, o);
	}
	sqlite3_reset(st);
	if (rc == 0 && step != SQLITE_DONE)
		rc = -EIO;
	if (rc < 0) {
		json_decref(list);
		return rc;
	}
	*out = list;
	return 0;
}

int operations_insert(struct store *s, const struct operations_row *op)
{
	sqlite3_stmt *st =
	    store_stmt(s, "INSERT INTO operation(id, ocs, trigger, nadds, ndeletes, status, "
	                  "error, ended) VALUES (?, ?, ?, ?, ?, ?, ?, CASE WHEN ?8 THEN "
	                  "strftime('%Y-%m-%dT%H:%M:%fZ', 'now') END)");
	if (!st)
		return -EIO;
	sqlite3_bind_int64(st, 1, op->id);
	sqlite3_bind_text(st, 2, op->ocs, -1, SQLITE_STATIC);
	sqlite3_bind_text(st, 3, op->trigger, -1, SQLITE_STATIC);
	sqlite3_bind_int64(st, 4, (sqlite3_int64)op->nadd);
	sqlite3_bind_int64(st, 5, (sqlite3_int64)op->ndel);
	sqlite3_bind_text(st, 6, op->status, -1, SQLITE_STATIC);
	if (op->error)
		sqlite3_bind_text(st, 7, op->error, -1, SQLITE_STATIC);
	sqlite3_bind_int(st, 8, op->ended);
	int rc = store_step_done(st);
	/* The pairs in a row of their own, written once: SQLite rewrites a whole row on update. */
	st =
	    store_stmt(s, "INSERT INTO operation_xc(operation_id, adds, deletes) VALUES (?, ?, ?)");
	if (rc == 0 && st) {
		sqlite3_bind_int64(st, 1, op->id);
		sqlite3_bind_text(st, 2, op->adds, -1, SQLITE_STATIC);
		sqlite3_bind_text(st, 3, op->dels, -1, SQLITE_STATIC);
		rc = store_step_done(st);
	}
	st = store_stmt(s, "INSERT INTO operation_fabric(operation_id, fabric) VALUES (?, ?)");
	size_t i;
	const json_t *v;
	json_array_foreach(op->fabrics, i, v)
	{
		if (rc < 0 || !st)
			break;
		sqlite3_bind_int64(st, 1, op->id);
		sqlite3_bind_text(st, 2, json_string_value(v), -1, SQLITE_STATIC);
		rc = store_step_done(st);
	}
	return st ? rc : -EIO;
}

int operations_end(struct store *s, int64_t id, const char *status, const char *error)
{
	sqlite3_stmt *st =
	    store_stmt(s, "UPDATE operation SET status = ?, error = ?, "
	                  "ended = strftime('%Y-%m-%dT%H:%M:%fZ', 'now') WHERE id = ?");
	if (!st)
		return -EIO;
	sqlite3_bind_text(st, 1, status, -1, SQLITE_STATIC);
	if (error)
		sqlite3_bind_text(st, 2, error, -1, SQLITE_STATIC);
	sqlite3_bind_int64(st, 3, id);
	return store_step_done(st);
}

int64_t operations_prune(struct store *s, int64_t newest, int64_t keep, int64_t most)
{
	sqlite3_stmt *st = store_stmt(s, "DELETE FROM operation WHERE id IN (SELECT id FROM "
	                                 "operation WHERE id <= ? ORDER BY id LIMIT ?)");
	if (!st)
		return -EIO;
	sqlite3_bind_int64(st, 1, newest - keep);
	sqlite3_bind_int64(st, 2, most);
	if (store_step_done(st) < 0)
		return -EIO;
	return sqlite3_changes(store_db(s));
}

int64_t operations_next_id(struct store *s)
{
	sqlite3_stmt *st = store_stmt(s, "SELECT coalesce(max(id), 0) + 1 FROM operation");
	int64_t id = 1;
	if (st && sqlite3_step(st) == SQLITE_ROW)
		id = sqlite3_column_int64(st, 0);
	if (st)
		sqlite3_reset(st);
	return id;
}

int operations_interrupt_running(struct store *s)
{
	if (store_begin(s) < 0)
		return -EIO;
	sqlite3_stmt *st = store_stmt(s, "UPDATE operation SET status = 'interrupted', "
	                                 "error = 'the daemon stopped before the batch "
	                                 "completed', ended = strftime('%Y-%m-%dT%H:%M:%fZ', "
	                                 "'now') WHERE status = 'running'");
	if (st && store_step_done(st) == 0)
		return store_commit(s);
	store_rollback(s);
	return -EIO;
}
