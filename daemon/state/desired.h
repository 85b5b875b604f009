/*
 * The desired state of every OCS unit, in memory, and the feed of its
 * changes: a mirror of the store's circuit table (each unit's desired
 * cross-connects) and of which fabric owns each OCS port (through cable and
 * membership), so that the reconciler never reads them back from SQLite after
 * a change, and learns of every change as a delta it can apply in time
 * proportional to the change (desired_hooks()).
 *
 * The mirror follows the rows themselves: the store's pre-update hook shows
 * it every circuit and membership row a transaction inserts or deletes,
 * whoever writes them (a request's handler, a cluster member applying a
 * changeset of the replicated log); it keeps them, applies them when the
 * transaction commits (a merge per unit touched) and drops them when it rolls
 * back. Nobody stages anything and no write reloads the mirror. It reloads
 * only what it cannot follow: rows written outside any transaction, a commit
 * by another process (desired_refresh() checks PRAGMA data_version), a cable
 * change of a server in a fabric, a change that does not fit what it holds,
 * or memory that ran out; a reload tells the listeners only what differs from
 * the mirror it replaces. Writers must not use INSERT OR REPLACE or upserts
 * on the circuit table. A reload that fails leaves the mirror marked unusable
 * (desired_usable()) until one succeeds, so the reconciler never acts on a
 * partial view.
 *
 * Cross-connects that leave the desired state (their fabric was deleted or
 * re-planned) are remembered with their fabric's name until the unit is seen
 * not to hold them any more: an operation that removes them can say whose
 * they were even after the fabric is gone.
 *
 * Loop thread only.
 */
#ifndef OFCD_DESIRED_H
#define OFCD_DESIRED_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "base/hook.h"
#include "plan_diff.h"

struct store;
struct desired;

/** One OCS port of a fabric's member server. */
struct desired_port {
	int64_t ocs_id; /**< OCS unit (ocs.id) */
	uint32_t port;  /**< its port the server's device port is cabled to */
};

/** Cross-connect xc of unit ocs_id became desired by fabric (added) or left. */
HOOK_TYPE(desired_circuit, (int64_t ocs_id, struct plan_xc xc, int64_t fabric, bool added),
          (ocs_id, xc, fabric, added))

/** Port of unit ocs_id changed owner from before to after (fabric ids, 0: none). */
HOOK_TYPE(desired_owner, (int64_t ocs_id, uint32_t port, int64_t before, int64_t after),
          (ocs_id, port, before, after))

/** The row of a fabric (0: of any fabric) may have changed: its state, plan, existence. */
HOOK_TYPE(desired_fabric, (int64_t fabric_id), (fabric_id))

/**
 * A commit (or a refresh) changed what some unit should hold, whose port is
 * whose, a fabric's row or the units themselves: once, after the others.
 */
HOOK_TYPE(desired_changed, (struct desired * d), (d))

/**
 * Who hears the changes, called when a transaction that made them commits (or
 * from desired_refresh() for changes made outside one), after the mirror took
 * them: desired_of() already answers with the new state. Listeners must not
 * write to the store.
 */
struct desired_hooks {
	struct hook circuit; /**< desired_circuit listeners (the reconciler's bookkeeping) */
	struct hook owner;   /**< desired_owner listeners */
	struct hook fabric;  /**< desired_fabric listeners */
	struct hook changed; /**< desired_changed listeners (a reconciler pass follows) */
};

/** A unit's desired cross-connects: valid until the next commit. */
struct desired_set {
	const struct plan_xc *xc; /**< sorted by (a, b), a < b; NULL when n is 0 */
	const int64_t *fabric;    /**< fabric.id of each entry */
	size_t n;                 /**< entries */
};

/**
 * Loads every circuit and membership of the store and starts following its
 * transactions (listens to the store's transaction, pre-update and update
 * hooks). Returns 0 and the mirror in *out, or -errno.
 */
int desired_open(struct store *s, struct desired **out);

/** Stops following the store and frees d. NULL is fine. */
void desired_free(struct desired *d);

/** The hooks every change is told through (valid while d lives). */
struct desired_hooks *desired_hooks(struct desired *d);

/** The unit's desired cross-connects (an empty set for a unit with none). */
struct desired_set desired_of(const struct desired *d, int64_t ocs_id);

