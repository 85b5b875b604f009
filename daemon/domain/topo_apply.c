/*
 * OCS units, servers and the whole topology: checked against what is stored,
 * then written. See topo_apply.h.
 */
#include "topo_apply.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ocs_driver.h"
#include "units.h"
#include "state/store_sql.h"
#include "topo.h"

const char *const topo_intra_names[] = { "full-mesh", "two-groups", NULL };

/* ---- OCS units ----------------------------------------------------------- */

int topo_ocs_check(const struct topo_ocs_spec *o, const char *prefix, struct ofcd_error *e)
{
	char field[160], err[256];
	const struct ocs_driver_ops *drv = ocs_driver_find(o->driver);
	if (!drv) {
		ofcd_field(field, sizeof(field), prefix, "driver");
		return ofcd_fail(e, -EINVAL, OFCD_E_INVALID_FIELD, field, NULL,
		                 "%s: unknown OCS driver \"%s\"", field, o->driver);
	}
	if (drv->check_endpoint && drv->check_endpoint(o->endpoint, err, sizeof(err)) < 0) {
		ofcd_field(field, sizeof(field), prefix, "endpoint");
		return ofcd_fail(e, -EINVAL, OFCD_E_INVALID_FIELD, field, NULL, "%s: %s", field,
		                 err);
	}
	return 0;
}

static int insert_ocs(struct store *s, const struct topo_ocs_spec *o)
{
	sqlite3_stmt *st = store_stmt(s, "INSERT INTO ocs(name, driver, ports, endpoint) "
	                                 "VALUES (?, ?, ?, ?)");
	sqlite3_bind_text(st, 1, o->name, -1, SQLITE_STATIC);
	sqlite3_bind_text(st, 2, o->driver, -1, SQLITE_STATIC);
	sqlite3_bind_int64(st, 3, o->ports);
	sqlite3_bind_text(st, 4, o->endpoint, -1, SQLITE_STATIC);
	return store_step_done(st);
}

int64_t topo_ocs_add(struct store *s, const struct topo_ocs_spec *o, struct ofcd_error *e)
{
	if (topo_ocs_id(s, o->name))
		return ofcd_fail(e, -EEXIST, OFCD_E_CONFLICT, "name", NULL,
		                 "OCS unit %s already exists", o->name);
	if (insert_ocs(s, o) < 0)
		return ofcd_fail(e, -EIO, OFCD_E_STORE, NULL, NULL, "cannot store OCS unit %s",
		                 o->name);
	return sqlite3_last_insert_rowid(store_db(s));
}

/* 409 for a PUT that names a stored object with other values. */
static int64_t put_differs(struct ofcd_error *e, const char *what, const char *name,
                           const char *member, const char *stored, const char *given,
                           const char *key, json_t *view)
{
	return ofcd_fail(e, -EEXIST, OFCD_E_CONFLICT, member, json_pack("{s:o}", key, view),
	                 "%s %s exists with %s %s, not %s: a PUT only creates or confirms; "
	                 "change it with PUT /v1/topology or delete it first",
	                 what, name, member, stored, given);
}

int64_t topo_ocs_put(struct store *s, const struct topo_ocs_spec *o, bool *created,
                     struct ofcd_error *e)
{
	int64_t id = topo_ocs_id(s, o->name);
	char a[32], b[32];
	*created = false;
	if (!id) {
		*created = true;
		return topo_ocs_add(s, o, e);
	}
	json_t *v = topo_ocs_json(s, id);
	const char *driver = json_string_value(json_object_get(v, "driver"));
	const char *endpoint = json_string_value(json_object_get(v, "endpoint"));
	json_int_t ports = json_integer_value(json_object_get(v, "ports"));
	if (!driver || !endpoint) {
		json_decref(v);
		return ofcd_fail(e, -EIO, OFCD_E_STORE, NULL, NULL, "cannot read OCS unit %s",
		                 o->name);
	}
	if (strcmp(driver, o->driver) != 0)
		return put_differs(e, "OCS unit", o->name, "driver", driver, o->driver, "ocs", v);
	if (ports != (json_int_t)o->ports) {
		snprintf(a, sizeof(a), "%lld", (long long)ports);
		snprintf(b, sizeof(b), "%u", o->ports);
		return put_differs(e, "OCS unit", o->name, "ports", a, b, "ocs", v);
	}
	if (strcmp(endpoint, o->endpoint) != 0)
		return put_differs(e, "OCS unit", o->name, "endpoint", endpoint, o->endpoint, "ocs",
		                   v);
	json_decref(v);
	return id;
}

