/*
 * The sim driver on a real event_base: batches, read-back, refusals, every
 * fault kind, and exactly one completion per accepted operation across a
 * disconnect. Also the registry and the endpoint check of every driver.
 */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#include <cmocka.h>
#include <event2/event.h>

#include "ocs_driver.h"

#define PORTS 8

/* Everything the driver reported, in order. */
struct rec {
	char log[64]; /* 'A' apply done, 'R' read done, 'U' up, 'D' down, 'C' connecting */
	size_t nlog;
	int status;
	char err[160];
	struct ocs_xc xcs[PORTS];
	size_t nxcs;
	size_t npartial;
	size_t nforeign;
	/* close the handle from inside the next callback of this kind ('A', 'R' or 'D') */
	char close_in;
	struct ocs_handle **closing;
};

struct fixture {
	struct event_base *base;
	const struct ocs_driver_ops *ops;
	struct ocs_handle *h;
	struct rec rec;
};

static void note(struct rec *r, char what)
{
	assert_true(r->nlog < sizeof(r->log) - 1);
	r->log[r->nlog++] = what;
	r->log[r->nlog] = '\0';
}

static void maybe_close(struct rec *r, const struct ocs_driver_ops *ops, char what)
{
	if (r->close_in && r->close_in == what && r->closing && *r->closing) {
		ops->close(*r->closing);
		*r->closing = NULL;
		r->close_in = 0;
	}
}

static void on_conn(void *arg, enum ocs_conn_state state, const char *err)
{
	struct rec *r = arg;

	note(r, state == OCS_CONN_UP ? 'U' : state == OCS_CONN_DOWN ? 'D' : 'C');
	if (state == OCS_CONN_DOWN) {
		assert_non_null(err);
		snprintf(r->err, sizeof(r->err), "%s", err);
	}
	maybe_close(r, ocs_driver_find("sim"), r->log[r->nlog - 1]);
}

static void on_apply(void *arg, int status, const char *err)
{
	struct rec *r = arg;

	note(r, 'A');
	r->status = status;
	snprintf(r->err, sizeof(r->err), "%s", err ? err : "");
	assert_true(status == 0 ? err == NULL : err != NULL);
	maybe_close(r, ocs_driver_find("sim"), 'A');
}

static void on_read(void *arg, int status, const char *err, const struct ocs_readback *rb)
{
	struct rec *r = arg;

	note(r, 'R');
	r->status = status;
	snprintf(r->err, sizeof(r->err), "%s", err ? err : "");
	r->nxcs = 0;
	if (status == 0) {
		assert_non_null(rb);
		assert_true(rb->nxcs <= PORTS / 2);
		memcpy(r->xcs, rb->xcs, rb->nxcs * sizeof(*rb->xcs));
		r->nxcs = rb->nxcs;
		r->npartial = rb->npartial;
		r->nforeign = rb->nforeign;
	} else {
		assert_null(rb);
	}
	maybe_close(r, ocs_driver_find("sim"), 'R');
}

static double now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec * 1e3 + ts.tv_nsec / 1e6;
}

/* Runs the loop until the log has grown to n entries or ms have passed. */
static void run_until(struct fixture *f, size_t n, int ms)
{
	double end = now_ms() + ms;

	while (f->rec.nlog < n && now_ms() < end) {
		struct timeval tv = { 0, 5000 };

		event_base_loopexit(f->base, &tv);
		event_base_dispatch(f->base);
	}
}

static int open_sim(struct fixture *f, const char *endpoint)
{
	struct ocs_open_params p = { .name = "u1", .endpoint = endpoint, .ports = PORTS };
	struct ocs_events ev = { .conn_state = on_conn, .arg = &f->rec };
	char err[128] = "";
	int r;

	r = f->ops->open(f->base, &p, &ev, &f->h, err, sizeof(err));
	if (r < 0)
		return r;
	/* UP is reported from the loop, never inside open() */
	assert_int_equal(f->rec.nlog, 0);
	run_until(f, 1, 1000);
	assert_string_equal(f->rec.log, "U");
	f->rec.nlog = 0;
	return 0;
}

