/*
 * The `openflow` driver: an OCS unit (or an Open vSwitch bridge standing in
 * for one) programmed over OpenFlow 1.3.
 *
 * Endpoint:
 *   tcp:HOST:PORT     ofcd connects to the switch, reconnecting with backoff
 *                     (100 ms doubling to 5 s); HOST is an IPv4 or a bracketed
 *                     IPv6 address ("tcp:[::1]:6653")
 *   ptcp:PORT[:HOST]  ofcd listens and the switch connects (HOST defaults to
 *                     every IPv4 address; a listening port that cannot be
 *                     bound fails open()). While one switch is connected,
 *                     further connections are closed at once.
 *
 * Circuits as flows. A circuit a-b (a < b) is two flows in table 0 at priority
 * OF_PRIORITY: in_port=a -> apply-actions output:b and in_port=b -> output:a,
 * both with the cookie OF_COOKIE_TAG | a << 24 | b. The top 16 bits say "made
 * by ofcd"; the rest names the circuit, so that the strict deletes of a-b
 * (same match and priority, cookie under a full mask) remove only the halves
 * of a-b and never another flow on the same in_port. Ports are therefore
 * limited to 24 bits (open() checks the unit's port count).
 *
 * A batch is written at once, with no round trip per flow: a DELETE_STRICT
 * per half of each deleted circuit, an ADD per half of each added one, then a
 * BARRIER_REQUEST. The BARRIER_REPLY is the commit point: the batch succeeds
 * when no OFPT_ERROR with one of its xids came before it; otherwise it fails
 * with -EIO and the first error, decoded, in the message. A batch with a port
 * outside 1..ports or a >= b is refused by apply() with -EINVAL, nothing sent.
 *
 * Read-back is one OFPMP_FLOW request for every flow of every table; its
 * replies are reassembled until one comes without OFPMPF_REPLY_MORE. Flows in
 * exactly the shape above, cookie included, are ofcd's: a pair of them in both
 * directions is a circuit, one alone is partial. Everything else (other
 * cookies, tables, priorities, matches or actions, a table-miss flow) is
 * foreign, with port 0 standing for "none" (no in_port match, no output).
 *
 * Connection: HELLO with a version bitmap (1.3 only), FEATURES_REQUEST, then
 * (with a master generation, below) ROLE_REQUEST, then UP. ECHO requests from
 * the switch are answered; ofcd sends one every OF_KEEPALIVE_MS and drops the
 * connection after OF_KEEPALIVE_MISSES periods without any message from the
 * switch (the handshake has the same limit). PORT_STATUS for ports 1..ports is
 * reported through ev->port_state, up when neither OFPPC_PORT_DOWN nor
 * OFPPS_LINK_DOWN is set (down when deleted). Malformed messages drop the
 * connection. A drop completes the operation in flight, if any, with
 * -ENOTCONN, then reports DOWN with the reason.
 *
 * conn_state is reported on every change, starting from an implicit DOWN:
 * CONNECTING when an attempt starts (tcp) or a switch connects (ptcp), UP
 * after FEATURES_REPLY (or ROLE_REPLY), DOWN with the reason when a
 * connection or an attempt ends. Never from inside a call of the daemon. A
 * batch in flight when the connection drops may have been applied in part:
 * read back once UP again.
 *
 * Fencing (params->master_generation != 0). Several ofcd may reach one
 * switch, but only the cluster's leader may change it. After FEATURES_REPLY
 * the driver sends ROLE_REQUEST MASTER with the generation as generation_id
 * and is UP only once the ROLE_REPLY grants MASTER, before any read-back or
 * flow-mod. The switch keeps the highest generation it has granted and
 * refuses an older one (OFPRRFC_STALE): the attempt ends DOWN with
 * OF_FENCED_STALE and the driver keeps retrying with its backoff, in vain
 * until the switch forgets (it restarts). Granting MASTER to another
 * controller demotes this one to SLAVE: Open vSwitch says so with a
 * ROLE_STATUS, and refuses a SLAVE's flow-mods (OFPBRC_IS_SLAVE). Either ends
 * the connection as fenced: the operation in flight fails with -EPERM and a
 * "fenced: ..." message, then DOWN is reported with it, and nothing more is
 * sent on that connection. The switch enforces all of this, so a leader
 * deposed without knowing it cannot change a flow once its successor is UP.
 * It holds only among controllers that all ask for MASTER: a controller
 * without a role (EQUAL, generation 0 here, ovs-ofctl) may still change flows.
 * Generation 0 sends no ROLE_REQUEST at all, as before fencing existed.
 *
 * The process must ignore SIGPIPE: libevent writes with writev(), so writing
 * to a connection the switch has just closed would otherwise kill it.
 */
#include "ocs_driver.h"
#include "of13.h"

#include <errno.h>
#include <arpa/inet.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>

#include <event2/buffer.h>
#include <event2/bufferevent.h>
#include <event2/event.h>
#include <event2/listener.h>
#include <event2/util.h>

#define OF_PRIORITY         1000
#define OF_COOKIE_TAG       0x0fcd000000000000ull
#define OF_MAX_PORTS        0xffffffu
#define OF_BACKOFF_MIN_MS   100u
#define OF_BACKOFF_MAX_MS   5000u
#define OF_KEEPALIVE_MS     5000u
#define OF_KEEPALIVE_MISSES 3u
#define OF_LISTEN_RETRY_MS  1000u

#define OF_FENCED_STALE "fenced: the switch holds a newer master generation"

enum of_state {
	OF_IDLE = 0,   /* no connection: waiting to retry (tcp) or for a switch (ptcp) */
	OF_CONNECTING, /* tcp connect in progress */
	OF_HELLO,      /* HELLO sent, waiting for the switch's */
	OF_FEATURES,   /* FEATURES_REQUEST sent */
	OF_ROLE,       /* ROLE_REQUEST MASTER sent (fencing), waiting for the reply */
	OF_UP,         /* ready for apply() and read() */
};

enum of_op {
	OF_OP_NONE = 0,
	OF_OP_APPLY,
	OF_OP_READ,
};

/* A flow read back, reduced to its ports. */
struct of_rflow {
	uint32_t in;
	uint32_t out;
};

struct of_flows {
	struct of_rflow *v;
	size_t n;
	size_t cap;
};

