/*
 * Pricing and selection of the transmission method between two pipeline
 * stages. docs/cost-model.md derives each formula from document 000
 * [0169]-[0172]; the comments here only say why a choice was made.
 */
#include <errno.h>
#include <stddef.h>

#include "cost.h"

/*
 * Relative tolerance under which two predicted times are a tie: the same cost
 * reached through different sums of doubles must not be decided by rounding.
 */
#define TIE_REL 1e-12

/* Microseconds per byte at g Gb/s: 8 bits / (g * 1000 bits per us). */
static double us_per_byte(double gbps)
{
	return 8e-3 / gbps;
}

static double max2(double a, double b)
{
	return a > b ? a : b;
}

/* a is cheaper than b beyond rounding noise. Both are >= 0. */
static bool cheaper(double a, double b)
{
	return a < b - b * TIE_REL;
}

/* One server as the in-server formulas see it. */
struct side {
	unsigned n;     /* devices */
	unsigned local; /* devices in the circuit device's group, itself included */
	unsigned far;   /* devices in the other group (0 in a full mesh) */
	double a;       /* intra latency, us */
	double ki;      /* us per byte on one mesh link */
	double kb;      /* us per byte through the bridge */
	double ksw;     /* us per byte through the in-server switch (method 4) */
};

static void side_init(struct side *s, const struct cost_server *srv, const struct cost_params *p)
{
	s->n = srv->devices;
	s->a = p->intra_latency_us;
	s->ki = us_per_byte(p->intra_gbps);
	s->kb = us_per_byte(p->bridge_gbps);
	if (srv->intra == COST_INTRA_TWO_GROUPS) {
		unsigned half = srv->devices / 2;

		s->local = srv->circuit_device < half ? half : srv->devices - half;
		s->far = srv->devices - s->local;
		s->ksw = s->kb;
	} else {
		s->local = srv->devices;
		s->far = 0;
		/* A full mesh has no bridge: its switch path runs at the link rate. */
		s->ksw = s->ki;
	}
}

/*
 * Time for x bytes per peer to move between the circuit device and all its
 * peers at once, latency aside: each local peer on its own link, the far
 * group sharing the bridge.
 */
static double bus(const struct side *s, double x)
{
	double t = s->local > 1 ? x * s->ki : 0;

	if (s->far)
		t = max2(t, s->far * x * s->kb);
	return t;
}

/* allgather onto / scatter from the circuit device, x bytes per peer. */
static double spread(const struct side *s, double x)
{
	return s->a + bus(s, x);
}

/*
 * Broadcast of x bytes from the circuit device. Across the bridge the data
 * crosses once and a far device rebroadcasts it, rather than crossing once
 * per far device.
 */
static double bcast(const struct side *s, double x)
{
	double t = s->local > 1 ? s->a + x * s->ki : 0;

	if (s->far)
		t = max2(t, s->a + x * s->kb + (s->far > 1 ? s->a + x * s->ki : 0));
	return t;
}

/*
 * Every device broadcasts its own x bytes to every other device. Each group's
 * chunks cross the bridge once (the bridge is full duplex, both directions at
 * once) and are rebroadcast inside the other group.
 */
static double allbcast(const struct side *s, double x)
{
	double t = s->local > 1 ? s->a + x * s->ki : 0;

	if (s->far) {
		t = max2(t, s->a + s->far * x * s->kb +
		                (s->local > 1 ? s->a + s->far * x * s->ki : 0));
		t = max2(t, s->a + s->local * x * s->kb +
		                (s->far > 1 ? s->a + s->local * x * s->ki : 0));
	}
	return t;
}

/* Method 4's in-server hops: all peers' x bytes through the circuit device's switch port. */
static double switched(const struct side *s, double x)
{
	return s->a + (s->n - 1) * x * s->ksw;
}

static void add_step(struct cost_candidate *c, enum cost_scope scope, enum cost_op op, double bytes,
                     double us)
{
	struct cost_step *st = &c->steps[c->n_steps++];

	st->scope = scope;
	st->op = op;
	st->bytes = bytes;
	st->us = us;
	c->predicted_us += us;
}

