#include "topo.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fabric_layout.h"
#include "state/desired.h"
#include "state/store_sql.h"
#include "units.h"

/*
 * A unit's desired circuits (?1: its id) as rows (x, y, fabric_id), x and y
 * its two ports with x < y, ordered by (x, y). No index leads with the unit
 * (schema 009: a fabric touches every unit, and such an index cost it a page
 * per unit), so the statement walks the fabric ids in circuit's primary key,
 * one index step each, and reads each fabric's entries for the unit there.
 * It needs no fabric row: the audit sees orphans too.
 */
#define UNIT_CIRCUITS_SQL                                                                          \
	"WITH RECURSIVE f(id) AS (SELECT min(fabric_id) FROM circuit UNION ALL "                   \
	"SELECT (SELECT min(fabric_id) FROM circuit WHERE fabric_id > f.id) FROM f "               \
	"WHERE f.id IS NOT NULL) "                                                                 \
	"SELECT min(c.a_ocs_port, c.b_ocs_port) AS x, max(c.a_ocs_port, c.b_ocs_port) AS y, "      \
	"c.fabric_id FROM f CROSS JOIN circuit c ON c.fabric_id = f.id AND c.ocs_id = ?1 "         \
	"ORDER BY x, y"

static int64_t id_by_name(struct store *s, const char *sql, const char *name)
{
	sqlite3_stmt *st = store_stmt(s, sql);
	int64_t id = 0;
	if (!st)
		return 0;
	sqlite3_bind_text(st, 1, name, -1, SQLITE_STATIC);
	if (sqlite3_step(st) == SQLITE_ROW)
		id = sqlite3_column_int64(st, 0);
	sqlite3_reset(st);
	return id;
}

bool topo_is_empty(struct store *s)
{
	sqlite3_stmt *st = store_stmt(s, "SELECT (SELECT count(*) FROM ocs) + "
	                                 "(SELECT count(*) FROM server)");
	bool empty = st && sqlite3_step(st) == SQLITE_ROW && sqlite3_column_int(st, 0) == 0;
	if (st)
		sqlite3_reset(st);
	return empty;
}

int64_t topo_ocs_id(struct store *s, const char *name)
{
	return id_by_name(s, "SELECT id FROM ocs WHERE name = ?", name);
}

int64_t topo_server_id(struct store *s, const char *name)
{
	return id_by_name(s, "SELECT id FROM server WHERE name = ?", name);
}

/*
 * A fabric still being stored a part at a time (fabric.h, struct
 * fabric_build) is no one's to see until it is whole: reads pass over it.
 */
int64_t topo_fabric_id(struct store *s, const char *name)
{
	return id_by_name(s, "SELECT id FROM fabric WHERE name = ? AND NOT partial", name);
}

static int64_t int_query(struct store *s, const char *sql, int64_t arg)
{
	sqlite3_stmt *st = store_stmt(s, sql);
	int64_t v = 0;
	if (!st)
		return 0;
	sqlite3_bind_int64(st, 1, arg);
	if (sqlite3_step(st) == SQLITE_ROW)
		v = sqlite3_column_int64(st, 0);
	sqlite3_reset(st);
	return v;
}

int64_t topo_ocs_revision(struct store *s, int64_t ocs_id)
{
	return int_query(s, "SELECT revision FROM ocs WHERE id = ?", ocs_id);
}

int64_t topo_server_revision(struct store *s, int64_t server_id)
{
	return int_query(s, "SELECT revision FROM server WHERE id = ?", server_id);
}

int64_t topo_switch_revision(struct store *s, const char *name)
{
	return id_by_name(s, "SELECT revision FROM switch WHERE name = ?", name);
}

int64_t topo_server_fabric(struct store *s, int64_t server_id)
{
	return int_query(s, "SELECT fabric_id FROM fabric_server WHERE server_id = ?", server_id);
}

bool topo_ocs_in_use(struct store *s, int64_t ocs_id)
{
	return int_query(s,
	                 "SELECT EXISTS (SELECT 1 FROM cable c JOIN fabric_server fs "
	                 "ON fs.server_id = c.server_id WHERE c.ocs_id = ?)",
	                 ocs_id) != 0;
}

static json_t *ocs_row(sqlite3_stmt *st)
{
	return json_pack("{s:s, s:s, s:I, s:s}", "name", sqlite3_column_text(st, 0), "driver",
	                 sqlite3_column_text(st, 1), "ports",
	                 (json_int_t)sqlite3_column_int64(st, 2), "endpoint",
	                 sqlite3_column_text(st, 3));
}

json_t *topo_ocs_json(struct store *s, int64_t id)
{
	sqlite3_stmt *st =
	    store_stmt(s, "SELECT name, driver, ports, endpoint FROM ocs WHERE id = ?");
	json_t *o = NULL;
	if (!st)
		return NULL;
	sqlite3_bind_int64(st, 1, id);
	if (sqlite3_step(st) == SQLITE_ROW)
		o = ocs_row(st);
	sqlite3_reset(st);
	return o;
}

json_t *topo_list_end(json_t *a, int step)
{
	if (step == SQLITE_DONE)
		return a;
	json_decref(a);
	return NULL;
}

json_t *topo_ocs_list(struct store *s)
{
	sqlite3_stmt *st =
	    store_stmt(s, "SELECT name, driver, ports, endpoint FROM ocs ORDER BY name");
	json_t *a = json_array();
	int step = SQLITE_ERROR;
	while (st && (step = sqlite3_step(st)) == SQLITE_ROW)
		json_array_append_new(a, ocs_row(st));
	if (st)
		sqlite3_reset(st);
	return topo_list_end(a, step);
}

/* "2,5" (group_concat of device_fault, ascending) as [2, 5]; NULL as []. */
static json_t *failed_devices(sqlite3_stmt *st, int col)
{
	json_t *a = json_array();
	const char *p = (const char *)sqlite3_column_text(st, col);
	while (p && *p) {
		char *end;
		json_array_append_new(a, json_integer(strtoll(p, &end, 10)));
		p = *end == ',' ? end + 1 : end + strlen(end);
	}
	return a;
}

static json_t *server_row(sqlite3_stmt *st)
{
	json_t *fab = sqlite3_column_type(st, 6) == SQLITE_NULL
	                  ? json_null()
	                  : json_string((const char *)sqlite3_column_text(st, 6));
	json_t *sw = sqlite3_column_type(st, 8) == SQLITE_NULL
	                 ? json_null()
	                 : json_string((const char *)sqlite3_column_text(st, 8));
	return json_pack("{s:s, s:I, s:I, s:b, s:s, s:b, s:o, s:o, s:o}", "name",
	                 sqlite3_column_text(st, 1), "devices",
	                 (json_int_t)sqlite3_column_int64(st, 2), "ports_per_device",
	                 (json_int_t)sqlite3_column_int64(st, 3), "p2p", sqlite3_column_int(st, 4),
	                 "intra", sqlite3_column_text(st, 5), "offload", sqlite3_column_int(st, 7),
	                 "switch", sw, "fabric", fab, "failed_devices", failed_devices(st, 9));
}

