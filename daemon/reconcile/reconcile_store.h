/*
 * What reconcile_store.c offers the other parts: the reconciler's own
 * records (operations through a journal, the read-back copy, port link
 * states). It calls no other part. Private to daemon/reconcile/.
 */
#ifndef OFCD_RECONCILE_STORE_H
#define OFCD_RECONCILE_STORE_H

#include "reconcile_core.h"

/**
 * Marks operations a crash left running as interrupted (at start, in an
 * acknowledged transaction).
 */
void reconcile_store_interrupted(struct reconciler *r);

/**
 * Records the batch b about to be sent to u as a running operation (with
 * its pairs and the names of the fabrics it touches, which the caller put in
 * u->op_fabrics) in the journal, written on the next loop iteration with every other
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
 * What u held at its last read-back as the previous run stored it (up to a
 * second behind): *held (malloc'd, the caller's, sorted) and *n. Returns 0
 * or -ENOMEM.
 */
int reconcile_store_last_known(struct reconciler *r, struct unit *u, struct plan_xc **held,
                               size_t *n);

/** Notes that the store holds u->actual as it is now: the next write sends what differs. */
void reconcile_store_flushed(struct unit *u);

/** Records a port of u going up or down (ocs_port_down) and publishes EVENTS_PORT_STATE. */
void reconcile_store_port_state(struct reconciler *r, struct unit *u, uint32_t port, bool up);

/** The unit's ports whose link is down, as a new JSON array of numbers. */
json_t *reconcile_store_ports_down(struct reconciler *r, int64_t ocs_id);

#endif