/*
 * A unit is only forgotten once it holds none of ofcd's cross-connects:
 * otherwise they would stay on the hardware with nobody left to remove them,
 * joining servers whatever fabrics they join next.
 */
static int unit_must_drain(struct store *s, const struct domain_units *units, int64_t id,
                           const char *name, const char *field, struct ofcd_error *e)
{
	json_t *o = topo_ocs_json(s, id);
	bool in_process = o && strcmp(json_string_value(json_object_get(o, "driver")), "sim") == 0;
	json_decref(o);
	if (in_process)
		return 0; /* a sim unit's circuits live in this process and go with it */
	long held = domain_unit_held(units, id);
	if (held == 0)
		return 0;
	if (held < 0)
		return ofcd_fail(
		    e, -EBUSY, OFCD_E_IN_USE, field, NULL,
		    "OCS unit %s has not been read back, so it may still hold circuits; wait "
		    "until it is connected and in sync (DELETE ?force=true forgets it anyway)",
		    name);
	return ofcd_fail(e, -EBUSY, OFCD_E_IN_USE, field, NULL,
	                 "OCS unit %s still holds %ld cross-connects made by ofcd; wait until it "
	                 "is in sync (DELETE ?force=true forgets it anyway)",
	                 name, held);
}

int topo_ocs_remove(struct store *s, const struct domain_units *units, const char *name, bool force,
                    struct ofcd_error *e)
{
	int64_t id = topo_ocs_id(s, name);
	if (!id)
		return ofcd_fail(e, -ENOENT, OFCD_E_NOT_FOUND, "name", NULL, "no OCS unit %s",
		                 name);
	if (topo_ocs_in_use(s, id))
		return ofcd_fail(
		    e, -EBUSY, OFCD_E_IN_USE, "name", NULL,
		    "OCS unit %s is cabled to servers of a fabric; delete the fabric first", name);
	if (!force && unit_must_drain(s, units, id, name, "name", e) < 0)
		return -EBUSY;
	sqlite3_stmt *st = store_stmt(s, "DELETE FROM ocs WHERE id = ?");
	sqlite3_bind_int64(st, 1, id);
	if (store_step_done(st) < 0)
		return ofcd_fail(e, -EIO, OFCD_E_STORE, NULL, NULL, "cannot delete OCS unit %s",
		                 name);
	return 0;
}

/* ---- servers ------------------------------------------------------------- */

int topo_server_check(const struct topo_server_spec *v, const char *prefix, struct ofcd_error *e)
{
	if (v->intra == 1 && v->devices % 2) {
		char f[160];
		ofcd_field(f, sizeof(f), prefix, "devices");
		return ofcd_fail(
		    e, -EINVAL, OFCD_E_INVALID_FIELD, f, NULL,
		    "%s: a two-groups server has two equal groups, so an even device count, got "
		    "%u",
		    f, v->devices);
	}
	return 0;
}

/* A server's definition at ?first .. ?first+5: devices, ports per device, p2p, intra, offload,
 * switch. */
static void bind_definition(sqlite3_stmt *st, int first, const struct topo_server_spec *v)
{
	sqlite3_bind_int64(st, first, v->devices);
	sqlite3_bind_int64(st, first + 1, v->ports_per_device);
	sqlite3_bind_int(st, first + 2, v->p2p);
	sqlite3_bind_text(st, first + 3, topo_intra_names[v->intra], -1, SQLITE_STATIC);
	sqlite3_bind_int(st, first + 4, v->offload);
	if (v->sw)
		sqlite3_bind_text(st, first + 5, v->sw, -1, SQLITE_STATIC);
}

#define INSERT_SERVER                                                                              \
	"INSERT INTO server(name, devices, ports_per_device, p2p, intra, offload, switch) "        \
	"VALUES (?, ?, ?, ?, ?, ?, ?)"

static int insert_server(struct store *s, const struct topo_server_spec *v)
{
	sqlite3_stmt *st = store_stmt(s, INSERT_SERVER);
	sqlite3_bind_text(st, 1, v->name, -1, SQLITE_STATIC);
	bind_definition(st, 2, v);
	return store_step_done(st);
}

