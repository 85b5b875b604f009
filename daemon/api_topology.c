/*
 * Topology routes: OCS units, servers, wiring (cabling) and the whole
 * topology at once. Handlers validate everything before changing anything;
 * http.c wraps each write in one transaction that an error rolls back.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "api_handlers.h"
#include "ocs_driver.h"
#include "config.h"
#include "store_sql.h"
#include "reconcile.h"
#include "topo.h"

#define OCS_MAX_PORTS    65536
#define ENDPOINT_MAX_LEN 256

static const char *const intra_names[] = { "full-mesh", "two-groups", NULL };

/* ---- OCS units ----------------------------------------------------------- */

/* Validated fields of one OCS unit; strings point into the request body. */
struct ocs_in {
	const char *name, *driver, *endpoint;
	uint64_t ports;
};

static int parse_ocs(struct api_req *req, json_t *o, const char *prefix, struct ocs_in *out)
{
	static const char *const members[] = { "name", "driver", "ports", "endpoint", NULL };
	char field[96], err[256];
	*out = (struct ocs_in){ .driver = "sim", .endpoint = "" };

	if (!json_is_object(o)) {
		api_error(req, OFCD_E_INVALID_FIELD, prefix, "%s must be an object",
		          prefix ? prefix : "body");
		return -EINVAL;
	}
	if (api_check_members(req, o, prefix, members) < 0 ||
	    api_get_name(req, o, prefix, "name", true, &out->name) < 0 ||
	    api_get_string(req, o, prefix, "driver", false, 32, &out->driver) < 0 ||
	    api_get_uint(req, o, prefix, "ports", true, 1, OCS_MAX_PORTS, &out->ports) < 0)
		return -EINVAL;
	json_t *ep = json_object_get(o, "endpoint");
	if (ep && !json_is_null(ep) && json_is_string(ep) && json_string_length(ep) == 0)
		out->endpoint = "";
	else if (api_get_string(req, o, prefix, "endpoint", false, ENDPOINT_MAX_LEN,
	                        &out->endpoint) < 0)
		return -EINVAL;
	const struct ocs_driver_ops *drv = ocs_driver_find(out->driver);
	if (!drv) {
		api_field(field, sizeof(field), prefix, "driver");
		api_error(req, OFCD_E_INVALID_FIELD, field, "%s: unknown OCS driver \"%s\"", field,
		          out->driver);
		return -EINVAL;
	}
	if (drv->check_endpoint && drv->check_endpoint(out->endpoint, err, sizeof(err)) < 0) {
		api_field(field, sizeof(field), prefix, "endpoint");
		api_error(req, OFCD_E_INVALID_FIELD, field, "%s: %s", field, err);
		return -EINVAL;
	}
	return 0;
}

static int insert_ocs(struct store *s, const struct ocs_in *o)
{
	sqlite3_stmt *st = store_stmt(s, "INSERT INTO ocs(name, driver, ports, endpoint) "
	                                 "VALUES (?, ?, ?, ?)");
	sqlite3_bind_text(st, 1, o->name, -1, SQLITE_STATIC);
	sqlite3_bind_text(st, 2, o->driver, -1, SQLITE_STATIC);
	sqlite3_bind_int64(st, 3, (sqlite3_int64)o->ports);
	sqlite3_bind_text(st, 4, o->endpoint, -1, SQLITE_STATIC);
	return store_step_done(st);
}

void api_ocs_create(struct api_req *req)
{
	struct store *s = req->env->store;
	struct ocs_in o;
	json_t *body = api_body_object(req);
	if (!body || parse_ocs(req, body, NULL, &o) < 0)
		return;
	if (topo_ocs_id(s, o.name)) {
		api_error(req, OFCD_E_CONFLICT, "name", "OCS unit %s already exists", o.name);
		return;
	}
	if (insert_ocs(s, &o) < 0) {
		api_error(req, OFCD_E_STORE, NULL, "cannot store OCS unit %s", o.name);
		return;
	}
	api_reply(req, 201, topo_ocs_json(s, topo_ocs_id(s, o.name)));
}

void api_ocs_list(struct api_req *req)
{
	api_reply(req, 200, json_pack("{s:o}", "ocs", topo_ocs_list(req->env->store)));
}

static int64_t ocs_param(struct api_req *req)
{
	int64_t id = topo_ocs_id(req->env->store, req->params[0]);
	if (!id)
		api_error(req, OFCD_E_NOT_FOUND, "name", "no OCS unit %s", req->params[0]);
	return id;
}

void api_ocs_get(struct api_req *req)
{
	int64_t id = ocs_param(req);
	if (!id)
		return;
	json_t *o = topo_ocs_json(req->env->store, id);
	json_t *live = reconcile_unit_json(req->env->reconciler, id);
	if (live) {
		json_t *conn = json_pack("{s:O, s:O, s:O}", "state", json_object_get(live, "state"),
		                         "last_error", json_object_get(live, "last_error"),
		                         "in_sync", json_object_get(live, "in_sync"));
		json_object_set_new(o, "connection", conn);
		json_object_set(o, "ports_down", json_object_get(live, "ports_down"));
		json_object_set(o, "foreign", json_object_get(live, "foreign"));
		json_decref(live);
	}
	api_reply(req, 200, o);
}

