/*
 * Alpha-beta-gamma prices of every algorithm, the price of a concrete schedule, and the
 * selector. Derivations: docs/cost-model.md, "Collectives over the fabric".
 */
#include "coll_internal.h"
#include "plan.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Per-byte times in µs. */
struct rates {
	double a, b, ai, bi, g;
};

static struct rates rates_of(const struct coll_params *p)
{
	struct rates r = {
		.a = p->alpha_us,
		.b = coll_beta(p),
		.ai = p->intra_alpha_us,
		.bi = coll_beta_intra(p),
		.g = p->gamma_ns_per_byte / 1000.0,
	};

	return r;
}

static uint32_t segment_of(const struct coll_params *p)
{
	return p->segment_bytes ? p->segment_bytes : p->mtu;
}

/* Allreduce in the NICs (document 003): no host reduction, segments of at most the MTU. */
static void price_nic(const struct coll_params *p, const struct rates *r, double n, uint32_t M,
                      struct coll_estimate *e)
{
	double s = fmin(segment_of(p), n);

	if (p->offload_switch) {
		/* Up to the switch and back down, pipelined segment by segment. */
		e->rounds = 2;
		e->predicted_us = 2 * (r->a + p->switch_alpha_us) + (n + s) * r->b;
		return;
	}
	e->rounds = 2 * (M - 1);
	e->predicted_us = 2 * (M - 1) * r->a + 2.0 * (M - 1) / M * n * r->b;
}

/*
 * Document 004: K messages of one segment each; the aggregate of message i comes back one
 * round trip after it left and releases message i + W. The first W leave back to back at the
 * link's rate, and so does every later window, so message i leaves at floor(i / W) round trips
 * plus (i mod W) link times, unless the link is the slower: then every message waits for the
 * one before it (docs/cost-model.md, "The window, corrected").
 */
static void price_ina(const struct coll_params *p, const struct rates *r, double n,
                      struct coll_estimate *e)
{
	uint32_t seg = segment_of(p), W = p->window;
	double K = n > 0 ? ceil(n / seg) : 1;
	double m = fmin(seg, n);
	double rtt = 2 * (r->a + p->switch_alpha_us) + 2 * m * r->b;
	double last;

	if (m * r->b * W >= rtt)
		last = (K - 1) * m * r->b;
	else
		last = floor((K - 1) / W) * rtt + fmod(K - 1, W) * m * r->b;
	e->rounds = 2;
	e->predicted_us = last + rtt;
}

/*
 * What the hardware terms are charged on (struct coll_estimate): sends, the circuits a server
 * sends on at once, the busiest circuit's bytes, and the relayed rounds and their bytes.
 */
static void charge(struct coll_estimate *e, uint64_t sends, uint32_t fanout, double circuit_bytes,
                   uint32_t relay_hops, double relay_bytes)
{
	e->sends = sends;
	e->fanout = fanout;
	e->circuit_bytes = circuit_bytes;
	e->relay_hops = relay_hops;
	e->relay_bytes = relay_bytes;
}

