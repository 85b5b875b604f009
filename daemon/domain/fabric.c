#include "fabric.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "state/desired.h"
#include "log.h"
#include "plan_state.h"
#include "units.h"
#include "state/store_sql.h"
#include "topo.h"

/* A new or changed plan waits for the reconciler, which moves it to applying and on. */
#define FABRIC_BASE_STATE plan_state_name(PLAN_STATE_PENDING)

int fabric_infeasible(struct ofcd_error *e, uint32_t servers, uint32_t min_devices,
                      uint32_t devices)
{
	return ofcd_fail(e, -EDOM, OFCD_E_INFEASIBLE, "devices",
	                 json_pack("{s:I, s:I}", "min_devices", (json_int_t)min_devices, "devices",
	                           (json_int_t)devices),
	                 "%u servers need %u devices per server, each has %u", servers, min_devices,
	                 devices);
}

/* The row id of each named server, refusing any unknown, listed twice or in a fabric. */
static int resolve_servers(const struct fabric_ctx *c, const char *const *names, size_t m,
                           int64_t *ids, struct ofcd_error *e)
{
	struct store *s = c->store;
	char f[32];
	for (size_t i = 0; i < m; i++) {
		snprintf(f, sizeof(f), "servers[%zu]", i);
		ids[i] = topo_server_id(s, names[i]);
		if (!ids[i])
			return ofcd_fail(e, -ENOENT, OFCD_E_UNPROCESSABLE, f, NULL,
			                 "%s: no server %s", f, names[i]);
		for (size_t j = 0; j < i; j++)
			if (ids[j] == ids[i])
				return ofcd_fail(e, -EINVAL, OFCD_E_INVALID_FIELD, f, NULL,
				                 "%s: server %s is listed twice", f, names[i]);
		int64_t other = topo_server_fabric(s, ids[i]);
		if (other) {
			json_t *of = topo_fabric_summary_json(s, c->desired, other);
			int rc = ofcd_fail(e, -EBUSY, OFCD_E_IN_USE, f, NULL,
			                   "%s: server %s is already in fabric %s", f, names[i],
			                   json_string_value(json_object_get(of, "name")));
			json_decref(of);
			return rc;
		}
	}
	return 0;
}

/*
 * Refuses a server whose ports some unit may still join to another server
 * (its cabled ports, as the planner's input loaded them).
 */
static int check_joined(const struct fabric_ctx *c, const char *const *names,
                        const struct topo_input *in, struct ofcd_error *e)
{
	char f[32], why[256];
	for (uint32_t i = 0; i < in->m; i++) {
		const struct plan_server *sv = &in->servers[i];
		for (size_t k = 0; k < (size_t)sv->devices * sv->ports_per_device; k++) {
			const struct plan_port *p = &sv->ports[k];
			if (p->ocs < 0 || !domain_port_joined(c->units, in->ocs_ids[p->ocs],
			                                      p->ocs_port, why, sizeof(why)))
				continue;
			snprintf(f, sizeof(f), "servers[%u]", i);
			return ofcd_fail(
			    e, -EBUSY, OFCD_E_IN_USE, f, NULL,
			    "%s: server %s is still joined to another server: %s; wait until "
			    "it is removed (DELETE /v1/fabrics/NAME?wait=SECONDS waits for it)",
			    f, names[i], why);
		}
	}
	return 0;
}

/*
 * The id of a new fabric: past every id ever given (schema 011), so that no
 * change naming a deleted fabric can land on a new one.
 */
static int64_t next_fabric_id(struct store *s)
{
	sqlite3_stmt *st = store_stmt(s, "INSERT INTO id_seq(name, last) VALUES ('fabric', "
	                                 "(SELECT coalesce(max(id), 0) + 1 FROM fabric)) "
	                                 "ON CONFLICT(name) DO UPDATE SET last = max(last, "
	                                 "(SELECT coalesce(max(id), 0) FROM fabric)) + 1 "
	                                 "RETURNING last");
	int64_t id = -EIO;
	if (st && sqlite3_step(st) == SQLITE_ROW)
		id = sqlite3_column_int64(st, 0);
	if (st && store_step_done(st) < 0)
		id = -EIO;
	return id;
}

