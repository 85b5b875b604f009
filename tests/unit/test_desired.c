/*
 * The in-memory desired state against a real store: the rows a transaction
 * changes applied on commit and dropped on rollback, whoever writes them (a
 * handler, a changeset of the replicated log) and never by a reload; writes
 * outside a transaction or by another process caught by one; port owners
 * following memberships; former owners of cross-connects that left; and the
 * mirror equal to the table (and each fabric's circuit count to its rows).
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "state/desired.h"
#include "state/store_changes.h"
#include "state/store_sql.h"

/* One changeset applied as store_apply_changes() applies a change of the log. */
static int apply1(struct store *s, const void *data, size_t len, int64_t revision)
{
	struct store_changeset one = { data, len };
	return store_apply_changes(s, &one, 1, revision, NULL, NULL);
}

static char dir[] = "/tmp/ofcd-desired-XXXXXX";
static char path[256];

struct fixture {
	struct store *s;
	struct desired *d;
};

static void exec(struct store *s, const char *sql)
{
	assert_int_equal(sqlite3_exec(store_db(s), sql, NULL, NULL, NULL), SQLITE_OK);
}

static int setup(void **state)
{
	strcpy(dir, "/tmp/ofcd-desired-XXXXXX");
	if (!mkdtemp(dir))
		return -1;
	snprintf(path, sizeof(path), "%s/t.db", dir);
	struct fixture *f = calloc(1, sizeof(*f));
	char err[256];
	if (!f || store_open(path, &f->s, err, sizeof(err)) < 0)
		return -1;
	exec(f->s, "INSERT INTO ocs(id, name, driver, ports) VALUES (1, 'o1', 'sim', 64), "
	           "(2, 'o2', 'sim', 64);"
	           "INSERT INTO fabric(id, name, state, formula, planes, min_devices) VALUES "
	           "(1, 'f1', 'pending', 0, 1, 1), (2, 'f2', 'pending', 0, 1, 1)");
	if (desired_open(f->s, &f->d) < 0)
		return -1;
	*state = f;
	return 0;
}

static int teardown(void **state)
{
	struct fixture *f = *state;
	desired_free(f->d);
	store_close(f->s);
	free(f);
	char p[300];
	const char *suffix[] = { "", "-wal", "-shm" };
	for (int i = 0; i < 3; i++) {
		snprintf(p, sizeof(p), "%s%s", path, suffix[i]);
		unlink(p);
	}
	rmdir(dir);
	return 0;
}

/* One circuit as a test writes it. */
struct circuit {
	int64_t ocs_id;
	uint32_t a, b;
};

/* Writes fabric's circuits as topo_plan_save does. */
static void put(struct fixture *f, int64_t fabric, const struct circuit *v, size_t n)
{
	sqlite3_stmt *st = store_stmt(f->s, "DELETE FROM circuit WHERE fabric_id = ?");
	sqlite3_bind_int64(st, 1, fabric);
	assert_int_equal(store_step_done(st), 0);
	st = store_stmt(f->s, "INSERT INTO circuit(fabric_id, plane, a_pos, a_device, a_port, "
	                      "b_pos, b_device, b_port, ocs_id, a_ocs_port, b_ocs_port) "
	                      "VALUES (?, 0, 0, 0, 0, 1, 0, 0, ?, ?, ?)");
	for (size_t i = 0; i < n; i++) {
		sqlite3_bind_int64(st, 1, fabric);
		sqlite3_bind_int64(st, 2, v[i].ocs_id);
		sqlite3_bind_int64(st, 3, v[i].a);
		sqlite3_bind_int64(st, 4, v[i].b);
		assert_int_equal(store_step_done(st), 0);
	}
}

