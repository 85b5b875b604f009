/*
 * The `sim` driver: an in-process OCS unit, the embedded default and the test
 * double of every layer above the drivers.
 *
 * Endpoint: "sim" or "sim:OPTION[,OPTION...]" with the options
 *   delay_ms=N   switching delay per batch in milliseconds (0..600000, default
 *                0; e.g. 10 to act like MEMS mirrors)
 * An empty or NULL endpoint means "sim".
 *
 * The unit holds a port -> peer table for ports 1..ports. A batch runs its
 * deletes then its adds, in order, when its switching delay has passed. Like a
 * real unit it refuses an add on a port that is out of range or already joined
 * to another port: the batch fails at that operation and the operations before
 * it stay applied. Deleting a circuit that does not exist and adding one that
 * already exists are no-ops (as OpenFlow delete-strict and add are). Reads
 * complete on the next loop iteration, without switching delay.
 *
 * Completion status of apply(): 0; -EINVAL (a >= b), -ERANGE (port out of
 * range), -EEXIST (port already joined elsewhere); -EIO (an injected
 * FAIL_BATCHES or PARTIAL fault); -ENOTCONN (an injected DISCONNECT).
 *
 * Faults (inject()):
 *   FAIL_BATCHES n  the next n batches fail with -EIO and change nothing
 *   PARTIAL n       the next batch applies its first n operations, then fails
 *                   with -EIO (an n at or above the batch size applies it all
 *                   and succeeds)
 *   DELAY ms        switching delay of the following batches
 *   SET_XC a b      joins a and b now, first breaking any circuit on either
 *   CLEAR_XC a b    breaks circuit a-b now (-ENOENT when it does not exist)
 *   DISCONNECT      the connection drops now: apply()/read() return -ENOTCONN
 *                   at once; on the next loop iteration the operation in
 *                   flight, if any, completes with -ENOTCONN (its batch not
 *                   applied), then conn_state(DOWN) is reported, and 100 ms
 *                   later conn_state(UP). So every accepted operation gets
 *                   exactly one completion, always before the DOWN event. The
 *                   circuits themselves survive, as the light paths of a real
 *                   unit survive a lost controller session.
 * The connection first comes UP on the loop iteration after open().
 *
 * open()'s master_generation is ignored: the simulated unit lives inside one
 * daemon, so no other controller can reach it and there is nobody to fence.
 */
#include "ocs_driver.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <event2/event.h>

#define SIM_MAX_PORTS       (1u << 20)
#define SIM_MAX_DELAY_MS    600000u
#define SIM_RECONNECT_MS    100
#define SIM_ENDPOINT_PREFIX "sim"

enum sim_op {
	SIM_OP_NONE = 0,
	SIM_OP_APPLY,
	SIM_OP_READ,
};

/* What the connection timer does when it fires. */
enum sim_conn_step {
	SIM_STEP_NONE = 0,
	SIM_STEP_UP,   /* report UP */
	SIM_STEP_DOWN, /* fail the operation in flight, report DOWN, schedule UP */
};

struct sim {
	struct ocs_events ev;
	uint32_t ports;
	uint32_t *peer; /* [ports + 1]; 0 when the port is free */
	uint32_t delay_ms;
	uint32_t fail_batches;
	uint32_t partial;
	bool partial_armed;
	bool up;

	enum sim_op op;
	ocs_apply_cb apply_cb;
	ocs_read_cb read_cb;
	void *op_arg;
	struct ocs_xc *ops; /* the batch: deletes then adds */
	size_t ndel;
	size_t nops;
	struct event *op_timer;

	enum sim_conn_step step;
	struct event *conn_timer;

	/* close() from inside one of our callbacks frees only when it unwinds */
	unsigned depth;
	bool closed;

	char err[160];
};

static struct sim *to_sim(struct ocs_handle *h)
{
	return (struct sim *)h;
}

