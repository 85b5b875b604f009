/*
 * Process metrics in the Prometheus text exposition format (GET /metrics).
 *
 * A process-wide registry: ofcd has one loop thread and one set of metrics,
 * so the functions need no handle. Loop thread only.
 */
#ifndef OFCD_METRICS_H
#define OFCD_METRICS_H

#include <stdbool.h>
#include <stddef.h>
#include <time.h>

/**
 * Counts one finished HTTP request. route is the route pattern (a static
 * string, e.g. "/v1/ocs/{name}") or "unmatched"; seconds is its latency.
 */
void metrics_request(const char *route, const char *method, unsigned status, double seconds);

/** Observes the latency of one store COMMIT. */
void metrics_observe_commit(double seconds);

/** Adjusts the open HTTP connections gauge by delta. */
void metrics_connections(int delta);

/**
 * Adds v to a counter named name (a static string such as
 * "ofcd_drift_repairs_total"), with help text, created on first use.
 * label may be NULL or "key=\"value\"" (static or copied).
 */
void metrics_counter_add(const char *name, const char *help, const char *label, double v);

/** A loop callback being timed: see metrics_loop_enter(). */
struct metrics_loop {
	struct timespec t0; /**< when it started (CLOCK_MONOTONIC) */
	const char *where;  /**< what runs (static string), the histogram's label */
	bool outer;         /**< not nested in another timed callback */
};

/**
 * Starts timing a callback of the loop (one the daemon registered: HTTP,
 * reconciler, timers, signals). where is a static string naming it ("http",
 * "reconcile", ...). A callback nested in another timed one is not counted on
 * its own. Loop thread only.
 */
struct metrics_loop metrics_loop_enter(const char *where);

/**
 * Ends it: its duration goes to the histogram ofcd_loop_busy_seconds{callback}
 * (every request, read-back and timer waits behind it), and one over 100 ms is
 * logged as a stall.
 */
void metrics_loop_leave(struct metrics_loop l);

/** Renders every metric. Returns malloc'd text (caller frees) and its length, or NULL. */
char *metrics_render(size_t *len);

/** Forgets every value (tests). */
void metrics_reset(void);

#endif
