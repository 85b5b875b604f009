/*
 * Fabric routes: create (plan, verify, store), read, delete, and device state
 * changes that re-plan every fabric using the device with the least
 * disruption. A plan that fails verification is never stored.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "api_handlers.h"
#include "desired.h"
#include "log.h"
#include "store_sql.h"
#include "plan_state.h"
#include "reconcile.h"
#include "topo.h"
#include "wait.h"

/* A new or changed plan waits for the reconciler, which moves it to applying and on. */
#define FABRIC_BASE_STATE plan_state_name(PLAN_STATE_PENDING)

void api_fabric_create(struct api_req *req)
{
	static const char *const members[] = { "name", "servers", NULL };
	struct store *s = req->env->store;
	json_t *body = api_body_object(req);
	const char *name;
	int64_t *ids = NULL;
	struct topo_input in = { 0 };
	struct plan_fabric plan = { 0 };
	char f[32], why[256];
	size_t i;
	json_t *v;
	double wait;

	if (wait_parse(req, &wait) < 0)
		return;
	if (!body || api_check_members(req, body, NULL, members) < 0 ||
	    api_get_name(req, body, NULL, "name", true, &name) < 0)
		return;
	json_t *servers = json_object_get(body, "servers");
	size_t m = json_array_size(servers);
	if (!json_is_array(servers) || m < 1 || m > PLAN_MAX_SERVERS) {
		api_error(req, OFCD_E_INVALID_FIELD, "servers",
		          "servers must be an array of 1 to %d server names", PLAN_MAX_SERVERS);
		return;
	}
	if (topo_fabric_id(s, name)) {
		api_error(req, OFCD_E_CONFLICT, "name", "fabric %s already exists", name);
		return;
	}
	ids = calloc(m, sizeof(*ids));
	if (!ids) {
		api_error(req, OFCD_E_INTERNAL, NULL, "out of memory");
		return;
	}
	json_array_foreach(servers, i, v)
	{
		snprintf(f, sizeof(f), "servers[%zu]", i);
		const char *sname = json_string_value(v);
		if (!sname || !auth_valid_name(sname)) {
			api_error(
			    req, OFCD_E_INVALID_FIELD, f,
			    "%s must be a server name of 1 to 64 characters of [A-Za-z0-9._-]", f);
			goto out;
		}
		ids[i] = topo_server_id(s, sname);
		if (!ids[i]) {
			api_error(req, OFCD_E_UNPROCESSABLE, f, "%s: no server %s", f, sname);
			goto out;
		}
		for (size_t j = 0; j < i; j++) {
			if (ids[j] == ids[i]) {
				api_error(req, OFCD_E_INVALID_FIELD, f,
				          "%s: server %s is listed twice", f, sname);
				goto out;
			}
		}
		int64_t other = topo_server_fabric(s, ids[i]);
		if (other) {
			json_t *of = topo_fabric_json(s, other);
			api_error(req, OFCD_E_IN_USE, f, "%s: server %s is already in fabric %s", f,
			          sname, json_string_value(json_object_get(of, "name")));
			json_decref(of);
			goto out;
		}
		if (reconcile_server_joined(req->env->reconciler, ids[i], why, sizeof(why))) {
			api_error(
			    req, OFCD_E_IN_USE, f,
			    "%s: server %s is still joined to another server: %s; wait until "
			    "it is removed (DELETE /v1/fabrics/NAME?wait=SECONDS waits for it)",
			    f, sname, why);
			goto out;
		}
	}
	if (topo_input_load(s, ids, (uint32_t)m, &in) < 0) {
		api_error(req, OFCD_E_STORE, NULL, "cannot read the topology");
		goto out;
	}
	int rc = plan_fabric_compute(in.servers, in.m, &plan);
	if (rc == -EDOM) {
		api_reply_infeasible(req, (uint32_t)m, plan.min_devices, plan.devices);
		goto out;
	}
	if (rc < 0) {
		api_error(req, OFCD_E_INTERNAL, NULL, "planning failed (%d)", rc);
		goto out;
	}
	if (plan_verify(in.servers, in.m, &plan, why, sizeof(why)) < 0) {
		log_error("planner", "fabric %s: plan failed verification: %s", name, why);
		api_error(req, OFCD_E_INTERNAL, NULL, "the plan failed verification: %s", why);
		goto out;
	}

	sqlite3_stmt *st = store_stmt(s, "INSERT INTO fabric(name, state, formula, planes, "
	                                 "min_devices) VALUES (?, ?, ?, ?, ?)");
	sqlite3_bind_text(st, 1, name, -1, SQLITE_STATIC);
	sqlite3_bind_text(st, 2, FABRIC_BASE_STATE, -1, SQLITE_STATIC);
	sqlite3_bind_int(st, 3, plan.formula);
	sqlite3_bind_int64(st, 4, plan.planes);
	sqlite3_bind_int64(st, 5, plan.min_devices);
	if (store_step_done(st) < 0)
		goto store_fail;
	int64_t fid = sqlite3_last_insert_rowid(store_db(s));
	st = store_stmt(s, "INSERT INTO fabric_server(fabric_id, position, server_id) "
	                   "VALUES (?, ?, ?)");
	for (i = 0; i < m; i++) {
		sqlite3_bind_int64(st, 1, fid);
		sqlite3_bind_int64(st, 2, (sqlite3_int64)i);
		sqlite3_bind_int64(st, 3, ids[i]);
		if (store_step_done(st) < 0)
			goto store_fail;
	}
	if (topo_plan_save(s, req->env->desired, fid, &in, &plan, FABRIC_BASE_STATE, false) < 0)
		goto store_fail;
	log_info("planner", "fabric %s: %u servers, %zu circuits, %zu pairs missing", name,
	         (unsigned)m, plan.ncircuits, plan.nmissing);
	/* A waiting request gets the full view when the wait ends: build it once. */
	api_reply(req, 201, wait > 0 ? NULL : topo_fabric_json(s, fid));
	wait_fabric(req, name, WAIT_FINAL_STATE, wait);
	goto out;
store_fail:
	api_error(req, OFCD_E_STORE, NULL, "cannot store fabric %s", name);
out:
	plan_fabric_free(&plan);
	topo_input_free(&in);
	free(ids);
}