static int parse_endpoint(const char *endpoint, uint32_t *delay_ms, char *err, size_t errlen)
{
	const char *p;
	size_t plen = strlen(SIM_ENDPOINT_PREFIX);

	*delay_ms = 0;
	if (!endpoint || !*endpoint)
		return 0;
	if (strncmp(endpoint, SIM_ENDPOINT_PREFIX, plen) != 0 ||
	    (endpoint[plen] != '\0' && endpoint[plen] != ':'))
		goto bad;
	p = endpoint + plen;
	if (!*p)
		return 0;
	if (!*++p)
		goto bad;
	while (*p) {
		const char *key = p;
		const char *end = strchr(p, ',');
		size_t klen;
		char *num_end;
		unsigned long v;

		if (!end)
			end = p + strlen(p);
		p = strchr(key, '=');
		if (!p || p > end)
			goto bad;
		klen = (size_t)(p - key);
		if (klen != strlen("delay_ms") || strncmp(key, "delay_ms", klen) != 0) {
			snprintf(err, errlen, "sim endpoint \"%s\": unknown option \"%.*s\"",
			         endpoint, (int)klen, key);
			return -EINVAL;
		}
		p++;
		if (*p < '0' || *p > '9')
			goto bad;
		errno = 0;
		v = strtoul(p, &num_end, 10);
		if (errno || num_end != end || v > SIM_MAX_DELAY_MS) {
			snprintf(err, errlen, "sim endpoint \"%s\": delay_ms must be 0..%u",
			         endpoint, SIM_MAX_DELAY_MS);
			return -EINVAL;
		}
		*delay_ms = (uint32_t)v;
		p = *end ? end + 1 : end;
		if (*end && !*p)
			goto bad;
	}
	return 0;
bad:
	snprintf(err, errlen, "sim endpoint \"%s\": expected \"sim\" or \"sim:delay_ms=N\"",
	         endpoint);
	return -EINVAL;
}

static int sim_check_endpoint(const char *endpoint, char *err, size_t errlen)
{
	uint32_t delay_ms;

	return parse_endpoint(endpoint, &delay_ms, err, errlen);
}

static void arm_ms(struct event *ev, uint32_t ms)
{
	struct timeval tv = { .tv_sec = ms / 1000, .tv_usec = (ms % 1000) * 1000 };

	evtimer_add(ev, &tv);
}

static void sim_free(struct sim *s)
{
	if (s->op_timer)
		event_free(s->op_timer);
	if (s->conn_timer)
		event_free(s->conn_timer);
	free(s->ops);
	free(s->peer);
	free(s);
}

/* Leaves a callback section; frees s when close() was called inside it. */
static void sim_leave(struct sim *s)
{
	if (--s->depth == 0 && s->closed)
		sim_free(s);
}

static void take_op(struct sim *s, enum sim_op *op, ocs_apply_cb *acb, ocs_read_cb *rcb, void **arg)
{
	*op = s->op;
	*acb = s->apply_cb;
	*rcb = s->read_cb;
	*arg = s->op_arg;
	s->op = SIM_OP_NONE;
	s->apply_cb = NULL;
	s->read_cb = NULL;
	s->op_arg = NULL;
	free(s->ops);
	s->ops = NULL;
	s->ndel = s->nops = 0;
}

static void unjoin(struct sim *s, uint32_t port)
{
	uint32_t peer = s->peer[port];

	if (peer) {
		s->peer[peer] = 0;
		s->peer[port] = 0;
	}
}

/* Runs one operation of the batch; returns 0 or -errno with s->err set. */
static int run_op(struct sim *s, bool add, const struct ocs_xc *xc)
{
	const char *what = add ? "add" : "delete";

	if (xc->a >= xc->b) {
		snprintf(s->err, sizeof(s->err), "%s %u-%u: ports must satisfy a < b", what, xc->a,
		         xc->b);
		return -EINVAL;
	}
	if (xc->a < 1 || xc->b > s->ports) {
		snprintf(s->err, sizeof(s->err), "%s %u-%u: port out of range 1..%u", what, xc->a,
		         xc->b, s->ports);
		return -ERANGE;
	}
	if (!add) {
		if (s->peer[xc->a] == xc->b)
			unjoin(s, xc->a);
		return 0;
	}
	if (s->peer[xc->a] == xc->b)
		return 0;
	if (s->peer[xc->a] || s->peer[xc->b]) {
		uint32_t port = s->peer[xc->a] ? xc->a : xc->b;

		snprintf(s->err, sizeof(s->err), "add %u-%u: port %u already joined to port %u",
		         xc->a, xc->b, port, s->peer[port]);
		return -EEXIST;
	}
	s->peer[xc->a] = xc->b;
	s->peer[xc->b] = xc->a;
	return 0;
}

static int run_batch(struct sim *s)
{
	size_t limit = s->nops;
	size_t i;
	int r;

	if (s->fail_batches) {
		s->fail_batches--;
		snprintf(s->err, sizeof(s->err), "injected fault: batch refused");
		return -EIO;
	}
	if (s->partial_armed) {
		s->partial_armed = false;
		if (s->partial < limit)
			limit = s->partial;
	}
	for (i = 0; i < limit; i++) {
		r = run_op(s, i >= s->ndel, &s->ops[i]);
		if (r < 0)
			return r;
	}
	if (limit < s->nops) {
		snprintf(s->err, sizeof(s->err),
		         "injected fault: partial batch, %zu of %zu operations applied", limit,
		         s->nops);
		return -EIO;
	}
	return 0;
}

