/*
 * Allgather and broadcast schedules, the copy-only collectives.
 */
#include "coll_internal.h"

#include <errno.h>
#include <stdlib.h>

/* Server i contributes chunk i (an even share of the gathered size). */
static int gen_allgather(struct coll_schedule *s, enum coll_algorithm a, uint32_t M)
{
	uint32_t *buf;
	int rc = 0;

	buf = malloc((size_t)M * sizeof(*buf));
	if (!buf)
		return -ENOMEM;
	switch (a) {
	case COLL_ALG_RING:
		for (uint32_t i = 0; i < M; i++)
			buf[i] = i;
		for (uint32_t t = 0; t + 1 < M && !rc; t++) {
			rc = coll_schedule_add_round(s);
			if (!rc)
				rc = coll_ring_ag_step(s, buf, M, 0, 0, t);
		}
		break;
	case COLL_ALG_RECURSIVE_DOUBLING:
		rc = coll_rd_allgather(s, M, buf);
		break;
	case COLL_ALG_FULL_MESH_DIRECT:
		rc = coll_schedule_add_round(s);
		for (uint32_t i = 0; i < M && !rc; i++)
			for (uint32_t j = 0; j < M && !rc; j++)
				if (i != j)
					rc = coll_schedule_add_transfer(s, i, j, COLL_OP_COPY, &i,
					                                1);
		break;
	default:
		rc = -EINVAL;
		break;
	}
	free(buf);
	return rc;
}

int coll_gen_allgather(enum coll_algorithm a, uint32_t servers, uint64_t bytes,
                       struct coll_schedule *s)
{
	int rc = coll_schedule_init(s, COLL_ALLGATHER, (int)a, servers, 1, servers);

	if (rc)
		return rc;
	s->bytes = bytes;
	coll_chunks_even(s, bytes, 0);
	for (uint32_t c = 0; c < servers; c++)
		s->chunks[c].origin = c;
	rc = gen_allgather(s, a, servers);
	if (rc)
		coll_schedule_free(s);
	return rc;
}

/*
 * Binomial tree over ranks relative to the root: in round k every rank below 2^k that has
 * a rank 2^k above it forwards the whole message there.
 */
static int gen_binomial(struct coll_schedule *s, uint32_t M, uint32_t root)
{
	uint32_t c = 0;
	int rc = 0;

	for (uint64_t span = 1; span < M && !rc; span *= 2) {
		rc = coll_schedule_add_round(s);
		for (uint32_t v = 0; v < span && v + span < M && !rc; v++)
			rc = coll_schedule_add_transfer(s, (root + v) % M,
			                                (uint32_t)((root + v + span) % M),
			                                COLL_OP_COPY, &c, 1);
	}
	return rc;
}

/*
 * Over the full mesh: the root scatters chunk j to server j over its M-1 circuits, then
 * every server sends its chunk to every server still missing it (allgather in one round).
 */
static int gen_scatter_allgather(struct coll_schedule *s, uint32_t M, uint32_t root)
{
	int rc = coll_schedule_add_round(s);

	for (uint32_t j = 0; j < M && !rc; j++)
		if (j != root)
			rc = coll_schedule_add_transfer(s, root, j, COLL_OP_COPY, &j, 1);
	if (!rc)
		rc = coll_schedule_add_round(s);
	for (uint32_t j = 0; j < M && !rc; j++)
		for (uint32_t i = 0; i < M && !rc; i++)
			if (i != j && i != root)
				rc = coll_schedule_add_transfer(s, j, i, COLL_OP_COPY, &j, 1);
	return rc;
}

int coll_gen_broadcast(enum coll_algorithm a, uint32_t servers, uint32_t root, uint64_t bytes,
                       struct coll_schedule *s)
{
	uint32_t nchunks = a == COLL_ALG_SCATTER_ALLGATHER ? servers : 1;
	uint32_t c = 0;
	int rc;

	rc = coll_schedule_init(s, COLL_BROADCAST, (int)a, servers, 1, nchunks);
	if (rc)
		return rc;
	s->bytes = bytes;
	coll_chunks_even(s, bytes, root);
	switch (a) {
	case COLL_ALG_BINOMIAL_TREE:
		rc = gen_binomial(s, servers, root);
		break;
	case COLL_ALG_FULL_MESH_DIRECT:
		rc = coll_schedule_add_round(s);
		for (uint32_t j = 0; j < servers && !rc; j++)
			if (j != root)
				rc = coll_schedule_add_transfer(s, root, j, COLL_OP_COPY, &c, 1);
		break;
	case COLL_ALG_SCATTER_ALLGATHER:
		rc = gen_scatter_allgather(s, servers, root);
		break;
	default:
		rc = -EINVAL;
		break;
	}
	if (rc)
		coll_schedule_free(s);
	return rc;
}
