/*
 * Operations (every batch sent to an OCS unit) and fault injection into sim
 * units for tests and demos.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "api_handlers.h"
#include "ocs_driver.h"
#include "config.h"
#include "reconcile.h"
#include "store_sql.h"
#include "topo.h"

#define OPERATIONS_MAX_LIMIT 1000

static json_t *operation_row(struct store *s, sqlite3_stmt *st, bool detail)
{
	int64_t id = sqlite3_column_int64(st, 0);
	json_t *o = json_pack("{s:I, s:s, s:s, s:I, s:I, s:s, s:s}", "id", (json_int_t)id, "ocs",
	                      sqlite3_column_text(st, 1), "trigger", sqlite3_column_text(st, 2),
	                      "nadds", (json_int_t)sqlite3_column_int64(st, 3), "ndeletes",
	                      (json_int_t)sqlite3_column_int64(st, 4), "status",
	                      sqlite3_column_text(st, 5), "started", sqlite3_column_text(st, 7));
	json_object_set_new(o, "error",
	                    sqlite3_column_type(st, 6) == SQLITE_NULL
	                        ? json_null()
	                        : json_string((const char *)sqlite3_column_text(st, 6)));
	json_object_set_new(o, "ended",
	                    sqlite3_column_type(st, 8) == SQLITE_NULL
	                        ? json_null()
	                        : json_string((const char *)sqlite3_column_text(st, 8)));
	if (detail) {
		json_object_set_new(o, "adds",
		                    json_loads((const char *)sqlite3_column_text(st, 9), 0, NULL));
		json_object_set_new(o, "deletes",
		                    json_loads((const char *)sqlite3_column_text(st, 10), 0, NULL));
	}
	json_t *fabrics = json_array();
	sqlite3_stmt *fs = store_stmt(s, "SELECT fabric FROM operation_fabric WHERE "
	                                 "operation_id = ? ORDER BY fabric");
	sqlite3_bind_int64(fs, 1, id);
	while (sqlite3_step(fs) == SQLITE_ROW)
		json_array_append_new(fabrics,
		                      json_string((const char *)sqlite3_column_text(fs, 0)));
	sqlite3_reset(fs);
	json_object_set_new(o, "fabrics", fabrics);
	return o;
}

void api_operations_list(struct api_req *req)
{
	struct store *s = req->env->store;
	const char *fabric = api_query(req, "fabric");
	const char *ocs = api_query(req, "ocs");
	const char *lim = api_query(req, "limit");
	long limit = 100;
	if (fabric && !auth_valid_name(fabric)) {
		api_error(req, OFCD_E_INVALID_FIELD, "fabric", "fabric must be a name");
		return;
	}
	if (ocs && !auth_valid_name(ocs)) {
		api_error(req, OFCD_E_INVALID_FIELD, "ocs", "ocs must be a name");
		return;
	}
	if (lim) {
		char *end;
		limit = strtol(lim, &end, 10);
		if (!lim[0] || *end || limit < 1 || limit > OPERATIONS_MAX_LIMIT) {
			api_error(req, OFCD_E_INVALID_FIELD, "limit",
			          "limit must be an integer from 1 to %d", OPERATIONS_MAX_LIMIT);
			return;
		}
	}
	/* Newest first; filters are optional (NULL matches everything). */
	sqlite3_stmt *st = store_stmt(
	    s, "SELECT o.id, o.ocs, o.trigger, o.nadds, o.ndeletes, o.status, o.error, "
	       "o.started, o.ended FROM operation o WHERE (?1 IS NULL OR o.ocs = ?1) AND "
	       "(?2 IS NULL OR EXISTS (SELECT 1 FROM operation_fabric f WHERE "
	       "f.operation_id = o.id AND f.fabric = ?2)) ORDER BY o.id DESC LIMIT ?3");
	if (ocs)
		sqlite3_bind_text(st, 1, ocs, -1, SQLITE_STATIC);
	if (fabric)
		sqlite3_bind_text(st, 2, fabric, -1, SQLITE_STATIC);
	sqlite3_bind_int64(st, 3, limit);
	json_t *list = json_array();
	json_t *rows = json_array();
	while (sqlite3_step(st) == SQLITE_ROW)
		json_array_append_new(
		    rows, json_pack("{s:I}", "id", (json_int_t)sqlite3_column_int64(st, 0)));
	sqlite3_reset(st);
	/* Rendered after the scan, as rendering reuses statements. */
	size_t i;
	json_t *v;
	sqlite3_stmt *one =
	    store_stmt(s, "SELECT o.id, o.ocs, o.trigger, o.nadds, o.ndeletes, o.status, "
	                  "o.error, o.started, o.ended, x.adds, x.deletes FROM operation o "
	                  "LEFT JOIN operation_xc x ON x.operation_id = o.id WHERE o.id = ?");
	json_array_foreach(rows, i, v)
	{
		sqlite3_bind_int64(one, 1, json_integer_value(json_object_get(v, "id")));
		if (sqlite3_step(one) == SQLITE_ROW) {
			json_t *row = operation_row(s, one, false);
			json_array_append_new(list, row);
		}
		sqlite3_reset(one);
	}
	json_decref(rows);
	api_reply(req, 200, json_pack("{s:o}", "operations", list));
}

void api_operation_get(struct api_req *req)
{
	struct store *s = req->env->store;
	char *end;
	long long id = strtoll(req->params[0], &end, 10);
	if (*end || req->params[0][0] < '0' || req->params[0][0] > '9') {
		api_error(req, OFCD_E_NOT_FOUND, "id", "no operation %s", req->params[0]);
		return;
	}
	sqlite3_stmt *st =
	    store_stmt(s, "SELECT o.id, o.ocs, o.trigger, o.nadds, o.ndeletes, o.status, "
	                  "o.error, o.started, o.ended, x.adds, x.deletes FROM operation o "
	                  "LEFT JOIN operation_xc x ON x.operation_id = o.id WHERE o.id = ?");
	sqlite3_bind_int64(st, 1, id);
	json_t *o = NULL;
	if (sqlite3_step(st) == SQLITE_ROW) {
		/* Copy what the row rendering needs before another statement runs. */
		o = operation_row(s, st, true);
	}
	sqlite3_reset(st);
	if (!o) {
		api_error(req, OFCD_E_NOT_FOUND, "id", "no operation %s", req->params[0]);
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
	if (rc < 0) {
		api_error(req, OFCD_E_UNPROCESSABLE, NULL, "the fault was not injected: %s",
		          strerror(-rc));
		return;
	}
	api_reply(req, 200,
	          json_pack("{s:s, s:s}", "ocs", req->params[0], "injected", kinds[kind]));
}
