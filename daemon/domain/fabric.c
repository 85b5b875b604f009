#include "fabric.h"

#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/types.h>

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

/* A server's row id and its position in the request, to find the ones listed twice. */
struct listed {
	int64_t id;
	size_t at;
};

static int listed_cmp(const void *x, const void *y)
{
	const struct listed *a = x, *b = y;
	if (a->id != b->id)
		return a->id < b->id ? -1 : 1;
	return a->at < b->at ? -1 : a->at > b->at;
}

/* The first position that names a server an earlier one named (m when none); -ENOMEM. */
static ssize_t first_repeat(const int64_t *ids, size_t m)
{
	struct listed *v = malloc((m ? m : 1) * sizeof(*v));
	size_t n = 0, first = m;
	if (!v)
		return -ENOMEM;
	for (size_t i = 0; i < m; i++)
		if (ids[i])
			v[n++] = (struct listed){ ids[i], i };
	qsort(v, n, sizeof(*v), listed_cmp);
	for (size_t i = 1; i < n; i++)
		if (v[i].id == v[i - 1].id && v[i].at < first)
			first = v[i].at;
	free(v);
	return (ssize_t)first;
}

/*
 * The row id of each named server, refusing the first position (in order)
 * that names an unknown server, one listed before it, or one in a fabric.
 */
