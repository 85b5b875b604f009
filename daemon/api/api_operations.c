/*
 * Operations (every batch sent to an OCS unit) and fault injection into sim
 * units for tests and demos.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include "api_handlers.h"
#include "decimal.h"
#include "ocs_driver.h"
#include "base/config.h"
#include "domain/operations.h"
#include "reconcile/reconcile.h"
#include "domain/topo.h"

#define OPERATIONS_MAX_LIMIT 1000

void api_operations_list(struct api_req *req)
{
	const char *fabric = api_query(req, "fabric");
	const char *ocs = api_query(req, "ocs");
	const char *lim = api_query(req, "limit");
	const char *bef = api_query(req, "before");
	long limit = 100;
	long long before = 0;
	if (fabric && !auth_valid_name(fabric)) {
		api_error(req, OFCD_E_INVALID_FIELD, "fabric", "fabric must be a name");
		return;
	}
	if (ocs && !auth_valid_name(ocs)) {
		api_error(req, OFCD_E_INVALID_FIELD, "ocs", "ocs must be a name");
		return;
	}
	uint64_t x = 0;
	if (lim) {
		limit = decimal_u64(lim, OPERATIONS_MAX_LIMIT, &x) ? (long)x : 0;
		if (limit < 1) {
			api_error(req, OFCD_E_INVALID_FIELD, "limit",
			          "limit must be an integer from 1 to %d", OPERATIONS_MAX_LIMIT);
			return;
		}
	}
	if (bef) {
		before = decimal_u64(bef, INT64_MAX, &x) ? (long long)x : 0;
		if (before < 1) {
			api_error(req, OFCD_E_INVALID_FIELD, "before",
			          "before must be an operation id (an integer from 1)");
			return;
		}
	}
	json_t *list;
	int rc = operations_list(req->env->store, ocs, fabric, before, (uint32_t)limit, &list);
	if (rc < 0) {
		api_error(req, rc == -ENOMEM ? OFCD_E_INTERNAL : OFCD_E_STORE, NULL,
		          "cannot read the operations");
		return;
	}
	json_t *o = json_pack("{s:o}", "operations", list);
	/* A full page may have more below it: where the next one starts. */
	if (json_array_size(list) == (size_t)limit)
		json_object_set(o, "next",
		                json_object_get(json_array_get(list, (size_t)limit - 1), "id"));
	api_reply(req, 200, o);
}

void api_operation_get(struct api_req *req)
{
	uint64_t id;
	if (!decimal_u64(req->params[0], INT64_MAX, &id)) {
		api_error(req, OFCD_E_NOT_FOUND, "id", "no operation %s", req->params[0]);
		return;
	}
	json_t *o;
	int rc = operations_get(req->env->store, id, &o);
	if (rc == -ENOENT) {
		api_error(req, OFCD_E_NOT_FOUND, "id", "no operation %s", req->params[0]);
		return;
	}
	if (rc < 0) {
		api_error(req, rc == -ENOMEM ? OFCD_E_INTERNAL : OFCD_E_STORE, NULL,
		          "cannot read operation %s", req->params[0]);
		return;
	}
	api_reply(req, 200, o);
}

void api_ocs_faults(struct api_req *req)
{
	static const char *const members[] = { "kind", "count", "a", "b", NULL };
	static const char *const kinds[] = { "fail_batches", "disconnect", "partial", "set_xc",
		                             "clear_xc",     "delay",      NULL };
	static const enum ocs_fault_kind kind_of[] = { OCS_FAULT_FAIL_BATCHES, OCS_FAULT_DISCONNECT,
		                                       OCS_FAULT_PARTIAL,      OCS_FAULT_SET_XC,
		                                       OCS_FAULT_CLEAR_XC,     OCS_FAULT_DELAY };
	if (!req->env->cfg->debug_faults) {
		api_error(req, OFCD_E_NOT_FOUND, NULL,
		          "fault injection is disabled; set [debug] faults = true");
		return;
	}
	json_t *body = api_body_object(req);
	int kind;
	uint64_t count = 0, a = 0, b = 0;
	if (!body || api_check_members(req, body, NULL, members) < 0 ||
	    api_get_enum(req, body, NULL, "kind", true, kinds, &kind) < 0 ||
	    api_get_uint(req, body, NULL, "count", false, 0, 600000, &count) < 0 ||
	    api_get_uint(req, body, NULL, "a",
	                 kind_of[kind] == OCS_FAULT_SET_XC || kind_of[kind] == OCS_FAULT_CLEAR_XC,
	                 1, 65536, &a) < 0 ||
	    api_get_uint(req, body, NULL, "b",
	                 kind_of[kind] == OCS_FAULT_SET_XC || kind_of[kind] == OCS_FAULT_CLEAR_XC,
	                 1, 65536, &b) < 0)
		return;
	int64_t id = topo_ocs_id(req->env->store, req->params[0]);
	if (!id) {
		api_error(req, OFCD_E_NOT_FOUND, "name", "no OCS unit %s", req->params[0]);
		return;
	}
	struct ocs_fault f = { .kind = kind_of[kind],
		               .count = (uint32_t)count,
		               .a = (uint32_t)(a < b ? a : b),
		               .b = (uint32_t)(a < b ? b : a) };
	int rc = reconcile_inject(req->env->reconciler, id, &f);
	if (rc == -EOPNOTSUPP) {
		api_error(req, OFCD_E_UNPROCESSABLE, "name",
		          "OCS unit %s's driver has no fault injection", req->params[0]);
		return;
	}
	if (rc == -ERANGE) {
		api_error(req, OFCD_E_UNPROCESSABLE, a > b ? "a" : "b",
		          "port %" PRIu64 " is not a port of OCS unit %s", a > b ? a : b,
		          req->params[0]);
		return;
	}
	if (rc == -EINVAL) {
		api_error(req, OFCD_E_UNPROCESSABLE, "b", "a and b must be two different ports");
		return;
	}
	if (rc == -ENOENT) {
		api_error(req, OFCD_E_UNPROCESSABLE, "a",
		          "OCS unit %s holds no cross-connect of ports %" PRIu64 " and %" PRIu64,
		          req->params[0], a, b);
		return;
	}
	if (rc < 0) {
		api_error(req, OFCD_E_UNPROCESSABLE, NULL, "the fault was not injected: %s",
		          strerror(-rc));
		return;
	}
	api_reply(req, 200,
	          json_pack("{s:s, s:s}", "ocs", req->params[0], "injected", kinds[kind]));
}