static int setup(void **state)
{
	static struct fixture f;

	memset(&f, 0, sizeof(f));
	f.base = event_base_new();
	assert_non_null(f.base);
	f.ops = ocs_driver_find("sim");
	assert_non_null(f.ops);
	assert_int_equal(open_sim(&f, "sim"), 0);
	*state = &f;
	return 0;
}

static int teardown(void **state)
{
	struct fixture *f = *state;

	if (f->h)
		f->ops->close(f->h);
	event_base_free(f->base);
	return 0;
}

/* Applies a batch and waits for its completion; returns its status. */
static int apply_wait(struct fixture *f, const struct ocs_xc *del, size_t ndel,
                      const struct ocs_xc *add, size_t nadd)
{
	struct ocs_batch b = { .del = del, .ndel = ndel, .add = add, .nadd = nadd };
	size_t n = f->rec.nlog;

	assert_int_equal(f->ops->apply(f->h, &b, on_apply, &f->rec), 0);
	assert_int_equal(f->rec.nlog, n);
	run_until(f, n + 1, 2000);
	assert_int_equal(f->rec.nlog, n + 1);
	assert_int_equal(f->rec.log[n], 'A');
	return f->rec.status;
}

static void read_wait(struct fixture *f)
{
	size_t n = f->rec.nlog;

	assert_int_equal(f->ops->read(f->h, on_read, &f->rec), 0);
	assert_int_equal(f->rec.nlog, n);
	run_until(f, n + 1, 2000);
	assert_int_equal(f->rec.nlog, n + 1);
	assert_int_equal(f->rec.log[n], 'R');
	assert_int_equal(f->rec.status, 0);
}

static void assert_xcs(struct fixture *f, const struct ocs_xc *want, size_t n)
{
	size_t i;

	read_wait(f);
	assert_int_equal(f->rec.nxcs, n);
	assert_int_equal(f->rec.npartial, 0);
	assert_int_equal(f->rec.nforeign, 0);
	for (i = 0; i < n; i++) {
		assert_int_equal(f->rec.xcs[i].a, want[i].a);
		assert_int_equal(f->rec.xcs[i].b, want[i].b);
	}
}

static void test_registry(void **state)
{
	size_t i;

	(void)state;
	assert_non_null(ocs_driver_find("sim"));
	assert_non_null(ocs_driver_find("openflow"));
	assert_non_null(ocs_driver_find("netconf"));
	assert_null(ocs_driver_find("nope"));
	assert_null(ocs_driver_find(NULL));
	for (i = 0; ocs_drivers[i]; i++)
		assert_ptr_equal(ocs_driver_find(ocs_drivers[i]->name), ocs_drivers[i]);
	assert_int_equal(i, 3);
	assert_non_null(ocs_driver_find("sim")->inject);
	assert_null(ocs_driver_find("openflow")->inject);
	assert_null(ocs_driver_find("netconf")->inject);
}

/* Endpoint validation of the other built-in driver, which needs no switch. */
static void test_openflow_endpoints(void **state)
{
	static const char *const good[] = {
		"tcp:127.0.0.1:6653",  "tcp:[::1]:6653", "ptcp:6653",
		"ptcp:6653:127.0.0.1", "ptcp:6653:::1",  "ptcp:6653:[::1]",
		"tcp:10.0.0.1:65535",
	};
	static const char *const bad[] = {
		"tcp:localhost:6653",
		"tcp:127.0.0.1",
		"tcp:127.0.0.1:0",
		"tcp:127.0.0.1:65536",
		"tcp::6653",
		"tcp:::1:6653",
		"ptcp:",
		"ptcp:abc",
		"ptcp:6653:",
		"ptcp:0",
		"udp:1.2.3.4:5",
		"sim",
		"",
		"tcp:1.2.3.4:66a",
	};
	const struct ocs_driver_ops *ops = ocs_driver_find("openflow");
	char err[256];
	size_t i;

	(void)state;
	for (i = 0; i < sizeof(good) / sizeof(good[0]); i++)
		assert_int_equal(ops->check_endpoint(good[i], err, sizeof(err)), 0);
	for (i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		err[0] = '\0';
		assert_int_equal(ops->check_endpoint(bad[i], err, sizeof(err)), -EINVAL);
		assert_non_null(strstr(err, bad[i]));
	}
	assert_int_equal(ops->check_endpoint(NULL, err, sizeof(err)), -EINVAL);
}

