/*
 * The openflow driver against a scripted switch: a socket on the loopback
 * that the driver connects to, on a real event_base. The test writes the
 * switch's messages by hand and reads what the driver sends.
 */
#include <errno.h>
#include <netinet/in.h>
#include <poll.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cmocka.h>
#include <event2/event.h>

#include "ocs_driver.h"

/* clang-format off */
static const uint8_t handshake[] = {
	0x04, 0x00, 0x00, 0x10, 0x00, 0x00, 0x00, 0x01,	/* HELLO, 16 bytes */
	0x00, 0x01, 0x00, 0x08, 0x00, 0x00, 0x00, 0x10,	/* VERSIONBITMAP: 1.3 */
	0x04, 0x06, 0x00, 0x20, 0x00, 0x00, 0x00, 0x02,	/* FEATURES_REPLY, 32 bytes, xid 2 */
	0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x01,	/* datapath_id */
	0x00, 0x00, 0x00, 0x00, 0xfe, 0x00, 0x00, 0x00,	/* n_buffers, n_tables, aux id */
	0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00,	/* capabilities, reserved */
};
/* clang-format on */

#define FLOW_LEN 88 /* one OFPMP_FLOW entry: 48 fixed, 16 match, 24 instructions */

struct sw {
	struct event_base *base;
	const struct ocs_driver_ops *drv;
	struct ocs_handle *h;
	int lfd, fd;
	bool up;
	unsigned downs;
	char down_err[256];
	int status;    /* of the last completion; 1 while none */
	char err[256]; /* of the last completion */
	size_t nxcs, npartial;
	struct ocs_xc xc;
};

static void put16(uint8_t *p, uint16_t v)
{
	p[0] = (uint8_t)(v >> 8);
	p[1] = (uint8_t)v;
}

static void put32(uint8_t *p, uint32_t v)
{
	put16(p, (uint16_t)(v >> 16));
	put16(p + 2, (uint16_t)v);
}

/* A circuit half in_port -> output:out as ofcd writes it, cookie included. */
static void flow_entry(uint8_t *p, uint32_t in, uint32_t out)
{
	uint32_t a = in < out ? in : out, b = in < out ? out : in;
	memset(p, 0, FLOW_LEN);
	put16(p, FLOW_LEN);
	put16(p + 12, 1000);
	put32(p + 24, 0x0fcd0000);
	put32(p + 28, a << 24 | b);
	put16(p + 48, 1); /* OXM match, in_port */
	put16(p + 50, 12);
	put32(p + 52, 0x80000004);
	put32(p + 56, in);
	put16(p + 64, 4); /* APPLY_ACTIONS with one OUTPUT */
	put16(p + 66, 24);
	put16(p + 72, 0);
	put16(p + 74, 16);
	put32(p + 76, out);
	put16(p + 80, 0xffff);
}

static void on_conn(void *arg, enum ocs_conn_state state, const char *err)
{
	struct sw *s = arg;
	s->up = state == OCS_CONN_UP;
	if (state == OCS_CONN_DOWN) {
		s->downs++;
		snprintf(s->down_err, sizeof(s->down_err), "%s", err ? err : "");
	}
}

static void on_read(void *arg, int status, const char *err, const struct ocs_readback *rb)
{
	struct sw *s = arg;
	(void)err;
	s->status = status;
	if (status == 0) {
		s->nxcs = rb->nxcs;
		s->npartial = rb->npartial;
		if (rb->nxcs)
			s->xc = rb->xcs[0];
	}
}

static void on_apply(void *arg, int status, const char *err)
{
	struct sw *s = arg;
	s->status = status;
	snprintf(s->err, sizeof(s->err), "%s", err ? err : "");
}

/* Turns the loop until cond holds (at most about two seconds). */
#define RUN_UNTIL(s, cond)                                                                         \
	do {                                                                                       \
		for (int i_ = 0; i_ < 2000 && !(cond); i_++) {                                     \
			event_base_loop((s)->base, EVLOOP_ONCE | EVLOOP_NONBLOCK);                 \
			if (!(cond))                                                               \
				poll(NULL, 0, 1);                                                  \
		}                                                                                  \
		assert_true(cond);                                                                 \
	} while (0)

/* Everything the driver sent so far, dropped; returns its length. */
static size_t drain(struct sw *s)
{
	uint8_t buf[4096];
	size_t total = 0;
	ssize_t n;
	while ((n = recv(s->fd, buf, sizeof(buf), MSG_DONTWAIT)) > 0)
		total += (size_t)n;
	return total;
}

