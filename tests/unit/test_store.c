/* Store: pragmas, migrations on a temp file, newer-schema refusal, statement cache, audit. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <cmocka.h>

#include "state/store_sql.h"
#include "state/store_checkpoint.h"
#include "state/store_migrations.h"

static char dir[] = "/tmp/ofcd-store-XXXXXX";
static char path[256];

static int setup(void **state)
{
	(void)state;
	strcpy(dir, "/tmp/ofcd-store-XXXXXX");
	if (!mkdtemp(dir))
		return -1;
	snprintf(path, sizeof(path), "%s/t.db", dir);
	return 0;
}

static int teardown(void **state)
{
	(void)state;
	char p[300];
	const char *suffix[] = { "", "-wal", "-shm" };
	for (int i = 0; i < 3; i++) {
		snprintf(p, sizeof(p), "%s%s", path, suffix[i]);
		unlink(p);
	}
	rmdir(dir);
	return 0;
}

static int pragma_int(struct store *s, const char *sql)
{
	sqlite3_stmt *st;
	assert_int_equal(sqlite3_prepare_v2(store_db(s), sql, -1, &st, NULL), SQLITE_OK);
	assert_int_equal(sqlite3_step(st), SQLITE_ROW);
	int v = sqlite3_column_int(st, 0);
	sqlite3_finalize(st);
	return v;
}

static void test_migrate_fresh(void **state)
{
	(void)state;
	struct store *s = NULL;
	char err[512];
	assert_int_equal(store_open(path, &s, err, sizeof(err)), 0);
	assert_int_equal(store_schema_version(s), store_migrations_count);
	assert_int_equal(pragma_int(s, "PRAGMA foreign_keys"), 1);
	assert_int_equal(pragma_int(s, "PRAGMA synchronous"), 2); /* FULL */
	sqlite3_stmt *st;
	sqlite3_prepare_v2(store_db(s), "PRAGMA journal_mode", -1, &st, NULL);
	assert_int_equal(sqlite3_step(st), SQLITE_ROW);
	assert_string_equal((const char *)sqlite3_column_text(st, 0), "wal");
	sqlite3_finalize(st);
	store_close(s);

	/* Opening again applies nothing and keeps the version. */
	assert_int_equal(store_open(path, &s, err, sizeof(err)), 0);
	assert_int_equal(store_schema_version(s), store_migrations_count);
	store_close(s);
}

static void test_migrations_numbered(void **state)
{
	(void)state;
	for (int i = 0; i < store_migrations_count; i++)
		assert_int_equal(store_migrations[i].version, i + 1);
}

static void test_newer_refused(void **state)
{
	(void)state;
	struct store *s = NULL;
	char err[512];
	assert_int_equal(store_open(path, &s, err, sizeof(err)), 0);
	char sql[64];
	snprintf(sql, sizeof(sql), "PRAGMA user_version = %d", store_migrations_count + 1);
	assert_int_equal(sqlite3_exec(store_db(s), sql, NULL, NULL, NULL), SQLITE_OK);
	store_close(s);
	s = NULL;
	assert_true(store_open(path, &s, err, sizeof(err)) < 0);
	assert_null(s);
	assert_non_null(strstr(err, "newer than this ofcd"));
}

static void test_txn_audit(void **state)
{
	(void)state;
	struct store *s = NULL;
	char err[512];
	assert_int_equal(store_open(path, &s, err, sizeof(err)), 0);

	assert_int_equal(store_begin(s), 0);
	assert_true(store_in_txn(s));
	assert_int_equal(store_audit(s, "ops", "127.0.0.1", "POST", "/v1/x", 201), 0);
	store_rollback(s);
	assert_false(store_in_txn(s));
	assert_int_equal(pragma_int(s, "SELECT count(*) FROM audit"), 0);

	assert_int_equal(store_begin(s), 0);
	assert_int_equal(store_audit(s, NULL, NULL, "DELETE", "/v1/y", 404), 0);
	assert_int_equal(store_commit(s), 0);
	assert_int_equal(pragma_int(s, "SELECT count(*) FROM audit WHERE token IS NULL"), 1);

	/* The cache hands back the same statement for the same SQL text. */
	static const char q[] = "SELECT count(*) FROM audit";
	sqlite3_stmt *a = store_stmt(s, q);
	sqlite3_stmt *b = store_stmt(s, q);
	assert_non_null(a);
	assert_ptr_equal(a, b);
	assert_null(store_stmt(s, "SELECT nonsense FROM nowhere"));
	store_close(s);
}