/* The mirror holds exactly the circuit table, unit by unit, sorted. */
static void assert_mirror(struct fixture *f)
{
	for (int64_t ocs = 1; ocs <= 2; ocs++) {
		struct desired_set ds = desired_of(f->d, ocs);
		sqlite3_stmt *st = store_stmt(
		    f->s, "SELECT min(a_ocs_port, b_ocs_port) AS a, max(a_ocs_port, b_ocs_port), "
		          "fabric_id FROM circuit WHERE ocs_id = ? ORDER BY a");
		sqlite3_bind_int64(st, 1, ocs);
		size_t i = 0;
		while (sqlite3_step(st) == SQLITE_ROW) {
			assert_true(i < ds.n);
			assert_int_equal(ds.xc[i].a, sqlite3_column_int64(st, 0));
			assert_int_equal(ds.xc[i].b, sqlite3_column_int64(st, 1));
			assert_int_equal(ds.fabric[i], sqlite3_column_int64(st, 2));
			i++;
		}
		sqlite3_reset(st);
		assert_int_equal(i, ds.n);
	}
	/* And each fabric's circuit count. */
	for (int64_t fabric = 1; fabric <= 2; fabric++) {
		sqlite3_stmt *st =
		    store_stmt(f->s, "SELECT count(*) FROM circuit WHERE fabric_id = ?");
		sqlite3_bind_int64(st, 1, fabric);
		assert_int_equal(sqlite3_step(st), SQLITE_ROW);
		assert_int_equal(desired_fabric_circuits(f->d, fabric),
		                 sqlite3_column_int64(st, 0));
		sqlite3_reset(st);
	}
}

static const struct circuit f1_plan[] = { { 1, 5, 3 }, { 1, 1, 2 }, { 2, 4, 1 } };

static void test_commit_applies(void **state)
{
	struct fixture *f = *state;
	assert_int_equal(desired_of(f->d, 1).n, 0);
	assert_int_equal(store_begin(f->s), 0);
	put(f, 1, f1_plan, 3);
	/* Not before the commit. */
	assert_int_equal(desired_of(f->d, 1).n, 0);
	assert_int_equal(store_commit(f->s), 0);
	struct desired_set ds = desired_of(f->d, 1);
	assert_int_equal(ds.n, 2);
	assert_int_equal(ds.xc[0].a, 1);
	assert_int_equal(ds.xc[0].b, 2);
	assert_int_equal(ds.xc[1].a, 3); /* stored 5-3: kept as a < b */
	assert_int_equal(ds.xc[1].b, 5);
	assert_int_equal(desired_of(f->d, 2).n, 1);
	assert_int_equal(desired_reloads(f->d), 0);
	assert_mirror(f);
}

static void test_rollback_drops(void **state)
{
	struct fixture *f = *state;
	assert_int_equal(store_begin(f->s), 0);
	put(f, 1, f1_plan, 3);
	store_rollback(f->s);
	assert_int_equal(desired_of(f->d, 1).n, 0);
	assert_int_equal(desired_of(f->d, 2).n, 0);
	/* A later commit that touches no circuit changes nothing either. */
	assert_int_equal(store_begin(f->s), 0);
	exec(f->s, "UPDATE fabric SET state = 'applied' WHERE id = 1");
	assert_int_equal(store_commit(f->s), 0);
	assert_int_equal(desired_reloads(f->d), 0);
	assert_mirror(f);
}

/* Two writers in one transaction, nobody staging anything: followed, not reloaded. */
static void test_any_writer_is_followed(void **state)
{
	struct fixture *f = *state;
	assert_int_equal(store_begin(f->s), 0);
	put(f, 1, f1_plan, 3);
	static const struct circuit other[] = { { 1, 7, 8 } };
	put(f, 2, other, 1);
	assert_int_equal(store_commit(f->s), 0);
	assert_int_equal(desired_reloads(f->d), 0);
	assert_int_equal(desired_of(f->d, 1).n, 3);
	assert_mirror(f);
	/* A write outside any transaction is caught by the next commit, by a reload. */
	exec(f->s, "DELETE FROM circuit WHERE fabric_id = 2");
	assert_int_equal(store_begin(f->s), 0);
	assert_int_equal(store_commit(f->s), 0);
	assert_int_equal(desired_reloads(f->d), 1);
	assert_mirror(f);
}

