/*
 * A follower applying the leader's log from a real three-member etcd on
 * loopback (skipped when /usr/bin/etcd is absent): what the log held before
 * it started, what is appended afterwards, and a conflicting entry stops it.
 */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>
#include <event2/event.h>

#include "cluster/apply.h"
#include "cluster/etcd.h"
#include "etcd_members.h"
#include "cluster/log_part.h"
#include "cluster/replica.h"
#include "state/store_changes.h"
#include "state/store_sql.h"

struct world {
	struct etcd_members m;
	struct event_base *base;
	struct etcd_client *c;
	struct store *leader, *follower;
	int64_t generation;
	int seq;
};

struct reply {
	bool done;
	int rc;
	bool succeeded;
	int64_t revision;
};

static void on_reply(int rc, const struct etcd_result *res, void *arg)
{
	struct reply *r = arg;
	r->done = true;
	r->rc = rc;
	r->succeeded = res->succeeded;
	r->revision = res->revision;
}

static struct reply call(struct world *w, const char *path, char *body)
{
	struct reply r = { 0 };
	assert_int_equal(etcd_call(w->c, path, body, on_reply, &r), 0);
	while (!r.done)
		event_base_loop(w->base, EVLOOP_ONCE);
	return r;
}

static void run_ms(struct world *w, int ms)
{
	struct timeval tv = { ms / 1000, (ms % 1000) * 1000 };
	event_base_loopexit(w->base, &tv);
	event_base_dispatch(w->base);
}

/* Appends value as the log's next entry; returns its revision. */
static int64_t append(struct world *w, const void *value, size_t len)
{
	char key[64];
	snprintf(key, sizeof(key), "/r/log/%016d", ++w->seq);
	struct reply r =
	    call(w, "/v3/kv/txn",
	         etcd_req_append("/r/leader", w->generation, key, value, len, "/r/log_floor", 0));
	assert_true(r.rc == 0 && r.succeeded);
	return r.revision;
}

/* The changeset of sql run on the leader's store, which keeps it only when commit is set. */
static void *leader_change(struct world *w, const char *sql, bool commit, size_t *len)
{
	struct store_capture *cap;
	void *cs;
	assert_int_equal(store_capture_start(w->leader, NULL, &cap), 0);
	assert_int_equal(store_begin(w->leader), 0);
	assert_int_equal(sqlite3_exec(store_db(w->leader), sql, NULL, NULL, NULL), SQLITE_OK);
	assert_int_equal(store_capture_take(cap, &cs, len), 0);
	store_capture_free(cap);
	if (commit)
		assert_int_equal(store_commit(w->leader), 0);
	else
		store_rollback(w->leader);
	return cs;
}

/* Appends part i of cs cut in count parts; returns its revision. */
static int64_t append_part(struct world *w, const unsigned char *cs, size_t len, uint32_t i,
                           uint32_t count)
{
	size_t slice = (len + count - 1) / count;
	size_t n = i + 1 < count ? slice : len - i * slice;
	void *e = log_part_make(i, count, cs + i * slice, n);
	assert_non_null(e);
	int64_t rev = append(w, e, LOG_PART_HEADER + n);
	free(e);
	return rev;
}

/* The leader's write: sql in a captured transaction, appended to the log, then committed. */
static int64_t leader_write(struct world *w, const char *sql)
{
	struct store_capture *cap;
	void *cs;
	size_t len;
	char key[64];
	assert_int_equal(store_capture_start(w->leader, NULL, &cap), 0);
	assert_int_equal(store_begin(w->leader), 0);
	assert_int_equal(sqlite3_exec(store_db(w->leader), sql, NULL, NULL, NULL), SQLITE_OK);
	assert_int_equal(store_capture_take(cap, &cs, &len), 0);
	store_capture_free(cap);
	snprintf(key, sizeof(key), "/r/log/%016d", ++w->seq);
	struct reply r =
	    call(w, "/v3/kv/txn",
	         etcd_req_append("/r/leader", w->generation, key, cs, len, "/r/log_floor", 0));
	assert_true(r.rc == 0 && r.succeeded);
	/* Sent again, as after a lost answer: nothing appended twice. */
	struct reply again =
	    call(w, "/v3/kv/txn",
	         etcd_req_append("/r/leader", w->generation, key, cs, len, "/r/log_floor", 0));
	free(cs);
	assert_true(again.rc == 0 && !again.succeeded);
	assert_int_equal(store_commit(w->leader), 0);
	return r.revision;
}