static void candidate_init(struct cost_candidate *c, enum cost_method m, bool costed, bool eligible,
                           const char *reason)
{
	c->method = m;
	c->costed = costed;
	c->eligible = eligible;
	c->reason = reason;
	c->predicted_us = 0;
	c->n_steps = 0;
}

/* What every priced method between two servers shares. */
struct pair {
	struct side src;
	struct side dst;
	double d;     /* bytes per source device */
	double total; /* bytes methods 2-4 carry over the circuit */
	double share; /* bytes of that total each target device receives */
	double ae;    /* inter latency, us */
	double ke;    /* us per byte on the circuit */
};

static void price_send_broadcast(const struct pair *p, struct cost_candidate *c)
{
	add_step(c, COST_SCOPE_INTER, COST_OP_SEND, p->d, p->ae + p->d * p->ke);
	if (p->dst.n > 1)
		add_step(c, COST_SCOPE_TARGET, COST_OP_BROADCAST, p->d, bcast(&p->dst, p->d));
}

/*
 * p2p-relay streams: every device's data flows from its memory through src, the circuit and
 * dst into its target's memory, a stream paying the read delay r when it leaves a peer of src
 * and the write delay w when it enters a peer of dst. Streams are grouped by those two hops,
 * [read][write]: how many there are and the bytes they carry (a stream of no bytes still pays
 * its latency).
 */
struct streams {
	double count[2][2];
	double bytes[2][2];
};

/* What a path lets through: the latest start of a stream plus all bytes starting no earlier. */
static double drained(const struct streams *st, double ae, double r, double w, double k)
{
	const double lat[2][2] = { { ae, ae + w }, { ae + r, ae + r + w } };
	double t = 0;

	for (int i = 0; i < 4; i++) {
		double after = 0;

		if (st->count[i / 2][i % 2] <= 0)
			continue;
		for (int j = 0; j < 4; j++)
			if (lat[j / 2][j % 2] >= lat[i / 2][i % 2])
				after += st->bytes[j / 2][j % 2];
		t = max2(t, lat[i / 2][i % 2] + after * k);
	}
	return t;
}

/*
 * With as many devices on both sides, device d's D goes to device d: the streams of n device
 * indices, among them src's (read-free) and dst's (write-free) as said; one index may be both.
 */
static struct streams paired(double d, unsigned n, bool has_src, bool has_dst, bool same_index)
{
	struct streams st;
	unsigned both = has_src && same_index;
	unsigned src_only = has_src && !same_index, dst_only = has_dst && !same_index;

	st.count[0][0] = both;
	st.count[0][1] = src_only;
	st.count[1][0] = dst_only;
	st.count[1][1] = n - both - src_only - dst_only;
	for (int i = 0; i < 4; i++)
		st.bytes[i / 2][i % 2] = st.count[i / 2][i % 2] * d;
	return st;
}

/* Otherwise each of ns source devices shares its D equally among nt target devices. */
static struct streams shared(double piece, unsigned ns, bool has_src, unsigned nt, bool has_dst)
{
	struct streams st;
	double x[2] = { has_src, ns - (double)has_src }, y[2] = { has_dst, nt - (double)has_dst };

	for (int a = 0; a < 2; a++)
		for (int b = 0; b < 2; b++) {
			st.count[a][b] = x[a] * y[b];
			st.bytes[a][b] = piece * st.count[a][b];
		}
	return st;
}

/* Index i of a server whose circuit device is c sits across the bridge from c. */
static bool across(const struct side *sd, unsigned c, unsigned i)
{
	return sd->far && i < sd->n && (i < sd->n / 2) != (c < sd->n / 2);
}

/*
 * A local peer of circuit device c that is not index o, if there is one: it streams with hops
 * at both ends.
 */
static bool peer_besides(const struct side *sd, unsigned c, unsigned o)
{
	return sd->local - 1 > (o != c && o < sd->n && !across(sd, c, o));
}