static void test_endpoints(void **state)
{
	static const char *const good[] = { "sim", "sim:delay_ms=10", "sim:delay_ms=0", "" };
	static const char *const bad[] = {
		"simx",
		"sim:",
		"sim:delay=1",
		"sim:delay_ms=",
		"sim:delay_ms=abc",
		"sim:delay_ms=10,",
		"sim:delay_ms=600001",
		"sim:delay_ms=-1",
		"tcp:1.2.3.4:5",
	};
	const struct ocs_driver_ops *ops = ocs_driver_find("sim");
	struct ocs_open_params p = { .name = "u", .endpoint = "sim", .ports = 0 };
	struct event_base *base = event_base_new();
	struct ocs_handle *h = NULL;
	char err[128];
	size_t i;

	(void)state;
	for (i = 0; i < sizeof(good) / sizeof(good[0]); i++)
		assert_int_equal(ops->check_endpoint(good[i], err, sizeof(err)), 0);
	assert_int_equal(ops->check_endpoint(NULL, err, sizeof(err)), 0);
	for (i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		err[0] = '\0';
		assert_int_equal(ops->check_endpoint(bad[i], err, sizeof(err)), -EINVAL);
		assert_true(strlen(err) > 0);
	}
	assert_int_equal(ops->open(base, &p, NULL, &h, err, sizeof(err)), -EINVAL);
	p.ports = 4;
	p.endpoint = "sim:bogus=1";
	assert_int_equal(ops->open(base, &p, NULL, &h, err, sizeof(err)), -EINVAL);
	assert_non_null(strstr(err, "bogus"));
	assert_null(h);
	event_base_free(base);
}

static void test_apply_read(void **state)
{
	struct fixture *f = *state;
	const struct ocs_xc add[] = { { 3, 4 }, { 1, 2 } };
	const struct ocs_xc want[] = { { 1, 2 }, { 3, 4 } };
	const struct ocs_xc del[] = { { 1, 2 }, { 5, 6 } };
	const struct ocs_xc add2[] = { { 1, 5 }, { 2, 8 } };
	const struct ocs_xc want2[] = { { 1, 5 }, { 2, 8 }, { 3, 4 } };

	assert_xcs(f, NULL, 0);
	assert_int_equal(apply_wait(f, NULL, 0, add, 2), 0);
	assert_xcs(f, want, 2);
	/* deletes run before adds, so 1 is free again; deleting 5-6 is a no-op */
	assert_int_equal(apply_wait(f, del, 2, add2, 2), 0);
	assert_xcs(f, want2, 3);
	/* adding an existing circuit again is a no-op */
	assert_int_equal(apply_wait(f, NULL, 0, add2, 1), 0);
	assert_xcs(f, want2, 3);
	/* an empty batch completes too */
	assert_int_equal(apply_wait(f, NULL, 0, NULL, 0), 0);
}

static void test_busy(void **state)
{
	struct fixture *f = *state;
	const struct ocs_xc add[] = { { 1, 2 } };
	struct ocs_batch b = { .add = add, .nadd = 1 };

	assert_int_equal(f->ops->apply(f->h, &b, on_apply, &f->rec), 0);
	assert_int_equal(f->ops->apply(f->h, &b, on_apply, &f->rec), -EBUSY);
	assert_int_equal(f->ops->read(f->h, on_read, &f->rec), -EBUSY);
	run_until(f, 1, 1000);
	run_until(f, 2, 50);
	assert_string_equal(f->rec.log, "A");
	assert_int_equal(f->rec.status, 0);
	assert_int_equal(f->ops->read(f->h, on_read, &f->rec), 0);
	assert_int_equal(f->ops->read(f->h, on_read, &f->rec), -EBUSY);
	run_until(f, 2, 1000);
	assert_string_equal(f->rec.log, "AR");
}

