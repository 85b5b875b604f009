/*
 * Allreduce schedules: ring, bidirectional ring, recursive halving-doubling, full-mesh-direct
 * and the two cube methods of document 001. Every generated schedule passes coll_check().
 */
#include "coll_internal.h"

#include <errno.h>
#include <stdlib.h>

int coll_ring_rs_step(struct coll_schedule *s, const uint32_t *order, uint32_t n, uint32_t base,
                      uint32_t t)
{
	for (uint32_t i = 0; i < n; i++) {
		uint32_t c = base + (i + n - t % n) % n;
		int rc = coll_schedule_add_transfer(s, order[i], order[(i + 1) % n], COLL_OP_REDUCE,
		                                    &c, 1);

		if (rc)
			return rc;
	}
	return 0;
}

int coll_ring_ag_step(struct coll_schedule *s, const uint32_t *order, uint32_t n, uint32_t base,
                      uint32_t shift, uint32_t t)
{
	for (uint32_t i = 0; i < n; i++) {
		uint32_t c = base + (i + shift + n - t % n) % n;
		int rc = coll_schedule_add_transfer(s, order[i], order[(i + 1) % n], COLL_OP_COPY,
		                                    &c, 1);

		if (rc)
			return rc;
	}
	return 0;
}

int coll_rd_allgather(struct coll_schedule *s, uint32_t M, uint32_t *scratch)
{
	int rc = 0;

	for (uint32_t d = 1; d < M && !rc; d *= 2) {
		rc = coll_schedule_add_round(s);
		for (uint32_t i = 0; i < M && !rc; i++) {
			uint32_t lo = i & ~(d - 1);

			for (uint32_t k = 0; k < d; k++)
				scratch[k] = lo + k;
			rc = coll_schedule_add_transfer(s, i, i ^ d, COLL_OP_COPY, scratch, d);
		}
	}
	return rc;
}

/*
 * One ring, or two opposite rings over the two halves of the data: the second ring is the
 * first reversed, so a bidirectional circuit carries one transfer each way per round.
 */
static int gen_rings(struct coll_schedule *s, uint32_t M, int two)
{
	uint32_t *fwd = malloc(2 * (size_t)M * sizeof(*fwd));
	uint32_t *rev = fwd + M;
	int rc = 0;

	if (!fwd)
		return -ENOMEM;
	for (uint32_t i = 0; i < M; i++) {
		fwd[i] = i;
		rev[i] = (M - i) % M;
	}
	for (uint32_t t = 0; t + 1 < M && !rc; t++) {
		rc = coll_schedule_add_round(s);
		if (!rc)
			rc = coll_ring_rs_step(s, fwd, M, 0, t);
		if (!rc && two)
			rc = coll_ring_rs_step(s, rev, M, M, t);
	}
	for (uint32_t t = 0; t + 1 < M && !rc; t++) {
		rc = coll_schedule_add_round(s);
		if (!rc)
			rc = coll_ring_ag_step(s, fwd, M, 0, 1, t);
		if (!rc && two)
			rc = coll_ring_ag_step(s, rev, M, M, 1, t);
	}
	free(fwd);
	return rc;
}

/*
 * Rabenseifner: reduce-scatter by recursive halving (partner at distance M/2 first, each
 * step hands over the half of the current range that the partner keeps), then allgather by
 * recursive doubling. Server i ends the first phase with chunk i complete.
 */
static int gen_rhd(struct coll_schedule *s, uint32_t M)
{
	uint32_t *ch = malloc((size_t)M * sizeof(*ch));
	int rc = 0;

	if (!ch)
		return -ENOMEM;
	for (uint32_t d = M / 2; d >= 1 && !rc; d /= 2) {
		rc = coll_schedule_add_round(s);
		for (uint32_t i = 0; i < M && !rc; i++) {
			uint32_t j = i ^ d;
			uint32_t lo = (i & ~(2 * d - 1)) | (j & d);

			for (uint32_t k = 0; k < d; k++)
				ch[k] = lo + k;
			rc = coll_schedule_add_transfer(s, i, j, COLL_OP_REDUCE, ch, d);
		}
	}
	if (!rc)
		rc = coll_rd_allgather(s, M, ch);
	free(ch);
	return rc;
}

/*
 * Only a full interconnection allows this: every server sends chunk j straight to server j
 * over its M-1 circuits at once (reduce-scatter in one round), then server j sends the
 * complete chunk j back to everyone (allgather in one round).
 */