/* A follower applying the leader's changeset: the mirror follows it, as after any commit. */
static void test_replicated_changes(void **state)
{
	struct fixture *f = *state;
	char path2[300], err[256];
	struct store *leader;
	struct store_capture *c;
	void *cs;
	size_t len;
	uint64_t reloads = desired_reloads(f->d);

	snprintf(path2, sizeof(path2), "%s/leader.db", dir);
	assert_int_equal(store_open(path2, &leader, err, sizeof(err)), 0);
	/* The leader's store starts as a copy of the follower's. */
	exec(leader, "INSERT INTO ocs(id, name, driver, ports) VALUES (1, 'o1', 'sim', 64), "
	             "(2, 'o2', 'sim', 64);"
	             "INSERT INTO fabric(id, name, state, formula, planes, min_devices) VALUES "
	             "(1, 'f1', 'pending', 0, 1, 1), (2, 'f2', 'pending', 0, 1, 1)");
	assert_int_equal(store_capture_start(leader, NULL, &c), 0);
	assert_int_equal(store_begin(leader), 0);
	exec(leader, "INSERT INTO circuit(fabric_id, plane, a_pos, a_device, a_port, b_pos, "
	             "b_device, b_port, ocs_id, a_ocs_port, b_ocs_port) VALUES "
	             "(2, 0, 0, 0, 0, 1, 0, 0, 2, 60, 61)");
	assert_int_equal(store_capture_take(c, &cs, &len), 0);
	assert_int_equal(store_commit(leader), 0);
	store_capture_free(c);
	store_close(leader);
	const char *suffix[] = { "", "-wal", "-shm" };
	for (int i = 0; i < 3; i++) {
		char p[320];
		snprintf(p, sizeof(p), "%s%s", path2, suffix[i]);
		unlink(p);
	}

	assert_int_equal(apply1(f->s, cs, len, 0), 0);
	free(cs);
	assert_int_equal(desired_reloads(f->d), reloads); /* followed row by row */
	assert_mirror(f);
	struct desired_set ds = desired_of(f->d, 2);
	assert_int_equal(ds.n, 1);
	assert_int_equal(ds.xc[0].a, 60);
	assert_int_equal(ds.xc[0].b, 61);
	assert_int_equal(ds.fabric[0], 2);
}

static void test_delete_remembers_owner(void **state)
{
	struct fixture *f = *state;
	assert_int_equal(store_begin(f->s), 0);
	put(f, 1, f1_plan, 3);
	assert_int_equal(store_commit(f->s), 0);
	assert_null(desired_former_owner(f->d, 1, 1, 2));

	/* The fabric goes, its circuits with it (a cascade). */
	assert_int_equal(store_begin(f->s), 0);
	exec(f->s, "DELETE FROM fabric WHERE id = 1");
	assert_int_equal(store_commit(f->s), 0);
	assert_int_equal(desired_reloads(f->d), 0); /* the cascade was followed */
	assert_int_equal(desired_of(f->d, 1).n, 0);
	assert_string_equal(desired_former_owner(f->d, 1, 1, 2), "f1");
	assert_string_equal(desired_former_owner(f->d, 1, 5, 3), "f1");
	assert_string_equal(desired_former_owner(f->d, 2, 1, 4), "f1");
	assert_mirror(f);

	/* The unit still holds 1-2 but no longer 3-5. */
	const struct plan_xc held[] = { { 1, 2 } };
	assert_int_equal(desired_prune(f->d, 1, held, 1, 0, NULL), 0);
	assert_string_equal(desired_former_owner(f->d, 1, 1, 2), "f1");
	assert_null(desired_former_owner(f->d, 1, 3, 5));
	desired_prune(f->d, 1, NULL, 0, 0, NULL);
	assert_null(desired_former_owner(f->d, 1, 1, 2));
	/* A unit gone from the topology leaves none (a unit added later may get its id). */
	assert_int_equal(store_begin(f->s), 0);
	exec(f->s, "DELETE FROM ocs WHERE id = 2");
	assert_int_equal(store_commit(f->s), 0);
	assert_null(desired_former_owner(f->d, 2, 1, 4));
}

