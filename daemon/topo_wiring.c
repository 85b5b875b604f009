/*
 * The cabling between devices' optical ports and OCS ports: a rule or
 * explicit links, replacing what is stored. See topo_wiring_apply().
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "store_sql.h"
#include "topo_apply.h"

const char *const topo_wiring_rules[] = { "plane-per-ocs", NULL };

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

struct rule_unit {
	int64_t id;
	char name[65];
	uint32_t ports, next, needed;
};

static int store_fail(struct ofcd_error *e)
{
	return ofcd_fail(e, -EIO, OFCD_E_STORE, NULL, NULL, "cannot store the wiring");
}

/* Slot k = device * P + port of every server goes to unit k mod K, ports in server order. */
static int wiring_rule(struct store *s, const char *field, struct ofcd_error *e)
{
	struct rule_unit *units = NULL;
	size_t k = 0, cap = 0;
	int rc = -EINVAL;

	sqlite3_stmt *st = store_stmt(s, "SELECT id, name, ports FROM ocs ORDER BY name");
	while (sqlite3_step(st) == SQLITE_ROW) {
		if (k == cap) {
			cap = cap ? cap * 2 : 16;
			struct rule_unit *u = realloc(units, cap * sizeof(*u));
			if (!u) {
				sqlite3_reset(st);
				rc = ofcd_fail(e, -ENOMEM, OFCD_E_INTERNAL, NULL, NULL,
				               "out of memory");
				goto out;
			}
			units = u;
		}
		units[k] = (struct rule_unit){ .id = sqlite3_column_int64(st, 0),
			                       .ports = (uint32_t)sqlite3_column_int64(st, 2) };
		snprintf(units[k].name, sizeof(units[k].name), "%s", sqlite3_column_text(st, 1));
		k++;
	}
	sqlite3_reset(st);
	if (k == 0) {
		rc = ofcd_fail(e, -EINVAL, OFCD_E_UNPROCESSABLE, field, NULL,
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
			rc =
			    ofcd_fail(e, -EINVAL, OFCD_E_UNPROCESSABLE, field, NULL,
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
			struct rule_unit *u = &units[slot % k];
			int which;
			if (new_cable_add(s, sid, slot / p, slot % p, u->id, ++u->next, &which) <
			    0) {
				sqlite3_reset(st);
				rc = store_fail(e);
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

static int wiring_link(struct store *s, const struct topo_link_spec *l, const char *f,
                       struct ofcd_error *e)
{
	sqlite3_stmt *st =
	    store_stmt(s, "SELECT id, devices, ports_per_device FROM server WHERE name = ?");
	sqlite3_bind_text(st, 1, l->server, -1, SQLITE_STATIC);
	int found = sqlite3_step(st) == SQLITE_ROW;
	int64_t sid = found ? sqlite3_column_int64(st, 0) : 0;
	uint64_t ndev = found ? (uint64_t)sqlite3_column_int64(st, 1) : 0;
	uint64_t nport = found ? (uint64_t)sqlite3_column_int64(st, 2) : 0;
	sqlite3_reset(st);
	st = store_stmt(s, "SELECT id, ports FROM ocs WHERE name = ?");
	sqlite3_bind_text(st, 1, l->ocs, -1, SQLITE_STATIC);
	int ofound = sqlite3_step(st) == SQLITE_ROW;
	int64_t oid = ofound ? sqlite3_column_int64(st, 0) : 0;
	uint64_t oports = ofound ? (uint64_t)sqlite3_column_int64(st, 1) : 0;
	sqlite3_reset(st);

	if (!found)
		return ofcd_fail(e, -EINVAL, OFCD_E_UNPROCESSABLE, f, NULL, "%s: no server %s", f,
		                 l->server);
	if (l->device >= ndev || l->port >= nport)
		return ofcd_fail(e, -EINVAL, OFCD_E_UNPROCESSABLE, f, NULL,
		                 "%s: server %s has devices 0..%llu with ports 0..%llu", f,
		                 l->server, (unsigned long long)ndev - 1,
		                 (unsigned long long)nport - 1);
	if (!ofound)
		return ofcd_fail(e, -EINVAL, OFCD_E_UNPROCESSABLE, f, NULL, "%s: no OCS unit %s", f,
		                 l->ocs);
	if (l->ocs_port > oports)
		return ofcd_fail(e, -EINVAL, OFCD_E_UNPROCESSABLE, f, NULL,
		                 "%s: OCS unit %s has ports 1..%llu, got %u", f, l->ocs,
		                 (unsigned long long)oports, l->ocs_port);
	int which = 0;
	int rc = new_cable_add(s, sid, l->device, l->port, oid, l->ocs_port, &which);
	if (rc == -EEXIST && which == 0)
		return ofcd_fail(e, -EINVAL, OFCD_E_UNPROCESSABLE, f, NULL,
		                 "%s: %s device %u port %u is cabled twice", f, l->server,
		                 l->device, l->port);
	if (rc == -EEXIST)
		return ofcd_fail(e, -EINVAL, OFCD_E_UNPROCESSABLE, f, NULL,
		                 "%s: OCS unit %s port %u is cabled twice", f, l->ocs, l->ocs_port);
	return rc < 0 ? store_fail(e) : 0;
}

/* The first circuit of a fabric that the new cabling would cut, if any. */
static int check_circuits_kept(struct store *s, const char *prefix, struct ofcd_error *e)
{
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
	int rc = 0;
	if (sqlite3_step(st) == SQLITE_ROW)
		rc = ofcd_fail(e, -EBUSY, OFCD_E_IN_USE, prefix ? prefix : "links", NULL,
		               "the new wiring changes cables that fabric %s uses (server %s); "
		               "delete the fabric first",
		               sqlite3_column_text(st, 0), sqlite3_column_text(st, 1));
	sqlite3_reset(st);
	return rc;
}

/*
 * Only the cables that differ are deleted and inserted: a server's revision
 * counts its cabling (schema/007), so wiring put again unchanged must leave
 * the rows, and their servers' entity tags, alone.
 */
static int replace_cables(struct store *s, int rule)
{
	sqlite3_stmt *st = store_stmt(
	    s, "DELETE FROM cable WHERE NOT EXISTS (SELECT 1 FROM temp.new_cable n WHERE "
	       "n.server_id = cable.server_id AND n.device = cable.device AND n.port = cable.port "
	       "AND n.ocs_id = cable.ocs_id AND n.ocs_port = cable.ocs_port)");
	if (store_step_done(st) < 0)
		return -EIO;
	st = store_stmt(s, "INSERT INTO cable(server_id, device, port, ocs_id, ocs_port) "
	                   "SELECT server_id, device, port, ocs_id, ocs_port FROM temp.new_cable n "
	                   "WHERE NOT EXISTS (SELECT 1 FROM cable c WHERE c.server_id = "
	                   "n.server_id AND c.device = n.device AND c.port = n.port)");
	if (store_step_done(st) < 0)
		return -EIO;
	st = store_stmt(s, "INSERT INTO wiring(id, rule) VALUES (1, ?) "
	                   "ON CONFLICT(id) DO UPDATE SET rule = excluded.rule");
	if (rule >= 0)
		sqlite3_bind_text(st, 1, topo_wiring_rules[rule], -1, SQLITE_STATIC);
	if (store_step_done(st) < 0)
		return -EIO;
	st = store_stmt(s, "DELETE FROM temp.new_cable");
	return store_step_done(st);
}

int topo_wiring_apply(struct store *s, const struct topo_wiring_spec *w, const char *prefix,
                      struct ofcd_error *e)
{
	char f[160], fl[192];
	int rc;

	if (new_cable_reset(s) < 0)
		return store_fail(e);
	if (w->rule >= 0) {
		rc = wiring_rule(s, ofcd_field(f, sizeof(f), prefix, "rule"), e);
	} else {
		ofcd_field(f, sizeof(f), prefix, "links");
		rc = 0;
		for (size_t i = 0; rc == 0 && i < w->nlinks; i++) {
			snprintf(fl, sizeof(fl), "%s[%zu]", f, i);
			rc = wiring_link(s, &w->links[i], fl, e);
		}
	}
	if (rc == 0)
		rc = check_circuits_kept(s, prefix, e);
	if (rc == 0 && replace_cables(s, w->rule) < 0)
		rc = store_fail(e);
	return rc;
}