/*
 * When every stream is through: the latest of what each path lets through (the circuit; the
 * in-server link of the slowest peer of src and of dst; the bridge each far group shares). With
 * w 0, what the reads alone would take.
 */
static double p2p_through(const struct pair *p, unsigned cs, unsigned ct, double r, double w)
{
	const struct side *s = &p->src, *t = &p->dst;
	bool cp = s->n == t->n, same = cs == ct;
	double piece = p->d / t->n, end;
	struct streams st;

	st = cp ? paired(p->d, s->n, true, ct < s->n, same) : shared(piece, s->n, true, t->n, true);
	end = drained(&st, p->ae, r, w, p->ke);
	if (s->local > 1) {
		st = cp ? paired(p->d, 1, false, !peer_besides(s, cs, ct), same)
		        : shared(piece, 1, false, t->n, true);
		end = max2(end, drained(&st, p->ae, r, w, s->ki));
	}
	if (s->far) {
		st = cp ? paired(p->d, s->far, false, across(s, cs, ct), same)
		        : shared(piece, s->far, false, t->n, true);
		end = max2(end, drained(&st, p->ae, r, w, s->kb));
	}
	if (t->local > 1) {
		st = cp ? paired(p->d, 1, !peer_besides(t, ct, cs), false, same)
		        : shared(piece, s->n, true, 1, false);
		end = max2(end, drained(&st, p->ae, r, w, t->ki));
	}
	if (t->far) {
		st = cp ? paired(p->d, t->far, across(t, ct, cs), false, same)
		        : shared(piece, s->n, true, t->far, false);
		end = max2(end, drained(&st, p->ae, r, w, t->kb));
	}
	return end;
}

/*
 * src's NIC streams its peers' memory straight onto the circuit, so the bytes are paid once,
 * at the circuit rate, while src's own data keeps the circuit busy during the reads and writes
 * of the others. What the streams take beyond the circuit's alpha_e + P k_e is charged to the
 * read step as far as the reads alone cause it, the rest to the write step.
 */
static void price_p2p_relay(const struct pair *p, const struct cost_request *req,
                            struct cost_candidate *c)
{
	const struct cost_params *prm = &req->params;
	double send = p->ae + p->total * p->ke;
	unsigned cs = req->source.circuit_device, ct = req->target.circuit_device;
	double all = p2p_through(p, cs, ct, prm->p2p_read_us, prm->p2p_write_us);
	double read = max2(0, p2p_through(p, cs, ct, prm->p2p_read_us, 0) - send);

	if (p->src.n > 1)
		add_step(c, COST_SCOPE_SOURCE, COST_OP_P2P_RECV, p->total - p->d, read);
	add_step(c, COST_SCOPE_INTER, COST_OP_SEND, p->total, send);
	if (p->dst.n > 1)
		add_step(c, COST_SCOPE_TARGET, COST_OP_P2P_SEND, p->total - p->share,
		         max2(0, all - send - read));
}

static void price_allgather_send_scatter(const struct pair *p, struct cost_candidate *c)
{
	if (p->src.n > 1)
		add_step(c, COST_SCOPE_SOURCE, COST_OP_ALLGATHER, p->total - p->d,
		         spread(&p->src, p->d));
	add_step(c, COST_SCOPE_INTER, COST_OP_SEND, p->total, p->ae + p->total * p->ke);
	if (p->dst.n > 1)
		add_step(c, COST_SCOPE_TARGET, COST_OP_SCATTER, p->total - p->share,
		         spread(&p->dst, p->share));
}

static void price_switch_relay(const struct pair *p, struct cost_candidate *c)
{
	if (p->src.n > 1)
		add_step(c, COST_SCOPE_SOURCE, COST_OP_SEND, p->total - p->d,
		         switched(&p->src, p->d));
	add_step(c, COST_SCOPE_INTER, COST_OP_SEND, p->total, p->ae + p->total * p->ke);
	if (p->dst.n > 1)
		add_step(c, COST_SCOPE_TARGET, COST_OP_SEND, p->total - p->share,
		         switched(&p->dst, p->share));
}

