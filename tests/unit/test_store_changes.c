/* Changesets: a transaction captured on one store and applied to another, conflicts refused. */
#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* SQLite declares its changeset conflict kinds only with these. */
#define SQLITE_ENABLE_SESSION
#define SQLITE_ENABLE_PREUPDATE_HOOK

#include <cmocka.h>
#include <errno.h>
#include <unistd.h>

#include "state/store_changes.h"
#include "state/store_sql.h"

struct pair {
	char dir[64];
	struct store *a, *b;
};

/* One changeset applied as store_apply_changes() applies a change of the log. */
static int apply1(struct store *s, const void *data, size_t len, int64_t revision)
{
	struct store_changeset one = { data, len };
	return store_apply_changes(s, &one, 1, revision, NULL, NULL);
}

static int setup(void **state)
{
	static struct pair p;
	char path[96], err[256];
	snprintf(p.dir, sizeof(p.dir), "/tmp/ofcd-test-changes-XXXXXX");
	if (!mkdtemp(p.dir))
		return -1;
	snprintf(path, sizeof(path), "%s/a.db", p.dir);
	if (store_open(path, &p.a, err, sizeof(err)) < 0)
		return -1;
	snprintf(path, sizeof(path), "%s/b.db", p.dir);
	if (store_open(path, &p.b, err, sizeof(err)) < 0)
		return -1;
	*state = &p;
	return 0;
}

static int teardown(void **state)
{
	struct pair *p = *state;
	char cmd[96];
	store_close(p->a);
	store_close(p->b);
	snprintf(cmd, sizeof(cmd), "rm -rf '%s'", p->dir);
	return system(cmd) == 0 ? 0 : -1;
}

static void exec(struct store *s, const char *sql)
{
	assert_int_equal(sqlite3_exec(store_db(s), sql, NULL, NULL, NULL), SQLITE_OK);
}

/* Runs sql on s in one captured transaction; returns its changeset. */
static void *captured(struct store *s, const char *sql, size_t *len)
{
	struct store_capture *c;
	void *data;
	assert_int_equal(store_capture_start(s, NULL, &c), 0);
	assert_int_equal(store_begin(s), 0);
	exec(s, sql);
	assert_int_equal(store_capture_take(c, &data, len), 0);
	assert_int_equal(store_commit(s), 0);
	store_capture_free(c);
	return data;
}

static char *servers(struct store *s)
{
	static char buf[256];
	sqlite3_stmt *st;
	buf[0] = '\0';
	assert_int_equal(sqlite3_prepare_v2(store_db(s),
	                                    "SELECT id, name, devices FROM server ORDER BY id", -1,
	                                    &st, NULL),
	                 SQLITE_OK);
	while (sqlite3_step(st) == SQLITE_ROW) {
		size_t n = strlen(buf);
		snprintf(buf + n, sizeof(buf) - n, "%d:%s:%d;", sqlite3_column_int(st, 0),
		         (const char *)sqlite3_column_text(st, 1), sqlite3_column_int(st, 2));
	}
	sqlite3_finalize(st);
	return buf;
}

static void test_replicate(void **state)
{
	struct pair *p = *state;
	size_t len;
	void *cs = captured(p->a,
	                    "INSERT INTO server(id, name, devices, ports_per_device) "
	                    "VALUES (1, 's1', 8, 2), (2, 's2', 4, 1)",
	                    &len);
	assert_true(len > 0);
	assert_int_equal(store_applied_revision(p->b), 0);
	assert_int_equal(apply1(p->b, cs, len, 7), 0);
	assert_int_equal(store_applied_revision(p->b), 7);
	free(cs);
	cs = captured(
	    p->a, "UPDATE server SET devices = 16 WHERE id = 1; DELETE FROM server WHERE id = 2",
	    &len);
	assert_int_equal(apply1(p->b, cs, len, 9), 0);
	assert_int_equal(store_applied_revision(p->b), 9);
	assert_string_equal(servers(p->b), "1:s1:16;");
	assert_string_equal(servers(p->b), servers(p->a));

	/* Applied twice: the old values no longer match, so it is refused as a whole. */
	assert_int_equal(apply1(p->b, cs, len, 10), -EPROTO);
	assert_int_equal(store_applied_revision(p->b), 9); /* rolled back with the changeset */
	assert_string_equal(servers(p->b), "1:s1:16;");
	free(cs);

	/* A transaction that changed nothing has an empty changeset. */
	cs = captured(p->a, "UPDATE server SET devices = 16 WHERE id = 99", &len);
	assert_null(cs);
	assert_int_equal(len, 0);

	/* Not applied inside another transaction. */
	assert_int_equal(store_begin(p->b), 0);
	assert_int_equal(apply1(p->b, "x", 1, 0), -EBUSY);
	store_rollback(p->b);
	assert_int_equal(apply1(p->b, "garbage", 7, 0), -EPROTO);
}