static void price_allreduce(enum coll_algorithm a, const struct coll_params *p,
                            const struct rates *r, double n, uint32_t M, struct coll_estimate *e)
{
	double f = (double)(M - 1) / M; /* (p-1)/p of Thakur et al. */
	uint32_t lg = coll_ceil_log2(M);

	switch (a) {
	case COLL_ALG_RING:
		e->circuits = M == 2 ? 1 : 2;
		e->rounds = 2 * (M - 1);
		e->predicted_us = 2 * (M - 1) * r->a + 2 * f * n * r->b + f * n * r->g;
		e->inter_messages = 2ull * M * (M - 1);
		charge(e, e->rounds, 1, 2 * f * n, e->rounds - 1, (2.0 * M - 3) * n / M);
		break;
	case COLL_ALG_BIDIR_RING:
		e->circuits = 2;
		e->rounds = 2 * (M - 1);
		e->predicted_us = 2 * (M - 1) * r->a + f * n * r->b + f * n * r->g;
		e->inter_messages = 4ull * M * (M - 1);
		charge(e, 2ull * e->rounds, 2, f * n, e->rounds - 1, (2.0 * M - 3) * n / (2 * M));
		break;
	case COLL_ALG_RHD:
		e->circuits = lg;
		e->rounds = 2 * lg;
		e->predicted_us = 2 * lg * r->a + 2 * f * n * r->b + f * n * r->g;
		e->inter_messages = 2ull * M * lg;
		charge(e, e->rounds, 1, 2 * f * n, e->rounds - 1, 2 * f * n - n / 2);
		break;
	case COLL_ALG_FULL_MESH_DIRECT:
		e->circuits = M - 1;
		e->rounds = 2;
		e->predicted_us = 2 * r->a + 2 * n / M * r->b + f * n * r->g;
		e->inter_messages = 2ull * M * (M - 1);
		charge(e, 2ull * (M - 1), M - 1, 2 * n / M, 1, n / M);
		break;
	case COLL_ALG_CUBE_300:
		e->circuits = 3;
		e->rounds = 8;
		e->predicted_us = 8 * r->a + 2 * n / 3 * r->b + n * r->g;
		e->inter_messages = 8 * 24;
		charge(e, 24, 3, 2 * n / 3, 7, 2 * n / 3 * 7 / 8);
		break;
	case COLL_ALG_CUBE_400:
		e->circuits = 3;
		e->rounds = 6;
		e->predicted_us = 6 * r->a + 2 * n / 3 * r->b + 1.25 * n * r->g;
		e->inter_messages = 6 * 24;
		charge(e, 18, 3, 2 * n / 3, 5, 2 * n / 3 * 5 / 6);
		break;
	case COLL_ALG_NIC_OFFLOAD:
		price_nic(p, r, n, M, e);
		break;
	default:
		price_ina(p, r, n, e);
		break;
	}
}

static void price_allgather(enum coll_algorithm a, const struct rates *r, double n, uint32_t M,
                            struct coll_estimate *e)
{
	double f = (double)(M - 1) / M;
	uint32_t lg = coll_ceil_log2(M);

	switch (a) {
	case COLL_ALG_RING:
		e->circuits = M == 2 ? 1 : 2;
		e->rounds = M - 1;
		e->predicted_us = (M - 1) * r->a + f * n * r->b;
		e->inter_messages = (uint64_t)M * (M - 1);
		charge(e, M - 1, 1, f * n, M - 2, (M - 2.0) * n / M);
		break;
	case COLL_ALG_RECURSIVE_DOUBLING:
		e->circuits = lg;
		e->rounds = lg;
		e->predicted_us = lg * r->a + f * n * r->b;
		e->inter_messages = (uint64_t)M * lg;
		charge(e, lg, 1, f * n, lg - 1, f * n - n / M);
		break;
	default:
		e->circuits = M - 1;
		e->rounds = 1;
		e->predicted_us = r->a + n / M * r->b;
		e->inter_messages = (uint64_t)M * (M - 1);
		charge(e, M - 1, M - 1, n / M, 0, 0);
		break;
	}
}

static void price_broadcast(enum coll_algorithm a, const struct rates *r, double n, uint32_t M,
                            struct coll_estimate *e)
{
	uint32_t lg = coll_ceil_log2(M);

	switch (a) {
	case COLL_ALG_BINOMIAL_TREE:
		e->circuits = lg;
		e->rounds = lg;
		e->predicted_us = lg * (r->a + n * r->b);
		e->inter_messages = M - 1;
		charge(e, lg, 1, lg * n, lg - 1, (lg - 1.0) * n);
		break;
	case COLL_ALG_FULL_MESH_DIRECT:
		e->circuits = M - 1;
		e->rounds = 1;
		e->predicted_us = r->a + n * r->b;
		e->inter_messages = M - 1;
		charge(e, M - 1, M - 1, n, 0, 0);
		break;
	default:
		e->circuits = M - 1;
		e->rounds = 2;
		e->predicted_us = 2 * r->a + 2 * n / M * r->b;
		e->inter_messages = (uint64_t)M * (M - 1);
		charge(e, 2ull * (M - 1), M - 1, 2 * n / M, 1, n / M);
		break;
	}
}

