/*
 * The reconciler's parts and what they share: private to daemon/reconcile*.c
 * (and the reconciler's unit test). reconcile.h is the public API.
 *
 * Five files, each calling only the ones below it, so none links back into
 * its caller:
 *
 *   reconcile.c        units and their driver instances (following the ocs
 *                      table), driver callbacks, the pass and its batches,
 *                      the public API
 *   reconcile_audit.c  the full recomputation: every unit's and fabric's
 *                      bookkeeping rebuilt from scratch and compared with the
 *                      incremental one (the periodic audit, and after every
 *                      state update in check mode)
 *   reconcile_store.c  the reconciler's own rows: operations (one per batch),
 *                      the read-back copy (actual_xc), port link states
 *   reconcile_ports.c  per unit and port: what is held against what is
 *                      desired (missing and stray cross-connects, hold-back
 *                      marks), kept up to date from the changes alone; the
 *                      next batch, the isolation check, the server reservation
 *   reconcile_state.c  per fabric and unit: the counts a fabric's state is
 *                      derived from, the fabrics' rows and derived states
 *
 * The bookkeeping is incremental: the in-memory desired state tells what
 * changed in each commit (desired_listen), a read-back is compared with the
 * previous one, and only the ports, cells and fabrics touched are updated, so
 * a change costs what it changes, not what the cluster holds.
 *
 * Loop thread only, like the whole reconciler: no locks anywhere.
 */
#ifndef OFCD_RECONCILE_INTERNAL_H
#define OFCD_RECONCILE_INTERNAL_H

#include <event2/util.h>
#include <jansson.h>
#include <stdbool.h>
#include <stdint.h>
#include <string.h>
#include <sys/types.h>
#include <time.h>

#include "state/desired.h"
#include "base/metrics.h"
#include "ocs_driver.h"
#include "plan_diff.h"
#include "reconcile.h"

struct event;
struct reconcile_fab;           /* a fabric as the state update sees it (reconcile_state.c) */
struct reconcile_cell;          /* what one fabric has on one unit (reconcile_state.c) */
struct reconcile_journal_entry; /* an operation not written yet (reconcile_store.c) */

/**
 * Cross-connects of one unit keyed by their lower port: add, remove and test
 * in O(1), listed unordered. Owned by the unit (reconcile_ports.c).
 */
struct reconcile_xcset {
	uint32_t *pos; /**< pos[a]: index + 1 in v of the entry whose lower port is a; ports + 1 */
	struct plan_xc *v; /**< the entries */
	size_t n;          /**< entries in v */
	size_t cap;        /**< room in v */
};

/** Longest stretch of work that yields to the loop after it (states, units, writes), in µs. */
#define RECONCILE_SLICE_US 2000

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
	uint32_t *joining; /**< the same for additions sent since the last read-back; ports + 1 */
	size_t njoining;   /**< entries set in joining (0: nothing to clear at the next read) */
	int64_t *owner;    /**< fabric owning each port (0: none), as desired.h said; ports + 1 */
	uint32_t *hold;    /**< hold-back marks per port, see reconcile_ports.c; ports + 1 */
	struct reconcile_xcset miss;  /**< desired cross-connects the unit does not hold */
	struct reconcile_xcset stray; /**< held cross-connects nobody desires (ports in range) */
	struct plan_xc *oor;          /**< held cross-connects with a port beyond ports */
	size_t noor;                  /**< entries in oor */
	unsigned foreign_all;         /**< foreign entries that match or flood every port */
	struct reconcile_cell *cells; /**< its (fabric, unit) cells, a list (reconcile_state.c) */
	bool touched;                 /**< its flags changed since the last state update */
	struct plan_xc *flushed;      /**< actual as last written to actual_xc, sorted */
	size_t nflushed;              /**< entries in flushed */
	struct plan_xc *violations;   /**< isolation violations at the last read-back */
	size_t nviolations;           /**< entries in violations */
	struct ocs_flow *partial;     /**< one-way entries of ofcd's at the last read-back */
	size_t npartial;              /**< entries in partial */
	struct ocs_flow *foreign;     /**< entries ofcd did not make, at the last read-back */
	size_t nforeign;              /**< entries in foreign */

	/** Why the next batch is sent: startup, change, connect, audit, retry (static string). */
	const char *trigger;
	int64_t op_id;       /**< operation row of the batch in flight, 0 if none */
	json_t *op_fabrics;  /**< names of the fabrics that batch touches, NULL if none */
	unsigned failures;   /**< consecutive failed batches */
	struct event *retry; /**< backoff timer after a failure */
	bool retry_pending;  /**< retry is armed: nothing is sent before it fires */
	struct unit *next;   /**< next unit of the reconciler */
};

