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

#include "base/metrics.h"
#include "changeset_apply.h"
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

/*
 * Marks the transaction as applying a changeset (the schema's triggers stand aside) or
 * done, at revision and key when revision is above 0.
 */
static int set_applying(struct store *s, bool on, int64_t revision, const char *key)
{
	sqlite3_stmt *st = store_stmt(
	    s, on ? "INSERT INTO replica_state(id, applied_revision, applying) VALUES (1, 0, 1) "
	            "ON CONFLICT(id) DO UPDATE SET applying = 1"
	          : "UPDATE replica_state SET applying = 0, applied_revision = CASE WHEN ?1 > 0 "
	            "THEN ?1 ELSE applied_revision END, applied_key = CASE WHEN ?1 > 0 THEN ?2 "
	            "ELSE applied_key END");
	if (st && !on) {
		sqlite3_bind_int64(st, 1, revision);
		sqlite3_bind_text(st, 2, key, -1, SQLITE_TRANSIENT);
	}
	return st ? store_step_done(st) : -EIO;
}

/* Foreign keys a change deferred and left dangling at its end. */
static bool deferred_fks_dangle(struct store *s)
{
	int cur = 0, high = 0;
	sqlite3_db_status(store_db(s), SQLITE_DBSTATUS_DEFERRED_FKS, &cur, &high, 0);
	return cur > 0;
}

/*
 * store_apply_changes()'s transaction, with the foreign keys checked at each
 * row, or at the end when fk_refused (what the first try with them at each
 * row was refused: changeset_apply()'s -EAGAIN) is given. conflict: not NULL.
 */
static int apply_all(struct store *s, const struct store_changeset *v, size_t n, int64_t revision,
                     const char *key, const struct store_conflict *fk_refused,
                     struct store_conflict *conflict)
{
	bool fk_deferred = fk_refused != NULL;
	/* Durable in etcd already; a power cut takes the applied revision back with it. */
	int rc = store_begin_relaxed(s);
	if (rc < 0)
		return rc;
	/* COMMIT and ROLLBACK switch it off again. */
	if (fk_deferred && sqlite3_exec(store_db(s), "PRAGMA defer_foreign_keys = ON", NULL, NULL,
	                                NULL) != SQLITE_OK) {
		store_rollback(s);
		return -EIO;
	}
	if (set_applying(s, true, 0, NULL) < 0) {
		store_rollback(s);
		return -EIO;
	}
	rc = 0;
	for (size_t i = 0; rc == 0 && i < n; i++)
		rc = changeset_apply(s, v[i].data, v[i].len, fk_deferred, conflict);
	if (rc == 0 && fk_deferred && deferred_fks_dangle(s)) {
		*conflict = *fk_refused;
		rc = -EPROTO;
	}
	if (rc < 0) {
		store_rollback(s);
		return rc;
	}
	if (set_applying(s, false, revision, key) < 0) {
		store_rollback(s);
		return -EIO;
	}
	return store_commit(s);
}

int store_apply_changes(struct store *s, const struct store_changeset *v, size_t n,
                        int64_t revision, const char *key, struct store_conflict *conflict)
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
	struct store_conflict first = { 0 }, again = { 0 }, *why = &first;
	int rc = apply_all(s, v, n, revision, key, NULL, &first);
	if (rc == -EAGAIN) {
		rc = apply_all(s, v, n, revision, key, &first, &again);
		why = &again;
	}
	if (conflict)
		*conflict = *why;
	return rc;
}

