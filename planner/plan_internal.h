/*
 * Helpers shared by the planner's .c files only; not part of the API.
 * Pure, reentrant, no allocation except where a function says so.
 */
#ifndef OFCD_PLAN_INTERNAL_H
#define OFCD_PLAN_INTERNAL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>

#include "plan.h"

/** Zeroed bitmap of nbits bits; caller frees with free(). NULL on ENOMEM. */
static inline uint64_t *plan_bits_new(size_t nbits)
{
	return calloc(nbits / 64 + 1, sizeof(uint64_t));
}

static inline bool plan_bit_get(const uint64_t *bits, size_t i)
{
	return (bits[i / 64] >> (i % 64)) & 1;
}

static inline void plan_bit_set(uint64_t *bits, size_t i)
{
	bits[i / 64] |= (uint64_t)1 << (i % 64);
}

/** Sets bit i and returns its previous value. */
static inline bool plan_bit_test_set(uint64_t *bits, size_t i)
{
	uint64_t mask = (uint64_t)1 << (i % 64);
	bool was = bits[i / 64] & mask;

	bits[i / 64] |= mask;
	return was;
}

/** Index of the unordered pair {a, b}, a < b < m, in an m * m pair bitmap. */
static inline size_t plan_pair_index(uint32_t m, uint32_t a, uint32_t b)
{
	return (size_t)a * m + b;
}

/**
 * Writes a one-line reason into why (len bytes; nothing when why is NULL or
 * len 0) and returns -EINVAL: the refusal of every checker and chooser.
 */
int plan_refuse(char *why, size_t len, const char *fmt, ...) __attribute__((format(printf, 3, 4)));

/** Target of server s on plane d under resolved formula (1 or 3). */
uint32_t plan_dst(uint32_t m, int formula, uint32_t s, uint32_t d);

/*
 * The grid of a checked shape, for walking and indexing its edges. Edge bits:
 * dimension i owns [base[i], base[i+1]); line l of it owns `per_line` bits
 * from base[i] + l * per_line: k * k for a full-mesh line (bit ja * k + jb for
 * ja < jb, which for the full mesh is plan_pair_index()), k for a ring (bit j
 * for the pair {j, j+1 mod k}).
 */
struct plan_grid {
	uint32_t m;
	uint32_t dims;
	bool ring;                      /* torus: lines are rings */
	uint32_t k[PLAN_MAX_DIMS];      /* servers along each dimension */
	uint32_t stride[PLAN_MAX_DIMS]; /* server index step of one position along it */
	size_t base[PLAN_MAX_DIMS + 1]; /* first edge bit of each dimension; base[dims]: all */
	size_t nedges;                  /* edges of the shape: pairs it joins */
};

/** Fills g from a shape that passed plan_shape_check(). */
void plan_grid_init(struct plan_grid *g, const struct plan_shape *sh);

/** Coordinate i of server s. */
static inline uint32_t plan_grid_coord(const struct plan_grid *g, uint32_t s, uint32_t i)
{
	return s / g->stride[i] % g->k[i];
}

/** Index of the line of dimension i through server s, 0 .. m / k[i] - 1. */
static inline size_t plan_grid_line(const struct plan_grid *g, uint32_t s, uint32_t i)
{
	uint32_t span = g->stride[i] * g->k[i];

	return (size_t)(s / span) * g->stride[i] + s % g->stride[i];
}

/**
 * Edge bit of positions ja < jb on line `line` of dimension i, or SIZE_MAX when
 * the two are not joined by the shape (not ring neighbours).
 */
static inline size_t plan_grid_edge_at(const struct plan_grid *g, uint32_t i, size_t line,
                                       uint32_t ja, uint32_t jb)
{
	uint32_t k = g->k[i];

	if (!g->ring)
		return g->base[i] + line * k * k + (size_t)ja * k + jb;
	if (jb == ja + 1)
		return g->base[i] + line * k + ja;
	if (ja == 0 && jb == k - 1 && k >= 3)
		return g->base[i] + line * k + k - 1;
	return SIZE_MAX;
}

/** Edge bit of servers a < b (both < m), or SIZE_MAX when the shape does not join them. */
size_t plan_grid_edge(const struct plan_grid *g, uint32_t a, uint32_t b);

/**
 * Partners b > a of server a on the shape, in increasing order, into out
 * (room for the sum of k[i] entries), with their edge bits in bit (may be
 * NULL); returns how many.
 */
uint32_t plan_grid_up(const struct plan_grid *g, uint32_t a, uint32_t *out, size_t *bit);

/** Sum of k[i]: room plan_grid_up() needs. */
static inline uint32_t plan_grid_kmax(const struct plan_grid *g)
{
	uint32_t n = 0;

	for (uint32_t i = 0; i < g->dims; i++)
		n += g->k[i];
	return n;
}

#endif