/* Sets the store's applied revision, as a cluster member's apply of the log does. */
static void at_revision(struct fixture *f, int64_t revision)
{
	char sql[160];
	snprintf(sql, sizeof(sql),
	         "INSERT OR REPLACE INTO replica_state(id, applied_revision) VALUES (1, %lld)",
	         (long long)revision);
	exec(f->s, sql);
}

/*
 * A cluster leader's read-back tells the followers which former entries went
 * (they read no unit back): only those that were former entries when the
 * read was sent, at its applied revision. One that became former later may
 * still be on the unit (the read came before), and stays.
 */
static void test_formers_gone_up_to_the_read(void **state)
{
	struct fixture *f = *state;
	static const struct circuit f2_plan[] = { { 1, 7, 8 } };
	assert_int_equal(store_begin(f->s), 0);
	put(f, 1, f1_plan, 3);
	put(f, 2, f2_plan, 1);
	at_revision(f, 5);
	assert_int_equal(store_commit(f->s), 0);
	assert_int_equal(store_begin(f->s), 0);
	exec(f->s, "DELETE FROM fabric WHERE id = 1");
	at_revision(f, 10);
	assert_int_equal(store_commit(f->s), 0);
	assert_int_equal(store_begin(f->s), 0);
	exec(f->s, "DELETE FROM fabric WHERE id = 2");
	at_revision(f, 20);
	assert_int_equal(store_commit(f->s), 0);

	/* A follower hears of a read sent at 15 that found 1-2 and 7-8 gone. */
	const struct plan_xc gone[] = { { 1, 2 }, { 7, 8 } };
	desired_formers_gone(f->d, 1, 15, gone, 2);
	assert_null(desired_former_owner(f->d, 1, 1, 2));
	assert_string_equal(desired_former_owner(f->d, 1, 7, 8), "f2"); /* former since 20 */
	assert_string_equal(desired_former_owner(f->d, 1, 3, 5), "f1"); /* not said gone */
	assert_string_equal(desired_former_owner(f->d, 2, 1, 4), "f1"); /* another unit */

	/* The leader's own read sent at 15, finding nothing held: it forgets all, tells of 3-5. */
	struct plan_xc *told = NULL;
	assert_int_equal(desired_prune(f->d, 1, NULL, 0, 15, &told), 1);
	assert_int_equal(told[0].a, 3);
	assert_int_equal(told[0].b, 5);
	free(told);
	assert_null(desired_former_owner(f->d, 1, 7, 8));
	assert_null(desired_former_owner(f->d, 1, 3, 5));
	assert_int_equal(desired_prune(f->d, 2, NULL, 0, 5, &told), 0); /* former since 10 */
	assert_null(told);
}

/*
 * A unit's former entries go with its row, whoever deletes it: its ports join
 * no server any more, and a unit added later may get its id. One deleted and
 * added again under its id in one change (a rename) may be the same unit.
 */
static void test_a_units_formers_go_with_its_row(void **state)
{
	struct fixture *f = *state;
	assert_int_equal(store_begin(f->s), 0);
	put(f, 1, f1_plan, 3);
	assert_int_equal(store_commit(f->s), 0);
	assert_int_equal(store_begin(f->s), 0);
	exec(f->s, "DELETE FROM fabric WHERE id = 1");
	assert_int_equal(store_commit(f->s), 0);

	assert_int_equal(store_begin(f->s), 0);
	exec(f->s, "DELETE FROM ocs WHERE id = 2;"
	           "INSERT INTO ocs(id, name, driver, ports) VALUES (2, 'o2b', 'sim', 64)");
	assert_int_equal(store_commit(f->s), 0);
	assert_string_equal(desired_former_owner(f->d, 2, 1, 4), "f1");

	/* Another process (a snapshot copied over it alike) takes unit 1 away. */
	sqlite3 *other;
	assert_int_equal(sqlite3_open(path, &other), SQLITE_OK);
	assert_int_equal(sqlite3_exec(other, "DELETE FROM ocs WHERE id = 1", NULL, NULL, NULL),
	                 SQLITE_OK);
	sqlite3_close(other);
	desired_refresh(f->d);
	assert_null(desired_former_owner(f->d, 1, 1, 2));
	assert_string_equal(desired_former_owner(f->d, 2, 1, 4), "f1");
}

