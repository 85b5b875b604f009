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
 * A fabric written a part at a time, so that a large one never holds the
 * loop: a create (fabric_create() with rest) loads its servers' cables and
 * faults a few servers a step, plans and verifies it, then stores its row,
 * its members a few a step and its circuits a slice a step; a delete
 * (fabric_delete() with rest) removes its circuits a slice a step, then the
 * row with its members at once. Meanwhile its
 * row is marked partial: reads and the reconciler's state derivation pass
 * over it (topo.h, fabric_state.h), and a start-up drops it
 * (fabric_drop_unfinished()). Loop thread only.
 */
struct fabric_parts;

/**
 * Creates fabric name over the m servers named (in position order; names
 * already checked for form), laid out as layout asks (fabric_layout.h):
 * refused when the name is taken (409), a server is unknown (422), listed
 * twice (400), in another fabric or still joined to another server by some
 * unit (409), when the layout asked for is not one of m servers (400) or
 * when nothing fits the servers' ports (422). Fields are named "servers[i]",
 * "topology" or "shape". Returns the fabric's row id or -errno.
 *
 * With rest, a fabric of more than 64 servers is only checked now (its name
 * and servers): 0 is returned with *rest (the caller's to free) holding the
 * build, whose steps (fabric_parts_step()) may still refuse it, as above,
 * before they store it. A smaller one is written at once (*rest NULL).
 */
int64_t fabric_create(const struct fabric_ctx *c, const char *name, const char *const *servers,
                      size_t m, const struct fabric_layout *layout, struct fabric_parts **rest,
                      struct ofcd_error *e);

/**
 * Does b's next step in the caller's transaction (a few milliseconds of
 * work); *done once the fabric is whole (no longer marked partial), or gone.
 * Returns 0; 1 when the step's commit costs as much as the step (the caller
 * should commit before the next); or -errno with e set: a refusal as
 * fabric_create()'s (before anything was stored), or a store failure.
 * Either way the caller rolls back and abandons the build.
 */
int fabric_parts_step(struct fabric_parts *b, bool *done, struct ofcd_error *e);

/**
 * Deletes b's fabric at once, in the caller's transaction, with what its
 * steps stored (a create's undone; a delete's finished). Returns 0 or -EIO.
 */
int fabric_parts_drop(struct fabric_parts *b);

/** The row id of b's fabric (0 until a step stored it). */
int64_t fabric_parts_id(const struct fabric_parts *b);

/** Frees b (NULL is fine); what it stored stays. */
void fabric_parts_free(struct fabric_parts *b);

/**
 * Deletes, in the caller's transaction, every fabric still marked partial
 * while no write in parts is under way: at start-up, what a stopped daemon
 * left; later, what a write in parts could not undo or finish when a part
 * failed. A create left so was never acknowledged; a delete was, and is
 * finished. Returns 0 or -EIO.
 */
int fabric_drop_unfinished(struct store *s);

/**
 * PUT of a fabric: creates it as fabric_create() does (*created set; rest
 * as there), or confirms the stored fabric of that name when it has
 * the same servers in the same order (and, when layout->given, the same
 * topology and shape); other servers are 409 conflict on "servers" with the
 * stored ones as details, another layout 409 on "topology". Returns the
 * fabric's row id or -errno with e set.
 */
int64_t fabric_put(const struct fabric_ctx *c, const char *name, const char *const *servers,
                   size_t m, const struct fabric_layout *layout, bool *created,
                   struct fabric_parts **rest, struct ofcd_error *e);

/**
 * Deletes the named fabric (404 when unknown). With rest, a fabric of more
 * than 64 servers is only marked partial now and *rest (the caller's to free)
 * removes it a part per fabric_parts_step(); a smaller one goes at once
 * (*rest NULL). Returns 0 or -errno with e set.
 */
int fabric_delete(const struct fabric_ctx *c, const char *name, struct fabric_parts **rest,
                  struct ofcd_error *e);

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
