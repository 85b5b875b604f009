/*
 * This daemon's part in a cluster of ofcd members ([cluster] section,
 * docs/ha.md). It ties together the election (cluster.c), the replication
 * log in etcd (replica.c, and ha_append() of the API's writes) and
 * the reconciler's life:
 *
 *   follower: applies the log to its store as it grows; writes go to the
 *     leader (ha_gate() says where);
 *   elected:  first applies whatever of the log it has not (catching up),
 *     then leads: takes writes, appends each to the log before it commits,
 *     and drives the OCS units (the lead callback, with the generation that
 *     fences an older leader at the switch);
 *   stepped down or out of touch with etcd: stops driving the units (the
 *     follow callback) before its lease can expire.
 *
 * Each member publishes {name, advertise, role, applied_revision} under
 * PREFIX/members/NAME on its lease, every third of the TTL, and reads the
 * others' there: GET /v1/cluster. Loop thread only.
 */
#ifndef OFCD_HA_H
#define OFCD_HA_H

#include <jansson.h>
#include <stdint.h>

#include <stddef.h>

#include "base/config.h"
#include "base/hook.h"

struct event_base;
struct store;
struct events;
struct ha;

/** Two ports of an OCS unit a cross-connect joins, a < b. */
struct ha_port_pair {
	uint32_t a, b;
};

/** What a member works with; borrowed, must outlive it. */
struct ha_deps {
	struct event_base *base;       /**< the daemon's loop */
	const struct ofcd_config *cfg; /**< its [cluster] section is used (copied at start) */
	struct store *store;           /**< the member's store, which the log is applied to */
	struct events *events;         /**< role changes are published here */
	/** Whether this member drives the OCS units now (checked against its state). */
	bool (*driving)(void *arg);
	/**
	 * A follower applied the leader's word that its read-back of unit ocs_id
	 * found gone[0..n) (sorted, borrowed), former entries at applied revision
	 * upto (ha_ship_formers_gone()): its desired-state mirror forgets them.
	 */
	void (*formers_gone)(void *arg, int64_t ocs_id, int64_t upto,
	                     const struct ha_port_pair *gone, size_t n);
	void *arg; /**< passed back to driving and formers_gone */
};

/** What a member's listeners hear of its role (ha_role_hook()). */
enum ha_change {
	/**
	 * This member now leads: start driving the OCS units, with generation (the
	 * leader key's create revision) as the OpenFlow master generation_id.
	 */
	HA_NOW_LEADING,
	/** This member no longer leads: stop driving the OCS units now. */
	HA_NOW_FOLLOWING,
	/** The store was replaced by a snapshot: in-memory views of it must reload. */
	HA_RESYNCED,
};

/** A change of this member's role; generation is the leadership's for HA_NOW_LEADING. */
HOOK_TYPE(ha_role, (enum ha_change change, int64_t generation), (change, generation))

/**
 * The hook of role changes (valid while h lives): add listeners right after
 * ha_start(), whose campaign answers only later, on the loop.
 */
struct hook *ha_role_hook(struct ha *h);

/** Starts the member: it campaigns and follows the log. Returns 0, -EINVAL or -ENOMEM. */
int ha_start(const struct ha_deps *deps, struct ha **out);

/**
 * This member cannot lead now (why: for the log): it stops leading and lets
 * another member campaign first, for three lease TTLs, then follows the log
 * (or copies a snapshot) and may campaign again.
 */
void ha_hand_over(struct ha *h, const char *why);

/**
 * Leaves the cluster for a graceful stop: stops leading at once (follow runs
 * if it led) and hands the leadership over without waiting for the lease to
 * lapse; done(arg) runs on the loop when etcd answered or gave up.
 */
void ha_resign(struct ha *h, void (*done)(void *arg), void *arg);

/**
 * Whether this member may send anything to an OCS unit now: it leads and its
 * lease is live on the monotonic clock (cluster_may_drive()). Asked right
 * before every send; a frozen leader that wakes past its deadline sends
 * nothing, whatever work was pending.
 */
bool ha_may_drive(const struct ha *h);

/**
 * Confirms with etcd that this member still leads, caught up (cluster_confirm(): a
 * linearizable read sent now): done(arg, rc) runs later on the loop with 0 when it
 * did and still does, -ESTALE when it no longer leads, -EHOSTUNREACH when etcd could
 * not say. One at a time. Returns 0, -ESTALE (not leading now: done is not called),
 * -EBUSY or -ENOMEM.
 */
int ha_confirm(struct ha *h, void (*done)(void *arg, int rc), void *arg);

/** Stops everything; no callback afterwards. NULL is a no-op. */
void ha_free(struct ha *h);

/**
 * Whether this member takes writes now: 0 it does (it leads, caught up and in
 * touch with etcd); -EREMOTE another member leads, whose advertise URL is
 * written into leader (len bytes); -EAGAIN no leader is known (an election is
 * under way); -EHOSTUNREACH etcd cannot be reached or has no quorum;
 * -EINPROGRESS just elected, still applying the log.
 */
int ha_gate(struct ha *h, char *leader, size_t len);

/** Completion of ha_append(): rc 0 and the entry's revision, or -errno. */
typedef void (*ha_append_done)(void *arg, int rc, int64_t revision);

/**
 * Appends a write's changeset (data, len bytes, copied) to the log as one
 * change, guarded by this member's leadership; a large one goes in several
 * entries, which followers apply as one. Once etcd has it, this member
 * applies it like every other (apply.h). done runs later on the loop, never
 * from inside: 0 with the (last) entry's etcd revision once it is in the log
 * and applied here; -EREMOTE when it is in the log but this member stepped
 * down meanwhile (its replica applies it in turn); -EPROTO when it is in the
 * log but does not apply here (this member hands the leadership over); -EXDEV when etcd's
 * revision is behind this member's store (etcd restored from a backup: no member applies it);
 * -ESTALE when this member no longer leads and it certainly is not in the log; -EIO when etcd
 * refused it (too large, out of space); -ETIMEDOUT when nobody can say (an unanswered append is
 * sent again until etcd answers).
 * Returns 0, or -EFBIG (larger than the log takes), -ESTALE (not leading) or -ENOMEM; then done is
 * not called.
 */
int ha_append(struct ha *h, const void *data, size_t len, ha_append_done done, void *done_arg);

/**
 * The hook of every change of the log this member applies, its own as a
 * leader and the log's as a follower (apply.h's apply_done; valid while h
 * lives).
 */
struct hook *ha_applied_hook(struct ha *h);

/**
 * Sends a change of fabric states the leader's reconciler committed
 * (changeset, len bytes, copied) to the log, so that followers show the
 * states too: merged with the others of the next 20 ms and appended behind
 * the writes of that time. Dropped when this member does not lead.
 */
void ha_replicate_states(struct ha *h, const void *changeset, size_t len);

/**
 * Tells the followers, with the states, that a read-back of unit ocs_id found
 * gone[0..n) (sorted, copied), which were former entries (desired.h) at
 * applied revision upto: their mirrors keep former entries until then, as
 * they read no unit back. Best effort (a follower that misses it keeps them);
 * dropped when this member does not lead.
 */
void ha_ship_formers_gone(struct ha *h, int64_t ocs_id, int64_t upto,
                          const struct ha_port_pair *gone, size_t n);

/** GET /v1/cluster's body: self, role, leader, members, revision (new reference). */
json_t *ha_status_json(struct ha *h);

#endif