/*
 * A unit is only forgotten once it holds none of ofcd's cross-connects:
 * otherwise they would stay on the hardware with nobody left to remove them,
 * joining servers whatever fabrics they join next.
 */
static int unit_must_drain(struct api_req *req, int64_t id, const char *name, const char *field)
{
	json_t *o = topo_ocs_json(req->env->store, id);
	bool in_process = o && strcmp(json_string_value(json_object_get(o, "driver")), "sim") == 0;
	json_decref(o);
	if (in_process)
		return 0; /* a sim unit's circuits live in this process and go with it */
	long held = reconcile_unit_held(req->env->reconciler, id);
	if (held == 0)
		return 0;
	if (held < 0)
		api_error(
		    req, OFCD_E_IN_USE, field,
		    "OCS unit %s has not been read back, so it may still hold circuits; wait "
		    "until it is connected and in sync (DELETE ?force=true forgets it anyway)",
		    name);
	else
		api_error(req, OFCD_E_IN_USE, field,
		          "OCS unit %s still holds %ld cross-connects made by ofcd; wait until it "
		          "is in sync (DELETE ?force=true forgets it anyway)",
		          name, held);
	return -EBUSY;
}

void api_ocs_delete(struct api_req *req)
{
	struct store *s = req->env->store;
	int64_t id = ocs_param(req);
	if (!id)
		return;
	if (topo_ocs_in_use(s, id)) {
		api_error(req, OFCD_E_IN_USE, "name",
		          "OCS unit %s is cabled to servers of a fabric; delete the fabric first",
		          req->params[0]);
		return;
	}
	const char *force = api_query(req, "force");
	if (force && strcmp(force, "true") != 0) {
		api_error(req, OFCD_E_INVALID_FIELD, "force", "force must be true when given");
		return;
	}
	if (!force && unit_must_drain(req, id, req->params[0], "name") < 0)
		return;
	sqlite3_stmt *st = store_stmt(s, "DELETE FROM ocs WHERE id = ?");
	sqlite3_bind_int64(st, 1, id);
	if (store_step_done(st) < 0) {
		api_error(req, OFCD_E_STORE, NULL, "cannot delete OCS unit %s", req->params[0]);
		return;
	}
	api_reply(req, 200, json_pack("{s:s}", "deleted", req->params[0]));
}

void api_ocs_cross_connects(struct api_req *req)
{
	int64_t id = ocs_param(req);
	if (!id)
		return;
	json_t *desired = topo_desired_json(req->env->store, id);
	json_t *live = reconcile_unit_json(req->env->reconciler, id);
	json_t *actual = live ? json_incref(json_object_get(live, "actual")) : json_array();
	json_t *o = json_pack("{s:s, s:o, s:o, s:b}", "ocs", req->params[0], "desired", desired,
	                      "actual", actual, "in_sync",
	                      live && json_is_true(json_object_get(live, "in_sync")) &&
	                          json_equal(desired, actual));
	if (live) {
		json_object_set(o, "partial", json_object_get(live, "partial"));
		json_object_set(o, "foreign", json_object_get(live, "foreign"));
		json_decref(live);
	}
	api_reply(req, 200, o);
}

/* ---- servers ------------------------------------------------------------- */

struct server_in {
	const char *name;
	uint64_t devices, ports_per_device;
	bool p2p;
	int intra;
	bool offload;   /* its RDMA NIC offloads collectives (document 003) */
	const char *sw; /* the switch its NIC reaches, or NULL */
};

static int parse_server(struct api_req *req, json_t *o, const char *prefix, struct server_in *out)
{
	static const char *const members[] = { "name",  "devices", "ports_per_device", "p2p",
		                               "intra", "offload", "switch",           NULL };
	*out = (struct server_in){ .ports_per_device = 1 };
	if (!json_is_object(o)) {
		api_error(req, OFCD_E_INVALID_FIELD, prefix, "%s must be an object",
		          prefix ? prefix : "body");
		return -EINVAL;
	}
	if (api_check_members(req, o, prefix, members) < 0 ||
	    api_get_name(req, o, prefix, "name", true, &out->name) < 0 ||
	    api_get_uint(req, o, prefix, "devices", true, 1, PLAN_MAX_DEVICES, &out->devices) < 0 ||
	    api_get_uint(req, o, prefix, "ports_per_device", false, 1, PLAN_MAX_PORTS,
	                 &out->ports_per_device) < 0 ||
	    api_get_bool(req, o, prefix, "p2p", false, &out->p2p) < 0 ||
	    api_get_enum(req, o, prefix, "intra", false, intra_names, &out->intra) < 0 ||
	    api_get_bool(req, o, prefix, "offload", false, &out->offload) < 0 ||
	    api_get_name(req, o, prefix, "switch", false, &out->sw) < 0)
		return -EINVAL;
	if (out->intra == 1 && out->devices % 2) {
		char f[96];
		api_field(f, sizeof(f), prefix, "devices");
		api_error(
		    req, OFCD_E_INVALID_FIELD, f,
		    "%s: a two-groups server has two equal groups, so an even device count, got "
		    "%llu",
		    f, (unsigned long long)out->devices);
		return -EINVAL;
	}
	return 0;
}

