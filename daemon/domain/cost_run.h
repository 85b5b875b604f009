/*
 * Measured runs of collectives collected for calibration (table cost_run, migration 018):
 * what servers' agents send (POST /v1/servers/{name}/runs), kept up to COST_RUN_KEEP, newest
 * last, for POST /v1/cost/calibrate's "collected" (docs/cost-model.md, "Collected runs").
 *
 * Event-loop thread only (the store is not shared). JSON returned is a new reference the
 * caller owns.
 */
#ifndef OFCD_COST_RUN_H
#define OFCD_COST_RUN_H

#include <stdint.h>

#include <jansson.h>

#include "base/errors.h"
#include "coll_fit.h"
#include "state/store.h"

/** Runs kept: a post that would pass it drops the oldest. One calibration's worth. */
#define COST_RUN_KEEP 4000u

/** Which collected runs: each member 0 or NULL when it does not narrow. */
struct cost_run_filter {
	const char *fabric;    /**< measured on this fabric (borrowed) */
	const char *collector; /**< sent for this server (borrowed) */
	int64_t since;         /**< ids from this one on */
	int64_t before;        /**< ids below this one */
};

/** Where a batch of runs came from, as stored beside each of them. */
struct cost_run_origin {
	const char *collector;     /**< the server they were sent for (borrowed) */
	const char *batch;         /**< the sender's name for the post, or NULL (borrowed) */
	const char *fabric;        /**< the fabric named, or NULL (borrowed) */
	uint32_t ports_per_device; /**< that fabric's busiest device, 0 when not known */
};

/**
 * Stores runs[0..n) from @o (the caller's transaction), dropping the oldest beyond
 * COST_RUN_KEEP. *first gets the first new id, *dropped how many old runs went. -EIO.
 */
int cost_run_add(struct store *s, const struct coll_run *runs, uint32_t n,
                 const struct cost_run_origin *o, int64_t *first, uint32_t *dropped,
                 struct ofcd_error *e);

/**
 * The runs stored from batch @o->batch of @o->collector: their ids' range into *first..*last.
 * Returns how many (0 when none, or when @o has no batch), or -EIO.
 */
int64_t cost_run_batch(struct store *s, const struct cost_run_origin *o, int64_t *first,
                       int64_t *last);

/** The runs @f selects, oldest first, at most @limit, as JSON objects; NULL on error. */
json_t *cost_run_list(struct store *s, const struct cost_run_filter *f, uint32_t limit);

/** How many runs @f selects (NULL: every one), or -EIO. */
int64_t cost_run_count(struct store *s, const struct cost_run_filter *f);

/**
 * The runs @f selects, oldest first, into @runs and their ids into @ids (room for @max in
 * each); the range of the ids into
 * *lo..*hi, the ports per device they share into *ports (0: not known for any; UINT32_MAX
 * when they differ), and the collectors and fabrics among them into @who (a new object
 * {"collectors": [...], "fabrics": [...]}). Returns how many, or -EIO.
 */
int64_t cost_run_load(struct store *s, const struct cost_run_filter *f, struct coll_run *runs,
                      int64_t *ids, uint32_t max, int64_t *lo, int64_t *hi, uint32_t *ports,
                      json_t **who);

/** Deletes the runs @f selects; returns how many, or -EIO. */
int64_t cost_run_delete(struct store *s, const struct cost_run_filter *f);

#endif