static void test_refusals(void **state)
{
	struct fixture *f = *state;
	const struct ocs_xc first[] = { { 1, 2 } };
	const struct ocs_xc joined[] = { { 3, 4 }, { 2, 5 }, { 6, 7 } };
	const struct ocs_xc want[] = { { 1, 2 }, { 3, 4 } };
	const struct ocs_xc range[] = { { 5, 6 }, { 7, 9 } };
	const struct ocs_xc want2[] = { { 1, 2 }, { 3, 4 }, { 5, 6 } };
	const struct ocs_xc order[] = { { 8, 7 } };
	const struct ocs_xc zero[] = { { 0, 7 } };

	assert_int_equal(apply_wait(f, NULL, 0, first, 1), 0);
	/* fails at 2-5; 3-4 before it stays applied, 6-7 after it is never tried */
	assert_int_equal(apply_wait(f, NULL, 0, joined, 3), -EEXIST);
	assert_non_null(strstr(f->rec.err, "port 2 already joined to port 1"));
	assert_xcs(f, want, 2);
	assert_int_equal(apply_wait(f, NULL, 0, range, 2), -ERANGE);
	assert_non_null(strstr(f->rec.err, "7-9"));
	assert_xcs(f, want2, 3);
	assert_int_equal(apply_wait(f, NULL, 0, order, 1), -EINVAL);
	assert_int_equal(apply_wait(f, NULL, 0, zero, 1), -ERANGE);
	assert_int_equal(apply_wait(f, zero, 1, NULL, 0), -ERANGE);
	assert_xcs(f, want2, 3);
}

static void test_delay(void **state)
{
	struct fixture *f = *state;
	const struct ocs_xc add[] = { { 1, 2 } };
	struct ocs_fault delay = { .kind = OCS_FAULT_DELAY, .count = 200 };
	double t0;

	teardown(state);
	f->base = event_base_new();
	f->h = NULL;
	memset(&f->rec, 0, sizeof(f->rec));
	assert_int_equal(open_sim(f, "sim:delay_ms=60"), 0);
	/*
	 * The sim's timers count from the loop's cached time, read from a coarse
	 * clock (a few ms per tick): make it now, and allow a tick.
	 */
	event_base_update_cache_time(f->base);
	t0 = now_ms();
	assert_int_equal(apply_wait(f, NULL, 0, add, 1), 0);
	assert_true(now_ms() - t0 >= 50);
	assert_int_equal(f->ops->inject(f->h, &delay), 0);
	event_base_update_cache_time(f->base);
	t0 = now_ms();
	assert_int_equal(apply_wait(f, add, 1, NULL, 0), 0);
	assert_true(now_ms() - t0 >= 190);
	/* reads do not switch anything: no delay (half the delay leaves room for a busy machine) */
	t0 = now_ms();
	assert_xcs(f, NULL, 0);
	assert_true(now_ms() - t0 < 100);
	delay.count = 600001;
	assert_int_equal(f->ops->inject(f->h, &delay), -EINVAL);
}

static void test_fail_batches(void **state)
{
	struct fixture *f = *state;
	const struct ocs_xc add[] = { { 1, 2 } };
	struct ocs_fault fault = { .kind = OCS_FAULT_FAIL_BATCHES, .count = 2 };

	assert_int_equal(f->ops->inject(f->h, &fault), 0);
	assert_int_equal(apply_wait(f, NULL, 0, add, 1), -EIO);
	assert_non_null(strstr(f->rec.err, "injected"));
	assert_int_equal(apply_wait(f, NULL, 0, add, 1), -EIO);
	assert_xcs(f, NULL, 0);
	assert_int_equal(apply_wait(f, NULL, 0, add, 1), 0);
	assert_xcs(f, add, 1);
}