static int gen_full_mesh(struct coll_schedule *s, uint32_t M)
{
	int rc = coll_schedule_add_round(s);

	for (uint32_t i = 0; i < M && !rc; i++)
		for (uint32_t j = 0; j < M && !rc; j++)
			if (i != j)
				rc = coll_schedule_add_transfer(s, i, j, COLL_OP_REDUCE, &j, 1);
	if (!rc)
		rc = coll_schedule_add_round(s);
	for (uint32_t j = 0; j < M && !rc; j++)
		for (uint32_t i = 0; i < M && !rc; i++)
			if (i != j)
				rc = coll_schedule_add_transfer(s, j, i, COLL_OP_COPY, &j, 1);
	return rc;
}

/*
 * The cube of document 001. Node index = coordinates: bit 0 = x, bit 1 = y, bit 2 = z, so
 * a=0 b=1 d=2 c=3 e=4 f=5 h=6 g=7 and the opposite node along axis k is node ^ (1 << k).
 * Face (k, v) holds the nodes whose bit k is v; the two faces of axis k share segment k,
 * chunks 4k .. 4k+3 (segment 0 = faces adeh/bcgf, 1 = abef/dchg, 2 = abcd/efgh).
 *
 * Every face turns the same way seen from outside the cube (right-hand rule, thumb out),
 * which makes the two faces sharing an edge use it in opposite directions: 24 directed
 * edges, 6 rings of 4. This gives abcd a->d->c->b, abef a->b->f->e and adeh a->e->h->d (the
 * spec page's correction of the raw text).
 *
 * After the ring reduce-scatter, position p of a ring holds sub-chunk (p + 1) mod 4 complete
 * over its face. Positions {0,1} and {2,3} are the pairs of phase 2. The face (k, 0) starts
 * its ring where the pair edges run along axis PAIR_AXIS[k]; the face (k, 1) numbers its
 * ring so that node x' = x ^ (1 << k) sits at position (1 - pos(x)) mod 4. Then x' completes
 * the sub-chunk that x's partner completes, which is what both phase 2 variants need, and
 * since PAIR_AXIS is a derangement of the axes every edge is a pair edge of exactly one face
 * (and a non-pair edge of exactly one other).
 */
static const uint32_t PAIR_AXIS[3] = { 1, 2, 0 };

static void cube_face_order(uint32_t k, uint32_t v, uint32_t order[4])
{
	static const uint32_t pos_cycle[4][2] = { { 0, 0 }, { 1, 0 }, { 1, 1 }, { 0, 1 } };
	uint32_t i = (k + 1) % 3, j = (k + 2) % 3;
	uint32_t cyc[4], st = 0;

	/* e_i x e_j = e_k, so pos_cycle turns positively about +k: right for v = 1 only. */
	for (uint32_t p = 0; p < 4; p++) {
		uint32_t q = p;

		if (!v)
			q = (4 - p) % 4;
		cyc[p] = v << k | pos_cycle[q][0] << i | pos_cycle[q][1] << j;
	}
	if (!v) {
		while ((cyc[st] ^ cyc[(st + 1) % 4]) != 1u << PAIR_AXIS[k])
			st++;
		for (uint32_t p = 0; p < 4; p++)
			order[p] = cyc[(st + p) % 4];
		return;
	}
	cube_face_order(k, 0, cyc);
	for (uint32_t p = 0; p < 4; p++)
		order[(5 - p) % 4] = cyc[p] ^ 1u << k;
}

/* Add, for every face and ring position p, one transfer built by @fn. */
typedef int (*cube_step_fn)(struct coll_schedule *s, uint32_t k, const uint32_t order[4],
                            uint32_t p);

static int cube_round(struct coll_schedule *s, cube_step_fn fn)
{
	int rc = coll_schedule_add_round(s);

	for (uint32_t k = 0; k < 3 && !rc; k++)
		for (uint32_t v = 0; v < 2 && !rc; v++) {
			uint32_t order[4];

			cube_face_order(k, v, order);
			for (uint32_t p = 0; p < 4 && !rc; p++)
				rc = fn(s, k, order, p);
		}
	return rc;
}

/* Sub-chunk completed at ring position p by the reduce-scatter, as a chunk index. */
static uint32_t cube_done(uint32_t k, uint32_t p)
{
	return 4 * k + (p + 1) % 4;
}

/* 300, phase 2a: swap the completed sub-chunk with the opposite node. */
static int c300_swap_opposite(struct coll_schedule *s, uint32_t k, const uint32_t o[4], uint32_t p)
{
	uint32_t c = cube_done(k, p);

	return coll_schedule_add_transfer(s, o[p], o[p] ^ 1u << k, COLL_OP_COPY, &c, 1);
}