int64_t topo_server_add(struct store *s, const struct topo_server_spec *v, struct ofcd_error *e)
{
	if (topo_server_id(s, v->name))
		return ofcd_fail(e, -EEXIST, OFCD_E_CONFLICT, "name", NULL,
		                 "server %s already exists", v->name);
	if (v->sw && !topo_switch_exists(s, v->sw))
		return ofcd_fail(e, -ENOENT, OFCD_E_UNPROCESSABLE, "switch", NULL,
		                 "switch: no switch %s", v->sw);
	if (insert_server(s, v) < 0)
		return ofcd_fail(e, -EIO, OFCD_E_STORE, NULL, NULL, "cannot store server %s",
		                 v->name);
	return sqlite3_last_insert_rowid(store_db(s));
}

int64_t topo_server_put(struct store *s, const struct topo_server_spec *v, bool *created,
                        struct ofcd_error *e)
{
	int64_t id = topo_server_id(s, v->name);
	char a[80], b[80];
	*created = false;
	if (!id) {
		*created = true;
		return topo_server_add(s, v, e);
	}
	json_t *j = topo_server_json(s, id, false);
	const char *intra = json_string_value(json_object_get(j, "intra"));
	const char *sw = json_string_value(json_object_get(j, "switch"));
	struct {
		const char *member;
		bool same;
		long long stored, given;
	} num[] = {
		{ "devices", json_integer_value(json_object_get(j, "devices")) == v->devices,
		  json_integer_value(json_object_get(j, "devices")), v->devices },
		{ "ports_per_device",
		  json_integer_value(json_object_get(j, "ports_per_device")) == v->ports_per_device,
		  json_integer_value(json_object_get(j, "ports_per_device")), v->ports_per_device },
	};
	for (size_t i = 0; i < sizeof(num) / sizeof(num[0]); i++) {
		if (num[i].same)
			continue;
		snprintf(a, sizeof(a), "%lld", num[i].stored);
		snprintf(b, sizeof(b), "%lld", num[i].given);
		return put_differs(e, "server", v->name, num[i].member, a, b, "server", j);
	}
	bool p2p = json_is_true(json_object_get(j, "p2p"));
	bool offload = json_is_true(json_object_get(j, "offload"));
	if (p2p != v->p2p)
		return put_differs(e, "server", v->name, "p2p", p2p ? "true" : "false",
		                   v->p2p ? "true" : "false", "server", j);
	if (!intra || strcmp(intra, topo_intra_names[v->intra]) != 0)
		return put_differs(e, "server", v->name, "intra", intra ? intra : "?",
		                   topo_intra_names[v->intra], "server", j);
	if (offload != v->offload)
		return put_differs(e, "server", v->name, "offload", offload ? "true" : "false",
		                   v->offload ? "true" : "false", "server", j);
	if ((sw == NULL) != (v->sw == NULL) || (sw && strcmp(sw, v->sw) != 0))
		return put_differs(e, "server", v->name, "switch", sw ? sw : "null",
		                   v->sw ? v->sw : "null", "server", j);
	json_decref(j);
	return id;
}

int topo_server_remove(struct store *s, const char *name, struct ofcd_error *e)
{
	int64_t id = topo_server_id(s, name);
	if (!id)
		return ofcd_fail(e, -ENOENT, OFCD_E_NOT_FOUND, "name", NULL, "no server %s", name);
	if (topo_server_fabric(s, id))
		return ofcd_fail(e, -EBUSY, OFCD_E_IN_USE, "name", NULL,
		                 "server %s is in a fabric; delete the fabric first", name);
	sqlite3_stmt *st = store_stmt(s, "DELETE FROM server WHERE id = ?");
	sqlite3_bind_int64(st, 1, id);
	if (store_step_done(st) < 0)
		return ofcd_fail(e, -EIO, OFCD_E_STORE, NULL, NULL, "cannot delete server %s",
		                 name);
	return 0;
}

/* ---- the whole topology -------------------------------------------------- */

static size_t find_ocs(const struct topo_spec *t, const char *name)
{
	size_t k;
	for (k = 0; k < t->nocs && strcmp(t->ocs[k].name, name) != 0; k++)
		;
	return k;
}

