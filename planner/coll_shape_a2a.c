/*
 * All-to-all on HyperX and torus fabrics by dimension-ordered forwarding: in phase i every
 * block moves along dimension i from its origin's coordinate to its destination's, relayed by
 * the servers in between. One participant per server; block o -> j is chunk
 * o (M - 1) + (j < o ? j : j - 1), as in coll_alltoall.c. Derivations: docs/cost-model.md,
 * "Collectives over HyperX and torus fabrics".
 */
#include "coll_internal.h"

#include <errno.h>
#include <stdlib.h>

static uint32_t block(uint32_t M, uint32_t o, uint32_t j)
{
	return o * (M - 1) + (j < o ? j : j - 1);
}

/*
 * Where block o -> j sits during phase i, before it moves along dimension i: the destination's
 * coordinates below i, the origin's from i on. Returns whether that is server @x.
 */
static int sits_at(const struct coll_grid *g, uint32_t i, uint32_t o, uint32_t j, uint32_t x)
{
	for (uint32_t l = 0; l < g->dims; l++)
		if (l != i && coll_grid_coord(g, l < i ? j : o, l) != coll_grid_coord(g, x, l))
			return 0;
	return 1;
}

/*
 * The blocks that server x sends at step t (1-based) of phase i: HyperX, to coordinate @to
 * (one step, every line peer at once); torus clockwise (@dir 1) the blocks whose origin
 * coordinate u is t - 1 behind x and which go d = t..cw(k) steps ahead; counter-clockwise
 * (@dir -1) those that go t..ccw(k) steps back.
 */
static uint32_t blocks_of(enum coll_algorithm a, const struct coll_grid *g, uint32_t i, uint32_t x,
                          uint32_t t, int dir, uint32_t to, uint32_t *out)
{
	uint32_t M = g->M, k = g->k[i], v = coll_grid_coord(g, x, i), n = 0;
	uint32_t u = dir > 0 ? (v + k - (t - 1) % k) % k : (v + t - 1) % k;
	uint32_t reach = dir > 0 ? coll_torus_cw(k) : coll_torus_ccw(k);

	for (uint32_t o = 0; o < M; o++) {
		if (coll_grid_coord(g, o, i) != (a == COLL_ALG_HYPERX_A2A ? v : u))
			continue;
		for (uint32_t j = 0; j < M; j++) {
			uint32_t ji = coll_grid_coord(g, j, i), d;

			if (j == o || !sits_at(g, i, o, j, x))
				continue;
			if (a == COLL_ALG_HYPERX_A2A) {
				if (ji == to)
					out[n++] = block(M, o, j);
				continue;
			}
			d = dir > 0 ? (ji + k - u) % k : (u + k - ji) % k;
			if (d >= t && d <= reach)
				out[n++] = block(M, o, j);
		}
	}
	return n;
}

static int a2a_phase(enum coll_algorithm a, struct coll_schedule *s, const struct coll_grid *g,
                     uint32_t i, uint32_t *buf)
{
	uint32_t k = g->k[i];
	uint32_t steps = a == COLL_ALG_HYPERX_A2A ? 1 : coll_torus_cw(k);
	int rc = 0;

	for (uint32_t t = 1; t <= steps && !rc; t++) {
		rc = coll_schedule_add_round(s);
		for (uint32_t x = 0; x < g->M && !rc; x++) {
			uint32_t v = coll_grid_coord(g, x, i), n;

			if (a == COLL_ALG_HYPERX_A2A) {
				for (uint32_t w = 0; w < k && !rc; w++) {
					if (w == v)
						continue;
					n = blocks_of(a, g, i, x, t, 1, w, buf);
					rc = coll_schedule_add_transfer(
					    s, x, coll_grid_move(g, x, i, w), COLL_OP_COPY, buf, n);
				}
				continue;
			}
			n = blocks_of(a, g, i, x, t, 1, 0, buf);
			rc = coll_schedule_add_transfer(s, x, coll_grid_move(g, x, i, (v + 1) % k),
			                                COLL_OP_COPY, buf, n);
			if (rc || t > coll_torus_ccw(k))
				continue;
			n = blocks_of(a, g, i, x, t, -1, 0, buf);
			rc = coll_schedule_add_transfer(
			    s, x, coll_grid_move(g, x, i, (v + k - 1) % k), COLL_OP_COPY, buf, n);
		}
	}
	return rc;
}

int coll_gen_shape_a2a(enum coll_algorithm a, const struct coll_grid *g, uint64_t bytes,
                       struct coll_schedule *s)
{
	uint32_t M = g->M;
	uint32_t *buf;
	int rc;

	if (a != COLL_ALG_HYPERX_A2A && a != COLL_ALG_TORUS_A2A)
		return -EINVAL;
	rc = coll_schedule_init(s, COLL_ALLTOALL, (int)a, M, 1, M * (M - 1));
	if (rc)
		return rc;
	s->bytes = bytes;
	for (uint32_t o = 0; o < M; o++)
		for (uint32_t j = 0; j < M; j++) {
			struct coll_chunk *ch;

			if (o == j)
				continue;
			ch = &s->chunks[block(M, o, j)];
			ch->origin = o;
			ch->dest = j;
			ch->bytes = coll_chunk_size(bytes, M, j);
		}
	buf = malloc((size_t)M * M * sizeof(*buf));
	if (!buf) {
		coll_schedule_free(s);
		return -ENOMEM;
	}
	for (uint32_t i = 0; i < g->dims && !rc; i++)
		if (g->k[i] > 1)
			rc = a2a_phase(a, s, g, i, buf);
	free(buf);
	if (rc)
		coll_schedule_free(s);
	return rc;
}