static int insert_server(struct store *s, const struct server_in *v)
{
	sqlite3_stmt *st =
	    store_stmt(s, "INSERT INTO server(name, devices, ports_per_device, "
	                  "p2p, intra, offload, switch) VALUES (?, ?, ?, ?, ?, ?, ?)");
	sqlite3_bind_text(st, 1, v->name, -1, SQLITE_STATIC);
	sqlite3_bind_int64(st, 2, (sqlite3_int64)v->devices);
	sqlite3_bind_int64(st, 3, (sqlite3_int64)v->ports_per_device);
	sqlite3_bind_int(st, 4, v->p2p);
	sqlite3_bind_text(st, 5, intra_names[v->intra], -1, SQLITE_STATIC);
	sqlite3_bind_int(st, 6, v->offload);
	if (v->sw)
		sqlite3_bind_text(st, 7, v->sw, -1, SQLITE_STATIC);
	return store_step_done(st);
}

void api_server_create(struct api_req *req)
{
	struct store *s = req->env->store;
	struct server_in v;
	json_t *body = api_body_object(req);
	if (!body || parse_server(req, body, NULL, &v) < 0)
		return;
	if (topo_server_id(s, v.name)) {
		api_error(req, OFCD_E_CONFLICT, "name", "server %s already exists", v.name);
		return;
	}
	if (v.sw && !api_switch_exists(s, v.sw)) {
		api_error(req, OFCD_E_UNPROCESSABLE, "switch", "switch: no switch %s", v.sw);
		return;
	}
	if (insert_server(s, &v) < 0) {
		api_error(req, OFCD_E_STORE, NULL, "cannot store server %s", v.name);
		return;
	}
	api_reply(req, 201, topo_server_json(s, topo_server_id(s, v.name), true));
}

void api_server_list(struct api_req *req)
{
	json_t *servers = topo_server_list(req->env->store);
	api_inventory_mark_stale(req->env->store, servers);
	api_reply(req, 200, json_pack("{s:o}", "servers", servers));
}

int64_t api_server_param(struct api_req *req)
{
	int64_t id = topo_server_id(req->env->store, req->params[0]);
	if (!id)
		api_error(req, OFCD_E_NOT_FOUND, "name", "no server %s", req->params[0]);
	return id;
}

void api_server_get(struct api_req *req)
{
	int64_t id = api_server_param(req);
	if (id)
		api_reply(req, 200,
		          api_inventory_view(req->env->store, id,
		                             topo_server_json(req->env->store, id, true)));
}

void api_server_delete(struct api_req *req)
{
	struct store *s = req->env->store;
	int64_t id = api_server_param(req);
	if (!id)
		return;
	if (topo_server_fabric(s, id)) {
		api_error(req, OFCD_E_IN_USE, "name",
		          "server %s is in a fabric; delete the fabric first", req->params[0]);
		return;
	}
	sqlite3_stmt *st = store_stmt(s, "DELETE FROM server WHERE id = ?");
	sqlite3_bind_int64(st, 1, id);
	if (store_step_done(st) < 0) {
		api_error(req, OFCD_E_STORE, NULL, "cannot delete server %s", req->params[0]);
		return;
	}
	api_reply(req, 200, json_pack("{s:s}", "deleted", req->params[0]));
}

/* ---- wiring -------------------------------------------------------------- */

/*
 * New cabling is first collected in a temporary table, whose unique keys
 * catch a device port or an OCS port used twice; it replaces the cable table
 * only once it is complete and keeps every cable a fabric's circuit uses.
 */
static int new_cable_reset(struct store *s)
{
	sqlite3_stmt *st = store_stmt(
	    s, "CREATE TEMP TABLE IF NOT EXISTS new_cable (server_id INTEGER NOT NULL, "
	       "device INTEGER NOT NULL, port INTEGER NOT NULL, ocs_id INTEGER NOT NULL, "
	       "ocs_port INTEGER NOT NULL, PRIMARY KEY (server_id, device, port), "
	       "UNIQUE (ocs_id, ocs_port))");
	if (!st || store_step_done(st) < 0)
		return -EIO;
	st = store_stmt(s, "DELETE FROM temp.new_cable");
	return st ? store_step_done(st) : -EIO;
}

