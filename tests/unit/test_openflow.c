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
	int status; /* of the last completion; 1 while none */
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
	(void)err;
	s->up = state == OCS_CONN_UP;
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
	(void)err;
	s->status = status;
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

static int setup(void **state)
{
	static struct sw s;
	struct sockaddr_in sa = { .sin_family = AF_INET,
		                  .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
	socklen_t len = sizeof(sa);
	char endpoint[64], err[256];

	memset(&s, 0, sizeof(s));
	s.status = 1;
	s.base = event_base_new();
	s.drv = ocs_driver_find("openflow");
	s.lfd = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK, 0);
	assert_true(s.base && s.drv && s.lfd >= 0);
	assert_int_equal(bind(s.lfd, (struct sockaddr *)&sa, len), 0);
	assert_int_equal(listen(s.lfd, 4), 0);
	assert_int_equal(getsockname(s.lfd, (struct sockaddr *)&sa, &len), 0);
	snprintf(endpoint, sizeof(endpoint), "tcp:127.0.0.1:%u", ntohs(sa.sin_port));
	struct ocs_open_params p = { .name = "t", .endpoint = endpoint, .ports = 64 };
	struct ocs_events ev = { .conn_state = on_conn, .arg = &s };
	assert_int_equal(s.drv->open(s.base, &p, &ev, &s.h, err, sizeof(err)), 0);
	s.fd = -1;
	for (int i = 0; i < 2000 && s.fd < 0; i++) {
		event_base_loop(s.base, EVLOOP_ONCE | EVLOOP_NONBLOCK);
		s.fd = accept(s.lfd, NULL, NULL);
	}
	assert_true(s.fd >= 0);
	assert_int_equal(send(s.fd, handshake, sizeof(handshake), 0), (ssize_t)sizeof(handshake));
	RUN_UNTIL(&s, s.up);
	size_t got = 0;
	RUN_UNTIL(&s, (got += drain(&s)) >= 16 + 8); /* HELLO and FEATURES_REQUEST */
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
	size_t sent = 0;

	assert_int_equal(s->drv->apply(s->h, &b, on_apply, s), 0);
	RUN_UNTIL(s, (sent += drain(s)) >= 4 * 88 + 8);
	assert_int_equal(sent, 4 * 88 + 8);
	put32(reply + 4, 7); /* xids 3..6 for the flows, 7 for the BARRIER */
	assert_int_equal(send(s->fd, reply, sizeof(reply), 0), 8);
	RUN_UNTIL(s, s->status != 1);
	assert_int_equal(s->status, 0);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup_teardown(test_duplicate_flows_count_once, setup, teardown),
		cmocka_unit_test_setup_teardown(test_apply_commits_at_the_barrier, setup, teardown),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
