/*
 * The etcd client against a real three-member etcd on loopback (the etcd
 * binary of Debian's etcd-server; skipped when it is absent): calls, the
 * election and replication txns, leases, a watch, and failover to the next
 * endpoint when a member is stopped.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>
#include <errno.h>
#include <event2/event.h>
#include <fcntl.h>
#include <signal.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <netinet/in.h>
#include <unistd.h>

#include "cluster/etcd.h"
#include "etcd_members.h"

struct cluster {
	struct etcd_members m;
	struct event_base *base;
	struct etcd_client *c;
};

struct reply {
	bool done;
	int rc;
	struct etcd_result res; /* copied out: revision, succeeded, lease, ttl, first kv */
	int64_t kv_create_revision;
	char kv_value[64];
	size_t nkvs;
};

static void on_reply(int rc, const struct etcd_result *res, void *arg)
{
	struct reply *r = arg;
	r->done = true;
	r->rc = rc;
	r->res.revision = res->revision;
	r->res.succeeded = res->succeeded;
	r->res.lease_id = res->lease_id;
	r->res.ttl = res->ttl;
	r->res.resent = res->resent;
	r->nkvs = res->nkvs;
	if (res->nkvs) {
		r->kv_create_revision = res->kvs[0].create_revision;
		snprintf(r->kv_value, sizeof(r->kv_value), "%s", (char *)res->kvs[0].value);
	}
}

/* Runs the loop until the reply has come (the client's own timeout bounds it). */
static struct reply call(struct cluster *k, const char *path, char *body)
{
	struct reply r = { 0 };
	assert_int_equal(etcd_call(k->c, path, body, on_reply, &r), 0);
	while (!r.done)
		event_base_loop(k->base, EVLOOP_ONCE);
	return r;
}

static int setup(void **state)
{
	static struct cluster k;
	if (access(ETCD_BIN, X_OK) != 0)
		return 0; /* the tests skip */
	start_members(&k.m);
	k.base = event_base_new();
	assert_int_equal(etcd_client_new(k.base, (const char(*)[128])k.m.client, MEMBERS, 2, &k.c),
	                 0);
	/* Wait for the cluster to elect its raft leader and answer. */
	for (int i = 0; i < 100; i++) {
		struct reply r = call(&k, "/v3/kv/range", etcd_req_range("x", false, 0));
		if (r.rc == 0)
			break;
		usleep(100 * 1000);
	}
	*state = &k;
	return 0;
}

static int teardown(void **state)
{
	struct cluster *k = *state;
	if (!k)
		return 0;
	etcd_client_free(k->c);
	event_base_free(k->base);
	return remove_members(&k->m);
}

static void test_election_txns(void **state)
{
	struct cluster *k = *state;
	if (!k)
		skip();
	struct reply grant = call(k, "/v3/lease/grant", etcd_req_lease_grant(5));
	assert_int_equal(grant.rc, 0);
	assert_true(grant.res.lease_id != 0);
	assert_int_equal(grant.res.ttl, 5);

	struct reply won =
	    call(k, "/v3/kv/txn", etcd_req_create("/t/leader", "a", 1, grant.res.lease_id));
	assert_int_equal(won.rc, 0);
	assert_true(won.res.succeeded);
	int64_t rev = won.res.revision;

	/* A second candidate loses and learns who holds the key. */
	struct reply lost = call(k, "/v3/kv/txn", etcd_req_create("/t/leader", "b", 1, 0));
	assert_int_equal(lost.rc, 0);
	assert_false(lost.res.succeeded);
	assert_int_equal(lost.nkvs, 1);
	assert_string_equal(lost.kv_value, "a");
	assert_int_equal(lost.kv_create_revision, rev);

	struct reply put =
	    call(k, "/v3/kv/txn",
	         etcd_req_append("/t/leader", rev, "/t/log/1", "change", 6, "/t/log_floor", 0));
	assert_true(put.rc == 0 && put.res.succeeded);
	put = call(
	    k, "/v3/kv/txn",
	    etcd_req_append("/t/leader", rev + 100, "/t/log/2", "stale", 5, "/t/log_floor", 0));
	assert_true(put.rc == 0 && !put.res.succeeded);
	struct reply log = call(k, "/v3/kv/range", etcd_req_range("/t/log/", true, 0));
	assert_int_equal(log.nkvs, 1);
	assert_string_equal(log.kv_value, "change");

	struct reply ka = call(k, "/v3/lease/keepalive", etcd_req_lease_id(grant.res.lease_id));
	assert_int_equal(ka.rc, 0);
	assert_int_equal(ka.res.ttl, 5);

	/* Only the holder's own key is removed on stepping down. */
	struct reply del = call(k, "/v3/kv/txn", etcd_req_delete_guarded("/t/leader", rev + 1));
	assert_false(del.res.succeeded);
	del = call(k, "/v3/kv/txn", etcd_req_delete_guarded("/t/leader", rev));
	assert_true(del.res.succeeded);
	struct reply revoke = call(k, "/v3/lease/revoke", etcd_req_lease_id(grant.res.lease_id));
	assert_int_equal(revoke.rc, 0);
	ka = call(k, "/v3/lease/keepalive", etcd_req_lease_id(grant.res.lease_id));
	assert_int_equal(ka.res.ttl, 0);

	struct reply bad = call(k, "/v3/kv/range", strdup("{\"key\":\"!!\"}"));
	assert_int_equal(bad.rc, -EIO);
}