/* 300, phase 2b: 2-node reduce-scatter with the partner; the opposite face's part goes over. */
static int c300_pair_reduce(struct coll_schedule *s, uint32_t k, const uint32_t o[4], uint32_t p)
{
	uint32_t c = cube_done(k, p ^ 1);

	return coll_schedule_add_transfer(s, o[p], o[p ^ 1], COLL_OP_REDUCE, &c, 1);
}

/* 400, phase 2a: swap the completed sub-chunk with the partner. */
static int c400_swap_pair(struct coll_schedule *s, uint32_t k, const uint32_t o[4], uint32_t p)
{
	uint32_t c = cube_done(k, p);

	return coll_schedule_add_transfer(s, o[p], o[p ^ 1], COLL_OP_COPY, &c, 1);
}

/* 400, phase 2b: allreduce of the pair's two sub-chunks with the opposite node. */
static int c400_reduce_opposite(struct coll_schedule *s, uint32_t k, const uint32_t o[4],
                                uint32_t p)
{
	uint32_t c[2] = { cube_done(k, p), cube_done(k, p ^ 1) };

	return coll_schedule_add_transfer(s, o[p], o[p] ^ 1u << k, COLL_OP_REDUCE, c, 2);
}

/* 400, phase 3: one swap of the two complete sub-chunks with the other face neighbour. */
static int c400_swap_other(struct coll_schedule *s, uint32_t k, const uint32_t o[4], uint32_t p)
{
	uint32_t c[2] = { cube_done(k, p), cube_done(k, p ^ 1) };

	return coll_schedule_add_transfer(s, o[p], o[p ^ 3], COLL_OP_COPY, c, 2);
}

static int cube_ring_step(struct coll_schedule *s, int ag, uint32_t t)
{
	int rc = coll_schedule_add_round(s);

	for (uint32_t k = 0; k < 3 && !rc; k++)
		for (uint32_t v = 0; v < 2 && !rc; v++) {
			uint32_t order[4];

			cube_face_order(k, v, order);
			rc = ag ? coll_ring_ag_step(s, order, 4, 4 * k, 1, t)
			        : coll_ring_rs_step(s, order, 4, 4 * k, t);
		}
	return rc;
}

static int gen_cube(struct coll_schedule *s, int method400)
{
	int rc = 0;

	for (uint32_t t = 0; t < 3 && !rc; t++)
		rc = cube_ring_step(s, 0, t);
	if (rc)
		return rc;
	if (method400) {
		rc = cube_round(s, c400_swap_pair);
		if (!rc)
			rc = cube_round(s, c400_reduce_opposite);
		if (!rc)
			rc = cube_round(s, c400_swap_other);
		return rc;
	}
	rc = cube_round(s, c300_swap_opposite);
	if (!rc)
		rc = cube_round(s, c300_pair_reduce);
	for (uint32_t t = 0; t < 3 && !rc; t++)
		rc = cube_ring_step(s, 1, t);
	return rc;
}

int coll_gen_allreduce(enum coll_algorithm a, uint32_t servers, uint64_t bytes,
                       struct coll_schedule *s)
{
	uint32_t nchunks;
	int rc;

	switch (a) {
	case COLL_ALG_BIDIR_RING:
		nchunks = 2 * servers;
		break;
	case COLL_ALG_CUBE_300:
	case COLL_ALG_CUBE_400:
		nchunks = 12;
		break;
	default:
		nchunks = servers;
		break;
	}
	rc = coll_schedule_init(s, COLL_ALLREDUCE, (int)a, servers, 1, nchunks);
	if (rc)
		return rc;
	s->bytes = bytes;
	coll_chunks_even(s, bytes, COLL_EVERY);
	switch (a) {
	case COLL_ALG_RING:
		rc = gen_rings(s, servers, 0);
		break;
	case COLL_ALG_BIDIR_RING:
		rc = gen_rings(s, servers, 1);
		break;
	case COLL_ALG_RHD:
		rc = gen_rhd(s, servers);
		break;
	case COLL_ALG_FULL_MESH_DIRECT:
		rc = gen_full_mesh(s, servers);
		break;
	case COLL_ALG_CUBE_300:
	case COLL_ALG_CUBE_400:
		rc = gen_cube(s, a == COLL_ALG_CUBE_400);
		break;
	default:
		rc = -EINVAL;
		break;
	}
	if (rc)
		coll_schedule_free(s);
	return rc;
}