struct of_unit {
	struct event_base *base;
	struct ocs_events ev;
	uint32_t ports;
	uint64_t generation;          /* master generation; 0: no role request */
	uint32_t role_xid;            /* of the ROLE_REQUEST in flight */
	bool passive;                 /* ptcp: the switch connects to us */
	struct sockaddr_storage addr; /* tcp: the switch; ptcp: where to listen */
	int addrlen;
	char addr_str[80]; /* the switch's address, for messages */

	struct evconnlistener *listener;
	struct bufferevent *bev; /* reads; what is sent goes through out */
	/*
	 * What waits to be sent, written to the socket only after may_send said
	 * yes (see flush_out()): never the bufferevent's own output, which libevent
	 * writes whenever the socket is ready, asked or not.
	 */
	struct evbuffer *out;
	struct event *out_ready; /* the socket can take more of out */
	struct event *out_held;  /* may_send said no: ask again shortly */
	bool (*may_send)(void *arg);
	void *may_send_arg;
	enum of_state state;
	struct event *retry_timer;
	uint32_t backoff_ms;
	struct event *keepalive;
	unsigned misses;
	uint32_t next_xid;

	/* the operation in flight */
	enum of_op op;
	ocs_apply_cb apply_cb;
	ocs_read_cb read_cb;
	void *op_arg;
	uint32_t op_xid;      /* first xid of the operation */
	uint32_t op_last_xid; /* BARRIER_REQUEST, or the multipart request */
	struct ocs_xc *batch; /* copy of the batch: deletes then adds */
	size_t ndel;
	size_t nxc;
	unsigned nerrors; /* OFPT_ERRORs for the operation */
	uint32_t err_xid; /* the first of them */
	uint16_t err_type;
	uint16_t err_code;
	struct of_flows ours;    /* read: flows in ofcd's shape */
	struct of_flows foreign; /* read: everything else */

	/* close() from inside one of our callbacks frees only when it unwinds */
	unsigned depth;
	bool closed;

	char err[256];
};

static struct of_unit *to_unit(struct ocs_handle *h)
{
	return (struct of_unit *)h;
}

static uint64_t circuit_cookie(uint32_t a, uint32_t b)
{
	return OF_COOKIE_TAG | (uint64_t)a << 24 | b;
}

static int parse_port(const char *s, size_t len, uint16_t *port)
{
	unsigned long v = 0;
	size_t i;

	if (!len || len > 5)
		return -EINVAL;
	for (i = 0; i < len; i++) {
		if (s[i] < '0' || s[i] > '9')
			return -EINVAL;
		v = v * 10 + (unsigned long)(s[i] - '0');
	}
	if (v < 1 || v > 65535)
		return -EINVAL;
	*port = (uint16_t)v;
	return 0;
}

/*
 * Parses "tcp:HOST:PORT" or "ptcp:PORT[:HOST]" into a socket address.
 * HOST must be a numeric address: resolving names would block the loop.
 */
static int parse_endpoint(const char *endpoint, bool *passive, struct sockaddr_storage *ss,
                          int *sslen, char *err, size_t errlen)
{
	char buf[128];
	const char *rest, *colon;
	uint16_t port;
	struct sockaddr_in *sin;

	memset(ss, 0, sizeof(*ss));
	*sslen = sizeof(*ss);
	if (!endpoint)
		endpoint = "";
	if (strncmp(endpoint, "tcp:", 4) == 0) {
		*passive = false;
		rest = endpoint + 4;
		colon = strrchr(rest, ':');
		if (!colon || colon == rest || parse_port(colon + 1, strlen(colon + 1), &port) < 0)
			goto bad;
		snprintf(buf, sizeof(buf), "%s", rest);
	} else if (strncmp(endpoint, "ptcp:", 5) == 0) {
		*passive = true;
		rest = endpoint + 5;
		colon = strchr(rest, ':');
		if (parse_port(rest, colon ? (size_t)(colon - rest) : strlen(rest), &port) < 0)
			goto bad;
		if (!colon) {
			sin = (struct sockaddr_in *)ss;
			sin->sin_family = AF_INET;
			sin->sin_addr.s_addr = htonl(INADDR_ANY);
			sin->sin_port = htons(port);
			*sslen = sizeof(*sin);
			return 0;
		}
		colon++;
		if (strchr(colon, ':') && colon[0] != '[')
			snprintf(buf, sizeof(buf), "[%s]:%u", colon, port);
		else
			snprintf(buf, sizeof(buf), "%s:%u", colon, port);
	} else {
		goto bad;
	}
	if (strlen(endpoint) > 96 ||
	    evutil_parse_sockaddr_port(buf, (struct sockaddr *)ss, sslen) < 0)
		goto bad;
	/* "::1:6653" parses as an address without a port: IPv6 needs brackets */
	if (ss->ss_family == AF_INET6 ? ((struct sockaddr_in6 *)ss)->sin6_port != htons(port)
	                              : ((struct sockaddr_in *)ss)->sin_port != htons(port))
		goto bad;
	return 0;
bad:
	snprintf(err, errlen,
	         "openflow endpoint \"%s\": expected \"tcp:IP:PORT\" or \"ptcp:PORT[:IP]\" "
	         "with a numeric IP and a port in 1..65535",
	         endpoint);
	return -EINVAL;
}

static int of_check_endpoint(const char *endpoint, char *err, size_t errlen)
{
	struct sockaddr_storage ss;
	int sslen;
	bool passive;

	return parse_endpoint(endpoint, &passive, &ss, &sslen, err, errlen);
}

/* "1.2.3.4:5" or "[::1]:5" */
static void format_addr(const struct sockaddr *sa, char *buf, size_t len)
{
	char ip[INET6_ADDRSTRLEN] = "?";

	if (sa->sa_family == AF_INET6) {
		const struct sockaddr_in6 *sin6 = (const struct sockaddr_in6 *)sa;

		evutil_inet_ntop(AF_INET6, &sin6->sin6_addr, ip, sizeof(ip));
		snprintf(buf, len, "[%s]:%u", ip, ntohs(sin6->sin6_port));
	} else if (sa->sa_family == AF_INET) {
		const struct sockaddr_in *sin = (const struct sockaddr_in *)sa;

		evutil_inet_ntop(AF_INET, &sin->sin_addr, ip, sizeof(ip));
		snprintf(buf, len, "%s:%u", ip, ntohs(sin->sin_port));
	} else {
		snprintf(buf, len, "(unknown address family %d)", sa->sa_family);
	}
}