static json_t *server_devices(struct store *s, int64_t id, uint32_t devices)
{
	json_t *list = json_array();
	for (uint32_t d = 0; d < devices; d++)
		json_array_append_new(list, json_pack("{s:I, s:s, s:[]}", "index", (json_int_t)d,
		                                      "state", "ok", "ports"));
	sqlite3_stmt *st = store_stmt(s, "SELECT device FROM device_fault WHERE server_id = ?");
	sqlite3_bind_int64(st, 1, id);
	while (sqlite3_step(st) == SQLITE_ROW) {
		json_t *dev = json_array_get(list, (size_t)sqlite3_column_int64(st, 0));
		if (dev)
			json_object_set_new(dev, "state", json_string("failed"));
	}
	sqlite3_reset(st);
	st = store_stmt(s, "SELECT c.device, c.port, o.name, c.ocs_port FROM cable c "
	                   "JOIN ocs o ON o.id = c.ocs_id WHERE c.server_id = ? "
	                   "ORDER BY c.device, c.port");
	sqlite3_bind_int64(st, 1, id);
	while (sqlite3_step(st) == SQLITE_ROW) {
		json_t *dev = json_array_get(list, (size_t)sqlite3_column_int64(st, 0));
		if (dev)
			json_array_append_new(json_object_get(dev, "ports"),
			                      json_pack("{s:I, s:s, s:I}", "port",
			                                (json_int_t)sqlite3_column_int64(st, 1),
			                                "ocs", sqlite3_column_text(st, 2),
			                                "ocs_port",
			                                (json_int_t)sqlite3_column_int64(st, 3)));
	}
	sqlite3_reset(st);
	return list;
}

/* One port of a server's that a unit may still join: {"device","port","ocs","ocs_port","why"}. */
static json_t *joined_port(int64_t device, int64_t port, const unsigned char *ocs,
                           uint32_t ocs_port, const char *why)
{
	return json_pack("{s:I, s:I, s:s, s:I, s:s}", "device", (json_int_t)device, "port",
	                 (json_int_t)port, "ocs", (const char *)ocs, "ocs_port",
	                 (json_int_t)ocs_port, "why", why);
}

json_t *topo_server_joined(struct store *s, const struct domain_units *units, int64_t id)
{
	if (!units || !units->port_joined)
		return NULL;
	sqlite3_stmt *st = store_stmt(s, "SELECT c.device, c.port, c.ocs_id, o.name, c.ocs_port "
	                                 "FROM cable c JOIN ocs o ON o.id = c.ocs_id WHERE "
	                                 "c.server_id = ? ORDER BY c.device, c.port");
	json_t *list = st ? json_array() : NULL;
	char why[256];
	int step = SQLITE_ERROR;
	if (st)
		sqlite3_bind_int64(st, 1, id);
	while (list && (step = sqlite3_step(st)) == SQLITE_ROW) {
		uint32_t port = (uint32_t)sqlite3_column_int64(st, 4);
		if (!domain_port_joined(units, sqlite3_column_int64(st, 2), port, why, sizeof(why)))
			continue;
		/* A port left out would read as free: a port that cannot be said fails the list. */
		json_t *p = joined_port(sqlite3_column_int64(st, 0), sqlite3_column_int64(st, 1),
		                        sqlite3_column_text(st, 3), port, why);
		if (json_array_append_new(list, p) < 0) {
			step = SQLITE_ERROR;
			break;
		}
	}
	if (st)
		sqlite3_reset(st);
	if (step != SQLITE_DONE) {
		json_decref(list);
		return NULL;
	}
	return list;
}

/* A joined port found by a unit's scan, to be sorted by server. */
struct joined_row {
	int64_t server, device, port;
	json_t *entry; /* joined_port()'s */
};

static int joined_row_cmp(const void *x, const void *y)
{
	const struct joined_row *a = x, *b = y;
	if (a->server != b->server)
		return a->server < b->server ? -1 : 1;
	if (a->device != b->device)
		return a->device < b->device ? -1 : 1;
	return a->port < b->port ? -1 : a->port > b->port;
}

/* The joined ports of unit ocs_id (named name), appended to *v. 0, -ENOMEM or -EIO. */
static int unit_joined_rows(struct store *s, const struct domain_units *units, int64_t ocs_id,
                            const unsigned char *name, struct joined_row **v, size_t *n,
                            size_t *cap)
{
	sqlite3_stmt *st = store_stmt(s, "SELECT server_id, device, port, ocs_port FROM cable "
	                                 "WHERE ocs_id = ?");
	char why[256];
	int rc = st ? 0 : -EIO, step = SQLITE_DONE;
	if (st)
		sqlite3_bind_int64(st, 1, ocs_id);
	while (rc == 0 && (step = sqlite3_step(st)) == SQLITE_ROW) {
		uint32_t port = (uint32_t)sqlite3_column_int64(st, 3);
		if (!domain_port_joined(units, ocs_id, port, why, sizeof(why)))
			continue;
		if (*n == *cap) {
			size_t c = *cap ? 2 * *cap : 16;
			struct joined_row *g = realloc(*v, c * sizeof(*g));
			if (!g) {
				rc = -ENOMEM;
				break;
			}
			*v = g;
			*cap = c;
		}
		struct joined_row *r = &(*v)[*n];
		*r = (struct joined_row){ sqlite3_column_int64(st, 0), sqlite3_column_int64(st, 1),
			                  sqlite3_column_int64(st, 2), NULL };
		r->entry = joined_port(r->device, r->port, name, port, why);
		if (!r->entry)
			rc = -EIO;
		else
			(*n)++;
	}
	if (st)
		sqlite3_reset(st);
	return rc == 0 && step != SQLITE_DONE ? -EIO : rc;
}

/* The rows, sorted, as [{"id", "joined"}]; NULL when memory runs out. */
static json_t *group_joined(struct joined_row *v, size_t n)
{
	json_t *out = json_array(), *list = NULL;
	qsort(v, n, sizeof(*v), joined_row_cmp);
	for (size_t i = 0; out && i < n; i++) {
		if (i == 0 || v[i].server != v[i - 1].server) {
			json_t *server =
			    json_pack("{s:I, s:[]}", "id", (json_int_t)v[i].server, "joined");
			list = json_object_get(server, "joined");
			if (json_array_append_new(out, server) < 0)
				list = NULL;
		}
		if (!list || json_array_append(list, v[i].entry) < 0) {
			json_decref(out);
			out = NULL;
		}
	}
	return out;
}

json_t *topo_servers_joined(struct store *s, const struct domain_units *units)
{
	if (!units || !units->port_joined)
		return NULL;
	/* Only the units that may join a port are scanned: none, usually. */
	sqlite3_stmt *st = store_stmt(s, "SELECT id, name FROM ocs ORDER BY id");
	struct joined_row *v = NULL;
	size_t n = 0, cap = 0;
	int rc = st ? 0 : -EIO, step = SQLITE_DONE;
	while (rc == 0 && (step = sqlite3_step(st)) == SQLITE_ROW) {
		int64_t ocs_id = sqlite3_column_int64(st, 0);
		if (domain_unit_may_join(units, ocs_id))
			rc = unit_joined_rows(s, units, ocs_id, sqlite3_column_text(st, 1), &v, &n,
			                      &cap);
	}
	if (st)
		sqlite3_reset(st);
	json_t *out = rc == 0 && step == SQLITE_DONE ? group_joined(v, n) : NULL;
	for (size_t i = 0; i < n; i++)
		json_decref(v[i].entry);
	free(v);
	return out;
}