static int count(struct store *s, const char *sql)
{
	sqlite3_stmt *st;
	int n = -1;
	assert_int_equal(sqlite3_prepare_v2(store_db(s), sql, -1, &st, NULL), SQLITE_OK);
	if (sqlite3_step(st) == SQLITE_ROW)
		n = sqlite3_column_int(st, 0);
	sqlite3_finalize(st);
	return n;
}

static int setup(void **state)
{
	static struct world w;
	char path[96], err[256];
	if (access(ETCD_BIN, X_OK) != 0)
		return 0;
	start_members(&w.m);
	w.base = event_base_new();
	assert_int_equal(etcd_client_new(w.base, (const char(*)[128])w.m.client, MEMBERS, 2, &w.c),
	                 0);
	snprintf(path, sizeof(path), "%s/leader.db", w.m.dir);
	assert_int_equal(store_open(path, &w.leader, err, sizeof(err)), 0);
	snprintf(path, sizeof(path), "%s/follower.db", w.m.dir);
	assert_int_equal(store_open(path, &w.follower, err, sizeof(err)), 0);
	for (int i = 0; i < 100; i++) {
		struct reply r = call(&w, "/v3/kv/txn", etcd_req_create("/r/leader", "a", 1, 0));
		if (r.rc == 0) {
			w.generation = r.revision;
			break;
		}
		usleep(100 * 1000);
	}
	assert_true(w.generation > 0);
	*state = &w;
	return 0;
}

static int teardown(void **state)
{
	struct world *w = *state;
	if (!w)
		return 0;
	store_close(w->leader);
	store_close(w->follower);
	etcd_client_free(w->c);
	event_base_free(w->base);
	return remove_members(&w->m);
}

struct seen {
	struct store *s; /* the store the changes go to */
	int caught_up;   /* 1 + rc once called */
	int stopped;     /* 1 + rc once called */
};

/* The member's one apply path, as ha.c gives it to its replica. */
static int on_apply(void *arg, int64_t revision, const char *key, const void *change, size_t len)
{
	return apply_change(((struct seen *)arg)->s, revision, key, change, len, false, NULL);
}

static void on_caught_up(void *arg, int rc)
{
	((struct seen *)arg)->caught_up = 1 + rc;
}

static void on_stopped(void *arg, int rc)
{
	((struct seen *)arg)->stopped = 1 + rc;
}

static void test_follow(void **state)
{
	struct world *w = *state;
	struct replica *r;
	if (!w)
		skip();
	struct seen seen = { w->follower, 0, 0 };
	struct replica_cbs cbs = {
		.apply = on_apply, .caught_up = on_caught_up, .stopped = on_stopped, .arg = &seen
	};
	leader_write(
	    w, "INSERT INTO server(id, name, devices, ports_per_device) VALUES (1, 's1', 8, 2)");
	int64_t rev = leader_write(w, "INSERT INTO server(id, name, devices, ports_per_device) "
	                              "VALUES (2, 's2', 8, 2)");

	assert_int_equal(replica_start(w->c, w->follower, "/r", 0, true, true, &cbs, &r), 0);
	while (replica_applied(r) < rev)
		run_ms(w, 10);
	while (!seen.caught_up)
		run_ms(w, 10);
	assert_int_equal(seen.caught_up, 1);
	assert_int_equal(count(w->follower, "SELECT count(*) FROM server"), 2);

	/* Appended while it follows: the watch brings it. */
	rev = leader_write(w, "UPDATE server SET devices = 16 WHERE id = 2; "
	                      "DELETE FROM server WHERE id = 1");
	while (replica_applied(r) < rev)
		run_ms(w, 10);
	assert_int_equal(count(w->follower, "SELECT count(*) FROM server"), 1);
	assert_int_equal(count(w->follower, "SELECT devices FROM server WHERE id = 2"), 16);
	assert_false(replica_diverged(r));
	/* The store knows where it stands: a restart resumes from there. */
	assert_int_equal(store_applied_revision(w->follower), rev);

	/* A change the follower cannot take (it lacks the row): following stops. */
	assert_int_equal(
	    sqlite3_exec(store_db(w->follower), "DELETE FROM server", NULL, NULL, NULL), SQLITE_OK);
	rev = leader_write(w, "UPDATE server SET devices = 4 WHERE id = 2");
	for (int i = 0; i < 200 && !replica_diverged(r); i++)
		run_ms(w, 10);
	assert_true(replica_diverged(r));
	assert_int_equal(seen.stopped, 1 - EPROTO);
	assert_true(replica_applied(r) < rev);
	replica_free(r);
}

