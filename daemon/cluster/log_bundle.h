/*
 * What one change of the replicated log carries: one or more changesets,
 * applied in order in one transaction, each marked as a client's write or as
 * the leader's fabric states (which the leader committed before it sent
 * them, so it skips them when it applies its own change), and the events
 * the leader published meanwhile. Framed as
 * "OFCDBNDL", the number of changesets, then each as its kind (1 byte), its
 * length (32-bit big-endian) and its bytes. A change that is a bare
 * changeset (an older ofcd's; SQLite changesets start with 'T') is one write.
 * A large change is then cut in parts (log_part.h). Pure functions, any
 * thread.
 */
#ifndef OFCD_LOG_BUNDLE_H
#define OFCD_LOG_BUNDLE_H

#include <stddef.h>

/** What a changeset of a change is. */
enum log_kind {
	LOG_WRITE = 1,  /**< a client's write: every member applies it */
	LOG_STATES = 2, /**< the leader's fabric states: its followers apply them */
	/**
	 * The events the leader published meanwhile, as JSON ([{"kind", "id",
	 * "instance", "data"}]): its followers publish them under the same ids.
	 */
	LOG_EVENTS = 3,
};

/** One changeset of a change (data borrowed). */
struct log_changeset {
	enum log_kind kind; /**< what it is */
	const void *data;   /**< its bytes */
	size_t len;         /**< how many */
};

/** Most changesets in one change. */
#define LOG_BUNDLE_MAX 4

/**
 * Frames v[0..n) (n <= LOG_BUNDLE_MAX) as one change: a malloc'd buffer (the
 * caller's) of *len bytes, or NULL when out of memory.
 */
void *log_bundle_make(const struct log_changeset *v, size_t n, size_t *len);

/**
 * The changesets of change data (len bytes) into v (max entries, pointing
 * into data): how many, or -EPROTO for a malformed frame (a length past the
 * end, an unknown kind, more than max).
 */
int log_bundle_parse(const void *data, size_t len, struct log_changeset *v, size_t max);

#endif
