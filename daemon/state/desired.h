/*
 * The desired state of every OCS unit, in memory, and the feed of its
 * changes: a mirror of the store's circuit table (each unit's desired
 * cross-connects), of which fabric owns each OCS port (through cable and
 * membership), so that the reconciler never reads them back from SQLite after
 * a change, and learns of every change as a delta it can apply in time
 * proportional to the change (desired_listen).
 *
 * A writer stages its change inside the store transaction that makes it
 * (desired_stage_fabric, desired_stage_members, desired_stage_delete); the
 * stage is applied when that transaction commits and dropped when it rolls
 * back (store_on_txn_end). Every row change of the circuit and fabric_server
 * tables is also counted (SQLite's update and pre-update hooks, which this
 * module owns): a commit whose count differs from what was staged, i.e. a
 * write path that did not stage, reloads that part of the mirror from the
 * store; so does a write outside any transaction, a cable change of a server
 * in a fabric, and desired_refresh() catches commits by other processes. A
 * reload tells the listener only what differs from the mirror it replaces.
 * Writers must not use INSERT OR REPLACE or upserts on the circuit table:
 * SQLite does not report the rows they replace. A reload that fails leaves
 * the mirror marked unusable (desired_usable()) until one succeeds, so the
 * reconciler never acts on a partial view.
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

/** One circuit as a writer stages it. */
struct desired_circuit {
	int64_t ocs_id; /**< OCS unit (ocs.id) */
	uint32_t a;     /**< one OCS port */
	uint32_t b;     /**< the other */
};

/** One OCS port of a fabric's member server, as a writer stages the membership. */
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

/**
 * Stages, inside the open transaction, that fabric_id's nservers member
 * servers[] (the fabric_server rows the transaction inserts) are cabled to
 * the OCS ports v[0..n): from the commit on, the fabric owns those ports.
 * Arrays are copied. Returns 0 or -ENOMEM (then the commit reloads the owners
 * from the store instead).
 */
int desired_stage_members(struct desired *d, int64_t fabric_id, const int64_t *servers,
                          size_t nservers, const struct desired_port *v, size_t n);

/**
 * Stages the deletion of fabric_id: its circuits leave (as
 * desired_stage_fabric() with none) and its ports return to no fabric. Call
 * it before the fabric row is deleted. Returns 0 or -ENOMEM.
 */
int desired_stage_delete(struct desired *d, int64_t fabric_id);

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
 * Forgets former owners of cross-connects the unit no longer holds: held is
 * what a read-back returned (sorted by (a, b)).
 */
void desired_prune(struct desired *d, int64_t ocs_id, const struct plan_xc *held, size_t n);

/** Forgets the unit's former owners (the unit was removed or reopened). */
void desired_forget(struct desired *d, int64_t ocs_id);

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

/**
 * Distrusts the mirror: the next desired_refresh() reloads circuits and
 * owners from the store (an audit found them different from it).
 */
void desired_resync(struct desired *d);

/** False while the last reload failed: the mirror may miss circuits or owners, send nothing. */
bool desired_usable(const struct desired *d);

#endif
