/*
 * The fabric state machine: what a fabric's state is, given what its OCS
 * units hold. Pure; the reconciler feeds it after every batch and read-back.
 *
 *   pending  --batch sent-->  applying  --all circuits held-->  applied | degraded
 *      \                         |
 *       `---- a unit refused FAILED_AFTER batches, or is down too long ----> failed
 *
 * and any state goes back to pending when the plan changes (a new revision).
 */
#ifndef OFCD_PLAN_STATE_H
#define OFCD_PLAN_STATE_H

#include <stdbool.h>
#include <stddef.h>

/** Fabric states, in the order they are usually passed through. */
enum plan_state {
	PLAN_STATE_PENDING = 0, /**< stored, not yet sent to the units */
	PLAN_STATE_APPLYING,    /**< batches in flight, or not every circuit held yet */
	PLAN_STATE_APPLIED,     /**< every circuit held, every pair has one */
	PLAN_STATE_DEGRADED,    /**< every circuit held, some pairs have none */
	PLAN_STATE_FAILED,      /**< a unit keeps refusing, or has been unreachable too long */
	PLAN_STATE__COUNT
};

/** What the reconciler knows about one fabric at one moment. */
struct plan_state_input {
	enum plan_state current; /**< the stored state */
	bool all_held;           /**< every circuit of the plan is on its unit (read back) */
	size_t missing_pairs;    /**< pairs of servers without a circuit in the plan */
	bool unit_failing;       /**< a unit holding a missing circuit is failing (see above) */
	bool busy;               /**< a batch is in flight on a unit holding a missing circuit */
};

/** The state that follows from in. */
enum plan_state plan_state_next(const struct plan_state_input *in);

/** "pending", "applying", ... ; "?" out of range. */
const char *plan_state_name(enum plan_state s);

/** Parses a state name; returns 0 or -EINVAL. */
int plan_state_parse(const char *name, enum plan_state *out);

/** True for the states a ?wait ends on: applied, degraded, failed. */
bool plan_state_final(enum plan_state s);

#endif
