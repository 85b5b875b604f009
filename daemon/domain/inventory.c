#include "inventory.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fabric.h"
#include "log.h"
#include "rdma.h"
#include "state/store_sql.h"
#include "topo.h"

/* Whether a row of inventory is stale; binds INVENTORY_STALE_MISSED as its first parameter. */
#define STALE_SQL "(julianday('now') - julianday(heartbeat)) * 86400.0 > ? * interval"

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
 */
static int judge(const char *server, const struct rdma_inventory *inv, uint32_t devices,
                 struct dev_view *view, struct ofcd_error *e)
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
				return ofcd_fail(e, -EINVAL, OFCD_E_UNPROCESSABLE, f, NULL,
				                 "%s: server %s has devices 0 to %u, not %d", f,
				                 server, devices - 1, p->index);
			}
			struct dev_view *v = &view[p->index];
			if (v->mapped) {
				return ofcd_fail(e, -EINVAL, OFCD_E_INVALID_FIELD, f, NULL,
				                 "%s: device %d is already served by %s", f,
				                 p->index, v->by);
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

/* The devices whose state the report changes: index[], failed[] and their count. */
static size_t changed_devices(const char *server, const struct dev_view *view, const bool *prev,
                              uint32_t devices, uint32_t *index, bool *failed)
{
	size_t n = 0;
	for (uint32_t d = 0; d < devices; d++) {
		if (view[d].failed == prev[d])
			continue;
		index[n] = d;
		failed[n++] = view[d].failed;
		log_info("inventory", "%s device %u %s: %s", server, d,
		         view[d].failed ? "down" : "up", view[d].reason);
	}
	return n;
}

static json_t *result_json(const struct dev_view *view, uint32_t devices, const uint32_t *index,
                           const bool *failed, const bool *changed, size_t n, json_t *fabric)
{
	json_t *down = json_array(), *changes = json_array(), *fabrics = json_array();
	for (uint32_t d = 0; d < devices; d++)
		if (view[d].failed)
			json_array_append_new(down, json_pack("{s:I, s:s}", "device", (json_int_t)d,
			                                      "reason", view[d].reason));
	for (size_t i = 0; i < n; i++)
		json_array_append_new(
		    changes, json_pack("{s:I, s:s, s:b}", "device", (json_int_t)index[i], "state",
		                       failed[i] ? "failed" : "ok", "changed", changed[i]));
	if (fabric)
		json_array_append_new(fabrics, fabric);
	return json_pack("{s:o, s:o, s:o}", "failed", down, "changes", changes, "fabrics", fabrics);
}

int inventory_apply(const struct fabric_ctx *c, int64_t server_id, const char *server,
                    const struct rdma_inventory *inv, unsigned interval, json_t **result,
                    struct ofcd_error *e)
{
	struct store *s = c->store;
	json_t *fabric = NULL;
	int rc = -ENOMEM;

	*result = NULL;
	json_t *srv = topo_server_json(s, server_id, false);
	uint32_t devices = (uint32_t)json_integer_value(json_object_get(srv, "devices"));
	json_decref(srv);
	struct dev_view *view = calloc(devices, sizeof(*view));
	bool *prev = calloc(devices, sizeof(*prev));
	bool *failed = calloc(devices, sizeof(*failed));
	bool *changed = calloc(devices, sizeof(*changed));
	uint32_t *index = calloc(devices, sizeof(*index));
	if (!view || !prev || !failed || !changed || !index) {
		ofcd_fail(e, rc, OFCD_E_INTERNAL, NULL, NULL, "out of memory");
		goto out;
	}
	rc = judge(server, inv, devices, view, e);
	if (rc < 0)
		goto out;
	rc = load_faults(s, server_id, prev, devices);
	if (rc < 0)
		goto store_fail;
	size_t n = changed_devices(server, view, prev, devices, index, failed);
	rc = fabric_devices_set(c, server_id, server, n, index, failed, changed, &fabric, e);
	if (rc < 0)
		goto out;
	rc = save(s, server_id, inv, interval, view, devices);
	if (rc < 0)
		goto store_fail;
	*result = result_json(view, devices, index, failed, changed, n, fabric);
	fabric = NULL;
	goto out;
store_fail:
	ofcd_fail(e, rc, OFCD_E_STORE, NULL, NULL, "cannot store the inventory of %s", server);
out:
	json_decref(fabric);
	free(view);
	free(prev);
	free(failed);
	free(changed);
	free(index);
	return rc;
}

json_t *inventory_view(struct store *s, int64_t server_id, json_t *server)
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

/*
 * The stale servers' names sorted, each server looked up among them: a loop over both lists
 * took 1.6 s at 8,194 servers all stale (a whole cluster's agents stopped), half a minute
 * at 32,768.
 */
int inventory_stale_names(struct store *s, struct topo_names *out)
{
	size_t cap = 0;
	int step = SQLITE_ERROR, rc = 0;
	*out = (struct topo_names){ 0 };
	sqlite3_stmt *st = store_stmt(s, "SELECT sv.name FROM inventory JOIN server sv ON sv.id = "
	                                 "server_id WHERE " STALE_SQL);
	if (st)
		sqlite3_bind_int(st, 1, INVENTORY_STALE_MISSED);
	while (rc == 0 && st && (step = sqlite3_step(st)) == SQLITE_ROW) {
		if (out->n == cap) {
			char **t = realloc(out->v, (cap = cap ? 2 * cap : 64) * sizeof(*t));
			if (!t) {
				rc = -ENOMEM;
				break;
			}
			out->v = t;
		}
		if (!(out->v[out->n] = strdup((const char *)sqlite3_column_text(st, 0))))
			rc = -ENOMEM;
		else
			out->n++;
	}
	if (st)
		sqlite3_reset(st);
	if (rc == 0 && step != SQLITE_DONE)
		rc = -EIO;
	if (rc < 0) {
		topo_names_free(out);
		return rc;
	}
	if (out->n)
		qsort(out->v, out->n, sizeof(*out->v), topo_names_cmp);
	return 0;
}