json_t *topo_server_json(struct store *s, int64_t id, bool detail)
{
	static const char sql[] = "SELECT s.id, s.name, s.devices, s.ports_per_device, s.p2p, "
	                          "s.intra, f.name, s.offload, s.switch, "
	                          "(SELECT group_concat(device) FROM (SELECT device FROM "
	                          "device_fault WHERE server_id = s.id ORDER BY device)) "
	                          "FROM server s LEFT JOIN fabric_server fs ON fs.server_id = s.id "
	                          "LEFT JOIN fabric f ON f.id = fs.fabric_id AND NOT f.partial "
	                          "WHERE s.id = ?";
	sqlite3_stmt *st = store_stmt(s, sql);
	json_t *o = NULL;
	uint32_t devices = 0;
	if (!st)
		return NULL;
	sqlite3_bind_int64(st, 1, id);
	if (sqlite3_step(st) == SQLITE_ROW) {
		o = server_row(st);
		devices = (uint32_t)sqlite3_column_int64(st, 2);
	}
	sqlite3_reset(st);
	if (o && detail)
		json_object_set_new(o, "device_info", server_devices(s, id, devices));
	return o;
}

/* Server names of a fabric by position, as a JSON array. */
static json_t *fabric_servers(struct store *s, int64_t fabric_id)
{
	sqlite3_stmt *st = store_stmt(s, "SELECT sv.name FROM fabric_server fs JOIN server sv "
	                                 "ON sv.id = fs.server_id WHERE fs.fabric_id = ? "
	                                 "ORDER BY fs.position");
	json_t *a = json_array();
	sqlite3_bind_int64(st, 1, fabric_id);
	while (sqlite3_step(st) == SQLITE_ROW)
		json_array_append_new(a, json_string((const char *)sqlite3_column_text(st, 0)));
	sqlite3_reset(st);
	return a;
}

json_t *topo_fabric_failed_devices(struct store *s, int64_t id)
{
	json_t *failed = json_object();
	sqlite3_stmt *st = store_stmt(s, "SELECT sv.name, df.device FROM fabric_server fs "
	                                 "JOIN device_fault df ON df.server_id = fs.server_id "
	                                 "JOIN server sv ON sv.id = fs.server_id "
	                                 "WHERE fs.fabric_id = ? ORDER BY fs.position, df.device");
	if (!st)
		return failed;
	sqlite3_bind_int64(st, 1, id);
	while (sqlite3_step(st) == SQLITE_ROW) {
		const char *name = (const char *)sqlite3_column_text(st, 0);
		json_t *list = json_object_get(failed, name);
		if (!list) {
			list = json_array();
			json_object_set_new(failed, name, list);
		}
		json_array_append_new(list, json_integer(sqlite3_column_int64(st, 1)));
	}
	sqlite3_reset(st);
	return failed;
}

/*
 * Adds a fabric's layout to its view f (m servers); a shaped fabric's lines
 * each have their own formula.
 */
static void add_layout(json_t *f, sqlite3_stmt *st, int col, uint32_t m)
{
	struct plan_shape shape;
	const char *topology = (const char *)sqlite3_column_text(st, col);
	if (fabric_layout_load(topology, (const char *)sqlite3_column_text(st, col + 1), m,
	                       &shape) < 0)
		return;
	fabric_layout_json(f, &shape,
	                   col + 2 < sqlite3_column_count(st)
	                       ? (const char *)sqlite3_column_text(st, col + 2)
	                       : NULL);
	if (shape.topology != PLAN_TOPO_FULL_MESH)
		json_object_set_new(f, "formula", json_string("per-line"));
}

/* A fabric's pairs without a circuit, as pairs of its servers' names. */
static json_t *missing_json(struct store *s, int64_t id, const json_t *names)
{
	json_t *missing = json_array();
	sqlite3_stmt *st = store_stmt(s, "SELECT a_pos, b_pos FROM missing_pair WHERE "
	                                 "fabric_id = ? ORDER BY a_pos, b_pos");
	sqlite3_bind_int64(st, 1, id);
	while (sqlite3_step(st) == SQLITE_ROW)
		json_array_append_new(
		    missing,
		    json_pack("[O, O]", json_array_get(names, (size_t)sqlite3_column_int64(st, 0)),
		              json_array_get(names, (size_t)sqlite3_column_int64(st, 1))));
	sqlite3_reset(st);
	return missing;
}

/* A fabric's row as its view shows it, with its servers and missing pairs; NULL: none. */
static json_t *fabric_head(struct store *s, int64_t id, json_t **names)
{
	sqlite3_stmt *st =
	    store_stmt(s, "SELECT name, state, revision, formula, planes, min_devices, created, "
	                  "updated, error, topology, shape, choice, (SELECT count(*) FROM "
	                  "fabric_server fs WHERE fs.fabric_id = fabric.id) FROM fabric "
	                  "WHERE id = ?");
	json_t *f = NULL;
	if (!st)
		return NULL;
	sqlite3_bind_int64(st, 1, id);
	if (sqlite3_step(st) == SQLITE_ROW) {
		char formula[4];
		snprintf(formula, sizeof(formula), "%d", sqlite3_column_int(st, 3));
		f = json_pack("{s:s, s:s, s:I, s:s, s:I, s:I, s:s, s:s}", "name",
		              sqlite3_column_text(st, 0), "state", sqlite3_column_text(st, 1),
		              "revision", (json_int_t)sqlite3_column_int64(st, 2), "formula",
		              formula, "planes", (json_int_t)sqlite3_column_int64(st, 4),
		              "min_devices", (json_int_t)sqlite3_column_int64(st, 5), "created",
		              sqlite3_column_text(st, 6), "updated", sqlite3_column_text(st, 7));
		if (sqlite3_column_type(st, 8) != SQLITE_NULL)
			json_object_set_new(f, "error",
			                    json_string((const char *)sqlite3_column_text(st, 8)));
		add_layout(f, st, 9, (uint32_t)sqlite3_column_int64(st, 12));
	}
	sqlite3_reset(st);
	if (!f)
		return NULL;
	*names = fabric_servers(s, id);
	json_object_set_new(f, "missing", missing_json(s, id, *names));
	json_object_set_new(f, "servers", json_incref(*names));
	return f;
}

/* A stored circuit as a view lists it. */
struct view_link {
	uint32_t plane, a_pos, a_device, a_port, a_ocs_port, b_pos, b_device, b_port, b_ocs_port;
	uint32_t ocs; /* index into the units' names */
};

static int view_link_cmp(const void *x, const void *y)
{
	const struct view_link *a = x, *b = y;
	const uint32_t ka[] = { a->plane, a->a_pos, a->a_device, a->a_port };
	const uint32_t kb[] = { b->plane, b->a_pos, b->a_device, b->a_port };
	for (size_t i = 0; i < 4; i++)
		if (ka[i] != kb[i])
			return ka[i] < kb[i] ? -1 : 1;
	return 0;
}

/*
 * Writes the fabric's links onto f as JSON, by plane then a end: read in the
 * key's order and sorted here, which costs a tenth of an SQL sort.
 */
