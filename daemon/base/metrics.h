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
 * string, e.g. "/v1/ocs/{name}") or "unmatched"; seconds is its latency, or
 * negative for a request whose length is not a latency (an event stream):
 * counted, kept out of the latency histogram.
 */
void metrics_request(const char *route, const char *method, unsigned status, double seconds);

/** Observes the latency of one store COMMIT. */
void metrics_observe_commit(double seconds);

/**
 * Observes one stage of a write the cluster's leader replicates, in the
 * histogram ofcd_cluster_write_stage_seconds{stage}: stage is a static
 * string, "handler" (the handler and its changeset), "log" (an entry's round
 * trip through etcd, from its first send to its answer) or "apply" (the
 * change applied to this member's store).
 */
void metrics_observe_write_stage(const char *stage, double seconds);

/** Adjusts the open HTTP connections gauge by delta. */
void metrics_connections(int delta);

/**
 * Adds v to a counter named name (a static string such as
 * "ofcd_drift_repairs_total"), with help text, created on first use. A
 * module adds 0 to its counters when it starts, so each is shown from 0 on
 * (an alert on its increase then sees the first one). label may be NULL or
 * "key=\"value\"" (static or copied).
 */
void metrics_counter_add(const char *name, const char *help, const char *label, double v);

/**
 * Adds v (negative: takes it) to a gauge named name (a static string), with
 * help text, created on first use: for a value the loop itself keeps up to
 * date as things start and end.
 */
void metrics_gauge_add(const char *name, const char *help, double v);

/**
 * Where a collector writes its samples while the metrics are rendered (see
 * metrics_collector_add()). Only valid during the collector's call.
 */
struct metrics_out;

/** Writes the gauges a module knows the value of only when asked. */
typedef void (*metrics_collect_fn)(void *arg, struct metrics_out *out);

/**
 * Calls fn(arg, out) at every rendering, after the built-in metrics; the
 * pair must be removed (metrics_collector_remove()) before arg goes. Returns
 * 0, or -ENOSPC when too many are registered.
 */
int metrics_collector_add(metrics_collect_fn fn, void *arg);

/** Removes a collector added with the same fn and arg. */
void metrics_collector_remove(metrics_collect_fn fn, void *arg);

/** Starts a metric family in out: its HELP and TYPE ("gauge", "counter") lines. */
void metrics_family(struct metrics_out *out, const char *name, const char *type, const char *help);

/**
 * One sample of the family last started: labels is "" or `key="value",...`
 * (values need no escaping: callers pass names of [A-Za-z0-9._-]).
 */
void metrics_sample(struct metrics_out *out, const char *name, const char *labels, double v);
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