static void arm_ms(struct event *ev, uint32_t ms)
{
	struct timeval tv = { .tv_sec = ms / 1000, .tv_usec = (ms % 1000) * 1000 };

	evtimer_add(ev, &tv);
}

static void flows_reset(struct of_flows *f)
{
	free(f->v);
	f->v = NULL;
	f->n = f->cap = 0;
}

static int flows_push(struct of_flows *f, uint32_t in, uint32_t out)
{
	struct of_rflow *v;
	size_t cap;

	if (f->n == f->cap) {
		cap = f->cap ? f->cap * 2 : 256;
		v = realloc(f->v, cap * sizeof(*v));
		if (!v)
			return -ENOMEM;
		f->v = v;
		f->cap = cap;
	}
	f->v[f->n].in = in;
	f->v[f->n].out = out;
	f->n++;
	return 0;
}

static int rflow_cmp(const void *x, const void *y)
{
	const struct of_rflow *a = x, *b = y;

	if (a->in != b->in)
		return a->in < b->in ? -1 : 1;
	if (a->out != b->out)
		return a->out < b->out ? -1 : 1;
	return 0;
}

static void out_reset(struct of_unit *u);

static void unit_free(struct of_unit *u)
{
	out_reset(u);
	if (u->out)
		evbuffer_free(u->out);
	if (u->out_held)
		event_free(u->out_held);
	if (u->bev)
		bufferevent_free(u->bev);
	if (u->listener)
		evconnlistener_free(u->listener);
	if (u->retry_timer)
		event_free(u->retry_timer);
	if (u->keepalive)
		event_free(u->keepalive);
	free(u->batch);
	flows_reset(&u->ours);
	flows_reset(&u->foreign);
	free(u);
}

static void enter(struct of_unit *u)
{
	u->depth++;
}

/* Leaves a callback section; frees u when close() was called inside it. */
static void leave(struct of_unit *u)
{
	if (--u->depth == 0 && u->closed)
		unit_free(u);
}

static void report(struct of_unit *u, enum ocs_conn_state state, const char *err)
{
	if (!u->closed && u->ev.conn_state)
		u->ev.conn_state(u->ev.arg, state, err);
}

static void clear_op(struct of_unit *u)
{
	u->op = OF_OP_NONE;
	u->apply_cb = NULL;
	u->read_cb = NULL;
	u->op_arg = NULL;
	free(u->batch);
	u->batch = NULL;
	u->ndel = u->nxc = 0;
	u->nerrors = 0;
	flows_reset(&u->ours);
	flows_reset(&u->foreign);
}

/* Completes the operation in flight with an error; the caller holds enter(). */
static void fail_op(struct of_unit *u, int status, const char *err)
{
	enum of_op op = u->op;
	ocs_apply_cb acb = u->apply_cb;
	ocs_read_cb rcb = u->read_cb;
	void *arg = u->op_arg;

	clear_op(u);
	if (op == OF_OP_APPLY)
		acb(arg, status, err);
	else if (op == OF_OP_READ)
		rcb(arg, status, err, NULL);
}

/*
 * Ends the connection: completes the operation in flight with -ENOTCONN,
 * reports DOWN with reason and schedules what comes next. The caller holds
 * enter(); u may be closed on return.
 */
static void drop(struct of_unit *u, const char *reason)
{
	char msg[sizeof(u->err) + 32];

	out_reset(u);
	if (u->bev) {
		bufferevent_free(u->bev);
		u->bev = NULL;
	}
	evtimer_del(u->keepalive);
	u->state = OF_IDLE;
	u->misses = 0;
	if (!u->passive) {
		arm_ms(u->retry_timer, u->backoff_ms);
		u->backoff_ms =
		    u->backoff_ms * 2 > OF_BACKOFF_MAX_MS ? OF_BACKOFF_MAX_MS : u->backoff_ms * 2;
	}
	snprintf(msg, sizeof(msg), "connection lost: %s", reason);
	fail_op(u, -ENOTCONN, msg);
	report(u, OCS_CONN_DOWN, reason);
}

/* How long held bytes wait before may_send is asked again. */
#define OF_HOLD_MS 20

static void out_ready_cb(evutil_socket_t fd, short what, void *arg);

/*
 * Sends what out holds, when this daemon may send now (ocs_open_params'
 * may_send, asked right before the write): straight to the socket, so that
 * nothing held a moment ago goes out later unasked. What the socket does not
 * take waits for it to be writable and is asked about again then; what is
 * held is asked about again in OF_HOLD_MS (the daemon closes the instance
 * when it stops leading, which drops it).
 */
static void flush_out(struct of_unit *u)
{
	if (!u->bev || !evbuffer_get_length(u->out))
		return;
	if (u->may_send && !u->may_send(u->may_send_arg)) {
		arm_ms(u->out_held, OF_HOLD_MS);
		return;
	}
	evutil_socket_t fd = bufferevent_getfd(u->bev);
	if (evbuffer_write(u->out, fd) < 0 && errno != EAGAIN && errno != EWOULDBLOCK &&
	    errno != EINTR)
		return; /* the read side sees the connection fail */
	if (!evbuffer_get_length(u->out))
		return;
	if (u->out_ready && event_get_fd(u->out_ready) != fd) {
		event_free(u->out_ready);
		u->out_ready = NULL;
	}
	if (!u->out_ready)
		u->out_ready = event_new(u->base, fd, EV_WRITE, out_ready_cb, u);
	if (u->out_ready)
		event_add(u->out_ready, NULL);
}

static void out_ready_cb(evutil_socket_t fd, short what, void *arg)
{
	(void)fd;
	(void)what;
	flush_out(arg);
}

static void out_held_cb(evutil_socket_t fd, short what, void *arg)
{
	(void)fd;
	(void)what;
	flush_out(arg);
}

/* Forgets what was not sent (the connection is gone) and the events that would send it. */
static void out_reset(struct of_unit *u)
{
	if (u->out)
		evbuffer_drain(u->out, evbuffer_get_length(u->out));
	if (u->out_ready) {
		event_free(u->out_ready);
		u->out_ready = NULL;
	}
	if (u->out_held)
		evtimer_del(u->out_held);
}

static int send_bytes(struct of_unit *u, const void *buf, size_t len)
{
	if (evbuffer_add(u->out, buf, len) < 0)
		return -ENOMEM;
	flush_out(u);
	return 0;
}

