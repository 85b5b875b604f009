/*
 * What reconcile_ports.c offers the other parts: per unit and port, what is
 * held against what is desired, the next batch, the isolation check. It
 * calls reconcile_state.h and reconcile_store.h. Private to daemon/reconcile/.
 */
#ifndef OFCD_RECONCILE_PORTS_H
#define OFCD_RECONCILE_PORTS_H

#include "reconcile_core.h"

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

/** What a caller of reconcile_ports_set_actual() knows of its new read-back. */
struct reconcile_readback {
	struct plan_xc *xcs; /**< sorted and unique, malloc'd with room for cap: taken over */
	size_t n;            /**< entries in xcs */
	size_t cap;          /**< room in xcs (at least n) */
	size_t same_head;    /**< leading entries known equal to u->actual's (0: unknown) */
	size_t same_tail;    /**< trailing entries known equal to u->actual's (0: unknown) */
};

/**
 * Replaces what u holds by a read-back: rb's cross-connects (the previous
 * array is kept as u->spare for the next read-back), one-way and foreign
 * entries (copied). Only the cross-connects that differ from the previous
 * read-back are looked at. Returns whether the held cross-connects changed.
 */
bool reconcile_ports_set_actual(struct reconciler *r, struct unit *u,
                                const struct reconcile_readback *rb, const struct ocs_flow *partial,
                                size_t npartial, const struct ocs_flow *foreign, size_t nforeign);

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

/**
 * Whether foreign entry f (one ofcd did not make) reaches every port: it
 * takes in every port and outputs, or floods. A table-miss entry that drops
 * or goes to the controller reaches none. Any thread.
 */
static inline bool reconcile_flow_floods(const struct ocs_flow *f)
{
	return (f->in_port == OCS_PORT_ANY && f->out_port != 0) || f->out_port == OCS_PORT_EVERY;
}

/** Whether f leads from a port to another (not dropped, not back to the controller). */
static inline bool reconcile_flow_leads_out(const struct ocs_flow *f)
{
	return f->out_port != 0 && f->in_port != f->out_port;
}

/**
 * Whether a former entry (desired.h) of unit ocs_id ends at port: a
 * cross-connect ofcd made and no longer desires, that the unit may still
 * hold while no read-back has been had since it was opened (u NULL: not
 * opened yet). Says why like reconcile_port_leftover(). Loop thread.
 */
bool reconcile_port_former(struct reconciler *r, int64_t ocs_id, struct unit *u, uint32_t port,
                           char *why, size_t len);

#endif