static const char *p2p_reason(bool src, bool dst)
{
	if (src && dst)
		return "both servers have P2P";
	if (src)
		return "target server lacks P2P";
	if (dst)
		return "source server lacks P2P";
	return "neither server has P2P";
}

static void price_two_servers(const struct cost_request *req, struct cost_candidate *cand)
{
	const struct cost_params *prm = &req->params;
	bool same_data = req->aggregation != COST_AGG_NONE;
	bool p2p = req->source.p2p && req->target.p2p;
	struct pair p;

	side_init(&p.src, &req->source, prm);
	side_init(&p.dst, &req->target, prm);
	p.d = req->bytes;
	/* Methods 2-4 do not exploit identical data: they carry every device's D. */
	p.total = req->source.devices * req->bytes;
	p.share = p.total / req->target.devices;
	p.ae = prm->inter_latency_us;
	p.ke = us_per_byte(prm->inter_gbps);

	candidate_init(&cand[COST_METHOD_INTRA_SERVER], COST_METHOD_INTRA_SERVER, false, false,
	               "stages on two servers");
	candidate_init(&cand[COST_METHOD_SEND_BROADCAST], COST_METHOD_SEND_BROADCAST, true,
	               same_data,
	               same_data ? "every source device holds the same data (allreduce/allgather)"
	                         : "source devices hold different data: one send would lose it");
	price_send_broadcast(&p, &cand[COST_METHOD_SEND_BROADCAST]);
	candidate_init(&cand[COST_METHOD_P2P_RELAY], COST_METHOD_P2P_RELAY, true, p2p,
	               p2p_reason(req->source.p2p, req->target.p2p));
	price_p2p_relay(&p, req, &cand[COST_METHOD_P2P_RELAY]);
	candidate_init(&cand[COST_METHOD_ALLGATHER_SEND_SCATTER],
	               COST_METHOD_ALLGATHER_SEND_SCATTER, true, true, "always eligible");
	price_allgather_send_scatter(&p, &cand[COST_METHOD_ALLGATHER_SEND_SCATTER]);
	candidate_init(&cand[COST_METHOD_SWITCH_RELAY], COST_METHOD_SWITCH_RELAY, true, true,
	               "always eligible");
	price_switch_relay(&p, &cand[COST_METHOD_SWITCH_RELAY]);
}

static void price_one_server(const struct cost_request *req, struct cost_candidate *cand)
{
	struct cost_candidate *c = &cand[COST_METHOD_INTRA_SERVER];
	struct side s;
	unsigned m;

	side_init(&s, &req->source, &req->params);
	candidate_init(c, COST_METHOD_INTRA_SERVER, true, true,
	               "both stages on one server (second processing manner)");
	if (s.n > 1) {
		/* Identical copies need one broadcast, as in method 1. */
		if (req->aggregation != COST_AGG_NONE)
			add_step(c, COST_SCOPE_SOURCE, COST_OP_BROADCAST, req->bytes,
			         bcast(&s, req->bytes));
		else
			add_step(c, COST_SCOPE_SOURCE, COST_OP_BROADCAST, s.n * req->bytes,
			         allbcast(&s, req->bytes));
	}
	for (m = COST_METHOD_SEND_BROADCAST; m < COST_METHOD_COUNT; m++)
		candidate_init(&cand[m], (enum cost_method)m, false, false,
		               "both stages on one server: no circuit between them");
}

/* S1801-S1807 of document 000, branch by branch. */
static enum cost_method select_patent(const struct cost_request *req,
                                      const struct cost_candidate *cand, const char **rule)
{
	if (req->aggregation != COST_AGG_NONE) {
		*rule = "S1801->S1802: aggregation is all-reduce-like";
		return COST_METHOD_SEND_BROADCAST;
	}
	if (req->source.p2p && req->target.p2p) {
		*rule = "S1803->S1804: both servers have P2P";
		return COST_METHOD_P2P_RELAY;
	}
	if (cheaper(cand[COST_METHOD_SWITCH_RELAY].predicted_us,
	            cand[COST_METHOD_ALLGATHER_SEND_SCATTER].predicted_us)) {
		*rule = "S1805->S1806: method 3 costs more than method 4";
		return COST_METHOD_SWITCH_RELAY;
	}
	*rule = "S1805->S1807: method 3 costs no more than method 4";
	return COST_METHOD_ALLGATHER_SEND_SCATTER;
}