/** The reconciler (reconcile.h): its units, timers and fabrics. */
struct reconciler {
	struct reconcile_deps d; /**< what it works with (borrowed) */
	struct unit *units;      /**< one per row of the ocs table, owned */
	struct unit **byid;      /**< the units sorted by id, for lookups; nunits entries */
	size_t nunits;           /**< entries in byid */
	uint64_t units_version;  /**< desired_units_version() at the last sync with the ocs table */
	bool units_synced;       /**< units_version is meaningful */
	struct event *ev_pass;   /**< deferred pass (reconcile_kick) */
	struct event *ev_audit;  /**< periodic audit */
	struct event *ev_states; /**< deferred fabric state update, and its tick */
	struct event *ev_flush;  /**< deferred write of read-back states to the store */
	struct event *ev_journal; /**< deferred write of the operations journal */
	struct reconcile_journal_entry
	    *journal;       /**< operations not written yet (reconcile_store.c) */
	size_t njournal;    /**< entries in journal */
	size_t capjournal;  /**< room in journal */
	int64_t next_op_id; /**< id of the next operation */
	/** reconcile_journal_flush(), for the state update; NULL until init is done. */
	void (*journal_flush)(struct reconciler *r);
	/** reconcile_journal_ended(), for the state update. */
	bool (*journal_ended)(const struct reconciler *r);
	/** reconcile_journal_write(), for the state update's transaction. */
	int (*journal_write)(struct reconciler *r);
	/** reconcile_journal_done(), after that transaction. */
	void (*journal_done)(struct reconciler *r);
	uint64_t generation; /**< passes started */