struct seen {
	int messages;
	int events;
	bool created;
	int ended;
	char last[64];
};

/*
 * A try of an append that reaches etcd late (held by a member that hung),
 * after its retry got in and a trim removed the entry again, must not put
 * it back: the trim moved the floor the append requires.
 */
static void test_append_after_trim(void **state)
{
	struct cluster *k = *state;
	if (!k)
		skip();
	struct reply won = call(k, "/v3/kv/txn", etcd_req_create("/late/leader", "a", 1, 0));
	assert_true(won.rc == 0 && won.res.succeeded);
	int64_t gen = won.res.revision;
	char *late =
	    etcd_req_append("/late/leader", gen, "/late/log/1", "one", 3, "/late/log_floor", 0);
	assert_non_null(late);

	struct reply r = call(k, "/v3/kv/txn", strdup(late));
	assert_true(r.rc == 0 && r.res.succeeded);
	int64_t one = r.res.revision;
	r = call(
	    k, "/v3/kv/txn",
	    etcd_req_append("/late/leader", gen, "/late/log/2", "two", 3, "/late/log_floor", 0));
	assert_true(r.rc == 0 && r.res.succeeded);
	char floor[64];
	snprintf(floor, sizeof(floor), "%lld /late/log/1", (long long)one);
	char *late_trim = etcd_req_trim("/late/leader", gen, "/late/log/", "/late/log/1",
	                                "/late/log_floor", 0, floor);
	assert_non_null(late_trim);
	struct reply trim = call(k, "/v3/kv/txn", strdup(late_trim));
	assert_true(trim.rc == 0 && trim.res.succeeded);

	r = call(k, "/v3/kv/txn", late);
	assert_int_equal(r.rc, 0);
	assert_false(r.res.succeeded);
	struct reply log = call(k, "/v3/kv/range", etcd_req_range("/late/log/", true, 0));
	assert_int_equal(log.nkvs, 1);
	assert_string_equal(log.kv_value, "two");

	/* The next append under the floor as it stood: refused; as it stands: in. */
	r = call(
	    k, "/v3/kv/txn",
	    etcd_req_append("/late/leader", gen, "/late/log/3", "three", 5, "/late/log_floor", 0));
	assert_true(r.rc == 0 && !r.res.succeeded);
	r = call(k, "/v3/kv/txn",
	         etcd_req_append("/late/leader", gen, "/late/log/3", "three", 5, "/late/log_floor",
	                         trim.res.revision));
	assert_true(r.rc == 0 && r.res.succeeded);

	/* Nor can a late try of a trim set the floor back past a later trim. */
	snprintf(floor, sizeof(floor), "%lld /late/log/2", (long long)r.res.revision);
	r = call(k, "/v3/kv/txn",
	         etcd_req_trim("/late/leader", gen, "/late/log/", "/late/log/2", "/late/log_floor",
	                       trim.res.revision, floor));
	assert_true(r.rc == 0 && r.res.succeeded);
	r = call(k, "/v3/kv/txn", late_trim);
	assert_true(r.rc == 0 && !r.res.succeeded);
	struct reply now = call(k, "/v3/kv/range", etcd_req_range("/late/log_floor", false, 0));
	assert_string_equal(now.kv_value, floor);
}

static void on_event(int rc, const struct etcd_result *res, void *arg)
{
	struct seen *s = arg;
	if (rc < 0) {
		s->ended = rc;
		return;
	}
	s->messages++;
	s->created |= res->created;
	for (size_t i = 0; i < res->nkvs; i++) {
		s->events++;
		snprintf(s->last, sizeof(s->last), "%s", (char *)res->kvs[i].value);
	}
}

