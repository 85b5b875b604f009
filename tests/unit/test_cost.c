/*
 * Unit tests of the transmission-method cost model (planner/cost.h).
 *
 * Hand-computed cases use round parameters so that the arithmetic can be
 * checked on paper (H below):
 *   inter 8 Gb/s    -> ke = 8e-3 / 8  = 0.001  us/byte, alpha_e = 10 us
 *   intra 16 Gb/s   -> ki = 8e-3 / 16 = 0.0005 us/byte, alpha_i = 1 us
 *   bridge 4 Gb/s   -> kb = 8e-3 / 4  = 0.002  us/byte
 *   p2p read 3 us, p2p write 2 us, D = 1000 bytes:
 *   D*ke = 1, D*ki = 0.5, D*kb = 2.
 * TG8 is a two-groups server of 8 (groups of G = 4), FM8 a full mesh of 8.
 */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "cost.h"

#define EPS 1e-9
#define NC  -1.0 /* not costed */

static struct cost_params hand_params(void)
{
	return (struct cost_params){
		.inter_gbps = 8,
		.inter_latency_us = 10,
		.intra_gbps = 16,
		.intra_latency_us = 1,
		.bridge_gbps = 4,
		.p2p_read_us = 3,
		.p2p_write_us = 2,
	};
}

static struct cost_server fm(unsigned n, bool p2p)
{
	return (struct cost_server){ .devices = n, .p2p = p2p, .intra = COST_INTRA_FULL_MESH };
}

static struct cost_server tg(unsigned n, unsigned c, bool p2p)
{
	return (struct cost_server){
		.devices = n, .p2p = p2p, .intra = COST_INTRA_TWO_GROUPS, .circuit_device = c
	};
}

static struct cost_request hand_request(enum cost_aggregation agg, struct cost_server s,
                                        struct cost_server t)
{
	return (struct cost_request){
		.aggregation = agg,
		.bytes = 1000,
		.source = s,
		.target = t,
		.policy = COST_POLICY_MIN_COST,
		.params = hand_params(),
	};
}

static struct cost_selection select_ok(const struct cost_request *req)
{
	struct cost_selection sel;
	const char *bad = NULL;

	assert_int_equal(cost_select(req, &sel, &bad), 0);
	assert_null(bad);
	return sel;
}

/* ---- hand-computed cases --------------------------------------------------- */

struct hand_case {
	const char *name;
	struct cost_request req;
	double us[COST_METHOD_COUNT]; /* predicted_us per method id, NC if not costed */
	unsigned steps[COST_METHOD_COUNT];
	enum cost_method min_cost;
	enum cost_method patent;
};

static struct cost_request with_bridge(struct cost_request r, double gbps)
{
	r.params.bridge_gbps = gbps;
	return r;
}

static struct cost_request with_p2p_delays(struct cost_request r, double rd, double wr, double d)
{
	r.params.p2p_read_us = rd;
	r.params.p2p_write_us = wr;
	r.bytes = d;
	return r;
}

static struct cost_request same_server(enum cost_aggregation agg, struct cost_server s)
{
	struct cost_request r = hand_request(agg, s, s);

	r.same_server = true;
	r.target = (struct cost_server){ 0 }; /* ignored */
	return r;
}