static int write_links(struct store *s, int64_t id, const json_t *names, FILE *f)
{
	json_t *units = json_object();
	char key[24];
	sqlite3_stmt *st = store_stmt(s, "SELECT c.plane, c.a_pos, c.a_device, c.a_port, "
	                                 "c.a_ocs_port, c.b_pos, c.b_device, c.b_port, "
	                                 "c.b_ocs_port, c.ocs_id FROM circuit c WHERE "
	                                 "c.fabric_id = ?");
	struct view_link *v = NULL;
	size_t n = 0, cap = 0;
	int rc = 0;
	sqlite3_bind_int64(st, 1, id);
	while (rc == 0 && sqlite3_step(st) == SQLITE_ROW) {
		if (n == cap) {
			cap = cap ? 2 * cap : 256;
			struct view_link *t = realloc(v, cap * sizeof(*v));
			if (!t) {
				rc = -ENOMEM;
				break;
			}
			v = t;
		}
		uint32_t c[10];
		for (int i = 0; i < 10; i++)
			c[i] = (uint32_t)sqlite3_column_int64(st, i);
		v[n++] = (struct view_link){ c[0], c[1], c[2], c[3], c[4],
			                     c[5], c[6], c[7], c[8], c[9] };
	}
	sqlite3_reset(st);
	if (rc == 0 && n)
		qsort(v, n, sizeof(*v), view_link_cmp);
	st = store_stmt(s, "SELECT id, name FROM ocs");
	while (rc == 0 && sqlite3_step(st) == SQLITE_ROW) {
		snprintf(key, sizeof(key), "%lld", (long long)sqlite3_column_int64(st, 0));
		json_object_set_new(units, key,
		                    json_string((const char *)sqlite3_column_text(st, 1)));
	}
	sqlite3_reset(st);
	/* Names are of [A-Za-z0-9._-] (api.md): nothing in them to escape. */
	for (size_t i = 0; rc == 0 && i < n; i++) {
		const struct view_link *l = &v[i];
		snprintf(key, sizeof(key), "%u", l->ocs);
		const char *ocs = json_string_value(json_object_get(units, key));
		const char *a = json_string_value(json_array_get(names, l->a_pos));
		const char *b = json_string_value(json_array_get(names, l->b_pos));
		if (!ocs || !a || !b) {
			rc = -EIO;
			break;
		}
		fprintf(f,
		        "%s{\"plane\":%u,\"a\":{\"server\":\"%s\",\"device\":%u,\"port\":%u,"
		        "\"ocs\":\"%s\",\"ocs_port\":%u},\"b\":{\"server\":\"%s\",\"device\":%u,"
		        "\"port\":%u,\"ocs\":\"%s\",\"ocs_port\":%u}}",
		        i ? "," : "", l->plane, a, l->a_device, l->a_port, ocs, l->a_ocs_port, b,
		        l->b_device, l->b_port, ocs, l->b_ocs_port);
	}
	free(v);
	json_decref(units);
	return rc;
}

char *topo_fabric_json_text(struct store *s, int64_t id, size_t *len)
{
	json_t *names = NULL, *head = fabric_head(s, id, &names);
	char *h = head ? json_dumps(head, JSON_COMPACT) : NULL, *text = NULL;
	size_t hlen = h ? strlen(h) : 0;
	FILE *f = hlen > 2 ? open_memstream(&text, len) : NULL;
	int rc = f ? 0 : -ENOMEM;
	if (f) {
		/* head is an object: its closing brace goes after the links. */
		fprintf(f, "%.*s,\"links\":[", (int)(hlen - 1), h);
		rc = write_links(s, id, names, f);
		fputs("]}\n", f);
		if (fclose(f) != 0)
			rc = -ENOMEM;
	}
	free(h);
	json_decref(head);
	json_decref(names);
	if (rc < 0) {
		free(text);
		return NULL;
	}
	return text;
}

json_t *topo_fabric_json(struct store *s, int64_t id)
{
	size_t len;
	char *text = topo_fabric_json_text(s, id, &len);
	json_t *f = text ? json_loadb(text, len, 0, NULL) : NULL;
	free(text);
	return f;
}

json_t *topo_fabric_missing_json(struct store *s, int64_t id)
{
	json_t *names = fabric_servers(s, id);
	json_t *missing = missing_json(s, id, names);
	json_decref(names);
	return missing;
}

int topo_fabric_state(struct store *s, const char *name, char *buf, size_t len)
{
	sqlite3_stmt *st = store_stmt(s, "SELECT state FROM fabric WHERE name = ? AND NOT partial");
	int rc = -ENOENT;
	sqlite3_bind_text(st, 1, name, -1, SQLITE_STATIC);
	if (sqlite3_step(st) == SQLITE_ROW) {
		snprintf(buf, len, "%s", (const char *)sqlite3_column_text(st, 0));
		rc = 0;
	}
	sqlite3_reset(st);
	return rc;
}

/* The columns of a fabric's summary, after its id; its circuits are counted in memory. */
#define SUMMARY_COLUMNS                                                                            \
	"f.name, f.state, f.revision, f.min_devices, f.formula, f.planes, f.created, f.updated, "  \
	"f.error, (SELECT count(*) FROM fabric_server fs WHERE fs.fabric_id = f.id), "             \
	"(SELECT count(*) FROM missing_pair m WHERE m.fabric_id = f.id), f.topology, f.shape "

/* ncircuits < 0: counted from the in-memory desired state d. */
static json_t *summary_row(const struct desired *d, sqlite3_stmt *st, int64_t ncircuits)
{
	char formula[4];
	snprintf(formula, sizeof(formula), "%d", sqlite3_column_int(st, 5));
	if (ncircuits < 0)
		ncircuits = (int64_t)desired_fabric_circuits(d, sqlite3_column_int64(st, 0));
	json_t *f =
	    json_pack("{s:s, s:s, s:I, s:I, s:s, s:I, s:s, s:s, s:I, s:I, s:I}", "name",
	              sqlite3_column_text(st, 1), "state", sqlite3_column_text(st, 2), "revision",
	              (json_int_t)sqlite3_column_int64(st, 3), "min_devices",
	              (json_int_t)sqlite3_column_int64(st, 4), "formula", formula, "planes",
	              (json_int_t)sqlite3_column_int64(st, 6), "created",
	              sqlite3_column_text(st, 7), "updated", sqlite3_column_text(st, 8),
	              "server_count", (json_int_t)sqlite3_column_int64(st, 10), "circuits",
	              (json_int_t)ncircuits, "missing", (json_int_t)sqlite3_column_int64(st, 11));
	if (f && sqlite3_column_type(st, 9) != SQLITE_NULL)
		json_object_set_new(f, "error",
		                    json_string((const char *)sqlite3_column_text(st, 9)));
	if (f)
		add_layout(f, st, 12, (uint32_t)sqlite3_column_int64(st, 10));
	return f;
}

json_t *topo_fabric_summary_json(struct store *s, const struct desired *d, int64_t id)
{
	sqlite3_stmt *st =
	    store_stmt(s, "SELECT f.id, " SUMMARY_COLUMNS "FROM fabric f WHERE f.id = ?");
	json_t *f = NULL;
	if (!st)
		return NULL;
	sqlite3_bind_int64(st, 1, id);
	/*
	 * Counted in the store: a reply built inside the transaction that made
	 * the fabric sees its rows before the in-memory state does (at commit).
	 */
	sqlite3_stmt *count = store_stmt(s, "SELECT count(*) FROM circuit WHERE fabric_id = ?");
	int64_t n = 0;
	if (count) {
		sqlite3_bind_int64(count, 1, id);
		if (sqlite3_step(count) == SQLITE_ROW)
			n = sqlite3_column_int64(count, 0);
		sqlite3_reset(count);
	}
	if (sqlite3_step(st) == SQLITE_ROW)
		f = summary_row(d, st, n);
	sqlite3_reset(st);
	return f;
}