/* Starts a replica of store s from the revision it holds, and waits until it caught up. */
static struct replica *follow(struct world *w, struct store *s, struct seen *seen)
{
	struct replica *r;
	struct replica_cbs cbs = {
		.apply = on_apply, .caught_up = on_caught_up, .stopped = on_stopped, .arg = seen
	};
	*seen = (struct seen){ s, 0, 0 };
	assert_int_equal(
	    replica_start(w->c, s, "/r", store_applied_revision(s), true, true, &cbs, &r), 0);
	while (!seen->caught_up)
		run_ms(w, 10);
	assert_int_equal(seen->caught_up, 1);
	return r;
}

/*
 * A change too large for one entry comes in parts and is applied whole; parts
 * whose change never finished (its leader stopped) are dropped, whatever
 * follows them.
 */
static void test_parts(void **state)
{
	struct world *w = *state;
	struct seen seen;
	char path[96], err[256];
	struct store *fresh;
	size_t len;
	if (!w)
		skip();
	/*
	 * Enough entries before them that a first read's first page (64 entries)
	 * ends after the first part of the large change below: a replica reading
	 * the whole log must hold it over to the next page.
	 */
	while (w->seq < 54) {
		char sql[128];
		snprintf(
		    sql, sizeof(sql),
		    "INSERT INTO server(id, name, devices, ports_per_device) VALUES (%d, 'f%d', "
		    "8, 2)",
		    1000 + w->seq, w->seq);
		leader_write(w, sql);
	}
	/*
	 * Cut short: by an entry of its own, then by a part out of order. Were
	 * the cut parts kept, the later parts of the same change would complete
	 * it (and server 98 would appear).
	 */
	unsigned char *cut = leader_change(
	    w, "INSERT INTO server(id, name, devices, ports_per_device) VALUES (98, 'cut', 8, 2)",
	    false, &len);
	append_part(w, cut, len, 0, 3);
	append_part(w, cut, len, 1, 3);
	leader_write(w, "INSERT INTO server(id, name, devices, ports_per_device) "
	                "VALUES (97, 'whole', 8, 2)");
	append_part(w, cut, len, 2, 3);
	append_part(w, cut, len, 0, 3);
	append_part(w, cut, len, 2, 3);
	append_part(w, cut, len, 1, 3);
	append_part(w, cut, len, 2, 3);
	/* And by another change's start. */
	append_part(w, cut, len, 0, 3);
	free(cut);
	unsigned char *big =
	    leader_change(w,
	                  "INSERT INTO server(id, name, devices, ports_per_device) "
	                  "VALUES (10, 'p10', 8, 2), (11, 'p11', 8, 2)",
	                  true, &len);
	append_part(w, big, len, 0, 4);
	int64_t half = append_part(w, big, len, 1, 4);

	snprintf(path, sizeof(path), "%s/fresh.db", w->m.dir);
	assert_int_equal(store_open(path, &fresh, err, sizeof(err)), 0);
	struct replica *r = follow(w, fresh, &seen);
	/* Half a change is nothing yet: the store stands before its parts. */
	assert_true(store_applied_revision(fresh) < half);
	assert_int_equal(count(fresh, "SELECT count(*) FROM server WHERE id = 97"), 1);
	assert_int_equal(count(fresh, "SELECT count(*) FROM server WHERE id IN (10, 11, 98)"), 0);
	/* Restarted in the middle of the change, it reads its first parts again. */
	replica_free(r);
	r = follow(w, fresh, &seen);

	/* The rest comes through the watch: then it applies whole, at the last part's revision. */
	append_part(w, big, len, 2, 4);
	half = append_part(w, big, len, 3, 4);
	free(big);
	while (replica_applied(r) < half && !replica_diverged(r))
		run_ms(w, 10);
	assert_false(replica_diverged(r));
	assert_int_equal(store_applied_revision(fresh), half);
	assert_int_equal(count(fresh, "SELECT count(*) FROM server WHERE id IN (10, 11)"), 2);
	assert_int_equal(count(fresh, "SELECT count(*) FROM server WHERE id = 98"), 0);
	assert_int_equal(seen.stopped, 0);
	replica_free(r);
	store_close(fresh);

	/* Read from the start by another store, the change straddles two pages. */
	snprintf(path, sizeof(path), "%s/paged.db", w->m.dir);
	assert_int_equal(store_open(path, &fresh, err, sizeof(err)), 0);
	r = follow(w, fresh, &seen);
	assert_int_equal(store_applied_revision(fresh), half);
	assert_int_equal(count(fresh, "SELECT count(*) FROM server WHERE id IN (10, 11, 97)"), 3);
	assert_int_equal(count(fresh, "SELECT count(*) FROM server WHERE id = 98"), 0);
	replica_free(r);
	store_close(fresh);
}