static void test_hand_cases(void **state)
{
	const struct hand_case cases[] = {
		{
		    /*
		     * m1: send 10+1 = 11; bcast over FM: 1+0.5 = 1.5 -> 12.5
		     * m2: P = 8000, circuit 8. Device 0 (src = dst = 0) streams at 10,
		     *     the 7 others at 10 + 3 + 2 = 15 (read and write):
		     *     max(10 + 8, 15 + 7) = 22 (send 18, read 3 - 1 = 2, write 2)
		     * m3: allgather 1+0.5; send 18; scatter 1+0.5 -> 21
		     * m4: switch 1 + 7*1000*0.0005 = 4.5, twice, + 18 -> 27
		     */
		    "FM8->FM8 allreduce, no P2P",
		    hand_request(COST_AGG_ALLREDUCE, fm(8, false), fm(8, false)),
		    { NC, 12.5, 22, 21, 27 },
		    { 0, 2, 3, 3, 3 },
		    COST_METHOD_SEND_BROADCAST,
		    COST_METHOD_SEND_BROADCAST,
		},
		{
		    /* Same prices; S1804 takes m2 (22) though m3 (21) is cheaper. */
		    "FM8->FM8 none, both P2P",
		    hand_request(COST_AGG_NONE, fm(8, true), fm(8, true)),
		    { NC, 12.5, 22, 21, 27 },
		    { 0, 2, 3, 3, 3 },
		    COST_METHOD_ALLGATHER_SEND_SCATTER,
		    COST_METHOD_P2P_RELAY,
		},
		{
		    /*
		     * local = far = 4.
		     * m1: 11 + max(1+0.5, 1+2 + 1+0.5) = 11 + 4.5 = 15.5
		     * m2: device 1 streams at 10 + 2 (write), device 5 at 10 + 3
		     *     (read), the 6 others at 15: circuit max(12 + 8, 13 + 7,
		     *     15 + 6) = 21; the far group {4..7} on the bridge max(13 +
		     *     4*2, 15 + 3*2) = 21; into dst's far group {0..3}
		     *     max(12 + 8, 15 + 6) = 21 -> 21
		     * m3: allgather 1 + max(0.5, 8) = 9; 18; scatter 9 -> 36
		     * m4: switch 1 + 7*2 = 15; 18; 15 -> 48
		     */
		    "TG8(c=1)->TG8(c=5) none, no P2P",
		    hand_request(COST_AGG_NONE, tg(8, 1, false), tg(8, 5, false)),
		    { NC, 15.5, 21, 36, 48 },
		    { 0, 2, 3, 3, 3 },
		    COST_METHOD_ALLGATHER_SEND_SCATTER,
		    COST_METHOD_ALLGATHER_SEND_SCATTER,
		},
		{
		    /*
		     * bridge 2 Gb/s: kb = 0.004, D*kb = 4.
		     * m1: 11 + max(1.5, 1+4 + 1+0.5 = 6.5) = 17.5
		     * m2: device 7 streams at 13 (read), 1..6 at 15, 0 at 12
		     *     (write): src's far group {4..7} drains its bridge at
		     *     max(13 + 16, 15 + 12) = 29, dst's {0..3} at max(12 + 16,
		     *     15 + 12) = 28 -> 29, all of it the reads'
		     *     (read 11, send 18, write 0)
		     * m3: 1 + max(0.5, 16) = 17; 18; 17 -> 52
		     * m4: 1 + 7*4 = 29; 18; 29 -> 76
		     */
		    "TG8->TG8 none, both P2P, slow bridge",
		    with_bridge(hand_request(COST_AGG_NONE, tg(8, 0, true), tg(8, 7, true)), 2),
		    { NC, 17.5, 29, 52, 76 },
		    { 0, 2, 3, 3, 3 },
		    COST_METHOD_P2P_RELAY,
		    COST_METHOD_P2P_RELAY,
		},
		{
		    /*
		     * m1: 11 + FM bcast 1.5 = 12.5
		     * m2: device 6 streams at 12, 0 at 13, the others at 15:
		     *     max(12 + 8, 13 + 7, 15 + 6) = 21; src's far group {0..3}
		     *     max(13 + 8, 15 + 6) = 21 -> 21
		     * m3: TG allgather 9; 18; FM scatter 1.5 -> 28.5
		     * m4: TG switch 15; 18; FM switch 4.5 -> 37.5
		     */
		    "TG8->FM8 allgather",
		    hand_request(COST_AGG_ALLGATHER, tg(8, 6, false), fm(8, false)),
		    { NC, 12.5, 21, 28.5, 37.5 },
		    { 0, 2, 3, 3, 3 },
		    COST_METHOD_SEND_BROADCAST,
		    COST_METHOD_SEND_BROADCAST,
		},
		{
		    /* One device each side: every method is one send, 10+1 = 11. */
		    "FM1->FM1 none",
		    hand_request(COST_AGG_NONE, fm(1, false), fm(1, false)),
		    { NC, 11, 11, 11, 11 },
		    { 0, 1, 1, 1, 1 },
		    COST_METHOD_ALLGATHER_SEND_SCATTER,
		    COST_METHOD_ALLGATHER_SEND_SCATTER,
		},
		{
		    /*
		     * Groups of one: local = 1, far = 1; P = 2000, circuit 2.
		     * m1: 11 + (1 + 2) = 14
		     * m2: device 0 streams at 12 (write), 1 at 13 (read), each
		     *     alone on its side of the bridge: 13 + 2 = 15
		     * m3: 1 + 2 = 3; 12; 3 -> 18
		     * m4: 1 + 1*2 = 3; 12; 3 -> 18 (tie with m3: lower id)
		     */
		    "TG2(c=0)->TG2(c=1) none",
		    hand_request(COST_AGG_NONE, tg(2, 0, false), tg(2, 1, false)),
		    { NC, 14, 15, 18, 18 },
		    { 0, 2, 3, 3, 3 },
		    COST_METHOD_ALLGATHER_SEND_SCATTER,
		    COST_METHOD_ALLGATHER_SEND_SCATTER,
		},
		{
		    /*
		     * P = 8000 over 4 target devices: share 2000.
		     * m1: 11 + 1.5 = 12.5
		     * m2: each source device's 1000 in 4 streams of 250: 250 at
		     *     10, 750 at 12 (write), 1750 at 13 (read), 5250 at 15:
		     *     max(18, 12 + 7.75, 13 + 7, 15 + 5.25) = 20.25
		     * m3: 1.5 + 18 + (1 + 2000*0.0005 = 2) -> 21.5
		     * m4: 4.5 + 18 + (1 + 3*2000*0.0005 = 4) -> 26.5
		     */
		    "FM8->FM4 none",
		    hand_request(COST_AGG_NONE, fm(8, false), fm(4, false)),
		    { NC, 12.5, 20.25, 21.5, 26.5 },
		    { 0, 2, 3, 3, 3 },
		    COST_METHOD_ALLGATHER_SEND_SCATTER,
		    COST_METHOD_ALLGATHER_SEND_SCATTER,
		},
		{
		    /*
		     * bridge 100: kb = 8e-5.
		     * m3 in-server: 1 + max(0.5, 4*1000*8e-5 = 0.32) = 1.5 -> 21
		     * m4 in-server: 1 + 7*1000*8e-5 = 1.56 -> 21.12
		     * m1: 11 + max(1.5, 1+0.08 + 1+0.5) = 11 + 2.58 = 13.58
		     * m2: as FM8->FM8: 22
		     */
		    "crossover below: TG8 bridge 100",
		    with_bridge(hand_request(COST_AGG_NONE, tg(8, 2, false), tg(8, 2, false)), 100),
		    { NC, 13.58, 22, 21, 21.12 },
		    { 0, 2, 3, 3, 3 },
		    COST_METHOD_ALLGATHER_SEND_SCATTER,
		    COST_METHOD_ALLGATHER_SEND_SCATTER,
		},
		{
		    /*
		     * bridge 112 = 7 * intra: 7*1000*8e-3/112 = 0.5, m3 = m4 = 21:
		     * both policies keep m3 (S1807 on equality, lower id).
		     * m1: 11 + 1 + 1000*8e-3/112 + 1.5 = 13.5 + 1/14
		     */
		    "crossover at: TG8 bridge 112",
		    with_bridge(hand_request(COST_AGG_NONE, tg(8, 2, false), tg(8, 2, false)), 112),
		    { NC, 13.5 + 1.0 / 14, 22, 21, 21 },
		    { 0, 2, 3, 3, 3 },
		    COST_METHOD_ALLGATHER_SEND_SCATTER,
		    COST_METHOD_ALLGATHER_SEND_SCATTER,
		},
		{
		    /*
		     * bridge 120: kb = 1/15000, 7000*kb = 0.4667.
		     * m3: 1.5 twice + 18 = 21; m4: 1.4667 twice + 18 = 20.9333
		     * m1: 11 + 1 + 1/15 + 1.5 = 13.5667
		     */
		    "crossover above: TG8 bridge 120",
		    with_bridge(hand_request(COST_AGG_NONE, tg(8, 2, false), tg(8, 2, false)), 120),
		    { NC, 13.5 + 1.0 / 15, 22, 21, 18 + 2 * (1 + 7.0 / 15) },
		    { 0, 2, 3, 3, 3 },
		    COST_METHOD_SWITCH_RELAY,
		    COST_METHOD_SWITCH_RELAY,
		},
		{
		    /*
		     * D = 0 leaves the latencies: m1 10 + (1 + 1) = 12;
		     * m2: a stream of no bytes still pays 10 + 0.5 + 0.5 = 11;
		     * m3 = m4 = 1 + 10 + 1 = 12.
		     * The patent's S1802 takes m1; min-cost takes m2.
		     */
		    "TG8 allreduce, tiny data, fast P2P",
		    with_p2p_delays(
		        hand_request(COST_AGG_ALLREDUCE, tg(8, 0, true), tg(8, 0, true)), 0.5, 0.5,
		        0),
		    { NC, 12, 11, 12, 12 },
		    { 0, 2, 3, 3, 3 },
		    COST_METHOD_P2P_RELAY,
		    COST_METHOD_SEND_BROADCAST,
		},
		{
		    /* One broadcast of D over the mesh: 1 + 0.5. */
		    "same server FM8 allreduce",
		    same_server(COST_AGG_ALLREDUCE, fm(8, false)),
		    { 1.5, NC, NC, NC, NC },
		    { 1, 0, 0, 0, 0 },
		    COST_METHOD_INTRA_SERVER,
		    COST_METHOD_INTRA_SERVER,
		},
		{
		    /* Every device broadcasts over the mesh at once: 1 + 0.5. */
		    "same server FM8 none",
		    same_server(COST_AGG_NONE, fm(8, false)),
		    { 1.5, NC, NC, NC, NC },
		    { 1, 0, 0, 0, 0 },
		    COST_METHOD_INTRA_SERVER,
		    COST_METHOD_INTRA_SERVER,
		},
		{
		    /*
		     * Each group's 4 chunks cross the bridge (1 + 4*2) and are
		     * rebroadcast in the other group (1 + 4*0.5): 12.
		     */
		    "same server TG8 none",
		    same_server(COST_AGG_NONE, tg(8, 3, false)),
		    { 12, NC, NC, NC, NC },
		    { 1, 0, 0, 0, 0 },
		    COST_METHOD_INTRA_SERVER,
		    COST_METHOD_INTRA_SERVER,
		},
		{
		    /* Broadcast crosses once, then rebroadcasts: 1+2 + 1+0.5. */
		    "same server TG8 allgather",
		    same_server(COST_AGG_ALLGATHER, tg(8, 3, false)),
		    { 4.5, NC, NC, NC, NC },
		    { 1, 0, 0, 0, 0 },
		    COST_METHOD_INTRA_SERVER,
		    COST_METHOD_INTRA_SERVER,
		},
		{
		    /* Nobody to broadcast to. */
		    "same server FM1",
		    same_server(COST_AGG_NONE, fm(1, false)),
		    { 0, NC, NC, NC, NC },
		    { 0, 0, 0, 0, 0 },
		    COST_METHOD_INTRA_SERVER,
		    COST_METHOD_INTRA_SERVER,
		},
	};
	size_t i;
	unsigned m;

	(void)state;
	for (i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		const struct hand_case *hc = &cases[i];
		struct cost_request req = hc->req;
		struct cost_selection sel;

		print_message("  %s\n", hc->name);
		sel = select_ok(&req);
		for (m = 0; m < COST_METHOD_COUNT; m++) {
			const struct cost_candidate *c = &sel.candidates[m];

			assert_int_equal(c->method, m);
			assert_int_equal(c->costed, hc->us[m] != NC);
			assert_int_equal(c->n_steps, hc->steps[m]);
			if (c->costed)
				assert_float_equal(c->predicted_us, hc->us[m], EPS);
			else
				assert_float_equal(c->predicted_us, 0, 0);
			assert_non_null(c->reason);
		}
		assert_int_equal(sel.method, hc->min_cost);
		assert_int_equal(sel.policy, COST_POLICY_MIN_COST);
		assert_float_equal(sel.predicted_us, hc->us[hc->min_cost], EPS);

		req.policy = COST_POLICY_PATENT;
		sel = select_ok(&req);
		assert_int_equal(sel.method, hc->patent);
		assert_int_equal(sel.policy, COST_POLICY_PATENT);
		assert_float_equal(sel.predicted_us, hc->us[hc->patent], EPS);
	}
}