static int send_simple(struct of_unit *u, uint8_t type, uint32_t xid, const void *body,
                       size_t body_len)
{
	uint8_t hdr[OF13_HDR_LEN];

	if (body_len > OF13_MAX_LEN - OF13_HDR_LEN)
		return -EMSGSIZE;
	of13_encode_header(hdr, sizeof(hdr), type, (uint16_t)(OF13_HDR_LEN + body_len), xid);
	if (evbuffer_add(u->out, hdr, sizeof(hdr)) < 0)
		return -ENOMEM;
	if (body_len && evbuffer_add(u->out, body, body_len) < 0)
		return -ENOMEM;
	flush_out(u);
	return 0;
}

static void keepalive_cb(evutil_socket_t fd, short what, void *arg)
{
	struct of_unit *u = arg;
	char reason[192];

	(void)fd;
	(void)what;
	enter(u);
	if (u->misses >= OF_KEEPALIVE_MISSES) {
		if (u->state == OF_CONNECTING)
			snprintf(reason, sizeof(reason), "connect to %s: timed out", u->addr_str);
		else
			snprintf(reason, sizeof(reason), "%s: no message from switch %s for %u ms",
			         u->state == OF_UP ? "keepalive" : "handshake", u->addr_str,
			         OF_KEEPALIVE_MISSES * OF_KEEPALIVE_MS);
		drop(u, reason);
		goto out;
	}
	u->misses++;
	if (u->state == OF_UP && send_simple(u, OF13_T_ECHO_REQUEST, u->next_xid++, NULL, 0) < 0) {
		drop(u, "out of memory");
		goto out;
	}
	arm_ms(u->keepalive, OF_KEEPALIVE_MS);
out:
	leave(u);
}

static void handle_hello(struct of_unit *u, const struct of13_hdr *h, const uint8_t *msg)
{
	uint32_t versions;
	uint8_t hello_failed[OF13_HDR_LEN + 64];
	static const char text[] = "ofcd supports OpenFlow 1.3 only";
	char reason[96];
	ssize_t n;

	if (u->state != OF_HELLO)
		return;
	if (of13_decode_hello(msg, h->length, &versions) < 0) {
		drop(u, "malformed HELLO");
		return;
	}
	if (!(versions & (1u << OF13_VERSION))) {
		n = of13_encode_error(hello_failed, sizeof(hello_failed), h->xid,
		                      OF13_ET_HELLO_FAILED, OF13_HFC_INCOMPATIBLE, text,
		                      sizeof(text) - 1);
		/*
		 * Best effort, straight to the socket: drop() discards what was
		 * not written. Only when our HELLO is out, to keep the order.
		 */
		if (n > 0 && !evbuffer_get_length(u->out) &&
		    (!u->may_send || u->may_send(u->may_send_arg)))
			send(bufferevent_getfd(u->bev), hello_failed, (size_t)n,
			     MSG_DONTWAIT | MSG_NOSIGNAL);
		snprintf(reason, sizeof(reason),
		         "version negotiation failed: switch supports versions 0x%08x, not 1.3",
		         versions);
		drop(u, reason);
		return;
	}
	if (send_simple(u, OF13_T_FEATURES_REQUEST, u->next_xid++, NULL, 0) < 0) {
		drop(u, "out of memory");
		return;
	}
	u->state = OF_FEATURES;
}

static void go_up(struct of_unit *u)
{
	u->state = OF_UP;
	u->backoff_ms = OF_BACKOFF_MIN_MS;
	report(u, OCS_CONN_UP, NULL);
}

static void handle_features(struct of_unit *u, const struct of13_hdr *h, const uint8_t *msg)
{
	struct of13_features f;

	if (u->state != OF_FEATURES)
		return;
	if (of13_decode_features_reply(msg, h->length, &f) < 0) {
		drop(u, "malformed FEATURES_REPLY");
		return;
	}
	if (u->generation) {
		uint8_t req[OF13_ROLE_LEN];

		u->role_xid = u->next_xid++;
		of13_encode_role_request(req, sizeof(req), u->role_xid, OF13_ROLE_MASTER,
		                         u->generation);
		if (send_bytes(u, req, sizeof(req)) < 0) {
			drop(u, "out of memory");
			return;
		}
		u->state = OF_ROLE;
		return;
	}
	go_up(u);
}

static void handle_role_reply(struct of_unit *u, const struct of13_hdr *h, const uint8_t *msg)
{
	uint32_t role;
	uint64_t gen;
	char reason[128];

	if (u->state != OF_ROLE || h->xid != u->role_xid)
		return;
	if (of13_decode_role_reply(msg, h->length, &role, &gen) < 0) {
		drop(u, "malformed ROLE_REPLY");
		return;
	}
	if (role != OF13_ROLE_MASTER) {
		snprintf(reason, sizeof(reason),
		         "switch answered ROLE_REQUEST MASTER with role %u: not master", role);
		drop(u, reason);
		return;
	}
	go_up(u);
}

/*
 * This connection is no longer master: the operation in flight fails with
 * -EPERM, then the connection ends so that nothing more is sent on it. The
 * caller holds enter().
 */
static void fence(struct of_unit *u, const char *why)
{
	char msg[sizeof(u->err)];

	snprintf(msg, sizeof(msg), "fenced: %s (master generation %llu)", why,
	         (unsigned long long)u->generation);
	/* not UP any more: an apply() from inside the callback gets -ENOTCONN */
	u->state = OF_IDLE;
	fail_op(u, -EPERM, msg);
	if (!u->closed)
		drop(u, msg);
}

static bool xid_in_op(const struct of_unit *u, uint32_t xid)
{
	/* unsigned arithmetic keeps the range right across xid wrap-around */
	return u->op != OF_OP_NONE && xid - u->op_xid <= u->op_last_xid - u->op_xid;
}