/*
 * The hardware terms (docs/cost-model.md, "Terms a calibration fits"): the launch, each
 * message's sender overhead, a host link shared by the circuits a device sends on at once, and
 * the in-server relays. With their defaults this adds nothing.
 */
/*
 * The circuits that share one device's host link, of the @f a server sends on at once out of
 * its @C, @ppd to a device: the one it sends on and, of the other f - 1, those that happen to
 * end on the same device, (ppd - 1) / (C - 1) of them on average. All C at once is ppd.
 */
static double host_sharing(uint32_t f, uint32_t C, uint32_t ppd)
{
	double c = C > 1 ? 1 + (f - 1.0) * (ppd - 1.0) / (C - 1.0) : 1;

	return fmin(c, fmin(f, ppd));
}

static void price_terms(enum coll_algorithm a, const struct coll_params *p, uint32_t servers,
                        uint32_t devices, uint64_t participants, struct coll_estimate *e)
{
	double b = coll_beta(p), bi = coll_beta_intra(p);

	/* The all-to-all and shape prices give no per-round send count: spread the messages. */
	if (!e->sends && e->scheduled)
		e->sends =
		    (e->inter_messages + e->intra_messages + participants - 1) / participants;
	e->predicted_us += p->launch_us + p->launch_alg_us[a] + (double)e->sends * p->overhead_us;
	if (p->device_link_gbps > 0 && e->fanout) {
		uint32_t C = p->ports_per_server ? p->ports_per_server
		                                 : coll_shape_degree(&p->shape, servers);
		double host =
		    host_sharing(e->fanout, C, p->ports_per_device) / (125.0 * p->device_link_gbps);

		if (host > b)
			e->predicted_us += e->circuit_bytes * (host - b);
	}
	if (p->relay == COLL_RELAY_NONE || devices < 2 || !e->relay_hops)
		return;
	e->predicted_us += e->relay_hops * p->intra_alpha_us;
	if (p->relay == COLL_RELAY_STORE_FORWARD)
		e->predicted_us += e->relay_bytes * bi;
	else if (bi > b)
		e->predicted_us += e->relay_bytes * (bi - b);
}

int coll_predict(enum coll_collective c, enum coll_algorithm a, uint64_t bytes, uint32_t servers,
                 uint32_t devices, const struct coll_params *p, struct coll_estimate *est,
                 struct coll_error *err)
{
	struct coll_params def;
	struct rates r;
	uint32_t ports;
	double n = (double)bytes;
	int rc;

