/* The session extension's API is declared only with these defined. */
#define SQLITE_ENABLE_SESSION
#define SQLITE_ENABLE_PREUPDATE_HOOK

#include "store_changes.h"

#include <errno.h>
#include <limits.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "log.h"
#include "store_sql.h"

struct store_capture {
	struct store *s;
	sqlite3_session *session;
	const char *only; /* the one table recorded, or NULL: every replicated one */
};

/*
 * What each member derives for itself and never ships: the reconciler's
 * operations and read-back copies (only the leader has them) and where a
 * member stands in the log.
 */
static const char *const local_tables[] = { "operation", "operation_xc",  "operation_fabric",
	                                    "actual_xc", "ocs_port_down", "replica_state" };

bool store_table_is_local(const char *table)
{
	for (size_t i = 0; i < sizeof(local_tables) / sizeof(local_tables[0]); i++)
		if (strcmp(table, local_tables[i]) == 0)
			return true;
	return false;
}

static int record_table(void *arg, const char *table)
{
	const struct store_capture *c = arg;
	return c->only ? strcmp(table, c->only) == 0 : !store_table_is_local(table);
}

int store_capture_start(struct store *s, const char *only, struct store_capture **out)
{
	struct store_capture *c = calloc(1, sizeof(*c));
	if (!c)
		return -ENOMEM;
	c->only = only;
	c->s = s;
	/*
	 * The session takes the connection's pre-update hook and treats whatever
	 * was there as another session: the mirror's hook goes aside meanwhile.
	 * What it would count is dropped with the rollback that follows a
	 * capture, or is not counted there (fabric rows: the update hook).
	 */
	store_preupdate_aside(s, true);
	if (sqlite3session_create(store_db(s), "main", &c->session) == SQLITE_OK)
		sqlite3session_table_filter(c->session, record_table, c);
	if (!c->session || sqlite3session_attach(c->session, NULL) != SQLITE_OK) {
		store_capture_free(c);
		return -ENOMEM;
	}
	*out = c;
	return 0;
}

int store_capture_take(struct store_capture *c, void **data, size_t *len)
{
	int n = 0;
	void *p = NULL;
	int rc = sqlite3session_changeset(c->session, &n, &p);
	*data = NULL;
	*len = 0;
	if (rc != SQLITE_OK)
		return rc == SQLITE_NOMEM ? -ENOMEM : -EIO;
	if (n > 0) {
		/* Handed out as malloc'd memory: callers need not know it came from SQLite. */
		*data = malloc((size_t)n);
		if (*data)
			memcpy(*data, p, (size_t)n);
		*len = *data ? (size_t)n : 0;
	}
	sqlite3_free(p);
	return n > 0 && !*data ? -ENOMEM : 0;
}

void store_capture_free(struct store_capture *c)
{
	if (!c)
		return;
	if (c->session)
		sqlite3session_delete(c->session);
	store_preupdate_aside(c->s, false);
	free(c);
}

/* What an application of a changeset knows: the reconciler's columns, and what went wrong. */
struct derived_cols {
	struct store *s;
	bool known; /* looked up: only a conflict on fabric needs them */
	int n;
	int col[4]; /* the columns of fabric that are the leader's reconciler's (state, ...) */
	struct store_conflict *conflict; /* the first conflict that aborted it (the caller's) */
};

static bool is_derived(struct derived_cols *d, int col)
{
	if (!d->known) {
		sqlite3_stmt *st = store_stmt(d->s, "SELECT cid FROM pragma_table_info('fabric') "
		                                    "WHERE name IN ('state', 'error', 'updated')");
		while (st && d->n < 4 && sqlite3_step(st) == SQLITE_ROW)
			d->col[d->n++] = sqlite3_column_int(st, 0);
		if (st)
			sqlite3_reset(st);
		d->known = true;
	}
	for (int i = 0; i < d->n; i++)
		if (d->col[i] == col)
			return true;
	return false;
}

static bool same_value(sqlite3_value *a, sqlite3_value *b)
{
	int t = sqlite3_value_type(a);
	if (t != sqlite3_value_type(b))
		return false;
	if (t == SQLITE_NULL)
		return true;
	if (t == SQLITE_INTEGER)
		return sqlite3_value_int64(a) == sqlite3_value_int64(b);
	if (t == SQLITE_FLOAT)
		return sqlite3_value_double(a) == sqlite3_value_double(b);
	int n = sqlite3_value_bytes(a);
	return n == sqlite3_value_bytes(b) &&
	       memcmp(sqlite3_value_blob(a), sqlite3_value_blob(b), (size_t)n) == 0;
}