/* Describes the first error of a failed batch in u->err. */
static const char *batch_error(struct of_unit *u)
{
	char ename[96];
	uint32_t idx = u->err_xid - u->op_xid;
	/* Past the deletions, a barrier (see encode_batch) shifts the additions by one. */
	if (u->ndel && u->ndel < u->nxc && idx >= 2 * u->ndel)
		idx = idx == 2 * u->ndel ? UINT32_MAX : idx - 1;
	size_t xc = idx == UINT32_MAX ? u->nxc : idx / 2;
	const char *what = "batch";
	uint32_t in = 0, out = 0;
	int n;

	of13_error_str(u->err_type, u->err_code, ename, sizeof(ename));
	if (xc < u->nxc) {
		what = xc < u->ndel ? "delete" : "add";
		in = idx % 2 ? u->batch[xc].b : u->batch[xc].a;
		out = idx % 2 ? u->batch[xc].a : u->batch[xc].b;
		n = snprintf(u->err, sizeof(u->err), "%s %u-%u (flow in_port=%u output:%u): %s",
		             what, u->batch[xc].a, u->batch[xc].b, in, out, ename);
	} else {
		n = snprintf(u->err, sizeof(u->err), "%s (xid %u): %s", what, u->err_xid, ename);
	}
	if (u->nerrors > 1 && n > 0 && (size_t)n < sizeof(u->err))
		snprintf(u->err + n, sizeof(u->err) - (size_t)n, " (and %u more errors)",
		         u->nerrors - 1);
	return u->err;
}

static void handle_error(struct of_unit *u, const struct of13_hdr *h, const uint8_t *msg)
{
	struct of13_error e;
	char ename[96];
	char reason[160];

	if (of13_decode_error(msg, h->length, &e) < 0) {
		drop(u, "malformed ERROR");
		return;
	}
	if (u->state == OF_ROLE && e.type == OF13_ET_ROLE_REQUEST_FAILED &&
	    e.code == OF13_RRFC_STALE) {
		snprintf(reason, sizeof(reason), "%s than %llu", OF_FENCED_STALE,
		         (unsigned long long)u->generation);
		drop(u, reason);
		return;
	}
	if (u->state != OF_UP) {
		snprintf(reason, sizeof(reason), "switch refused the %s: %s",
		         u->state == OF_ROLE ? "role request MASTER" : "handshake",
		         of13_error_str(e.type, e.code, ename, sizeof(ename)));
		drop(u, reason);
		return;
	}
	/* whatever it answers: a SLAVE's changes are all refused (without a role, never SLAVE) */
	if (u->generation && e.type == OF13_ET_BAD_REQUEST && e.code == OF13_BRC_IS_SLAVE) {
		fence(u, "the switch refused a change, this controller is no longer master "
		         "(OFPBRC_IS_SLAVE)");
		return;
	}
	if (!xid_in_op(u, h->xid))
		return;
	if (!u->nerrors++) {
		u->err_xid = h->xid;
		u->err_type = e.type;
		u->err_code = e.code;
	}
	/* a refused read gets no reply: it ends here */
	if (u->op == OF_OP_READ) {
		snprintf(reason, sizeof(reason), "flow stats request refused: %s",
		         of13_error_str(e.type, e.code, ename, sizeof(ename)));
		fail_op(u, -EIO, reason);
	}
}

static void handle_barrier(struct of_unit *u, const struct of13_hdr *h)
{
	ocs_apply_cb cb = u->apply_cb;
	void *arg = u->op_arg;

	if (u->op != OF_OP_APPLY || h->xid != u->op_last_xid)
		return;
	if (u->nerrors) {
		fail_op(u, -EIO, batch_error(u));
		return;
	}
	clear_op(u);
	cb(arg, 0, NULL);
}

static bool is_circuit_half(const struct of_unit *u, const struct of13_flow_stats *fs)
{
	uint32_t a, b;

	if (fs->table_id != 0 || fs->priority != OF_PRIORITY || fs->other_match ||
	    fs->other_instr || fs->n_outputs != 1)
		return false;
	if (fs->in_port < 1 || fs->in_port > u->ports || fs->out_port < 1 ||
	    fs->out_port > u->ports || fs->in_port == fs->out_port)
		return false;
	a = fs->in_port < fs->out_port ? fs->in_port : fs->out_port;
	b = fs->in_port < fs->out_port ? fs->out_port : fs->in_port;
	return fs->cookie == circuit_cookie(a, b);
}

/* Pairs ofcd's flows into circuits and completes the read. */
static void finish_read(struct of_unit *u)
{
	struct ocs_readback rb = { 0 };
	struct ocs_xc *xcs = NULL;
	struct ocs_flow *partial = NULL, *foreign = NULL;
	struct of_flows *ours = &u->ours;
	ocs_read_cb cb = u->read_cb;
	void *arg = u->op_arg;
	size_t i, n = 0;

	/* one more entry each so that calloc never sees 0 */
	xcs = calloc(ours->n / 2 + 1, sizeof(*xcs));
	partial = calloc(ours->n + 1, sizeof(*partial));
	foreign = calloc(u->foreign.n + 1, sizeof(*foreign));
	if (!xcs || !partial || !foreign) {
		fail_op(u, -ENOMEM, "out of memory reading flows");
		goto out;
	}
	if (ours->n)
		qsort(ours->v, ours->n, sizeof(*ours->v), rflow_cmp);
	/*
	 * A table holds one flow per match and priority, but a reply may list one
	 * twice: counted twice, a circuit would overrun xcs (sized for n / 2).
	 */
	for (i = 0; i < ours->n; i++)
		if (!n || rflow_cmp(&ours->v[n - 1], &ours->v[i]) != 0)
			ours->v[n++] = ours->v[i];
	ours->n = n;
	for (i = 0; i < ours->n; i++) {
		struct of_rflow rev = { .in = ours->v[i].out, .out = ours->v[i].in };

		if (bsearch(&rev, ours->v, ours->n, sizeof(*ours->v), rflow_cmp)) {
			if (ours->v[i].in < ours->v[i].out) {
				xcs[rb.nxcs].a = ours->v[i].in;
				xcs[rb.nxcs].b = ours->v[i].out;
				rb.nxcs++;
			}
			continue;
		}
		partial[rb.npartial].in_port = ours->v[i].in;
		partial[rb.npartial].out_port = ours->v[i].out;
		rb.npartial++;
	}
	if (u->foreign.n)
		qsort(u->foreign.v, u->foreign.n, sizeof(*u->foreign.v), rflow_cmp);
	for (i = 0; i < u->foreign.n; i++) {
		foreign[i].in_port = u->foreign.v[i].in;
		foreign[i].out_port = u->foreign.v[i].out;
	}
	rb.nforeign = u->foreign.n;
	rb.xcs = xcs;
	rb.partial = partial;
	rb.foreign = foreign;
	clear_op(u);
	cb(arg, 0, NULL, &rb);
out:
	free(xcs);
	free(partial);
	free(foreign);
}