	if (!est) {
		coll_err_set(err, NULL, "no estimate to fill");
		return -EINVAL;
	}
	if (!p) {
		coll_params_default(&def);
		p = &def;
	}
	memset(est, 0, sizeof(*est));
	rc = coll_params_validate(p, err);
	if (!rc)
		rc = coll_fit_shape(c, a, servers, devices, err);
	if (rc)
		return rc;
	if (c == COLL_BROADCAST && p->root >= servers) {
		coll_err_set(err, "root", "root %u is not one of the %u servers", p->root, servers);
		return -EINVAL;
	}
	if (a == COLL_ALG_NIC_OFFLOAD && !p->offload) {
		coll_err_set(err, NULL,
		             "not every server has an offload-capable NIC (offload is "
		             "false)");
		return -EDOM;
	}
	if (a == COLL_ALG_INA && !p->aggregating_switch) {
		coll_err_set(err, NULL,
		             "no aggregating switch reaches every member "
		             "(aggregating_switch is false)");
		return -EDOM;
	}
	rc = coll_shape_fit(c, a, servers, p, err);
	if (rc)
		return rc;
	/* All-to-all runs on the plan's circuits: without a map of them, the plan must exist. */
	uint32_t need = plan_min_devices(servers, 1, PLAN_FORMULA_AUTO);
	if (c == COLL_ALLTOALL && !coll_is_shape_alg(a) && !p->circuit_device && devices < need) {
		coll_err_set(err, "devices",
		             "the document 000 plan of %u servers needs %u devices per server, "
		             "they have %u",
		             servers, need, devices);
		return -EDOM;
	}
	r = rates_of(p);
	switch (coll_is_shape_alg(a) ? COLL_COLLECTIVE__COUNT : c) {
	case COLL_COLLECTIVE__COUNT:
		coll_price_shape(c, a, p, n, servers, devices, est);
		break;
	case COLL_ALLREDUCE:
		price_allreduce(a, p, &r, n, servers, est);
		break;
	case COLL_ALLGATHER:
		price_allgather(a, &r, n, servers, est);
		break;
	case COLL_BROADCAST:
		price_broadcast(a, &r, n, servers, est);
		break;
	default:
		rc = coll_price_alltoall(a, p, n, servers, devices, est);
		/* Without the barrier, the replay's time instead of the sum of the rounds. */
		if (!rc && p->sync != COLL_SYNC_BARRIER) {
			rc =
			    coll_alltoall_flow_price(a, p, n, servers, devices, &est->predicted_us);
			rc = rc == -E2BIG ? 0 : rc;
		}
		if (rc) {
			coll_err_set(err, NULL,
			             rc == -ENOMEM ? "out of memory"
			                           : "the all-to-all cannot be replayed");
			memset(est, 0, sizeof(*est));
			return rc;
		}
		break;
	}
	est->scheduled = a != COLL_ALG_NIC_OFFLOAD && a != COLL_ALG_INA;
	price_terms(a, p, servers, devices,
	            c == COLL_ALLTOALL && !coll_is_shape_alg(a) ? (uint64_t)servers * devices
	                                                        : servers,
	            est);
	ports = p->ports_per_server ? p->ports_per_server : coll_shape_degree(&p->shape, servers);
	if (est->circuits > ports) {
		coll_err_set(err, "ports_per_server",
		             "%s needs %u circuits per server, a server "
		             "has %u",
		             coll_algorithm_name(a), est->circuits, ports);
		memset(est, 0, sizeof(*est));
		return -EDOM;
	}
	return 0;
}

int coll_schedule_cost(const struct coll_schedule *s, const struct coll_params *p, double *us)
{
	struct coll_params def;
	struct coll_links links;
	uint64_t *reduced;
	uint32_t widest = 0;
	double total = 0;
	int rc;

	if (!p) {
		coll_params_default(&def);
		p = &def;
	}
	if (!s || !s->devices || !s->participants || s->participants > COLL_MAX_PARTICIPANTS ||
	    (uint64_t)s->servers * s->devices != s->participants || coll_params_validate(p, NULL))
		return -EINVAL;
	/* Without the barrier an all-to-all's time is its replay, as in its selection. */
	if (p->sync != COLL_SYNC_BARRIER && s->collective == COLL_ALLTOALL &&
	    (s->algorithm == COLL_ALG_DIRECT || s->algorithm == COLL_ALG_PLANE_RELAYED)) {
		rc = coll_schedule_flow_price(s, p, us);
		if (rc != -E2BIG)
			return rc;
	}
	for (uint32_t k = 0; k < s->nrounds; k++) {
		if ((uint64_t)s->rounds[k].first + s->rounds[k].count > s->ntransfers)
			return -EINVAL;
		if (s->rounds[k].count > widest)
			widest = s->rounds[k].count;
	}
	reduced = calloc(s->participants, sizeof(*reduced));
	if (!reduced)
		return -ENOMEM;
	rc = coll_links_init(&links, p, s->servers, s->devices, widest);
	if (rc) {
		free(reduced);
		return rc;
	}
	for (uint32_t k = 0; k < s->nrounds && !rc; k++) {
		uint64_t most = 0;

		memset(reduced, 0, s->participants * sizeof(*reduced));
		for (uint32_t i = 0; i < s->rounds[k].count; i++) {
			const struct coll_transfer *t = coll_round_transfer(s, k, i);

			if (t->src >= s->participants || t->dst >= s->participants) {
				rc = -EINVAL;
				break;
			}
			coll_links_add(&links, t->src, t->dst, (double)t->bytes);
			if (t->op == COLL_OP_REDUCE) {
				reduced[t->dst] += t->bytes;
				if (reduced[t->dst] > most)
					most = reduced[t->dst];
			}
		}
		total += coll_links_round(&links) + (double)most * rates_of(p).g;
	}
	coll_links_free(&links);
	free(reduced);
	if (!rc)
		*us = total;
	return rc;
}