static bool tied(const struct cost_candidate *a, const struct cost_candidate *b)
{
	return !cheaper(a->predicted_us, b->predicted_us) &&
	       !cheaper(b->predicted_us, a->predicted_us);
}

/* Cheapest eligible; ties to fewer steps, then to the lower method id. */
static enum cost_method select_min_cost(const struct cost_candidate *cand, const char **rule)
{
	unsigned best = COST_METHOD_COUNT, m, eligible = 0;
	bool tie_steps = false, tie_id = false;

	for (m = 0; m < COST_METHOD_COUNT; m++) {
		const struct cost_candidate *c = &cand[m];

		if (!c->eligible)
			continue;
		eligible++;
		if (best == COST_METHOD_COUNT ||
		    cheaper(c->predicted_us, cand[best].predicted_us) ||
		    (tied(c, &cand[best]) && c->n_steps < cand[best].n_steps))
			best = m;
	}
	for (m = 0; m < COST_METHOD_COUNT; m++) {
		if (m == best || !cand[m].eligible || !tied(&cand[m], &cand[best]))
			continue;
		if (cand[m].n_steps == cand[best].n_steps)
			tie_id = true;
		else
			tie_steps = true;
	}
	if (eligible == 1)
		*rule = "only eligible method";
	else if (tie_id)
		*rule = "cheapest eligible method; tie on cost and steps: lower method id";
	else if (tie_steps)
		*rule = "cheapest eligible method; tie on cost: fewer steps";
	else
		*rule = "cheapest eligible method";
	return (enum cost_method)best;
}

enum cost_op cost_op_adjoint(enum cost_op op)
{
	switch (op) {
	case COST_OP_SEND:
		return COST_OP_SEND;
	case COST_OP_BROADCAST:
		return COST_OP_REDUCE;
	case COST_OP_REDUCE:
		return COST_OP_BROADCAST;
	case COST_OP_GATHER:
		return COST_OP_SCATTER;
	case COST_OP_SCATTER:
		return COST_OP_GATHER;
	case COST_OP_ALLGATHER:
		return COST_OP_REDUCE_SCATTER;
	case COST_OP_REDUCE_SCATTER:
		return COST_OP_ALLGATHER;
	case COST_OP_P2P_RECV:
		return COST_OP_P2P_SEND;
	case COST_OP_P2P_SEND:
		return COST_OP_P2P_RECV;
	}
	return op;
}

int cost_select(const struct cost_request *req, struct cost_selection *out, const char **bad_field)
{
	const struct cost_candidate *chosen;
	unsigned i, n;
	int rc;

	rc = cost_request_validate(req, bad_field);
	if (rc)
		return rc;

	if (req->same_server) {
		price_one_server(req, out->candidates);
		out->method = COST_METHOD_INTRA_SERVER;
		out->rule = "second processing manner: both stages on one server";
	} else {
		price_two_servers(req, out->candidates);
		if (req->policy == COST_POLICY_PATENT)
			out->method = select_patent(req, out->candidates, &out->rule);
		else
			out->method = select_min_cost(out->candidates, &out->rule);
	}
	out->policy = req->policy;

	chosen = &out->candidates[out->method];
	out->predicted_us = chosen->predicted_us;
	n = chosen->n_steps;
	out->n_operators = n;
	for (i = 0; i < n; i++) {
		const struct cost_step *fwd = &chosen->steps[i];
		const struct cost_step *back = &chosen->steps[n - 1 - i];

		out->operators[i].op = fwd->op;
		out->operators[i].scope = fwd->scope;
		out->reverse_operators[i].op = cost_op_adjoint(back->op);
		out->reverse_operators[i].scope = back->scope;
	}
	return 0;
}