json_t *topo_fabric_list(struct store *s, const struct desired *d, bool summary)
{
	if (summary) {
		sqlite3_stmt *st =
		    store_stmt(s, "SELECT f.id, " SUMMARY_COLUMNS
		                  "FROM fabric f WHERE NOT f.partial ORDER BY f.name");
		json_t *a = json_array();
		while (st && sqlite3_step(st) == SQLITE_ROW)
			json_array_append_new(a, summary_row(d, st, -1));
		if (st)
			sqlite3_reset(st);
		return a;
	}
	sqlite3_stmt *st =
	    store_stmt(s, "SELECT f.id, f.name, f.state, f.revision, f.min_devices, "
	                  "(SELECT count(*) FROM missing_pair m WHERE m.fabric_id = f.id) "
	                  "FROM fabric f WHERE NOT f.partial ORDER BY f.name");
	json_t *a = json_array();
	while (st && sqlite3_step(st) == SQLITE_ROW) {
		int64_t id = sqlite3_column_int64(st, 0);
		json_t *f = json_pack(
		    "{s:s, s:s, s:I, s:I, s:I, s:I}", "name", sqlite3_column_text(st, 1), "state",
		    sqlite3_column_text(st, 2), "revision", (json_int_t)sqlite3_column_int64(st, 3),
		    "min_devices", (json_int_t)sqlite3_column_int64(st, 4), "circuits",
		    (json_int_t)desired_fabric_circuits(d, id), "missing",
		    (json_int_t)sqlite3_column_int64(st, 5));
		json_object_set_new(f, "servers", fabric_servers(s, id));
		json_array_append_new(a, f);
	}
	if (st)
		sqlite3_reset(st);
	return a;
}

int topo_fabric_state_counts(struct store *s, uint64_t counts[PLAN_STATE__COUNT])
{
	sqlite3_stmt *st =
	    store_stmt(s, "SELECT state, count(*) FROM fabric WHERE NOT partial GROUP BY state");
	int step;
	memset(counts, 0, PLAN_STATE__COUNT * sizeof(*counts));
	if (!st)
		return -EIO;
	while ((step = sqlite3_step(st)) == SQLITE_ROW) {
		enum plan_state state;
		if (plan_state_parse((const char *)sqlite3_column_text(st, 0), &state) == 0)
			counts[state] = (uint64_t)sqlite3_column_int64(st, 1);
	}
	sqlite3_reset(st);
	return step == SQLITE_DONE ? 0 : -EIO;
}

json_t *topo_desired_json(struct store *s, int64_t ocs_id)
{
	sqlite3_stmt *st = store_stmt(s, UNIT_CIRCUITS_SQL);
	json_t *a = json_array();
	sqlite3_bind_int64(st, 1, ocs_id);
	while (sqlite3_step(st) == SQLITE_ROW)
		json_array_append_new(a,
		                      json_pack("[I, I]", (json_int_t)sqlite3_column_int64(st, 0),
		                                (json_int_t)sqlite3_column_int64(st, 1)));
	sqlite3_reset(st);
	return a;
}

void topo_input_free(struct topo_input *in)
{
	free(in->server_ids);
	free(in->servers);
	free(in->ports);
	free(in->ocs_ids);
	memset(in, 0, sizeof(*in));
}

/* Dense index of an OCS row id, adding it when new. */
static int ocs_index(struct topo_input *in, int64_t ocs_id)
{
	for (uint32_t i = 0; i < in->nocs; i++)
		if (in->ocs_ids[i] == ocs_id)
			return (int)i;
	if (in->nocs == in->ocs_cap) {
		uint32_t ncap = in->ocs_cap ? in->ocs_cap * 2 : 8;
		int64_t *n = realloc(in->ocs_ids, ncap * sizeof(*n));
		if (!n)
			return -ENOMEM;
		in->ocs_ids = n;
		in->ocs_cap = ncap;
	}
	in->ocs_ids[in->nocs] = ocs_id;
	return (int)in->nocs++;
}

int topo_input_begin(struct store *s, const int64_t *server_ids, uint32_t m, struct topo_input *in)
{
	size_t nports = 0;

	memset(in, 0, sizeof(*in));
	in->m = m;
	in->server_ids = calloc(m ? m : 1, sizeof(*in->server_ids));
	in->servers = calloc(m ? m : 1, sizeof(*in->servers));
	if (!in->server_ids || !in->servers) {
		topo_input_free(in);
		return -ENOMEM;
	}
	memcpy(in->server_ids, server_ids, m * sizeof(*server_ids));

	sqlite3_stmt *st =
	    store_stmt(s, "SELECT devices, ports_per_device FROM server WHERE id = ?");
	for (uint32_t i = 0; i < m; i++) {
		sqlite3_bind_int64(st, 1, server_ids[i]);
		if (sqlite3_step(st) != SQLITE_ROW) {
			sqlite3_reset(st);
			topo_input_free(in);
			return -ENOENT;
		}
		in->servers[i].devices = (uint32_t)sqlite3_column_int64(st, 0);
		in->servers[i].ports_per_device = (uint32_t)sqlite3_column_int64(st, 1);
		sqlite3_reset(st);
		nports += (size_t)in->servers[i].devices * in->servers[i].ports_per_device;
	}
	in->ports = calloc(nports ? nports : 1, sizeof(*in->ports));
	if (!in->ports) {
		topo_input_free(in);
		return -ENOMEM;
	}
	nports = 0;
	for (uint32_t i = 0; i < m; i++) {
		struct plan_server *sv = &in->servers[i];
		sv->ports = in->ports + nports;
		nports += (size_t)sv->devices * sv->ports_per_device;
	}
	return 0;
}

int topo_input_more(struct store *s, struct topo_input *in, uint32_t from, uint32_t to)
{
	for (uint32_t i = from; i < to && i < in->m; i++) {
		struct plan_server *sv = &in->servers[i];
		/* The planner's view is read-only; this is where it points. */
		struct plan_port *p = in->ports + (sv->ports - in->ports);
		for (size_t k = 0; k < (size_t)sv->devices * sv->ports_per_device; k++) {
			p[k].ocs = -1;
			p[k].healthy = true;
		}
		sqlite3_stmt *st = store_stmt(
		    s, "SELECT device, port, ocs_id, ocs_port FROM cable WHERE server_id = ?");
		sqlite3_bind_int64(st, 1, in->server_ids[i]);
		while (sqlite3_step(st) == SQLITE_ROW) {
			uint32_t dev = (uint32_t)sqlite3_column_int64(st, 0);
			uint32_t port = (uint32_t)sqlite3_column_int64(st, 1);
			if (dev >= sv->devices || port >= sv->ports_per_device)
				continue;
			int idx = ocs_index(in, sqlite3_column_int64(st, 2));
			if (idx < 0) {
				sqlite3_reset(st);
				return idx;
			}
			p[dev * sv->ports_per_device + port].ocs = idx;
			p[dev * sv->ports_per_device + port].ocs_port =
			    (uint32_t)sqlite3_column_int64(st, 3);
		}
		sqlite3_reset(st);
		st = store_stmt(s, "SELECT device FROM device_fault WHERE server_id = ?");
		sqlite3_bind_int64(st, 1, in->server_ids[i]);
		while (sqlite3_step(st) == SQLITE_ROW) {
			uint32_t dev = (uint32_t)sqlite3_column_int64(st, 0);
			for (uint32_t q = 0; dev < sv->devices && q < sv->ports_per_device; q++)
				p[dev * sv->ports_per_device + q].healthy = false;
		}
		sqlite3_reset(st);
	}
	return 0;
}

int topo_input_load(struct store *s, const int64_t *server_ids, uint32_t m, struct topo_input *in)
{
	int rc = topo_input_begin(s, server_ids, m, in);
	if (rc == 0 && (rc = topo_input_more(s, in, 0, m)) < 0)
		topo_input_free(in);
	return rc;
}