/* How an eligible candidate runs, for the selection's reason column. */
static void describe(enum coll_algorithm a, const struct coll_params *p, char *buf, size_t len)
{
	switch (a) {
	case COLL_ALG_RING:
		snprintf(buf, len, "one-way ring: one direction of 2 circuits per server");
		break;
	case COLL_ALG_BIDIR_RING:
		snprintf(buf, len, "two opposite one-way rings, half the data each");
		break;
	case COLL_ALG_RHD:
	case COLL_ALG_RECURSIVE_DOUBLING:
		snprintf(buf, len, "pairwise exchanges with lg M partners");
		break;
	case COLL_ALG_FULL_MESH_DIRECT:
		snprintf(buf, len, "all M-1 circuits of each server at once");
		break;
	case COLL_ALG_CUBE_300:
	case COLL_ALG_CUBE_400:
		snprintf(buf, len, "document 001 on the 12 circuits of a cube, 3 per server");
		break;
	case COLL_ALG_BINOMIAL_TREE:
		snprintf(buf, len, "binomial tree from root %u", p->root);
		break;
	case COLL_ALG_SCATTER_ALLGATHER:
		snprintf(buf, len,
		         "root %u scatters over its M-1 circuits, then one allgather round",
		         p->root);
		break;
	case COLL_ALG_DIRECT:
		snprintf(buf, len, "every device sends to every device, one message each");
		break;
	case COLL_ALG_PLANE_RELAYED:
		snprintf(buf, len,
		         "in-server hand-off to the destination's plane, then one "
		         "message per plane peer");
		break;
	case COLL_ALG_NIC_OFFLOAD:
		snprintf(buf, len, "%s, segments of %u bytes",
		         p->offload_switch ? "tree at the offload-capable switch"
		                           : "ring among the offload NICs",
		         segment_of(p));
		break;
	case COLL_ALG_HYPERX_DIM:
		snprintf(buf, len,
		         "dimension by dimension, each line's full mesh in one round each way");
		break;
	case COLL_ALG_HYPERX_A2A:
		snprintf(buf, len,
		         "blocks relayed dimension by dimension, each hop one round over a line's "
		         "full mesh");
		break;
	case COLL_ALG_TORUS_RING:
		snprintf(buf, len, "dimension by dimension, a ring each way around each dimension");
		break;
	case COLL_ALG_TORUS_A2A:
		snprintf(buf, len,
		         "blocks relayed dimension by dimension, the shorter way around each ring");
		break;
	default:
		snprintf(buf, len, "window %u of switch buffer %u, segments of %u bytes", p->window,
		         p->switch_buffer, segment_of(p));
		break;
	}
}

static const enum coll_algorithm candidates_allreduce[] = {
	COLL_ALG_RING,     COLL_ALG_BIDIR_RING, COLL_ALG_RHD,         COLL_ALG_FULL_MESH_DIRECT,
	COLL_ALG_CUBE_300, COLL_ALG_CUBE_400,   COLL_ALG_NIC_OFFLOAD, COLL_ALG_INA,
};
static const enum coll_algorithm candidates_allgather[] = {
	COLL_ALG_RING,
	COLL_ALG_RECURSIVE_DOUBLING,
	COLL_ALG_FULL_MESH_DIRECT,
};
static const enum coll_algorithm candidates_broadcast[] = {
	COLL_ALG_BINOMIAL_TREE,
	COLL_ALG_FULL_MESH_DIRECT,
	COLL_ALG_SCATTER_ALLGATHER,
};
static const enum coll_algorithm candidates_alltoall[] = {
	COLL_ALG_DIRECT,
	COLL_ALG_PLANE_RELAYED,
};
/* Listed after the others only on a HyperX or torus, so a full mesh's list is unchanged. */
static const enum coll_algorithm candidates_shape[] = {
	COLL_ALG_HYPERX_DIM,
	COLL_ALG_TORUS_RING,
};
static const enum coll_algorithm candidates_shape_alltoall[] = {
	COLL_ALG_HYPERX_A2A,
	COLL_ALG_TORUS_A2A,
};

