/*
 * The audit trail as GET /v1/audit reads it: one row per write request
 * (accepted or refused), written by store_audit() inside the request's unit
 * of work. Loop thread only, against the daemon's store.
 */
#ifndef OFCD_AUDIT_H
#define OFCD_AUDIT_H

#include <jansson.h>
#include <stdint.h>

struct store;

#define AUDIT_LIMIT_DEFAULT 100  /**< rows a read returns unless asked */
#define AUDIT_LIMIT_MAX     1000 /**< most rows one read returns */

/** Which rows to read: those after since_id, or from since_at on; oldest first. */
struct audit_query {
	int64_t since_id;     /**< rows with a larger id (0: from the oldest kept) */
	const char *since_at; /**< or, when not NULL, rows at or after this UTC time */
	unsigned limit;       /**< at most this many rows (1..AUDIT_LIMIT_MAX) */
};

/**
 * Checks a time for audit_query.since_at: "YYYY-MM-DD", optionally followed
 * by "THH:MM", ":SS", ".fff" and "Z" (UTC in every case), of a day and time
 * that exist. Returns 0 and the form the rows compare with in out (the "Z"
 * dropped), or -EINVAL.
 */
int audit_parse_time(const char *text, char *out, size_t len);

/**
 * The rows of q, oldest first: [{"id", "at", "token", "client", "method",
 * "path", "status"}] (token and client null when unknown). A new reference,
 * or NULL when the store fails.
 */
json_t *audit_list(struct store *s, const struct audit_query *q);

#endif