/* Reads exactly n bytes the driver sent (turning the loop meanwhile). */
static void expect_bytes(struct sw *s, uint8_t *buf, size_t n)
{
	size_t got = 0;
	ssize_t r;
	for (int i = 0; i < 2000 && got < n; i++) {
		event_base_loop(s->base, EVLOOP_ONCE | EVLOOP_NONBLOCK);
		r = recv(s->fd, buf + got, n - got, MSG_DONTWAIT);
		if (r > 0)
			got += (size_t)r;
		else
			poll(NULL, 0, 1);
	}
	assert_int_equal(got, n);
}

/* Whether the driver closed its end of the connection (EOF after what it sent). */
static bool closed_by_driver(struct sw *s)
{
	uint8_t buf[4096];
	for (int i = 0; i < 2000; i++) {
		event_base_loop(s->base, EVLOOP_ONCE | EVLOOP_NONBLOCK);
		ssize_t r = recv(s->fd, buf, sizeof(buf), MSG_DONTWAIT);
		if (r == 0)
			return true;
		if (r < 0)
			poll(NULL, 0, 1);
	}
	return false;
}

/*
 * Opens the driver with a master generation against the scripted switch and
 * plays HELLO and FEATURES_REPLY; without a generation the connection is UP
 * then, with one the ROLE_REQUEST is left for the test to answer.
 */
static void sw_open(struct sw *s, uint64_t generation)
{
	struct sockaddr_in sa = { .sin_family = AF_INET,
		                  .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
	socklen_t len = sizeof(sa);
	char endpoint[64], err[256];

	memset(s, 0, sizeof(*s));
	s->status = 1;
	s->base = event_base_new();
	s->drv = ocs_driver_find("openflow");
	s->lfd = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK, 0);
	assert_true(s->base && s->drv && s->lfd >= 0);
	assert_int_equal(bind(s->lfd, (struct sockaddr *)&sa, len), 0);
	assert_int_equal(listen(s->lfd, 4), 0);
	assert_int_equal(getsockname(s->lfd, (struct sockaddr *)&sa, &len), 0);
	snprintf(endpoint, sizeof(endpoint), "tcp:127.0.0.1:%u", ntohs(sa.sin_port));
	struct ocs_open_params p = {
		.name = "t", .endpoint = endpoint, .ports = 64, .master_generation = generation
	};
	struct ocs_events ev = { .conn_state = on_conn, .arg = s };
	assert_int_equal(s->drv->open(s->base, &p, &ev, &s->h, err, sizeof(err)), 0);
	s->fd = -1;
	for (int i = 0; i < 2000 && s->fd < 0; i++) {
		event_base_loop(s->base, EVLOOP_ONCE | EVLOOP_NONBLOCK);
		s->fd = accept(s->lfd, NULL, NULL);
	}
	assert_true(s->fd >= 0);
	assert_int_equal(send(s->fd, handshake, sizeof(handshake), 0), (ssize_t)sizeof(handshake));
	uint8_t sent[16 + 8];
	expect_bytes(s, sent, sizeof(sent)); /* HELLO and FEATURES_REQUEST */
}

static int setup(void **state)
{
	static struct sw s;

	sw_open(&s, 0);
	RUN_UNTIL(&s, s.up);
	assert_int_equal(drain(&s), 0); /* no ROLE_REQUEST without a generation */
	*state = &s;
	return 0;
}

/* As setup(), with master generation 5 granted by the switch. */
static int setup_master(void **state)
{
	static struct sw s;
	static const uint8_t want[24] = {
		0x04, 24,   0x00, 24,   0x00, 0x00, 0x00, 0x03, /* ROLE_REQUEST, xid 3 */
		0x00, 0x00, 0x00, 0x02, 0x00, 0x00, 0x00, 0x00, /* MASTER */
		0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x05, /* generation_id 5 */
	};
	uint8_t req[24], reply[24];

	sw_open(&s, 5);
	expect_bytes(&s, req, sizeof(req));
	assert_memory_equal(req, want, sizeof(want));
	/* no UP before the switch grants MASTER */
	for (int i = 0; i < 20; i++)
		event_base_loop(s.base, EVLOOP_ONCE | EVLOOP_NONBLOCK);
	assert_false(s.up);
	memcpy(reply, want, sizeof(reply));
	reply[1] = 25; /* ROLE_REPLY */
	assert_int_equal(send(s.fd, reply, sizeof(reply), 0), (ssize_t)sizeof(reply));
	RUN_UNTIL(&s, s.up);
	*state = &s;
	return 0;
}

static int teardown(void **state)
{
	struct sw *s = *state;
	s->drv->close(s->h);
	close(s->fd);
	close(s->lfd);
	event_base_free(s->base);
	return 0;
}

