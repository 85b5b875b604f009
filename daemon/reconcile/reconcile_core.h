/*
 * The reconciler's parts and what they share: private to daemon/reconcile/
 * (and the reconciler's unit test). reconcile.h is the public API.
 *
 * Five files, each calling only the ones below it, and each with a header of
 * what it offers (this one: the types every part works on):
 *
 *   reconcile.c        (reconcile.h) units and their driver instances,
 *                      following the ocs table; driver callbacks; the pass and
 *                      its batches; the timers; the public API
 *   reconcile_audit.c  (reconcile_audit.h) the full recomputation: every
 *                      unit's and fabric's bookkeeping rebuilt from scratch
 *                      and compared with the incremental one (the periodic
 *                      audit, and after every state update in check mode)
 *   reconcile_ports.c  (reconcile_ports.h) per unit and port: what is held
 *                      against what is desired (missing and stray
 *                      cross-connects, hold-back marks), kept up to date from
 *                      the changes alone; the next batch, the isolation check,
 *                      the server reservation
 *   reconcile_state.c  (reconcile_state.h) per fabric and unit: the counts a
 *                      fabric's state is derived from, the fabrics' rows and
 *                      derived states, stored with the journal's operations
 *   reconcile_store.c  (reconcile_store.h) the reconciler's own records:
 *                      operations through a journal, the read-back copy, port
 *                      link states (the SQL is the domain's operations.h and
 *                      readback.h)
 *
 * The bookkeeping is incremental: the in-memory desired state tells what
 * changed in each commit (desired.h's hooks), a read-back is compared with
 * the previous one, and only the ports, cells and fabrics touched are
 * updated, so a change costs what it changes, not what the cluster holds.
 *
 * Loop thread only, like the whole reconciler: no locks anywhere.
 */
#ifndef OFCD_RECONCILE_CORE_H
#define OFCD_RECONCILE_CORE_H

#include <event2/util.h>
#include <jansson.h>
#include <stdbool.h>
#include <stdint.h>
#include <string.h>
#include <sys/types.h>
#include <time.h>

#include "base/metrics.h"
#include "state/desired.h"
#include "ocs_driver.h"
#include "plan_diff.h"
#include "reconcile.h"
#include "monotonic.h"

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

/**
 * OCS ports the periodic audit recomputes per second of its interval
 * (61,440 a round at the default 30 s, and the unit that crosses it): at
 * 32,770 servers on 64 units of 32,770 ports every unit is recomputed within
 * 32 rounds (16 minutes) and the audit stays under 1% of a core; up to about
 * 950 servers on 64 units are recomputed whole every round.
 */
#define RECONCILE_AUDIT_PORTS_PER_S 2048

/** Consecutive failed batches of a unit before its fabrics are "failed". */
#define RECONCILE_FAILED_AFTER 5

/* The help texts of the reconciler's counters, one per counter wherever it is added. */
#define RECONCILE_HELP_DRIFT "Audits that found an OCS unit changed by hand and repaired it."
#define RECONCILE_HELP_ISOLATION                                                                   \
	"Cross-connects found joining two fabrics (or a fabric and no fabric)."
#define RECONCILE_HELP_BATCHES "Batches sent to OCS units by result."
#define RECONCILE_HELP_AUDIT_ROUNDS                                                                \
	"Periodic audit rounds started (each reads every unit back and recomputes a share of "     \
	"them)."
#define RECONCILE_HELP_AUDIT_UNITS "Units whose bookkeeping the periodic audit recomputed."
#define RECONCILE_HELP_AUDIT_CYCLES                                                                \
	"Times the periodic audit's recomputation went through every unit."