/* What a foreign entry's output means for isolation, in ocs_driver.h's terms. */
static uint32_t foreign_out(uint32_t port)
{
	if (port <= OF13_PORT_MAX)
		return port;
	if (port == OF13_PORT_CONTROLLER || port == OF13_PORT_LOCAL || port == OF13_PORT_IN_PORT)
		return 0; /* leaves through no other OCS port */
	return OCS_PORT_EVERY;
}

static void handle_multipart(struct of_unit *u, const struct of13_hdr *h, const uint8_t *msg)
{
	struct of13_multipart mp;
	struct of13_flow_iter it;
	struct of13_flow_stats fs;
	int r;

	if (of13_decode_multipart_reply(msg, h->length, &mp) < 0) {
		drop(u, "malformed MULTIPART_REPLY");
		return;
	}
	if (u->op != OF_OP_READ || h->xid != u->op_last_xid || mp.type != OF13_MP_FLOW)
		return;
	of13_flow_stats_iter(&it, mp.body, mp.body_len);
	while ((r = of13_flow_stats_next(&it, &fs)) > 0) {
		if (is_circuit_half(u, &fs)) {
			r = flows_push(&u->ours, fs.in_port, fs.out_port);
		} else if (fs.n_outputs <= 1) {
			r = flows_push(&u->foreign, fs.in_port, foreign_out(fs.out_port));
		} else if (fs.n_outputs > OF13_MAX_OUTPUTS) {
			/* More copies than we keep: report it as reaching every port. */
			r = flows_push(&u->foreign, fs.in_port, OCS_PORT_EVERY);
		} else {
			/* One entry per output: isolation is judged port pair by port pair. */
			r = 0;
			for (unsigned i = 0; i < fs.n_outputs && r == 0; i++)
				r = flows_push(&u->foreign, fs.in_port, foreign_out(fs.outputs[i]));
		}
		if (r < 0) {
			fail_op(u, r, "out of memory reading flows");
			return;
		}
	}
	if (r < 0) {
		drop(u, "malformed flow stats in MULTIPART_REPLY");
		return;
	}
	if (!(mp.flags & OF13_MPF_REPLY_MORE))
		finish_read(u);
}

static void handle_port_status(struct of_unit *u, const struct of13_hdr *h, const uint8_t *msg)
{
	struct of13_port_status ps;
	bool up;

	if (of13_decode_port_status(msg, h->length, &ps) < 0) {
		drop(u, "malformed PORT_STATUS");
		return;
	}
	if (ps.port_no < 1 || ps.port_no > u->ports || !u->ev.port_state)
		return;
	up = ps.reason != OF13_PR_DELETE && !(ps.config & OF13_PC_PORT_DOWN) &&
	     !(ps.state & OF13_PS_LINK_DOWN);
	u->ev.port_state(u->ev.arg, ps.port_no, up);
}

static void handle_experimenter(struct of_unit *u, const struct of13_hdr *h, const uint8_t *msg)
{
	struct of13_role_status rs;
	char why[160];
	int r;

	/* without a generation we asked for no role: experimenter messages stay ignored */
	if (!u->generation)
		return;
	r = of13_decode_role_status(msg, h->length, &rs);
	if (r == -ENOMSG)
		return;
	if (r < 0) {
		drop(u, "malformed ROLE_STATUS");
		return;
	}
	if (rs.role == OF13_ROLE_MASTER || u->state != OF_UP)
		return;
	snprintf(why, sizeof(why),
	         "the switch demoted this controller to %s (another became master with "
	         "generation %llu)",
	         rs.role == OF13_ROLE_SLAVE   ? "SLAVE"
	         : rs.role == OF13_ROLE_EQUAL ? "EQUAL"
	                                      : "?",
	         (unsigned long long)rs.generation_id);
	fence(u, why);
}

/* Handles one whole message; the caller holds enter(). */
static void handle_msg(struct of_unit *u, const struct of13_hdr *h, const uint8_t *msg)
{
	char reason[96];

	u->misses = 0;
	if (h->type == OF13_T_HELLO) {
		handle_hello(u, h, msg);
		return;
	}
	/* an ERROR during the handshake says why, whatever version it speaks */
	if (h->type == OF13_T_ERROR && u->state != OF_UP) {
		handle_error(u, h, msg);
		return;
	}
	if (u->state == OF_HELLO) {
		snprintf(reason, sizeof(reason), "message type %u before HELLO", h->type);
		drop(u, reason);
		return;
	}
	if (h->version != OF13_VERSION) {
		snprintf(reason, sizeof(reason),
		         "message with version 0x%02x after negotiating 1.3", h->version);
		drop(u, reason);
		return;
	}
	switch (h->type) {
	case OF13_T_ECHO_REQUEST:
		if (send_simple(u, OF13_T_ECHO_REPLY, h->xid, msg + OF13_HDR_LEN,
		                h->length - OF13_HDR_LEN) < 0)
			drop(u, "out of memory");
		break;
	case OF13_T_FEATURES_REPLY:
		handle_features(u, h, msg);
		break;
	case OF13_T_ERROR:
		handle_error(u, h, msg);
		break;
	case OF13_T_BARRIER_REPLY:
		handle_barrier(u, h);
		break;
	case OF13_T_MULTIPART_REPLY:
		handle_multipart(u, h, msg);
		break;
	case OF13_T_PORT_STATUS:
		handle_port_status(u, h, msg);
		break;
	case OF13_T_ROLE_REPLY:
		handle_role_reply(u, h, msg);
		break;
	case OF13_T_EXPERIMENTER:
		handle_experimenter(u, h, msg);
		break;
	default:
		/* ECHO_REPLY only proves liveness; PACKET_IN, FLOW_REMOVED etc. do not concern us
		 */
		break;
	}
}

static void read_cb(struct bufferevent *bev, void *arg)
{
	struct of_unit *u = arg;
	struct evbuffer *in = bufferevent_get_input(bev);
	uint8_t hdr[OF13_HDR_LEN];
	struct of13_hdr h;
	const uint8_t *msg;

	enter(u);
	while (!u->closed && u->bev == bev && evbuffer_get_length(in) >= OF13_HDR_LEN) {
		evbuffer_copyout(in, hdr, sizeof(hdr));
		if (of13_decode_header(hdr, sizeof(hdr), &h) < 0) {
			drop(u, "malformed message: length below 8 bytes");
			break;
		}
		if (evbuffer_get_length(in) < h.length)
			break;
		msg = evbuffer_pullup(in, h.length);
		if (!msg) {
			drop(u, "out of memory");
			break;
		}
		handle_msg(u, &h, msg);
		if (!u->closed && u->bev == bev)
			evbuffer_drain(in, h.length);
	}
	leave(u);
}

