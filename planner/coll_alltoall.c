/*
 * All-to-all across servers x devices: direct, and plane-relayed (document 002), scheduled and
 * priced on the circuits a document 000 fabric has: one circuit per pair of servers, each end
 * on one device. Participant x is device x % D of server x / D; its plane is its device index.
 * Derivations: docs/cost-model.md, "All-to-all (document 002)".
 */
#include "coll_internal.h"

#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

/*
 * Above this many messages in all, a price is the closed-form bound, not a round-by-round sum:
 * about 0.1 µs a message, so a selection stays under about 15 ms on the loop thread.
 */
#define ALLTOALL_EXACT_FLOWS (1u << 17)

/* Chunk of block i -> j (i != j). */
static uint32_t block(uint32_t P, uint32_t i, uint32_t j)
{
	return i * (P - 1) + (j < i ? j : j - 1);
}

/*
 * The server a sender on server s reaches in spread round k: relay or device p goes to
 * s + 1 + (k + p) mod (S - 1), so that the D devices of a server spread over its S - 1
 * circuits instead of all using one while the others idle.
 */
static uint32_t spread_peer(uint32_t S, uint32_t s, uint32_t k, uint32_t p)
{
	return (uint32_t)((s + 1 + ((uint64_t)k + p) % (S - 1)) % S);
}

uint32_t coll_alltoall_rounds(enum coll_algorithm a, uint32_t S, uint32_t D)
{
	uint64_t P = (uint64_t)S * D;

	if (a == COLL_ALG_DIRECT)
		return P - 1 > UINT32_MAX ? UINT32_MAX : (uint32_t)(P - 1);
	return (D - 1) + (S - 1);
}

/*
 * Where participant x sends in round r (r < coll_alltoall_rounds()), and how many blocks the
 * message carries. Both algorithms start with their in-server rounds (D - 1 of them):
 *   direct, in-server round j = r + 1: (s, d) -> (s, d + j mod D), its own block;
 *   direct, round (k, j) after them: (s, d) -> (s + 1 + (k + d) mod (S - 1), d + j mod D);
 *   plane-relayed phase 1, round r: (s, d) -> (s, p = d + r + 1 mod D), the blocks for plane p
 *     of every server (S of them; the local one is delivered, the others wait there);
 *   plane-relayed phase 2, round k: relay (s, p) -> (s + 1 + (k + p) mod (S - 1), p), the
 *     blocks of every device of s for that device (D of them).
 * Every round is a permutation: each participant sends one message and receives one.
 */
uint64_t coll_alltoall_step(enum coll_algorithm a, uint32_t S, uint32_t D, uint32_t r, uint64_t x,
                            uint32_t *blocks)
{
	uint64_t s = x / D, d = x % D, i;

	if (r + 1 < D) {
		*blocks = a == COLL_ALG_DIRECT ? 1 : S;
		return s * D + (d + r + 1) % D;
	}
	i = r - (D - 1);
	if (a == COLL_ALG_DIRECT) {
		*blocks = 1;
		return (uint64_t)spread_peer(S, (uint32_t)s, (uint32_t)(i / D), (uint32_t)d) * D +
		       (d + i % D) % D;
	}
	*blocks = D;
	return (uint64_t)spread_peer(S, (uint32_t)s, (uint32_t)i, (uint32_t)d) * D + d;
}

/* Most messages one circuit direction carries in a round: the D senders over S - 1 circuits. */
static uint32_t circuit_load(uint32_t S, uint32_t D)
{
	return S < 2 ? 0 : (uint32_t)((D + (uint64_t)S - 2) / (S - 1));
}

int coll_gen_alltoall(enum coll_algorithm a, uint32_t servers, uint32_t devices, uint64_t bytes,
                      struct coll_schedule *s)
{
	uint32_t S = servers, D = devices, P = S * D;
	uint32_t *buf;
	int rc;

	if (a != COLL_ALG_DIRECT && a != COLL_ALG_PLANE_RELAYED)
		return -EINVAL;
	rc = coll_schedule_init(s, COLL_ALLTOALL, (int)a, S, D, P * (P - 1));
	if (rc)
		return rc;
	s->bytes = bytes;
	s->circuit_load = circuit_load(S, D);
	for (uint32_t i = 0; i < P; i++)
		for (uint32_t j = 0; j < P; j++) {
			struct coll_chunk *ch;

			if (i == j)
				continue;
			ch = &s->chunks[block(P, i, j)];
			ch->origin = i;
			ch->dest = j;
			/* Block j of i's send buffer; the block to itself never moves. */
			ch->bytes = coll_chunk_size(bytes, P, j);
		}
	buf = malloc((size_t)(S > D ? S : D) * sizeof(*buf));
	if (!buf) {
		coll_schedule_free(s);
		return -ENOMEM;
	}
	for (uint32_t r = 0; r < coll_alltoall_rounds(a, S, D) && !rc; r++) {
		rc = coll_schedule_add_round(s);
		for (uint32_t x = 0; x < P && !rc; x++) {
			uint32_t n, y = (uint32_t)coll_alltoall_step(a, S, D, r, x, &n);

			if (a == COLL_ALG_DIRECT)
				buf[0] = block(P, x, y);
			else if (r + 1 < D) /* phase 1: for plane y % D of every server */
				for (uint32_t t = 0; t < S; t++)
					buf[t] = block(P, x, t * D + y % D);
			else /* phase 2: from every device of x's server */
				for (uint32_t d = 0; d < D; d++)
					buf[d] = block(P, x / D * D + d, y);
			rc = coll_schedule_add_transfer(s, x, y, COLL_OP_COPY, buf, n);
		}
	}
	free(buf);
	if (rc)
		coll_schedule_free(s);
	return rc;
}

