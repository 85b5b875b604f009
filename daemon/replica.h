/*
 * A follower's side of replication: reads the leader's log of changesets
 * under PREFIX/log/ in etcd (keys in append order), applies each one after
 * the revision it has applied to its own store (store_changes.h), then
 * watches the log and applies what is appended. A changeset that conflicts
 * stops it: the store has diverged and needs a snapshot (not done yet).
 *
 * Each entry's revision is recorded in the transaction that applies it
 * (store_applied_revision()), so a restart resumes from
 * store_applied_revision() without applying anything twice. Loop thread only.
 */
#ifndef OFCD_REPLICA_H
#define OFCD_REPLICA_H

#include <stdbool.h>
#include <stdint.h>

struct etcd_client;
struct store;
struct replica;

/**
 * Starts following the log under prefix ("/ofcd" reads "/ofcd/log/") into s,
 * applying the entries whose revision is above from_revision. etcd and s are
 * borrowed and must outlive the replica. Returns 0 or -ENOMEM.
 */
int replica_start(struct etcd_client *etcd, struct store *s, const char *prefix,
                  int64_t from_revision, struct replica **out);

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
