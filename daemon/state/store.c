/* sqlite3.h declares the pre-update hook only with this (Debian builds SQLite with it). */
#define SQLITE_ENABLE_PREUPDATE_HOOK 1

#include "store_sql.h"

#include <errno.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "log.h"
#include "base/metrics.h"
#include "store_changes.h"
#include "store_checkpoint.h"
#include "store_migrations.h"
#include "store_table.h"
#include "monotonic.h"

#define STMT_SLOTS  512 /* power of two, well above the number of distinct statements */
#define TABLE_SLOTS 64  /* above the number of tables */
#define BATCH_SLOTS 8   /* above the number of store_insert_rows() statements */

struct stmt_slot {
	const char *sql;
	sqlite3_stmt *st;
};

struct store {
	sqlite3 *db;
	bool relaxed;                    /* the open transaction commits without fsync */
	struct hook txn_end;             /* store_txn_end listeners */
	struct hook preupdate;           /* store_preupdate listeners */
	struct hook update;              /* store_update listeners */
	struct store_checkpointer *ckpt; /* NULL: SQLite checkpoints inside commits */
	struct stmt_slot stmts[STMT_SLOTS];
	struct store_table *tables[TABLE_SLOTS]; /* store_table()'s, in the order first asked */
	int ntables;
	/* store_insert_rows()'s statements of STORE_INSERT_ROWS rows, by their one-row SQL */
	struct {
		const char *one;
		char *sql;
	} batches[BATCH_SLOTS];
	int nbatches;
};

sqlite3 *store_db(struct store *s)
{
	return s->db;
}

/* SQLite's one pre-update and update slots, shared out to the store's listeners. */
static void on_preupdate(void *arg, sqlite3 *db, int op, const char *zdb, const char *table,
                         sqlite3_int64 key1, sqlite3_int64 key2)
{
	struct store *s = arg;
	store_preupdate_hook_call(&s->preupdate, db, op, zdb, table, key1, key2);
}

static void on_update(void *arg, int op, const char *zdb, const char *table, sqlite3_int64 rowid)
{
	struct store *s = arg;
	store_update_hook_call(&s->update, op, zdb, table, rowid);
}

struct hook *store_preupdate_hook(struct store *s)
{
	return &s->preupdate;
}

struct hook *store_update_hook(struct store *s)
{
	return &s->update;
}

struct hook *store_txn_end_hook(struct store *s)
{
	return &s->txn_end;
}

void store_preupdate_aside(struct store *s, bool aside)
{
	sqlite3_preupdate_hook(s->db, aside ? NULL : on_preupdate, aside ? NULL : s);
}

static int exec_sql(struct store *s, const char *sql, char *err, size_t errlen)
{
	char *msg = NULL;
	if (sqlite3_exec(s->db, sql, NULL, NULL, &msg) != SQLITE_OK) {
		snprintf(err, errlen, "%s", msg ? msg : sqlite3_errmsg(s->db));
		sqlite3_free(msg);
		return -EIO;
	}
	return 0;
}

int store_schema_version(struct store *s)
{
	sqlite3_stmt *st = store_stmt(s, "PRAGMA user_version");
	int v = -1;
	if (st && sqlite3_step(st) == SQLITE_ROW)
		v = sqlite3_column_int(st, 0);
	if (st)
		sqlite3_reset(st);
	return v;
}

static int migrate(struct store *s, const char *path, char *err, size_t errlen)
{
	int have = store_schema_version(s);
	char why[512];

	if (have < 0) {
		snprintf(err, errlen, "%s: cannot read schema version: %s", path,
		         sqlite3_errmsg(s->db));
		return -EIO;
	}
	if (have > store_migrations_count) {
		snprintf(err, errlen,
		         "%s: database schema version %d is newer than this ofcd (it knows up to "
		         "%d); run the newer ofcd or restore a backup",
		         path, have, store_migrations_count);
		return -EPROTO;
	}
	for (int i = have; i < store_migrations_count; i++) {
		const struct store_migration *m = &store_migrations[i];
		char setv[64];
		snprintf(setv, sizeof(setv), "PRAGMA user_version = %d", m->version);
		/* Each migration and its version bump commit together or not at all. */
		if (exec_sql(s, "BEGIN IMMEDIATE", why, sizeof(why)) < 0 ||
		    exec_sql(s, m->sql, why, sizeof(why)) < 0 ||
		    exec_sql(s, setv, why, sizeof(why)) < 0 ||
		    exec_sql(s, "COMMIT", why, sizeof(why)) < 0) {
			exec_sql(s, "ROLLBACK", setv, sizeof(setv));
			snprintf(err, errlen, "%s: migration %s failed: %s", path, m->name, why);
			return -EIO;
		}
		log_info("store", "applied migration %s", m->name);
	}
	return 0;
}