static int64_t count(struct store *s, const char *sql)
{
	sqlite3_stmt *st;
	assert_int_equal(sqlite3_prepare_v2(store_db(s), sql, -1, &st, NULL), SQLITE_OK);
	assert_int_equal(sqlite3_step(st), SQLITE_ROW);
	int64_t n = sqlite3_column_int64(st, 0);
	sqlite3_finalize(st);
	return n;
}

static void apply_captured(struct pair *p, const char *sql, int64_t revision)
{
	size_t len;
	void *cs = captured(p->a, sql, &len);
	assert_int_equal(apply1(p->b, cs, len, revision), 0);
	free(cs);
}

/* What a follower may hold differently from the leader, and how each resolves. */
static void test_expected_differences(void **state)
{
	struct pair *p = *state;
	apply_captured(
	    p,
	    "INSERT INTO server(id, name, devices, ports_per_device) VALUES (11, 's11', 8, "
	    "2), (12, 's12', 8, 2);"
	    "INSERT INTO fabric(id, name, state, formula, planes, min_devices) VALUES "
	    "(1, 'job', 'pending', 1, 1, 1);"
	    "INSERT INTO fabric_server(fabric_id, position, server_id) VALUES (1, 0, 11), "
	    "(1, 1, 12)",
	    3);
	/* The leader's triggers bumped the members' revisions; the follower's stood aside. */
	assert_int_equal(count(p->a, "SELECT revision FROM server WHERE id = 11"), 2);
	assert_int_equal(count(p->b, "SELECT revision FROM server WHERE id = 11"), 2);
	/* The leader's reconciler moved the fabric on; that travels apart, or not at all. */
	exec(p->a, "UPDATE fabric SET state = 'applied' WHERE id = 1");
	/* Local tables are never shipped: an operation row on the leader stays its own. */
	apply_captured(p,
	               "INSERT INTO operation(id, ocs, trigger, nadds, ndeletes, status) "
	               "VALUES (1, 'u1', 'change', 0, 0, 'succeeded');"
	               "UPDATE fabric SET planes = 2 WHERE id = 1",
	               4);
	assert_int_equal(count(p->b, "SELECT planes FROM fabric WHERE id = 1"), 2);
	assert_int_equal(count(p->b, "SELECT count(*) FROM operation"), 0);
	/* A refusal the follower audited for itself holds an id the leader uses next. */
	exec(p->b, "INSERT INTO audit(id, at, method, path, status) VALUES (50, 'x', 'POST', "
	           "'/refused', 401)");
	/* Deleting the fabric: its members go by cascade on both sides. */
	apply_captured(p,
	               "INSERT INTO audit(id, at, method, path, status) VALUES (50, 'y', 'DELETE', "
	               "'/v1/fabrics/job', 200);"
	               "DELETE FROM fabric WHERE id = 1",
	               5);
	assert_int_equal(count(p->b, "SELECT count(*) FROM fabric"), 0);
	assert_int_equal(count(p->b, "SELECT count(*) FROM fabric_server"), 0);
	assert_int_equal(count(p->b, "SELECT status FROM audit WHERE id = 50"), 200);
	assert_int_equal(store_applied_revision(p->b), 5);
	/* A fabric that differs in what users set is a divergence, not the reconciler's doing. */
	apply_captured(p,
	               "INSERT INTO fabric(id, name, state, formula, planes, min_devices) VALUES "
	               "(2, 'job2', 'pending', 1, 1, 1)",
	               6);
	exec(p->b, "UPDATE fabric SET formula = 9 WHERE id = 2");
	size_t len;
	void *del = captured(p->a, "DELETE FROM fabric WHERE id = 2", &len);
	assert_int_equal(apply1(p->b, del, len, 7), -EPROTO);
	free(del);
	assert_true(store_table_is_local("actual_xc"));
	assert_false(store_table_is_local("fabric"));
}

