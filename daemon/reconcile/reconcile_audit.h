/*
 * What reconcile_audit.c offers the core: the full recomputation of a unit's
 * and the fabrics' bookkeeping, compared with the incremental one. It calls
 * the parts below it (ports, state). Private to daemon/reconcile/.
 */
#ifndef OFCD_RECONCILE_AUDIT_H
#define OFCD_RECONCILE_AUDIT_H

#include "reconcile_core.h"

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
