/*
 * The cabling between devices' optical ports and OCS ports: a rule or
 * explicit links, replacing what is stored. See topo_wiring_apply().
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "log.h"
#include "state/store_sql.h"
#include "topo_apply.h"
#include "units.h"

const char *const topo_wiring_rules[] = { "plane-per-ocs", NULL };

/*
 * Explicit links are first collected in a temporary table, whose unique keys
 * catch a device port or an OCS port used twice; the new cabling (the links',
 * or the rule's, built in memory) replaces the cable table only once it is
 * complete, and keeps every cable a fabric's circuit uses. A rule's cabling
 * into an empty table is made a part at a time instead (rule_in_parts()).
 */
static int new_cable_reset(struct store *s)
{
	sqlite3_stmt *st = store_stmt(
	    s, "CREATE TEMP TABLE IF NOT EXISTS new_cable (server_id INTEGER NOT NULL, "
	       "device INTEGER NOT NULL, port INTEGER NOT NULL, ocs_id INTEGER NOT NULL, "
	       "ocs_port INTEGER NOT NULL, PRIMARY KEY (server_id, device, port), "
	       "UNIQUE (ocs_id, ocs_port))");
	return st ? store_step_done(st) : -EIO;
}

/*
 * Dropped rather than emptied: with the pre-update hook installed SQLite
 * deletes row by row, half a million of them for 8,192 servers.
 */