void api_fabric_list(struct api_req *req)
{
	api_reply(req, 200, json_pack("{s:o}", "fabrics", topo_fabric_list(req->env->store)));
}

static int64_t fabric_param(struct api_req *req)
{
	int64_t id = topo_fabric_id(req->env->store, req->params[0]);
	if (!id)
		api_error(req, OFCD_E_NOT_FOUND, "name", "no fabric %s", req->params[0]);
	return id;
}

void api_fabric_get(struct api_req *req)
{
	double wait;
	if (wait_parse(req, &wait) < 0)
		return;
	int64_t id = fabric_param(req);
	if (!id)
		return;
	api_reply(req, 200, wait > 0 ? NULL : topo_fabric_json(req->env->store, id));
	wait_fabric(req, req->params[0], WAIT_FINAL_STATE, wait);
}

void api_fabric_delete(struct api_req *req)
{
	struct store *s = req->env->store;
	double wait;
	if (wait_parse(req, &wait) < 0)
		return;
	int64_t id = fabric_param(req);
	if (!id)
		return;
	/* Staged first: the stage reads the fabric's name for the circuits that leave. */
	if (desired_stage_fabric(req->env->desired, id, NULL, 0) < 0) {
		api_error(req, OFCD_E_STORE, NULL, "cannot delete fabric %s", req->params[0]);
		return;
	}
	sqlite3_stmt *st = store_stmt(s, "DELETE FROM fabric WHERE id = ?");
	sqlite3_bind_int64(st, 1, id);
	if (store_step_done(st) < 0) {
		api_error(req, OFCD_E_STORE, NULL, "cannot delete fabric %s", req->params[0]);
		return;
	}
	log_info("planner", "fabric %s deleted", req->params[0]);
	api_reply(req, 200,
	          json_pack("{s:s, s:s}", "deleted", req->params[0], "state", "removing"));
	wait_fabric(req, req->params[0], WAIT_REMOVED, wait);
}

int fabric_replan(struct store *s, struct desired *desired, int64_t fabric_id, char *err,
                  size_t errlen)
{
	struct topo_input in;
	struct plan_fabric prev, next;
	int rc = topo_input_load_fabric(s, fabric_id, &in);
	if (rc < 0) {
		snprintf(err, errlen, "cannot read the fabric's topology");
		return rc;
	}
	rc = topo_plan_load(s, fabric_id, &in, &prev);
	if (rc < 0) {
		snprintf(err, errlen, "cannot read the fabric's plan");
		topo_input_free(&in);
		return rc;
	}
	rc = plan_fabric_replan(in.servers, in.m, &prev, &next);
	if (rc < 0) {
		snprintf(err, errlen, "re-planning failed (%d)", rc);
		goto out_prev;
	}
	if (plan_verify(in.servers, in.m, &next, err, errlen) < 0) {
		rc = -EINVAL;
		goto out;
	}
	rc = topo_plan_save(s, desired, fabric_id, &in, &next, FABRIC_BASE_STATE, true);
	if (rc < 0)
		snprintf(err, errlen, "cannot store the new plan");
out:
	plan_fabric_free(&next);
out_prev:
	plan_fabric_free(&prev);
	topo_input_free(&in);
	return rc;
}

