/*
 * Fabrics: a set of servers to be fully interconnected (one per job or
 * tenant). Creating one plans it (planner), verifies the plan, stores it
 * with its circuits and stages them in the in-memory desired state; deleting
 * one stages its circuits' removal; a device failing or coming back re-plans
 * the fabric that uses it with the least disruption. The reconciler takes it
 * from the stored state (pending) on.
 *
 * Every function runs inside the caller's store transaction (the API's
 * dispatch), so a refusal rolls back whatever it wrote. Loop thread only.
 */
#ifndef OFCD_FABRIC_H
#define OFCD_FABRIC_H

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "base/errors.h"
#include "fabric_layout.h"

struct desired;
struct domain_units;
struct store;

/** What the fabric functions work with; borrowed for the call. */
struct fabric_ctx {
	struct store *store;              /**< the durable state */
	struct desired *desired;          /**< the circuits in memory, staged with each change */
	const struct domain_units *units; /**< says whether a unit may still join a server */
};

/**
 * Fills e with the planner's 422 infeasible refusal: "M servers need n
 * devices per server, each has N" on field "devices", with min_devices and
 * devices as details. Returns -EDOM.
 */
int fabric_infeasible(struct ofcd_error *e, uint32_t servers, uint32_t min_devices,
                      uint32_t devices);

/**
 * Creates fabric name over the m servers named (in position order; names
 * already checked for form), laid out as layout asks (fabric_layout.h):
 * refused when the name is taken (409), a server is unknown (422), listed
 * twice (400), in another fabric or still joined to another server by some
 * unit (409), when the layout asked for is not one of m servers (400) or
 * when nothing fits the servers' ports (422). Fields are named "servers[i]",
 * "topology" or "shape". Returns the fabric's row id or -errno.
 */
int64_t fabric_create(const struct fabric_ctx *c, const char *name, const char *const *servers,
                      size_t m, const struct fabric_layout *layout, struct ofcd_error *e);

/**
 * PUT of a fabric: creates it as fabric_create() does (*created set), or
 * confirms the stored fabric of that name when it has the same servers in
 * the same order (and, when layout->given, the same topology and shape);
 * other servers are 409 conflict on "servers" with the stored ones as
 * details, another layout 409 on "topology". Returns the fabric's row id or
 * -errno with e set.
 */
int64_t fabric_put(const struct fabric_ctx *c, const char *name, const char *const *servers,
                   size_t m, const struct fabric_layout *layout, bool *created,
                   struct ofcd_error *e);

/** Deletes the named fabric (404 when unknown). Returns 0 or -errno with e set. */
int fabric_delete(const struct fabric_ctx *c, const char *name, struct ofcd_error *e);

/**
 * Re-plans a stored fabric with the least disruption (working circuits keep
 * their ports), verifies and stores the result with its revision bumped.
 * Returns 0 or -errno with a reason in err.
 */
int fabric_replan(const struct fabric_ctx *c, int64_t fabric_id, char *err, size_t errlen);

/**
 * Sets n devices of a server (index[i] to failed[i]: true failed, false ok)
 * and, when any state changed and the server is in a fabric, re-plans that
 * fabric once. The one path of PUT .../devices/{index} and of inventories.
 * changed[i] tells whether device i changed; *fabric gets the re-planned
 * fabric's {"name","state","revision","missing"} (new reference) or NULL.
 * Returns 0, or -errno with e set (503 when a state could not be stored, 500
 * when re-planning failed).
 */
int fabric_devices_set(const struct fabric_ctx *c, int64_t server_id, const char *server, size_t n,
                       const uint32_t *index, const bool *failed, bool *changed, json_t **fabric,
                       struct ofcd_error *e);

#endif