/* ---- step detail ------------------------------------------------------------ */

struct step_case {
	const char *name;
	struct cost_request req;
	enum cost_method method;
	unsigned n;
	const char *ops[COST_MAX_STEPS];
	double bytes[COST_MAX_STEPS];
	double us[COST_MAX_STEPS];
};

static void test_steps(void **state)
{
	const struct step_case cases[] = {
		{
		    /*
		     * Every device's share stays where it is: 7 * 1000 move. The bridge
		     * out of src's far group decides: reads.
		     */
		    "p2p-relay over a slow bridge",
		    with_bridge(hand_request(COST_AGG_NONE, tg(8, 0, true), tg(8, 7, true)), 2),
		    COST_METHOD_P2P_RELAY,
		    3,
		    { "p2p-recv@source", "send@inter", "p2p-send@target" },
		    { 7000, 8000, 7000 },
		    { 11, 18, 0 },
		},
		{
		    /*
		     * src's own 1000 keeps the circuit busy for 1 µs of the 3 µs read:
		     * read 3 - 1 = 2; the write of 2 starts after it: write 2.
		     */
		    "p2p-relay: the circuit device's own data hides the reads",
		    hand_request(COST_AGG_NONE, fm(8, true), fm(8, true)),
		    COST_METHOD_P2P_RELAY,
		    3,
		    { "p2p-recv@source", "send@inter", "p2p-send@target" },
		    { 7000, 8000, 7000 },
		    { 2, 18, 2 },
		},
		{
		    /* D*ke = 4 covers both delays: max(10 + 32, 15 + 28) - 42 = 1. */
		    "p2p-relay: large data hides all but 1 µs",
		    with_p2p_delays(hand_request(COST_AGG_NONE, fm(8, true), fm(8, true)), 3, 2,
		                    4000),
		    COST_METHOD_P2P_RELAY,
		    3,
		    { "p2p-recv@source", "send@inter", "p2p-send@target" },
		    { 28000, 32000, 28000 },
		    { 0, 42, 1 },
		},
		{
		    "send-broadcast into a two-groups server",
		    hand_request(COST_AGG_ALLREDUCE, fm(8, false), tg(8, 4, false)),
		    COST_METHOD_SEND_BROADCAST,
		    2,
		    { "send@inter", "broadcast@target" },
		    { 1000, 1000 },
		    { 11, 4.5 },
		},
		{
		    "allgather-send-scatter into fewer devices",
		    hand_request(COST_AGG_NONE, fm(8, false), fm(4, false)),
		    COST_METHOD_ALLGATHER_SEND_SCATTER,
		    3,
		    { "allgather@source", "send@inter", "scatter@target" },
		    { 7000, 8000, 6000 },
		    { 1.5, 18, 2 },
		},
		{
		    "switch-relay through the bridge",
		    hand_request(COST_AGG_NONE, tg(8, 1, false), tg(8, 5, false)),
		    COST_METHOD_SWITCH_RELAY,
		    3,
		    { "send@source", "send@inter", "send@target" },
		    { 7000, 8000, 7000 },
		    { 15, 18, 15 },
		},
		{
		    "intra-server, distinct data",
		    same_server(COST_AGG_NONE, tg(8, 3, false)),
		    COST_METHOD_INTRA_SERVER,
		    1,
		    { "broadcast@source" },
		    { 8000 },
		    { 12 },
		},
	};
	size_t i;
	unsigned s;

	(void)state;
	for (i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		const struct step_case *sc = &cases[i];
		struct cost_selection sel = select_ok(&sc->req);
		const struct cost_candidate *c = &sel.candidates[sc->method];

		print_message("  %s\n", sc->name);
		assert_int_equal(c->n_steps, sc->n);
		for (s = 0; s < sc->n; s++) {
			const struct cost_step *st = &c->steps[s];

			assert_string_equal(cost_operator_name(st->op, st->scope), sc->ops[s]);
			assert_float_equal(st->bytes, sc->bytes[s], EPS);
			assert_float_equal(st->us, sc->us[s], EPS);
		}
	}
}

