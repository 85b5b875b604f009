/*
 * Schedules of the HyperX and torus algorithms, dimension by dimension. One participant per
 * server; chunk c (of M, or of 2M on a torus: half h is chunk h M + c) is named by the
 * server whose coordinates equal its own, which is where the reduce-scatter leaves it.
 * Derivations: docs/cost-model.md, "Collectives over HyperX and torus fabrics".
 */
#include "coll_internal.h"

#include <errno.h>
#include <stdlib.h>

/*
 * Chunks base + c (c < M) whose coordinate i is @grp and whose coordinate l equals want[l] on
 * every l of @fixed (a bit per dimension), into @out; returns how many.
 */
static uint32_t pick(const struct coll_grid *g, uint32_t base, uint32_t i, uint32_t grp,
                     const uint32_t *want, uint32_t fixed, uint32_t *out)
{
	uint32_t n = 0;

	for (uint32_t c = 0; c < g->M; c++) {
		int ok = coll_grid_coord(g, c, i) == grp;

		for (uint32_t l = 0; ok && l < g->dims; l++)
			if (fixed >> l & 1)
				ok = coll_grid_coord(g, c, l) == want[l];
		if (ok)
			out[n++] = base + c;
	}
	return n;
}

/* Bits of the dimensions below @i, and of those above it. */
static uint32_t below(uint32_t i)
{
	return (1u << i) - 1;
}

static uint32_t above(const struct coll_grid *g, uint32_t i)
{
	return ((1u << g->dims) - 1) & ~((1u << (i + 1)) - 1);
}

static void coords(const struct coll_grid *g, uint32_t s, uint32_t *want)
{
	for (uint32_t l = 0; l < g->dims; l++)
		want[l] = coll_grid_coord(g, s, l);
}

/*
 * HyperX, one full mesh per line. Reduce-scatter along dimension i: s sends each line peer
 * (coordinate v) the chunks that agree with s below i and have coordinate v. Allgather in
 * reverse: s sends every line peer the chunks that agree with s up to i. A broadcast scatters
 * like the reduce-scatter, from the servers that already hold the root's data.
 */
static int hx_phase(struct coll_schedule *s, const struct coll_grid *g, uint32_t i, int gather,
                    enum coll_op op, const uint32_t *root, uint32_t *buf)
{
	int rc = coll_schedule_add_round(s);

	for (uint32_t x = 0; x < g->M && !rc; x++) {
		uint32_t want[COLL_MAX_DIMS], xi = coll_grid_coord(g, x, i);
		int holds = 1;

		coords(g, x, want);
		for (uint32_t l = i; root && l < g->dims; l++)
			holds = holds && want[l] == root[l];
		if (!holds)
			continue;
		for (uint32_t v = 0; v < g->k[i] && !rc; v++) {
			uint32_t n;

			if (v == xi)
				continue;
			n = pick(g, 0, i, gather ? xi : v, want, below(i), buf);
			rc = coll_schedule_add_transfer(s, x, coll_grid_move(g, x, i, v), op, buf,
			                                n);
		}
	}
	return rc;
}

static int gen_hyperx(struct coll_schedule *s, enum coll_collective c, const struct coll_grid *g,
                      uint32_t root, uint32_t *buf)
{
	uint32_t r[COLL_MAX_DIMS];
	int rc = 0;

	coords(g, root, r);
	if (c == COLL_ALLGATHER) {
		/* Server x's block spreads along each dimension in turn. */
		for (uint32_t i = 0; i < g->dims && !rc; i++) {
			if (g->k[i] < 2)
				continue;
			rc = coll_schedule_add_round(s);
			for (uint32_t x = 0; x < g->M && !rc; x++) {
				uint32_t want[COLL_MAX_DIMS], xi = coll_grid_coord(g, x, i);

				coords(g, x, want);
				uint32_t n = pick(g, 0, i, xi, want, above(g, i), buf);
				for (uint32_t v = 0; v < g->k[i] && !rc; v++)
					if (v != xi)
						rc = coll_schedule_add_transfer(
						    s, x, coll_grid_move(g, x, i, v), COLL_OP_COPY,
						    buf, n);
			}
		}
		return rc;
	}
	for (uint32_t i = 0; i < g->dims && !rc; i++)
		if (g->k[i] > 1)
			rc = hx_phase(s, g, i, 0,
			              c == COLL_ALLREDUCE ? COLL_OP_REDUCE : COLL_OP_COPY,
			              c == COLL_BROADCAST ? r : NULL, buf);
	for (uint32_t i = g->dims; i-- > 0 && !rc;)
		if (g->k[i] > 1)
			rc = hx_phase(s, g, i, 1, COLL_OP_COPY, NULL, buf);
	return rc;
}