#define RECONCILE_HELP_AUDIT                                                                       \
	"Differences the audit found between the reconciler's incremental bookkeeping and a "      \
	"full recomputation (each one a bug, repaired)."

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
	/** Times the connection went down, by the reason word of the driver's error
	 * (down_reasons[]) */
	uint64_t downs[8];

	bool busy;          /**< an apply or read is in flight */
	bool have_actual;   /**< actual[] reflects a read since the last (re)connect */
	bool read_once;     /**< read back since this reconciler opened it (kept on reconnects) */
	int64_t read_since; /**< the store's applied revision when the read in flight was sent */
	/**
	 * Until read_once: the other end of a former entry (desired.h) at each
	 * port, ports + 1 entries, as of former_version; NULL until asked.
	 */
	uint32_t *former_peer;
	uint64_t former_version; /**< desired_former_version() when former_peer was filled */
	bool in_sync;            /**< the last diff was empty */
	bool applied_since_read; /**< a batch ended since the last read-back (no drift then) */
	bool actual_dirty;       /**< actual[] not yet written to the store */
	struct plan_xc *actual;  /**< cross-connects held at the last read-back, sorted */
	size_t nactual;          /**< entries in actual */
	size_t actual_cap;       /**< room in actual */
	struct plan_xc *spare;   /**< the read-back before, its room reused by the next */
	size_t spare_cap;        /**< room in spare */
	uint32_t *peer;          /**< peer[port] for actual, 0 when unjoined; ports + 1 entries */
	uint32_t *joining; /**< the same for additions sent since the last read-back; ports + 1 */
	size_t njoining;   /**< entries set in joining (0: nothing to clear at the next read) */
	uint32_t *joined;  /**< the ports set in joining, njoining of them, unless joined_lost */
	size_t joined_cap; /**< room in joined */
	bool joined_lost;  /**< joined could not grow: the next read clears all of joining */
	int64_t *owner;    /**< fabric owning each port (0: none), as desired.h said; ports + 1 */
	uint32_t *hold;    /**< hold-back marks per port, see reconcile_ports.c; ports + 1 */
	struct reconcile_xcset miss;  /**< desired cross-connects the unit does not hold */
	struct reconcile_xcset stray; /**< held cross-connects nobody desires (ports in range) */
	struct plan_xc *oor;          /**< held cross-connects with a port beyond ports */
	size_t noor;                  /**< entries in oor */
	unsigned foreign_all;         /**< foreign entries that match or flood every port */
	struct reconcile_cell *cells; /**< its (fabric, unit) cells, a list (reconcile_state.c) */
	bool touched;                 /**< its flags changed since the last state update */
	struct reconcile_cell *troubled_cells; /**< its troubled cells, a list */
	/**
	 * What of the unit all its cells' troubled flags were last judged by
	 * (see reconcile_unit_retrouble()); 0: not all by the same.
	 */
	unsigned trouble_basis;
	struct plan_xc *flushed;    /**< actual as last written to actual_xc, sorted */
	size_t nflushed;            /**< entries in flushed */
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
	bool audit_read;     /**< the read in flight is the periodic audit's */
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
	/** Units closed while the daemon runs (removed or reopened). */
	uint64_t units_closed;
	struct event *ev_pass;    /**< deferred pass (reconcile_kick) */
	struct event *ev_audit;   /**< periodic audit */
	struct event *ev_states;  /**< deferred fabric state update, and its tick */
	struct event *ev_flush;   /**< deferred write of read-back states to the store */
	bool prune_due;           /**< operations were journaled since the history was pruned */
	struct event *ev_journal; /**< deferred write of the operations journal */
	struct reconcile_journal_entry
	    *journal;             /**< operations not written yet (reconcile_store.c) */
	size_t njournal;          /**< entries in journal */
	size_t capjournal;        /**< room in journal */
	int64_t next_op_id;       /**< id of the next operation */
	uint64_t generation;      /**< passes started */
	struct hook states_hook;  /**< reconcile_states listeners (reconcile_states_hook()) */
	struct hook formers_hook; /**< reconcile_formers_gone listeners */

	/* reconcile_state.c: fabrics and cells. */
	struct reconcile_fab **fabs;    /**< known fabrics by id (sorted), owned */
	size_t nfabs;                   /**< entries in fabs */
	size_t capfabs;                 /**< room in fabs */
	struct reconcile_cell **cells;  /**< (fabric, unit) cells, open addressing by both ids */
	size_t capcells;                /**< slots in cells (a power of two, or 0) */
	size_t ncells;                  /**< cells in use */
	struct reconcile_fab **dirty;   /**< fabrics to derive the state of again */
	size_t ndirty;                  /**< entries in dirty */
	size_t capdirty;                /**< room in dirty */
	size_t nunsettled;              /**< fabrics not in a final state (or failed) */
	struct timespec last_tick;      /**< when the unsettled fabrics were last derived again */
	bool rows_stale;                /**< every fabric row must be read again */
	bool muted;                     /**< storing states: the row changes are its own */
	unsigned long audit_mismatches; /**< differences an audit found (each one a bug) */
	struct event *ev_audit_slice;   /**< the audit's next slice of recomputation */
	int64_t audit_next;             /**< the audit goes on with the unit of this id or above */
	uint64_t audit_ports_left;      /**< OCS ports this round may still recompute */
	size_t audit_round_units;       /**< units this round recomputed */
	unsigned audit_interval_s;      /**< seconds between rounds (the budget scales with it) */
};

/* ---- small helpers every part uses ---------------------------------------- */

/** Start of a stretch of the reconciler's own work, for reconcile_work_end(). */
struct reconcile_work {
	struct timespec wall; /**< CLOCK_MONOTONIC */
	struct timespec cpu;  /**< CLOCK_THREAD_CPUTIME_ID: the same without time preempted */
	bool audit;           /**< the periodic audit's, counted apart from changes' */
};

/** Marks the start of a stretch of the reconciler's own work (the audit's when audit). */
static inline struct reconcile_work reconcile_work_begin(bool audit)
{
	struct reconcile_work w = { .audit = audit };
	clock_gettime(CLOCK_MONOTONIC, &w.wall);
	clock_gettime(CLOCK_THREAD_CPUTIME_ID, &w.cpu);
	return w;
}

/** Marks the start of a stretch of work for changes (reconcile_work_begin(false)). */
static inline struct reconcile_work reconcile_work_start(void)
{
	return reconcile_work_begin(false);
}

/**
 * Counts the reconciler's own time (diff, batches, records, checks), never the
 * units': wall time, and the thread's CPU time, which a busy machine that
 * preempts the daemon does not inflate. The periodic audit's goes to counters
 * of its own, so that what a change costs reads without it.
 */
static inline void reconcile_work_end(struct reconcile_work w)
{
	struct timespec cpu;
	clock_gettime(CLOCK_THREAD_CPUTIME_ID, &cpu);
	double wall = mono_since(&w.wall), used = mono_diff(&w.cpu, &cpu);
	if (w.audit) {
		metrics_counter_add("ofcd_reconcile_audit_work_seconds_total",
		                    "Time the periodic audit spent on its own work (read-backs it "
		                    "asked for, recomputation, comparison with the store).",
		                    NULL, wall);
		metrics_counter_add("ofcd_reconcile_audit_work_cpu_seconds_total",
		                    "CPU time of the periodic audit's own work.", NULL, used);
		return;
	}
	metrics_counter_add(
	    "ofcd_reconcile_work_seconds_total",
	    "Time the reconciler spent on its own work (not waiting for OCS units).", NULL, wall);
	metrics_counter_add("ofcd_reconcile_work_cpu_seconds_total",
	                    "CPU time of the reconciler's own work (its wall time less the time "
	                    "the daemon was not running).",
	                    NULL, used);
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

#endif
