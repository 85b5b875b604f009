/*
 * Leader election among the ofcd members of one cluster ([cluster] section),
 * through etcd (etcd.h). Each member holds a lease of [cluster] lease_ttl
 * seconds, renewed every third of it, and campaigns with a txn that creates
 * PREFIX/leader = {"name", "advertise"} attached to its lease only while the
 * key is absent. The winner is the leader; the others follow, learn the
 * holder from the txn's read-back and watch the key, campaigning again as
 * soon as it is deleted or its lease expires.
 *
 * A leader that has not renewed its lease for two thirds of the TTL (counted
 * from when the last successful renewal was sent, so before etcd can expire
 * it) steps down at once: the role callback tells the daemon to stop driving
 * OCS units before another member can win. It then starts over with a new
 * lease. The leader key's create revision grows with every election: it is
 * the generation that fences an old leader.
 *
 * Loop thread only.
 */
#ifndef OFCD_CLUSTER_H
#define OFCD_CLUSTER_H

#include <stdbool.h>
#include <stdint.h>

#include "base/config.h"

struct event_base;
struct cluster;
struct etcd_client;

/** A member's role. */
enum cluster_role {
	CLUSTER_FOLLOWER, /**< another member leads, or none is known yet */
	CLUSTER_LEADER,   /**< this member holds the leader key */
};

/** Called on the loop each time the role changes. */
typedef void (*cluster_role_fn)(enum cluster_role role, void *arg);

/**
 * Starts campaigning with the [cluster] settings of cfg (which must set
 * endpoints; cfg is copied from). Returns 0 and the member in *out, or
 * -EINVAL / -ENOMEM. Starts as a follower with no leader known.
 */
int cluster_start(struct event_base *base, const struct ofcd_config *cfg, cluster_role_fn fn,
                  void *arg, struct cluster **out);

/**
 * Leaves the cluster cleanly, for a graceful stop: becomes a follower at once
 * (the role callback runs), stops campaigning, deletes the leader key if it
 * is still this member's and revokes the lease, so that another member takes
 * over without waiting for the TTL; then calls done(arg) on the loop (also
 * when etcd could not be reached: the lease then lapses by itself; done may
 * be NULL). Free the
 * member with cluster_free() afterwards.
 */
void cluster_resign(struct cluster *c, void (*done)(void *arg), void *arg);

/**
 * A leader that cannot lead (its store cannot catch up with the log) hands
 * the leadership over: it becomes a follower at once (the role callback
 * runs), deletes its leader key and does not campaign for hold_s seconds, so
 * that another member wins. A leader whose lease's deadline has passed (a
 * member woken from a freeze) steps down for that reason instead, without
 * the hold: its key goes with its lease. No-op on a follower.
 *
 * A member never leads twice under one generation: should the key outlive
 * the step-down (etcd did not take the delete), the member deletes it again
 * before it campaigns, rather than lead under it once more.
 */
void cluster_step_down(struct cluster *c, unsigned hold_s);

/**
 * Stops: no callback afterwards. The leader key is left to its lease, which
 * lapses within lease_ttl. NULL is a no-op.
 */
void cluster_free(struct cluster *c);

/** This member's role now. */
enum cluster_role cluster_role(const struct cluster *c);

/** The leader's name, or "" when none is known. */
const char *cluster_leader_name(const struct cluster *c);

/** The leader's advertise URL, or "" when none is known. */
const char *cluster_leader_advertise(const struct cluster *c);

/** Create revision of the leader key held by the known leader (0: none): its generation. */
int64_t cluster_generation(const struct cluster *c);

/** The latest etcd revision this member has seen. */
int64_t cluster_revision(const struct cluster *c);

/**
 * True while this member holds a lease whose last renewal etcd confirmed less
 * than two thirds of the TTL ago: etcd has a quorum this member can reach.
 */
bool cluster_in_touch(const struct cluster *c);

/**
 * True while this member leads and its lease's last confirmed renewal was
 * sent less than two thirds of the TTL ago, on the monotonic clock, as of
 * this call: the fence in time every send to a unit asks right before it
 * goes. A member that wakes from a freeze past that point gets false before
 * its deadline timer even runs.
 */
bool cluster_may_drive(const struct cluster *c);

/** The lease this member holds now (0: none), for keys that must vanish with it. */
int64_t cluster_lease(const struct cluster *c);

/**
 * Asks etcd through via (a client other than the election's, whose lease
 * renewals must not queue behind the read), with a linearizable read sent
 * now, whether this member still holds the leader key of its leadership:
 * done(arg, rc) runs later on the loop with 0 when it did as etcd answered
 * (and still leads), -ESTALE when the key is gone or another's,
 * -EHOSTUNREACH when etcd could not say. What the monotonic clock cannot
 * prove (a paused machine's may stop), etcd's read does. One confirmation at
 * a time: the caller shares it among its readers. Returns 0, -ESTALE (not
 * leading: done is not called), -EBUSY (one is out) or -ENOMEM. via must
 * outlive the call, or be freed first, with c freed before the loop runs
 * again (then done never runs).
 */
int cluster_confirm(struct cluster *c, struct etcd_client *via, void (*done)(void *arg, int rc),
                    void *arg);

#endif
