/*
 * Process metrics in the Prometheus text exposition format (GET /metrics).
 *
 * A process-wide registry: ofcd has one loop thread and one set of metrics,
 * so the functions need no handle. Loop thread only.
 */
#ifndef OFCD_METRICS_H
#define OFCD_METRICS_H

#include <stddef.h>

/**
 * Counts one finished HTTP request. route is the route pattern (a static
 * string, e.g. "/v1/ocs/{name}") or "unmatched"; seconds is its latency, or
 * negative for a request whose length is not a latency (an event stream):
 * counted, kept out of the latency histogram.
 */
void metrics_request(const char *route, const char *method, unsigned status, double seconds);

/** Observes the latency of one store COMMIT. */
void metrics_observe_commit(double seconds);

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

/** Renders every metric. Returns malloc'd text (caller frees) and its length, or NULL. */
char *metrics_render(size_t *len);

/** Forgets every value (tests). */
void metrics_reset(void);

#endif