/* A fabric row that differs from the changeset's old values only in the reconciler's columns. */
static bool differs_in_derived_only(sqlite3_changeset_iter *it, int ncol, struct derived_cols *d)
{
	for (int i = 0; i < ncol; i++) {
		sqlite3_value *old = NULL, *cur = NULL;
		if (sqlite3changeset_old(it, i, &old) != SQLITE_OK || !old ||
		    sqlite3changeset_conflict(it, i, &cur) != SQLITE_OK || !cur)
			continue;
		if (!is_derived(d, i) && !same_value(old, cur))
			return false;
	}
	return true;
}

/* An UPDATE of fabric that changes only the reconciler's columns. */
static bool changes_derived_only(sqlite3_changeset_iter *it, int ncol, struct derived_cols *d)
{
	for (int i = 0; i < ncol; i++) {
		sqlite3_value *v = NULL;
		if (sqlite3changeset_new(it, i, &v) == SQLITE_OK && v && !is_derived(d, i))
			return false;
	}
	return true;
}

static const char *kind_name(int kind)
{
	switch (kind) {
	case SQLITE_CHANGESET_DATA:
		return "a row differs from the change's old values";
	case SQLITE_CHANGESET_NOTFOUND:
		return "a row the change names is missing";
	case SQLITE_CHANGESET_CONFLICT:
		return "a row the change inserts is there already";
	case SQLITE_CHANGESET_FOREIGN_KEY:
		return "the change leaves a row whose parent is missing";
	default:
		return "a constraint fails";
	}
}

/* Notes the first conflict that aborts the application, for the caller to tell. */
static int abort_with(struct derived_cols *d, int kind, const char *table)
{
	if (d->conflict && !d->conflict->kind) {
		d->conflict->kind = kind;
		snprintf(d->conflict->table, sizeof(d->conflict->table), "%s", table);
		snprintf(d->conflict->what, sizeof(d->conflict->what), "%s", kind_name(kind));
	}
	return SQLITE_CHANGESET_ABORT;
}

/*
 * Which differences between a changeset and this store are expected, and
 * what then wins. A row a DELETE names is gone already (a cascade of an
 * earlier row of the same changeset): the end is the same. fabric's state,
 * error and updated are the leader's reconciler's and travel apart, merged
 * and late: a fabric row may differ there, and the changeset wins; a change
 * of only those of a fabric this store no longer has is moot. The audit
 * trail is the leader's: an id a refusal audited here took gives way. Any
 * other difference means this store is not the leader's: stop.
 */
static int on_conflict(void *arg, int kind, sqlite3_changeset_iter *it)
{
	struct derived_cols *d = arg;
	const char *table = NULL;
	int ncol = 0, op = 0, indirect = 0;
	/*
	 * A foreign key left dangling is told once, at the end, and names no row
	 * (sqlite3changeset_op() gives no table then): always an abort.
	 */
	if (kind == SQLITE_CHANGESET_FOREIGN_KEY || kind == SQLITE_CHANGESET_CONSTRAINT ||
	    sqlite3changeset_op(it, &table, &ncol, &op, &indirect) != SQLITE_OK || !table)
		return abort_with(d, kind,
		                  kind == SQLITE_CHANGESET_FOREIGN_KEY ? "(a foreign key)"
		                                                       : "(a constraint)");
	bool fabric = strcmp(table, "fabric") == 0;
	if (strcmp(table, "audit") == 0)
		return kind == SQLITE_CHANGESET_NOTFOUND ? SQLITE_CHANGESET_OMIT
		                                         : SQLITE_CHANGESET_REPLACE;
	if (kind == SQLITE_CHANGESET_NOTFOUND &&
	    (op == SQLITE_DELETE || (fabric && changes_derived_only(it, ncol, d))))
		return SQLITE_CHANGESET_OMIT;
	if (kind == SQLITE_CHANGESET_DATA && fabric && differs_in_derived_only(it, ncol, d))
		return SQLITE_CHANGESET_REPLACE;
	return abort_with(d, kind, table);
}

/* Marks the transaction as applying a changeset (the schema's triggers stand aside) or done. */
static int set_applying(struct store *s, bool on, int64_t revision)
{
	sqlite3_stmt *st = store_stmt(
	    s, on ? "INSERT INTO replica_state(id, applied_revision, applying) VALUES (1, 0, 1) "
	            "ON CONFLICT(id) DO UPDATE SET applying = 1"
	          : "UPDATE replica_state SET applying = 0, applied_revision = CASE WHEN ?1 > 0 "
	            "THEN ?1 ELSE applied_revision END");
	if (st && !on)
		sqlite3_bind_int64(st, 1, revision);
	return st ? store_step_done(st) : -EIO;
}