/* ---- the patent's decision flow, branch by branch --------------------------- */

struct flow_case {
	const char *name;
	struct cost_request req;
	enum cost_method method;
	const char *rule;
};

static void test_patent_flow(void **state)
{
	const struct flow_case cases[] = {
		{ "S1802 allreduce", hand_request(COST_AGG_ALLREDUCE, fm(8, true), fm(8, true)),
		  COST_METHOD_SEND_BROADCAST, "S1801->S1802: aggregation is all-reduce-like" },
		{ "S1802 allgather",
		  hand_request(COST_AGG_ALLGATHER, tg(8, 0, false), tg(8, 0, false)),
		  COST_METHOD_SEND_BROADCAST, "S1801->S1802: aggregation is all-reduce-like" },
		{ "S1804 both P2P", hand_request(COST_AGG_NONE, tg(8, 0, true), fm(8, true)),
		  COST_METHOD_P2P_RELAY, "S1803->S1804: both servers have P2P" },
		{ "S1805 source P2P only", hand_request(COST_AGG_NONE, fm(8, true), fm(8, false)),
		  COST_METHOD_ALLGATHER_SEND_SCATTER,
		  "S1805->S1807: method 3 costs no more than method 4" },
		{ "S1805 target P2P only", hand_request(COST_AGG_NONE, fm(8, false), fm(8, true)),
		  COST_METHOD_ALLGATHER_SEND_SCATTER,
		  "S1805->S1807: method 3 costs no more than method 4" },
		{ "S1806 fast bridge",
		  with_bridge(hand_request(COST_AGG_NONE, tg(8, 0, false), tg(8, 0, false)), 1000),
		  COST_METHOD_SWITCH_RELAY, "S1805->S1806: method 3 costs more than method 4" },
		{ "S1807 slow bridge",
		  with_bridge(hand_request(COST_AGG_NONE, tg(8, 0, false), tg(8, 0, false)), 10),
		  COST_METHOD_ALLGATHER_SEND_SCATTER,
		  "S1805->S1807: method 3 costs no more than method 4" },
		{ "same server", same_server(COST_AGG_NONE, fm(8, true)), COST_METHOD_INTRA_SERVER,
		  "second processing manner: both stages on one server" },
	};
	size_t i;

	(void)state;
	for (i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		struct cost_request req = cases[i].req;
		struct cost_selection sel;

		print_message("  %s\n", cases[i].name);
		req.policy = COST_POLICY_PATENT;
		sel = select_ok(&req);
		assert_int_equal(sel.method, cases[i].method);
		assert_string_equal(sel.rule, cases[i].rule);
		assert_true(sel.candidates[sel.method].eligible);
	}
}