/* The audit table keeps the newest STORE_AUDIT_KEEP rows. */
static void test_audit_pruned(void **state)
{
	(void)state;
	struct store *s = NULL;
	char err[512], sql[160];
	assert_int_equal(store_open(path, &s, err, sizeof(err)), 0);
	/* Old rows, then a row just below a pruning point (ids divisible by 1024). */
	int64_t next = 200 * 1024;
	snprintf(
	    sql, sizeof(sql),
	    "INSERT INTO audit(id, at, method, path, status) VALUES (1, 'x', 'PUT', '/a', 200), "
	    "(2, 'x', 'PUT', '/a', 200), (%lld, 'x', 'PUT', '/a', 200)",
	    (long long)(next - 1));
	assert_int_equal(sqlite3_exec(store_db(s), sql, NULL, NULL, NULL), SQLITE_OK);
	assert_int_equal(store_audit(s, "t", NULL, "PUT", "/b", 200), 0);
	assert_int_equal(pragma_int(s, "SELECT count(*) FROM audit"), 2);
	snprintf(sql, sizeof(sql), "SELECT min(id) FROM audit");
	assert_int_equal(pragma_int(s, sql), next - 1);
	store_close(s);
}

/*
 * The checkpoint thread's connection must checkpoint a log it has never read
 * (SQLite 3.40 did nothing through a connection that had not read yet, and
 * the log grew without end). Waits for the thread's first run, not for a time.
 */
static void test_checkpointer_copies(void **state)
{
	(void)state;
	sqlite3 *db;
	struct store_checkpointer *c;
	assert_int_equal(sqlite3_open(path, &db), SQLITE_OK);
	assert_int_equal(sqlite3_exec(db,
	                              "PRAGMA journal_mode=WAL; PRAGMA synchronous=OFF; "
	                              "CREATE TABLE t(x BLOB)",
	                              NULL, NULL, NULL),
	                 SQLITE_OK);
	assert_int_equal(store_checkpointer_start(db, path, &c), 0);
	/* Past the thread's threshold (1000 pages) in one commit, which wakes it. */
	assert_int_equal(sqlite3_exec(db,
	                              "WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 "
	                              "FROM n WHERE i < 1200) INSERT INTO t SELECT "
	                              "randomblob(4000) FROM n",
	                              NULL, NULL, NULL),
	                 SQLITE_OK);
	struct store_checkpoint_stats st = store_checkpointer_stats(c);
	for (long i = 0; st.runs == 0 && i < 600000; i++) {
		nanosleep(&(struct timespec){ 0, 100000 }, NULL);
		st = store_checkpointer_stats(c);
	}
	assert_true(st.runs > 0);
	assert_true(st.log_pages >= 1000);
	/* Nobody reads or writes meanwhile: all of it reaches the database file. */
	assert_int_equal(st.copied_pages, st.log_pages);
	store_checkpointer_stop(c);
	sqlite3_close(db);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup_teardown(test_migrate_fresh, setup, teardown),
		cmocka_unit_test(test_migrations_numbered),
		cmocka_unit_test_setup_teardown(test_newer_refused, setup, teardown),
		cmocka_unit_test_setup_teardown(test_txn_audit, setup, teardown),
		cmocka_unit_test_setup_teardown(test_audit_pruned, setup, teardown),
		cmocka_unit_test_setup_teardown(test_checkpointer_copies, setup, teardown),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