/* 0, or -EEXIST with *which = 0 (device port taken) / 1 (OCS port taken). */
static int new_cable_add(struct store *s, int64_t server_id, uint32_t dev, uint32_t port,
                         int64_t ocs_id, uint32_t ocs_port, int *which)
{
	sqlite3_stmt *st = store_stmt(s, "SELECT (SELECT count(*) FROM temp.new_cable WHERE "
	                                 "server_id = ?1 AND device = ?2 AND port = ?3), "
	                                 "(SELECT count(*) FROM temp.new_cable WHERE ocs_id = ?4 "
	                                 "AND ocs_port = ?5)");
	sqlite3_bind_int64(st, 1, server_id);
	sqlite3_bind_int64(st, 2, dev);
	sqlite3_bind_int64(st, 3, port);
	sqlite3_bind_int64(st, 4, ocs_id);
	sqlite3_bind_int64(st, 5, ocs_port);
	int rc = sqlite3_step(st);
	int dev_taken = sqlite3_column_int(st, 0), port_taken = sqlite3_column_int(st, 1);
	sqlite3_reset(st);
	if (rc != SQLITE_ROW)
		return -EIO;
	if (dev_taken || port_taken) {
		*which = dev_taken ? 0 : 1;
		return -EEXIST;
	}
	st = store_stmt(s, "INSERT INTO temp.new_cable VALUES (?, ?, ?, ?, ?)");
	sqlite3_bind_int64(st, 1, server_id);
	sqlite3_bind_int64(st, 2, dev);
	sqlite3_bind_int64(st, 3, port);
	sqlite3_bind_int64(st, 4, ocs_id);
	sqlite3_bind_int64(st, 5, ocs_port);
	return store_step_done(st);
}

struct unit {
	int64_t id;
	char name[65];
	uint32_t ports, next, needed;
};

/* Slot k = device * P + port of every server goes to unit k mod K, ports in server order. */
static int wiring_rule(struct api_req *req, const char *field)
{
	struct store *s = req->env->store;
	struct unit *units = NULL;
	size_t k = 0, cap = 0;
	int rc = -EINVAL;

	sqlite3_stmt *st = store_stmt(s, "SELECT id, name, ports FROM ocs ORDER BY name");
	while (sqlite3_step(st) == SQLITE_ROW) {
		if (k == cap) {
			cap = cap ? cap * 2 : 16;
			struct unit *u = realloc(units, cap * sizeof(*u));
			if (!u) {
				sqlite3_reset(st);
				api_error(req, OFCD_E_INTERNAL, NULL, "out of memory");
				goto out;
			}
			units = u;
		}
		units[k] = (struct unit){ .id = sqlite3_column_int64(st, 0),
			                  .ports = (uint32_t)sqlite3_column_int64(st, 2) };
		snprintf(units[k].name, sizeof(units[k].name), "%s", sqlite3_column_text(st, 1));
		k++;
	}
	sqlite3_reset(st);
	if (k == 0) {
		api_error(req, OFCD_E_UNPROCESSABLE, field,
		          "rule plane-per-ocs needs at least one OCS unit");
		goto out;
	}
	st = store_stmt(s, "SELECT sum(devices * ports_per_device / ?1 + "
	                   "(devices * ports_per_device % ?1 > ?2)) FROM server");
	for (size_t u = 0; u < k; u++) {
		sqlite3_bind_int64(st, 1, (sqlite3_int64)k);
		sqlite3_bind_int64(st, 2, (sqlite3_int64)u);
		if (sqlite3_step(st) == SQLITE_ROW)
			units[u].needed = (uint32_t)sqlite3_column_int64(st, 0);
		sqlite3_reset(st);
		if (units[u].needed > units[u].ports) {
			api_error(req, OFCD_E_UNPROCESSABLE, field,
			          "rule plane-per-ocs needs %u ports on OCS unit %s, it has %u",
			          units[u].needed, units[u].name, units[u].ports);
			goto out;
		}
	}
	st = store_stmt(s, "SELECT id, devices, ports_per_device FROM server ORDER BY id");
	while (sqlite3_step(st) == SQLITE_ROW) {
		int64_t sid = sqlite3_column_int64(st, 0);
		uint32_t n = (uint32_t)sqlite3_column_int64(st, 1);
		uint32_t p = (uint32_t)sqlite3_column_int64(st, 2);
		for (uint32_t slot = 0; slot < n * p; slot++) {
			struct unit *u = &units[slot % k];
			int which;
			if (new_cable_add(s, sid, slot / p, slot % p, u->id, ++u->next, &which) <
			    0) {
				sqlite3_reset(st);
				api_error(req, OFCD_E_STORE, NULL, "cannot store the wiring");
				goto out;
			}
		}
	}
	sqlite3_reset(st);
	rc = 0;
out:
	free(units);
	return rc;
}

