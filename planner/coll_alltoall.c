/*
 * All-to-all across servers x devices: direct, and plane-relayed (document 002).
 * Participant x is device x % D of server x / D; its plane is its device index.
 */
#include "coll_internal.h"

#include <errno.h>
#include <stdlib.h>

/* Chunk of block i -> j (i != j). */
static uint32_t block(uint32_t P, uint32_t i, uint32_t j)
{
	return i * (P - 1) + (j < i ? j : j - 1);
}

/* Pairwise exchange: in round r every device sends its block to the device r places on. */
static int gen_direct(struct coll_schedule *s, uint32_t P)
{
	int rc = 0;

	for (uint32_t r = 1; r < P && !rc; r++) {
		rc = coll_schedule_add_round(s);
		for (uint32_t x = 0; x < P && !rc; x++) {
			uint32_t y = (x + r) % P;
			uint32_t c = block(P, x, y);

			rc = coll_schedule_add_transfer(s, x, y, COLL_OP_COPY, &c, 1);
		}
	}
	return rc;
}

/*
 * Phase 1 (D-1 rounds, in-server): device (s, d) hands its local device of plane p the
 * blocks for plane p of every server (the local one is delivered, the others wait there).
 * Phase 2 (S-1 rounds, one circuit per plane peer): relay (s, p) sends server t's plane-p
 * device one combined message with the blocks of every device of server s.
 */
static int gen_relayed(struct coll_schedule *s, uint32_t S, uint32_t D)
{
	uint32_t P = S * D;
	uint32_t *buf = malloc((size_t)(S > D ? S : D) * sizeof(*buf));
	int rc = 0;

	if (!buf)
		return -ENOMEM;
	for (uint32_t r = 1; r < D && !rc; r++) {
		rc = coll_schedule_add_round(s);
		for (uint32_t x = 0; x < P && !rc; x++) {
			uint32_t p = (x % D + r) % D;

			for (uint32_t t = 0; t < S; t++)
				buf[t] = block(P, x, t * D + p);
			rc = coll_schedule_add_transfer(s, x, x / D * D + p, COLL_OP_COPY, buf, S);
		}
	}
	for (uint32_t r = 1; r < S && !rc; r++) {
		rc = coll_schedule_add_round(s);
		for (uint32_t y = 0; y < P && !rc; y++) {
			uint32_t z = ((y / D + r) % S) * D + y % D;

			for (uint32_t d = 0; d < D; d++)
				buf[d] = block(P, y / D * D + d, z);
			rc = coll_schedule_add_transfer(s, y, z, COLL_OP_COPY, buf, D);
		}
	}
	free(buf);
	return rc;
}

int coll_gen_alltoall(enum coll_algorithm a, uint32_t servers, uint32_t devices, uint64_t bytes,
                      struct coll_schedule *s)
{
	uint32_t P = servers * devices;
	int rc;

	if (a != COLL_ALG_DIRECT && a != COLL_ALG_PLANE_RELAYED)
		return -EINVAL;
	rc = coll_schedule_init(s, COLL_ALLTOALL, (int)a, servers, devices, P * (P - 1));
	if (rc)
		return rc;
	s->bytes = bytes;
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
	rc = a == COLL_ALG_DIRECT ? gen_direct(s, P) : gen_relayed(s, servers, devices);
	if (rc)
		coll_schedule_free(s);
	return rc;
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
