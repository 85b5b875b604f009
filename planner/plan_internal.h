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

/** Target of server s on plane d under resolved formula (1 or 3). */
uint32_t plan_dst(uint32_t m, int formula, uint32_t s, uint32_t d);

#endif
