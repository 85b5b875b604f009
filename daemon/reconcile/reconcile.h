/*
 * The reconciler: keeps every OCS unit holding exactly the cross-connects the
 * stored fabrics ask of it.
 *
 * One driver instance per OCS unit of the topology (opened, reopened and
 * closed as units come, change and go). Per unit: read back what it holds,
 * diff against the desired cross-connects (planner/plan_diff.h: removals
 * before additions), send at most one batch at a time, record it as an
 * operation, read back again, repeat until equal. It runs on every change
 * (reconcile_kick), on driver (re)connect, after a failed batch with backoff,
 * and on a periodic audit that repairs drift. After every read it checks
 * isolation (no cross-connect between two fabrics, or a fabric and a port of
 * none) and derives the state of the fabrics it may have changed: pending,
 * applying, applied, degraded (in sync with pairs missing) or failed (with
 * the error). Its bookkeeping follows the changes alone (the in-memory
 * desired state's deltas, each read-back against the previous one), so a
 * change costs what it changes; the audit recomputes it from scratch and
 * compares.
 *
 * Loop thread only. Writes to the store in its own short transactions, never
 * while a request's transaction is open (requests never leave one open).
 *
 * Built from five files, each calling only those below it, with a private
 * header each (reconcile_core.h has the types they share): reconcile.c
 * (units, driver callbacks, the pass, this API), reconcile_audit.c (the full
 * recomputation), reconcile_ports.c (per unit and port: missing and stray
 * cross-connects, hold-back marks), reconcile_state.c (per fabric and unit:
 * the counts states are derived from, and the states) and reconcile_store.c
 * (its operations, read-back copies and port states, through the domain).
 */
#ifndef OFCD_RECONCILE_H
#define OFCD_RECONCILE_H

#include <jansson.h>
#include <stdbool.h>
#include <stdint.h>

#include "base/hook.h"
#include "domain/units.h"
#include "ocs_driver.h"
#include "plan_diff.h"

struct desired;
struct event_base;
struct events;
struct reconciler;
struct store;

/** What the reconciler is built from; every pointer is borrowed and must outlive it. */
struct reconcile_deps {
	struct event_base *base;   /**< the loop its timers and drivers run on */
	struct store *store;       /**< desired state, operations, read-back copies */
	struct desired *desired;   /**< the store's circuits in memory */
	struct events *events;     /**< bus it publishes its events on */
	unsigned audit_interval_s; /**< seconds between audits (0: the default, 30) */
	/**
	 * A cluster leader's generation (docs/ha.md), which fences an older leader
	 * at every unit that supports it; 0 for a single daemon.
	 */
	int64_t master_generation;
	/**
	 * A cluster leader's fence in time (ha_may_drive()): asked before every
	 * batch or read-back is started, and by the drivers before every write,
	 * so that a leader that wakes past its lease's deadline sends nothing.
	 * NULL: always (a single daemon).
	 */
	bool (*may_send)(void *arg);
	void *may_send_arg; /**< passed back to may_send */
	/**
	 * A driver's setting for one unit (config_driver_setting()), handed to
	 * the driver when the unit is opened; NULL: none.
	 */
	const char *(*setting)(void *arg, const char *driver, const char *unit, const char *key);
	void *setting_arg; /**< passed back to setting */
	/**
	 * Check mode (tests): after every state update, the whole bookkeeping is
	 * recomputed from scratch and compared (reconcile_audit_all()), so any
	 * drift of the incremental path shows at once.
	 */
	bool check;
};

/**
 * Each committed change of fabric states as a changeset (data, len bytes,
 * borrowed for the call): what a cluster leader sends its followers. Made
 * only while someone listens.
 */
HOOK_TYPE(reconcile_states, (const void *changeset, size_t len), (changeset, len))

/** The hook of the fabric states the reconciler stores (valid while r lives). */
struct hook *reconcile_states_hook(struct reconciler *r);

/**
 * Former entries (desired.h) a read-back of unit ocs_id found gone, among
 * those that were former entries at applied revision upto (gone[0..n),
 * sorted, borrowed for the call): what a cluster leader tells its followers,
 * whose mirrors keep former entries they never read back.
 */
