/*
 * RDMA inventory routes: the reports of the host agents, their effect on
 * device states, the inventory and staleness in the server view, and the
 * controller host's own RDMA devices.
 *
 * A report is judged against the topology: each declared device of the server
 * must be served by a mapped RDMA port that is up. A report changes a
 * device's state only where it differs from the previous report of that
 * server (inventory_fault keeps what the last one said), so a device failed
 * or restored by hand stays so until the agent sees that device change, and
 * resending the same report (every heartbeat) changes nothing. A server whose
 * agent stopped reporting is flagged stale; its devices are left as they are.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "api_handlers.h"
#include "log.h"
#include "config.h"
#include "rdma.h"
#include "store_sql.h"
#include "topo.h"

/* Whether a row of inventory is stale; binds INVENTORY_STALE_MISSED as its first parameter. */
#define STALE_SQL "(julianday('now') - julianday(heartbeat)) * 86400.0 > ? * interval"

/* Heartbeats an agent may miss before its server is flagged stale. */
#define INVENTORY_STALE_MISSED 3

int api_agent_scope(struct api_req *req)
{
	const struct auth_token *t = req->token;
	if (!t || t->role != AUTH_AGENT || strcmp(t->server, req->params[0]) == 0)
		return 0;
	api_error(req, OFCD_E_FORBIDDEN, NULL,
	          "token %s is the agent token of server %s, not of %s", t->name, t->server,
	          req->params[0]);
	return -EPERM;
}

/* What one declared device looks like in a report. */
struct dev_view {
	bool failed;
	bool mapped;                /* a port of the report serves it */
	char by[RDMA_NAME_MAX + 8]; /* that port, "mlx5_0:1" */
	char reason[RDMA_REASON_MAX + RDMA_NAME_MAX + 32];
};

/*
 * Checks the report's device indices against the server's devices and works
 * out, for each declared device, whether the report shows it working.
 * Returns 0, or -EINVAL after replying.
 */
static int judge(struct api_req *req, const struct rdma_inventory *inv, uint32_t devices,
                 struct dev_view *view)
{
	char f[96];
	for (uint32_t d = 0; d < devices; d++) {
		view[d].failed = true;
		if (inv->rdma)
			snprintf(view[d].reason, sizeof(view[d].reason),
			         "no RDMA port is mapped to it");
		else
			snprintf(view[d].reason, sizeof(view[d].reason), "no RDMA on the host: %s",
			         inv->reason);
	}
	for (size_t i = 0; i < inv->ndevices; i++) {
		const struct rdma_device *dev = &inv->devices[i];
		for (size_t k = 0; k < dev->nports; k++) {
			const struct rdma_port *p = &dev->ports[k];
			if (p->index < 0)
				continue;
			snprintf(f, sizeof(f), "devices[%zu].ports[%zu].index", i, k);
			if ((uint32_t)p->index >= devices) {
				api_error(req, OFCD_E_UNPROCESSABLE, f,
				          "%s: server %s has devices 0 to %u, not %d", f,
				          req->params[0], devices - 1, p->index);
				return -EINVAL;
			}
			struct dev_view *v = &view[p->index];
			if (v->mapped) {
				api_error(req, OFCD_E_INVALID_FIELD, f,
				          "%s: device %d is already served by %s", f, p->index,
				          v->by);
				return -EINVAL;
			}
			v->mapped = true;
			snprintf(v->by, sizeof(v->by), "%s:%u", dev->name, p->num);
			v->failed = !rdma_port_is_up(dev, p);
			if (!v->failed)
				snprintf(v->reason, sizeof(v->reason), "%s is up", v->by);
			else if (dev->fatal)
				snprintf(v->reason, sizeof(v->reason),
				         "%s: the device had a fatal error", v->by);
			else if (dev->error[0])
				snprintf(v->reason, sizeof(v->reason), "%s: %.200s", v->by,
				         dev->error);
			else
				snprintf(v->reason, sizeof(v->reason),
				         "%s is %s (physical state %s)", v->by,
				         rdma_port_state_name(p->state),
				         rdma_phys_state_name(p->phys_state));
		}
	}
	return 0;
}