	/* reconcile_state.c: fabrics and cells. */
	struct reconcile_fab **fabs;   /**< known fabrics by id (sorted), owned */
	size_t nfabs;                  /**< entries in fabs */
	size_t capfabs;                /**< room in fabs */
	struct reconcile_cell **cells; /**< (fabric, unit) cells, open addressing by both ids */
	size_t capcells;               /**< slots in cells (a power of two, or 0) */
	size_t ncells;                 /**< cells in use */
	struct reconcile_fab **dirty;  /**< fabrics to derive the state of again */
	size_t ndirty;                 /**< entries in dirty */
	size_t capdirty;               /**< room in dirty */
	size_t nunsettled;             /**< fabrics not in a final state (or failed) */
	struct timespec last_tick;     /**< when the unsettled fabrics were last derived again */
	bool rows_stale;               /**< every fabric row must be read again */
	bool muted;                    /**< storing states: the row changes are its own */
	/** In check mode, reconcile_audit_all(), called after every state update; else NULL. */
	unsigned (*check)(struct reconciler *r);
	unsigned long audit_mismatches; /**< differences an audit found (each one a bug) */
	struct event *ev_audit_slice;   /**< the audit's next slice of recomputation */
	int64_t audit_next;             /**< the audit goes on with the unit of this id or above */
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
struct reconcile_work {
	struct timespec wall; /**< CLOCK_MONOTONIC */
	struct timespec cpu;  /**< CLOCK_THREAD_CPUTIME_ID: the same without time preempted */
};

/** Marks the start of a stretch of the reconciler's own work. */
static inline struct reconcile_work reconcile_work_start(void)
{
	struct reconcile_work w;
	clock_gettime(CLOCK_MONOTONIC, &w.wall);
	clock_gettime(CLOCK_THREAD_CPUTIME_ID, &w.cpu);
	return w;
}

/**
 * Counts the reconciler's own time (diff, batches, records, checks), never the
 * units': wall time, and the thread's CPU time, which a busy machine that
 * preempts the daemon does not inflate.
 */
static inline void reconcile_work_end(struct reconcile_work w)
{
	struct timespec cpu;
	clock_gettime(CLOCK_THREAD_CPUTIME_ID, &cpu);
	metrics_counter_add(
	    "ofcd_reconcile_work_seconds_total",
	    "Time the reconciler spent on its own work (not waiting for OCS units).", NULL,
	    reconcile_since(&w.wall));
	metrics_counter_add("ofcd_reconcile_work_cpu_seconds_total",
	                    "CPU time of the reconciler's own work (its wall time less the time "
	                    "the daemon was not running).",
	                    NULL,
	                    (double)(cpu.tv_sec - w.cpu.tv_sec) +
	                        (double)(cpu.tv_nsec - w.cpu.tv_nsec) / 1e9);
}

/** The unit's desired cross-connects (desired.h: valid until the next commit). */
static inline struct desired_set reconcile_unit_desired(const struct unit *u)
{
	return desired_of(u->r->d.desired, u->id);
}

/* Entries compared per memcmp() when looking for the first difference. */
#define RECONCILE_XCS_BLOCK 64

/**
 * How many leading entries a[] and b[] (n each) have in common: compared a
 * block at a time with memcmp(), at memory speed, since two read-backs of a
 * unit differ in a few entries.
 */
static inline size_t reconcile_xcs_head(const struct plan_xc *a, const struct plan_xc *b, size_t n)
{
	size_t i = 0;
	while (i + RECONCILE_XCS_BLOCK <= n &&
	       memcmp(a + i, b + i, RECONCILE_XCS_BLOCK * sizeof(*a)) == 0)
		i += RECONCILE_XCS_BLOCK;
	while (i < n && a[i].a == b[i].a && a[i].b == b[i].b)
		i++;
	return i;
}

/** How many trailing entries a[0..na) and b[0..nb) have in common (as reconcile_xcs_head). */
static inline size_t reconcile_xcs_tail(const struct plan_xc *a, size_t na, const struct plan_xc *b,
                                        size_t nb)
{
	size_t t = 0, n = na < nb ? na : nb;
	while (t + RECONCILE_XCS_BLOCK <= n &&
	       memcmp(a + na - t - RECONCILE_XCS_BLOCK, b + nb - t - RECONCILE_XCS_BLOCK,
	              RECONCILE_XCS_BLOCK * sizeof(*a)) == 0)
		t += RECONCILE_XCS_BLOCK;
	while (t < n && a[na - 1 - t].a == b[nb - 1 - t].a && a[na - 1 - t].b == b[nb - 1 - t].b)
		t++;
	return t;
}

/** The fabric owning port of u, 0 for none (or out of range). */
static inline int64_t reconcile_port_owner(const struct unit *u, uint32_t port)
{
	return port >= 1 && port <= u->ports ? u->owner[port] : 0;
}

/** The unit with ocs.id id, or NULL. */
struct unit *reconcile_unit_by_id(struct reconciler *r, int64_t id);

/* ---- reconcile_store.c: the reconciler's rows ------------------------------ */

/**
 * Marks operations a crash left running as interrupted (at start, in an
 * acknowledged transaction).
 */
void reconcile_store_interrupted(struct reconciler *r);

/**
 * Records the batch b about to be sent to u as a running operation (with
 * its pairs and the names of the fabrics it touches, kept in u->op_fabrics)
 * in the journal, written on the next loop iteration with every other
 * operation of this one (one transaction, not one per unit). Returns the
 * operation id, or 0 when out of memory (the batch is sent all the same).
 */
int64_t reconcile_op_start(struct reconciler *r, struct unit *u, const struct plan_batch *b);

/**
 * Ends u's operation in flight, if any: its status (0, -ESHUTDOWN for
 * interrupted, else failed with err or strerror) goes to the journal, which
 * stores it and then publishes EVENTS_OPERATION; counts it and clears
 * u->op_id and u->op_fabrics.
 */
void reconcile_op_finish(struct reconciler *r, struct unit *u, int status, const char *err);

/**
 * Writes the journal (operations started and ended since the last time) in
 * the open transaction. Returns 0 or -EIO; reconcile_journal_done() follows
 * in any case.
 */
int reconcile_journal_write(struct reconciler *r);

/** Whether the journal holds the end of a batch (someone may be waiting to hear it). */
bool reconcile_journal_ended(const struct reconciler *r);

/** Publishes the ends the journal holds, in order, and empties it (after its write). */
void reconcile_journal_done(struct reconciler *r);

/**
 * Writes the journal in a relaxed transaction of its own and publishes the
 * ends: its timer's doing, a few milliseconds after an entry, or the state
 * update's when the journal holds an end and no state changed. A state update
 * that stores states writes the journal in the same transaction (through
 * r->journal_write and r->journal_done) and publishes it first, so a fabric's
 * state is never published before the batches that made it, and whoever waits
 * for a fabric finds its operations listed.
 */
void reconcile_journal_flush(struct reconciler *r);

/** The ev_journal callback (arg: the reconciler). */
void reconcile_journal_cb(evutil_socket_t fd, short what, void *arg);

/** The id the next operation gets: one past the highest stored. */
int64_t reconcile_store_next_op(struct reconciler *r);

/** Notes that u's read-back changed: written to actual_xc within a second. */
void reconcile_actual_changed(struct reconciler *r, struct unit *u);

/** Writes every changed read-back to actual_xc now (at the end). */
void reconcile_flush_actual(struct reconciler *r);

/**
 * The ev_flush callback (arg: the reconciler): writes the changed read-backs,
 * only what differs from what was written, in relaxed transactions of about
 * RECONCILE_SLICE_US each (a unit at a time), re-armed until all are.
 */
void reconcile_flush_cb(evutil_socket_t fd, short what, void *arg);

/**
 * Sets u's read-back to the one the previous run stored (through
 * reconcile_ports_set_actual()), for the server reservation until the first
 * read-back (see reconcile_port_joined()); u->have_actual stays false.
 */
void reconcile_store_last_known(struct reconciler *r, struct unit *u);

/** Records a port of u going up or down (ocs_port_down) and publishes EVENTS_PORT_STATE. */
void reconcile_store_port_state(struct reconciler *r, struct unit *u, uint32_t port, bool up);

/** The unit's ports whose link is down, as a new JSON array of numbers. */
json_t *reconcile_store_ports_down(struct reconciler *r, int64_t ocs_id);

/* ---- reconcile_ports.c: held against desired, per port --------------------- */

/**
 * Allocates u's per-port arrays and sets its bookkeeping from what the
 * desired state says of it now (owners, desired cross-connects); it holds
 * nothing yet. Returns 0 or -ENOMEM.
 */
int reconcile_ports_init(struct reconciler *r, struct unit *u);

/**
 * Rebuilds u's bookkeeping from scratch: its cells dropped, its arrays
 * cleared, then set again from the desired state and what u holds (the
 * audit's repair).
 */
void reconcile_ports_rebuild(struct reconciler *r, struct unit *u);

/** Frees u's per-port arrays and its cells. */
void reconcile_ports_free(struct reconciler *r, struct unit *u);

/**
 * Makes xc of fabric desired on u (added) or no longer: the desired.h
 * listener's circuit callback, for a unit that exists.
 */
void reconcile_ports_desired(struct reconciler *r, struct unit *u, struct plan_xc xc,
                             int64_t fabric, bool added);

/** Port of u changed owner: the desired.h listener's owner callback. */
void reconcile_ports_owner(struct reconciler *r, struct unit *u, uint32_t port, int64_t before,
                           int64_t after);

/**
 * Replaces what u holds by a read-back: actual[0..n) sorted and unique (taken
 * over, malloc'd), one-way and foreign entries (copied). Only the
 * cross-connects that differ from the previous read-back are looked at.
 * Returns whether the held cross-connects changed.
 */
bool reconcile_ports_set_actual(struct reconciler *r, struct unit *u, struct plan_xc *actual,
                                size_t n, const struct ocs_flow *partial, size_t npartial,
                                const struct ocs_flow *foreign, size_t nforeign);

/**
 * The next batch for u from its bookkeeping alone: its stray cross-connects
 * and one-way entries nobody desires are removed, its missing ones added,
 * sorted, split as plan_diff() does (removals only when they exceed max_ops).
 * Returns 0 or -ENOMEM.
 */
int reconcile_ports_batch(struct unit *u, size_t max_ops, struct plan_batch *b);

/**
 * Checks u's fresh read-back for cross-connects that join two fabrics (or a
 * fabric and a port of none): each new one is logged, counted and published
 * as EVENTS_ISOLATION_VIOLATION once; u->violations keeps the current ones.
 * Costs the number of stray and foreign entries, not the unit's size.
 */
void reconcile_check_isolation(struct reconciler *r, struct unit *u);

/**
 * Why port of u may be joined to another port though nothing desires it, in
 * why; false when it is free as far as ofcd knows (reconcile_port_joined()).
 */
bool reconcile_port_leftover(struct reconciler *r, struct unit *u, uint32_t port, char *why,
                             size_t len);

/* ---- reconcile_state.c: cells, fabrics, states ----------------------------- */

/**
 * What one fabric has on one unit: the counts its state is derived from.
 * Owned by the reconciler's cell table; exists while any count is not 0.
 */
struct reconcile_cell {
	struct reconcile_fab *fab; /**< the fabric (borrowed) */
	struct unit *u;            /**< the unit (borrowed) */
	uint32_t desired;          /**< its circuits desired on the unit */
	uint32_t held;             /**< of those, held at the unit's last read-back */
	uint32_t hold;             /**< hold-back marks on its ports of the unit */
	uint32_t owned;            /**< the unit's ports it owns */
	bool troubled; /**< it keeps the fabric from applied (reconcile_cell_troubled) */
	struct reconcile_cell *fnext; /**< next cell of the same fabric */
	struct reconcile_cell *fprev; /**< previous cell of the same fabric */
	struct reconcile_cell *unext; /**< next cell of the same unit */
	struct reconcile_cell *uprev; /**< previous cell of the same unit */
};

/** A fabric as the state derivation sees it: its row and the sums of its cells. */
struct reconcile_fab {
	int64_t id;                   /**< fabric.id */
	char name[65];                /**< fabric.name, "" until the row is read */
	char state[16];               /**< stored state */
	char err[400];                /**< stored error, "" for none */
	int64_t revision;             /**< stored revision */
	int64_t nmissing;             /**< its pairs without a circuit */
	int64_t ncircuits;            /**< its stored circuits: all must be on known units */
	bool row;                     /**< its row was read (false: not stored, or deleted) */
	bool row_stale;               /**< the row must be read again before deriving */
	bool dirty;                   /**< on r->dirty */
	bool unsettled;               /**< counted in r->nunsettled: re-derived on every tick */
	uint32_t ndesired;            /**< sum of its cells' desired */
	uint32_t ntroubled;           /**< its cells that are troubled */
	struct reconcile_cell *cells; /**< its cells, a list */
};

/** Whether c keeps its fabric from applied (missing circuits or hold-back, or not read back). */
bool reconcile_cell_troubled(const struct reconcile_cell *c);

/**
 * Adds the deltas to the cell of (fabric, u), creating it (and the fabric's
 * record) when needed and freeing it when every count is back to 0; the
 * fabric is derived again at the next state update. fabric 0 is no fabric:
 * nothing happens. Returns -ENOMEM when a cell could not be made (the next
 * audit repairs it), else 0.
 */
int reconcile_cell_add(struct reconciler *r, int64_t fabric, struct unit *u, int desired, int held,
                       int hold, int owned);

/** The cell of (fabric, u), or NULL. */
struct reconcile_cell *reconcile_cell_find(struct reconciler *r, int64_t fabric,
                                           const struct unit *u);

/** Frees every cell of u (its fabrics are derived again). */
void reconcile_cells_drop(struct reconciler *r, struct unit *u);

/** Notes that u's flags changed (busy, connection, failures, read back) and schedules states. */
void reconcile_unit_changed(struct reconciler *r, struct unit *u);

/**
 * When u's flags changed since the last state update: its cells are judged
 * again now (troubled or not) and its troubled cells' fabrics marked for
 * derivation. The state update does it for every unit; the audit for the
 * unit it compares.
 */
void reconcile_unit_retrouble(struct reconciler *r, struct unit *u);

/** The desired.h listener's fabric callback: the fabric's row (0: every row) is read again. */
void reconcile_fabric_touched(struct reconciler *r, int64_t fabric_id);

/** The fabric's name as last read from its row, or NULL when unknown. */
const char *reconcile_fabric_name(struct reconciler *r, int64_t fabric_id);

/** Appends name (copied) to the JSON array of names a unless it is there already. */
void reconcile_add_name(json_t *a, const char *name);

/** Adds the names of fabrics ids[0..n) (0 = none) to the array a; sorts ids. */
void reconcile_add_fabric_names(struct reconciler *r, json_t *a, int64_t *ids, size_t n);

/** Schedules the fabric state update on the next loop iteration (coalesced). */
void reconcile_schedule_states(struct reconciler *r);

/**
 * The ev_states callback (arg: the reconciler): derives the state of the
 * fabrics whose counts, rows or units changed (a slice of at most a few
 * milliseconds, re-armed at once when more are left), stores and publishes the
 * changes, then publishes EVENTS_SETTLED; re-arms itself while a fabric is not
 * settled. In check mode (reconcile_deps.check) it ends with a full
 * recomputation (r->check).
 */
void reconcile_states_cb(evutil_socket_t fd, short what, void *arg);

/** Frees every fabric record and cell (at the end). */
void reconcile_state_free(struct reconciler *r);

/* ---- reconcile_audit.c: the full recomputation ------------------------------ */

/**
 * Recomputes u's bookkeeping from scratch (what it holds, what is desired of
 * it, its owners and cells, the next batch as plan_diff() computes it from
 * the full sets) and compares it with the incremental one. Each difference is
 * logged and counted (ofcd_reconcile_audit_mismatches_total,
 * r->audit_mismatches) and the unit's bookkeeping rebuilt. With store set,
 * the owners and desired circuits of the in-memory state are also compared
 * with the store (a mismatch makes desired.h reload). Returns the number of
 * differences.
 */
unsigned reconcile_audit_unit(struct reconciler *r, struct unit *u, bool store);

/**
 * Compares every fabric's sums with its cells and every derived state with
 * one computed from a fresh walk of the cells; repairs and counts like
 * reconcile_audit_unit(). Returns the number of differences.
 */
unsigned reconcile_audit_fabrics(struct reconciler *r);

/**
 * Every unit and fabric audited at once, without the store (check mode,
 * tests: the store may be written outside the daemon's transactions there).
 */
unsigned reconcile_audit_all(struct reconciler *r);

#endif