/*
 * A store whose last change the log no longer holds (deleted by hand here; etcd
 * restored or replaced, another prefix), or holds another entry at its revision
 * (a restored etcd numbers its revisions again), is not the log's: the first
 * read says so and applies nothing, rather than apply what follows on top of it.
 */
static void test_store_the_log_lacks(void **state)
{
	struct world *w = *state;
	if (!w)
		skip();
	char path[512], err[256];
	struct store *s;
	snprintf(path, sizeof(path), "%s/anchored.db", w->m.dir);
	assert_int_equal(store_open(path, &s, err, sizeof(err)), 0);
	struct seen seen;
	struct replica *r = follow(w, s, &seen);
	int64_t rev = leader_write(
	    w, "INSERT INTO server(id, name, devices, ports_per_device) VALUES (50, 's50', 8, 2)");
	while (replica_applied(r) < rev)
		run_ms(w, 10);
	replica_free(r);
	char key[64], had[224];
	snprintf(key, sizeof(key), "/r/log/%016d", w->seq);
	store_applied_key(s, had, sizeof(had));
	assert_string_equal(had, key);

	/* The log holds it: nothing to say. */
	replica_free(follow(w, s, &seen));
	/* Another entry at its revision. */
	assert_int_equal(sqlite3_exec(store_db(s),
	                              "UPDATE replica_state SET applied_key = "
	                              "'/r/log/other'",
	                              NULL, NULL, NULL),
	                 SQLITE_OK);
	struct replica_cbs cbs = {
		.apply = on_apply, .caught_up = on_caught_up, .stopped = on_stopped, .arg = &seen
	};
	seen = (struct seen){ s, 0, 0 };
	assert_int_equal(replica_start(w->c, s, "/r", rev, true, true, &cbs, &r), 0);
	while (!seen.caught_up)
		run_ms(w, 10);
	assert_int_equal(seen.caught_up, 1 - ENOENT);
	replica_free(r);

	/* No entry there at all. */
	char put_back[300];
	snprintf(put_back, sizeof(put_back), "UPDATE replica_state SET applied_key = '%s'", key);
	assert_int_equal(sqlite3_exec(store_db(s), put_back, NULL, NULL, NULL), SQLITE_OK);
	struct reply gone = call(w, "/v3/kv/txn", etcd_req_delete_guarded(key, rev));
	assert_true(gone.rc == 0 && gone.succeeded);
	seen = (struct seen){ s, 0, 0 };
	assert_int_equal(replica_start(w->c, s, "/r", rev, true, true, &cbs, &r), 0);
	while (!seen.caught_up)
		run_ms(w, 10);
	assert_int_equal(seen.caught_up, 1 - ENOENT);
	assert_int_equal(replica_applied(r), rev);
	replica_free(r);

	/* A store copied from the leader's is the log's, whatever the log lacks. */
	seen = (struct seen){ s, 0, 0 };
	assert_int_equal(replica_start(w->c, s, "/r", rev, false, true, &cbs, &r), 0);
	while (!seen.caught_up)
		run_ms(w, 10);
	assert_int_equal(seen.caught_up, 1);
	replica_free(r);
	store_close(s);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_follow),
		cmocka_unit_test(test_parts),
		cmocka_unit_test(test_store_the_log_lacks),
	};
	return cmocka_run_group_tests(tests, setup, teardown);
}
