#include "fabric_state.h"

#include <errno.h>
#include <stdio.h>

#include "state/store_sql.h"

/* The columns both row readers share, after the id. */
#define ROW_COLUMNS                                                                                \
	"f.name, f.state, coalesce(f.error, ''), f.revision, (SELECT count(*) FROM missing_pair "  \
	"m WHERE m.fabric_id = f.id), (SELECT count(*) FROM circuit c WHERE c.fabric_id = f.id) "

static void row_fill(struct fabric_row *f, sqlite3_stmt *st)
{
	f->id = sqlite3_column_int64(st, 0);
	snprintf(f->name, sizeof(f->name), "%s", sqlite3_column_text(st, 1));
	snprintf(f->state, sizeof(f->state), "%s", sqlite3_column_text(st, 2));
	snprintf(f->err, sizeof(f->err), "%s", sqlite3_column_text(st, 3));
	f->revision = sqlite3_column_int64(st, 4);
	f->nmissing = sqlite3_column_int64(st, 5);
	f->ncircuits = sqlite3_column_int64(st, 6);
}

int fabric_row_get(struct store *s, int64_t id, struct fabric_row *out)
{
	sqlite3_stmt *st = store_stmt(s, "SELECT f.id, " ROW_COLUMNS
	                                 "FROM fabric f WHERE f.id = ? AND NOT f.partial");
	if (!st)
		return -EIO;
	sqlite3_bind_int64(st, 1, id);
	int step = sqlite3_step(st);
	if (step == SQLITE_ROW)
		row_fill(out, st);
	sqlite3_reset(st);
	return step == SQLITE_ROW ? 1 : step == SQLITE_DONE ? 0 : -EIO;
}

int fabric_rows_each(struct store *s, int (*fn)(void *arg, const struct fabric_row *row), void *arg)
{
	sqlite3_stmt *st = store_stmt(s, "SELECT f.id, " ROW_COLUMNS
	                                 "FROM fabric f WHERE NOT f.partial ORDER BY f.id");
	if (!st)
		return -EIO;
	int step, rc = 0;
	struct fabric_row row;
	while (rc == 0 && (step = sqlite3_step(st)) == SQLITE_ROW) {
		row_fill(&row, st);
		rc = fn(arg, &row);
	}
	sqlite3_reset(st);
	return rc ? rc : step == SQLITE_DONE ? 0 : -EIO;
}

int fabric_name_get(struct store *s, int64_t id, char *name, size_t len)
{
	sqlite3_stmt *st = store_stmt(s, "SELECT name FROM fabric WHERE id = ?");
	if (!st)
		return -EIO;
	sqlite3_bind_int64(st, 1, id);
	int step = sqlite3_step(st);
	if (step == SQLITE_ROW)
		snprintf(name, len, "%s", sqlite3_column_text(st, 0));
	sqlite3_reset(st);
	return step == SQLITE_ROW ? 1 : step == SQLITE_DONE ? 0 : -EIO;
}

int fabric_states_write(struct store *s, const struct fabric_state_change *v, size_t n)
{
	sqlite3_stmt *up = store_stmt(s, "UPDATE fabric SET state = ?, error = ?, updated = "
	                                 "strftime('%Y-%m-%dT%H:%M:%fZ', 'now') WHERE id = ?");
	int rc = up ? 0 : -EIO;
	for (size_t i = 0; rc == 0 && i < n; i++) {
		sqlite3_bind_text(up, 1, v[i].state, -1, SQLITE_TRANSIENT);
		/* Bindings outlive a reset: a state without an error must not keep the last one's.
		 */
		if (v[i].error && v[i].error[0])
			sqlite3_bind_text(up, 2, v[i].error, -1, SQLITE_TRANSIENT);
		else
			sqlite3_bind_null(up, 2);
		sqlite3_bind_int64(up, 3, v[i].id);
		rc = store_step_done(up);
	}
	return rc;
}
