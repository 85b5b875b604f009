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
 * "ofcd_drift_repairs_total"), with help text, created on first use.
 * label may be NULL or "key=\"value\"" (static or copied).
 */
void metrics_counter_add(const char *name, const char *help, const char *label, double v);

/** Renders every metric. Returns malloc'd text (caller frees) and its length, or NULL. */
char *metrics_render(size_t *len);

/** Forgets every value (tests). */
void metrics_reset(void);

#endif