static int load_faults(struct store *s, int64_t sid, bool *prev, uint32_t devices)
{
	sqlite3_stmt *st = store_stmt(s, "SELECT device FROM inventory_fault WHERE server_id = ?");
	int rc;
	if (!st)
		return -EIO;
	sqlite3_bind_int64(st, 1, sid);
	while ((rc = sqlite3_step(st)) == SQLITE_ROW) {
		int64_t d = sqlite3_column_int64(st, 0);
		if (d >= 0 && d < devices)
			prev[d] = true;
	}
	sqlite3_reset(st);
	return rc == SQLITE_DONE ? 0 : -EIO;
}

static int save(struct store *s, int64_t sid, const struct rdma_inventory *inv, unsigned interval,
                const struct dev_view *view, uint32_t devices)
{
	sqlite3_stmt *st = store_stmt(s, "DELETE FROM inventory_fault WHERE server_id = ?");
	if (!st)
		return -EIO;
	sqlite3_bind_int64(st, 1, sid);
	if (store_step_done(st) < 0)
		return -EIO;
	st = store_stmt(s, "INSERT INTO inventory_fault(server_id, device) VALUES (?, ?)");
	for (uint32_t d = 0; d < devices; d++) {
		if (!view[d].failed)
			continue;
		sqlite3_bind_int64(st, 1, sid);
		sqlite3_bind_int64(st, 2, d);
		if (store_step_done(st) < 0)
			return -EIO;
	}
	json_t *j = rdma_inventory_to_json(inv, RDMA_JSON_REPORT);
	char *text = j ? json_dumps(j, JSON_COMPACT) : NULL;
	json_decref(j);
	if (!text)
		return -ENOMEM;
	st = store_stmt(s, "INSERT OR REPLACE INTO inventory(server_id, body, heartbeat, interval) "
	                   "VALUES (?, ?, strftime('%Y-%m-%dT%H:%M:%fZ', 'now'), ?)");
	sqlite3_bind_int64(st, 1, sid);
	sqlite3_bind_text(st, 2, text, -1, SQLITE_TRANSIENT);
	sqlite3_bind_int64(st, 3, interval);
	int rc = store_step_done(st);
	free(text);
	return rc;
}

