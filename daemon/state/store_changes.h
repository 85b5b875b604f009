/*
 * Write transactions as changesets (SQLite's session extension), for
 * replication: the leader captures what one transaction changed, ships the
 * bytes through etcd, and each follower applies them to its own store in
 * order. A changeset holds, per changed row, its primary key and old/new
 * values; SQLite's sessions ignore tables without a PRIMARY KEY, so
 * store_unreplicated_tables() names those, which a cluster cannot replicate.
 *
 * Loop thread only; a capture belongs to the store it was started on.
 */
#ifndef OFCD_STORE_CHANGES_H
#define OFCD_STORE_CHANGES_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct store;
struct store_capture;

/**
 * Starts recording the changes made through s until store_capture_free():
 * to the table named only (borrowed, a literal), or with only NULL to every
 * table but the local ones (store_table_is_local()). Start it before the
 * transaction's first write. Returns 0 or -ENOMEM.
 */
int store_capture_start(struct store *s, const char *only, struct store_capture **out);

/**
 * True for the tables each member keeps for itself, which changesets leave
 * out: the reconciler's operations and read-back copies (the leader's alone)
 * and the member's own place in the log.
 */
bool store_table_is_local(const char *table);

/**
 * The changeset of everything recorded so far: *data (malloc'd, owned by the
 * caller; NULL when *len is 0: nothing changed) and *len. Take it before the
 * COMMIT. Returns 0 or -ENOMEM / -EIO.
 */
int store_capture_take(struct store_capture *c, void **data, size_t *len);

/** Stops recording and frees c; NULL is a no-op. */
void store_capture_free(struct store_capture *c);

/** One changeset to apply (borrowed). */
struct store_changeset {
	const void *data; /**< the changeset's bytes */
	size_t len;       /**< how many */
};

/**
 * Walks a changeset (data, len bytes) as SQLite's format lays it out, before
 * SQLite is given it: every table one of this store's, with as many columns;
 * every record an insert, delete or update of as many values, each inside
 * the bytes given. SQLite's own reader trusts its input (a corrupted length
 * sends it far, or round forever). Returns 0, or -EPROTO with the reason in
 * why (whylen bytes).
 */
int store_changeset_check(struct store *s, const void *data, size_t len, char *why, size_t whylen);

/** What made store_apply_changes() abort, for the caller to tell. */
struct store_conflict {
	int kind; /**< SQLite's SQLITE_CHANGESET_* of the first conflict; 0: none (malformed) */
	char table[64]; /**< the table it concerns ("(not a changeset)" when malformed) */
	char what[80];  /**< the kind in words */
};

/**
 * Applies changesets v[0..n), taken on another store with the same schema,
 * in order, in one transaction of its own (so the store's hooks and the
 * desired mirror see every row), and records revision (their etcd revision)
 * as the store's applied revision, with key (the log entry's, or NULL), in
 * the same transaction when it is above 0.
 * The differences a replica may have (a row a cascade removed already, the
 * reconciler's columns of fabric, an audit id a local refusal took) resolve
 * in the changeset's favour; any other conflict (a row missing, present
 * already or with other values than the changeset's old ones, a foreign key
 * left dangling), or a changeset store_changeset_check() refuses, aborts it
 * all, described in *conflict (NULL: not wanted). The rows go in with the
 * store's own prepared statements (changeset_apply.h), in the changeset's
 * order, a row a constraint refuses again after the others, and the whole
 * again with the foreign keys checked at the end when one of them refused
 * a row left over. Any conflict means the replica has diverged and needs a
 * snapshot. Returns 0, -EPROTO on a conflict or a malformed changeset,
 * -EBUSY when a transaction is already open, or -EIO.
 */
int store_apply_changes(struct store *s, const struct store_changeset *v, size_t n,
                        int64_t revision, const char *key, struct store_conflict *conflict);

/**
 * The log key store_apply_changes() last recorded with the applied revision, into out
 * (len bytes): "" when none was (a store older than the key's column, or one that
 * never followed), or when it does not fit.
 */
void store_applied_key(struct store *s, char *out, size_t len);

/** The applied revision store_apply_changes() last recorded: 0 when none, -EIO on error. */
int64_t store_applied_revision(struct store *s);

/**
 * Writes the names of the tables that have no PRIMARY KEY (which changesets
 * leave out), comma-separated, into out. Returns how many there are, or
 * -EIO.
 */
int store_unreplicated_tables(struct store *s, char *out, size_t len);

/**
 * The gauge of the memory copies hold, from store_snapshot_begin() to store_snapshot_free():
 * a client that stops reading GET /v1/cluster/snapshot holds a whole store until it is cut off.
 */
#define STORE_SNAPSHOT_GAUGE      "ofcd_snapshot_bytes_held"
#define STORE_SNAPSHOT_GAUGE_HELP "Memory held by copies of the store being made or sent."

/** A copy of the store made a part at a time (store_snapshot_begin()). */
struct store_snapshot;

/**
 * Starts a consistent copy of the whole store as it is now (GET /v1/cluster/snapshot: how a
 * member that cannot follow the log catches up), to be made by store_snapshot_step() a part
 * per loop turn, so that a large store never holds the loop. The copy reads from a read
 * transaction of a connection of its own: what s writes or rolls back meanwhile is not in it
 * and does not restart it. Returns 0 with *out (free it with store_snapshot_free()), -ENOMEM
 * or -EIO.
 */
int store_snapshot_begin(struct store *s, struct store_snapshot **out);

/**
 * Copies up to @pages more pages of the store (-1: every one left). Returns 0 while there is
 * more; 1 when the copy is whole (store_snapshot_data()); -EBUSY when the file is locked (step
 * again later); -ENOMEM or -EIO (the copy is over: free it).
 */
int store_snapshot_step(struct store_snapshot *ss, int pages);

/**
 * The whole copy's bytes (SQLite's serialization of the file, what store_restore() takes)
 * and their length in *len; NULL before store_snapshot_step() said 1. Owned by ss: valid until
 * store_snapshot_free().
 */
const void *store_snapshot_data(struct store_snapshot *ss, size_t *len);

/** Frees a copy, whole or not (NULL: nothing). */
void store_snapshot_free(struct store_snapshot *ss);

/**
 * Replaces the whole content of s with a snapshot (store_snapshot_data()) of
 * another store of the same schema version (SQLite's backup API, in one
 * step: readers see the old store or the new one). Statements prepared on s
 * stay valid; in-memory mirrors of it must reload. Returns 0, -EPROTO (not
 * a whole store, or another schema version: s is untouched), -EBUSY, -ENOMEM
 * or -EIO.
 */
int store_restore(struct store *s, const void *data, size_t len);

/**
 * One changeset with the effect of a then b (SQLite's changegroup): *out
 * (malloc'd, the caller's; NULL when they cancel out) and *len. Returns 0,
 * -EPROTO for a malformed input, or -ENOMEM.
 */
int store_changes_combine(const void *a, size_t alen, const void *b, size_t blen, void **out,
                          size_t *len);

#endif