static int wiring_links(struct api_req *req, json_t *links, const char *field)
{
	static const char *const members[] = {
		"server", "device", "port", "ocs", "ocs_port", NULL
	};
	struct store *s = req->env->store;
	size_t i;
	json_t *l;
	char f[96];

	if (!json_is_array(links)) {
		api_error(req, OFCD_E_INVALID_FIELD, field, "%s must be an array", field);
		return -EINVAL;
	}
	json_array_foreach(links, i, l)
	{
		const char *server, *ocs;
		uint64_t dev, port, ocs_port;
		snprintf(f, sizeof(f), "%s[%zu]", field, i);
		if (!json_is_object(l)) {
			api_error(req, OFCD_E_INVALID_FIELD, f, "%s must be an object", f);
			return -EINVAL;
		}
		if (api_check_members(req, l, f, members) < 0 ||
		    api_get_name(req, l, f, "server", true, &server) < 0 ||
		    api_get_uint(req, l, f, "device", true, 0, PLAN_MAX_DEVICES - 1, &dev) < 0 ||
		    api_get_uint(req, l, f, "port", true, 0, PLAN_MAX_PORTS - 1, &port) < 0 ||
		    api_get_name(req, l, f, "ocs", true, &ocs) < 0 ||
		    api_get_uint(req, l, f, "ocs_port", true, 1, OCS_MAX_PORTS, &ocs_port) < 0)
			return -EINVAL;

		sqlite3_stmt *st = store_stmt(s, "SELECT id, devices, ports_per_device FROM server "
		                                 "WHERE name = ?");
		sqlite3_bind_text(st, 1, server, -1, SQLITE_STATIC);
		int found = sqlite3_step(st) == SQLITE_ROW;
		int64_t sid = found ? sqlite3_column_int64(st, 0) : 0;
		uint64_t ndev = found ? (uint64_t)sqlite3_column_int64(st, 1) : 0;
		uint64_t nport = found ? (uint64_t)sqlite3_column_int64(st, 2) : 0;
		sqlite3_reset(st);
		st = store_stmt(s, "SELECT id, ports FROM ocs WHERE name = ?");
		sqlite3_bind_text(st, 1, ocs, -1, SQLITE_STATIC);
		int ofound = sqlite3_step(st) == SQLITE_ROW;
		int64_t oid = ofound ? sqlite3_column_int64(st, 0) : 0;
		uint64_t oports = ofound ? (uint64_t)sqlite3_column_int64(st, 1) : 0;
		sqlite3_reset(st);

		if (!found) {
			api_error(req, OFCD_E_UNPROCESSABLE, f, "%s: no server %s", f, server);
			return -EINVAL;
		}
		if (dev >= ndev || port >= nport) {
			api_error(req, OFCD_E_UNPROCESSABLE, f,
			          "%s: server %s has devices 0..%llu with ports 0..%llu", f, server,
			          (unsigned long long)ndev - 1, (unsigned long long)nport - 1);
			return -EINVAL;
		}
		if (!ofound) {
			api_error(req, OFCD_E_UNPROCESSABLE, f, "%s: no OCS unit %s", f, ocs);
			return -EINVAL;
		}
		if (ocs_port > oports) {
			api_error(req, OFCD_E_UNPROCESSABLE, f,
			          "%s: OCS unit %s has ports 1..%llu, got %llu", f, ocs,
			          (unsigned long long)oports, (unsigned long long)ocs_port);
			return -EINVAL;
		}
		int which = 0;
		int rc = new_cable_add(s, sid, (uint32_t)dev, (uint32_t)port, oid,
		                       (uint32_t)ocs_port, &which);
		if (rc == -EEXIST) {
			if (which == 0)
				api_error(req, OFCD_E_UNPROCESSABLE, f,
				          "%s: %s device %llu port %llu is cabled twice", f, server,
				          (unsigned long long)dev, (unsigned long long)port);
			else
				api_error(req, OFCD_E_UNPROCESSABLE, f,
				          "%s: OCS unit %s port %llu is cabled twice", f, ocs,
				          (unsigned long long)ocs_port);
			return -EINVAL;
		}
		if (rc < 0) {
			api_error(req, OFCD_E_STORE, NULL, "cannot store the wiring");
			return -EIO;
		}
	}
	return 0;
}

/*
 * Replaces the cabling with what `wiring` describes ({"rule"} or {"links"}),
 * refusing (409) to change a cable that a fabric's circuit uses.
 */
