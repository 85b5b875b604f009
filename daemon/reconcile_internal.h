/*
 * The reconciler's parts and what they share: private to daemon/reconcile*.c
 * (and the reconciler's unit test). reconcile.h is the public API.
 *
 * Three files, each calling only the ones below it, so none links back into
 * its caller:
 *
 *   reconcile.c        units and their driver instances (following the ocs
 *                      table), driver callbacks, the pass and its batches,
 *                      the audit, the public API
 *   reconcile_store.c  the reconciler's own rows: operations (one per batch),
 *                      the read-back copy (actual_xc), port link states
 *   reconcile_state.c  port owners and fabric names, the isolation check
 *                      after a read-back, and every fabric's derived state
 *
 * Loop thread only, like the whole reconciler: no locks anywhere.
 */
#ifndef OFCD_RECONCILE_INTERNAL_H
#define OFCD_RECONCILE_INTERNAL_H

#include <event2/util.h>
#include <jansson.h>
#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>
#include <time.h>

#include "desired.h"
#include "metrics.h"
#include "ocs_driver.h"
#include "plan_diff.h"
#include "reconcile.h"

struct event;
struct reconcile_fab; /* a fabric as the state update sees it (reconcile_state.c) */

/** Consecutive failed batches of a unit before its fabrics are "failed". */
#define RECONCILE_FAILED_AFTER 5

/* The help texts of the reconciler's counters, one per counter wherever it is added. */
#define RECONCILE_HELP_DRIFT "Audits that found an OCS unit changed by hand and repaired it."
#define RECONCILE_HELP_ISOLATION                                                                   \
	"Cross-connects found joining two fabrics (or a fabric and no fabric)."
#define RECONCILE_HELP_BATCHES "Batches sent to OCS units by result."

/**
 * One OCS unit of the topology and its driver instance. Owned by the
 * reconciler (r->units); every pointer field is owned by the unit unless
 * said otherwise.
 */
struct unit {
	struct reconciler *r; /**< its reconciler (borrowed) */
	int64_t id;           /**< ocs.id */
	char name[65];        /**< ocs.name, for logs, events and operations */
	char driver[33];      /**< ocs.driver: a change reopens the unit */
	char endpoint[257];   /**< ocs.endpoint: a change reopens the unit */
	uint32_t ports;       /**< ocs.ports (1..ports): a change reopens the unit */
	bool seen;            /**< still in the topology at the last sync */

	const struct ocs_driver_ops *ops; /**< its driver (static table); NULL when unknown */
	struct ocs_handle *h;             /**< the driver instance; NULL when it did not open */
	enum ocs_conn_state conn;         /**< connection state, as the driver last reported */
	struct timespec down_since;       /**< CLOCK_MONOTONIC time it was last seen going down */
	char last_error[256];             /**< the last failure, "" after a successful batch */

	bool busy;               /**< an apply or read is in flight */
	bool have_actual;        /**< actual[] reflects a read since the last (re)connect */
	bool in_sync;            /**< the last diff was empty */
	bool applied_since_read; /**< a batch ended since the last read-back (no drift then) */
	bool actual_dirty;       /**< actual[] not yet written to the store */
	struct plan_xc *actual;  /**< cross-connects held at the last read-back, sorted */
	size_t nactual;          /**< entries in actual */
	uint32_t *peer;          /**< peer[port] for actual, 0 when unjoined; ports + 1 entries */
	uint32_t *joining;  /**< the same for additions sent since the last read-back; ports + 1 */
	int64_t *owner;     /**< fabric owning each port, see reconcile_port_owners(); ports + 1 */
	uint64_t owner_gen; /**< r->changes when owner[] was loaded */
	struct plan_xc *violations; /**< isolation violations at the last read-back */
	size_t nviolations;         /**< entries in violations */
	struct ocs_flow *partial;   /**< one-way entries of ofcd's at the last read-back */
	size_t npartial;            /**< entries in partial */
	struct ocs_flow *foreign;   /**< entries ofcd did not make, at the last read-back */
	size_t nforeign;            /**< entries in foreign */

	/** Why the next batch is sent: startup, change, connect, audit, retry (static string). */
	const char *trigger;
	int64_t op_id;       /**< operation row of the batch in flight, 0 if none */
	json_t *op_fabrics;  /**< names of the fabrics that batch touches, NULL if none */
	unsigned failures;   /**< consecutive failed batches */
	struct event *retry; /**< backoff timer after a failure */
	bool retry_pending;  /**< retry is armed: nothing is sent before it fires */
	struct unit *next;   /**< next unit of the reconciler */
};

/** The reconciler (reconcile.h): its units, timers and caches of stored state. */
struct reconciler {
	struct reconcile_deps d; /**< what it works with (borrowed) */
	struct unit *units;      /**< one per row of the ocs table, owned */
	struct event *ev_pass;   /**< deferred pass (reconcile_kick) */
	struct event *ev_audit;  /**< periodic audit */
	struct event *ev_states; /**< deferred fabric state update, and its tick */
	struct event *ev_flush;  /**< deferred write of read-back states to the store */
	uint64_t generation;     /**< passes started */
	uint64_t changes; /**< kicks so far: caches of stored state are valid for one value */
	struct reconcile_fab *fabs; /**< cached fabrics (reconcile_state.c), owned */
	size_t nfabs;               /**< entries in fabs */
	uint64_t fabs_gen;          /**< r->changes when fabs was loaded */
	bool fabs_valid;            /**< fabs may be used if fabs_gen is still current */
};

