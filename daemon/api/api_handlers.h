/*
 * Every route handler, declared for the route table (routes.c). Each handler
 * is documented in docs/api.md; they run on the loop thread.
 */
#ifndef OFCD_API_HANDLERS_H
#define OFCD_API_HANDLERS_H

#include <stdint.h>

#include "api.h"

struct coll_params;
struct fabric_view;
struct fabric_layout;

/* api_core.c */
void api_health(struct api_req *req);
void api_metrics(struct api_req *req);
/**
 * GET /v1/cluster: this member, its role, the leader, every member with its
 * applied revision (docs/ha.md); role "standalone" without a [cluster].
 */
void api_cluster_get(struct api_req *req);
/**
 * GET /v1/cluster/snapshot: a copy of this member's whole store (SQLite
 * file), which a member the log no longer reaches back to restores.
 */
void api_cluster_snapshot(struct api_req *req);

/* api_plan.c */
void api_plan(struct api_req *req);

/* api_audit.c */
/** GET /v1/audit: the audit trail, oldest first, from ?since= (an id or a UTC time). */
void api_audit_list(struct api_req *req);

/* api_topology.c */
void api_ocs_create(struct api_req *req);
void api_ocs_list(struct api_req *req);
void api_ocs_get(struct api_req *req);
/** PUT /v1/ocs/{name}: creates the unit, or confirms an identical one (409 when it differs). */
void api_ocs_put(struct api_req *req);
void api_ocs_delete(struct api_req *req);
void api_ocs_cross_connects(struct api_req *req);
void api_switch_create(struct api_req *req);
void api_switch_list(struct api_req *req);
void api_switch_get(struct api_req *req);
/** PUT /v1/switches/{name}: creates, or confirms an identical switch (409 when it differs). */
void api_switch_put(struct api_req *req);
void api_switch_delete(struct api_req *req);
void api_server_create(struct api_req *req);
void api_server_list(struct api_req *req);
void api_server_get(struct api_req *req);
/** PUT /v1/servers/{name}: creates, or confirms an identical server (409 when it differs). */
void api_server_put(struct api_req *req);
void api_server_delete(struct api_req *req);
void api_wiring_get(struct api_req *req);
void api_wiring_put(struct api_req *req);
void api_topology_get(struct api_req *req);
void api_topology_put(struct api_req *req);
/** PUT /v1/topology's body read into its spec (api_prepare_fn: any thread). */
void *api_topology_prepare(json_t *body, struct ofcd_error *e);
/** Frees what api_topology_prepare() returned (NULL is fine). */
void api_topology_prepared_free(void *prepared);

/* api_params.c */
/** Row id of the server named by path parameter 0, or 0 after replying 404. */
int64_t api_server_param(struct api_req *req);
/**
 * For routes an agent token may use: replies 403 and returns -EPERM when the
 * request's token is an agent token of another server than path parameter 0;
 * 0 otherwise (admin, no tokens, or the agent of that server).
 */
int api_agent_scope(struct api_req *req);

/**
 * Query parameter @key, optional, as an integer of digits from @lo to @hi; @def when absent.
 * Returns 0, or -EINVAL with a 400 invalid_field naming @key.
 */
int api_query_uint(struct api_req *req, const char *key, uint64_t lo, uint64_t hi, uint64_t def,
                   uint64_t *out);

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
/** PUT /v1/fabrics/{name}: creates, or confirms one of the same servers (409 when they differ). */
void api_fabric_put(struct api_req *req);
void api_fabric_delete(struct api_req *req);
void api_device_put(struct api_req *req);
/**
 * A fabric's layout in a request body: "topology" (auto, full-mesh, hyperx,
 * torus; auto when absent), "shape" (the grid, e.g. [32, 32]) and
 * "traffic" (allreduce, alltoall, mixed: what an auto choice prices the
 * candidates for). Fills *l but its price; 0, or -EINVAL after a 400.
 */