void store_applied_key(struct store *s, char *out, size_t len)
{
	sqlite3_stmt *st = store_stmt(s, "SELECT applied_key FROM replica_state WHERE id = 1");
	const unsigned char *key =
	    st && sqlite3_step(st) == SQLITE_ROW ? sqlite3_column_text(st, 0) : NULL;
	snprintf(out, len, "%s", key && strlen((const char *)key) < len ? (const char *)key : "");
	if (st)
		sqlite3_reset(st);
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

struct store_snapshot {
	sqlite3 *src; /* a connection of its own, in a read transaction: the store as of then */
	sqlite3 *mem; /* the copy, a memdb database in room */
	unsigned char *room; /* the copy's memory, malloc'd, sized for the whole store */
	size_t size;         /* room's bytes, counted in STORE_SNAPSHOT_GAUGE while held */
	sqlite3_backup *b;   /* from src into mem, NULL once over */
	bool whole;          /* the copy is done */
};

/* The source's read transaction ends as soon as the copy is over, not when it is sent. */
static void snapshot_source_close(struct store_snapshot *ss)
{
	if (ss->b)
		sqlite3_backup_finish(ss->b);
	ss->b = NULL;
	sqlite3_close(ss->src); /* and its read transaction */
	ss->src = NULL;
}

void store_snapshot_free(struct store_snapshot *ss)
{
	if (!ss)
		return;
	snapshot_source_close(ss);
	sqlite3_close(ss->mem);
	free(ss->room); /* after the memdb that used it */
	metrics_gauge_add(STORE_SNAPSHOT_GAUGE, STORE_SNAPSHOT_GAUGE_HELP, -(double)ss->size);
	free(ss);
}

/* PRAGMA name of the source as an integer into *v. SQLite's result code. */
static int source_pragma(struct store_snapshot *ss, const char *sql, sqlite3_int64 *v)
{
	sqlite3_stmt *st = NULL;
	int rc = sqlite3_prepare_v2(ss->src, sql, -1, &st, NULL);
	if (rc == SQLITE_OK)
		rc = sqlite3_step(st);
	if (rc == SQLITE_ROW) {
		*v = sqlite3_column_int64(st, 0);
		rc = SQLITE_OK;
	}
	sqlite3_finalize(st);
	return rc;
}

int store_snapshot_begin(struct store *s, struct store_snapshot **out)
{
	struct store_snapshot *ss = calloc(1, sizeof(*ss));
	const char *path = sqlite3_db_filename(store_db(s), "main");
	sqlite3_int64 page = 0, pages = 0;
	int rc = SQLITE_CANTOPEN;

	*out = NULL;
	if (!ss)
		return -ENOMEM;
	/*
	 * Copied from a read transaction of another connection, which WAL keeps at one point in
	 * time: the loop's connection writes and rolls back (a cluster leader's every write)
	 * meanwhile without restarting the copy, and its pages are consistent with the revision
	 * its replica_state records. The page count opens the transaction: the size as of then.
	 */
	if (path && path[0] &&
	    (rc = sqlite3_open_v2(path, &ss->src, SQLITE_OPEN_READONLY, NULL)) == SQLITE_OK &&
	    /* As the loop's own connection waits: a checkpoint's moment, not a refusal. */
	    (rc = sqlite3_busy_timeout(ss->src, 1000)) == SQLITE_OK &&
	    (rc = sqlite3_exec(ss->src, "BEGIN", NULL, NULL, NULL)) == SQLITE_OK &&
	    (rc = source_pragma(ss, "PRAGMA page_size", &page)) == SQLITE_OK)
		rc = source_pragma(ss, "PRAGMA page_count", &pages);
	if (rc != SQLITE_OK)
		goto fail;
	/*
	 * A memdb database in memory of ours, with room for the whole store from the start: one
	 * that grows by doubling copies half the store in one turn at its last growth, and
	 * SQLite's allocator stops at 2 GiB.
	 */
	size_t size = (size_t)(pages ? pages : 1) * (size_t)page;
	rc = SQLITE_NOMEM;
	if (!page || !(ss->room = malloc(size)))
		goto fail;
	ss->size = size;
	metrics_gauge_add(STORE_SNAPSHOT_GAUGE, STORE_SNAPSHOT_GAUGE_HELP, (double)size);
	if ((rc = sqlite3_open_v2("file:snapshot?vfs=memdb", &ss->mem,
	                          SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE | SQLITE_OPEN_URI,
	                          NULL)) != SQLITE_OK ||
	    (rc = sqlite3_deserialize(ss->mem, "main", ss->room, 0, (sqlite3_int64)size, 0)) !=
	        SQLITE_OK)
		goto fail;
	/* The source's page size, which a copy into memory cannot change later (a no-op mostly). */
	char sql[48];
	snprintf(sql, sizeof(sql), "PRAGMA page_size = %lld", (long long)page);
	if ((rc = sqlite3_exec(ss->mem, sql, NULL, NULL, NULL)) != SQLITE_OK)
		goto fail;
	ss->b = sqlite3_backup_init(ss->mem, "main", ss->src, "main");
	if (!ss->b) {
		rc = sqlite3_errcode(ss->mem);
		goto fail;
	}
	*out = ss;
	return 0;
fail:
	log_error("store", "cannot start a snapshot: %s", sqlite3_errstr(rc));
	store_snapshot_free(ss);
	return rc == SQLITE_BUSY || rc == SQLITE_LOCKED ? -EBUSY
	       : rc == SQLITE_NOMEM                     ? -ENOMEM
	                                                : -EIO;
}

int store_snapshot_step(struct store_snapshot *ss, int pages)
{
	if (!ss->b)
		return ss->whole ? 1 : -EIO;
	int rc = sqlite3_backup_step(ss->b, pages);

	if (rc == SQLITE_OK)
		return 0;
	if (rc == SQLITE_BUSY || rc == SQLITE_LOCKED)
		return -EBUSY;
	int end = sqlite3_backup_finish(ss->b);
	ss->b = NULL;
	snapshot_source_close(ss);
	if (rc != SQLITE_DONE || end != SQLITE_OK) {
		log_error("store", "cannot copy the store: %s",
		          sqlite3_errstr(rc != SQLITE_DONE ? rc : end));
		return rc == SQLITE_NOMEM ? -ENOMEM : -EIO;
	}
	ss->whole = true;
	return 1;
}

const void *store_snapshot_data(struct store_snapshot *ss, size_t *len)
{
	sqlite3_int64 n = 0;
	/* The copy's own memory, in place: no second copy of a store of hundreds of MiB. */
	const void *p =
	    ss->whole ? sqlite3_serialize(ss->mem, "main", &n, SQLITE_SERIALIZE_NOCOPY) : NULL;
	*len = p ? (size_t)n : 0;
	return p;
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
