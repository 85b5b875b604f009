/*
 * A follower's side of replication: reads the leader's log of changes under
 * PREFIX/log/ in etcd (keys in append order), puts a change cut in parts
 * back together (log_part.h), hands each change after the revision its store
 * has applied to the apply callback (the member's one apply path, apply.h),
 * then watches the log and hands over what is appended. A change that does
 * not apply stops it: the store has diverged and needs a snapshot; a store
 * that fails for now (locked, disk full) stops it too, to be read again.
 *
 * Each entry's revision is recorded in the transaction that applies it
 * (store_applied_revision()), so a restart resumes from
 * store_applied_revision() without applying anything twice. Loop thread only.
 */
#ifndef OFCD_REPLICA_H
#define OFCD_REPLICA_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct etcd_client;
struct store;
struct replica;

/** What a replica reports, on the loop; every member but apply may be NULL. */
struct replica_cbs {
	/**
	 * Applies change (len bytes, borrowed) of the log at revision, whose
	 * entry (its last part) is key, to the store: 0, or -errno (-EPROTO: it
	 * conflicts, following stops; -ENOMEM, -EIO, -EBUSY: the store failed
	 * for now, read again later).
	 */
	int (*apply)(void *arg, int64_t revision, const char *key, const void *change, size_t len);
	/**
	 * The first read of the log is over: rc 0 when everything in it is applied
	 * (and, when following, the watch is open), -EPROTO when an entry
	 * conflicted (diverged), -ESTALE when the log was trimmed past this
	 * store's revision (PREFIX/log_floor, see ha.c), -EXDEV when etcd's
	 * revision is behind the store's (etcd lost changes the store has),
	 * -ENOENT when the log lacks the change the store applied last (its
	 * from_revision, not trimmed: the store is not the log's; nothing was
	 * applied), or the etcd call's error (never one of those: read again).
	 */
	void (*caught_up)(void *arg, int rc);
	/** Each entry applied, with its revision (what the store now records). */
	void (*applied)(void *arg, int64_t revision);
	/**
	 * Following ended: -EPROTO diverged, -ESTALE the log was trimmed past
	 * this replica, else the watch's or the store's error, or -EAGAIN (etcd
	 * compacted its history past the watch): for now. Free the replica;
	 * start another from replica_applied() to go on.
	 */
	void (*stopped)(void *arg, int rc);
	void *arg; /**< passed back to each */
};

/**
 * Reads the log under prefix ("/ofcd" reads "/ofcd/log/") into s, applying
 * the entries whose revision is above from_revision (in pages of 64 entries,
 * all read at the revision of the first); then, when follow is set, watches
 * it from there and applies what is appended. With check, the log must still
 * hold the change at from_revision, under the key the store recorded with it
 * (store_applied_key(), when it did) (caught_up's -ENOENT); without, the store
 * is taken for the log's (a snapshot of the leader's store). etcd, s and
 * cbs's arg are borrowed and must outlive the replica; no callback runs from
 * inside this call. Returns 0 or -ENOMEM.
 */
int replica_start(struct etcd_client *etcd, struct store *s, const char *prefix,
                  int64_t from_revision, bool check, bool follow, const struct replica_cbs *cbs,
                  struct replica **out);

/** The etcd revision of the last log entry applied (from_revision before any). */
int64_t replica_applied(const struct replica *r);

/** True once a changeset conflicted with the store: nothing more is applied. */
bool replica_diverged(const struct replica *r);

/**
 * Stops following and frees r (once the first read of the log, if still in
 * flight, has come back: free r before the etcd client). NULL is a no-op.
 */
void replica_free(struct replica *r);

#endif