static void complete_read(struct sim *s, ocs_read_cb cb, void *arg)
{
	/* sim circuits are always whole, but callers may copy from the arrays */
	static const struct ocs_flow none[1];
	struct ocs_readback rb = { .partial = none, .foreign = none };
	struct ocs_xc *xcs;
	uint32_t p;

	/* at most ports / 2 circuits; one more so that calloc never sees 0 */
	xcs = calloc(s->ports / 2 + 1, sizeof(*xcs));
	if (!xcs) {
		cb(arg, -ENOMEM, "sim: out of memory", NULL);
		return;
	}
	for (p = 1; p <= s->ports; p++) {
		if (s->peer[p] > p) {
			xcs[rb.nxcs].a = p;
			xcs[rb.nxcs].b = s->peer[p];
			rb.nxcs++;
		}
	}
	rb.xcs = xcs;
	cb(arg, 0, NULL, &rb);
	free(xcs);
}

static void op_timer_cb(evutil_socket_t fd, short what, void *arg)
{
	struct sim *s = arg;
	enum sim_op op;
	ocs_apply_cb acb;
	ocs_read_cb rcb;
	void *cb_arg;
	int r = 0;

	(void)fd;
	(void)what;
	if (s->op == SIM_OP_APPLY)
		r = run_batch(s);
	take_op(s, &op, &acb, &rcb, &cb_arg);
	s->depth++;
	if (op == SIM_OP_APPLY)
		acb(cb_arg, r, r < 0 ? s->err : NULL);
	else if (op == SIM_OP_READ)
		complete_read(s, rcb, cb_arg);
	sim_leave(s);
}

static void conn_timer_cb(evutil_socket_t fd, short what, void *arg)
{
	struct sim *s = arg;
	enum sim_conn_step step = s->step;
	enum sim_op op;
	ocs_apply_cb acb;
	ocs_read_cb rcb;
	void *cb_arg;

	(void)fd;
	(void)what;
	s->step = SIM_STEP_NONE;
	s->depth++;
	if (step == SIM_STEP_UP) {
		s->up = true;
		if (s->ev.conn_state)
			s->ev.conn_state(s->ev.arg, OCS_CONN_UP, NULL);
	} else if (step == SIM_STEP_DOWN) {
		s->step = SIM_STEP_UP;
		arm_ms(s->conn_timer, SIM_RECONNECT_MS);
		take_op(s, &op, &acb, &rcb, &cb_arg);
		if (op == SIM_OP_APPLY)
			acb(cb_arg, -ENOTCONN, "injected fault: disconnected");
		else if (op == SIM_OP_READ)
			rcb(cb_arg, -ENOTCONN, "injected fault: disconnected", NULL);
		if (!s->closed && s->ev.conn_state)
			s->ev.conn_state(s->ev.arg, OCS_CONN_DOWN, "injected fault: disconnected");
	}
	sim_leave(s);
}

static int sim_open(struct event_base *base, const struct ocs_open_params *params,
                    const struct ocs_events *ev, struct ocs_handle **out, char *err, size_t errlen)
{
	struct sim *s = NULL;
	uint32_t delay_ms;
	int r;

	r = parse_endpoint(params->endpoint, &delay_ms, err, errlen);
	if (r < 0)
		goto out;
	if (params->ports < 1 || params->ports > SIM_MAX_PORTS) {
		snprintf(err, errlen, "sim: ports must be 1..%u", SIM_MAX_PORTS);
		r = -EINVAL;
		goto out;
	}
	r = -ENOMEM;
	s = calloc(1, sizeof(*s));
	if (!s)
		goto nomem;
	s->peer = calloc((size_t)params->ports + 1, sizeof(*s->peer));
	s->op_timer = evtimer_new(base, op_timer_cb, s);
	s->conn_timer = evtimer_new(base, conn_timer_cb, s);
	if (!s->peer || !s->op_timer || !s->conn_timer)
		goto nomem;
	if (ev)
		s->ev = *ev;
	s->ports = params->ports;
	s->delay_ms = delay_ms;
	s->step = SIM_STEP_UP;
	arm_ms(s->conn_timer, 0);
	*out = (struct ocs_handle *)s;
	s = NULL;
	r = 0;
	goto out;
nomem:
	snprintf(err, errlen, "sim: out of memory");
out:
	if (s)
		sim_free(s);
	return r;
}