int topo_input_load_fabric(struct store *s, int64_t fabric_id, struct topo_input *in)
{
	int64_t *ids = NULL;
	size_t n = 0, cap = 0;
	sqlite3_stmt *st = store_stmt(s, "SELECT server_id FROM fabric_server WHERE fabric_id = ? "
	                                 "ORDER BY position");
	sqlite3_bind_int64(st, 1, fabric_id);
	while (sqlite3_step(st) == SQLITE_ROW) {
		if (n == cap) {
			cap = cap ? cap * 2 : 16;
			int64_t *t = realloc(ids, cap * sizeof(*ids));
			if (!t) {
				sqlite3_reset(st);
				free(ids);
				return -ENOMEM;
			}
			ids = t;
		}
		ids[n++] = sqlite3_column_int64(st, 0);
	}
	sqlite3_reset(st);
	int rc = topo_input_load(s, ids, (uint32_t)n, in);
	free(ids);
	return rc;
}

/* The order a plan lists its circuits in: by plane, then the a end. */
static int plane_order(const void *x, const void *y)
{
	const struct plan_circuit *a = x, *b = y;
	const uint32_t ka[] = { a->plane, a->a.server, a->a.device, a->a.port };
	const uint32_t kb[] = { b->plane, b->a.server, b->a.device, b->a.port };
	for (size_t i = 0; i < 4; i++)
		if (ka[i] != kb[i])
			return ka[i] < kb[i] ? -1 : 1;
	return 0;
}

int topo_plan_load(struct store *s, int64_t fabric_id, const struct topo_input *in,
                   struct plan_fabric *plan)
{
	memset(plan, 0, sizeof(*plan));
	sqlite3_stmt *st =
	    store_stmt(s, "SELECT formula, planes, min_devices FROM fabric WHERE id = ?");
	sqlite3_bind_int64(st, 1, fabric_id);
	if (sqlite3_step(st) != SQLITE_ROW) {
		sqlite3_reset(st);
		return -ENOENT;
	}
	plan->servers = in->m;
	plan->formula = sqlite3_column_int(st, 0);
	plan->planes = (uint32_t)sqlite3_column_int64(st, 1);
	plan->min_devices = (uint32_t)sqlite3_column_int64(st, 2);
	sqlite3_reset(st);

	size_t cap = 0;
	int rc = 0;
	int32_t ocs = -1;
	/* In the key's order (by unit), sorted below: a sort in SQL costs ten times more. */
	st = store_stmt(s, "SELECT plane, a_pos, a_device, a_port, a_ocs_port, b_pos, b_device, "
	                   "b_port, b_ocs_port, ocs_id FROM circuit WHERE fabric_id = ?");
	sqlite3_bind_int64(st, 1, fabric_id);
	int step;
	while ((step = sqlite3_step(st)) == SQLITE_ROW) {
		int64_t ocs_id = sqlite3_column_int64(st, 9);
		if (ocs < 0 || in->ocs_ids[ocs] != ocs_id) {
			ocs = -1;
			for (uint32_t i = 0; i < in->nocs && ocs < 0; i++)
				if (in->ocs_ids[i] == ocs_id)
					ocs = (int32_t)i;
		}
		if (ocs < 0) {
			rc = -ENOENT;
			break;
		}
		if (plan->ncircuits == cap) {
			cap = cap ? cap * 2 : 64;
			struct plan_circuit *c = realloc(plan->circuits, cap * sizeof(*c));
			if (!c) {
				rc = -ENOMEM;
				break;
			}
			plan->circuits = c;
		}
		struct plan_circuit *c = &plan->circuits[plan->ncircuits++];
		c->plane = (uint32_t)sqlite3_column_int64(st, 0);
		c->a = (struct plan_end){ (uint32_t)sqlite3_column_int64(st, 1),
			                  (uint32_t)sqlite3_column_int64(st, 2),
			                  (uint32_t)sqlite3_column_int64(st, 3), ocs,
			                  (uint32_t)sqlite3_column_int64(st, 4) };
		c->b = (struct plan_end){ (uint32_t)sqlite3_column_int64(st, 5),
			                  (uint32_t)sqlite3_column_int64(st, 6),
			                  (uint32_t)sqlite3_column_int64(st, 7), ocs,
			                  (uint32_t)sqlite3_column_int64(st, 8) };
	}
	sqlite3_reset(st);
	/* A plan read short would have its unread circuits kept by a re-plan's diff. */
	if (rc == 0 && step != SQLITE_DONE)
		rc = -EIO;
	if (rc == 0 && plan->ncircuits)
		qsort(plan->circuits, plan->ncircuits, sizeof(*plan->circuits), plane_order);
	cap = 0;
	st = store_stmt(s, "SELECT a_pos, b_pos FROM missing_pair WHERE fabric_id = ? "
	                   "ORDER BY a_pos, b_pos");
	sqlite3_bind_int64(st, 1, fabric_id);
	while (rc == 0 && sqlite3_step(st) == SQLITE_ROW) {
		if (plan->nmissing == cap) {
			cap = cap ? cap * 2 : 16;
			struct plan_pair *p = realloc(plan->missing, cap * sizeof(*p));
			if (!p) {
				rc = -ENOMEM;
				break;
			}
			plan->missing = p;
		}
		plan->missing[plan->nmissing++] =
		    (struct plan_pair){ (uint32_t)sqlite3_column_int64(st, 0),
			                (uint32_t)sqlite3_column_int64(st, 1) };
	}
	sqlite3_reset(st);
	if (rc < 0)
		plan_fabric_free(plan);
	return rc;
}

/* The circuits plan->circuits[from..] of a fabric, for store_insert_rows(). */
struct circuit_rows {
	int64_t fabric_id;
	const struct topo_input *in;
	const struct plan_circuit *c;
};

static void bind_circuit(sqlite3_stmt *st, int first, size_t row, void *arg)
{
	const struct circuit_rows *a = arg;
	const struct plan_circuit *c = &a->c[row];
	const int64_t v[] = { a->fabric_id,  c->plane,     c->a.server,
		              c->a.device,   c->a.port,    c->b.server,
		              c->b.device,   c->b.port,    a->in->ocs_ids[c->a.ocs],
		              c->a.ocs_port, c->b.ocs_port };
	for (int i = 0; i < (int)(sizeof(v) / sizeof(v[0])); i++)
		sqlite3_bind_int64(st, first + i, v[i]);
}

int topo_circuits_add(struct store *s, int64_t fabric_id, const struct topo_input *in,
                      const struct plan_fabric *plan, size_t from, size_t to)
{
	if (from >= to)
		return 0; /* a fabric of one server has no circuits, nor an array of them */
	for (size_t i = from; i < to; i++)
		if (plan->circuits[i].a.ocs < 0 || (uint32_t)plan->circuits[i].a.ocs >= in->nocs)
			return -EINVAL;
	struct circuit_rows rows = { fabric_id, in, plan->circuits + from };
	return store_insert_rows(s,
	                         "INSERT INTO circuit(fabric_id, plane, a_pos, a_device, a_port, "
	                         "b_pos, b_device, b_port, ocs_id, a_ocs_port, b_ocs_port) "
	                         "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
	                         11, to - from, bind_circuit, &rows);
}

/* Orders circuits by every column they are stored with. */
static int circuit_cmp(const void *x, const void *y)
{
	const struct plan_circuit *a = x, *b = y;
	const uint32_t ka[] = { (uint32_t)a->a.ocs, a->a.ocs_port, a->b.ocs_port, a->plane,
		                a->a.server,        a->a.device,   a->a.port,     a->b.server,
		                a->b.device,        a->b.port };
	const uint32_t kb[] = { (uint32_t)b->a.ocs, b->a.ocs_port, b->b.ocs_port, b->plane,
		                b->a.server,        b->a.device,   b->a.port,     b->b.server,
		                b->b.device,        b->b.port };
	for (size_t i = 0; i < sizeof(ka) / sizeof(ka[0]); i++)
		if (ka[i] != kb[i])
			return ka[i] < kb[i] ? -1 : 1;
	return 0;
}

