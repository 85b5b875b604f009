/*
 * What the domain must know of the OCS units' live state to judge a change
 * (whether a server's ports are free, whether a unit may be forgotten),
 * asked through this table rather than by calling up into whoever drives the
 * units: the composition root fills it with the reconciler's answers
 * (reconcile_domain_units()). A member that drives no unit leaves the
 * functions NULL, which answers "nothing known to be joined" and "unknown".
 * Loop thread only.
 */
#ifndef OFCD_DOMAIN_UNITS_H
#define OFCD_DOMAIN_UNITS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/** The units' live state as the domain asks it; every function may be NULL. */
struct domain_units {
	/**
	 * Whether unit ocs_id may still join port to another port that nothing
	 * desires (a leftover of a deleted or re-planned fabric); why gets the unit,
	 * ports and former fabric (len bytes).
	 */
	bool (*port_joined)(void *arg, int64_t ocs_id, uint32_t port, char *why, size_t len);
	/**
	 * Whether any port of unit ocs_id may be one port_joined() says yes of:
	 * false lets a scan of every cable skip the unit's (true when unsure).
	 */
	bool (*unit_may_join)(void *arg, int64_t ocs_id);
	/**
	 * How many cross-connects or one-way entries of ofcd's unit ocs_id held at
	 * its last read-back: 0 when it can be forgotten safely, -1 unknown.
	 */
	long (*unit_held)(void *arg, int64_t ocs_id);
	void *arg; /**< passed back to each */
};

/** u's port_joined(), false when u or it is NULL. */
static inline bool domain_port_joined(const struct domain_units *u, int64_t ocs_id, uint32_t port,
                                      char *why, size_t len)
{
	return u && u->port_joined && u->port_joined(u->arg, ocs_id, port, why, len);
}

/** u's unit_may_join(), true when u has port_joined() but not it. */
static inline bool domain_unit_may_join(const struct domain_units *u, int64_t ocs_id)
{
	return u && u->port_joined && (!u->unit_may_join || u->unit_may_join(u->arg, ocs_id));
}

/** u's unit_held(), -1 (unknown) when u or it is NULL. */
static inline long domain_unit_held(const struct domain_units *u, int64_t ocs_id)
{
	return u && u->unit_held ? u->unit_held(u->arg, ocs_id) : -1;
}

#endif
