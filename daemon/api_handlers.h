/*
 * Every route handler, declared for the route table (routes.c). Each handler
 * is documented in docs/api.md; they run on the loop thread.
 */
#ifndef OFCD_API_HANDLERS_H
#define OFCD_API_HANDLERS_H

#include <stdint.h>

#include "api.h"

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
int fabric_replan(struct store *s, int64_t fabric_id, char *err, size_t errlen);

#endif
