/*
 * RDMA inventory routes: the reports of the host agents (judged and stored
 * by inventory.c) and the controller host's own RDMA devices.
 */
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "api_handlers.h"
#include "domain/fabric.h"
#include "domain/inventory.h"
#include "rdma.h"
#include "domain/topo.h"

void api_inventory_put(struct api_req *req)
{
	struct fabric_ctx c = { .store = req->env->store,
		                .desired = req->env->desired,
		                .units = req->env->units };
	struct ofcd_error e = { 0 };
	struct rdma_inventory inv;
	unsigned interval = 10;
	json_t *result;
	char field[192], why[256];

	if (api_agent_scope(req) < 0)
		return;
	json_t *body = api_body_object(req);
	if (!body)
		return;
	if (rdma_inventory_from_json(body, RDMA_JSON_REPORT, &inv, &interval, field, sizeof(field),
	                             why, sizeof(why)) < 0) {
		api_error(req, OFCD_E_INVALID_FIELD, field[0] ? field : NULL, "%s", why);
		return;
	}
	int64_t sid = api_server_param(req);
	if (sid && api_if_match(req, topo_server_revision(c.store, sid)) < 0)
		sid = 0; /* replied 412 */
	if (sid && inventory_apply(&c, sid, req->params[0], &inv, interval, &result, &e) < 0)
		api_fail(req, &e);
	else if (sid) {
		json_t *o = json_pack("{s:s, s:I}", "server", req->params[0], "interval",
		                      (json_int_t)interval);
		json_object_update(o, result);
		json_decref(result);
		api_reply(req, 200, o);
	}
	rdma_inventory_free(&inv);
}

void api_rdma_devices(struct api_req *req)
{
	struct rdma_inventory inv;
	if (rdma_verbs_read(&inv) < 0) {
		api_error(req, OFCD_E_INTERNAL, NULL, "out of memory reading the RDMA devices");
		return;
	}
	api_reply(req, 200, rdma_inventory_to_json(&inv, 0));
	rdma_inventory_free(&inv);
}