/* Eligibility and its reasons, every candidate reported. */
static void test_eligibility(void **state)
{
	struct cost_request req = hand_request(COST_AGG_NONE, fm(8, true), fm(8, false));
	struct cost_selection sel;

	(void)state;
	sel = select_ok(&req);
	assert_false(sel.candidates[COST_METHOD_INTRA_SERVER].costed);
	assert_false(sel.candidates[COST_METHOD_INTRA_SERVER].eligible);
	assert_false(sel.candidates[COST_METHOD_SEND_BROADCAST].eligible);
	assert_true(sel.candidates[COST_METHOD_SEND_BROADCAST].costed);
	assert_false(sel.candidates[COST_METHOD_P2P_RELAY].eligible);
	assert_string_equal(sel.candidates[COST_METHOD_P2P_RELAY].reason,
	                    "target server lacks P2P");
	assert_true(sel.candidates[COST_METHOD_ALLGATHER_SEND_SCATTER].eligible);
	assert_true(sel.candidates[COST_METHOD_SWITCH_RELAY].eligible);

	req.source.p2p = false;
	req.target.p2p = true;
	sel = select_ok(&req);
	assert_string_equal(sel.candidates[COST_METHOD_P2P_RELAY].reason,
	                    "source server lacks P2P");
	req.target.p2p = false;
	sel = select_ok(&req);
	assert_string_equal(sel.candidates[COST_METHOD_P2P_RELAY].reason, "neither server has P2P");

	req.aggregation = COST_AGG_ALLGATHER;
	sel = select_ok(&req);
	assert_true(sel.candidates[COST_METHOD_SEND_BROADCAST].eligible);

	req = same_server(COST_AGG_ALLREDUCE, fm(8, true));
	sel = select_ok(&req);
	assert_true(sel.candidates[COST_METHOD_INTRA_SERVER].eligible);
	for (unsigned m = COST_METHOD_SEND_BROADCAST; m < COST_METHOD_COUNT; m++) {
		assert_false(sel.candidates[m].eligible);
		assert_false(sel.candidates[m].costed);
	}
}

/* The min-cost tie rules. */
static void test_min_cost_ties(void **state)
{
	struct cost_request req;
	struct cost_selection sel;

	(void)state;
	/* FM1: all four methods cost 11 in one step: the lowest id wins. */
	req = hand_request(COST_AGG_ALLREDUCE, fm(1, true), fm(1, true));
	sel = select_ok(&req);
	assert_int_equal(sel.method, COST_METHOD_SEND_BROADCAST);
	assert_string_equal(sel.rule,
	                    "cheapest eligible method; tie on cost and steps: lower method id");

	/*
	 * FM8 -> FM1 with D = 0 and all latencies of the source hidden: m1 is
	 * one send (10), m3 is allgather (0) + send (10): fewer steps wins.
	 */
	req = hand_request(COST_AGG_ALLREDUCE, fm(8, false), fm(1, false));
	req.bytes = 0;
	req.params.intra_latency_us = 0;
	sel = select_ok(&req);
	assert_float_equal(sel.candidates[COST_METHOD_ALLGATHER_SEND_SCATTER].predicted_us, 10, 0);
	assert_int_equal(sel.method, COST_METHOD_SEND_BROADCAST);
	assert_string_equal(sel.rule, "cheapest eligible method; tie on cost: fewer steps");

	req = hand_request(COST_AGG_NONE, fm(8, false), fm(8, false));
	sel = select_ok(&req);
	assert_string_equal(sel.rule, "cheapest eligible method");
}

/* ---- properties over a sweep ------------------------------------------------ */

static uint64_t rng_state = 0x9e3779b97f4a7c15ull;

static uint64_t rng(void)
{
	uint64_t x = rng_state;

	x ^= x << 13;
	x ^= x >> 7;
	x ^= x << 17;
	rng_state = x;
	return x;
}

/* Uniform in [0, 1). */
static double rng01(void)
{
	return (double)(rng() >> 11) / 9007199254740992.0;
}

/* Log-uniform in [lo, hi]. */
static double rng_log(double lo, double hi)
{
	return lo * pow(hi / lo, rng01());
}

static struct cost_server random_server(void)
{
	struct cost_server s = { 0 };

	s.intra = rng() % 2 ? COST_INTRA_TWO_GROUPS : COST_INTRA_FULL_MESH;
	s.devices = 1 + (unsigned)(rng() % 16);
	if (s.intra == COST_INTRA_TWO_GROUPS)
		s.devices = 2 * (1 + (unsigned)(rng() % 8));
	s.circuit_device = (unsigned)(rng() % s.devices);
	s.p2p = rng() % 2;
	return s;
}

static struct cost_request random_request(void)
{
	struct cost_request r = { 0 };

	r.aggregation = (enum cost_aggregation)(rng() % 3);
	r.bytes = rng() % 10 == 0 ? 0 : rng_log(1, 1ull << 40);
	r.source = random_server();
	r.target = random_server();
	r.params.inter_gbps = rng_log(10, 10000);
	r.params.inter_latency_us = rng_log(0.01, 100);
	r.params.intra_gbps = rng_log(10, 10000);
	r.params.intra_latency_us = rng_log(0.01, 100);
	r.params.bridge_gbps = rng_log(10, 10000);
	r.params.p2p_read_us = rng_log(0.01, 100);
	r.params.p2p_write_us = rng_log(0.01, 100);
	return r;
}

/* Structural invariants every selection keeps. */
static void check_selection(const struct cost_request *req, const struct cost_selection *sel)
{
	const struct cost_candidate *chosen = &sel->candidates[sel->method];
	unsigned m, s;

	assert_true(chosen->eligible);
	assert_true(chosen->costed);
	assert_int_equal(sel->n_operators, chosen->n_steps);
	assert_float_equal(sel->predicted_us, chosen->predicted_us, 0);
	assert_non_null(sel->rule);
	for (m = 0; m < COST_METHOD_COUNT; m++) {
		const struct cost_candidate *c = &sel->candidates[m];
		double sum = 0;

		assert_non_null(c->reason);
		assert_true(c->n_steps <= COST_MAX_STEPS);
		if (c->eligible)
			assert_true(c->costed);
		assert_int_equal(c->costed, (m == COST_METHOD_INTRA_SERVER) == req->same_server);
		for (s = 0; s < c->n_steps; s++) {
			assert_true(isfinite(c->steps[s].us) && c->steps[s].us >= 0);
			assert_true(isfinite(c->steps[s].bytes) && c->steps[s].bytes >= 0);
			sum += c->steps[s].us;
		}
		assert_float_equal(c->predicted_us, sum, 0);
	}
}

