/*
 * Desired minus actual cross-connects of one OCS unit, as a batch that breaks
 * before it makes. Pure and reentrant.
 */
#ifndef OFCD_PLAN_DIFF_H
#define OFCD_PLAN_DIFF_H

#include <stddef.h>
#include <stdint.h>

/** A cross-connect between OCS ports a < b (same layout as struct ocs_xc). */
struct plan_xc {
	uint32_t a; /**< lower port */
	uint32_t b; /**< higher port */
};

/** One batch: remove del, then make add. Arrays owned by the batch (plan_batch_free). */
struct plan_batch {
	struct plan_xc *del; /**< cross-connects to remove, sorted */
	size_t ndel;         /**< entries in del */
	struct plan_xc *add; /**< cross-connects to make, sorted */
	size_t nadd;         /**< entries in add */
	size_t deferred;     /**< changes left for later batches (over max_ops) */
};

/**
 * Computes the next batch that turns actual into desired. Both inputs are
 * sorted by (a, b) without duplicates, with a < b. The batch holds every
 * removal before any addition: when the removals alone exceed max_ops, the
 * batch holds only removals (max_ops of them) and no addition, so an addition
 * never meets a port still joined elsewhere; otherwise all removals and as
 * many additions as fit. max_ops = 0 means no limit. Returns 0, -EINVAL for
 * unsorted input, or -ENOMEM.
 */
int plan_diff(const struct plan_xc *desired, size_t ndesired, const struct plan_xc *actual,
              size_t nactual, size_t max_ops, struct plan_batch *out);

/** Frees the batch's arrays. */
void plan_batch_free(struct plan_batch *b);

/** Orders cross-connects by (a, b), for qsort and bsearch. */
int plan_xc_cmp(const void *x, const void *y);

/**
 * Sorts v by (a, b) and drops repeated entries; returns how many remain.
 * Input already in order (what drivers usually return) costs one pass.
 */
size_t plan_xc_sort_unique(struct plan_xc *v, size_t n);

#endif