/* A server of the spec by name: the spec's servers sorted, for lookups in O(log n). */
struct named {
	const char *name;
	size_t i; /* index in t->servers */
};

static int named_cmp(const void *x, const void *y)
{
	const struct named *a = x, *b = y;
	int c = strcmp(a->name, b->name);
	return c ? c : a->i < b->i ? -1 : a->i > b->i;
}

/* The spec's servers sorted by name, then index (NULL when out of memory). */
static struct named *servers_by_name(const struct topo_spec *t)
{
	struct named *v = malloc((t->nservers + 1) * sizeof(*v));
	if (!v)
		return NULL;
	for (size_t i = 0; i < t->nservers; i++)
		v[i] = (struct named){ t->servers[i].name, i };
	qsort(v, t->nservers, sizeof(*v), named_cmp);
	return v;
}

/* Index of the server of that name in the spec (its first), or t->nservers. */
static size_t find_server(const struct topo_spec *t, const struct named *by_name, const char *name)
{
	size_t lo = 0, hi = t->nservers;
	while (lo < hi) {
		size_t mid = (lo + hi) / 2;
		if (strcmp(by_name[mid].name, name) < 0)
			lo = mid + 1;
		else
			hi = mid;
	}
	return lo < t->nservers && strcmp(by_name[lo].name, name) == 0 ? by_name[lo].i
	                                                               : t->nservers;
}

static size_t find_switch(const struct topo_spec *t, const char *name)
{
	size_t k;
	for (k = 0; k < t->nswitches && strcmp(t->switches[k].name, name) != 0; k++)
		;
	return k;
}

/* Names given twice, and switches servers name that the topology does not hold. */
static int check_spec(const struct topo_spec *t, const struct named *by_name, struct ofcd_error *e)
{
	char f[96];
	for (size_t i = 0; i < t->nocs; i++) {
		for (size_t j = 0; j < i; j++)
			if (strcmp(t->ocs[j].name, t->ocs[i].name) == 0) {
				snprintf(f, sizeof(f), "ocs[%zu]", i);
				return ofcd_fail(e, -EINVAL, OFCD_E_INVALID_FIELD, f, NULL,
				                 "%s: OCS unit %s is given twice", f,
				                 t->ocs[i].name);
			}
	}
	for (size_t i = 0; i < t->nswitches; i++) {
		for (size_t j = 0; j < i; j++)
			if (strcmp(t->switches[j].name, t->switches[i].name) == 0) {
				snprintf(f, sizeof(f), "switches[%zu]", i);
				return ofcd_fail(e, -EINVAL, OFCD_E_INVALID_FIELD, f, NULL,
				                 "%s: switch %s is given twice", f,
				                 t->switches[i].name);
			}
	}
	/* The first server whose name came before: the second of a run in name order. */
	size_t twice = t->nservers;
	for (size_t k = 1; k < t->nservers; k++)
		if (strcmp(by_name[k].name, by_name[k - 1].name) == 0 && by_name[k].i < twice &&
		    (k < 2 || strcmp(by_name[k - 2].name, by_name[k].name) != 0))
			twice = by_name[k].i;
	for (size_t i = 0; i < t->nservers; i++) {
		const struct topo_server_spec *v = &t->servers[i];
		snprintf(f, sizeof(f), "servers[%zu]", i);
		if (i == twice)
			return ofcd_fail(e, -EINVAL, OFCD_E_INVALID_FIELD, f, NULL,
			                 "%s: server %s is given twice", f, v->name);
		if (v->sw && find_switch(t, v->sw) == t->nswitches) {
			char fs[112];
			snprintf(fs, sizeof(fs), "%s.switch", f);
			return ofcd_fail(e, -EINVAL, OFCD_E_UNPROCESSABLE, fs, NULL,
			                 "%s: no switch %s", fs, v->sw);
		}
	}
	return 0;
}