int store_open(const char *path, struct store **out, char *err, size_t errlen)
{
	struct store *s = calloc(1, sizeof(*s));
	char why[512];
	int rc;

	if (!s) {
		snprintf(err, errlen, "out of memory");
		return -ENOMEM;
	}
	/*
	 * Each connection is used by one thread only (this one by the loop, the
	 * checkpointer's by its thread): SQLite need not lock a connection's
	 * mutex around every call (a 64-server fabric makes some 30,000), nor
	 * count memory under a global mutex the two threads contend for. Only
	 * the first call in the process can configure; a later one fails
	 * harmlessly and changes nothing.
	 */
	sqlite3_config(SQLITE_CONFIG_MEMSTATUS, 0);
	if (sqlite3_open_v2(path, &s->db,
	                    SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE | SQLITE_OPEN_NOMUTEX,
	                    NULL) != SQLITE_OK) {
		snprintf(err, errlen, "%s: cannot open: %s", path,
		         s->db ? sqlite3_errmsg(s->db) : "out of memory");
		rc = -EIO;
		goto fail;
	}
	sqlite3_extended_result_codes(s->db, 1);
	/* The loop waits while SQLite does: keep a lock held by someone else short. */
	sqlite3_busy_timeout(s->db, STORE_BUSY_MS);
	/* journal_mode answers with a row; "wal" means it took. */
	sqlite3_stmt *st = NULL;
	if (sqlite3_prepare_v2(s->db, "PRAGMA journal_mode=WAL", -1, &st, NULL) != SQLITE_OK ||
	    sqlite3_step(st) != SQLITE_ROW ||
	    strcmp((const char *)sqlite3_column_text(st, 0), "wal") != 0) {
		snprintf(err, errlen, "%s: cannot switch to WAL mode: %s", path,
		         sqlite3_errmsg(s->db));
		sqlite3_finalize(st);
		rc = -EIO;
		goto fail;
	}
	sqlite3_finalize(st);
	/*
	 * A 16 MiB page cache (SQLite's default is 2 MiB): a topology of 8,192
	 * servers (524,288 cables) dirties more pages than 8 MiB hold, and a
	 * transaction larger than its cache spills and rewrites them in the WAL
	 * over and over (PUT /v1/topology: 9.5 s with 2 MiB, 7.8 s with 8, 2.2 s
	 * with 16 or 32). Temporary data in memory: each insert that fires a
	 * trigger has a statement journal, which went to a file (38% of a
	 * 2-million-cable PUT in pwrite()).
	 */
	if (exec_sql(s,
	             "PRAGMA synchronous=FULL; PRAGMA foreign_keys=ON; PRAGMA cache_size=-16384; "
	             "PRAGMA temp_store=MEMORY;",
	             why, sizeof(why)) < 0) {
		snprintf(err, errlen, "%s: %s", path, why);
		rc = -EIO;
		goto fail;
	}
	rc = migrate(s, path, err, errlen);
	if (rc < 0)
		goto fail;
	sqlite3_preupdate_hook(s->db, on_preupdate, s);
	sqlite3_update_hook(s->db, on_update, s);
	if (store_checkpointer_start(s->db, path, &s->ckpt) < 0)
		log_warn("store", "%s: checkpoints stay inside commits (no checkpoint thread)",
		         path);
	metrics_gauge_add(STORE_SNAPSHOT_GAUGE, STORE_SNAPSHOT_GAUGE_HELP, 0);
	*out = s;
	return 0;
fail:
	store_close(s);
	return rc;
}