HOOK_TYPE(reconcile_formers_gone,
          (int64_t ocs_id, int64_t upto, const struct plan_xc *gone, size_t n),
          (ocs_id, upto, gone, n))

/** The hook of the former entries read-backs find gone (valid while r lives). */
struct hook *reconcile_formers_gone_hook(struct reconciler *r);

/**
 * Creates the reconciler, marks operations a crash left running as
 * interrupted, opens a driver per OCS unit and schedules the first pass.
 * Returns 0 or -errno.
 */
int reconcile_init(const struct reconcile_deps *deps, struct reconciler **out);

/** Closes every driver instance and frees r. NULL is fine. */
void reconcile_free(struct reconciler *r);

/*
 * The queries and reconcile_kick() below take r NULL too (a cluster follower,
 * which drives no unit): unknown unit, nothing held, not in sync.
 */

/** Schedules a pass soon (coalesced): call after any change of desired state or topology. */
void reconcile_kick(struct reconciler *r);

/** Number of passes started so far: a change committed now is seen by pass generation + 1. */
uint64_t reconcile_generation(const struct reconciler *r);

/** Re-arms the audit timer after [reconcile] audit_interval changed. */
void reconcile_set_audit_interval(struct reconciler *r, unsigned seconds);

/**
 * The live view of a unit: {"state": connection state, "last_error",
 * "in_sync", "actual": [[a,b]...], "partial": [[in,out]...], "foreign":
 * [[in,out]...], "ports_down": [...]}. NULL when the unit is unknown.
 */
json_t *reconcile_unit_json(struct reconciler *r, int64_t ocs_id);

/**
 * How many of ofcd's cross-connects (circuits and one-way entries) the unit
 * held at its last read-back, with the additions sent since (a batch in
 * flight may have made them): 0 when it can be forgotten safely, -1 when that
 * is unknown (not connected or never read back since the last connect).
 */
long reconcile_unit_held(struct reconciler *r, int64_t ocs_id);

/**
 * Whether unit ocs_id may still join its port to another: a cross-connect or
 * one-way entry of ofcd's that the unit held at its last read-back, or an
 * addition sent since, that no fabric desires (left by a deleted or
 * re-planned fabric, or a stray). Asked for every port of a server about to
 * join a fabric, whose ports nothing desires: it must not join one
 * meanwhile, or a circuit could link two tenants. why gets the unit, ports
 * and former fabric. A unit never read back since it was opened is not known
 * to hold anything. O(1): the unit's bookkeeping answers, not the store.
 */
bool reconcile_port_joined(struct reconciler *r, int64_t ocs_id, uint32_t port, char *why,
                           size_t len);

/**
 * Whether reconcile_port_joined() may say yes of any port of unit ocs_id:
 * false when it holds no stray, has no addition in flight and no one-way
 * entry. O(1).
 */
bool reconcile_unit_may_join(struct reconciler *r, int64_t ocs_id);

/**
 * The reconciler's answers to what the domain asks of the units
 * (domain/units.h): reconcile_port_joined(), reconcile_unit_may_join() and reconcile_unit_held() on
 * r, which must outlive the table's use.
 */
struct domain_units reconcile_domain_units(struct reconciler *r);

/** True when every unit has been read back and holds exactly its desired set. */
bool reconcile_all_in_sync(struct reconciler *r);

/** How many units were closed (removed or reopened) since r started: see below. */
uint64_t reconcile_units_closed(const struct reconciler *r);

/**
 * Whether the circuits fabric (a name) had before it was deleted are gone
 * from every unit that held them: read back without them (nor half of one),
 * or never made. A unit not read back since it connected may hold anything;
 * other units, down or busy with other fabrics, do not count. closed is
 * reconcile_units_closed() when the deletion was committed: once a unit was
 * closed since, or while units are still being opened or the desired mirror
 * is not usable, only every unit in sync says so.
 */
bool reconcile_fabric_removed(struct reconciler *r, const char *fabric, uint64_t closed);

/**
 * Injects a fault into a unit's driver. Returns 0, -ENOENT (no such unit
 * instance), -EOPNOTSUPP (the driver has no fault injection) or the driver's
 * error.
 */
int reconcile_inject(struct reconciler *r, int64_t ocs_id, const struct ocs_fault *fault);

#endif