/* A reply listing a flow more than once: each circuit and half is counted once. */
static void test_duplicate_flows_count_once(void **state)
{
	struct sw *s = *state;
	static const uint32_t flows[][2] = { { 3, 7 }, { 3, 7 },  { 3, 7 }, { 3, 7 },
		                             { 7, 3 }, { 9, 10 }, { 9, 10 } };
	size_t n = sizeof(flows) / sizeof(flows[0]);
	uint8_t msg[16 + sizeof(flows) / sizeof(flows[0]) * FLOW_LEN] = { 0 };

	assert_int_equal(s->drv->read(s->h, on_read, s), 0);
	msg[0] = 0x04;
	msg[1] = 19; /* MULTIPART_REPLY */
	put16(msg + 2, (uint16_t)sizeof(msg));
	put32(msg + 4, 3); /* the request's xid: after HELLO and FEATURES_REQUEST */
	put16(msg + 8, 1); /* OFPMP_FLOW, no more parts */
	for (size_t i = 0; i < n; i++)
		flow_entry(msg + 16 + i * FLOW_LEN, flows[i][0], flows[i][1]);
	assert_int_equal(send(s->fd, msg, sizeof(msg), 0), (ssize_t)sizeof(msg));
	RUN_UNTIL(s, s->status != 1);
	assert_int_equal(s->status, 0);
	assert_int_equal(s->nxcs, 1);
	assert_int_equal(s->xc.a, 3);
	assert_int_equal(s->xc.b, 7);
	assert_int_equal(s->npartial, 1);
}

/* Two additions: four flow mods and a BARRIER, committed by the BARRIER_REPLY. */
static void test_apply_commits_at_the_barrier(void **state)
{
	struct sw *s = *state;
	static const struct ocs_xc add[] = { { 1, 2 }, { 5, 9 } };
	struct ocs_batch b = { .add = add, .nadd = 2 };
	uint8_t reply[8] = { 0x04, 21, 0, 8 };
	uint8_t sent[4 * 88 + 8];

	assert_int_equal(s->drv->apply(s->h, &b, on_apply, s), 0);
	expect_bytes(s, sent, sizeof(sent));
	assert_int_equal(drain(s), 0);
	assert_int_equal(sent[4 * 88 + 1], 20); /* BARRIER_REQUEST */
	/* the BARRIER's xid: 7 after HELLO, FEATURES_REQUEST and the flows */
	memcpy(reply + 4, sent + 4 * 88 + 4, 4);
	assert_int_equal(send(s->fd, reply, sizeof(reply), 0), 8);
	RUN_UNTIL(s, s->status != 1);
	assert_int_equal(s->status, 0);
}

/* As above, after the switch granted MASTER: the xids follow the ROLE_REQUEST's. */
static void test_master_applies(void **state)
{
	struct sw *s = *state;
	static const struct ocs_xc add[] = { { 1, 2 } };
	struct ocs_batch b = { .add = add, .nadd = 1 };
	uint8_t reply[8] = { 0x04, 21, 0, 8, 0, 0, 0, 6 }; /* flows 4, 5, BARRIER 6 */
	uint8_t sent[2 * 88 + 8];

	assert_int_equal(s->drv->apply(s->h, &b, on_apply, s), 0);
	expect_bytes(s, sent, sizeof(sent));
	assert_int_equal(sent[7], 4);
	assert_int_equal(send(s->fd, reply, sizeof(reply), 0), 8);
	RUN_UNTIL(s, s->status != 1);
	assert_int_equal(s->status, 0);
}

/* A switch that granted a newer generation refuses ours: DOWN, fenced, then a retry. */
static void test_stale_generation_is_fenced(void **state)
{
	static struct sw s;
	uint8_t req[24];
	uint8_t err[12 + 24] = { 0x04, 1, 0, sizeof(err), 0, 0, 0, 3, 0, 11, 0, 0 };

	(void)state;
	sw_open(&s, 4);
	expect_bytes(&s, req, sizeof(req));
	memcpy(err + 12, req, sizeof(req)); /* OFPRRFC_STALE quotes the request */
	assert_int_equal(send(s.fd, err, sizeof(err), 0), (ssize_t)sizeof(err));
	RUN_UNTIL(&s, s.downs == 1);
	assert_false(s.up);
	assert_non_null(
	    strstr(s.down_err, "fenced: the switch holds a newer master generation than 4"));
	assert_true(closed_by_driver(&s));
	/* it keeps trying, with its backoff */
	int fd2 = -1;
	for (int i = 0; i < 2000 && fd2 < 0; i++) {
		event_base_loop(s.base, EVLOOP_ONCE | EVLOOP_NONBLOCK);
		fd2 = accept(s.lfd, NULL, NULL);
		if (fd2 < 0)
			poll(NULL, 0, 1);
	}
	assert_true(fd2 >= 0);
	close(fd2);
	s.drv->close(s.h);
	close(s.fd);
	close(s.lfd);
	event_base_free(s.base);
}