/* Servers in fabrics must stay, with the same devices and ports. */
static int check_fabric_servers(struct store *s, const struct topo_spec *t,
                                const struct named *by_name, struct ofcd_error *e)
{
	sqlite3_stmt *st =
	    store_stmt(s, "SELECT sv.name, sv.devices, sv.ports_per_device, f.name FROM server sv "
	                  "JOIN fabric_server fs ON fs.server_id = sv.id "
	                  "JOIN fabric f ON f.id = fs.fabric_id");
	int rc = 0;
	while (rc == 0 && sqlite3_step(st) == SQLITE_ROW) {
		const char *name = (const char *)sqlite3_column_text(st, 0);
		size_t k = find_server(t, by_name, name);
		if (k == t->nservers ||
		    t->servers[k].devices != (uint64_t)sqlite3_column_int64(st, 1) ||
		    t->servers[k].ports_per_device != (uint64_t)sqlite3_column_int64(st, 2))
			rc = ofcd_fail(
			    e, -EBUSY, OFCD_E_IN_USE, "servers", NULL,
			    "server %s is in fabric %s and would be %s; delete the fabric "
			    "first",
			    name, sqlite3_column_text(st, 3),
			    k == t->nservers ? "dropped" : "changed");
	}
	sqlite3_reset(st);
	return rc;
}

static bool same_unit(const struct topo_ocs_spec *o, const char *driver, const char *endpoint)
{
	return strcmp(o->driver, driver) == 0 && strcmp(o->endpoint, endpoint) == 0;
}

/*
 * OCS units carrying circuits must stay, with their ports and driver; units
 * dropped or re-addressed must not leave circuits behind on the hardware.
 */
static int check_units(struct store *s, const struct domain_units *units, const struct topo_spec *t,
                       struct ofcd_error *e)
{
	int rc = 0;
	sqlite3_stmt *st =
	    store_stmt(s, "SELECT o.name, o.driver, o.endpoint, max(max(c.a_ocs_port), "
	                  "max(c.b_ocs_port)) FROM circuit c JOIN ocs o ON o.id = "
	                  "c.ocs_id GROUP BY o.id");
	while (rc == 0 && sqlite3_step(st) == SQLITE_ROW) {
		const char *name = (const char *)sqlite3_column_text(st, 0);
		size_t k = find_ocs(t, name);
		if (k == t->nocs || t->ocs[k].ports < (uint64_t)sqlite3_column_int64(st, 3) ||
		    !same_unit(&t->ocs[k], (const char *)sqlite3_column_text(st, 1),
		               (const char *)sqlite3_column_text(st, 2)))
			rc =
			    ofcd_fail(e, -EBUSY, OFCD_E_IN_USE, "ocs", NULL,
			              "OCS unit %s carries fabric circuits and would be %s; delete "
			              "those fabrics first",
			              name, k == t->nocs ? "dropped" : "changed");
	}
	sqlite3_reset(st);
	if (rc < 0)
		return rc;
	st = store_stmt(s, "SELECT id, name, driver, endpoint, ports FROM ocs");
	while (rc == 0 && sqlite3_step(st) == SQLITE_ROW) {
		const char *name = (const char *)sqlite3_column_text(st, 1);
		size_t k = find_ocs(t, name);
		if (k < t->nocs &&
		    same_unit(&t->ocs[k], (const char *)sqlite3_column_text(st, 2),
		              (const char *)sqlite3_column_text(st, 3)) &&
		    t->ocs[k].ports == (uint64_t)sqlite3_column_int64(st, 4))
			continue;
		rc = unit_must_drain(s, units, sqlite3_column_int64(st, 0), name, "ocs", e);
	}
	sqlite3_reset(st);
	return rc;
}

/* Deletes the rows of table whose name the spec does not keep. */
static int delete_dropped(struct store *s, const struct topo_spec *t, const struct named *by_name,
                          bool servers)
{
	sqlite3_stmt *st =
	    store_stmt(s, servers ? "SELECT id, name FROM server" : "SELECT id, name FROM ocs");
	int rc = 0;
	while (rc == 0 && sqlite3_step(st) == SQLITE_ROW) {
		const char *name = (const char *)sqlite3_column_text(st, 1);
		if (servers ? find_server(t, by_name, name) < t->nservers
		            : find_ocs(t, name) < t->nocs)
			continue;
		sqlite3_stmt *del = store_stmt(s, servers ? "DELETE FROM server WHERE id = ?"
		                                          : "DELETE FROM ocs WHERE id = ?");
		sqlite3_bind_int64(del, 1, sqlite3_column_int64(st, 0));
		rc = store_step_done(del);
	}
	sqlite3_reset(st);
	return rc;
}