static int64_t insert_fabric(struct store *s, const char *name, const struct plan_fabric *plan,
                             const int64_t *ids, size_t m)
{
	int64_t fid = next_fabric_id(s);
	if (fid < 0)
		return fid;
	sqlite3_stmt *st = store_stmt(s, "INSERT INTO fabric(id, name, state, formula, planes, "
	                                 "min_devices) VALUES (?, ?, ?, ?, ?, ?)");
	sqlite3_bind_int64(st, 1, fid);
	sqlite3_bind_text(st, 2, name, -1, SQLITE_STATIC);
	sqlite3_bind_text(st, 3, FABRIC_BASE_STATE, -1, SQLITE_STATIC);
	sqlite3_bind_int(st, 4, plan->formula);
	sqlite3_bind_int64(st, 5, plan->planes);
	sqlite3_bind_int64(st, 6, plan->min_devices);
	if (store_step_done(st) < 0)
		return -EIO;
	st = store_stmt(s, "INSERT INTO fabric_server(fabric_id, position, server_id) "
	                   "VALUES (?, ?, ?)");
	for (size_t i = 0; i < m; i++) {
		sqlite3_bind_int64(st, 1, fid);
		sqlite3_bind_int64(st, 2, (sqlite3_int64)i);
		sqlite3_bind_int64(st, 3, ids[i]);
		if (store_step_done(st) < 0)
			return -EIO;
	}
	return fid;
}

int64_t fabric_create(const struct fabric_ctx *c, const char *name, const char *const *servers,
                      size_t m, struct ofcd_error *e)
{
	struct store *s = c->store;
	struct topo_input in = { 0 };
	struct plan_fabric plan = { 0 };
	char why[256];
	int64_t rc;

	if (topo_fabric_id(s, name))
		return ofcd_fail(e, -EEXIST, OFCD_E_CONFLICT, "name", NULL,
		                 "fabric %s already exists", name);
	int64_t *ids = calloc(m, sizeof(*ids));
	if (!ids)
		return ofcd_fail(e, -ENOMEM, OFCD_E_INTERNAL, NULL, NULL, "out of memory");
	rc = resolve_servers(c, servers, m, ids, e);
	if (rc < 0)
		goto out;
	if (topo_input_load(s, ids, (uint32_t)m, &in) < 0) {
		rc = ofcd_fail(e, -EIO, OFCD_E_STORE, NULL, NULL, "cannot read the topology");
		goto out;
	}
	rc = check_joined(c, servers, &in, e);
	if (rc < 0)
		goto out;
	rc = plan_fabric_compute(in.servers, in.m, &plan);
	if (rc == -EDOM) {
		rc = fabric_infeasible(e, (uint32_t)m, plan.min_devices, plan.devices);
		goto out;
	}
	if (rc < 0) {
		rc = ofcd_fail(e, rc, OFCD_E_INTERNAL, NULL, NULL, "planning failed (%d)", (int)rc);
		goto out;
	}
	if (plan_verify(in.servers, in.m, &plan, why, sizeof(why)) < 0) {
		log_error("planner", "fabric %s: plan failed verification: %s", name, why);
		rc = ofcd_fail(e, -EINVAL, OFCD_E_INTERNAL, NULL, NULL,
		               "the plan failed verification: %s", why);
		goto out;
	}
	rc = insert_fabric(s, name, &plan, ids, m);
	if (rc < 0 || topo_plan_save(s, rc, &in, &plan, FABRIC_BASE_STATE, false) < 0) {
		rc = ofcd_fail(e, -EIO, OFCD_E_STORE, NULL, NULL, "cannot store fabric %s", name);
		goto out;
	}
	log_info("planner", "fabric %s: %u servers, %zu circuits, %zu pairs missing", name,
	         (unsigned)m, plan.ncircuits, plan.nmissing);
out:
	plan_fabric_free(&plan);
	topo_input_free(&in);
	free(ids);
	return rc;
}