static void test_partial(void **state)
{
	struct fixture *f = *state;
	const struct ocs_xc first[] = { { 1, 2 } };
	const struct ocs_xc add[] = { { 3, 4 }, { 5, 6 } };
	const struct ocs_xc want[] = { { 3, 4 } };
	struct ocs_fault fault = { .kind = OCS_FAULT_PARTIAL, .count = 2 };

	assert_int_equal(apply_wait(f, NULL, 0, first, 1), 0);
	assert_int_equal(f->ops->inject(f->h, &fault), 0);
	/* operations: delete 1-2, add 3-4, add 5-6; only the first two run */
	assert_int_equal(apply_wait(f, first, 1, add, 2), -EIO);
	assert_non_null(strstr(f->rec.err, "2 of 3"));
	assert_xcs(f, want, 1);
	/* one batch only */
	assert_int_equal(apply_wait(f, NULL, 0, add + 1, 1), 0);
	/* a count at or above the batch size applies it all */
	fault.count = 5;
	assert_int_equal(f->ops->inject(f->h, &fault), 0);
	assert_int_equal(apply_wait(f, add, 2, first, 1), 0);
	assert_xcs(f, first, 1);
}

static void test_set_clear(void **state)
{
	struct fixture *f = *state;
	struct ocs_fault set = { .kind = OCS_FAULT_SET_XC, .a = 6, .b = 5 };
	struct ocs_fault clear = { .kind = OCS_FAULT_CLEAR_XC, .a = 5, .b = 7 };
	const struct ocs_xc want1[] = { { 5, 6 } };
	const struct ocs_xc want2[] = { { 1, 6 }, { 5, 7 } };
	const struct ocs_xc want3[] = { { 1, 6 } };
	const struct ocs_xc add[] = { { 1, 6 } };

	assert_int_equal(f->ops->inject(f->h, &set), 0);
	assert_int_equal(f->rec.nlog, 0);
	assert_xcs(f, want1, 1);
	/* an add on the port joined behind our back is refused */
	assert_int_equal(apply_wait(f, NULL, 0, add, 1), -EEXIST);
	/* setting 5-7 breaks 5-6 first, which frees 6 */
	set.a = 5;
	set.b = 7;
	assert_int_equal(f->ops->inject(f->h, &set), 0);
	assert_int_equal(apply_wait(f, NULL, 0, add, 1), 0);
	assert_xcs(f, want2, 2);
	assert_int_equal(f->ops->inject(f->h, &clear), 0);
	assert_xcs(f, want3, 1);
	assert_int_equal(f->ops->inject(f->h, &clear), -ENOENT);
	clear.b = 9;
	assert_int_equal(f->ops->inject(f->h, &clear), -ERANGE);
	set.a = set.b = 3;
	assert_int_equal(f->ops->inject(f->h, &set), -EINVAL);
	set.kind = (enum ocs_fault_kind)99;
	assert_int_equal(f->ops->inject(f->h, &set), -EINVAL);
}

static void test_disconnect_idle(void **state)
{
	struct fixture *f = *state;
	const struct ocs_xc add[] = { { 1, 2 } };
	struct ocs_batch b = { .add = add, .nadd = 1 };
	struct ocs_fault fault = { .kind = OCS_FAULT_DISCONNECT };
	double t0;

	assert_int_equal(apply_wait(f, NULL, 0, add, 1), 0);
	f->rec.nlog = 0;
	t0 = now_ms();
	assert_int_equal(f->ops->inject(f->h, &fault), 0);
	assert_int_equal(f->rec.nlog, 0);
	assert_int_equal(f->ops->apply(f->h, &b, on_apply, &f->rec), -ENOTCONN);
	assert_int_equal(f->ops->read(f->h, on_read, &f->rec), -ENOTCONN);
	run_until(f, 2, 2000);
	assert_string_equal(f->rec.log, "DU");
	/* libevent schedules from its cached loop time, a little before t0: allow 5 ms. */
	assert_true(now_ms() - t0 >= 95);
	assert_non_null(strstr(f->rec.err, "disconnect"));
	/* circuits survive a lost controller session */
	f->rec.nlog = 0;
	assert_xcs(f, add, 1);
}