/*
 * Torus: half 0 of the data rides the ring v -> v+1 of each dimension, half 1 the ring
 * v -> v-1 (the same circuits, the other direction); a dimension of 2 has one circuit, so
 * both halves ride it in one message. own() is the group a ring's reduce-scatter leaves at
 * coordinate v (position p of a ring completes group p + 1, coll_ring_rs_step()).
 */
static int two_rings(uint32_t k)
{
	return k >= 3;
}

static uint32_t own(uint32_t h, uint32_t v, uint32_t k)
{
	return h && two_rings(k) ? (2 * k - v + 1) % k : (v + 1) % k;
}

/*
 * Group coordinate v sends at step t of a ring reduce-scatter (@ag: of the allgather after
 * it, shift 1): a ring's chunk labels are the group coordinates, so own() above holds.
 */
static uint32_t ring_group(uint32_t h, uint32_t v, uint32_t k, uint32_t t, int ag)
{
	uint32_t p = h && two_rings(k) ? (k - v) % k : v; /* position on the ring */

	return (p + (ag ? 1 : 0) + k - t % k) % k;
}

static int torus_step(struct coll_schedule *s, const struct coll_grid *g, uint32_t i, uint32_t t,
                      int ag, enum coll_op op, uint32_t *buf)
{
	uint32_t k = g->k[i];
	int rc = coll_schedule_add_round(s);

	for (uint32_t x = 0; x < g->M && !rc; x++) {
		uint32_t v = coll_grid_coord(g, x, i), n = 0;

		for (uint32_t h = 0; h < 2 && !rc; h++) {
			uint32_t want[COLL_MAX_DIMS];

			for (uint32_t l = 0; l < i; l++)
				want[l] = own(h, coll_grid_coord(g, x, l), g->k[l]);
			n += pick(g, h * g->M, i, ring_group(h, v, k, t, ag), want, below(i),
			          buf + n);
			if (!two_rings(k) && !h)
				continue; /* both halves in one message */
			rc = coll_schedule_add_transfer(
			    s, x, coll_grid_move(g, x, i, h ? (v + k - 1) % k : (v + 1) % k), op,
			    buf, n);
			n = 0;
		}
	}
	return rc;
}

/* Allgather: coordinate v starts with its own group; the reversed ring's positions turn. */
static int torus_gather_step(struct coll_schedule *s, const struct coll_grid *g, uint32_t i,
                             uint32_t t, uint32_t *buf)
{
	uint32_t k = g->k[i];
	int rc = coll_schedule_add_round(s);

	for (uint32_t x = 0; x < g->M && !rc; x++) {
		uint32_t want[COLL_MAX_DIMS], v = coll_grid_coord(g, x, i), n = 0;

		coords(g, x, want);
		for (uint32_t h = 0; h < 2 && !rc; h++) {
			int back = h && two_rings(k);
			uint32_t grp = back ? (v + t) % k : (v + k - t % k) % k;

			n += pick(g, h * g->M, i, grp, want, above(g, i), buf + n);
			if (!two_rings(k) && !h)
				continue;
			rc = coll_schedule_add_transfer(
			    s, x, coll_grid_move(g, x, i, back ? (v + k - 1) % k : (v + 1) % k),
			    COLL_OP_COPY, buf, n);
			n = 0;
		}
	}
	return rc;
}

/*
 * Broadcast's scatter along dimension i, step t (1 to k - 1), one ring per half: the servers
 * that hold the root's data (coordinates past i the root's) and those within t - 1 hops
 * after them pass on the group bound furthest, which arrives at step k - 1. A ring's group
 * g ends at position g - 1, where the reduce-scatter leaves it (own()), so the allgather of
 * the allreduce follows unchanged.
 */
