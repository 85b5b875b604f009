#include "readback.h"

#include <errno.h>
#include <stdlib.h>

#include "state/store_sql.h"

int readback_clear(struct store *s, int64_t ocs_id)
{
	sqlite3_stmt *st = store_stmt(s, "DELETE FROM actual_xc WHERE ocs_id = ?");
	if (!st)
		return -EIO;
	sqlite3_bind_int64(st, 1, ocs_id);
	return store_step_done(st);
}

int readback_write(struct store *s, int64_t ocs_id, const struct plan_xc *old, size_t on,
                   const struct plan_xc *now, size_t n)
{
	sqlite3_stmt *del = store_stmt(s, "DELETE FROM actual_xc WHERE ocs_id = ? AND a = ? AND "
	                                  "b = ?");
	sqlite3_stmt *ins = store_stmt(s, "INSERT INTO actual_xc(ocs_id, a, b) VALUES (?, ?, ?)");
	size_t i = 0, j = 0;
	int rc = del && ins ? 0 : -EIO;
	/* One merge of two sorted lists: a few changed pairs cost a few rows. */
	while (rc == 0 && (i < on || j < n)) {
		int c = i == on ? 1 : j == n ? -1 : plan_xc_cmp(&old[i], &now[j]);
		if (c == 0) {
			i++, j++;
			continue;
		}
		sqlite3_stmt *st = c < 0 ? del : ins;
		const struct plan_xc *x = c < 0 ? &old[i++] : &now[j++];
		sqlite3_bind_int64(st, 1, ocs_id);
		sqlite3_bind_int64(st, 2, x->a);
		sqlite3_bind_int64(st, 3, x->b);
		rc = store_step_done(st);
	}
	return rc;
}

int readback_load(struct store *s, int64_t ocs_id, uint32_t ports, struct plan_xc **out, size_t *n)
{
	sqlite3_stmt *st = store_stmt(s, "SELECT a, b FROM actual_xc WHERE ocs_id = ? "
	                                 "ORDER BY a, b");
	struct plan_xc *v = NULL;
	size_t k = 0, cap = 0;
	int rc = 0;
	if (st) {
		sqlite3_bind_int64(st, 1, ocs_id);
		while (rc == 0 && sqlite3_step(st) == SQLITE_ROW) {
			int64_t a = sqlite3_column_int64(st, 0), b = sqlite3_column_int64(st, 1);
			if (a < 1 || b <= a || b > ports)
				continue;
			if (k == cap) {
				cap = cap ? 2 * cap : 256;
				struct plan_xc *t = realloc(v, cap * sizeof(*t));
				if (!t) {
					rc = -ENOMEM;
					break;
				}
				v = t;
			}
			v[k++] = (struct plan_xc){ (uint32_t)a, (uint32_t)b };
		}
		sqlite3_reset(st);
	}
	if (rc == 0 && !v && !(v = malloc(sizeof(*v))))
		rc = -ENOMEM;
	if (rc < 0) {
		free(v);
		return rc;
	}
	*out = v;
	*n = k;
	return 0;
}

int readback_port_link(struct store *s, int64_t ocs_id, uint32_t port, bool up)
{
	if (store_begin_relaxed(s) < 0)
		return -EIO;
	sqlite3_stmt *st = store_stmt(s, up ? "DELETE FROM ocs_port_down WHERE ocs_id = ? AND "
	                                      "port = ?"
	                                    : "INSERT OR IGNORE INTO ocs_port_down(ocs_id, port) "
	                                      "VALUES (?, ?)");
	if (st) {
		sqlite3_bind_int64(st, 1, ocs_id);
		sqlite3_bind_int64(st, 2, port);
		if (store_step_done(st) == 0)
			return store_commit(s);
	}
	store_rollback(s);
	return -EIO;
}

json_t *readback_ports_down(struct store *s, int64_t ocs_id)
{
	json_t *down = json_array();
	sqlite3_stmt *st = store_stmt(s, "SELECT port FROM ocs_port_down WHERE ocs_id = ? "
	                                 "ORDER BY port");
	if (!st)
		return down;
	sqlite3_bind_int64(st, 1, ocs_id);
	while (sqlite3_step(st) == SQLITE_ROW)
		json_array_append_new(down, json_integer(sqlite3_column_int64(st, 0)));
	sqlite3_reset(st);
	return down;
}