static int new_cable_drop(struct store *s)
{
	sqlite3_stmt *st = store_stmt(s, "DROP TABLE IF EXISTS temp.new_cable");
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

static int store_fail(struct ofcd_error *e)
{
	return ofcd_fail(e, -EIO, OFCD_E_STORE, NULL, NULL, "cannot store the wiring");
}

/* One cable of the new cabling. */
struct cable {
	int64_t server_id;
	uint32_t device, port;
	int64_t ocs_id;
	uint32_t ocs_port;
};

/* The new cabling in primary-key order (server, device, port), as both paths build it. */
struct cabling {
	struct cable *v;
	size_t n, cap;
};

/*
 * Slot k = device * P + port of every server goes to unit k mod K, ports in
 * server order. Each device port once, each unit's ports in turn: never taken
 * twice, so the rule needs no check per cable. A plan reads the units and the
 * servers once and checks that every unit has the ports the rule gives it;
 * rule_emit() then makes the cables all at once or a part at a time (2.1
 * million of them at 32,768 servers).
 */
struct rule_unit {
	int64_t id;
	char name[65];
	uint32_t ports, next;
	uint64_t needed; /* 4,096 servers of 2^20 ports wrap 32 bits */
};

struct rule_server {
	int64_t id;
	uint32_t slots, ports;
};

struct rule_plan {
	struct rule_unit *units; /* by name */
	size_t nunits;
	struct rule_server *servers; /* by id, as the plan found them */
	size_t nservers;
	size_t total; /* cables in all */
	size_t at;    /* rule_emit()'s place: servers[at] is the next */
};

static void rule_plan_free(struct rule_plan *p)
{
	free(p->units);
	free(p->servers);
	*p = (struct rule_plan){ 0 };
}

static int out_of_memory(struct ofcd_error *e)
{
	return ofcd_fail(e, -ENOMEM, OFCD_E_INTERNAL, NULL, NULL, "out of memory");
}

/* Room for element n of *v (doubling), or -ENOMEM. */
static int grow(void **v, size_t *cap, size_t n, size_t size)
{
	if (n < *cap)
		return 0;
	size_t c = *cap ? 2 * *cap : 1024;
	void *t = realloc(*v, c * size);
	if (!t)
		return -ENOMEM;
	*v = t;
	*cap = c;
	return 0;
}

static int cabling_push(struct cabling *c, struct cable x)
{
	if (grow((void **)&c->v, &c->cap, c->n, sizeof(*c->v)) < 0)
		return -ENOMEM;
	c->v[c->n++] = x;
	return 0;
}

/* Reads the units and the servers, and checks the rule fits the units. */
static int rule_plan(struct store *s, const char *field, struct rule_plan *p, struct ofcd_error *e)
{
	size_t cap = 0;
	int step, rc = 0;

	*p = (struct rule_plan){ 0 };
	sqlite3_stmt *st = store_stmt(s, "SELECT id, name, ports FROM ocs ORDER BY name");
	while (rc == 0 && (step = sqlite3_step(st)) == SQLITE_ROW) {
		rc = grow((void **)&p->units, &cap, p->nunits, sizeof(*p->units));
		if (rc == 0) {
			struct rule_unit *u = &p->units[p->nunits++];
			*u = (struct rule_unit){ .id = sqlite3_column_int64(st, 0),
				                 .ports = (uint32_t)sqlite3_column_int64(st, 2) };
			snprintf(u->name, sizeof(u->name), "%s", sqlite3_column_text(st, 1));
		}
	}
	sqlite3_reset(st);
	cap = 0;
	/* A scan cut short would make fewer cables, and the others' be removed. */
	if (rc == 0 && step != SQLITE_DONE)
		rc = -EIO;
	st = store_stmt(s, "SELECT id, devices, ports_per_device FROM server ORDER BY id");
	while (rc == 0 && (step = sqlite3_step(st)) == SQLITE_ROW) {
		rc = grow((void **)&p->servers, &cap, p->nservers, sizeof(*p->servers));
		if (rc == 0) {
			uint32_t ports = (uint32_t)sqlite3_column_int64(st, 2);
			p->servers[p->nservers++] =
			    (struct rule_server){ sqlite3_column_int64(st, 0),
				                  (uint32_t)sqlite3_column_int64(st, 1) * ports,
				                  ports };
		}
	}
	sqlite3_reset(st);
	if (rc == 0 && step != SQLITE_DONE)
		rc = -EIO;
	if (rc == -ENOMEM)
		rc = out_of_memory(e);
	else if (rc == -EIO)
		rc = store_fail(e);
	else if (p->nunits == 0)
		rc = ofcd_fail(e, -EINVAL, OFCD_E_UNPROCESSABLE, field, NULL,
		               "rule plane-per-ocs needs at least one OCS unit");
	size_t k = p->nunits;
	for (size_t i = 0; rc == 0 && i < p->nservers; i++) {
		p->total += p->servers[i].slots;
		for (size_t u = 0; u < k; u++)
			p->units[u].needed +=
			    p->servers[i].slots / (uint32_t)k + (p->servers[i].slots % k > u);
	}
	for (size_t u = 0; rc == 0 && u < k; u++)
		if (p->units[u].needed > p->units[u].ports)
			rc = ofcd_fail(
			    e, -EINVAL, OFCD_E_UNPROCESSABLE, field, NULL,
			    "rule plane-per-ocs needs %llu ports on OCS unit %s, it has %u",
			    (unsigned long long)p->units[u].needed, p->units[u].name,
			    p->units[u].ports);
	if (rc < 0)
		rule_plan_free(p);
	return rc;
}

/*
 * The plan's next servers, whole, as many as max cables hold (at least one),
 * appended to out: in the cable table's key order, or by_unit, each unit's
 * cables of them together, ports ascending. Inserted by unit, the unit-port
 * index grows at one place per unit rather than at every unit by turns (that
 * took three fifths of a 32,768-server cabling's time). Each unit takes its
 * ports in server order either way: the cables are the rule's whatever the
 * order and the part's size.
 */
static int rule_emit(struct rule_plan *p, size_t max, bool by_unit, struct cabling *out)
{
	size_t k = p->nunits, end = p->at, room = 0;
	while (end < p->nservers && (end == p->at || room + p->servers[end].slots <= max))
		room += p->servers[end++].slots;
	if (out->cap < out->n + room) {
		struct cable *v = realloc(out->v, (out->n + room) * sizeof(*v));
		if (!v)
			return -ENOMEM;
		out->v = v;
		out->cap = out->n + room;
	}
	for (size_t u = 0; u < (by_unit ? k : 1); u++)
		for (size_t i = p->at; i < end; i++) {
			const struct rule_server *sv = &p->servers[i];
			for (uint32_t slot = (uint32_t)u; slot < sv->slots;
			     slot += by_unit ? (uint32_t)k : 1) {
				struct rule_unit *to = &p->units[slot % k];
				out->v[out->n++] =
				    (struct cable){ sv->id, slot / sv->ports, slot % sv->ports,
					            to->id, ++to->next };
			}
		}
	p->at = end;
	return 0;
}

static bool rule_emitted(const struct rule_plan *p)
{
	return p->at == p->nservers;
}

/* The rule's whole cabling, in the cable table's key order. */
static int wiring_rule(struct store *s, const char *field, struct cabling *out,
                       struct ofcd_error *e)
{
	struct rule_plan p;
	int rc = rule_plan(s, field, &p, e);
	if (rc == 0 && p.total && rule_emit(&p, p.total, false, out) < 0)
		rc = out_of_memory(e);
	rule_plan_free(&p);
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

/* The links' cabling, checked one by one in the temporary table, in key order. */
static int links_cabling(struct store *s, struct cabling *out)
{
	sqlite3_stmt *st = store_stmt(s, "SELECT server_id, device, port, ocs_id, ocs_port FROM "
	                                 "temp.new_cable ORDER BY server_id, device, port");
	int rc = st ? 0 : -EIO, step = SQLITE_DONE;
	while (rc == 0 && (step = sqlite3_step(st)) == SQLITE_ROW)
		rc = cabling_push(out, (struct cable){ sqlite3_column_int64(st, 0),
		                                       (uint32_t)sqlite3_column_int64(st, 1),
		                                       (uint32_t)sqlite3_column_int64(st, 2),
		                                       sqlite3_column_int64(st, 3),
		                                       (uint32_t)sqlite3_column_int64(st, 4) });
	if (st)
		sqlite3_reset(st);
	return rc == 0 && step != SQLITE_DONE ? -EIO : rc;
}

static int cable_key_cmp(const struct cable *a, int64_t server, uint32_t device, uint32_t port)
{
	if (a->server_id != server)
		return a->server_id < server ? -1 : 1;
	if (a->device != device)
		return a->device < device ? -1 : 1;
	return a->port < port ? -1 : a->port > port;
}

/* A cable that goes or changes: refused (409) when a fabric's circuit uses it. */
static int check_cut(struct store *s, const struct cable *c, const char *prefix,
                     struct ofcd_error *e)
{
	sqlite3_stmt *st = store_stmt(
	    s, "SELECT f.name, sv.name FROM fabric_server fs JOIN fabric f ON f.id = "
	       "fs.fabric_id JOIN server sv ON sv.id = fs.server_id WHERE fs.server_id = ?1 AND "
	       "EXISTS (SELECT 1 FROM circuit c WHERE c.fabric_id = fs.fabric_id AND ((c.a_pos = "
	       "fs.position AND c.a_device = ?2 AND c.a_port = ?3) OR (c.b_pos = fs.position AND "
	       "c.b_device = ?2 AND c.b_port = ?3)))");
	int rc = 0;
	sqlite3_bind_int64(st, 1, c->server_id);
	sqlite3_bind_int64(st, 2, c->device);
	sqlite3_bind_int64(st, 3, c->port);
	if (sqlite3_step(st) == SQLITE_ROW)
		rc = ofcd_fail(e, -EBUSY, OFCD_E_IN_USE, prefix ? prefix : "links", NULL,
		               "the new wiring changes cables that fabric %s uses (server %s); "
		               "delete the fabric first",
		               sqlite3_column_text(st, 0), sqlite3_column_text(st, 1));
	sqlite3_reset(st);
	return rc;
}

/*
 * A cable that comes or moves onto an OCS port that a unit may still join to
 * another port (a deleted fabric's circuit left on a unit that does not
 * answer): refused (409), or it would join its server to whatever sits at the
 * other end, a server of another tenant perhaps, past every fabric's checks.
 * So is one that leaves such a port (leaving): the record may change before
 * the fibre moves, and its server, free on paper, would still be joined.
 */
static int check_joined(struct store *s, const struct domain_units *units, const struct cable *c,
                        bool leaving, const char *prefix, struct ofcd_error *e)
{
	char why[256];
	if (!domain_port_joined(units, c->ocs_id, c->ocs_port, why, sizeof(why)))
		return 0;
	sqlite3_stmt *st = store_stmt(s, "SELECT name FROM server WHERE id = ?");
	sqlite3_bind_int64(st, 1, c->server_id);
	const char *server =
	    st && sqlite3_step(st) == SQLITE_ROW ? (const char *)sqlite3_column_text(st, 0) : "?";
	int rc = ofcd_fail(e, -EBUSY, OFCD_E_IN_USE, prefix ? prefix : "links", NULL,
	                   "the new wiring %s server %s device %u port %u %s a port that %s; "
	                   "wait until it is removed (or the unit removed with ?force=true)",
	                   leaving ? "takes" : "cables", server, c->device, c->port,
	                   leaving ? "off" : "to", why);
	if (st)
		sqlite3_reset(st);
	return rc;
}

static int cable_delete(struct store *s, const struct cable *c)
{
	sqlite3_stmt *st =
	    store_stmt(s, "DELETE FROM cable WHERE server_id = ? AND device = ? AND port = ?");
	sqlite3_bind_int64(st, 1, c->server_id);
	sqlite3_bind_int64(st, 2, c->device);
	sqlite3_bind_int64(st, 3, c->port);
	return store_step_done(st);
}

/* The cables to insert: add[] indexes nc (NULL: nc's first ones, in order). */
struct cable_adds {
	const struct cabling *nc;
	const size_t *add;
};

static void bind_cable(sqlite3_stmt *st, int first, size_t row, void *arg)
{
	const struct cable_adds *a = arg;
	const struct cable *c = &a->nc->v[a->add ? a->add[row] : row];
	sqlite3_bind_int64(st, first, c->server_id);
	sqlite3_bind_int64(st, first + 1, c->device);
	sqlite3_bind_int64(st, first + 2, c->port);
	sqlite3_bind_int64(st, first + 3, c->ocs_id);
	sqlite3_bind_int64(st, first + 4, c->ocs_port);
}

static int insert_cables(struct store *s, const struct cabling *nc, const size_t *add, size_t n)
{
	struct cable_adds adds = { nc, add };
	return store_insert_rows(s,
	                         "INSERT INTO cable(server_id, device, port, ocs_id, ocs_port) "
	                         "VALUES (?, ?, ?, ?, ?)",
	                         5, n, bind_cable, &adds);
}

/*
 * The cables a wiring change still has to insert (topo_apply.h): those of a
 * merge with the table, or a rule's made a part at a time where the table was
 * empty (nothing to merge: no array of them all, no merge in the first turn).
 */
struct topo_cables {
	struct cabling add; /* in key order; a rule's: the part being inserted */
	size_t next;        /* add.v[next..] are still to insert */
	bool by_rule;       /* the cables come from rule, add is a part's room */
	struct rule_plan rule;
};

/*
 * Replaces the cable table by nc (in key order), writing only the cables that
 * differ: one merge with the table read in key order. A PUT of the same
 * topology writes nothing, and the rows the in-memory port owners follow stay
 * put. A cable that goes or changes is refused when a fabric's circuit uses
 * it; the removals all go before the additions (an OCS port may move).
 */
static int replace_cables(struct store *s, const struct domain_units *units, struct cabling *nc,
                          const char *prefix, struct topo_cables **rest, struct ofcd_error *e)
{
	sqlite3_stmt *st = store_stmt(s, "SELECT server_id, device, port, ocs_id, ocs_port FROM "
	                                 "cable ORDER BY server_id, device, port");
	struct cabling del = { 0 };
	size_t *add = malloc((nc->n + 1) * sizeof(*add)), nadd = 0, j = 0;
	int rc = st && add ? 0 : -ENOMEM, step = SQLITE_DONE;
	while (rc == 0 && (step = sqlite3_step(st)) == SQLITE_ROW) {
		struct cable old = { sqlite3_column_int64(st, 0),
			             (uint32_t)sqlite3_column_int64(st, 1),
			             (uint32_t)sqlite3_column_int64(st, 2),
			             sqlite3_column_int64(st, 3),
			             (uint32_t)sqlite3_column_int64(st, 4) };
		while (j < nc->n &&
		       cable_key_cmp(&nc->v[j], old.server_id, old.device, old.port) < 0)
			add[nadd++] = j++;
		bool same = j < nc->n &&
		            cable_key_cmp(&nc->v[j], old.server_id, old.device, old.port) == 0 &&
		            nc->v[j].ocs_id == old.ocs_id && nc->v[j].ocs_port == old.ocs_port;
		if (same)
			j++;
		else
			rc = cabling_push(&del, old);
	}
	if (st)
		sqlite3_reset(st);
	if (rc == -ENOMEM)
		rc = ofcd_fail(e, -ENOMEM, OFCD_E_INTERNAL, NULL, NULL, "out of memory");
	else if (step != SQLITE_DONE)
		rc = store_fail(e);
	while (rc == 0 && j < nc->n)
		add[nadd++] = j++;
	for (size_t i = 0; rc == 0 && i < nadd; i++)
		rc = check_joined(s, units, &nc->v[add[i]], false, prefix, e);
	for (size_t i = 0; rc == 0 && i < del.n; i++)
		rc = check_joined(s, units, &del.v[i], true, prefix, e);
	/* Removals first: an OCS port may pass from one device port to another. */
	for (size_t i = 0; rc == 0 && i < del.n; i++) {
		rc = check_cut(s, &del.v[i], prefix, e);
		if (rc == 0 && cable_delete(s, &del.v[i]) < 0)
			rc = store_fail(e);
	}
	if (rc == 0 && rest && nadd > TOPO_CABLES_AT_ONCE) {
		/* The additions are left to parts: nc becomes theirs, in key order still. */
		for (size_t i = 0; i < nadd; i++)
			nc->v[i] = nc->v[add[i]];
		nc->n = nadd;
		*rest = calloc(1, sizeof(**rest));
		if (!*rest) {
			rc = ofcd_fail(e, -ENOMEM, OFCD_E_INTERNAL, NULL, NULL, "out of memory");
		} else {
			(*rest)->add = *nc;
			*nc = (struct cabling){ 0 };
		}
	} else if (rc == 0 && insert_cables(s, nc, add, nadd) < 0) {
		rc = store_fail(e);
	}
	free(del.v);
	free(add);
	return rc;
}

static int set_rule(struct store *s, int rule, bool partial)
{
	sqlite3_stmt *st = store_stmt(
	    s, "INSERT INTO wiring(id, rule, partial) VALUES (1, ?, ?) ON "
	       "CONFLICT(id) DO UPDATE SET rule = excluded.rule, partial = excluded.partial");
	if (rule >= 0)
		sqlite3_bind_text(st, 1, topo_wiring_rules[rule], -1, SQLITE_STATIC);
	sqlite3_bind_int(st, 2, partial);
	return store_step_done(st);
}

static int set_whole(struct store *s)
{
	return store_step_done(store_stmt(s, "UPDATE wiring SET partial = 0 WHERE id = 1"));
}

static int id_cmp(const void *a, const void *b)
{
	int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
	return (x > y) - (x < y);
}

/* Each server of part once (its cables_added trigger's work, for the whole part). */
static int bump_revisions(struct store *s, const struct cabling *part)
{
	int64_t *ids = malloc((part->n + 1) * sizeof(*ids));
	if (!ids)
		return -ENOMEM;
	for (size_t i = 0; i < part->n; i++)
		ids[i] = part->v[i].server_id;
	qsort(ids, part->n, sizeof(*ids), id_cmp);
	int rc = 0;
	sqlite3_stmt *st = store_stmt(s, "UPDATE server SET revision = revision + 1 WHERE id = ?");
	for (size_t i = 0; rc == 0 && i < part->n; i++)
		if (i == 0 || ids[i] != ids[i - 1]) {
			sqlite3_bind_int64(st, 1, ids[i]);
			rc = store_step_done(st);
		}
	free(ids);
	return rc;
}

/*
 * A part goes in with the store's triggers off, for they were two fifths of a
 * 32,768-server cabling's time: every cable of a part comes from the rule,
 * whose plan checked each unit has the ports it gives (cable_port_fits), and
 * the part's servers have their revisions raised once each (cable_added).
 * Turning them off or on again makes SQLite prepare the statements anew.
 */
static int insert_part(struct store *s, const struct cabling *part)
{
	sqlite3 *db = store_db(s);
	sqlite3_db_config(db, SQLITE_DBCONFIG_ENABLE_TRIGGER, 0, (int *)NULL);
	int rc = insert_cables(s, part, NULL, part->n);
	sqlite3_db_config(db, SQLITE_DBCONFIG_ENABLE_TRIGGER, 1, (int *)NULL);
	return rc < 0 ? rc : bump_revisions(s, part);
}

int topo_cables_step(struct store *s, struct topo_cables *c, bool *done)
{
	/* A rule's next part once the last is in: a part that failed is inserted again. */
	if (c->by_rule && c->next == c->add.n) {
		c->add.n = c->next = 0;
		if (rule_emit(&c->rule, TOPO_CABLES_STEP, true, &c->add) < 0)
			return -EIO;
	}
	/* A rule's part is whole servers (rule_emit()); merged additions are cut anywhere. */
	size_t n = c->add.n - c->next;
	if (!c->by_rule && n > TOPO_CABLES_STEP)
		n = TOPO_CABLES_STEP;
	struct cabling part = { .v = c->add.v + c->next, .n = n };
	if (insert_part(s, &part) < 0)
		return -EIO;
	c->next += n;
	*done = c->next == c->add.n && (!c->by_rule || rule_emitted(&c->rule));
	if (*done)
		return set_whole(s) < 0 ? -EIO : 0;
	return 1;
}

int topo_cables_finish(struct store *s, struct topo_cables *c)
{
	bool done = false;
	int rc = 0;
	while (rc >= 0 && !done)
		rc = topo_cables_step(s, c, &done);
	return rc < 0 ? rc : 0;
}

void topo_cables_free(struct topo_cables *c)
{
	if (c) {
		free(c->add.v);
		rule_plan_free(&c->rule);
	}
	free(c);
}

static bool no_cables(struct store *s)
{
	sqlite3_stmt *st = store_stmt(s, "SELECT EXISTS (SELECT 1 FROM cable)");
	bool none = st && sqlite3_step(st) == SQLITE_ROW && !sqlite3_column_int(st, 0);
	if (st)
		sqlite3_reset(st);
	return none;
}

/* Each unit gives the rule its ports from 1: none of them may still be joined (check_joined()). */
static int rule_check_joined(const struct rule_plan *p, const struct domain_units *units,
                             const char *field, struct ofcd_error *e)
{
	char why[256];
	for (size_t u = 0; units && u < p->nunits; u++) {
		int64_t id = p->units[u].id;
		/* Usually no unit may: their ports are not asked one by one. */
		if (!domain_unit_may_join(units, id))
			continue;
		for (uint32_t port = 1; port <= p->units[u].needed; port++)
			if (domain_port_joined(units, id, port, why, sizeof(why)))
				return ofcd_fail(e, -EBUSY, OFCD_E_IN_USE, field, NULL,
				                 "the rule cables a server to a port that %s; wait "
				                 "until it is removed (or the unit removed with "
				                 "?force=true)",
				                 why);
	}
	return 0;
}

/*
 * A rule's cabling into an empty table, more than TOPO_CABLES_AT_ONCE cables:
 * nothing to merge or to refuse past the plan's checks, so *rest makes and
 * inserts them a part at a time. 1 when it applies (rest set), 0 when not.
 */
static int rule_in_parts(struct store *s, const struct domain_units *units, const char *field,
                         struct topo_cables **rest, struct ofcd_error *e)
{
	if (!rest || !no_cables(s))
		return 0;
	struct rule_plan p;
	int rc = rule_plan(s, field, &p, e);
	if (rc < 0)
		return rc;
	if (p.total <= TOPO_CABLES_AT_ONCE || (rc = rule_check_joined(&p, units, field, e)) < 0) {
		rule_plan_free(&p);
		return rc;
	}
	if (!(*rest = calloc(1, sizeof(**rest)))) {
		rule_plan_free(&p);
		return out_of_memory(e);
	}
	(*rest)->by_rule = true;
	(*rest)->rule = p;
	return 1;
}

int topo_wiring_apply(struct store *s, const struct domain_units *units,
                      const struct topo_wiring_spec *w, const char *prefix,
                      struct topo_cables **rest, struct ofcd_error *e)
{
	char f[160], fl[192];
	struct cabling nc = { 0 };
	int rc;
	if (rest)
		*rest = NULL;

	if (w->rule >= 0) {
		ofcd_field(f, sizeof(f), prefix, "rule");
		rc = rule_in_parts(s, units, f, rest, e);
		if (rc == 1 && set_rule(s, w->rule, true) < 0) {
			topo_cables_free(*rest);
			*rest = NULL;
			return store_fail(e);
		}
		if (rc == 1)
			return 0;
		if (rc == 0)
			rc = wiring_rule(s, f, &nc, e);
	} else {
		ofcd_field(f, sizeof(f), prefix, "links");
		rc = new_cable_drop(s) < 0 || new_cable_reset(s) < 0 ? store_fail(e) : 0;
		for (size_t i = 0; rc == 0 && i < w->nlinks; i++) {
			snprintf(fl, sizeof(fl), "%s[%zu]", f, i);
			rc = wiring_link(s, &w->links[i], fl, e);
		}
		if (rc == 0 && links_cabling(s, &nc) < 0)
			rc = store_fail(e);
		if (new_cable_drop(s) < 0 && rc == 0)
			rc = store_fail(e);
	}
	/* Only a rule's cabling goes in parts: the next start can make it again
	 * (topo_wiring_finish()). */
	if (rc == 0)
		rc = replace_cables(s, units, &nc, prefix, w->rule >= 0 ? rest : NULL, e);
	if (rc == 0 && set_rule(s, w->rule, rest && *rest) < 0)
		rc = store_fail(e);
	free(nc.v);
	if (rc < 0 && rest) {
		topo_cables_free(*rest);
		*rest = NULL;
	}
	return rc;
}

int topo_wiring_finish(struct store *s, bool give_up)
{
	sqlite3_stmt *st = store_stmt(s, "SELECT rule FROM wiring WHERE id = 1 AND partial");
	int step = st ? sqlite3_step(st) : SQLITE_ERROR, rule = -1;
	const char *name = step == SQLITE_ROW ? (const char *)sqlite3_column_text(st, 0) : NULL;
	for (int i = 0; name && topo_wiring_rules[i]; i++)
		if (strcmp(name, topo_wiring_rules[i]) == 0)
			rule = i;
	if (st)
		sqlite3_reset(st);
	if (step != SQLITE_ROW)
		return step == SQLITE_DONE ? 0 : -EIO;
	log_warn("topology", "a wiring change in parts was left unfinished: its rule is applied "
	                     "again to finish it");
	struct ofcd_error e = { 0 };
	struct topo_wiring_spec w = { .rule = rule };
	int rc = rule < 0 ? -EINVAL : topo_wiring_apply(s, NULL, &w, NULL, NULL, &e);
	if (rc < 0 && give_up && rc != -EIO && rc != -ENOMEM) {
		/* Not the store's doing: trying again at every write would not help. */
		log_error(
		    "topology",
		    "cannot finish the wiring (%s): it stays incomplete until the topology or "
		    "wiring is put again",
		    e.msg[0] ? e.msg : strerror(-rc));
		rc = set_whole(s);
	}
	ofcd_error_clear(&e);
	return rc;
}

bool topo_unfinished_writes(struct store *s)
{
	sqlite3_stmt *st = store_stmt(s, "SELECT EXISTS (SELECT 1 FROM fabric WHERE partial) OR "
	                                 "EXISTS (SELECT 1 FROM wiring WHERE partial)");
	bool none = st && sqlite3_step(st) == SQLITE_ROW && !sqlite3_column_int(st, 0);
	if (st)
		sqlite3_reset(st);
	return !none;
}