static int torus_scatter_step(struct coll_schedule *s, const struct coll_grid *g, uint32_t i,
                              uint32_t t, const uint32_t *root, uint32_t *buf)
{
	uint32_t k = g->k[i];
	int rc = coll_schedule_add_round(s);

	for (uint32_t x = 0; x < g->M && !rc; x++) {
		uint32_t want[COLL_MAX_DIMS], v = coll_grid_coord(g, x, i), n = 0;
		int holds = 1;

		for (uint32_t l = i + 1; l < g->dims; l++)
			holds = holds && coll_grid_coord(g, x, l) == root[l];
		for (uint32_t l = 0; l < i; l++)
			want[l] = 0;
		for (uint32_t h = 0; h < 2 && holds && !rc; h++) {
			int back = h && two_rings(k);
			/* Positions along half h's ring: v, or k - v the other way round. */
			uint32_t from = back ? (k - root[i]) % k : root[i];
			uint32_t at = back ? (k - v) % k : v, hops = (at + k - from) % k;

			for (uint32_t l = 0; l < i; l++)
				want[l] = own(h, coll_grid_coord(g, x, l), g->k[l]);
			if (hops < t)
				n += pick(g, h * g->M, i, (at + k + 1 - t) % k, want, below(i),
				          buf + n);
			if (!two_rings(k) && !h)
				continue;
			if (n)
				rc = coll_schedule_add_transfer(
				    s, x,
				    coll_grid_move(g, x, i, back ? (v + k - 1) % k : (v + 1) % k),
				    COLL_OP_COPY, buf, n);
			n = 0;
		}
	}
	return rc;
}

static int gen_torus(struct coll_schedule *s, enum coll_collective c, const struct coll_grid *g,
                     uint32_t root, uint32_t *buf)
{
	uint32_t r[COLL_MAX_DIMS];
	int rc = 0;

	if (c == COLL_ALLGATHER) {
		for (uint32_t i = 0; i < g->dims && !rc; i++)
			for (uint32_t t = 0; t + 1 < g->k[i] && !rc; t++)
				rc = torus_gather_step(s, g, i, t, buf);
		return rc;
	}
	coords(g, root, r);
	for (uint32_t i = 0; i < g->dims && !rc; i++)
		for (uint32_t t = 0; t + 1 < g->k[i] && !rc; t++)
			rc = c == COLL_BROADCAST ? torus_scatter_step(s, g, i, t + 1, r, buf)
			                         : torus_step(s, g, i, t, 0, COLL_OP_REDUCE, buf);
	for (uint32_t i = g->dims; i-- > 0 && !rc;)
		for (uint32_t t = 0; t + 1 < g->k[i] && !rc; t++)
			rc = torus_step(s, g, i, t, 1, COLL_OP_COPY, buf);
	return rc;
}

int coll_gen_shape(enum coll_collective c, enum coll_algorithm a, const struct coll_params *p,
                   uint32_t servers, uint32_t devices, uint64_t bytes, struct coll_schedule *s)
{
	uint32_t halves = a == COLL_ALG_TORUS_RING ? 2 : 1;
	struct coll_grid g;
	uint32_t *buf;
	int rc;

	coll_grid_of(&p->shape, servers, &g);
	if (c == COLL_ALLTOALL) {
		/* A server carries the buffers of its devices (docs/cost-model.md). */
		rc = coll_gen_shape_a2a(a, &g, bytes * devices, s);
		if (!rc)
			s->shape = p->shape;
		return rc;
	}
	rc = coll_schedule_init(s, c, (int)a, servers, 1, halves * servers);
	if (rc)
		return rc;
	s->bytes = bytes;
	s->shape = p->shape;
	coll_chunks_even(s, bytes, c == COLL_BROADCAST ? p->root : COLL_EVERY);
	if (c == COLL_ALLGATHER)
		for (uint32_t ch = 0; ch < s->nchunks; ch++)
			s->chunks[ch].origin = ch % servers;
	buf = malloc(2 * (size_t)servers * sizeof(*buf));
	if (!buf) {
		coll_schedule_free(s);
		return -ENOMEM;
	}
	rc = a == COLL_ALG_HYPERX_DIM ? gen_hyperx(s, c, &g, p->root, buf)
	                              : gen_torus(s, c, &g, p->root, buf);
	free(buf);
	if (rc)
		coll_schedule_free(s);
	return rc;
}
