/*
 * The desired cross-connects of every OCS unit, in memory: a mirror of the
 * store's circuit table, so that the reconciler never reads it back from
 * SQLite after a change.
 *
 * A writer stages its change inside the store transaction that makes it
 * (desired_stage_fabric); the stage is applied when that transaction commits
 * and dropped when it rolls back (store_on_txn_end). Every row change of the
 * circuit table is also counted (SQLite's update hook, which this module
 * owns): a commit whose count differs from what was staged, i.e. a write
 * path that did not stage, reloads the whole mirror from the store; so does
 * a circuit write outside any transaction, and desired_refresh() catches
 * commits by other processes. Writers must not use INSERT OR REPLACE or
 * upserts on the circuit table: SQLite does not report the rows they replace.
 * A reload that fails leaves the mirror marked unusable (desired_usable())
 * until one succeeds, so the reconciler never acts on a partial view.
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

#include "plan_diff.h"

struct store;
struct desired;

/** One circuit as a writer stages it. */
struct desired_circuit {
	int64_t ocs_id; /**< OCS unit (ocs.id) */
	uint32_t a;     /**< one OCS port */
	uint32_t b;     /**< the other */
};

/** A unit's desired cross-connects: valid until the next commit or desired_forget(). */
struct desired_set {
	const struct plan_xc *xc; /**< sorted by (a, b), a < b; NULL when n is 0 */
	const int64_t *fabric;    /**< fabric.id of each entry */
	size_t n;                 /**< entries */
};

/**
 * Loads every circuit of the store and starts following its transactions
 * (installs the store's transaction listener and the connection's update
 * hook). Returns 0 and the mirror in *out, or -errno.
 */
int desired_open(struct store *s, struct desired **out);

/** Stops following the store and frees d. NULL is fine. */
void desired_free(struct desired *d);

/**
 * Stages, inside the open transaction, that fabric_id's circuits are now
 * v[0..n) (n = 0 when the fabric goes). Call it in the transaction that writes
 * the circuit rows, before the fabric row is deleted (its name is read to
 * remember whose the leaving cross-connects were). v is copied. Returns 0 or
 * -ENOMEM (then the commit reloads everything instead).
 */
int desired_stage_fabric(struct desired *d, int64_t fabric_id, const struct desired_circuit *v,
                         size_t n);

/** The unit's desired cross-connects (an empty set for a unit with none). */
struct desired_set desired_of(const struct desired *d, int64_t ocs_id);

/**
 * Name of the fabric that last desired cross-connect {a, b} (a < b) of the
 * unit, when it is no longer desired; NULL when unknown. Owned by d, valid
 * until the next commit or desired_prune().
 */
const char *desired_former_owner(const struct desired *d, int64_t ocs_id, uint32_t a, uint32_t b);

/**
 * Forgets former owners of cross-connects the unit no longer holds: held is
 * what a read-back returned (sorted by (a, b)).
 */
void desired_prune(struct desired *d, int64_t ocs_id, const struct plan_xc *held, size_t n);

/** Forgets the unit's former owners (the unit was removed or reopened). */
void desired_forget(struct desired *d, int64_t ocs_id);

/** Number of full reloads from the store since open (a write path that did not stage). */
uint64_t desired_reloads(const struct desired *d);

/**
 * Reloads the mirror when it cannot be trusted: after a failed reload, after
 * circuits were written outside a transaction, or when another process (an
 * operator's sqlite3 shell) committed to the store since the last check
 * (PRAGMA data_version). Cheap when none of these happened. The reconciler
 * calls it before every pass and audit.
 */
void desired_refresh(struct desired *d);

/** False while the last reload failed: the mirror may miss circuits, send nothing. */
bool desired_usable(const struct desired *d);

#endif