static struct plan_circuit *sorted_copy(const struct plan_fabric *p)
{
	struct plan_circuit *v = malloc((p->ncircuits ? p->ncircuits : 1) * sizeof(*v));
	if (v && p->ncircuits) {
		memcpy(v, p->circuits, p->ncircuits * sizeof(*v));
		qsort(v, p->ncircuits, sizeof(*v), circuit_cmp);
	}
	return v;
}

/*
 * Replaces prev's stored circuits by plan's, writing only those that differ:
 * a re-plan around one device moves a few circuits of a fabric of thousands.
 */
static int circuits_replace(struct store *s, int64_t fabric_id, const struct topo_input *in,
                            const struct plan_fabric *prev, const struct plan_fabric *plan)
{
	struct plan_circuit *old = sorted_copy(prev), *now = sorted_copy(plan);
	struct plan_circuit *added =
	    malloc((plan->ncircuits ? plan->ncircuits : 1) * sizeof(*added));
	size_t i = 0, j = 0, n = 0;
	int rc = old && now && added ? 0 : -ENOMEM;
	sqlite3_stmt *del = store_stmt(s, "DELETE FROM circuit WHERE fabric_id = ? AND ocs_id = ? "
	                                  "AND a_ocs_port = ? AND b_ocs_port = ?");
	while (rc == 0 && (i < prev->ncircuits || j < plan->ncircuits)) {
		int c = i == prev->ncircuits   ? 1
		        : j == plan->ncircuits ? -1
		                               : circuit_cmp(&old[i], &now[j]);
		if (c == 0) {
			i++, j++;
		} else if (c > 0) {
			added[n++] = now[j++];
		} else if (old[i].a.ocs < 0 || (uint32_t)old[i].a.ocs >= in->nocs) {
			rc = -EINVAL;
		} else {
			sqlite3_bind_int64(del, 1, fabric_id);
			sqlite3_bind_int64(del, 2, in->ocs_ids[old[i].a.ocs]);
			sqlite3_bind_int64(del, 3, old[i].a.ocs_port);
			sqlite3_bind_int64(del, 4, old[i].b.ocs_port);
			rc = store_step_done(del) < 0 ? -EIO : 0;
			i++;
		}
	}
	struct plan_fabric more = { .circuits = added, .ncircuits = n };
	if (rc == 0)
		rc = topo_circuits_add(s, fabric_id, in, &more, 0, n);
	free(old);
	free(now);
	free(added);
	return rc;
}

int topo_plan_save(struct store *s, int64_t fabric_id, const struct topo_input *in,
                   const struct plan_fabric *prev, const struct plan_fabric *plan,
                   const char *base_state, bool bump)
{
	sqlite3_stmt *st;
	int rc;
	if (prev) {
		rc = circuits_replace(s, fabric_id, in, prev, plan);
	} else {
		st = store_stmt(s, "DELETE FROM circuit WHERE fabric_id = ?");
		sqlite3_bind_int64(st, 1, fabric_id);
		rc = store_step_done(st) < 0 ? -EIO : 0;
		if (rc == 0)
			rc = topo_circuits_add(s, fabric_id, in, plan, 0, plan->ncircuits);
	}
	if (rc < 0)
		return rc;
	st = store_stmt(s, "DELETE FROM missing_pair WHERE fabric_id = ?");
	sqlite3_bind_int64(st, 1, fabric_id);
	if (store_step_done(st) < 0)
		return -EIO;
	st = store_stmt(s, "INSERT INTO missing_pair(fabric_id, a_pos, b_pos) VALUES (?, ?, ?)");
	for (size_t i = 0; i < plan->nmissing; i++) {
		sqlite3_bind_int64(st, 1, fabric_id);
		sqlite3_bind_int64(st, 2, plan->missing[i].a);
		sqlite3_bind_int64(st, 3, plan->missing[i].b);
		if (store_step_done(st) < 0)
			return -EIO;
	}
	st = store_stmt(s, "UPDATE fabric SET state = ?, error = NULL, formula = ?, planes = ?, "
	                   "min_devices = ?, revision = revision + ?, "
	                   "updated = strftime('%Y-%m-%dT%H:%M:%fZ', 'now') WHERE id = ?");
	sqlite3_bind_text(st, 1, base_state, -1, SQLITE_STATIC);
	sqlite3_bind_int(st, 2, plan->formula);
	sqlite3_bind_int64(st, 3, plan->planes);
	sqlite3_bind_int64(st, 4, plan->min_devices);
	sqlite3_bind_int(st, 5, bump ? 1 : 0);
	sqlite3_bind_int64(st, 6, fabric_id);
	return store_step_done(st);
}

int64_t topo_fabric_size(struct store *s, int64_t fabric_id)
{
	return int_query(s, "SELECT count(*) FROM fabric_server WHERE fabric_id = ?", fabric_id);
}

int64_t topo_fabric_revision(struct store *s, int64_t fabric_id)
{
	return int_query(s, "SELECT revision FROM fabric WHERE id = ?", fabric_id);
}

int topo_fabric_members(struct store *s, int64_t fabric_id, struct topo_member **out, uint32_t *m)
{
	sqlite3_stmt *st = store_stmt(s, "SELECT fs.position, sv.name, sv.devices, sv.p2p, "
	                                 "sv.intra, sv.offload, sv.switch, sw.aggregating, "
	                                 "sw.offload, sw.buffer, sw.window "
	                                 "FROM fabric_server fs JOIN server sv "
	                                 "ON sv.id = fs.server_id LEFT JOIN switch sw "
	                                 "ON sw.name = sv.switch WHERE fs.fabric_id = ? "
	                                 "ORDER BY fs.position");
	struct topo_member *v = NULL;
	size_t n = 0, cap = 0;
	int rc = 0, step;

	*out = NULL;
	*m = 0;
	if (!st)
		return -EIO;
	sqlite3_bind_int64(st, 1, fabric_id);
	while ((step = sqlite3_step(st)) == SQLITE_ROW) {
		if (n == cap) {
			cap = cap ? cap * 2 : 16;
			struct topo_member *t = realloc(v, cap * sizeof(*t));
			if (!t) {
				rc = -ENOMEM;
				break;
			}
			v = t;
		}
		struct topo_member *t = &v[n++];
		t->position = (uint32_t)sqlite3_column_int64(st, 0);
		snprintf(t->name, sizeof(t->name), "%s", (const char *)sqlite3_column_text(st, 1));
		t->devices = (uint32_t)sqlite3_column_int64(st, 2);
		t->p2p = sqlite3_column_int(st, 3) != 0;
		snprintf(t->intra, sizeof(t->intra), "%s",
		         (const char *)sqlite3_column_text(st, 4));
		t->offload = sqlite3_column_int(st, 5) != 0;
		/* Without a switch the LEFT JOIN leaves its columns NULL, read as 0. */
		const char *sw = (const char *)sqlite3_column_text(st, 6);
		snprintf(t->switch_name, sizeof(t->switch_name), "%s", sw ? sw : "");
		t->sw_aggregating = sqlite3_column_int(st, 7) != 0;
		t->sw_offload = sqlite3_column_int(st, 8) != 0;
		t->sw_buffer = (uint32_t)sqlite3_column_int64(st, 9);
		t->sw_window = (uint32_t)sqlite3_column_int64(st, 10);
	}
	if (rc == 0 && step != SQLITE_ROW && step != SQLITE_DONE)
		rc = -EIO;
	sqlite3_reset(st);
	if (rc < 0) {
		free(v);
		return rc;
	}
	*out = v;
	*m = (uint32_t)n;
	return 0;
}