static int wiring_apply(struct api_req *req, json_t *wiring, const char *prefix)
{
	static const char *const members[] = { "rule", "links", NULL };
	static const char *const rules[] = { "plane-per-ocs", NULL };
	struct store *s = req->env->store;
	char f[96];
	int rule = -1;

	if (!json_is_object(wiring)) {
		api_error(req, OFCD_E_INVALID_FIELD, prefix, "%s must be an object",
		          prefix ? prefix : "body");
		return -EINVAL;
	}
	if (api_check_members(req, wiring, prefix, members) < 0 ||
	    api_get_enum(req, wiring, prefix, "rule", false, rules, &rule) < 0)
		return -EINVAL;
	json_t *links = json_object_get(wiring, "links");
	if ((rule >= 0) == (links != NULL)) {
		api_error(req, OFCD_E_INVALID_FIELD, api_field(f, sizeof(f), prefix, "rule"),
		          "give either rule or links");
		return -EINVAL;
	}
	if (new_cable_reset(s) < 0) {
		api_error(req, OFCD_E_STORE, NULL, "cannot store the wiring");
		return -EIO;
	}
	int rc = rule >= 0 ? wiring_rule(req, api_field(f, sizeof(f), prefix, "rule"))
	                   : wiring_links(req, links, api_field(f, sizeof(f), prefix, "links"));
	if (rc < 0)
		return rc;

	sqlite3_stmt *st = store_stmt(
	    s, "SELECT f.name, sv.name FROM circuit c JOIN fabric f ON f.id = c.fabric_id "
	       "JOIN fabric_server fa ON fa.fabric_id = c.fabric_id AND fa.position = c.a_pos "
	       "JOIN fabric_server fb ON fb.fabric_id = c.fabric_id AND fb.position = c.b_pos "
	       "JOIN server sv ON sv.id = fa.server_id "
	       "WHERE NOT EXISTS (SELECT 1 FROM temp.new_cable n WHERE n.server_id = "
	       "fa.server_id AND n.device = c.a_device AND n.port = c.a_port AND n.ocs_id = "
	       "c.ocs_id AND n.ocs_port = c.a_ocs_port) OR NOT EXISTS (SELECT 1 FROM "
	       "temp.new_cable n WHERE n.server_id = fb.server_id AND n.device = c.b_device "
	       "AND n.port = c.b_port AND n.ocs_id = c.ocs_id AND n.ocs_port = c.b_ocs_port) "
	       "LIMIT 1");
	if (sqlite3_step(st) == SQLITE_ROW) {
		api_error(req, OFCD_E_IN_USE, prefix ? prefix : "links",
		          "the new wiring changes cables that fabric %s uses (server %s); delete "
		          "the fabric first",
		          sqlite3_column_text(st, 0), sqlite3_column_text(st, 1));
		sqlite3_reset(st);
		return -EBUSY;
	}
	sqlite3_reset(st);

	st = store_stmt(s, "DELETE FROM cable");
	if (store_step_done(st) < 0)
		goto fail;
	st = store_stmt(s, "INSERT INTO cable(server_id, device, port, ocs_id, ocs_port) "
	                   "SELECT server_id, device, port, ocs_id, ocs_port FROM temp.new_cable");
	if (store_step_done(st) < 0)
		goto fail;
	st = store_stmt(s, "INSERT INTO wiring(id, rule) VALUES (1, ?) "
	                   "ON CONFLICT(id) DO UPDATE SET rule = excluded.rule");
	if (rule >= 0)
		sqlite3_bind_text(st, 1, rules[rule], -1, SQLITE_STATIC);
	if (store_step_done(st) < 0)
		goto fail;
	st = store_stmt(s, "DELETE FROM temp.new_cable");
	store_step_done(st);
	return 0;
fail:
	api_error(req, OFCD_E_STORE, NULL, "cannot store the wiring");
	return -EIO;
}

void api_wiring_put(struct api_req *req)
{
	json_t *body = api_body_object(req);
	if (!body || wiring_apply(req, body, NULL) < 0)
		return;
	api_reply(req, 200, topo_wiring_json(req->env->store));
}

void api_wiring_get(struct api_req *req)
{
	api_reply(req, 200, topo_wiring_json(req->env->store));
}

/* ---- the whole topology -------------------------------------------------- */

static json_t *topology_json(struct store *s)
{
	json_t *w = topo_wiring_json(s);
	/* The PUT-able form: the rule when there is one, else the links. */
	if (json_is_string(json_object_get(w, "rule")))
		json_object_del(w, "links");
	else
		json_object_del(w, "rule");
	/* Fabric membership is not topology: PUT refuses it, so GET leaves it out. */
	json_t *servers = topo_server_list(s), *v;
	size_t i;
	json_array_foreach(servers, i, v) json_object_del(v, "fabric");
	return json_pack("{s:o, s:o, s:o, s:o}", "ocs", topo_ocs_list(s), "switches",
	                 api_switch_list_json(s, false), "servers", servers, "wiring", w);
}

void api_topology_get(struct api_req *req)
{
	api_reply(req, 200, topology_json(req->env->store));
}

static bool name_in(const char *const *names, size_t n, const char *name)
{
	for (size_t i = 0; i < n; i++)
		if (strcmp(names[i], name) == 0)
			return true;
	return false;
}

/*
 * Replaces OCS units and servers by name: kept names are updated in place
 * (so fabrics' references stay valid), others deleted or inserted. Anything a
 * fabric uses must survive unchanged, else 409 and nothing changes.
 */