/*
 * Far beyond what can be summed round by round: every inter-server round as its worst case,
 * its busiest circuit carrying circuit_load() messages that all hop at both ends, and an
 * in-server link carrying two of them (one leaving its device, one arriving: one port per
 * device). An upper bound of the round-by-round price, equal to it whenever some round has
 * both (docs/cost-model.md).
 */
static double bound_alltoall(enum coll_algorithm a, const struct coll_params *p, double q,
                             uint32_t S, uint32_t D)
{
	double P = (double)S * D, ai = p->intra_alpha_us, bi = coll_beta_intra(p);
	double b = coll_beta(p), m = circuit_load(S, D);
	double in = a == COLL_ALG_DIRECT ? q / P : q / D;  /* an in-server message */
	double out = a == COLL_ALG_DIRECT ? q / P : q / S; /* an inter-server message */
	double inter = a == COLL_ALG_DIRECT ? (double)(S - 1) * D : S - 1;
	double hops = D > 1 ? 2 : 0;

	return (D - 1) * (ai + in * bi) +
	       inter * (p->alpha_us + hops * ai + fmax(m * out * b, hops * out * bi));
}

int coll_price_alltoall(enum coll_algorithm a, const struct coll_params *p, double q, uint32_t S,
                        uint32_t D, struct coll_estimate *e)
{
	uint64_t P = (uint64_t)S * D;
	uint32_t rounds = coll_alltoall_rounds(a, S, D);
	double blk = q / (double)P, total = 0;
	struct coll_links links;
	int rc;

	coll_alltoall_counts(a, S, D, &e->inter_messages, &e->intra_messages);
	e->rounds = rounds;
	e->circuits = S - 1;
	if ((double)P * rounds > ALLTOALL_EXACT_FLOWS) {
		e->predicted_us = bound_alltoall(a, p, q, S, D);
		return 0;
	}
	rc = coll_links_init(&links, p, S, D, (uint32_t)P);
	if (rc)
		return rc;
	for (uint32_t r = 0; r < rounds; r++) {
		for (uint64_t x = 0; x < P; x++) {
			uint32_t n;
			uint64_t y = coll_alltoall_step(a, S, D, r, x, &n);

			coll_links_add(&links, (uint32_t)x, (uint32_t)y, n * blk);
		}
		total += coll_links_round(&links);
	}
	coll_links_free(&links);
	e->predicted_us = total;
	return 0;
}

int coll_alltoall_counts(enum coll_algorithm a, uint32_t servers, uint32_t devices, uint64_t *inter,
                         uint64_t *intra)
{
	uint64_t SD = (uint64_t)servers * devices, in, out;

	if (!servers || !devices || (a != COLL_ALG_DIRECT && a != COLL_ALG_PLANE_RELAYED))
		return -EINVAL;
	if (__builtin_mul_overflow(SD, (uint64_t)devices - 1, &in) ||
	    __builtin_mul_overflow(SD, (uint64_t)servers - 1, &out) ||
	    (a == COLL_ALG_DIRECT && __builtin_mul_overflow(out, (uint64_t)devices, &out)))
		return -EOVERFLOW;
	*inter = out;
	*intra = in;
	return 0;
}

uint64_t coll_alltoall_flows(enum coll_algorithm a, uint32_t S, uint32_t D)
{
	double flows = (double)S * D * coll_alltoall_rounds(a, S, D);

	return flows > ALLTOALL_EXACT_FLOWS ? 0 : (uint64_t)flows;
}

int coll_alltoall_profile(enum coll_algorithm a, const struct coll_params *p, double q, uint32_t S,
                          uint32_t D, struct coll_profile *out)
{
	uint64_t P = (uint64_t)S * D;
	uint32_t rounds = coll_alltoall_rounds(a, S, D);
	double blk = q / (double)P;
	struct coll_links links;
	int rc;

	memset(out, 0, sizeof(*out));
	if (a != COLL_ALG_DIRECT && a != COLL_ALG_PLANE_RELAYED)
		return -EINVAL;
	if ((double)P * rounds > ALLTOALL_EXACT_FLOWS)
		return -E2BIG;
	/* Record the host links' loads whatever their rate: a fit may give them one. */
	struct coll_params q1 = *p;
	q1.device_link_gbps = 1;
	rc = coll_links_init(&links, &q1, S, D, (uint32_t)P);
	for (uint32_t r = 0; r < rounds && !rc; r++) {
		for (uint64_t x = 0; x < P; x++) {
			uint32_t n;
			uint64_t y = coll_alltoall_step(a, S, D, r, x, &n);

			coll_links_add(&links, (uint32_t)x, (uint32_t)y, n * blk);
		}
		rc = coll_links_round_profile(&links, out);
	}
	coll_links_free(&links);
	if (rc)
		coll_profile_free(out);
	return rc;
}