/* A master demoted behind its back: the switch refuses its flow-mods with IS_SLAVE. */
static void test_is_slave_fails_the_apply(void **state)
{
	struct sw *s = *state;
	static const struct ocs_xc add[] = { { 1, 2 } };
	struct ocs_batch b = { .add = add, .nadd = 1 };
	uint8_t sent[2 * 88 + 8];
	uint8_t err[12 + 64] = { 0x04, 1, 0, sizeof(err), 0, 0, 0, 4, 0, 1, 0, 10 };

	assert_int_equal(s->drv->apply(s->h, &b, on_apply, s), 0);
	expect_bytes(s, sent, sizeof(sent));
	memcpy(err + 12, sent, 64); /* OFPBRC_IS_SLAVE for the first flow-mod, xid 4 */
	assert_int_equal(send(s->fd, err, sizeof(err), 0), (ssize_t)sizeof(err));
	RUN_UNTIL(s, s->status != 1);
	assert_int_equal(s->status, -EPERM);
	assert_non_null(strstr(s->err, "fenced: "));
	assert_non_null(strstr(s->err, "OFPBRC_IS_SLAVE"));
	assert_non_null(strstr(s->err, "generation 5"));
	RUN_UNTIL(s, s->downs == 1);
	assert_string_equal(s->down_err, s->err);
	assert_int_equal(s->drv->apply(s->h, &b, on_apply, s), -ENOTCONN);
	/* nothing more on that connection: the next bytes are its end */
	assert_true(closed_by_driver(s));
}

/* ROLE_STATUS (ONF 1911) telling a master it is now SLAVE fences it at once. */
static void test_role_status_fences(void **state)
{
	struct sw *s = *state;
	static const struct ocs_xc add[] = { { 1, 2 } };
	struct ocs_batch b = { .add = add, .nadd = 1 };
	uint8_t sent[2 * 88 + 8];
	static const uint8_t status[32] = {
		0x04, 0x04, 0x00, 0x20, 0x00, 0x00, 0x00, 0x00, /* EXPERIMENTER */
		0x4f, 0x4e, 0x46, 0x00, 0x00, 0x00, 0x07, 0x77, /* ONF ROLE_STATUS */
		0x00, 0x00, 0x00, 0x03, 0x00, 0x00, 0x00, 0x00, /* SLAVE, MASTER_REQUEST */
		0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x06, /* generation 6 */
	};

	assert_int_equal(s->drv->apply(s->h, &b, on_apply, s), 0);
	expect_bytes(s, sent, sizeof(sent));
	assert_int_equal(send(s->fd, status, sizeof(status), 0), (ssize_t)sizeof(status));
	RUN_UNTIL(s, s->status != 1);
	assert_int_equal(s->status, -EPERM);
	assert_non_null(strstr(s->err, "fenced: "));
	assert_non_null(strstr(s->err, "generation 6"));
	RUN_UNTIL(s, s->downs == 1);
	assert_true(closed_by_driver(s));
}

/* Without a generation the driver asked for no role: a ROLE_STATUS changes nothing. */
static void test_role_status_ignored_without_generation(void **state)
{
	struct sw *s = *state;
	uint8_t status[32] = { 0x04, 0x04, 0x00, 0x20, 0,    0,    0, 0, 0x4f, 0x4e,
		               0x46, 0x00, 0,    0,    0x07, 0x77, 0, 0, 0,    3 };
	uint8_t reply[8] = { 0x04, 21, 0, 8, 0, 0, 0, 5 };
	static const struct ocs_xc add[] = { { 1, 2 } };
	struct ocs_batch b = { .add = add, .nadd = 1 };
	uint8_t sent[2 * 88 + 8];

	assert_int_equal(send(s->fd, status, sizeof(status), 0), (ssize_t)sizeof(status));
	assert_int_equal(s->drv->apply(s->h, &b, on_apply, s), 0);
	expect_bytes(s, sent, sizeof(sent));
	assert_int_equal(send(s->fd, reply, sizeof(reply), 0), 8); /* xids 3, 4, barrier 5 */
	RUN_UNTIL(s, s->status != 1);
	assert_int_equal(s->status, 0);
	assert_true(s->up);
	assert_int_equal(s->downs, 0);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup_teardown(test_duplicate_flows_count_once, setup, teardown),
		cmocka_unit_test_setup_teardown(test_apply_commits_at_the_barrier, setup, teardown),
		cmocka_unit_test_setup_teardown(test_master_applies, setup_master, teardown),
		cmocka_unit_test(test_stale_generation_is_fenced),
		cmocka_unit_test_setup_teardown(test_is_slave_fails_the_apply, setup_master,
		                                teardown),
		cmocka_unit_test_setup_teardown(test_role_status_fences, setup_master, teardown),
		cmocka_unit_test_setup_teardown(test_role_status_ignored_without_generation, setup,
		                                teardown),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
