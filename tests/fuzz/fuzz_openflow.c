/*
 * The openflow driver's stream handling, fed by a fake switch: the driver
 * connects (tcp:127.0.0.1:PORT) to a socket this harness listens on, on a
 * real event_base, and everything the "switch" sends comes from the input.
 *
 * Input: byte 0 is flags, byte 1 the chunk size the stream is written in (0:
 * all at once, so framing across reads is exercised too), the rest the bytes
 * the switch sends.
 *   bit 0    the harness first sends a valid HELLO and FEATURES_REPLY, so the
 *            driver is up at once and the input need not rediscover them;
 *   bits 1-2 the first operation issued once the driver reports UP
 *            (0 none, 1 read, 2 apply with deletions and additions, 3 apply
 *            of additions only);
 *   bits 3-4 the operation issued when the first one completes;
 *   bit 5    framed: the rest is messages each preceded by its size (2 bytes,
 *            little-endian; the last one runs to the end), and the harness
 *            writes that size into the message's OpenFlow length field, so
 *            that a mutation inside a message (another flow entry in a
 *            reply) keeps the framing right instead of only breaking it;
 *   bit 6    fencing: the driver is opened with master generation 5, and
 *            with bit 0 the harness's handshake ends with a ROLE_REPLY
 *            granting MASTER, so that ROLE_STATUS and errors of a fenced
 *            master reach a driver that is UP.
 * xids are deterministic (HELLO 1, FEATURES_REQUEST 2, with bit 6
 * ROLE_REQUEST 3, then one per message of each operation), so replies in the
 * corpus find their request.
 *
 * At the end the switch closes its side; the driver must report DOWN. What
 * the driver promises in ocs_driver.h is checked on the way: one completion
 * per accepted operation, none left pending at DOWN, messages on every
 * failure, read-backs with ports in range, a < b, each circuit once.
 */
#include <errno.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include <event2/event.h>

#include "fuzz.h"
#include "ocs_driver.h"

#define PORTS 64

static const struct ocs_driver_ops *drv;
static struct event_base *base;
static int listen_fd = -1;
static char endpoint[64];
static volatile uint32_t touched;

/* clang-format off */
static const uint8_t handshake[] = {
	0x04, 0x00, 0x00, 0x10, 0x00, 0x00, 0x00, 0x01,	/* HELLO, 16 bytes */
	0x00, 0x01, 0x00, 0x08, 0x00, 0x00, 0x00, 0x10,	/* VERSIONBITMAP: 1.3 */
	0x04, 0x06, 0x00, 0x20, 0x00, 0x00, 0x00, 0x02,	/* FEATURES_REPLY, 32 bytes, xid 2 */
	0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x01,	/* datapath_id */
	0x00, 0x00, 0x00, 0x00, 0xfe, 0x00, 0x00, 0x00,	/* n_buffers, n_tables, aux id */
	0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00,	/* capabilities, reserved */
};
static const uint8_t role_reply[] = {
	0x04, 0x19, 0x00, 0x18, 0x00, 0x00, 0x00, 0x03,	/* ROLE_REPLY, 24 bytes, xid 3 */
	0x00, 0x00, 0x00, 0x02, 0x00, 0x00, 0x00, 0x00,	/* MASTER */
	0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x05,	/* generation_id 5 */
};
/* clang-format on */

static const struct ocs_xc dels[] = { { 1, 2 }, { 5, 9 } };
static const struct ocs_xc adds[] = { { 3, 4 }, { 7, PORTS } };

struct run {
	struct ocs_handle *h;
	unsigned flags;
	unsigned nops; /* operations started */
	bool pending;  /* an operation awaits its completion */
	bool down;
};

static void check(bool ok, const char *what)
{
	if (!ok) {
		fprintf(stderr, "fuzz_openflow: %s\n", what);
		abort();
	}
}

static void next_op(struct run *r);

static void completed(struct run *r, int status, const char *err)
{
	check(r->pending, "a completion without an operation");
	check(status == 0 || (err && *err), "a failure without a message");
	r->pending = false;
	next_op(r);
}

static void on_apply(void *arg, int status, const char *err)
{
	completed(arg, status, err);
}

static void on_read(void *arg, int status, const char *err, const struct ocs_readback *rb)
{
	check(status < 0 || rb, "a read-back without its result");
	if (status == 0) {
		for (size_t i = 0; i < rb->nxcs; i++)
			check(rb->xcs[i].a >= 1 && rb->xcs[i].a < rb->xcs[i].b &&
			          rb->xcs[i].b <= PORTS,
			      "a circuit out of range");
		/* A read-back is a set: each circuit once. */
		for (size_t i = 0; i < rb->nxcs; i++)
			for (size_t j = 0; j < i; j++)
				check(rb->xcs[i].a != rb->xcs[j].a || rb->xcs[i].b != rb->xcs[j].b,
				      "a circuit listed twice");
		for (size_t i = 0; i < rb->npartial; i++)
			check(rb->partial[i].in_port >= 1 && rb->partial[i].in_port <= PORTS,
			      "a partial entry out of range");
		/* Reading every entry lets ASan see that the array is as long as said. */
		for (size_t i = 0; i < rb->nforeign; i++)
			touched += rb->foreign[i].in_port + rb->foreign[i].out_port;
	}
	completed(arg, status, err);
}

