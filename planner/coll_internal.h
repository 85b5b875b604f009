/*
 * Shared between the planner/coll*.c files only; not part of the public API (coll.h).
 * Same rules: pure, reentrant, any thread.
 */
#ifndef OFCD_COLL_INTERNAL_H
#define OFCD_COLL_INTERNAL_H

#include "coll.h"

/** Most participants of a checkable all-to-all schedule (its chunks grow as participants²). */
#define COLL_MAX_ALLTOALL_PARTICIPANTS 64u

/** Set @err (may be NULL) to @field and the formatted reason. */
void coll_err_set(struct coll_error *err, const char *field, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

/** Size of chunk @c when @bytes are cut into @n chunks (the first bytes % n get one more). */
uint64_t coll_chunk_size(uint64_t bytes, uint32_t n, uint32_t c);

/** Set every chunk of @s to origin @origin, dest COLL_EVERY and an even share of @bytes. */
void coll_chunks_even(struct coll_schedule *s, uint64_t bytes, uint32_t origin);

/** 1 when @x is a power of two (x > 0). */
static inline int coll_is_pow2(uint32_t x)
{
	return x && !(x & (x - 1));
}

/** ceil(log2(x)) for x >= 1. */
static inline uint32_t coll_ceil_log2(uint32_t x)
{
	uint32_t k = 0;

	while (k < 32 && (1ull << k) < x)
		k++;
	return k;
}

/**
 * Whether algorithm @a applies to collective @c and fits @servers x @devices (shape only, no
 * capabilities or ports). Returns 0, -EINVAL (does not apply, bad size) or -EDOM (does not
 * fit), with a reason in @err.
 */
int coll_fit_shape(enum coll_collective c, enum coll_algorithm a, uint32_t servers,
                   uint32_t devices, struct coll_error *err);

/** Allreduce generators (ring, bidirectional-ring, rhd, full-mesh-direct, cube-300/400). */
int coll_gen_allreduce(enum coll_algorithm a, uint32_t servers, uint64_t bytes,
                       struct coll_schedule *s);

/** Allgather generators (ring, recursive-doubling, full-mesh-direct). */
int coll_gen_allgather(enum coll_algorithm a, uint32_t servers, uint64_t bytes,
                       struct coll_schedule *s);

/** Broadcast generators (binomial-tree, full-mesh-direct, scatter-allgather) from @root. */
int coll_gen_broadcast(enum coll_algorithm a, uint32_t servers, uint32_t root, uint64_t bytes,
                       struct coll_schedule *s);

/** All-to-all generators (direct, plane-relayed). */
int coll_gen_alltoall(enum coll_algorithm a, uint32_t servers, uint32_t devices, uint64_t bytes,
                      struct coll_schedule *s);

/**
 * Steps of a one-way ring over order[0..n-1] (n >= 2) on chunks base..base+n-1, appended to
 * the current round of @s. Reduce-scatter step t (0..n-2): position i reduces chunk
 * base + (i - t) mod n into position i+1, so position i ends with chunk base + (i+1) mod n
 * complete. Allgather step t (0..n-2): position i copies chunk base + (i + shift - t) mod n
 * to position i+1 (shift 1 after a reduce-scatter, 0 when position i starts with chunk i).
 * Return 0 or -ENOMEM / -EOVERFLOW.
 */
int coll_ring_rs_step(struct coll_schedule *s, const uint32_t *order, uint32_t n, uint32_t base,
                      uint32_t t);
int coll_ring_ag_step(struct coll_schedule *s, const uint32_t *order, uint32_t n, uint32_t base,
                      uint32_t shift, uint32_t t);

/*
 * Allgather by recursive doubling over M servers (a power of two), server i starting with
 * chunk i: log2(M) rounds, in round d each server copies its 2^d chunks to the partner
 * i ^ 2^d. @scratch holds at least M entries. Return 0 or -ENOMEM / -EOVERFLOW.
 */
int coll_rd_allgather(struct coll_schedule *s, uint32_t M, uint32_t *scratch);

#endif