/* The TCP connection is up (either direction): start the handshake. */
static int start_handshake(struct of_unit *u)
{
	uint8_t hello[OF13_HELLO_LEN];
	evutil_socket_t fd = bufferevent_getfd(u->bev);
	int one = 1;

	/* small control messages (echo, barrier) must not wait for Nagle */
	setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
	u->state = OF_HELLO;
	u->misses = 0;
	arm_ms(u->keepalive, OF_KEEPALIVE_MS);
	of13_encode_hello(hello, sizeof(hello), u->next_xid++);
	return send_bytes(u, hello, sizeof(hello));
}

static void event_cb(struct bufferevent *bev, short what, void *arg)
{
	struct of_unit *u = arg;
	char reason[160];
	int e = EVUTIL_SOCKET_ERROR();

	(void)bev;
	enter(u);
	if (what & BEV_EVENT_CONNECTED) {
		if (start_handshake(u) < 0)
			drop(u, "out of memory");
		goto out;
	}
	if (what & BEV_EVENT_EOF) {
		snprintf(reason, sizeof(reason), "switch %s closed the connection", u->addr_str);
	} else if (u->state == OF_CONNECTING) {
		snprintf(reason, sizeof(reason), "connect to %s: %s", u->addr_str,
		         evutil_socket_error_to_string(e));
	} else {
		snprintf(reason, sizeof(reason), "connection to %s: %s", u->addr_str,
		         evutil_socket_error_to_string(e));
	}
	drop(u, reason);
out:
	leave(u);
}

static struct bufferevent *new_bev(struct of_unit *u, evutil_socket_t fd)
{
	struct bufferevent *bev;

	bev = bufferevent_socket_new(u->base, fd, BEV_OPT_CLOSE_ON_FREE);
	if (!bev)
		return NULL;
	bufferevent_setcb(bev, read_cb, NULL, event_cb, u);
	/* Writing too: the socket's connect completion comes as a write event. */
	bufferevent_enable(bev, EV_READ | EV_WRITE);
	return bev;
}

static void retry_cb(evutil_socket_t fd, short what, void *arg)
{
	struct of_unit *u = arg;
	char reason[160];

	(void)fd;
	(void)what;
	enter(u);
	if (u->passive) {
		/* the listener was paused after an accept error */
		evconnlistener_enable(u->listener);
		goto out;
	}
	u->bev = new_bev(u, -1);
	if (!u->bev) {
		drop(u, "out of memory");
		goto out;
	}
	u->state = OF_CONNECTING;
	/* the kernel would wait minutes for an unreachable host; the keepalive bounds it */
	u->misses = 0;
	arm_ms(u->keepalive, OF_KEEPALIVE_MS);
	report(u, OCS_CONN_CONNECTING, NULL);
	if (u->closed || u->state != OF_CONNECTING)
		goto out;
	if (bufferevent_socket_connect(u->bev, (struct sockaddr *)&u->addr, u->addrlen) < 0) {
		snprintf(reason, sizeof(reason), "connect to %s: %s", u->addr_str,
		         evutil_socket_error_to_string(EVUTIL_SOCKET_ERROR()));
		drop(u, reason);
	}
out:
	leave(u);
}

static void accept_cb(struct evconnlistener *lst, evutil_socket_t fd, struct sockaddr *sa,
                      int salen, void *arg)
{
	struct of_unit *u = arg;

	(void)lst;
	(void)salen;
	enter(u);
	if (u->bev) {
		/* one switch per unit: a second one is a misconfiguration */
		evutil_closesocket(fd);
		goto out;
	}
	u->bev = new_bev(u, fd);
	if (!u->bev) {
		evutil_closesocket(fd);
		goto out;
	}
	format_addr(sa, u->addr_str, sizeof(u->addr_str));
	u->state = OF_HELLO;
	report(u, OCS_CONN_CONNECTING, NULL);
	if (u->closed || u->state != OF_HELLO)
		goto out;
	if (start_handshake(u) < 0)
		drop(u, "out of memory");
out:
	leave(u);
}

static void accept_error_cb(struct evconnlistener *lst, void *arg)
{
	struct of_unit *u = arg;

	/* e.g. EMFILE: pause instead of spinning on a listener that stays readable */
	evconnlistener_disable(lst);
	arm_ms(u->retry_timer, OF_LISTEN_RETRY_MS);
}

static int of_open(struct event_base *base, const struct ocs_open_params *params,
                   const struct ocs_events *ev, struct ocs_handle **out, char *err, size_t errlen)
{
	struct of_unit *u;
	int r;

	u = calloc(1, sizeof(*u));
	if (!u) {
		snprintf(err, errlen, "openflow: out of memory");
		return -ENOMEM;
	}
	r = parse_endpoint(params->endpoint, &u->passive, &u->addr, &u->addrlen, err, errlen);
	if (r < 0)
		goto out;
	if (params->ports < 1 || params->ports > OF_MAX_PORTS) {
		snprintf(err, errlen, "openflow: ports must be 1..%u", OF_MAX_PORTS);
		r = -EINVAL;
		goto out;
	}
	u->base = base;
	if (ev)
		u->ev = *ev;
	u->ports = params->ports;
	u->generation = params->master_generation;
	u->may_send = params->may_send;
	u->may_send_arg = params->may_send_arg;
	u->backoff_ms = OF_BACKOFF_MIN_MS;
	u->next_xid = 1;
	format_addr((struct sockaddr *)&u->addr, u->addr_str, sizeof(u->addr_str));
	r = -ENOMEM;
	u->retry_timer = evtimer_new(base, retry_cb, u);
	u->keepalive = evtimer_new(base, keepalive_cb, u);
	u->out = evbuffer_new();
	u->out_held = evtimer_new(base, out_held_cb, u);
	if (!u->retry_timer || !u->keepalive || !u->out || !u->out_held) {
		snprintf(err, errlen, "openflow: out of memory");
		goto out;
	}
	if (u->passive) {
		u->listener = evconnlistener_new_bind(base, accept_cb, u,
		                                      LEV_OPT_CLOSE_ON_FREE | LEV_OPT_REUSEABLE |
		                                          LEV_OPT_CLOSE_ON_EXEC,
		                                      -1, (struct sockaddr *)&u->addr, u->addrlen);
		if (!u->listener) {
			r = -errno;
			if (r >= 0)
				r = -EIO;
			snprintf(err, errlen, "openflow: listen on %s: %s", params->endpoint,
			         strerror(-r));
			goto out;
		}
		evconnlistener_set_error_cb(u->listener, accept_error_cb);
	} else {
		/* the first attempt starts on the loop, so that CONNECTING is not reported here */
		arm_ms(u->retry_timer, 0);
	}
	*out = (struct ocs_handle *)u;
	return 0;
out:
	unit_free(u);
	return r;
}