static void test_watch(void **state)
{
	struct cluster *k = *state;
	struct seen s = { 0 };
	struct etcd_watch *w;
	if (!k)
		skip();
	assert_int_equal(etcd_watch(k->c, etcd_req_watch("/w/", true, 0), on_event, &s, &w), 0);
	while (!s.created)
		event_base_loop(k->base, EVLOOP_ONCE);
	call(k, "/v3/kv/txn", etcd_req_create("/w/a", "one", 3, 0));
	call(k, "/v3/kv/txn", etcd_req_create("/w/b", "two", 3, 0));
	call(k, "/v3/kv/txn", etcd_req_create("/x/c", "other", 5, 0));
	while (s.events < 2)
		event_base_loop(k->base, EVLOOP_ONCE);
	assert_string_equal(s.last, "two");
	assert_int_equal(s.ended, 0);
	etcd_watch_free(w);
}

/* Stopping the member in use moves the calls to the next one; with none left they fail. */
static void test_failover(void **state)
{
	struct cluster *k = *state;
	if (!k)
		skip();
	const char *first = etcd_endpoint(k->c);
	int used = -1;
	for (int i = 0; i < MEMBERS; i++)
		if (strcmp(k->m.client[i], first) == 0)
			used = i;
	assert_true(used >= 0);
	struct reply r = call(k, "/v3/kv/range", etcd_req_range("/f/a", false, 0));
	assert_false(r.res.resent);
	stop_member(&k->m, used);
	r = call(k, "/v3/kv/txn", etcd_req_create("/f/a", "x", 1, 0));
	assert_int_equal(r.rc, 0);
	assert_true(r.res.succeeded);
	assert_true(r.res.resent); /* the stopped member may have had it: the caller must know */
	assert_string_not_equal(etcd_endpoint(k->c), first);

	/* Two of three members gone: no quorum, so no endpoint answers a write in time. */
	for (int i = 0; i < MEMBERS; i++)
		if (k->m.pid[i] && strcmp(k->m.client[i], etcd_endpoint(k->c)) != 0) {
			stop_member(&k->m, i);
			break;
		}
	r = call(k, "/v3/kv/txn", etcd_req_create("/f/b", "x", 1, 0));
	assert_true(r.rc < 0);
}

/* What a callback saw of its caller: whether etcd_call() or etcd_watch() was still running. */
struct early {
	bool inside; /* set around the call that starts it */
	bool done;   /* the callback ran */
	bool during; /* it ran while inside was set */
	int rc;
};

static void on_early_reply(int rc, const struct etcd_result *res, void *arg)
{
	struct early *e = arg;
	(void)res;
	e->done = true;
	e->during = e->inside;
	e->rc = rc;
}

/* No descriptor can be opened until the limit is put back: evhttp cannot connect. */
static struct rlimit exhaust_fds(void)
{
	struct rlimit old, low;
	assert_int_equal(getrlimit(RLIMIT_NOFILE, &old), 0);
	int fd = open("/dev/null", O_RDONLY);
	assert_true(fd >= 0);
	close(fd);
	low = old;
	low.rlim_cur = (rlim_t)fd; /* every lower descriptor is in use */
	assert_int_equal(setrlimit(RLIMIT_NOFILE, &low), 0);
	return old;
}

/*
 * A request evhttp cannot even connect fails inside evhttp_make_request(); its
 * callback must still come from the loop, after the caller has returned (a caller
 * sets its own state after the call, and may be freed by the callback).
 */
static void test_no_callback_before_return(void **state)
{
	(void)state;
	const char ep[1][128] = { "http://127.0.0.1:9" };
	struct event_base *base = event_base_new();
	struct etcd_client *c;
	assert_int_equal(etcd_client_new(base, ep, 1, 1, &c), 0);
	struct early call = { .inside = true }, watch = { .inside = true };
	struct etcd_watch *w = NULL;

	struct rlimit old = exhaust_fds();
	assert_int_equal(
	    etcd_call(c, "/v3/kv/range", etcd_req_range("x", false, 0), on_early_reply, &call), 0);
	call.inside = false;
	assert_int_equal(etcd_watch(c, etcd_req_watch("/w/", true, 0), on_early_reply, &watch, &w),
	                 0);
	watch.inside = false;
	for (int i = 0; i < 100 && !(call.done && watch.done); i++)
		event_base_loop(base, EVLOOP_ONCE | EVLOOP_NONBLOCK);
	assert_int_equal(setrlimit(RLIMIT_NOFILE, &old), 0);

	assert_true(call.done);
	assert_false(call.during);
	assert_true(call.rc < 0);
	assert_true(watch.done);
	assert_false(watch.during);
	assert_true(watch.rc < 0);
	etcd_watch_free(w);
	etcd_client_free(c);
	event_base_free(base);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_no_callback_before_return),
		cmocka_unit_test(test_election_txns),
		cmocka_unit_test(test_append_after_trim),
		cmocka_unit_test(test_watch),
		cmocka_unit_test(test_failover),
	};
	return cmocka_run_group_tests(tests, setup, teardown);
}