static void sim_close(struct ocs_handle *h)
{
	struct sim *s = to_sim(h);

	if (!s)
		return;
	s->closed = true;
	evtimer_del(s->op_timer);
	evtimer_del(s->conn_timer);
	if (!s->depth)
		sim_free(s);
}

static int start_op(struct sim *s)
{
	if (s->closed)
		return -EINVAL;
	if (!s->up)
		return -ENOTCONN;
	if (s->op != SIM_OP_NONE)
		return -EBUSY;
	return 0;
}

static int sim_apply(struct ocs_handle *h, const struct ocs_batch *batch, ocs_apply_cb cb,
                     void *arg)
{
	struct sim *s = to_sim(h);
	size_t n;
	int r;

	r = start_op(s);
	if (r < 0)
		return r;
	n = batch->ndel + batch->nadd;
	/* one more entry so that an empty batch still gets a distinct allocation */
	s->ops = malloc((n + 1) * sizeof(*s->ops));
	if (!s->ops)
		return -ENOMEM;
	if (batch->ndel)
		memcpy(s->ops, batch->del, batch->ndel * sizeof(*s->ops));
	if (batch->nadd)
		memcpy(s->ops + batch->ndel, batch->add, batch->nadd * sizeof(*s->ops));
	s->ndel = batch->ndel;
	s->nops = n;
	s->op = SIM_OP_APPLY;
	s->apply_cb = cb;
	s->op_arg = arg;
	arm_ms(s->op_timer, s->delay_ms);
	return 0;
}

static int sim_read(struct ocs_handle *h, ocs_read_cb cb, void *arg)
{
	struct sim *s = to_sim(h);
	int r;

	r = start_op(s);
	if (r < 0)
		return r;
	s->op = SIM_OP_READ;
	s->read_cb = cb;
	s->op_arg = arg;
	arm_ms(s->op_timer, 0);
	return 0;
}

static int check_xc(const struct sim *s, uint32_t *a, uint32_t *b)
{
	uint32_t t;

	if (*a > *b) {
		t = *a;
		*a = *b;
		*b = t;
	}
	if (*a == *b)
		return -EINVAL;
	if (*a < 1 || *b > s->ports)
		return -ERANGE;
	return 0;
}

static void inject_disconnect(struct sim *s)
{
	if (s->step == SIM_STEP_DOWN)
		return;
	if (!s->up) {
		/* not up yet: only push the coming UP further out */
		s->step = SIM_STEP_UP;
		arm_ms(s->conn_timer, SIM_RECONNECT_MS);
		return;
	}
	s->up = false;
	/* the batch in flight is not applied; it completes with -ENOTCONN */
	evtimer_del(s->op_timer);
	s->step = SIM_STEP_DOWN;
	arm_ms(s->conn_timer, 0);
}

static int sim_inject(struct ocs_handle *h, const struct ocs_fault *fault)
{
	struct sim *s = to_sim(h);
	uint32_t a = fault->a, b = fault->b;
	int r;

	switch (fault->kind) {
	case OCS_FAULT_FAIL_BATCHES:
		s->fail_batches = fault->count;
		return 0;
	case OCS_FAULT_DISCONNECT:
		inject_disconnect(s);
		return 0;
	case OCS_FAULT_PARTIAL:
		s->partial = fault->count;
		s->partial_armed = true;
		return 0;
	case OCS_FAULT_SET_XC:
		r = check_xc(s, &a, &b);
		if (r < 0)
			return r;
		unjoin(s, a);
		unjoin(s, b);
		s->peer[a] = b;
		s->peer[b] = a;
		return 0;
	case OCS_FAULT_CLEAR_XC:
		r = check_xc(s, &a, &b);
		if (r < 0)
			return r;
		if (s->peer[a] != b)
			return -ENOENT;
		unjoin(s, a);
		return 0;
	case OCS_FAULT_DELAY:
		if (fault->count > SIM_MAX_DELAY_MS)
			return -EINVAL;
		s->delay_ms = fault->count;
		return 0;
	}
	return -EINVAL;
}

const struct ocs_driver_ops ocs_sim_driver = {
	.name = "sim",
	.check_endpoint = sim_check_endpoint,
	.open = sim_open,
	.close = sim_close,
	.apply = sim_apply,
	.read = sim_read,
	.inject = sim_inject,
};