void store_close(struct store *s)
{
	if (!s)
		return;
	store_checkpointer_stop(s->ckpt);
	for (size_t i = 0; i < STMT_SLOTS; i++)
		sqlite3_finalize(s->stmts[i].st);
	/* After the statements: their cache holds these tables' SQL by address. */
	for (int i = 0; i < s->ntables; i++)
		store_table_free(s->tables[i]);
	for (int i = 0; i < s->nbatches; i++)
		free(s->batches[i].sql);
	if (s->db) {
		if (sqlite3_get_autocommit(s->db) == 0)
			sqlite3_exec(s->db, "ROLLBACK", NULL, NULL, NULL);
		/* Folds the WAL into the main file so a clean stop leaves one file. */
		sqlite3_wal_checkpoint_v2(s->db, NULL, SQLITE_CHECKPOINT_TRUNCATE, NULL, NULL);
		sqlite3_close(s->db);
	}
	hook_clear(&s->txn_end);
	hook_clear(&s->preupdate);
	hook_clear(&s->update);
	free(s);
}

sqlite3_stmt *store_stmt(struct store *s, const char *sql)
{
	size_t h = ((uintptr_t)sql >> 3) * 2654435761u;
	for (size_t n = 0; n < STMT_SLOTS; n++) {
		struct stmt_slot *slot = &s->stmts[(h + n) & (STMT_SLOTS - 1)];
		if (slot->sql == sql) {
			sqlite3_reset(slot->st);
			sqlite3_clear_bindings(slot->st);
			return slot->st;
		}
		if (slot->sql == NULL) {
			if (sqlite3_prepare_v3(s->db, sql, -1, SQLITE_PREPARE_PERSISTENT, &slot->st,
			                       NULL) != SQLITE_OK) {
				log_error("store", "cannot prepare \"%s\": %s", sql,
				          sqlite3_errmsg(s->db));
				slot->st = NULL;
				return NULL;
			}
			slot->sql = sql;
			return slot->st;
		}
	}
	log_error("store", "statement cache full");
	return NULL;
}

/* one's INSERT with STORE_INSERT_ROWS rows of ncols values, kept for the store's life. */
static const char *batch_sql(struct store *s, const char *one, int ncols)
{
	for (int i = 0; i < s->nbatches; i++)
		if (s->batches[i].one == one)
			return s->batches[i].sql;
	if (s->nbatches == BATCH_SLOTS)
		return NULL;
	const char *values = strstr(one, "VALUES");
	size_t head = values ? (size_t)(values - one) + 6 : 0, row = 2 + 3 * (size_t)ncols;
	char *sql = values ? malloc(head + STORE_INSERT_ROWS * row + 1) : NULL;
	if (!sql)
		return NULL;
	memcpy(sql, one, head);
	char *at = sql + head;
	for (int r = 0; r < STORE_INSERT_ROWS; r++) {
		*at++ = r ? ',' : ' ';
		*at++ = '(';
		for (int c = 0; c < ncols; c++)
			at += sprintf(at, c ? ", ?" : "?");
		*at++ = ')';
	}
	*at = '\0';
	s->batches[s->nbatches].one = one;
	s->batches[s->nbatches++].sql = sql;
	return sql;
}

int store_insert_rows(struct store *s, const char *one, int ncols, size_t n,
                      void (*bind)(sqlite3_stmt *st, int first, size_t row, void *arg), void *arg)
{
	const char *many = batch_sql(s, one, ncols);
	size_t i = 0;
	for (; many && n - i >= STORE_INSERT_ROWS; i += STORE_INSERT_ROWS) {
		sqlite3_stmt *st = store_stmt(s, many);
		if (!st)
			return -EIO;
		for (int r = 0; r < STORE_INSERT_ROWS; r++)
			bind(st, 1 + r * ncols, i + (size_t)r, arg);
		if (store_step_done(st) < 0)
			return -EIO;
	}
	for (; i < n; i++) {
		sqlite3_stmt *st = store_stmt(s, one);
		if (!st)
			return -EIO;
		bind(st, 1, i, arg);
		if (store_step_done(st) < 0)
			return -EIO;
	}
	return 0;
}