static void test_min_cost_never_slower(void **state)
{
	unsigned i, m, differ = 0;

	(void)state;
	for (i = 0; i < 20000; i++) {
		struct cost_request req = random_request();
		struct cost_selection mc, pt;

		req.policy = COST_POLICY_MIN_COST;
		mc = select_ok(&req);
		req.policy = COST_POLICY_PATENT;
		pt = select_ok(&req);
		check_selection(&req, &mc);
		check_selection(&req, &pt);
		assert_true(mc.predicted_us <= pt.predicted_us * (1 + 1e-12));
		for (m = 0; m < COST_METHOD_COUNT; m++)
			if (mc.candidates[m].eligible)
				assert_true(mc.predicted_us <=
				            mc.candidates[m].predicted_us * (1 + 1e-12));
		differ += mc.method != pt.method;
	}
	/* The sweep must reach the cases where the policies disagree. */
	assert_true(differ > 0);
	print_message("  min-cost differs from patent in %u of 20000 cases\n", differ);
}

static void test_monotonic_in_bytes(void **state)
{
	unsigned i, m, k;

	(void)state;
	for (i = 0; i < 500; i++) {
		struct cost_request req = random_request();
		struct cost_selection prev, cur;
		double b = 0;

		req.policy = rng() % 2 ? COST_POLICY_PATENT : COST_POLICY_MIN_COST;
		req.same_server = rng() % 8 == 0;
		req.bytes = 0;
		prev = select_ok(&req);
		for (k = 0; k < 60; k++) {
			b = b == 0 ? 1 : b * rng_log(1.01, 4);
			if (b > COST_MAX_BYTES)
				b = COST_MAX_BYTES;
			req.bytes = b;
			cur = select_ok(&req);
			assert_true(cur.predicted_us >= prev.predicted_us);
			for (m = 0; m < COST_METHOD_COUNT; m++)
				assert_true(cur.candidates[m].predicted_us >=
				            prev.candidates[m].predicted_us);
			prev = cur;
		}
	}
}

/* ---- operators -------------------------------------------------------------- */

static void test_reverse_mirrors_forward(void **state)
{
	unsigned i, k, op;

	(void)state;
	for (op = 0; op <= COST_OP_P2P_SEND; op++) {
		assert_int_equal(cost_op_adjoint(cost_op_adjoint((enum cost_op)op)), op);
		assert_non_null(cost_op_name((enum cost_op)op));
	}
	assert_int_equal(cost_op_adjoint(COST_OP_BROADCAST), COST_OP_REDUCE);
	assert_int_equal(cost_op_adjoint(COST_OP_SCATTER), COST_OP_GATHER);
	assert_int_equal(cost_op_adjoint(COST_OP_ALLGATHER), COST_OP_REDUCE_SCATTER);
	assert_int_equal(cost_op_adjoint(COST_OP_SEND), COST_OP_SEND);
	assert_int_equal(cost_op_adjoint(COST_OP_P2P_RECV), COST_OP_P2P_SEND);

	for (i = 0; i < 2000; i++) {
		struct cost_request req = random_request();
		struct cost_selection sel;
		unsigned n;

		req.policy = (enum cost_policy)(rng() % 2);
		req.same_server = rng() % 8 == 0;
		sel = select_ok(&req);
		n = sel.n_operators;
		for (k = 0; k < n; k++) {
			assert_int_equal(sel.operators[k].op,
			                 sel.candidates[sel.method].steps[k].op);
			assert_int_equal(sel.operators[k].scope,
			                 sel.candidates[sel.method].steps[k].scope);
			assert_int_equal(sel.reverse_operators[k].op,
			                 cost_op_adjoint(sel.operators[n - 1 - k].op));
			assert_int_equal(sel.reverse_operators[k].scope,
			                 sel.operators[n - 1 - k].scope);
		}
	}
}

struct ops_case {
	struct cost_request req;
	enum cost_policy policy;
	const char *fwd[COST_MAX_STEPS];
	const char *rev[COST_MAX_STEPS];
};

static void test_operator_lists(void **state)
{
	const struct ops_case cases[] = {
		{ hand_request(COST_AGG_ALLREDUCE, fm(8, false), fm(8, false)),
		  COST_POLICY_PATENT,
		  { "send@inter", "broadcast@target" },
		  { "reduce@target", "send@inter" } },
		{ hand_request(COST_AGG_NONE, fm(8, true), fm(8, true)),
		  COST_POLICY_PATENT,
		  { "p2p-recv@source", "send@inter", "p2p-send@target" },
		  { "p2p-recv@target", "send@inter", "p2p-send@source" } },
		{ hand_request(COST_AGG_NONE, fm(8, false), fm(8, false)),
		  COST_POLICY_PATENT,
		  { "allgather@source", "send@inter", "scatter@target" },
		  { "gather@target", "send@inter", "reduce-scatter@source" } },
		{ with_bridge(hand_request(COST_AGG_NONE, tg(8, 0, false), tg(8, 0, false)), 1000),
		  COST_POLICY_PATENT,
		  { "send@source", "send@inter", "send@target" },
		  { "send@target", "send@inter", "send@source" } },
		{ same_server(COST_AGG_ALLREDUCE, fm(8, false)),
		  COST_POLICY_MIN_COST,
		  { "broadcast@source" },
		  { "reduce@source" } },
	};
	size_t i;
	unsigned k;

	(void)state;
	for (i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		struct cost_request req = cases[i].req;
		struct cost_selection sel;

		req.policy = cases[i].policy;
		sel = select_ok(&req);
		for (k = 0; k < COST_MAX_STEPS && cases[i].fwd[k]; k++) {
			assert_true(k < sel.n_operators);
			assert_string_equal(
			    cost_operator_name(sel.operators[k].op, sel.operators[k].scope),
			    cases[i].fwd[k]);
			assert_string_equal(cost_operator_name(sel.reverse_operators[k].op,
			                                       sel.reverse_operators[k].scope),
			                    cases[i].rev[k]);
		}
		assert_int_equal(k, sel.n_operators);
	}
}