/*
 * Rows in the changeset's order, which is by table: a row whose parent or
 * whose name comes free later in the same change goes in on a later pass;
 * one that never can aborts the change, told as a conflict.
 */
static void test_order_and_constraints(void **state)
{
	struct pair *p = *state;
	struct store_conflict conflict;
	apply_captured(
	    p,
	    "INSERT INTO server(id, name, devices, ports_per_device) VALUES (61, 's61', 2, "
	    "1), (62, 's62', 2, 1);"
	    "INSERT INTO fabric(id, name, state, formula, planes, min_devices) VALUES "
	    "(10, 'old', 'pending', 1, 1, 1);"
	    "INSERT INTO fabric_server(fabric_id, position, server_id) VALUES (10, 0, 61)",
	    20);
	/* fabric_server is touched first: its new row comes before the fabric it belongs to. */
	apply_captured(
	    p,
	    "DELETE FROM fabric_server WHERE fabric_id = 10;"
	    "DELETE FROM fabric WHERE id = 10;"
	    "INSERT INTO fabric(id, name, state, formula, planes, min_devices) VALUES "
	    "(11, 'old', 'pending', 1, 1, 1);"
	    "INSERT INTO fabric_server(fabric_id, position, server_id) VALUES (11, 0, 61)",
	    21);
	assert_int_equal(count(p->b, "SELECT fabric_id FROM fabric_server WHERE server_id = 61"),
	                 11);
	assert_int_equal(count(p->b, "SELECT id FROM fabric WHERE name = 'old'"), 11);
	assert_int_equal(store_applied_revision(p->b), 21);

	/* This store lost the fabric a new row names: nothing clears that. */
	apply_captured(p,
	               "INSERT INTO fabric(id, name, state, formula, planes, min_devices) VALUES "
	               "(12, 'gone', 'pending', 1, 1, 1)",
	               22);
	exec(p->b, "DELETE FROM fabric WHERE id = 12");
	size_t len;
	void *cs = captured(
	    p->a, "INSERT INTO missing_pair(fabric_id, a_pos, b_pos) VALUES (12, 0, 1)", &len);
	struct store_changeset one = { cs, len };
	assert_int_equal(store_apply_changes(p->b, &one, 1, 23, NULL, &conflict), -EPROTO);
	assert_int_equal(conflict.kind, SQLITE_CHANGESET_FOREIGN_KEY);
	assert_string_equal(conflict.table, "missing_pair");
	assert_int_equal(count(p->b, "SELECT count(*) FROM missing_pair"), 0);
	assert_int_equal(store_applied_revision(p->b), 22);
	free(cs);

	/* A row it inserts is here already, with other values: a divergence. */
	exec(p->b,
	     "INSERT INTO server(id, name, devices, ports_per_device) VALUES (63, 'x63', 2, 1)");
	cs = captured(
	    p->a,
	    "INSERT INTO server(id, name, devices, ports_per_device) VALUES (63, 's63', 2, 1)",
	    &len);
	one = (struct store_changeset){ cs, len };
	assert_int_equal(store_apply_changes(p->b, &one, 1, 24, NULL, &conflict), -EPROTO);
	assert_int_equal(conflict.kind, SQLITE_CHANGESET_CONFLICT);
	assert_string_equal(conflict.table, "server");
	free(cs);
}

/*
 * A name moves to another row while a child keeps naming it: no row order
 * passes with the foreign keys checked at each row, so it goes in with them
 * checked at the end. A child this store alone holds still refuses it.
 */
