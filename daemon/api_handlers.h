/*
 * Every route handler, declared for the route table (routes.c). Each handler
 * is documented in docs/api.md; they run on the loop thread.
 */
#ifndef OFCD_API_HANDLERS_H
#define OFCD_API_HANDLERS_H

#include <stdint.h>

#include "api.h"

struct desired;
struct store;

/* api_core.c */
void api_health(struct api_req *req);
void api_metrics(struct api_req *req);

/* api_plan.c */
void api_plan(struct api_req *req);
/** Replies 422 infeasible: "M servers need n devices per server, each has N". */
void api_reply_infeasible(struct api_req *req, uint32_t servers, uint32_t min_devices,
                          uint32_t devices);

/* api_topology.c */
void api_ocs_create(struct api_req *req);
void api_ocs_list(struct api_req *req);
void api_ocs_get(struct api_req *req);
void api_ocs_delete(struct api_req *req);
void api_ocs_cross_connects(struct api_req *req);
void api_server_create(struct api_req *req);
void api_server_list(struct api_req *req);
void api_server_get(struct api_req *req);
void api_server_delete(struct api_req *req);
void api_wiring_get(struct api_req *req);
void api_wiring_put(struct api_req *req);
void api_topology_get(struct api_req *req);
void api_topology_put(struct api_req *req);
/** Row id of the server named by path parameter 0, or 0 after replying 404. */
int64_t api_server_param(struct api_req *req);

/* api_operations.c */
void api_operations_list(struct api_req *req);
void api_operation_get(struct api_req *req);
void api_ocs_faults(struct api_req *req);

/* api_events.c */
void api_events(struct api_req *req);

/* api_fabric.c */
void api_fabric_create(struct api_req *req);
void api_fabric_list(struct api_req *req);
void api_fabric_get(struct api_req *req);
void api_fabric_delete(struct api_req *req);
void api_device_put(struct api_req *req);
/**
 * Re-plans a stored fabric with the least disruption (working circuits keep
 * their ports), verifies and stores the result with its revision bumped.
 * Inside the caller's transaction. Returns 0 or -errno with a reason in err.
 */
int fabric_replan(struct store *s, struct desired *desired, int64_t fabric_id, char *err,
                  size_t errlen);
/**
 * Sets n devices of a server (index[i] to failed[i]: true failed, false ok)
 * and, when any state changed and the server is in a fabric, re-plans that
 * fabric once with fabric_replan(). The one path of PUT .../devices/{index}
 * and of inventories. changed[i] tells whether device i changed; *fabric gets
 * the re-planned fabric's {"name","state","revision","missing"} (new
 * reference) or NULL. Inside the caller's transaction. Returns 0, -EIO when a
 * state could not be stored, or another -errno when re-planning failed, with
 * a reason in err.
 */
int fabric_devices_set(struct store *s, struct desired *desired, int64_t server_id,
                       const char *server, size_t n, const uint32_t *index, const bool *failed,
                       bool *changed, json_t **fabric, char *err, size_t errlen);

/* api_inventory.c */
/** PUT /v1/servers/{name}/inventory: stores an agent's report, fails/restores devices. */
void api_inventory_put(struct api_req *req);
/** GET /v1/rdma/devices: the RDMA devices of the controller's own host (libibverbs). */
void api_rdma_devices(struct api_req *req);
/**
 * For routes an agent token may use: replies 403 and returns -EPERM when the
 * request's token is an agent token of another server than path parameter 0;
 * 0 otherwise (admin, no tokens, or the agent of that server).
 */
int api_agent_scope(struct api_req *req);
/**
 * Adds "inventory" (the last report with its "heartbeat" time and "interval",
 * or null) and "stale" (three heartbeats missed) to a server object from
 * topo_server_json(); returns it (NULL stays NULL).
 */
json_t *api_inventory_view(struct store *s, int64_t server_id, json_t *server);
/** Sets "stale" on every server object of the array servers (as the single view does). */
void api_inventory_mark_stale(struct store *s, json_t *servers);

/* api_transmission.c */
/** POST /v1/transmission/select: prices one stage pair and picks its transmission method. */
void api_transmission_select(struct api_req *req);
/** POST /v1/fabrics/{name}/pipeline: the method of every stage pair over the stored circuits. */
void api_pipeline(struct api_req *req);

/* api_switch.c */
void api_switch_create(struct api_req *req);
void api_switch_list(struct api_req *req);
void api_switch_get(struct api_req *req);
void api_switch_delete(struct api_req *req);
/** True when a switch of that name is stored. */
bool api_switch_exists(struct store *s, const char *name);
/**
 * All switches by name, {"name","aggregating","offload","buffer","window"};
 * with detail also "servers" (the names of the servers reaching each).
 */
json_t *api_switch_list_json(struct store *s, bool detail);
/**
 * Validates the "switches" array of PUT /v1/topology (NULL: none given)
 * without changing anything. Returns 0, or -EINVAL after replying.
 */
int api_switches_parse(struct api_req *req, json_t *switches, const char *field);
/** True when the validated switches array holds a switch of that name. */
bool api_switches_has(json_t *switches, const char *name);
/** Inserts or updates every switch of a validated array. Returns 0 or -EIO. */
int api_switches_store(struct store *s, json_t *switches);
/** Deletes the stored switches not in the validated array (NULL: all). Returns 0 or -EIO. */
int api_switches_prune(struct store *s, json_t *switches);

/* api_collective.c */
/** POST /v1/collective/select: prices every algorithm of a collective and picks one. */
void api_collective_select(struct api_req *req);
/** GET /v1/fabrics/{name}/schedule: one algorithm's checked schedule over the circuits. */
void api_fabric_schedule(struct api_req *req);

#endif