/* ---- validation ------------------------------------------------------------- */

struct bad_case {
	const char *field;
	void (*mutate)(struct cost_request *r);
};

#define MUTATOR(fname, body)                                                                       \
	static void fname(struct cost_request *r)                                                  \
	{                                                                                          \
		body;                                                                              \
	}

MUTATOR(bytes_negative, r->bytes = -1)
MUTATOR(bytes_absurd, r->bytes = COST_MAX_BYTES * 2)
MUTATOR(bytes_nan, r->bytes = NAN)
MUTATOR(bytes_inf, r->bytes = INFINITY)
MUTATOR(agg_bad, r->aggregation = (enum cost_aggregation)3)
MUTATOR(policy_bad, r->policy = (enum cost_policy)2)
MUTATOR(src_devices_zero, r->source.devices = 0)
MUTATOR(src_devices_huge, r->source.devices = COST_MAX_DEVICES + 1)
MUTATOR(src_odd_groups, r->source.intra = COST_INTRA_TWO_GROUPS; r->source.devices = 7)
MUTATOR(src_intra_bad, r->source.intra = (enum cost_intra)5)
MUTATOR(src_circuit_bad, r->source.circuit_device = 8)
MUTATOR(dst_devices_zero, r->target.devices = 0)
MUTATOR(dst_circuit_bad, r->target.circuit_device = 9)
MUTATOR(dst_intra_bad, r->target.intra = (enum cost_intra)2)
MUTATOR(inter_zero, r->params.inter_gbps = 0)
MUTATOR(inter_nan, r->params.inter_gbps = NAN)
MUTATOR(inter_lat_neg, r->params.inter_latency_us = -0.5)
MUTATOR(intra_inf, r->params.intra_gbps = INFINITY)
MUTATOR(intra_lat_nan, r->params.intra_latency_us = NAN)
MUTATOR(bridge_neg, r->params.bridge_gbps = -400)
MUTATOR(read_inf, r->params.p2p_read_us = INFINITY)
MUTATOR(write_neg, r->params.p2p_write_us = -1e-9)

static void test_bad_requests(void **state)
{
	const struct bad_case cases[] = {
		{ "bytes", bytes_negative },
		{ "bytes", bytes_absurd },
		{ "bytes", bytes_nan },
		{ "bytes", bytes_inf },
		{ "aggregation", agg_bad },
		{ "policy", policy_bad },
		{ "source.devices", src_devices_zero },
		{ "source.devices", src_devices_huge },
		{ "source.devices", src_odd_groups },
		{ "source.intra", src_intra_bad },
		{ "source.circuit_device", src_circuit_bad },
		{ "target.devices", dst_devices_zero },
		{ "target.circuit_device", dst_circuit_bad },
		{ "target.intra", dst_intra_bad },
		{ "params.inter_gbps", inter_zero },
		{ "params.inter_gbps", inter_nan },
		{ "params.inter_latency_us", inter_lat_neg },
		{ "params.intra_gbps", intra_inf },
		{ "params.intra_latency_us", intra_lat_nan },
		{ "params.bridge_gbps", bridge_neg },
		{ "params.p2p_read_us", read_inf },
		{ "params.p2p_write_us", write_neg },
	};
	size_t i;

	(void)state;
	for (i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		struct cost_request req = hand_request(COST_AGG_NONE, fm(8, false), fm(8, false));
		struct cost_selection sel, untouched;
		const char *bad = NULL;

		cases[i].mutate(&req);
		memset(&sel, 0xa5, sizeof(sel));
		memcpy(&untouched, &sel, sizeof(sel));
		assert_int_equal(cost_select(&req, &sel, &bad), -EINVAL);
		assert_non_null(bad);
		assert_string_equal(bad, cases[i].field);
		assert_memory_equal(&sel, &untouched, sizeof(sel));
		bad = NULL;
		assert_int_equal(cost_request_validate(&req, &bad), -EINVAL);
		assert_string_equal(bad, cases[i].field);
		/* A NULL bad_field is allowed. */
		assert_int_equal(cost_select(&req, &sel, NULL), -EINVAL);
	}
}

static void test_bounds_accepted(void **state)
{
	struct cost_request req = hand_request(COST_AGG_NONE, fm(COST_MAX_DEVICES, true),
	                                       tg(COST_MAX_DEVICES, COST_MAX_DEVICES - 1, true));
	struct cost_selection sel;
	unsigned m;

	(void)state;
	req.bytes = COST_MAX_BYTES;
	req.params.inter_gbps = 1e-6;
	req.params.intra_gbps = 1e-6;
	req.params.bridge_gbps = 1e-6;
	req.params.inter_latency_us = 1e9;
	req.params.intra_latency_us = 0;
	req.params.p2p_read_us = 1e9;
	req.params.p2p_write_us = 0;
	sel = select_ok(&req);
	for (m = 0; m < COST_METHOD_COUNT; m++)
		assert_true(isfinite(sel.candidates[m].predicted_us));

	/* A same-server request ignores its target entirely. */
	req = same_server(COST_AGG_NONE, fm(8, false));
	req.target.devices = 0;
	req.target.intra = (enum cost_intra)99;
	sel = select_ok(&req);
	assert_int_equal(sel.method, COST_METHOD_INTRA_SERVER);
}