/*
 * A reload (a snapshot copied over the store, an operator's shell) that finds
 * circuits gone keeps them as former entries, as a commit does: the units may
 * still hold them.
 */
static void test_reload_remembers_what_went(void **state)
{
	struct fixture *f = *state;
	assert_int_equal(store_begin(f->s), 0);
	put(f, 1, f1_plan, 3);
	assert_int_equal(store_commit(f->s), 0);
	uint64_t version = desired_former_version(f->d, 1);
	sqlite3 *other;
	assert_int_equal(sqlite3_open(path, &other), SQLITE_OK);
	assert_int_equal(sqlite3_exec(other,
	                              "DELETE FROM circuit WHERE ocs_id = 1 AND a_ocs_port = 1",
	                              NULL, NULL, NULL),
	                 SQLITE_OK);
	sqlite3_close(other);
	uint64_t before = desired_reloads(f->d);
	desired_refresh(f->d);
	assert_int_equal(desired_reloads(f->d), before + 1);
	assert_string_equal(desired_former_owner(f->d, 1, 1, 2), "f1");
	assert_null(desired_former_owner(f->d, 1, 3, 5)); /* still desired */
	assert_true(desired_has_former(f->d, 1));
	assert_int_not_equal(desired_former_version(f->d, 1), version);
	uint32_t peer[8];
	desired_former_peers(f->d, 1, peer, 7);
	assert_int_equal(peer[1], 2);
	assert_int_equal(peer[2], 1);
	assert_int_equal(peer[3], 0);
	const char *fabric = NULL;
	uint32_t other_end = 0;
	assert_true(desired_former_at(f->d, 1, 2, &other_end, &fabric));
	assert_int_equal(other_end, 1);
	assert_string_equal(fabric, "f1");
	assert_false(desired_former_at(f->d, 1, 5, &other_end, &fabric));
	assert_mirror(f);
}

static void test_replan_and_reuse(void **state)
{
	struct fixture *f = *state;
	assert_int_equal(store_begin(f->s), 0);
	put(f, 1, f1_plan, 3);
	assert_int_equal(store_commit(f->s), 0);

	/* Re-planned: 1-2 stays, 3-5 leaves, 6-9 comes; f2 takes 3-5 in the same commit. */
	static const struct circuit f1_next[] = { { 1, 2, 1 }, { 1, 6, 9 }, { 2, 1, 4 } };
	static const struct circuit f2_plan[] = { { 1, 3, 5 } };
	assert_int_equal(store_begin(f->s), 0);
	put(f, 1, f1_next, 3);
	put(f, 2, f2_plan, 1);
	assert_int_equal(store_commit(f->s), 0);
	assert_int_equal(desired_reloads(f->d), 0);
	assert_mirror(f);
	struct desired_set ds = desired_of(f->d, 1);
	assert_int_equal(ds.n, 3);
	assert_int_equal(ds.fabric[1], 2); /* 3-5 is f2's now */
	/* Desired again, so nobody's former entry. */
	assert_null(desired_former_owner(f->d, 1, 3, 5));

	/* The same fabric written twice in one transaction: the last one wins. */
	assert_int_equal(store_begin(f->s), 0);
	put(f, 1, f1_plan, 3);
	put(f, 1, f1_next, 3);
	assert_int_equal(store_commit(f->s), 0);
	assert_int_equal(desired_reloads(f->d), 0);
	assert_mirror(f);

	/* A new mirror loads the same from the store. */
	struct desired *again;
	desired_free(f->d);
	assert_int_equal(desired_open(f->s, &again), 0);
	f->d = again;
	assert_mirror(f);
}