void api_inventory_put(struct api_req *req)
{
	struct store *s = req->env->store;
	struct rdma_inventory inv;
	struct dev_view *view = NULL;
	bool *prev = NULL, *failed = NULL, *changed = NULL;
	uint32_t *index = NULL;
	unsigned interval = 10;
	size_t n = 0;
	json_t *fabric = NULL;
	char field[192], why[256], err[320];

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
	if (!sid)
		goto out;
	json_t *srv = topo_server_json(s, sid, false);
	uint32_t devices = (uint32_t)json_integer_value(json_object_get(srv, "devices"));
	json_decref(srv);

	view = calloc(devices, sizeof(*view));
	prev = calloc(devices, sizeof(*prev));
	failed = calloc(devices, sizeof(*failed));
	changed = calloc(devices, sizeof(*changed));
	index = calloc(devices, sizeof(*index));
	if (!view || !prev || !failed || !changed || !index) {
		api_error(req, OFCD_E_INTERNAL, NULL, "out of memory");
		goto out;
	}
	if (judge(req, &inv, devices, view) < 0)
		goto out;
	if (load_faults(s, sid, prev, devices) < 0)
		goto store_fail;
	for (uint32_t d = 0; d < devices; d++) {
		if (view[d].failed == prev[d])
			continue;
		index[n] = d;
		failed[n++] = view[d].failed;
		log_info("inventory", "%s device %u %s: %s", req->params[0], d,
		         view[d].failed ? "down" : "up", view[d].reason);
	}
	int rc = fabric_devices_set(s, req->env->desired, sid, req->params[0], n, index, failed,
	                            changed, &fabric, err, sizeof(err));
	if (rc < 0) {
		api_error(req, rc == -EIO ? OFCD_E_STORE : OFCD_E_INTERNAL, NULL, "%s", err);
		goto out;
	}
	if (save(s, sid, &inv, interval, view, devices) < 0)
		goto store_fail;

	json_t *down = json_array(), *changes = json_array(), *fabrics = json_array();
	for (uint32_t d = 0; d < devices; d++)
		if (view[d].failed)
			json_array_append_new(down, json_pack("{s:I, s:s}", "device", (json_int_t)d,
			                                      "reason", view[d].reason));
	for (size_t i = 0; i < n; i++)
		json_array_append_new(
		    changes, json_pack("{s:I, s:s, s:b}", "device", (json_int_t)index[i], "state",
		                       failed[i] ? "failed" : "ok", "changed", changed[i]));
	/* A heartbeat that changed no device changes nothing the OCS units hold. */
	req->desired_unchanged = fabric == NULL;
	if (fabric)
		json_array_append_new(fabrics, fabric);
	fabric = NULL;
	api_reply(req, 200,
	          json_pack("{s:s, s:I, s:o, s:o, s:o}", "server", req->params[0], "interval",
	                    (json_int_t)interval, "failed", down, "changes", changes, "fabrics",
	                    fabrics));
	goto out;
store_fail:
	api_error(req, OFCD_E_STORE, NULL, "cannot store the inventory of %s", req->params[0]);
out:
	json_decref(fabric);
	free(view);
	free(prev);
	free(failed);
	free(changed);
	free(index);
	rdma_inventory_free(&inv);
}

json_t *api_inventory_view(struct store *s, int64_t server_id, json_t *server)
{
	json_t *inv = NULL;
	bool stale = false;
	if (!server)
		return NULL;
	sqlite3_stmt *st = store_stmt(s, "SELECT body, heartbeat, interval, " STALE_SQL
	                                 " FROM inventory WHERE server_id = ?");
	if (st) {
		sqlite3_bind_int(st, 1, INVENTORY_STALE_MISSED);
		sqlite3_bind_int64(st, 2, server_id);
		if (sqlite3_step(st) == SQLITE_ROW) {
			inv = json_loads((const char *)sqlite3_column_text(st, 0), 0, NULL);
			if (inv) {
				json_object_set_new(
				    inv, "heartbeat",
				    json_string((const char *)sqlite3_column_text(st, 1)));
				json_object_set_new(inv, "interval",
				                    json_integer(sqlite3_column_int64(st, 2)));
			}
			stale = sqlite3_column_int(st, 3) != 0;
		}
		sqlite3_reset(st);
	}
	json_object_set_new(server, "inventory", inv ? inv : json_null());
	json_object_set_new(server, "stale", json_boolean(stale));
	return server;
}

void api_inventory_mark_stale(struct store *s, json_t *servers)
{
	size_t i;
	json_t *v;
	json_array_foreach(servers, i, v)
	{
		json_object_set_new(v, "stale", json_false());
	}
	sqlite3_stmt *st = store_stmt(s, "SELECT sv.name FROM inventory JOIN server sv ON sv.id = "
	                                 "server_id WHERE " STALE_SQL);
	if (!st)
		return;
	sqlite3_bind_int(st, 1, INVENTORY_STALE_MISSED);
	while (sqlite3_step(st) == SQLITE_ROW) {
		const char *name = (const char *)sqlite3_column_text(st, 0);
		json_array_foreach(servers, i, v)
		{
			if (strcmp(json_string_value(json_object_get(v, "name")), name) == 0)
				json_object_set_new(v, "stale", json_true());
		}
	}
	sqlite3_reset(st);
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