/* An unordered server pair as one sortable number: lower position first. */
static uint64_t pair_key(uint64_t x, uint64_t y)
{
	return x < y ? x << 32 | y : y << 32 | x;
}

struct pair_index {
	uint64_t key;
	size_t i; /* index into the caller's pairs */
};

static int pair_index_cmp(const void *a, const void *b)
{
	uint64_t x = ((const struct pair_index *)a)->key;
	uint64_t y = ((const struct pair_index *)b)->key;
	return (x > y) - (x < y);
}

static void circuit_fill(struct topo_circuit *c, sqlite3_stmt *st, uint32_t a_pos)
{
	/* Columns 1-3 are the a end, 5-7 the b end; src is whichever sits on c->src. */
	int s = c->src == a_pos ? 1 : 5, d = c->src == a_pos ? 5 : 1;

	c->found = true;
	c->src_device = (uint32_t)sqlite3_column_int64(st, s);
	c->src_port = (uint32_t)sqlite3_column_int64(st, s + 1);
	c->src_ocs_port = (uint32_t)sqlite3_column_int64(st, s + 2);
	c->dst_device = (uint32_t)sqlite3_column_int64(st, d);
	c->dst_port = (uint32_t)sqlite3_column_int64(st, d + 1);
	c->dst_ocs_port = (uint32_t)sqlite3_column_int64(st, d + 2);
	c->ocs_id = sqlite3_column_int64(st, 8);
}

int topo_fabric_circuits(struct store *s, int64_t fabric_id, struct topo_circuit *pairs, size_t n)
{
	struct pair_index *idx = malloc((n ? n : 1) * sizeof(*idx));
	int rc = 0, step;

	if (!idx)
		return -ENOMEM;
	for (size_t i = 0; i < n; i++) {
		pairs[i].found = false;
		idx[i] = (struct pair_index){ pair_key(pairs[i].src, pairs[i].dst), i };
	}
	/*
	 * The circuit table is indexed by fabric only, so one scan of the
	 * fabric's circuits matched against the sorted pairs beats a scan per
	 * pair.
	 */
	qsort(idx, n, sizeof(*idx), pair_index_cmp);
	/* OCS names are read for the matches only: joining them to every row doubles the scan. */
	sqlite3_stmt *st = store_stmt(s, "SELECT a_pos, a_device, a_port, a_ocs_port, b_pos, "
	                                 "b_device, b_port, b_ocs_port, ocs_id FROM circuit "
	                                 "WHERE fabric_id = ?");
	if (!st) {
		free(idx);
		return -EIO;
	}
	sqlite3_bind_int64(st, 1, fabric_id);
	while ((step = sqlite3_step(st)) == SQLITE_ROW) {
		uint32_t a_pos = (uint32_t)sqlite3_column_int64(st, 0);
		uint64_t key = pair_key(a_pos, (uint32_t)sqlite3_column_int64(st, 4));
		size_t lo = 0, hi = n;
		while (lo < hi) {
			size_t mid = lo + (hi - lo) / 2;
			if (idx[mid].key < key)
				lo = mid + 1;
			else
				hi = mid;
		}
		for (; lo < n && idx[lo].key == key; lo++)
			circuit_fill(&pairs[idx[lo].i], st, a_pos);
	}
	if (step != SQLITE_DONE)
		rc = -EIO;
	sqlite3_reset(st);
	free(idx);
	/*
	 * The units' names, each read once: a statement per pair took and gave
	 * back SQLite's file lock 4,095 times for a 4,096-stage pipeline. A
	 * fabric's circuits are on a few units, so a list searched in order.
	 */
	st = store_stmt(s, "SELECT name FROM ocs WHERE id = ?");
	struct topo_circuit *seen = NULL; /* one pair per unit, holding its name */
	size_t nseen = 0;
	for (size_t i = 0; rc == 0 && i < n; i++) {
		if (!pairs[i].found)
			continue;
		size_t k = 0;
		while (k < nseen && seen[k].ocs_id != pairs[i].ocs_id)
			k++;
		if (k == nseen) {
			struct topo_circuit *more =
			    st ? realloc(seen, (k + 1) * sizeof(*seen)) : NULL;
			if (!more) {
				rc = st ? -ENOMEM : -EIO;
				break;
			}
			seen = more;
			seen[k].ocs_id = pairs[i].ocs_id;
			seen[k].ocs[0] = '\0';
			sqlite3_bind_int64(st, 1, pairs[i].ocs_id);
			if (sqlite3_step(st) == SQLITE_ROW)
				snprintf(seen[k].ocs, sizeof(seen[k].ocs), "%s",
				         (const char *)sqlite3_column_text(st, 0));
			else
				rc = -EIO;
			sqlite3_reset(st);
			nseen++;
		}
		memcpy(pairs[i].ocs, seen[k].ocs, sizeof(pairs[i].ocs));
	}
	free(seen);
	return rc;
}

int topo_units_each(struct store *s, int (*fn)(void *arg, const struct topo_unit_row *u), void *arg)
{
	sqlite3_stmt *st = store_stmt(s, "SELECT id, name, driver, endpoint, ports FROM ocs");
	if (!st)
		return -EIO;
	int step, rc = 0;
	while (rc == 0 && (step = sqlite3_step(st)) == SQLITE_ROW) {
		struct topo_unit_row u = { .id = sqlite3_column_int64(st, 0),
			                   .ports = (uint32_t)sqlite3_column_int64(st, 4) };
		snprintf(u.name, sizeof(u.name), "%s", sqlite3_column_text(st, 1));
		snprintf(u.driver, sizeof(u.driver), "%s", sqlite3_column_text(st, 2));
		snprintf(u.endpoint, sizeof(u.endpoint), "%s", sqlite3_column_text(st, 3));
		rc = fn(arg, &u);
	}
	sqlite3_reset(st);
	return rc ? rc : step == SQLITE_DONE ? 0 : -EIO;
}

int topo_unit_owners(struct store *s, int64_t ocs_id, int64_t *owner, size_t n)
{
	sqlite3_stmt *st = store_stmt(s, "SELECT c.ocs_port, fs.fabric_id FROM cable c JOIN "
	                                 "fabric_server fs ON fs.server_id = c.server_id WHERE "
	                                 "c.ocs_id = ?");
	if (!st)
		return -EIO;
	sqlite3_bind_int64(st, 1, ocs_id);
	int step;
	while ((step = sqlite3_step(st)) == SQLITE_ROW) {
		int64_t p = sqlite3_column_int64(st, 0);
		if (p >= 0 && (size_t)p < n)
			owner[p] = sqlite3_column_int64(st, 1);
	}
	sqlite3_reset(st);
	return step == SQLITE_DONE ? 0 : -EIO;
}

int topo_unit_circuits_each(struct store *s, int64_t ocs_id,
                            int (*fn)(void *arg, uint32_t x, uint32_t y, int64_t fabric), void *arg)
{
	sqlite3_stmt *st = store_stmt(s, UNIT_CIRCUITS_SQL);
	if (!st)
		return -EIO;
	sqlite3_bind_int64(st, 1, ocs_id);
	int step, rc = 0;
	while (rc == 0 && (step = sqlite3_step(st)) == SQLITE_ROW)
		rc = fn(arg, (uint32_t)sqlite3_column_int64(st, 0),
		        (uint32_t)sqlite3_column_int64(st, 1), sqlite3_column_int64(st, 2));
	sqlite3_reset(st);
	return rc ? rc : step == SQLITE_DONE ? 0 : -EIO;
}