static void of_close(struct ocs_handle *h)
{
	struct of_unit *u = to_unit(h);

	if (!u)
		return;
	u->closed = true;
	if (u->bev) {
		bufferevent_free(u->bev);
		u->bev = NULL;
	}
	if (u->listener) {
		evconnlistener_free(u->listener);
		u->listener = NULL;
	}
	evtimer_del(u->retry_timer);
	evtimer_del(u->keepalive);
	if (!u->depth)
		unit_free(u);
}

static int start_op(struct of_unit *u)
{
	if (u->closed)
		return -EINVAL;
	if (u->state != OF_UP)
		return -ENOTCONN;
	if (u->op != OF_OP_NONE)
		return -EBUSY;
	return 0;
}

static int check_batch(const struct of_unit *u, const struct ocs_xc *xcs, size_t n)
{
	size_t i;

	for (i = 0; i < n; i++) {
		if (xcs[i].a < 1 || xcs[i].a >= xcs[i].b || xcs[i].b > u->ports)
			return -EINVAL;
	}
	return 0;
}

static void encode_batch(uint8_t *p, uint32_t xid, const struct ocs_batch *batch)
{
	struct of13_flow f = { .table_id = 0, .priority = OF_PRIORITY, .cookie_mask = ~0ull };
	size_t i;

	for (i = 0; i < batch->ndel; i++) {
		f.cookie = circuit_cookie(batch->del[i].a, batch->del[i].b);
		f.in_port = batch->del[i].a;
		p += of13_encode_flow_del_strict(p, OF13_FLOW_DEL_LEN, xid++, &f);
		f.in_port = batch->del[i].b;
		p += of13_encode_flow_del_strict(p, OF13_FLOW_DEL_LEN, xid++, &f);
	}
	/*
	 * A switch may reorder messages no barrier separates: without this one an
	 * addition could reach a port before the deletion that frees it.
	 */
	if (batch->ndel && batch->nadd)
		p += of13_encode_msg(p, OF13_HDR_LEN, OF13_T_BARRIER_REQUEST, xid++, NULL, 0);
	for (i = 0; i < batch->nadd; i++) {
		f.cookie = circuit_cookie(batch->add[i].a, batch->add[i].b);
		f.in_port = batch->add[i].a;
		f.out_port = batch->add[i].b;
		p += of13_encode_flow_add(p, OF13_FLOW_ADD_LEN, xid++, &f);
		f.in_port = batch->add[i].b;
		f.out_port = batch->add[i].a;
		p += of13_encode_flow_add(p, OF13_FLOW_ADD_LEN, xid++, &f);
	}
	of13_encode_msg(p, OF13_HDR_LEN, OF13_T_BARRIER_REQUEST, xid, NULL, 0);
}

static int of_apply(struct ocs_handle *h, const struct ocs_batch *batch, ocs_apply_cb cb, void *arg)
{
	struct of_unit *u = to_unit(h);
	struct evbuffer *out;
	struct evbuffer_iovec vec;
	size_t nxc, nmsg, len, mid;
	struct ocs_xc *copy = NULL;
	int r;

	r = start_op(u);
	if (r < 0)
		return r;
	if (check_batch(u, batch->del, batch->ndel) < 0 ||
	    check_batch(u, batch->add, batch->nadd) < 0)
		return -EINVAL;
	nxc = batch->ndel + batch->nadd;
	mid = batch->ndel && batch->nadd;
	nmsg = 2 * nxc + 1 + mid;
	if (nmsg > UINT32_MAX / 2)
		return -E2BIG;
	copy = malloc((nxc + 1) * sizeof(*copy));
	if (!copy)
		return -ENOMEM;
	if (batch->ndel)
		memcpy(copy, batch->del, batch->ndel * sizeof(*copy));
	if (batch->nadd)
		memcpy(copy + batch->ndel, batch->add, batch->nadd * sizeof(*copy));
	len = 2 * batch->ndel * OF13_FLOW_DEL_LEN + 2 * batch->nadd * OF13_FLOW_ADD_LEN +
	      (1 + mid) * OF13_HDR_LEN;
	/* encode straight into the output buffer: one contiguous extent, no copy */
	out = u->out;
	if (evbuffer_reserve_space(out, (ev_ssize_t)len, &vec, 1) != 1 || vec.iov_len < len) {
		free(copy);
		return -ENOMEM;
	}
	encode_batch(vec.iov_base, u->next_xid, batch);
	vec.iov_len = len;
	if (evbuffer_commit_space(out, &vec, 1) < 0) {
		free(copy);
		return -ENOMEM;
	}
	u->op = OF_OP_APPLY;
	u->apply_cb = cb;
	u->op_arg = arg;
	u->op_xid = u->next_xid;
	u->op_last_xid = u->next_xid + (uint32_t)nmsg - 1;
	u->next_xid += (uint32_t)nmsg;
	u->batch = copy;
	u->ndel = batch->ndel;
	u->nxc = nxc;
	u->nerrors = 0;
	flush_out(u);
	return 0;
}

static int of_read(struct ocs_handle *h, ocs_read_cb cb, void *arg)
{
	struct of_unit *u = to_unit(h);
	uint8_t req[OF13_FLOW_STATS_REQUEST_LEN];
	int r;

	r = start_op(u);
	if (r < 0)
		return r;
	of13_encode_flow_stats_request(req, sizeof(req), u->next_xid);
	r = send_bytes(u, req, sizeof(req));
	if (r < 0)
		return r;
	u->op = OF_OP_READ;
	u->read_cb = cb;
	u->op_arg = arg;
	u->op_xid = u->op_last_xid = u->next_xid++;
	u->nerrors = 0;
	return 0;
}

const struct ocs_driver_ops ocs_openflow_driver = {
	.name = "openflow",
	.check_endpoint = of_check_endpoint,
	.open = of_open,
	.close = of_close,
	.apply = of_apply,
	.read = of_read,
	.inject = NULL,
};
