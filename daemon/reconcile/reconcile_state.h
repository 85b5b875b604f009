/*
 * What reconcile_state.c offers the other parts: the (fabric, unit) cells,
 * the fabrics as the state derivation sees them, and the state update. It
 * calls reconcile_store.h only. Private to daemon/reconcile/.
 */
#ifndef OFCD_RECONCILE_STATE_H
#define OFCD_RECONCILE_STATE_H

#include "reconcile_core.h"

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
	struct reconcile_cell *tnext; /**< next troubled cell of the same unit */
	struct reconcile_cell *tprev; /**< previous troubled cell of the same unit */
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

/** Notes that u's flags changed (busy, connection, failures, read back; not the busy spell of an
 * audit's read that finds nothing) and schedules states. */
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
 * The state update (r->ev_states' work): derives the state of the fabrics
 * whose counts, rows or units changed, for a slice of at most a few
 * milliseconds, stores the changes with the journal's operations and
 * publishes them. Re-arms ev_states at once when fabrics are left (then
 * false), or for the next tick while a fabric is not settled. True when
 * every changed fabric was derived.
 */
bool reconcile_states_update(struct reconciler *r);

/** Frees every fabric record and cell (at the end). */
void reconcile_state_free(struct reconciler *r);

#endif
