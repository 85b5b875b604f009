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
                             const struct plan_shape *shape, const json_t *choice,
                             const int64_t *ids, size_t m)
{
	int64_t fid = next_fabric_id(s);
	char grid[64];
	if (fid < 0)
		return fid;
	char *choice_text = choice ? json_dumps(choice, JSON_COMPACT) : NULL;
	sqlite3_stmt *st = store_stmt(s, "INSERT INTO fabric(id, name, state, formula, planes, "
	                                 "min_devices, topology, shape, choice) "
	                                 "VALUES (?, ?, ?, ?, ?, ?, ?, nullif(?, ''), ?)");
	sqlite3_bind_int64(st, 1, fid);
	sqlite3_bind_text(st, 2, name, -1, SQLITE_STATIC);
	sqlite3_bind_text(st, 3, FABRIC_BASE_STATE, -1, SQLITE_STATIC);
	sqlite3_bind_int(st, 4, plan->formula);
	sqlite3_bind_int64(st, 5, plan->planes);
	sqlite3_bind_int64(st, 6, plan->min_devices);
	sqlite3_bind_text(st, 7, plan_topology_name(shape->topology), -1, SQLITE_STATIC);
	sqlite3_bind_text(st, 8, fabric_layout_grid(shape, grid, sizeof(grid)), -1,
	                  SQLITE_TRANSIENT);
	sqlite3_bind_text(st, 9, choice_text, -1, SQLITE_TRANSIENT);
	int rc = store_step_done(st);
	free(choice_text);
	if (rc < 0)
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

/* The fewest devices and ports per device of the fabric's servers: what every plane needs. */
static void least_ports(const struct topo_input *in, uint32_t *n, uint32_t *p)
{
	*n = *p = 0;
	for (uint32_t i = 0; i < in->m; i++) {
		if (i == 0 || in->servers[i].devices < *n)
			*n = in->servers[i].devices;
		if (i == 0 || in->servers[i].ports_per_device < *p)
			*p = in->servers[i].ports_per_device;
	}
}

/*
 * The shape the fabric gets. A full mesh asked for (the default) is planned
 * as it always was, so its refusal keeps naming the devices it lacks.
 */
static int choose_shape(const struct topo_input *in, const struct fabric_layout *l,
                        struct plan_shape *shape, json_t **choice, struct ofcd_error *e)
{
	uint32_t n, p, m = in->m;
	*choice = NULL;
	if (l->topology == PLAN_TOPO_FULL_MESH && !l->ndims)
		return plan_shape_make(PLAN_TOPO_FULL_MESH, &m, 1, shape, NULL, 0) < 0
		           ? ofcd_fail(e, -EINVAL, OFCD_E_INVALID_FIELD, "servers", NULL,
		                       "a full mesh holds at most %d servers", PLAN_MAX_SERVERS)
		           : 0;
	least_ports(in, &n, &p);
	return fabric_layout_choose(l, m, n, p, shape, choice, e);
}

int64_t fabric_create(const struct fabric_ctx *c, const char *name, const char *const *servers,
                      size_t m, const struct fabric_layout *layout, struct ofcd_error *e)
{
	struct store *s = c->store;
	struct topo_input in = { 0 };
	struct plan_fabric plan = { 0 };
	struct plan_shape shape;
	json_t *choice = NULL;
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
	rc = choose_shape(&in, layout, &shape, &choice, e);
	if (rc < 0)
		goto out;
	const struct plan_shape *shaped = shape.topology == PLAN_TOPO_FULL_MESH ? NULL : &shape;
	rc = plan_fabric_compute_shape(in.servers, in.m, shaped, &plan);
	if (rc == -EDOM) {
		rc = fabric_infeasible(e, (uint32_t)m, plan.min_devices, plan.devices);
		goto out;
	}
	if (rc < 0) {
		rc = ofcd_fail(e, rc, OFCD_E_INTERNAL, NULL, NULL, "planning failed (%d)", (int)rc);
		goto out;
	}
	if (plan_verify_shape(in.servers, in.m, shaped, &plan, why, sizeof(why)) < 0) {
		log_error("planner", "fabric %s: plan failed verification: %s", name, why);
		rc = ofcd_fail(e, -EINVAL, OFCD_E_INTERNAL, NULL, NULL,
		               "the plan failed verification: %s", why);
		goto out;
	}
	rc = insert_fabric(s, name, &plan, &shape, choice, ids, m);
	if (rc < 0 || topo_plan_save(s, rc, &in, &plan, FABRIC_BASE_STATE, false) < 0) {
		rc = ofcd_fail(e, -EIO, OFCD_E_STORE, NULL, NULL, "cannot store fabric %s", name);
		goto out;
	}
	log_info("planner", "fabric %s: %s, %u servers, %zu circuits, %zu pairs missing", name,
	         plan_shape_format(&shape, why, sizeof(why)), (unsigned)m, plan.ncircuits,
	         plan.nmissing);
out:
	json_decref(choice);
	plan_fabric_free(&plan);
	topo_input_free(&in);
	free(ids);
	return rc;
}

/* The shape a stored fabric of m servers was laid out as. */
static int stored_shape(struct store *s, int64_t fabric_id, uint32_t m, struct plan_shape *out)
{
	sqlite3_stmt *st = store_stmt(s, "SELECT topology, shape FROM fabric WHERE id = ?");
	int rc = -ENOENT;
	sqlite3_bind_int64(st, 1, fabric_id);
	if (sqlite3_step(st) == SQLITE_ROW)
		rc = fabric_layout_load((const char *)sqlite3_column_text(st, 0),
		                        (const char *)sqlite3_column_text(st, 1), m, out);
	sqlite3_reset(st);
	return rc;
}

/* Whether the stored fabric id is laid out as l asks (anything, when l names nothing). */
static bool same_layout(struct store *s, int64_t id, const struct fabric_layout *l, size_t m)
{
	struct plan_shape stored;
	if (!l->given)
		return true;
	if (stored_shape(s, id, (uint32_t)m, &stored) < 0)
		return false;
	if (l->topology != PLAN_TOPO_AUTO && l->topology != stored.topology)
		return false;
	if (!l->ndims)
		return true;
	return l->ndims == stored.dims && memcmp(l->k, stored.k, l->ndims * sizeof(l->k[0])) == 0;
}

int64_t fabric_put(const struct fabric_ctx *c, const char *name, const char *const *servers,
                   size_t m, const struct fabric_layout *layout, bool *created,
                   struct ofcd_error *e)
{
	int64_t id = topo_fabric_id(c->store, name);
	*created = !id;
	if (!id)
		return fabric_create(c, name, servers, m, layout, e);
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
		if (!same_layout(c->store, id, layout, m))
			return ofcd_fail(e, -EEXIST, OFCD_E_CONFLICT, "topology", NULL,
			                 "fabric %s exists with another topology or shape: a PUT "
			                 "only creates or confirms; delete it first or choose "
			                 "another name",
			                 name);
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
	struct plan_shape shape;
	rc = stored_shape(s, fabric_id, in.m, &shape);
	if (rc < 0) {
		snprintf(err, errlen, "cannot read the fabric's topology and shape");
		goto out_prev;
	}
	/* The same shape as before: a re-plan moves circuits, it never redraws the fabric. */
	const struct plan_shape *shaped = shape.topology == PLAN_TOPO_FULL_MESH ? NULL : &shape;
	prev.shape = shape;
	rc = plan_fabric_replan_shape(in.servers, in.m, shaped, &prev, &next);
	if (rc < 0) {
		snprintf(err, errlen, "re-planning failed (%d)", rc);
		goto out_prev;
	}
	if (plan_verify_shape(in.servers, in.m, shaped, &next, err, errlen) < 0) {
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