static void test_outside_writes(void **state)
{
	struct fixture *f = *state;
	assert_int_equal(store_begin(f->s), 0);
	put(f, 1, f1_plan, 3);
	assert_int_equal(store_commit(f->s), 0);

	/* Outside any transaction; a rollback in between must not make the mirror forget it. */
	exec(f->s, "DELETE FROM circuit WHERE ocs_id = 2");
	assert_int_equal(store_begin(f->s), 0);
	store_rollback(f->s);
	assert_int_equal(store_begin(f->s), 0);
	assert_int_equal(store_commit(f->s), 0);
	assert_int_equal(desired_of(f->d, 2).n, 0);
	assert_mirror(f);

	/* Another process (an operator's shell) commits: the next refresh sees it. */
	sqlite3 *other;
	assert_int_equal(sqlite3_open(path, &other), SQLITE_OK);
	assert_int_equal(sqlite3_exec(other,
	                              "INSERT INTO circuit(fabric_id, plane, a_pos, a_device, "
	                              "a_port, b_pos, b_device, b_port, ocs_id, a_ocs_port, "
	                              "b_ocs_port) VALUES (2, 0, 0, 0, 0, 1, 0, 0, 2, 9, 10)",
	                              NULL, NULL, NULL),
	                 SQLITE_OK);
	uint64_t before = desired_reloads(f->d);
	desired_refresh(f->d);
	assert_int_equal(desired_reloads(f->d), before + 1);
	assert_int_equal(desired_of(f->d, 2).n, 1);
	assert_mirror(f);
	desired_refresh(f->d); /* nothing new: no reload */
	assert_int_equal(desired_reloads(f->d), before + 1);

	/* A reload that fails leaves the mirror as it was, marked unusable, until one works. */
	assert_int_equal(
	    sqlite3_exec(other, "ALTER TABLE circuit RENAME TO circuit_away", NULL, NULL, NULL),
	    SQLITE_OK);
	desired_refresh(f->d);
	assert_false(desired_usable(f->d));
	assert_int_equal(desired_of(f->d, 1).n, 2);
	assert_int_equal(
	    sqlite3_exec(other, "ALTER TABLE circuit_away RENAME TO circuit", NULL, NULL, NULL),
	    SQLITE_OK);
	desired_refresh(f->d);
	assert_true(desired_usable(f->d));
	assert_mirror(f);
	sqlite3_close(other);
}

/* Which fabric owns each port follows the membership rows, and a member's cable changing. */
static void test_owners_follow_memberships(void **state)
{
	struct fixture *f = *state;
	exec(f->s, "INSERT INTO server(id, name, devices, ports_per_device) VALUES (1, 's1', 1, "
	           "2), (2, 's2', 1, 2);"
	           "INSERT INTO cable(server_id, device, port, ocs_id, ocs_port) VALUES "
	           "(1, 0, 0, 1, 11), (2, 0, 0, 1, 12), (2, 0, 1, 2, 7)");
	desired_refresh(f->d);
	uint64_t reloads = desired_reloads(f->d);
	size_t n;
	assert_int_equal(store_begin(f->s), 0);
	exec(f->s, "INSERT INTO fabric_server(fabric_id, position, server_id) VALUES "
	           "(1, 0, 1), (1, 1, 2)");
	/* Not before the commit. */
	const int64_t *own = desired_owners(f->d, 1, &n);
	assert_true(n <= 11 || own[11] == 0);
	assert_int_equal(store_commit(f->s), 0);
	own = desired_owners(f->d, 1, &n);
	assert_true(n > 12);
	assert_int_equal(own[11], 1);
	assert_int_equal(own[12], 1);
	own = desired_owners(f->d, 2, &n);
	assert_int_equal(own[7], 1);
	/* The fabric goes: its ports go back to no fabric. */
	assert_int_equal(store_begin(f->s), 0);
	exec(f->s, "DELETE FROM fabric WHERE id = 1");
	assert_int_equal(store_commit(f->s), 0);
	own = desired_owners(f->d, 1, &n);
	assert_int_equal(own[11], 0);
	assert_int_equal(own[12], 0);
	assert_int_equal(desired_reloads(f->d), reloads);
	/* A member's cable moving: the owners are read again. */
	assert_int_equal(store_begin(f->s), 0);
	exec(f->s, "INSERT INTO fabric_server(fabric_id, position, server_id) VALUES (2, 0, 1)");
	assert_int_equal(store_commit(f->s), 0);
	assert_int_equal(desired_owners(f->d, 1, &n)[11], 2);
	assert_int_equal(store_begin(f->s), 0);
	exec(f->s, "UPDATE cable SET ocs_port = 21 WHERE server_id = 1");
	assert_int_equal(store_commit(f->s), 0);
	own = desired_owners(f->d, 1, &n);
	assert_int_equal(own[11], 0);
	assert_int_equal(own[21], 2);
}