const struct store_table *store_table(struct store *s, const char *table)
{
	for (int i = 0; i < s->ntables; i++)
		if (strcmp(s->tables[i]->name, table) == 0)
			return s->tables[i];
	if (s->ntables == TABLE_SLOTS)
		return NULL;
	/* Only tables that exist are kept: any name may come from a corrupted changeset. */
	struct store_table *t = store_table_build(s->db, table);
	if (t)
		s->tables[s->ntables++] = t;
	return t;
}

int store_step_done(sqlite3_stmt *st)
{
	int rc = sqlite3_step(st);
	sqlite3_reset(st);
	if (rc == SQLITE_DONE || rc == SQLITE_ROW)
		return 0;
	log_error("store", "statement failed: %s", sqlite3_errstr(rc));
	return (rc & 0xff) == SQLITE_CONSTRAINT ? -EEXIST : -EIO;
}

static int exec_simple(struct store *s, const char *sql)
{
	sqlite3_stmt *st = store_stmt(s, sql);
	if (!st)
		return -EIO;
	int rc = sqlite3_step(st);
	sqlite3_reset(st);
	if (rc == SQLITE_DONE)
		return 0;
	log_error("store", "%s: %s", sql, sqlite3_errstr(rc));
	return (rc & 0xff) == SQLITE_BUSY ? -EBUSY : -EIO;
}

int store_begin(struct store *s)
{
	return exec_simple(s, "BEGIN IMMEDIATE");
}

int store_begin_relaxed(struct store *s)
{
	int rc = exec_simple(s, "PRAGMA synchronous=NORMAL");
	if (rc == 0)
		rc = exec_simple(s, "BEGIN IMMEDIATE");
	if (rc < 0) {
		exec_simple(s, "PRAGMA synchronous=FULL");
		return rc;
	}
	s->relaxed = true;
	return 0;
}

/* Back to fsync on every commit once a relaxed transaction is over. */
static void end_relaxed(struct store *s)
{
	if (s->relaxed) {
		s->relaxed = false;
		exec_simple(s, "PRAGMA synchronous=FULL");
	}
}

int store_commit(struct store *s)
{
	struct timespec t0, t1;
	clock_gettime(CLOCK_MONOTONIC, &t0);
	int rc = exec_simple(s, "COMMIT");
	clock_gettime(CLOCK_MONOTONIC, &t1);
	if (rc < 0) {
		store_rollback(s);
		return rc;
	}
	end_relaxed(s);
	metrics_observe_commit(mono_diff(&t0, &t1));
	store_txn_end_hook_call(&s->txn_end, s, true);
	return 0;
}

void store_rollback(struct store *s)
{
	if (sqlite3_get_autocommit(s->db) == 0)
		exec_simple(s, "ROLLBACK");
	end_relaxed(s);
	store_txn_end_hook_call(&s->txn_end, s, false);
}

void store_busy_timeout(struct store *s, int ms)
{
	sqlite3_busy_timeout(s->db, ms);
}

bool store_in_txn(struct store *s)
{
	return sqlite3_get_autocommit(s->db) == 0;
}

int store_audit(struct store *s, const char *token, const char *client, const char *method,
                const char *path, unsigned status)
{
	sqlite3_stmt *st =
	    store_stmt(s, "INSERT INTO audit(at, token, client, method, path, status) "
	                  "VALUES (strftime('%Y-%m-%dT%H:%M:%fZ','now'), ?, ?, ?, ?, ?)");
	if (!st)
		return -EIO;
	if (token)
		sqlite3_bind_text(st, 1, token, -1, SQLITE_TRANSIENT);
	if (client)
		sqlite3_bind_text(st, 2, client, -1, SQLITE_TRANSIENT);
	sqlite3_bind_text(st, 3, method, -1, SQLITE_TRANSIENT);
	sqlite3_bind_text(st, 4, path, -1, SQLITE_TRANSIENT);
	sqlite3_bind_int(st, 5, (int)status);
	int rc = store_step_done(st);
	int64_t id = sqlite3_last_insert_rowid(s->db);
	/* Heartbeats write too: keep the newest STORE_AUDIT_KEEP rows, pruned now and then. */
	if (rc == 0 && id % 1024 == 0) {
		st = store_stmt(s, "DELETE FROM audit WHERE id <= ?");
		sqlite3_bind_int64(st, 1, id - STORE_AUDIT_KEEP);
		rc = store_step_done(st);
	}
	return rc;
}