int coll_select(enum coll_collective c, uint64_t bytes, uint32_t servers, uint32_t devices,
                const struct coll_params *p, struct coll_selection *sel, struct coll_error *err)
{
	const enum coll_algorithm *list;
	enum coll_algorithm all[COLL_MAX_CANDIDATES];
	struct coll_params def;
	uint32_t n;
	int rc;

	if (!sel) {
		coll_err_set(err, NULL, "no selection to fill");
		return -EINVAL;
	}
	if (!p) {
		coll_params_default(&def);
		p = &def;
	}
	memset(sel, 0, sizeof(*sel));
	sel->collective = c;
	sel->chosen = -1;
	switch (c) {
	case COLL_ALLREDUCE:
		list = candidates_allreduce;
		n = sizeof(candidates_allreduce) / sizeof(*list);
		break;
	case COLL_ALLGATHER:
		list = candidates_allgather;
		n = sizeof(candidates_allgather) / sizeof(*list);
		break;
	case COLL_BROADCAST:
		list = candidates_broadcast;
		n = sizeof(candidates_broadcast) / sizeof(*list);
		break;
	case COLL_ALLTOALL:
		list = candidates_alltoall;
		n = sizeof(candidates_alltoall) / sizeof(*list);
		break;
	default:
		coll_err_set(err, "collective", "unknown collective %d", (int)c);
		return -EINVAL;
	}
	memcpy(all, list, n * sizeof(*list));
	if (p->shape.topology != COLL_TOPO_FULL_MESH) {
		const enum coll_algorithm *more =
		    c == COLL_ALLTOALL ? candidates_shape_alltoall : candidates_shape;

		all[n++] = more[0];
		all[n++] = more[1];
	}
	list = all;
	/* Errors common to every candidate (parameters, size) fail the whole request. */
	rc = coll_params_validate(p, err);
	if (!rc)
		rc = coll_fit_shape(c, list[0], servers, devices, err);
	if (!rc)
		rc = coll_shape_validate(&p->shape, servers, err);
	if (!rc && c == COLL_BROADCAST && p->root >= servers) {
		coll_err_set(err, "root", "root %u is not one of the %u servers", p->root, servers);
		rc = -EINVAL;
	}
	if (rc)
		return rc;
	for (uint32_t i = 0; i < n; i++) {
		struct coll_candidate *cd = &sel->candidates[i];
		struct coll_estimate est;
		struct coll_error why = { 0 };

		cd->algorithm = list[i];
		cd->name = coll_algorithm_name(list[i]);
		cd->scheduled = list[i] != COLL_ALG_NIC_OFFLOAD && list[i] != COLL_ALG_INA;
		rc = coll_predict(c, list[i], bytes, servers, devices, p, &est, &why);
		if (rc == -EDOM) {
			snprintf(cd->reason, sizeof(cd->reason), "%s", why.reason);
			continue;
		}
		if (rc) {
			if (err)
				*err = why;
			return rc;
		}
		cd->eligible = true;
		cd->rounds = est.rounds;
		cd->predicted_us = est.predicted_us;
		cd->inter_messages = est.inter_messages;
		cd->intra_messages = est.intra_messages;
		cd->circuits = est.circuits;
		describe(list[i], p, cd->reason, sizeof(cd->reason));
		if (sel->chosen < 0 || cd->predicted_us < sel->candidates[sel->chosen].predicted_us)
			sel->chosen = (int)i;
	}
	sel->ncandidates = n;
	if (sel->chosen < 0) {
		coll_err_set(err, NULL, "no %s algorithm fits %u servers with these capabilities",
		             coll_collective_name(c), servers);
		return -ENOENT;
	}
	return 0;
}