int store_apply_changes(struct store *s, const struct store_changeset *v, size_t n,
                        int64_t revision, struct store_conflict *conflict)
{
	if (conflict)
		memset(conflict, 0, sizeof(*conflict));
	if (store_in_txn(s))
		return -EBUSY;
	for (size_t i = 0; i < n; i++) {
		char why[80];
		if (store_changeset_check(s, v[i].data, v[i].len, why, sizeof(why)) == 0)
			continue;
		if (conflict) {
			snprintf(conflict->table, sizeof(conflict->table), "(not a changeset)");
			snprintf(conflict->what, sizeof(conflict->what), "%s", why);
		}
		return -EPROTO;
	}
	/* Durable in etcd already; a power cut takes the applied revision back with it. */
	int rc = store_begin_relaxed(s);
	if (rc < 0)
		return rc;
	if (set_applying(s, true, 0) < 0) {
		store_rollback(s);
		return -EIO;
	}
	struct derived_cols d = { .s = s, .conflict = conflict };
	/*
	 * No savepoint of its own: a failure rolls the whole transaction back
	 * anyway, and a savepoint copies each page it first touches to a temporary
	 * sub-journal file (a 4,096-server topology took 7 s instead of 1).
	 */
	rc = SQLITE_OK;
	for (size_t i = 0; rc == SQLITE_OK && i < n; i++)
		rc = v[i].len > INT_MAX
		         ? SQLITE_TOOBIG
		         : sqlite3changeset_apply_v2(store_db(s), (int)v[i].len, (void *)v[i].data,
		                                     NULL, on_conflict, &d, NULL, NULL,
		                                     SQLITE_CHANGESETAPPLY_NOSAVEPOINT);
	if (rc != SQLITE_OK) {
		store_rollback(s);
		/* Only the store failing is worth a retry: anything else is the change's doing. */
		int primary = rc & 0xff;
		if (primary == SQLITE_NOMEM)
			return -ENOMEM;
		if (primary == SQLITE_IOERR || primary == SQLITE_FULL || primary == SQLITE_BUSY ||
		    primary == SQLITE_LOCKED || primary == SQLITE_CANTOPEN || primary == SQLITE_READONLY)
			return -EIO;
		if (conflict && !conflict->table[0]) {
			snprintf(conflict->table, sizeof(conflict->table), "(the change)");
			snprintf(conflict->what, sizeof(conflict->what), "%s", sqlite3_errstr(rc));
		}
		return -EPROTO;
	}
	if (set_applying(s, false, revision) < 0) {
		store_rollback(s);
		return -EIO;
	}
	return store_commit(s);
}

int store_note_applied_revision(struct store *s, int64_t revision)
{
	if (store_in_txn(s) || store_begin_relaxed(s) < 0)
		return -EBUSY;
	sqlite3_stmt *st = store_stmt(s, "INSERT INTO replica_state(id, applied_revision) VALUES "
	                                 "(1, ?1) ON CONFLICT(id) DO UPDATE SET applied_revision = "
	                                 "max(applied_revision, ?1)");
	if (st)
		sqlite3_bind_int64(st, 1, revision);
	if (!st || store_step_done(st) < 0) {
		store_rollback(s);
		return -EIO;
	}
	return store_commit(s);
}

int64_t store_applied_revision(struct store *s)
{
	sqlite3_stmt *st = store_stmt(s, "SELECT applied_revision FROM replica_state WHERE id = 1");
	int64_t rev = -EIO;
	int rc;
	if (!st)
		return -EIO;
	rc = sqlite3_step(st);
	if (rc == SQLITE_ROW)
		rev = sqlite3_column_int64(st, 0);
	else if (rc == SQLITE_DONE)
		rev = 0;
	sqlite3_reset(st);
	return rev;
}

int store_unreplicated_tables(struct store *s, char *out, size_t len)
{
	/* pk > 0 marks a primary key column; rowid tables without one have none. */
	sqlite3_stmt *st = store_stmt(
	    s,
	    "SELECT m.name FROM sqlite_schema m WHERE m.type = 'table' AND m.name NOT LIKE "
	    "'sqlite_%' AND NOT EXISTS (SELECT 1 FROM pragma_table_info(m.name) p WHERE p.pk > 0) "
	    "ORDER BY m.name");
	int n = 0, rc;
	size_t used = 0;
	if (!st)
		return -EIO;
	if (len)
		out[0] = '\0';
	while ((rc = sqlite3_step(st)) == SQLITE_ROW) {
		if (used < len) {
			int w = snprintf(out + used, len - used, "%s%s", n ? "," : "",
			                 (const char *)sqlite3_column_text(st, 0));
			used += w > 0 ? (size_t)w : 0;
		}
		n++;
	}
	sqlite3_reset(st);
	return rc == SQLITE_DONE ? n : -EIO;
}