static void test_parent_taken_over(void **state)
{
	struct pair *p = *state;
	struct store_conflict conflict;
	apply_captured(p,
	               "INSERT INTO switch(id, name) VALUES (3, 'sw3'), (4, 'sw4'), (5, 'sw5');"
	               "INSERT INTO server(id, name, devices, ports_per_device, switch) VALUES "
	               "(70, 's70', 2, 1, 'sw3')",
	               30);
	apply_captured(p,
	               "UPDATE server SET switch = NULL WHERE id = 70;"
	               "DELETE FROM switch WHERE id = 3;"
	               "UPDATE switch SET name = 'sw3' WHERE id = 4;"
	               "UPDATE server SET switch = 'sw3' WHERE id = 70",
	               31);
	assert_int_equal(count(p->b, "SELECT id FROM switch WHERE name = 'sw3'"), 4);
	assert_int_equal(count(p->b, "SELECT count(*) FROM switch"), 2);
	assert_int_equal(store_applied_revision(p->b), 31);

	/* Only the child differs: the trigger's bump of its switch is taken back. */
	exec(p->b, "INSERT INTO server(id, name, devices, ports_per_device, switch) VALUES "
	           "(72, 's72', 2, 1, 'sw5');"
	           "UPDATE switch SET revision = revision - 1 WHERE id = 5");
	size_t len;
	void *cs = captured(p->a, "DELETE FROM switch WHERE id = 5", &len);
	struct store_changeset one = { cs, len };
	assert_int_equal(store_apply_changes(p->b, &one, 1, 32, NULL, &conflict), -EPROTO);
	assert_int_equal(conflict.kind, SQLITE_CHANGESET_FOREIGN_KEY);
	assert_string_equal(conflict.table, "switch");
	assert_int_equal(count(p->b, "SELECT count(*) FROM switch WHERE id = 5"), 1);
	assert_int_equal(store_applied_revision(p->b), 31);
	free(cs);
	/* The retry's PRAGMA ended with its transaction: checks are immediate again. */
	assert_int_equal(count(p->b, "PRAGMA defer_foreign_keys"), 0);
}

/* Two changes merged travel as one, with the effect of both in order. */
static void test_combine(void **state)
{
	struct pair *p = *state;
	size_t l1, l2, l;
	void *both;
	apply_captured(p,
	               "INSERT INTO server(id, name, devices, ports_per_device) VALUES (41, "
	               "'s41', 2, 1)",
	               0);
	void *c1 = captured(p->a, "UPDATE server SET devices = 3 WHERE id = 41", &l1);
	void *c2 = captured(p->a, "UPDATE server SET devices = 5 WHERE id = 41", &l2);
	assert_int_equal(store_changes_combine(c1, l1, c2, l2, &both, &l), 0);
	assert_int_equal(apply1(p->b, both, l, 0), 0);
	assert_int_equal(count(p->b, "SELECT devices FROM server WHERE id = 41"), 5);
	free(both);
	assert_int_equal(store_changes_combine(c1, l1, "junk", 4, &both, &l), -EPROTO);
	free(c1);
	free(c2);
}

/* A member that cannot follow the log takes a copy of another's store. */
static void test_snapshot_restore(void **state)
{
	struct pair *p = *state;
	struct store_snapshot *ss;
	const void *snap;
	size_t len;
	exec(p->a, "INSERT INTO server(id, name, devices, ports_per_device) VALUES (31, 's31', 4, "
	           "1); INSERT INTO replica_state(id, applied_revision) VALUES (1, 77) ON "
	           "CONFLICT(id) DO UPDATE SET applied_revision = 77");
	exec(p->b, "INSERT INTO server(id, name, devices, ports_per_device) VALUES (32, 's32', 4, "
	           "1)");
	assert_int_equal(store_snapshot_begin(p->a, &ss), 0);
	assert_int_equal(store_snapshot_step(ss, -1), 1);
	assert_non_null(snap = store_snapshot_data(ss, &len));
	assert_true(len > 4096);

	/* Not a store, or cut short: refused, nothing touched. */
	assert_int_equal(store_restore(p->b, "garbage", 7), -EPROTO);
	assert_int_equal(store_restore(p->b, snap, len / 2), -EPROTO);
	assert_int_equal(count(p->b, "SELECT count(*) FROM server WHERE id = 32"), 1);

	assert_int_equal(store_restore(p->b, snap, len), 0);
	store_snapshot_free(ss);
	assert_int_equal(count(p->b, "SELECT count(*) FROM server WHERE id = 32"), 0);
	assert_int_equal(count(p->b, "SELECT count(*) FROM server WHERE id = 31"), 1);
	assert_string_equal(servers(p->b), servers(p->a));
	assert_int_equal(store_applied_revision(p->b), 77);
	/* The restored store takes writes as before, in WAL mode still. */
	exec(p->b, "DELETE FROM server WHERE id = 31");
	sqlite3_stmt *st;
	assert_int_equal(sqlite3_prepare_v2(store_db(p->b), "PRAGMA journal_mode", -1, &st, NULL),
	                 SQLITE_OK);
	assert_int_equal(sqlite3_step(st), SQLITE_ROW);
	assert_string_equal((const char *)sqlite3_column_text(st, 0), "wal");
	sqlite3_finalize(st);
}