static int resolve_servers(const struct fabric_ctx *c, const char *const *names, size_t m,
                           int64_t *ids, struct ofcd_error *e)
{
	struct store *s = c->store;
	char f[32];
	for (size_t i = 0; i < m; i++)
		ids[i] = topo_server_id(s, names[i]);
	ssize_t repeat = first_repeat(ids, m);
	if (repeat < 0)
		return ofcd_fail(e, -ENOMEM, OFCD_E_INTERNAL, NULL, NULL, "out of memory");
	for (size_t i = 0; i < m; i++) {
		snprintf(f, sizeof(f), "servers[%zu]", i);
		if (!ids[i])
			return ofcd_fail(e, -ENOENT, OFCD_E_UNPROCESSABLE, f, NULL,
			                 "%s: no server %s", f, names[i]);
		if ((size_t)repeat == i)
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

static int64_t insert_row(struct store *s, const char *name, const struct plan_fabric *plan,
                          const struct plan_shape *shape, const json_t *choice, bool partial)
{
	int64_t fid = next_fabric_id(s);
	char grid[64];
	if (fid < 0)
		return fid;
	char *choice_text = choice ? json_dumps(choice, JSON_COMPACT) : NULL;
	sqlite3_stmt *st = store_stmt(s, "INSERT INTO fabric(id, name, state, formula, planes, "
	                                 "min_devices, topology, shape, choice, partial) "
	                                 "VALUES (?, ?, ?, ?, ?, ?, ?, nullif(?, ''), ?, ?)");
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
	sqlite3_bind_int(st, 10, partial);
	int rc = store_step_done(st);
	free(choice_text);
	return rc < 0 ? -EIO : fid;
}

/* The fabric's members from position from to to (exclusive). */
static int insert_members(struct store *s, int64_t fid, const int64_t *ids, size_t from, size_t to)
{
	sqlite3_stmt *st =
	    store_stmt(s, "INSERT INTO fabric_server(fabric_id, position, server_id) "
	                  "VALUES (?, ?, ?)");
	for (size_t i = from; i < to; i++) {
		sqlite3_bind_int64(st, 1, fid);
		sqlite3_bind_int64(st, 2, (sqlite3_int64)i);
		sqlite3_bind_int64(st, 3, ids[i]);
		if (store_step_done(st) < 0)
			return -EIO;
	}
	return 0;
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

/* The steps a fabric written in parts goes through (struct fabric_parts). */
enum parts_phase {
	BUILD_LOAD,      /* the servers' cables and faults, a few servers a step */
	BUILD_PLAN,      /* the layout, the plan and its verification, in one step */
	BUILD_MEMBERS,   /* the fabric's row, then its members a few a step */
	BUILD_CIRCUITS,  /* its circuits, a slice a step */
	REMOVE_CIRCUITS, /* a removal: the circuits, a slice a step */
	REMOVE_ROW,      /* then the row, with its members and missing pairs */
	PARTS_DONE,
};

struct fabric_parts {
	struct fabric_ctx ctx;
	char name[65];
	char **names; /* the request's, for the refusals that name a server */
	size_t m;
	struct fabric_layout layout;
	struct coll_params price; /* what layout.price points to */
	int64_t *ids;
	enum parts_phase phase;
	size_t next;          /* the first server or circuit of the phase not done yet */
	bool parts;           /* a part a step, over transactions; else all at once */
	struct topo_input in; /* loaded in BUILD_LOAD */
	struct plan_shape shape;
	json_t *choice;
	struct plan_fabric plan;
	int64_t id;   /* the fabric's row, once stored */
	bool removal; /* a delete: the row, marked partial, goes a part at a time */
};

/*
 * What one step does when the build goes a part at a time: 3 to 5 ms of
 * work each at 64 ports a server (bench/RESULTS.md), a member's share of its
 * commit included (the desired state then follows each of its ports).
 */
#define STEP_SERVERS  128 /* servers loaded */
#define STEP_MEMBERS  64  /* members stored */
#define STEP_CIRCUITS 256 /* circuits stored or removed */

/*
 * Fabrics of more servers than this are written in parts (which still run
 * in the request's own turn while they fit its budget); smaller ones at
 * once, whatever the machine's speed: a 16-server full mesh (120 circuits)
 * is about a millisecond. A 64-server one is 10 ms at 8,192 servers and
 * 23 ms at 32,770 (deeper B-trees, a page cache that holds less of them):
 * too long for the clients waiting behind it.
 */
#define PARTS_FROM 16

void fabric_parts_free(struct fabric_parts *b)
{
	if (!b)
		return;
	for (size_t i = 0; b->names && i < b->m; i++)
		free(b->names[i]);
	free(b->names);
	free(b->ids);
	topo_input_free(&b->in);
	json_decref(b->choice);
	plan_fabric_free(&b->plan);
	free(b);
}

static struct fabric_parts *build_new(const struct fabric_ctx *c, const char *name,
                                      const char *const *servers, size_t m,
                                      const struct fabric_layout *layout, bool parts)
{
	struct fabric_parts *b = calloc(1, sizeof(*b));
	if (!b)
		return NULL;
	b->ctx = *c;
	snprintf(b->name, sizeof(b->name), "%s", name);
	b->m = m;
	b->layout = *layout;
	if (layout->price) {
		b->price = *layout->price;
		b->layout.price = &b->price;
	}
	b->parts = parts;
	b->ids = calloc(m ? m : 1, sizeof(*b->ids));
	b->names = calloc(m ? m : 1, sizeof(*b->names));
	for (size_t i = 0; b->names && i < m; i++)
		if (!(b->names[i] = strdup(servers[i]))) {
			b->m = i;
			fabric_parts_free(b);
			return NULL;
		}
	if (!b->ids || !b->names) {
		fabric_parts_free(b);
		return NULL;
	}
	return b;
}

static size_t min_size(size_t a, size_t b)
{
	return a < b ? a : b;
}

/* Lays the loaded servers out, plans and verifies them. */
static int build_plan(struct fabric_parts *b, struct ofcd_error *e)
{
	char why[256];
	int rc = check_joined(&b->ctx, (const char *const *)b->names, &b->in, e);
	if (rc == 0)
		rc = choose_shape(&b->in, &b->layout, &b->shape, &b->choice, e);
	if (rc < 0)
		return rc;
	const struct plan_shape *shaped =
	    b->shape.topology == PLAN_TOPO_FULL_MESH ? NULL : &b->shape;
	rc = plan_fabric_compute_shape(b->in.servers, b->in.m, shaped, &b->plan);
	if (rc == -EDOM)
		return fabric_infeasible(e, (uint32_t)b->m, b->plan.min_devices, b->plan.devices);
	if (rc < 0)
		return ofcd_fail(e, rc, OFCD_E_INTERNAL, NULL, NULL, "planning failed (%d)", rc);
	if (plan_verify_shape(b->in.servers, b->in.m, shaped, &b->plan, why, sizeof(why)) < 0) {
		log_error("planner", "fabric %s: plan failed verification: %s", b->name, why);
		return ofcd_fail(e, -EINVAL, OFCD_E_INTERNAL, NULL, NULL,
		                 "the plan failed verification: %s", why);
	}
	log_info("planner", "fabric %s: %s, %zu servers, %zu circuits, %zu pairs missing", b->name,
	         plan_shape_format(&b->shape, why, sizeof(why)), b->m, b->plan.ncircuits,
	         b->plan.nmissing);
	return 0;
}

/* The row, its missing pairs and counts (no circuits yet), marked partial unless all at once. */
static int build_row(struct fabric_parts *b)
{
	struct store *s = b->ctx.store;
	struct plan_fabric none = b->plan;
	none.ncircuits = 0;
	int64_t id = insert_row(s, b->name, &b->plan, &b->shape, b->choice, b->parts);
	if (id < 0 || topo_plan_save(s, id, &b->in, NULL, &none, FABRIC_BASE_STATE, false) < 0)
		return -EIO;
	b->id = id;
	return 0;
}

static int mark_partial(struct store *s, int64_t id, bool partial)
{
	sqlite3_stmt *st = store_stmt(s, "UPDATE fabric SET partial = ? WHERE id = ?");
	sqlite3_bind_int(st, 1, partial);
	sqlite3_bind_int64(st, 2, id);
	return store_step_done(st) < 0 ? -EIO : 0;
}

/* Deletes a fabric marked partial, with whatever rows it still has. */
static int drop_partial(struct store *s, int64_t id)
{
	sqlite3_stmt *st = store_stmt(s, "DELETE FROM fabric WHERE id = ? AND partial");
	sqlite3_bind_int64(st, 1, id);
	return store_step_done(st) < 0 ? -EIO : 0;
}

/* A removal's step: up to a slice of the fabric's circuits. Returns how many went, or -EIO. */
static int remove_some(struct store *s, struct fabric_parts *b)
{
	sqlite3_stmt *st = store_stmt(s, "DELETE FROM circuit WHERE rowid IN (SELECT rowid FROM "
	                                 "circuit WHERE fabric_id = ? LIMIT ?)");
	sqlite3_bind_int64(st, 1, b->id);
	sqlite3_bind_int(st, 2, STEP_CIRCUITS);
	if (store_step_done(st) < 0)
		return -EIO;
	return sqlite3_changes(store_db(s));
}

int fabric_parts_step(struct fabric_parts *b, bool *done, struct ofcd_error *e)
{
	struct store *s = b->ctx.store;
	size_t servers = b->parts ? STEP_SERVERS : b->m, members = b->parts ? STEP_MEMBERS : b->m;
	size_t to;
	int rc = 0;

	*done = false;
	switch (b->phase) {
	case BUILD_LOAD:
		to = min_size(b->m, b->next + servers);
		if (topo_input_more(s, &b->in, (uint32_t)b->next, (uint32_t)to) < 0)
			return ofcd_fail(e, -EIO, OFCD_E_STORE, NULL, NULL,
			                 "cannot read the topology");
		b->next = to;
		if (to < b->m)
			return 0;
		b->phase = BUILD_PLAN;
		b->next = 0;
		/* A fabric that took several steps to load plans on a turn of its own. */
		return b->m > STEP_SERVERS;
	case BUILD_PLAN:
		rc = build_plan(b, e);
		if (rc == 0)
			b->phase = BUILD_MEMBERS;
		return rc;
	case BUILD_MEMBERS:
		if (!b->id && build_row(b) < 0)
			break;
		to = min_size(b->m, b->next + members);
		if (insert_members(s, b->id, b->ids, b->next, to) < 0)
			break;
		rc = to - b->next == STEP_MEMBERS; /* a full step's commit is as much work again */
		b->next = to;
		if (to == b->m) {
			b->phase = BUILD_CIRCUITS;
			b->next = 0;
		}
		return rc;
	case BUILD_CIRCUITS:
		to = b->parts ? min_size(b->plan.ncircuits, b->next + STEP_CIRCUITS)
		              : b->plan.ncircuits;
		if (topo_circuits_add(s, b->id, &b->in, &b->plan, b->next, to) < 0)
			break;
		b->next = to;
		if (to < b->plan.ncircuits)
			return 0;
		if (b->parts && mark_partial(s, b->id, false) < 0)
			break;
		b->phase = PARTS_DONE;
		*done = true;
		return 0;
	case REMOVE_CIRCUITS:
		rc = remove_some(s, b);
		if (rc < 0)
			break;
		if (rc == 0)
			b->phase = REMOVE_ROW;
		return 0;
	case REMOVE_ROW:
		/*
		 * The members go with the row, at once: released a few at a
		 * time, a circuit a unit still holds between a released port
		 * and a kept one would look like a breach of isolation.
		 */
		if (drop_partial(s, b->id) < 0)
			break;
		log_info("planner", "fabric %s deleted", b->name);
		b->phase = PARTS_DONE;
		*done = true;
		return 0;
	case PARTS_DONE:
		*done = true;
		return 0;
	}
	return ofcd_fail(e, -EIO, OFCD_E_STORE, NULL, NULL, "cannot store fabric %s", b->name);
}

int fabric_parts_drop(struct fabric_parts *b)
{
	/* Its last step may have been rolled back: the row is whatever the store holds. */
	if (!b->id)
		return 0;
	if (drop_partial(b->ctx.store, b->id) < 0)
		return -EIO;
	if (b->removal)
		log_info("planner", "fabric %s deleted", b->name);
	else
		log_warn("planner", "fabric %s: dropped before all its circuits were stored",
		         b->name);
	b->phase = PARTS_DONE;
	return 0;
}

int64_t fabric_parts_id(const struct fabric_parts *b)
{
	return b->id;
}

int64_t fabric_create(const struct fabric_ctx *c, const char *name, const char *const *servers,
                      size_t m, const struct fabric_layout *layout, struct fabric_parts **rest,
                      struct ofcd_error *e)
{
	bool done = false;
	int64_t rc;

	if (rest)
		*rest = NULL;
	if (topo_fabric_id(c->store, name))
		return ofcd_fail(e, -EEXIST, OFCD_E_CONFLICT, "name", NULL,
		                 "fabric %s already exists", name);
	/* A small fabric is written at once: a few milliseconds, and one transaction. */
	struct fabric_parts *b = build_new(c, name, servers, m, layout, rest && m > PARTS_FROM);
	if (!b)
		return ofcd_fail(e, -ENOMEM, OFCD_E_INTERNAL, NULL, NULL, "out of memory");
	rc = resolve_servers(c, servers, m, b->ids, e);
	if (rc == 0 && topo_input_begin(c->store, b->ids, (uint32_t)m, &b->in) < 0)
		rc = ofcd_fail(e, -EIO, OFCD_E_STORE, NULL, NULL, "cannot read the topology");
	if (rc == 0 && b->parts) {
		*rest = b;
		return 0;
	}
	while (rc >= 0 && !done)
		rc = fabric_parts_step(b, &done, e);
	if (rc >= 0)
		rc = b->id;
	fabric_parts_free(b);
	return rc;
}

int fabric_drop_unfinished(struct store *s)
{
	sqlite3_stmt *st = store_stmt(s, "SELECT name FROM fabric WHERE partial");
	int step;
	while (st && (step = sqlite3_step(st)) == SQLITE_ROW)
		log_warn("planner",
		         "fabric %s: dropped, a write in parts left it unfinished (a create its "
		         "client was not told of is undone, a delete is finished)",
		         (const char *)sqlite3_column_text(st, 0));
	if (st)
		sqlite3_reset(st);
	st = store_stmt(s, "DELETE FROM fabric WHERE partial");
	return st && store_step_done(st) == 0 ? 0 : -EIO;
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
                   struct fabric_parts **rest, struct ofcd_error *e)
{
	int64_t id = topo_fabric_id(c->store, name);
	*created = !id;
	if (rest)
		*rest = NULL;
	if (!id)
		return fabric_create(c, name, servers, m, layout, rest, e);
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

int fabric_delete(const struct fabric_ctx *c, const char *name, struct fabric_parts **rest,
                  struct ofcd_error *e)
{
	int64_t id = topo_fabric_id(c->store, name);
	if (rest)
		*rest = NULL;
	if (!id)
		return ofcd_fail(e, -ENOENT, OFCD_E_NOT_FOUND, "name", NULL, "no fabric %s", name);
	bool parts = rest && topo_fabric_size(c->store, id) > PARTS_FROM;
	struct fabric_parts *b = parts ? calloc(1, sizeof(*b)) : NULL;
	if (parts && !b)
		return ofcd_fail(e, -ENOMEM, OFCD_E_INTERNAL, NULL, NULL, "out of memory");
	/* Gone now; or out of sight now and gone a part at a time (or at the next start). */
	sqlite3_stmt *st = store_stmt(c->store, "DELETE FROM fabric WHERE id = ?");
	sqlite3_bind_int64(st, 1, id);
	if (b ? mark_partial(c->store, id, true) < 0 : store_step_done(st) < 0) {
		free(b);
		return ofcd_fail(e, -EIO, OFCD_E_STORE, NULL, NULL, "cannot delete fabric %s",
		                 name);
	}
	if (!b) {
		log_info("planner", "fabric %s deleted", name);
		return 0;
	}
	log_info("planner", "fabric %s: deleting, a part at a time", name);
	b->ctx = *c;
	b->id = id;
	b->removal = true;
	b->parts = true;
	b->phase = REMOVE_CIRCUITS;
	snprintf(b->name, sizeof(b->name), "%s", name);
	*rest = b;
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
	rc = topo_plan_save(s, fabric_id, &in, &prev, &next, FABRIC_BASE_STATE, true);
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
	/* Not the fabric's whole view: its links are what a large fabric has most of. */
	json_t *fj = topo_fabric_summary_json(s, c->desired, fid);
	json_t *missing = topo_fabric_missing_json(s, fid);
	log_info("planner", "%s %s: fabric %s re-planned (revision %lld, %zu pairs missing)",
	         server, what, json_string_value(json_object_get(fj, "name")),
	         (long long)json_integer_value(json_object_get(fj, "revision")),
	         json_array_size(missing));
	*fabric = json_pack("{s:O, s:O, s:O, s:o}", "name", json_object_get(fj, "name"), "state",
	                    json_object_get(fj, "state"), "revision",
	                    json_object_get(fj, "revision"), "missing", missing);
	json_decref(fj);
	return 0;
}