static int write_units(struct store *s, const struct topo_spec *t)
{
	for (size_t i = 0; i < t->nocs; i++) {
		const struct topo_ocs_spec *o = &t->ocs[i];
		if (!topo_ocs_id(s, o->name)) {
			if (insert_ocs(s, o) < 0)
				return -EIO;
			continue;
		}
		sqlite3_stmt *st = store_stmt(
		    s, "UPDATE ocs SET driver = ?, ports = ?, endpoint = ? WHERE name = ?");
		sqlite3_bind_text(st, 1, o->driver, -1, SQLITE_STATIC);
		sqlite3_bind_int64(st, 2, o->ports);
		sqlite3_bind_text(st, 3, o->endpoint, -1, SQLITE_STATIC);
		sqlite3_bind_text(st, 4, o->name, -1, SQLITE_STATIC);
		if (store_step_done(st) < 0)
			return -EIO;
	}
	return 0;
}

static int update_server(struct store *s, int64_t id, const struct topo_server_spec *v)
{
	sqlite3_stmt *st =
	    store_stmt(s, "UPDATE server SET devices = ?, ports_per_device = ?, p2p = ?, "
	                  "intra = ?, offload = ?, switch = ? WHERE id = ?");
	bind_definition(st, 1, v);
	sqlite3_bind_int64(st, 7, id);
	if (store_step_done(st) < 0)
		return -EIO;
	/* Faults of devices the server no longer has would haunt a later, bigger one. */
	st = store_stmt(s, "DELETE FROM device_fault WHERE server_id = ? AND device >= ?");
	sqlite3_bind_int64(st, 1, id);
	sqlite3_bind_int64(st, 2, v->devices);
	if (store_step_done(st) < 0)
		return -EIO;
	return 0;
}

/* The new servers of a topology, for store_insert_rows(): fresh[] indexes t->servers. */
struct fresh_servers {
	const struct topo_spec *t;
	const size_t *fresh;
};

static void bind_server(sqlite3_stmt *st, int first, size_t row, void *arg)
{
	const struct fresh_servers *f = arg;
	const struct topo_server_spec *v = &f->t->servers[f->fresh[row]];
	sqlite3_bind_text(st, first, v->name, -1, SQLITE_STATIC);
	bind_definition(st, first + 1, v);
}

/* Updates the servers the store has, then inserts the others in the spec's order. */
static int write_servers(struct store *s, const struct topo_spec *t)
{
	size_t *fresh = malloc((t->nservers + 1) * sizeof(*fresh)), nfresh = 0;
	if (!fresh)
		return -ENOMEM;
	int rc = 0;
	for (size_t i = 0; rc == 0 && i < t->nservers; i++) {
		const struct topo_server_spec *v = &t->servers[i];
		int64_t id = topo_server_id(s, v->name);
		if (!id)
			fresh[nfresh++] = i;
		else
			rc = update_server(s, id, v);
	}
	struct fresh_servers f = { t, fresh };
	if (rc == 0)
		rc = store_insert_rows(s, INSERT_SERVER, 7, nfresh, bind_server, &f);
	free(fresh);
	return rc;
}

int topo_apply(struct store *s, const struct domain_units *units, const struct topo_spec *t,
               struct topo_cables **rest, struct ofcd_error *e)
{
	if (rest)
		*rest = NULL;
	struct named *by_name = servers_by_name(t);
	if (!by_name)
		return ofcd_fail(e, -ENOMEM, OFCD_E_INTERNAL, NULL, NULL, "out of memory");
	int rc = check_spec(t, by_name, e);
	if (rc == 0)
		rc = check_fabric_servers(s, t, by_name, e);
	if (rc == 0)
		rc = check_units(s, units, t, e);
	/* Delete what is gone, update what stays, insert what is new. */
	if (rc == 0 &&
	    (delete_dropped(s, t, by_name, false) < 0 || delete_dropped(s, t, by_name, true) < 0 ||
	     write_units(s, t) < 0 || topo_switches_replace(s, t->switches, t->nswitches) < 0 ||
	     write_servers(s, t) < 0 || topo_switches_prune(s, t->switches, t->nswitches) < 0))
		rc = ofcd_fail(e, -EIO, OFCD_E_STORE, NULL, NULL, "cannot store the topology");
	free(by_name);
	return rc < 0 ? rc : topo_wiring_apply(s, units, &t->wiring, "wiring", rest, e);
}