int api_fabric_layout_parse(struct api_req *req, json_t *body, struct fabric_layout *l);
/**
 * The collective cost model's parameters of the cluster: [cost], then the active parameter
 * set's terms (a store that cannot be read is logged and priced without them).
 */
void api_cost_params(struct api_req *req, struct coll_params *p);
/**
 * Reads a body's optional "params" object (the collective model's parameters and terms, by
 * the names of GET /v1/cost/params) over *p. Sets *window_given when it names window or
 * switch_buffer. Returns 0 or -EINVAL (replied 400 naming the member).
 */
int api_coll_params_read(struct api_req *req, json_t *body, struct coll_params *p,
                         bool *window_given);
/** *p as the JSON api_coll_params_read() reads. New reference. */
json_t *api_coll_params_json(const struct coll_params *p);
/** The collectives' names as requests give them, NULL-terminated (for api_get_enum()). */
extern const char *const api_collective_names[];
/** The relay modes' names as requests give them, NULL-terminated (enum coll_relay's order). */
extern const char *const api_relay_names[];
/**
 * Loads stored fabric @name's view without its circuits' details into *f (free it with
 * fabric_view_free()). 0, or -EINVAL after a reply: 422 on "fabric" when there is no such
 * fabric or it is past FABRIC_VIEW_MAX_SERVERS, 503/500 when it cannot be read.
 */
int api_fabric_view_named(struct api_req *req, const char *name, struct fabric_view *f);

/* api_cost.c */
/** POST /v1/cost/calibrate: fits the model's terms to measured runs, stores the set. */
void api_cost_calibrate(struct api_req *req);
/** POST /v1/servers/{name}/runs: measured runs collected on the server, stored for calibration. */
void api_server_runs_post(struct api_req *req);
/** GET /v1/cost/runs: the collected runs (?fabric, collector, since, before, limit). */
void api_cost_runs_get(struct api_req *req);
/** DELETE /v1/cost/runs: deletes the collected runs the query selects (all without one). */
void api_cost_runs_delete(struct api_req *req);
/** GET /v1/cost/params: the parameters in force, the active set and every set. */
void api_cost_params_get(struct api_req *req);
/** GET /v1/cost/params/{name}: one set, with every run's residual. */
void api_cost_set_get(struct api_req *req);
/** DELETE /v1/cost/params/{name}: deletes a set that is not active. */
void api_cost_set_delete(struct api_req *req);
/** PUT /v1/cost/active: makes a set (or none) the active one. */
void api_cost_active_put(struct api_req *req);

/* api_inventory.c */
/** PUT /v1/servers/{name}/inventory: stores an agent's report, fails/restores devices. */
void api_inventory_put(struct api_req *req);
/** GET /v1/rdma/devices: the RDMA devices of the controller's own host (libibverbs). */
void api_rdma_devices(struct api_req *req);

/* api_transmission.c */
/** POST /v1/transmission/select: prices one stage pair and picks its transmission method. */
void api_transmission_select(struct api_req *req);
/** POST /v1/fabrics/{name}/pipeline: the method of every stage pair over the stored circuits. */
void api_pipeline(struct api_req *req);

/* api_collective.c */
/** POST /v1/collective/select: prices every algorithm of a collective and picks one. */
void api_collective_select(struct api_req *req);
/** GET /v1/fabrics/{name}/schedule: one algorithm's checked schedule over the circuits. */
void api_fabric_schedule(struct api_req *req);

/* api_console.c */
/** GET /: the web console's page. */
void api_console_page(struct api_req *req);
/** GET /console/{file}: one of the console's scripts, style sheets or icons. */
void api_console_file(struct api_req *req);
/** GET /v1/openapi.json: the OpenAPI document (docs/openapi.yaml) as JSON. */
void api_openapi(struct api_req *req);
/** GET /v1/fabrics/{name}/picture.svg: the fabric drawn as a standalone SVG. */
void api_fabric_svg(struct api_req *req);

#endif