/* Starts the operation the flags name for this turn, if any. */
static void next_op(struct run *r)
{
	unsigned what;
	int rc;

	if (r->nops >= 2 || r->pending)
		return;
	what = (r->flags >> (1 + 2 * r->nops)) & 3;
	r->nops++;
	if (what == 1) {
		rc = drv->read(r->h, on_read, r);
	} else if (what) {
		struct ocs_batch b = {
			.del = dels, .ndel = what == 2 ? 2 : 0, .add = adds, .nadd = 2
		};
		rc = drv->apply(r->h, &b, on_apply, r);
	} else {
		return;
	}
	check(rc == 0 || rc == -ENOTCONN || rc == -ENOMEM, "an operation refused for no reason");
	r->pending = rc == 0;
}

static void on_conn(void *arg, enum ocs_conn_state state, const char *err)
{
	struct run *r = arg;

	if (state == OCS_CONN_UP) {
		next_op(r);
	} else if (state == OCS_CONN_DOWN) {
		check(err && *err, "DOWN without a reason");
		check(!r->pending, "DOWN with an operation still pending");
		r->down = true;
	}
}

static void on_port(void *arg, uint32_t port, bool up)
{
	(void)arg;
	(void)up;
	check(port >= 1 && port <= PORTS, "port_state out of range");
}

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
	struct sockaddr_in sa = { .sin_family = AF_INET,
		                  .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
	socklen_t len = sizeof(sa);

	(void)argc;
	(void)argv;
	/* The driver writes with writev(): a switch gone must not kill the process. */
	signal(SIGPIPE, SIG_IGN);
	drv = ocs_driver_find("openflow");
	base = event_base_new();
	listen_fd = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
	if (!drv || !base || listen_fd < 0 || bind(listen_fd, (struct sockaddr *)&sa, len) < 0 ||
	    listen(listen_fd, 16) < 0 || getsockname(listen_fd, (struct sockaddr *)&sa, &len) < 0) {
		perror("fuzz_openflow: setup");
		exit(1);
	}
	snprintf(endpoint, sizeof(endpoint), "tcp:127.0.0.1:%u", ntohs(sa.sin_port));
	return 0;
}

/* One turn of the loop, then whatever the driver sent is read and dropped. */
static void spin(int fd)
{
	uint8_t sink[4096];

	event_base_loop(base, EVLOOP_ONCE | EVLOOP_NONBLOCK);
	while (fd >= 0 && recv(fd, sink, sizeof(sink), MSG_DONTWAIT) > 0)
		;
}

/* Connections the driver made that the harness did not take: closed. */
static void drain_listener(void)
{
	int fd;

	while ((fd = accept4(listen_fd, NULL, NULL, SOCK_CLOEXEC)) >= 0)
		close(fd);
}

/* The framed form (bit 5) turned into the stream itself; returns its length. */
static size_t unframe(const uint8_t *in, size_t size, uint8_t *out)
{
	size_t len = 0;

	while (size >= 2) {
		size_t n = (size_t)in[0] | (size_t)in[1] << 8;
		in += 2;
		size -= 2;
		if (n > size)
			n = size;
		memcpy(out + len, in, n);
		if (n >= 4) {
			size_t field = n > 0xffff ? 0xffff : n;
			out[len + 2] = (uint8_t)(field >> 8);
			out[len + 3] = (uint8_t)field;
		}
		len += n;
		in += n;
		size -= n;
	}
	return len;
}

static void send_all(int fd, const uint8_t *p, size_t n, struct run *r)
{
	unsigned stalls = 0;

	while (n && !r->down && stalls < 1000) {
		ssize_t w = send(fd, p, n, MSG_DONTWAIT | MSG_NOSIGNAL);
		if (w > 0) {
			p += w;
			n -= (size_t)w;
		} else if (w < 0 && errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR) {
			return; /* the driver closed the connection */
		} else {
			stalls++;
		}
		spin(fd);
	}
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct run r = { 0 };
	struct ocs_events ev = { .conn_state = on_conn, .port_state = on_port, .arg = &r };
	struct ocs_open_params params = { .name = "fuzz", .endpoint = endpoint, .ports = PORTS };
	char err[256];
	int fd = -1;
	size_t chunk;
	uint8_t *framed = NULL;

	if (size < 2)
		return 0;
	r.flags = data[0];
	params.master_generation = r.flags & 0x40 ? 5 : 0;
	chunk = data[1] ? data[1] : size;
	data += 2;
	size -= 2;
	if (r.flags & 0x20) {
		framed = malloc(size + 1);
		if (!framed)
			return 0;
		size = unframe(data, size, framed);
		data = framed;
	}
	check(drv->open(base, &params, &ev, &r.h, err, sizeof(err)) == 0, "open failed");
	for (unsigned i = 0; i < 1000 && fd < 0; i++) {
		spin(-1);
		fd = accept4(listen_fd, NULL, NULL, SOCK_CLOEXEC);
		if (fd < 0)
			poll(NULL, 0, 0);
	}
	check(fd >= 0, "the driver did not connect");
	if (r.flags & 1)
		send_all(fd, handshake, sizeof(handshake), &r);
	if ((r.flags & 0x41) == 0x41)
		send_all(fd, role_reply, sizeof(role_reply), &r);
	while (size && !r.down) {
		size_t n = size < chunk ? size : chunk;
		send_all(fd, data, n, &r);
		data += n;
		size -= n;
	}
	shutdown(fd, SHUT_WR);
	for (unsigned i = 0; i < 2000 && !r.down; i++) {
		spin(fd);
		if (!r.down)
			poll(NULL, 0, 0);
	}
	check(r.down, "no DOWN after the switch closed the connection");
	close(fd);
	drv->close(r.h);
	drain_listener();
	free(framed);
	return 0;
}