int fabric_devices_set(struct store *s, struct desired *desired, int64_t server_id,
                       const char *server, size_t n, const uint32_t *index, const bool *failed,
                       bool *changed, json_t **fabric, char *err, size_t errlen)
{
	char what[256] = "", why[256];
	size_t len = 0;

	*fabric = NULL;
	for (size_t i = 0; i < n; i++) {
		sqlite3_stmt *st =
		    store_stmt(s, failed[i] ? "INSERT OR IGNORE INTO device_fault(server_id, "
		                              "device) VALUES (?, ?)"
		                            : "DELETE FROM device_fault WHERE server_id = ? AND "
		                              "device = ?");
		sqlite3_bind_int64(st, 1, server_id);
		sqlite3_bind_int64(st, 2, index[i]);
		if (store_step_done(st) < 0) {
			snprintf(err, errlen, "cannot store the device state");
			return -EIO;
		}
		changed[i] = sqlite3_changes(store_db(s)) > 0;
		if (changed[i] && len < sizeof(what))
			len += (size_t)snprintf(what + len, sizeof(what) - len, "%sdevice %u %s",
			                        len ? ", " : "", index[i],
			                        failed[i] ? "failed" : "ok");
	}
	int64_t fid = topo_server_fabric(s, server_id);
	if (!len || !fid)
		return 0;
	int rc = fabric_replan(s, desired, fid, why, sizeof(why));
	if (rc < 0) {
		log_error("planner", "re-plan after %s %s: %s", server, what, why);
		snprintf(err, errlen, "re-planning failed: %s", why);
		return rc;
	}
	json_t *fj = topo_fabric_json(s, fid);
	log_info("planner", "%s %s: fabric %s re-planned (revision %lld, %zu pairs missing)",
	         server, what, json_string_value(json_object_get(fj, "name")),
	         (long long)json_integer_value(json_object_get(fj, "revision")),
	         json_array_size(json_object_get(fj, "missing")));
	*fabric =
	    json_pack("{s:O, s:O, s:O, s:O}", "name", json_object_get(fj, "name"), "state",
	              json_object_get(fj, "state"), "revision", json_object_get(fj, "revision"),
	              "missing", json_object_get(fj, "missing"));
	json_decref(fj);
	return 0;
}

void api_device_put(struct api_req *req)
{
	static const char *const members[] = { "state", NULL };
	static const char *const states[] = { "ok", "failed", NULL };
	struct store *s = req->env->store;
	json_t *body = api_body_object(req);
	json_t *fabric;
	int state;
	bool changed;
	char err[320];

	if (api_agent_scope(req) < 0)
		return;
	if (!body || api_check_members(req, body, NULL, members) < 0 ||
	    api_get_enum(req, body, NULL, "state", true, states, &state) < 0)
		return;
	int64_t sid = api_server_param(req);
	if (!sid)
		return;
	json_t *srv = topo_server_json(s, sid, false);
	json_int_t devices = json_integer_value(json_object_get(srv, "devices"));
	json_decref(srv);
	char *end;
	long long index = strtoll(req->params[1], &end, 10);
	if (*end || req->params[1][0] < '0' || req->params[1][0] > '9' || index >= devices) {
		api_error(req, OFCD_E_NOT_FOUND, "index", "server %s has devices 0 to %lld, not %s",
		          req->params[0], (long long)devices - 1, req->params[1]);
		return;
	}

	uint32_t idx = (uint32_t)index;
	bool failed = state;
	int rc = fabric_devices_set(s, req->env->desired, sid, req->params[0], 1, &idx, &failed,
	                            &changed, &fabric, err, sizeof(err));
	if (rc < 0) {
		api_error(req, rc == -EIO ? OFCD_E_STORE : OFCD_E_INTERNAL, NULL, "%s", err);
		return;
	}
	json_t *fabrics = json_array();
	if (fabric)
		json_array_append_new(fabrics, fabric);
	api_reply(req, 200,
	          json_pack("{s:s, s:I, s:s, s:b, s:o}", "server", req->params[0], "device",
	                    (json_int_t)index, "state", states[state], "changed", changed,
	                    "fabrics", fabrics));
}