/* ---- small helpers every part uses ---------------------------------------- */

/** Seconds elapsed since t (CLOCK_MONOTONIC). */
static inline double reconcile_since(const struct timespec *t)
{
	struct timespec now;
	clock_gettime(CLOCK_MONOTONIC, &now);
	return (double)(now.tv_sec - t->tv_sec) + (double)(now.tv_nsec - t->tv_nsec) / 1e9;
}

/** Start of a stretch of the reconciler's own work, for reconcile_work_end(). */
static inline struct timespec reconcile_work_start(void)
{
	struct timespec t;
	clock_gettime(CLOCK_MONOTONIC, &t);
	return t;
}

/** Counts the reconciler's own time (diff, batches, records, checks), never the units'. */
static inline void reconcile_work_end(struct timespec t0)
{
	metrics_counter_add(
	    "ofcd_reconcile_work_seconds_total",
	    "Time the reconciler spent on its own work (not waiting for OCS units).", NULL,
	    reconcile_since(&t0));
}

/** The unit's desired cross-connects (desired.h: valid until the next commit). */
static inline struct desired_set reconcile_unit_desired(const struct unit *u)
{
	return desired_of(u->r->d.desired, u->id);
}

/** A walk of a sorted list of cross-connects along a desired set (one merge pass). */
struct reconcile_walk {
	const struct desired_set *ds; /**< the set walked (borrowed) */
	size_t k;                     /**< position reached */
};

/** Index of xc in the set, or -1; xc must not be less than the one asked before. */
static inline ssize_t reconcile_walk_index(struct reconcile_walk *w, const struct plan_xc *xc)
{
	while (w->k < w->ds->n && plan_xc_cmp(&w->ds->xc[w->k], xc) < 0)
		w->k++;
	return w->k < w->ds->n && plan_xc_cmp(&w->ds->xc[w->k], xc) == 0 ? (ssize_t)w->k : -1;
}

/** The fabric owning port of u in owner[] (from reconcile_port_owners()), 0 for none. */
static inline int64_t reconcile_port_owner(const struct unit *u, const int64_t *owner,
                                           uint32_t port)
{
	return port >= 1 && port <= u->ports ? owner[port] : 0;
}

/* ---- reconcile_store.c: the reconciler's rows ------------------------------ */

/**
 * Marks operations a crash left running as interrupted (at start, in an
 * acknowledged transaction).
 */
void reconcile_store_interrupted(struct reconciler *r);

/**
 * Records the batch b about to be sent to u as a running operation (with
 * its pairs and the names of the fabrics it touches, kept in u->op_fabrics).
 * Returns the operation id, or 0 when it could not be stored (the batch is
 * sent all the same).
 */
int64_t reconcile_op_start(struct reconciler *r, struct unit *u, const struct plan_batch *b);

/**
 * Ends u's operation in flight, if any: stores status (0, -ESHUTDOWN for
 * interrupted, else failed with err or strerror), counts it, publishes
 * EVENTS_OPERATION and clears u->op_id and u->op_fabrics.
 */
void reconcile_op_finish(struct reconciler *r, struct unit *u, int status, const char *err);

/** Notes that u's read-back changed: written to actual_xc within a second. */
void reconcile_actual_changed(struct reconciler *r, struct unit *u);

/** Writes every changed read-back to actual_xc now (one relaxed transaction). */
void reconcile_flush_actual(struct reconciler *r);

/** The ev_flush callback (arg: the reconciler). */
void reconcile_flush_cb(evutil_socket_t fd, short what, void *arg);

/**
 * Fills u->peer[] with the read-back the previous run stored, for the server
 * reservation until the first read-back (see reconcile_server_joined()).
 */
void reconcile_store_last_known(struct reconciler *r, struct unit *u);

/** Records a port of u going up or down (ocs_port_down) and publishes EVENTS_PORT_STATE. */
void reconcile_store_port_state(struct reconciler *r, struct unit *u, uint32_t port, bool up);

/** The unit's ports whose link is down, as a new JSON array of numbers. */
json_t *reconcile_store_ports_down(struct reconciler *r, int64_t ocs_id);

/* ---- reconcile_state.c: owners, isolation, fabric states ------------------- */

/**
 * Fabric owning each OCS port of u (0 = none), through cable and membership,
 * indexed by port (ports + 1 entries). Owned by u, valid until the next kick;
 * NULL when memory is short.
 */
const int64_t *reconcile_port_owners(struct reconciler *r, struct unit *u);

/** Appends name (copied) to the JSON array of names a unless it is there already. */
void reconcile_add_name(json_t *a, const char *name);

/** Adds the names of fabrics ids[0..n) (0 = none) to the array a; sorts ids. */
void reconcile_add_fabric_names(struct reconciler *r, json_t *a, int64_t *ids, size_t n);

/**
 * Checks u's fresh read-back for cross-connects that join two fabrics (or a
 * fabric and a port of none): each new one is logged, counted and published
 * as EVENTS_ISOLATION_VIOLATION once; u->violations keeps the current ones.
 */
void reconcile_check_isolation(struct reconciler *r, struct unit *u);

/** Schedules the fabric state update on the next loop iteration (coalesced). */
void reconcile_schedule_states(struct reconciler *r);

/**
 * The ev_states callback (arg: the reconciler): derives every fabric's state,
 * stores and publishes the changes, then publishes EVENTS_SETTLED; re-arms
 * itself while a fabric is not settled.
 */
void reconcile_states_cb(evutil_socket_t fd, short what, void *arg);

#endif