/*
 * A snapshot made a part per turn is the store as of its start: what the store writes or
 * rolls back between two parts (a cluster leader rolls back every write it captures) is not
 * in it and does not start it over.
 */
static void test_snapshot_in_parts(void **state)
{
	struct pair *p = *state;
	struct store_snapshot *ss;
	const void *snap;
	size_t len;
	int rc, alone = 0, busy = 0;
	char sql[160];

	/* Enough rows for many pages. */
	exec(p->a, "BEGIN");
	for (int i = 100; i < 3100; i++) {
		snprintf(sql, sizeof(sql),
		         "INSERT INTO server(id, name, devices, ports_per_device) VALUES (%d, "
		         "'bulk-server-with-a-long-name-%06d', 4, 1)",
		         i, i);
		exec(p->a, sql);
	}
	exec(p->a, "COMMIT");
	/* Its parts with nothing else going on. */
	assert_int_equal(store_snapshot_begin(p->a, &ss), 0);
	assert_null(store_snapshot_data(ss, &len));
	while ((rc = store_snapshot_step(ss, 4)) == 0)
		alone++;
	assert_int_equal(rc, 1);
	assert_true(alone > 10);
	store_snapshot_free(ss);

	assert_int_equal(store_snapshot_begin(p->a, &ss), 0);
	for (;;) {
		/* Between two parts: a write committed, then one rolled back. */
		exec(p->a,
		     "UPDATE server SET devices = devices + 1 WHERE id = 100; DELETE FROM "
		     "server WHERE id = 3099; INSERT OR REPLACE INTO server(id, name, devices, "
		     "ports_per_device) VALUES (5000, 'late', 2, 1)");
		assert_int_equal(store_begin(p->a), 0);
		exec(p->a, "UPDATE server SET devices = 9 WHERE id < 3000");
		store_rollback(p->a);
		if ((rc = store_snapshot_step(ss, 4)) != 0)
			break;
		busy++;
	}
	assert_int_equal(rc, 1);
	/* Not started over by the writes or the rollbacks. */
	assert_int_equal(busy, alone);
	snap = store_snapshot_data(ss, &len);
	assert_non_null(snap);
	assert_int_equal(store_restore(p->b, snap, len), 0);
	store_snapshot_free(ss);
	assert_int_equal(count(p->b, "SELECT devices FROM server WHERE id = 100"), 4);
	assert_int_equal(count(p->b, "SELECT count(*) FROM server WHERE id = 3099"), 1);
	assert_int_equal(count(p->b, "SELECT count(*) FROM server WHERE id = 5000"), 0);
	assert_int_equal(count(p->b, "SELECT count(*) FROM server WHERE id >= 100 AND id < 3100"),
	                 3000);
	/* A copy given up half way frees what it holds. */
	assert_int_equal(store_snapshot_begin(p->a, &ss), 0);
	assert_int_equal(store_snapshot_step(ss, 2), 0);
	store_snapshot_free(ss);
}

/* Sessions skip tables without a primary key: the schema has none such, and one is named. */
static void test_unreplicated(void **state)
{
	struct pair *p = *state;
	char names[256];
	assert_int_equal(store_unreplicated_tables(p->a, names, sizeof(names)), 0);
	assert_string_equal(names, "");
	exec(p->a, "CREATE TABLE t_nopk (x INTEGER); CREATE TABLE t_nopk2 (y INTEGER)");
	assert_int_equal(store_unreplicated_tables(p->a, names, sizeof(names)), 2);
	assert_string_equal(names, "t_nopk,t_nopk2");
	exec(p->a, "DROP TABLE t_nopk; DROP TABLE t_nopk2");
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_replicate),
		cmocka_unit_test(test_expected_differences),
		cmocka_unit_test(test_combine),
		cmocka_unit_test(test_snapshot_restore),
		cmocka_unit_test(test_snapshot_in_parts),
		cmocka_unit_test(test_unreplicated),
		cmocka_unit_test(test_order_and_constraints),
		cmocka_unit_test(test_parent_taken_over),
	};
	return cmocka_run_group_tests(tests, setup, teardown);
}