/* A fabric stored a few members per transaction (fabric.h): each part followed, none reloaded. */
static void test_members_in_parts(void **state)
{
	struct fixture *f = *state;
	exec(f->s, "INSERT INTO server(id, name, devices, ports_per_device) VALUES (1, 's1', 1, "
	           "2), (2, 's2', 1, 2), (3, 's3', 1, 1);"
	           "INSERT INTO cable(server_id, device, port, ocs_id, ocs_port) VALUES "
	           "(1, 0, 0, 1, 11), (2, 0, 0, 1, 12), (2, 0, 1, 2, 7), (3, 0, 0, 1, 13)");
	desired_refresh(f->d);
	uint64_t reloads = desired_owner_reloads(f->d);
	size_t n;
	assert_int_equal(store_begin(f->s), 0);
	exec(f->s, "INSERT INTO fabric_server(fabric_id, position, server_id) VALUES (1, 0, 1)");
	assert_int_equal(store_commit(f->s), 0);
	const int64_t *own = desired_owners(f->d, 1, &n);
	assert_true(n > 13);
	assert_int_equal(own[11], 1);
	assert_int_equal(own[12], 0);
	assert_int_equal(store_begin(f->s), 0);
	exec(f->s, "INSERT INTO fabric_server(fabric_id, position, server_id) VALUES "
	           "(1, 1, 2), (1, 2, 3)");
	assert_int_equal(store_commit(f->s), 0);
	own = desired_owners(f->d, 1, &n);
	assert_int_equal(own[11], 1);
	assert_int_equal(own[12], 1);
	assert_int_equal(own[13], 1);
	assert_int_equal(desired_owners(f->d, 2, &n)[7], 1);
	assert_int_equal(desired_owner_reloads(f->d), reloads);
	/* Leaving, the fabric takes the ports of both parts with it. */
	assert_int_equal(store_begin(f->s), 0);
	exec(f->s, "DELETE FROM fabric WHERE id = 1");
	assert_int_equal(store_commit(f->s), 0);
	own = desired_owners(f->d, 1, &n);
	assert_int_equal(own[11] | own[12] | own[13], 0);
	assert_int_equal(desired_owners(f->d, 2, &n)[7], 0);
	assert_int_equal(desired_owner_reloads(f->d), reloads);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup_teardown(test_commit_applies, setup, teardown),
		cmocka_unit_test_setup_teardown(test_rollback_drops, setup, teardown),
		cmocka_unit_test_setup_teardown(test_any_writer_is_followed, setup, teardown),
		cmocka_unit_test_setup_teardown(test_owners_follow_memberships, setup, teardown),
		cmocka_unit_test_setup_teardown(test_members_in_parts, setup, teardown),
		cmocka_unit_test_setup_teardown(test_reload_remembers_what_went, setup, teardown),
		cmocka_unit_test_setup_teardown(test_delete_remembers_owner, setup, teardown),
		cmocka_unit_test_setup_teardown(test_formers_gone_up_to_the_read, setup, teardown),
		cmocka_unit_test_setup_teardown(test_a_units_formers_go_with_its_row, setup,
		                                teardown),
		cmocka_unit_test_setup_teardown(test_replan_and_reuse, setup, teardown),
		cmocka_unit_test_setup_teardown(test_outside_writes, setup, teardown),
		cmocka_unit_test_setup_teardown(test_replicated_changes, setup, teardown),
	};
	return cmocka_run_group_tests_name("desired", tests, NULL, NULL);
}