int store_snapshot(struct store *s, void **data, size_t *len)
{
	sqlite3_int64 n = 0;
	*data = NULL;
	*len = 0;
	if (store_in_txn(s))
		return -EBUSY;
	/* A copy of the file as of now: its replica_state says how far the log it holds goes. */
	unsigned char *p = sqlite3_serialize(store_db(s), "main", &n, 0);
	if (!p)
		return -ENOMEM;
	*data = malloc((size_t)n);
	if (*data)
		memcpy(*data, p, (size_t)n);
	sqlite3_free(p);
	if (!*data)
		return -ENOMEM;
	*len = (size_t)n;
	return 0;
}

int store_restore(struct store *s, const void *data, size_t len)
{
	sqlite3 *mem = NULL;
	unsigned char *copy = NULL;
	int rc = SQLITE_NOMEM;
	if (store_in_txn(s))
		return -EBUSY;
	if (sqlite3_open_v2(":memory:", &mem, SQLITE_OPEN_READWRITE, NULL) == SQLITE_OK &&
	    (copy = sqlite3_malloc64(len)) != NULL) {
		memcpy(copy, data, len);
		/*
		 * The file is in WAL mode (header bytes 18 and 19 are 2), which a
		 * database in memory cannot open: read it as a rollback-journal one.
		 */
		if (len >= 100 && copy[18] == 2 && copy[19] == 2)
			copy[18] = copy[19] = 1;
		/* SQLite owns copy from here, even when this fails. */
		rc = sqlite3_deserialize(mem, "main", copy, (sqlite3_int64)len, (sqlite3_int64)len,
		                         SQLITE_DESERIALIZE_FREEONCLOSE |
		                             SQLITE_DESERIALIZE_READONLY);
	}
	/* A snapshot must be a whole store of this schema: refuse anything else untouched. */
	sqlite3_stmt *st = NULL;
	if (rc == SQLITE_OK &&
	    (sqlite3_prepare_v2(mem, "PRAGMA quick_check", -1, &st, NULL) != SQLITE_OK ||
	     sqlite3_step(st) != SQLITE_ROW ||
	     strcmp((const char *)sqlite3_column_text(st, 0), "ok") != 0))
		rc = SQLITE_CORRUPT;
	sqlite3_finalize(st);
	if (rc == SQLITE_OK &&
	    (sqlite3_prepare_v2(mem, "PRAGMA user_version", -1, &st, NULL) != SQLITE_OK ||
	     sqlite3_step(st) != SQLITE_ROW ||
	     sqlite3_column_int(st, 0) != store_schema_version(s)))
		rc = SQLITE_MISMATCH;
	sqlite3_finalize(st);
	if (rc == SQLITE_OK) {
		sqlite3_backup *b = sqlite3_backup_init(store_db(s), "main", mem, "main");
		rc = b ? sqlite3_backup_step(b, -1) : sqlite3_errcode(store_db(s));
		rc = rc == SQLITE_DONE ? SQLITE_OK : rc;
		int end = b ? sqlite3_backup_finish(b) : SQLITE_OK;
		if (rc == SQLITE_OK)
			rc = end;
	}
	if (!mem && copy)
		sqlite3_free(copy);
	sqlite3_close(mem);
	if (rc != SQLITE_OK)
		log_error("store", "cannot restore the snapshot: %s", sqlite3_errstr(rc));
	return rc == SQLITE_OK                                                        ? 0
	       : rc == SQLITE_NOMEM                                                   ? -ENOMEM
	       : rc == SQLITE_CORRUPT || rc == SQLITE_MISMATCH || rc == SQLITE_NOTADB ? -EPROTO
	                                                                              : -EIO;
}

int store_changes_combine(const void *a, size_t alen, const void *b, size_t blen, void **out,
                          size_t *len)
{
	sqlite3_changegroup *g = NULL;
	int n = 0;
	void *p = NULL;
	int rc = sqlite3changegroup_new(&g);
	if (rc == SQLITE_OK)
		rc = sqlite3changegroup_add(g, (int)alen, (void *)a);
	if (rc == SQLITE_OK)
		rc = sqlite3changegroup_add(g, (int)blen, (void *)b);
	if (rc == SQLITE_OK)
		rc = sqlite3changegroup_output(g, &n, &p);
	sqlite3changegroup_delete(g);
	*out = NULL;
	*len = 0;
	if (rc == SQLITE_OK && n > 0 && (*out = malloc((size_t)n)) != NULL) {
		memcpy(*out, p, (size_t)n);
		*len = (size_t)n;
	}
	sqlite3_free(p);
	if (rc != SQLITE_OK)
		return rc == SQLITE_NOMEM ? -ENOMEM : -EPROTO;
	return n > 0 && !*out ? -ENOMEM : 0;
}