int64_t fabric_put(const struct fabric_ctx *c, const char *name, const char *const *servers,
                   size_t m, bool *created, struct ofcd_error *e)
{
	int64_t id = topo_fabric_id(c->store, name);
	*created = !id;
	if (!id)
		return fabric_create(c, name, servers, m, e);
	/* A retry of the create that succeeded, or someone else's fabric of that name. */
	sqlite3_stmt *st = store_stmt(c->store, "SELECT sv.name FROM fabric_server fs JOIN server "
	                                        "sv ON sv.id = fs.server_id WHERE fs.fabric_id = ? "
	                                        "ORDER BY fs.position");
	json_t *stored = json_array();
	bool same = true;
	size_t n = 0;
	sqlite3_bind_int64(st, 1, id);
	while (sqlite3_step(st) == SQLITE_ROW) {
		const char *sv = (const char *)sqlite3_column_text(st, 0);
		if (n >= m || strcmp(sv, servers[n]) != 0)
			same = false;
		n++;
		json_array_append_new(stored, json_string(sv));
	}
	sqlite3_reset(st);
	if (same && n == m) {
		json_decref(stored);
		return id;
	}
	return ofcd_fail(e, -EEXIST, OFCD_E_CONFLICT, "servers",
	                 json_pack("{s:o}", "servers", stored),
	                 "fabric %s exists with other servers or another order (%zu stored, see "
	                 "details, %zu given): a PUT only creates or confirms; delete it first or "
	                 "choose another name",
	                 name, n, m);
}

int fabric_delete(const struct fabric_ctx *c, const char *name, struct ofcd_error *e)
{
	int64_t id = topo_fabric_id(c->store, name);
	if (!id)
		return ofcd_fail(e, -ENOENT, OFCD_E_NOT_FOUND, "name", NULL, "no fabric %s", name);
	sqlite3_stmt *st = store_stmt(c->store, "DELETE FROM fabric WHERE id = ?");
	sqlite3_bind_int64(st, 1, id);
	if (store_step_done(st) < 0)
		return ofcd_fail(e, -EIO, OFCD_E_STORE, NULL, NULL, "cannot delete fabric %s",
		                 name);
	log_info("planner", "fabric %s deleted", name);
	return 0;
}

int fabric_replan(const struct fabric_ctx *c, int64_t fabric_id, char *err, size_t errlen)
{
	struct store *s = c->store;
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
	rc = topo_plan_save(s, fabric_id, &in, &next, FABRIC_BASE_STATE, true);
	if (rc < 0)
		snprintf(err, errlen, "cannot store the new plan");
out:
	plan_fabric_free(&next);
out_prev:
	plan_fabric_free(&prev);
	topo_input_free(&in);
	return rc;
}

int fabric_devices_set(const struct fabric_ctx *c, int64_t server_id, const char *server, size_t n,
                       const uint32_t *index, const bool *failed, bool *changed, json_t **fabric,
                       struct ofcd_error *e)
{
	struct store *s = c->store;
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
		if (store_step_done(st) < 0)
			return ofcd_fail(e, -EIO, OFCD_E_STORE, NULL, NULL,
			                 "cannot store the device state");
		changed[i] = sqlite3_changes(store_db(s)) > 0;
		if (changed[i] && len < sizeof(what))
			len += (size_t)snprintf(what + len, sizeof(what) - len, "%sdevice %u %s",
			                        len ? ", " : "", index[i],
			                        failed[i] ? "failed" : "ok");
	}
	int64_t fid = topo_server_fabric(s, server_id);
	if (!len || !fid)
		return 0;
	int rc = fabric_replan(c, fid, why, sizeof(why));
	if (rc < 0) {
		log_error("planner", "re-plan after %s %s: %s", server, what, why);
		return ofcd_fail(e, rc, rc == -EIO ? OFCD_E_STORE : OFCD_E_INTERNAL, NULL, NULL,
		                 "re-planning failed: %s", why);
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