static void test_disconnect_in_flight(void **state)
{
	struct fixture *f = *state;
	const struct ocs_xc add[] = { { 1, 2 } };
	struct ocs_batch b = { .add = add, .nadd = 1 };
	struct ocs_fault fault = { .kind = OCS_FAULT_DISCONNECT };
	struct ocs_fault delay = { .kind = OCS_FAULT_DELAY, .count = 50 };

	assert_int_equal(f->ops->inject(f->h, &delay), 0);
	assert_int_equal(f->ops->apply(f->h, &b, on_apply, &f->rec), 0);
	assert_int_equal(f->ops->inject(f->h, &fault), 0);
	/* a second DISCONNECT while going down changes nothing */
	assert_int_equal(f->ops->inject(f->h, &fault), 0);
	run_until(f, 3, 2000);
	run_until(f, 4, 200);
	/* exactly one completion, before DOWN, then UP */
	assert_string_equal(f->rec.log, "ADU");
	assert_int_equal(f->rec.status, -ENOTCONN);
	/* the batch in flight was not applied */
	assert_xcs(f, NULL, 0);

	/* the same for a read */
	f->rec.nlog = 0;
	assert_int_equal(f->ops->read(f->h, on_read, &f->rec), 0);
	assert_int_equal(f->ops->inject(f->h, &fault), 0);
	run_until(f, 3, 2000);
	assert_string_equal(f->rec.log, "RDU");
	assert_int_equal(f->rec.status, -ENOTCONN);
}

static void test_close_pending(void **state)
{
	struct fixture *f = *state;
	const struct ocs_xc add[] = { { 1, 2 } };
	struct ocs_batch b = { .add = add, .nadd = 1 };
	struct ocs_fault fault = { .kind = OCS_FAULT_DISCONNECT };

	/* close with an apply in flight: its callback is never called */
	assert_int_equal(f->ops->apply(f->h, &b, on_apply, &f->rec), 0);
	f->ops->close(f->h);
	f->h = NULL;
	run_until(f, 1, 50);
	assert_int_equal(f->rec.nlog, 0);

	/* close from inside the completion that a disconnect forces: no DOWN after it */
	assert_int_equal(open_sim(f, "sim"), 0);
	assert_int_equal(f->ops->apply(f->h, &b, on_apply, &f->rec), 0);
	assert_int_equal(f->ops->inject(f->h, &fault), 0);
	f->rec.close_in = 'A';
	f->rec.closing = &f->h;
	run_until(f, 2, 300);
	assert_string_equal(f->rec.log, "A");
	assert_null(f->h);

	/* close from inside the DOWN event: no UP after it */
	f->rec.nlog = 0;
	assert_int_equal(open_sim(f, "sim"), 0);
	assert_int_equal(f->ops->inject(f->h, &fault), 0);
	f->rec.close_in = 'D';
	run_until(f, 2, 300);
	assert_string_equal(f->rec.log, "D");
	assert_null(f->h);

	/* close from inside a read completion */
	f->rec.nlog = 0;
	assert_int_equal(open_sim(f, "sim"), 0);
	assert_int_equal(f->ops->read(f->h, on_read, &f->rec), 0);
	f->rec.close_in = 'R';
	run_until(f, 2, 50);
	assert_string_equal(f->rec.log, "R");
	assert_null(f->h);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_registry),
		cmocka_unit_test(test_openflow_endpoints),
		cmocka_unit_test(test_endpoints),
		cmocka_unit_test_setup_teardown(test_apply_read, setup, teardown),
		cmocka_unit_test_setup_teardown(test_busy, setup, teardown),
		cmocka_unit_test_setup_teardown(test_refusals, setup, teardown),
		cmocka_unit_test_setup_teardown(test_delay, setup, teardown),
		cmocka_unit_test_setup_teardown(test_fail_batches, setup, teardown),
		cmocka_unit_test_setup_teardown(test_partial, setup, teardown),
		cmocka_unit_test_setup_teardown(test_set_clear, setup, teardown),
		cmocka_unit_test_setup_teardown(test_disconnect_idle, setup, teardown),
		cmocka_unit_test_setup_teardown(test_disconnect_in_flight, setup, teardown),
		cmocka_unit_test_setup_teardown(test_close_pending, setup, teardown),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