void api_topology_put(struct api_req *req)
{
	static const char *const members[] = { "ocs", "switches", "servers", "wiring", NULL };
	struct store *s = req->env->store;
	json_t *body = api_body_object(req);
	json_t *ocs, *switches, *servers, *v;
	size_t i, nocs, nsrv;
	const char **names = NULL;
	struct ocs_in *ov = NULL;
	struct server_in *sv = NULL;
	char f[64];
	sqlite3_stmt *st;

	if (!body || api_check_members(req, body, NULL, members) < 0)
		return;
	ocs = json_object_get(body, "ocs");
	servers = json_object_get(body, "servers");
	if (!json_is_array(ocs) || !json_is_array(servers)) {
		api_error(req, OFCD_E_INVALID_FIELD, json_is_array(ocs) ? "servers" : "ocs",
		          "%s must be an array", json_is_array(ocs) ? "servers" : "ocs");
		return;
	}
	nocs = json_array_size(ocs);
	nsrv = json_array_size(servers);
	names = calloc(nocs + nsrv + 1, sizeof(*names));
	ov = calloc(nocs + 1, sizeof(*ov));
	sv = calloc(nsrv + 1, sizeof(*sv));
	if (!names || !ov || !sv) {
		api_error(req, OFCD_E_INTERNAL, NULL, "out of memory");
		goto out;
	}
	json_array_foreach(ocs, i, v)
	{
		snprintf(f, sizeof(f), "ocs[%zu]", i);
		if (parse_ocs(req, v, f, &ov[i]) < 0)
			goto out;
		if (name_in(names, i, ov[i].name)) {
			api_error(req, OFCD_E_INVALID_FIELD, f, "%s: OCS unit %s is given twice", f,
			          ov[i].name);
			goto out;
		}
		names[i] = ov[i].name;
	}
	/* Like the wiring, switches not given are none; servers may name only the new ones. */
	switches = json_object_get(body, "switches");
	if (api_switches_parse(req, switches, "switches") < 0)
		goto out;
	json_array_foreach(servers, i, v)
	{
		snprintf(f, sizeof(f), "servers[%zu]", i);
		if (parse_server(req, v, f, &sv[i]) < 0)
			goto out;
		if (name_in(names + nocs, i, sv[i].name)) {
			api_error(req, OFCD_E_INVALID_FIELD, f, "%s: server %s is given twice", f,
			          sv[i].name);
			goto out;
		}
		if (sv[i].sw && !api_switches_has(switches, sv[i].sw)) {
			char fs[80];
			snprintf(fs, sizeof(fs), "%s.switch", f);
			api_error(req, OFCD_E_UNPROCESSABLE, fs, "%s: no switch %s", fs, sv[i].sw);
			goto out;
		}
		names[nocs + i] = sv[i].name;
	}

	/* Servers in fabrics must stay, with the same devices and ports. */
	st = store_stmt(s, "SELECT sv.name, sv.devices, sv.ports_per_device, f.name FROM server sv "
	                   "JOIN fabric_server fs ON fs.server_id = sv.id "
	                   "JOIN fabric f ON f.id = fs.fabric_id");
	while (sqlite3_step(st) == SQLITE_ROW) {
		const char *name = (const char *)sqlite3_column_text(st, 0);
		size_t k;
		for (k = 0; k < nsrv && strcmp(sv[k].name, name) != 0; k++)
			;
		if (k == nsrv || sv[k].devices != (uint64_t)sqlite3_column_int64(st, 1) ||
		    sv[k].ports_per_device != (uint64_t)sqlite3_column_int64(st, 2)) {
			api_error(req, OFCD_E_IN_USE, "servers",
			          "server %s is in fabric %s and would be %s; delete the fabric "
			          "first",
			          name, sqlite3_column_text(st, 3),
			          k == nsrv ? "dropped" : "changed");
			sqlite3_reset(st);
			goto out;
		}
	}
	sqlite3_reset(st);
	/* OCS units carrying circuits must stay, with their ports and driver. */
	st = store_stmt(s, "SELECT o.name, o.driver, o.endpoint, max(max(c.a_ocs_port), "
	                   "max(c.b_ocs_port)) FROM circuit c JOIN ocs o ON o.id = c.ocs_id "
	                   "GROUP BY o.id");
	while (sqlite3_step(st) == SQLITE_ROW) {
		const char *name = (const char *)sqlite3_column_text(st, 0);
		size_t k;
		for (k = 0; k < nocs && strcmp(ov[k].name, name) != 0; k++)
			;
		if (k == nocs || ov[k].ports < (uint64_t)sqlite3_column_int64(st, 3) ||
		    strcmp(ov[k].driver, (const char *)sqlite3_column_text(st, 1)) != 0 ||
		    strcmp(ov[k].endpoint, (const char *)sqlite3_column_text(st, 2)) != 0) {
			api_error(req, OFCD_E_IN_USE, "ocs",
			          "OCS unit %s carries fabric circuits and would be %s; delete "
			          "those fabrics first",
			          name, k == nocs ? "dropped" : "changed");
			sqlite3_reset(st);
			goto out;
		}
	}
	sqlite3_reset(st);

	/* Units dropped or re-addressed must not leave circuits behind on the hardware. */
	st = store_stmt(s, "SELECT id, name, driver, endpoint, ports FROM ocs");
	while (sqlite3_step(st) == SQLITE_ROW) {
		const char *name = (const char *)sqlite3_column_text(st, 1);
		size_t k;
		for (k = 0; k < nocs && strcmp(ov[k].name, name) != 0; k++)
			;
		if (k < nocs &&
		    strcmp(ov[k].driver, (const char *)sqlite3_column_text(st, 2)) == 0 &&
		    strcmp(ov[k].endpoint, (const char *)sqlite3_column_text(st, 3)) == 0 &&
		    ov[k].ports == (uint64_t)sqlite3_column_int64(st, 4))
			continue;
		if (unit_must_drain(req, sqlite3_column_int64(st, 0), name, "ocs") < 0) {
			sqlite3_reset(st);
			goto out;
		}
	}
	sqlite3_reset(st);

	/* Apply: delete what is gone, update what stays, insert what is new. */
	st = store_stmt(s, "SELECT id, name FROM ocs");
	while (sqlite3_step(st) == SQLITE_ROW) {
		if (name_in(names, nocs, (const char *)sqlite3_column_text(st, 1)))
			continue;
		sqlite3_stmt *del = store_stmt(s, "DELETE FROM ocs WHERE id = ?");
		sqlite3_bind_int64(del, 1, sqlite3_column_int64(st, 0));
		store_step_done(del);
	}
	sqlite3_reset(st);
	st = store_stmt(s, "SELECT id, name FROM server");
	while (sqlite3_step(st) == SQLITE_ROW) {
		if (name_in(names + nocs, nsrv, (const char *)sqlite3_column_text(st, 1)))
			continue;
		sqlite3_stmt *del = store_stmt(s, "DELETE FROM server WHERE id = ?");
		sqlite3_bind_int64(del, 1, sqlite3_column_int64(st, 0));
		store_step_done(del);
	}
	sqlite3_reset(st);
	for (i = 0; i < nocs; i++) {
		if (!topo_ocs_id(s, ov[i].name)) {
			if (insert_ocs(s, &ov[i]) < 0)
				goto store_fail;
			continue;
		}
		st = store_stmt(
		    s, "UPDATE ocs SET driver = ?, ports = ?, endpoint = ? WHERE name = ?");
		sqlite3_bind_text(st, 1, ov[i].driver, -1, SQLITE_STATIC);
		sqlite3_bind_int64(st, 2, (sqlite3_int64)ov[i].ports);
		sqlite3_bind_text(st, 3, ov[i].endpoint, -1, SQLITE_STATIC);
		sqlite3_bind_text(st, 4, ov[i].name, -1, SQLITE_STATIC);
		if (store_step_done(st) < 0)
			goto store_fail;
	}
	if (api_switches_store(s, switches) < 0)
		goto store_fail;
	for (i = 0; i < nsrv; i++) {
		int64_t id = topo_server_id(s, sv[i].name);
		if (!id) {
			if (insert_server(s, &sv[i]) < 0)
				goto store_fail;
			continue;
		}
		st = store_stmt(s, "UPDATE server SET devices = ?, ports_per_device = ?, p2p = ?, "
		                   "intra = ?, offload = ?, switch = ? WHERE id = ?");
		sqlite3_bind_int64(st, 1, (sqlite3_int64)sv[i].devices);
		sqlite3_bind_int64(st, 2, (sqlite3_int64)sv[i].ports_per_device);
		sqlite3_bind_int(st, 3, sv[i].p2p);
		sqlite3_bind_text(st, 4, intra_names[sv[i].intra], -1, SQLITE_STATIC);
		sqlite3_bind_int(st, 5, sv[i].offload);
		if (sv[i].sw)
			sqlite3_bind_text(st, 6, sv[i].sw, -1, SQLITE_STATIC);
		sqlite3_bind_int64(st, 7, id);
		if (store_step_done(st) < 0)
			goto store_fail;
		st = store_stmt(s, "DELETE FROM device_fault WHERE server_id = ? AND device >= ?");
		sqlite3_bind_int64(st, 1, id);
		sqlite3_bind_int64(st, 2, (sqlite3_int64)sv[i].devices);
		store_step_done(st);
	}
	if (api_switches_prune(s, switches) < 0)
		goto store_fail;
	json_t *wiring = json_object_get(body, "wiring");
	json_t *none = NULL;
	if (!wiring)
		wiring = none = json_pack("{s:[]}", "links");
	int rc = wiring_apply(req, wiring, "wiring");
	json_decref(none);
	if (rc < 0)
		goto out;
	api_reply(req, 200, topology_json(s));
	goto out;
store_fail:
	api_error(req, OFCD_E_STORE, NULL, "cannot store the topology");
out:
	free(names);
	free(ov);
	free(sv);
}