static void test_params(void **state)
{
	struct cost_params p = cost_params_default();
	const char *bad = NULL;
	double v = 0;
	unsigned i;

	(void)state;
	assert_int_equal(cost_params_validate(&p, &bad), 0);
	assert_float_equal(p.inter_gbps, COST_DEFAULT_INTER_GBPS, 0);
	assert_float_equal(p.intra_gbps, COST_DEFAULT_INTRA_GBPS, 0);
	assert_float_equal(p.bridge_gbps, COST_DEFAULT_BRIDGE_GBPS, 0);

	for (i = 0; i < COST_PARAM_COUNT; i++) {
		const char *name = cost_params_name(i);
		struct cost_params q = p;

		assert_non_null(name);
		assert_int_equal(cost_params_set(&q, name, -1), 0);
		assert_int_equal(cost_params_get(&q, name, &v), 0);
		assert_float_equal(v, -1, 0);
		assert_int_equal(cost_params_validate(&q, &bad), -EINVAL);
		assert_string_equal(bad, name);
		/* Exactly one field changed. */
		assert_int_equal(cost_params_set(&q, name, 0.5), 0);
		assert_int_equal(cost_params_validate(&q, NULL), 0);
	}
	assert_null(cost_params_name(COST_PARAM_COUNT));
	assert_int_equal(cost_params_set(&p, "inter_gbs", 1), -EINVAL);
	assert_int_equal(cost_params_get(&p, "", &v), -EINVAL);
	assert_int_equal(cost_params_get(&p, NULL, &v), -EINVAL);

	/* Delays may be zero, bandwidths may not. */
	p.p2p_read_us = 0;
	p.inter_latency_us = 0;
	assert_int_equal(cost_params_validate(&p, NULL), 0);
	p.bridge_gbps = 0;
	assert_int_equal(cost_params_validate(&p, &bad), -EINVAL);
	assert_string_equal(bad, "bridge_gbps");
}

static void test_names(void **state)
{
	enum cost_method m;
	enum cost_policy p;
	enum cost_aggregation a;
	enum cost_intra in;
	unsigned i;

	(void)state;
	const char *methods[] = { "intra-server", "send-broadcast", "p2p-relay",
		                  "allgather-send-scatter", "switch-relay" };
	for (i = 0; i < COST_METHOD_COUNT; i++) {
		assert_string_equal(cost_method_name((enum cost_method)i), methods[i]);
		assert_int_equal(cost_parse_method(methods[i], &m), 0);
		assert_int_equal(m, i);
	}
	assert_null(cost_method_name((enum cost_method)COST_METHOD_COUNT));
	assert_int_equal(cost_parse_method("broadcast", &m), -EINVAL);
	assert_int_equal(cost_parse_method(NULL, &m), -EINVAL);

	assert_int_equal(cost_parse_policy("min-cost", &p), 0);
	assert_int_equal(p, COST_POLICY_MIN_COST);
	assert_int_equal(cost_parse_policy("patent", &p), 0);
	assert_int_equal(p, COST_POLICY_PATENT);
	assert_string_equal(cost_policy_name(COST_POLICY_PATENT), "patent");
	assert_int_equal(cost_parse_policy("Patent", &p), -EINVAL);
	assert_null(cost_policy_name((enum cost_policy)7));

	assert_int_equal(cost_parse_aggregation("allreduce", &a), 0);
	assert_int_equal(a, COST_AGG_ALLREDUCE);
	assert_int_equal(cost_parse_aggregation("allgather", &a), 0);
	assert_int_equal(a, COST_AGG_ALLGATHER);
	assert_int_equal(cost_parse_aggregation("none", &a), 0);
	assert_int_equal(a, COST_AGG_NONE);
	assert_string_equal(cost_aggregation_name(COST_AGG_NONE), "none");
	assert_int_equal(cost_parse_aggregation("all-reduce", &a), -EINVAL);

	assert_int_equal(cost_parse_intra("full-mesh", &in), 0);
	assert_int_equal(in, COST_INTRA_FULL_MESH);
	assert_int_equal(cost_parse_intra("two-groups", &in), 0);
	assert_int_equal(in, COST_INTRA_TWO_GROUPS);
	assert_string_equal(cost_intra_name(COST_INTRA_TWO_GROUPS), "two-groups");
	assert_int_equal(cost_parse_intra("mesh", &in), -EINVAL);

	assert_string_equal(cost_scope_name(COST_SCOPE_INTER), "inter");
	assert_null(cost_scope_name((enum cost_scope)3));
	assert_string_equal(cost_op_name(COST_OP_REDUCE_SCATTER), "reduce-scatter");
	assert_string_equal(cost_operator_name(COST_OP_ALLGATHER, COST_SCOPE_SOURCE),
	                    "allgather@source");
	assert_string_equal(cost_operator_name(COST_OP_P2P_SEND, COST_SCOPE_TARGET),
	                    "p2p-send@target");
	assert_null(cost_operator_name((enum cost_op)9, COST_SCOPE_SOURCE));
	assert_null(cost_operator_name(COST_OP_SEND, (enum cost_scope)3));
}

/* Defaults: a realistic 8-device pair, the decision the docs quote. */
static void test_defaults_example(void **state)
{
	struct cost_request req = {
		.aggregation = COST_AGG_NONE,
		.bytes = 16 << 20,
		.source = fm(8, false),
		.target = fm(8, false),
		.params = cost_params_default(),
	};
	struct cost_selection sel;

	(void)state;
	sel = select_ok(&req);
	/*
	 * 16 MiB: D*ki = 16777216 * 8e-3 / 512 = 262.144 us; P*ke = 8 * D *
	 * 8e-3 / 400 = 2684.35456 us. m3 = 2 * (2 + 262.144) + 3 + 2684.35456.
	 */
	assert_int_equal(sel.method, COST_METHOD_ALLGATHER_SEND_SCATTER);
	assert_float_equal(sel.predicted_us, 2 * 264.144 + 3 + 2684.35456, 1e-6);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_hand_cases),
		cmocka_unit_test(test_steps),
		cmocka_unit_test(test_patent_flow),
		cmocka_unit_test(test_eligibility),
		cmocka_unit_test(test_min_cost_ties),
		cmocka_unit_test(test_min_cost_never_slower),
		cmocka_unit_test(test_monotonic_in_bytes),
		cmocka_unit_test(test_reverse_mirrors_forward),
		cmocka_unit_test(test_operator_lists),
		cmocka_unit_test(test_bad_requests),
		cmocka_unit_test(test_bounds_accepted),
		cmocka_unit_test(test_params),
		cmocka_unit_test(test_names),
		cmocka_unit_test(test_defaults_example),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