/**
 * Name of the fabric that last desired cross-connect {a, b} (a < b) of the
 * unit, when it is no longer desired; NULL when unknown. Owned by d, valid
 * until the next commit or desired_prune().
 */
const char *desired_former_owner(const struct desired *d, int64_t ocs_id, uint32_t a, uint32_t b);

/**
 * Whether a former entry of the unit (a cross-connect no longer desired that
 * no read-back has found gone since) ends at port: its other end in *peer,
 * its fabric's name in *fabric (NULL when unknown; owned by d, valid until
 * the next commit or desired_prune()).
 */
bool desired_former_at(const struct desired *d, int64_t ocs_id, uint32_t port, uint32_t *peer,
                       const char **fabric);

/** Whether the unit has any former entry (desired_former_at()). */
bool desired_has_former(const struct desired *d, int64_t ocs_id);

/** A number that changes whenever the unit's former entries do. */
uint64_t desired_former_version(const struct desired *d, int64_t ocs_id);

/**
 * Sets peer[p], p in 0..ports (ports + 1 entries, the caller's), to the
 * other end of the unit's former entry that ends at p, 0 where none does
 * (one with a port beyond ports is left out).
 */
void desired_former_peers(const struct desired *d, int64_t ocs_id, uint32_t *peer, uint32_t ports);

/** Whether the unit may still hold cross-connect {a, b}, as its driver's last answers say. */
typedef bool (*desired_held_fn)(void *arg, int64_t ocs_id, uint32_t a, uint32_t b);

/**
 * Whether a cross-connect that fabric (a name) desired before it was deleted
 * or re-planned may still be on its unit: one that is not desired again, that
 * no read-back has found gone since, and that held(arg, ...) says may be
 * there.
 */
bool desired_former_left(const struct desired *d, const char *fabric, desired_held_fn held,
                         void *arg);

/**
 * Forgets former owners of cross-connects the unit no longer holds: held is
 * what a read-back returned (sorted by (a, b)). When gone is not NULL, those
 * forgotten that were former entries already at applied revision upto (the
 * store's when the read was sent) go to *gone (malloc'd, the caller's,
 * sorted; NULL when none) and their number is returned: what a cluster
 * leader tells its followers (desired_formers_gone()). Otherwise 0.
 */
size_t desired_prune(struct desired *d, int64_t ocs_id, const struct plan_xc *held, size_t n,
                     int64_t upto, struct plan_xc **gone);

/**
 * Forgets the unit's former entries among gone[0..n) (sorted) that were
 * former entries at applied revision upto: the leader read the unit after
 * that and found them gone; one that became former later is kept. What the
 * leader does not tell (entries it never had, a word lost) stays. Loop thread.
 */
void desired_formers_gone(struct desired *d, int64_t ocs_id, int64_t upto,
                          const struct plan_xc *gone, size_t n);

/**
 * Fabric owning each OCS port of the unit (0: none), indexed by port; *n gets
 * the number of entries (ports beyond it belong to no fabric). Owned by d,
 * valid until the next commit or desired_refresh().
 */
const int64_t *desired_owners(const struct desired *d, int64_t ocs_id, size_t *n);

/** How many circuits fabric_id has (the count of its rows in the circuit table). */
size_t desired_fabric_circuits(const struct desired *d, int64_t fabric_id);

/**
 * A number that changes whenever the ocs table may have changed (a unit
 * added, removed or reconfigured): the reconciler follows it with its driver
 * instances.
 */
uint64_t desired_units_version(const struct desired *d);

/** Number of full reloads of the circuits since open (what the mirror could not follow). */
uint64_t desired_reloads(const struct desired *d);

/** Number of full reloads of the port owners since open, likewise. */
uint64_t desired_owner_reloads(const struct desired *d);

/**
 * Reloads the mirror when it cannot be trusted: after a failed reload, after
 * circuits were written outside a transaction, or when another process (an
 * operator's sqlite3 shell) committed to the store since the last check
 * (PRAGMA data_version). Cheap when none of these happened. The reconciler
 * calls it before every pass and audit.
 */
void desired_refresh(struct desired *d);

/**
 * Distrusts the mirror: the next desired_refresh() reloads circuits and
 * owners from the store (an audit found them different from it).
 */
void desired_resync(struct desired *d);

/** False while the last reload failed: the mirror may miss circuits or owners, send nothing. */
bool desired_usable(const struct desired *d);

#endif
