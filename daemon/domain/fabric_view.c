#include "fabric_view.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fabric_layout.h"
#include "state/store_sql.h"
#include "topo.h"

static int most_per_device(struct fabric_view *v);

void fabric_view_free(struct fabric_view *v)
{
	free(v->names);
	free(v->circuits);
	free(v->pair);
	free(v->circuit_device);
	memset(v, 0, sizeof(*v));
}

static int load_members(struct store *s, int64_t id, struct fabric_view *v)
{
	struct topo_member *mem;
	int rc = topo_fabric_members(s, id, &mem, &v->m);

	if (rc < 0)
		return rc;
	v->names = malloc((v->m ? v->m : 1) * sizeof(*v->names));
	if (!v->names) {
		free(mem);
		return -ENOMEM;
	}
	v->offload = true;
	v->one_switch = true;
	for (uint32_t i = 0; i < v->m; i++) {
		const struct topo_member *t = &mem[i];
		memcpy(v->names[i], t->name, sizeof(v->names[i]));
		if (i == 0 || t->devices < v->devices)
			v->devices = t->devices;
		v->offload = v->offload && t->offload;
		if (!t->switch_name[0] || strcmp(t->switch_name, mem[0].switch_name) != 0)
			v->one_switch = false;
	}
	if (v->m && v->one_switch) {
		v->sw_aggregating = mem[0].sw_aggregating;
		v->sw_offload = mem[0].sw_offload;
		v->sw_buffer = mem[0].sw_buffer;
		v->sw_window = mem[0].sw_window;
	}
	free(mem);
	return 0;
}

static int load_circuits(struct store *s, int64_t id, struct fabric_view *v, bool details)
{
	sqlite3_stmt *st =
	    details ? store_stmt(s, "SELECT c.a_pos, c.b_pos, c.plane, c.a_device, c.a_port, "
	                            "c.a_ocs_port, c.b_device, c.b_port, c.b_ocs_port, o.name "
	                            "FROM circuit c JOIN ocs o ON o.id = c.ocs_id "
	                            "WHERE c.fabric_id = ?")
	            : store_stmt(s, "SELECT a_pos, b_pos, plane, a_device, b_device FROM circuit "
	                            "WHERE fabric_id = ?");
	size_t m = v->m, pairs = m > 1 ? m * (m - 1) / 2 : 1;
	int step;

	v->pair = malloc((m ? m * m : 1) * sizeof(*v->pair));
	v->circuit_device = calloc(m ? m * m : 1, sizeof(*v->circuit_device));
	/* One circuit per pair at most is kept, so this never grows. */
	v->circuits = details ? malloc(pairs * sizeof(*v->circuits)) : NULL;
	if (!v->pair || !v->circuit_device || (details && !v->circuits))
		return -ENOMEM;
	for (size_t i = 0; i < m * m; i++)
		v->pair[i] = -1;
	if (!st)
		return -EIO;
	sqlite3_bind_int64(st, 1, id);
	while ((step = sqlite3_step(st)) == SQLITE_ROW) {
		uint32_t a = (uint32_t)sqlite3_column_int64(st, 0);
		uint32_t b = (uint32_t)sqlite3_column_int64(st, 1);
		if (a >= m || b >= m || a == b || v->pair[a * m + b] >= 0)
			continue;
		v->circuit_device[a * m + b] = (uint32_t)sqlite3_column_int64(st, 3);
		v->circuit_device[b * m + a] = (uint32_t)sqlite3_column_int64(st, details ? 6 : 4);
		if (details) {
			struct fabric_view_circuit *c = &v->circuits[v->ncircuits];
			c->pos[0] = a;
			c->pos[1] = b;
			c->plane = (uint32_t)sqlite3_column_int64(st, 2);
			for (int e = 0; e < 2; e++) {
				c->device[e] = (uint32_t)sqlite3_column_int64(st, 3 + 3 * e);
				c->port[e] = (uint32_t)sqlite3_column_int64(st, 4 + 3 * e);
				c->ocs_port[e] = (uint32_t)sqlite3_column_int64(st, 5 + 3 * e);
			}
			snprintf(c->ocs, sizeof(c->ocs), "%s", sqlite3_column_text(st, 9));
		}
		v->pair[a * m + b] = v->pair[b * m + a] = (int32_t)v->ncircuits++;
	}
	sqlite3_reset(st);
	if (step != SQLITE_DONE)
		return -EIO;
	/* Circuits are only ever laid between servers the layout joins. */
	v->min_degree = v->shape.degree;
	for (size_t a = 0; a < m; a++) {
		uint32_t deg = 0;
		for (size_t b = 0; b < m; b++)
			deg += v->pair[a * m + b] >= 0;
		if (deg < v->min_degree)
			v->min_degree = deg;
		v->missing += deg < v->shape.degree ? v->shape.degree - deg : 0;
	}
	v->missing /= 2;
	return most_per_device(v);
}

/* The most circuits one device of one member ends: they share its host link. */
static int most_per_device(struct fabric_view *v)
{
	size_t m = v->m;
	uint32_t top = 0, *count;

	for (size_t i = 0; i < m * m; i++)
		if (v->pair[i] >= 0 && v->circuit_device[i] > top)
			top = v->circuit_device[i];
	count = calloc((size_t)top + 1, sizeof(*count));
	if (!count)
		return -ENOMEM;
	for (size_t a = 0; a < m; a++) {
		for (size_t b = 0; b < m; b++)
			if (v->pair[a * m + b] >= 0) {
				uint32_t *c = &count[v->circuit_device[a * m + b]];
				if (++*c > v->most_per_device)
					v->most_per_device = *c;
			}
		for (size_t b = 0; b < m; b++)
			if (v->pair[a * m + b] >= 0)
				count[v->circuit_device[a * m + b]] = 0;
	}
	free(count);
	return 0;
}

int fabric_view_load(struct store *s, int64_t fabric_id, bool details, struct fabric_view *v)
{
	sqlite3_stmt *st =
	    store_stmt(s, "SELECT name, revision, topology, shape, (SELECT count(*) FROM "
	                  "fabric_server fs WHERE fs.fabric_id = fabric.id) FROM fabric "
	                  "WHERE id = ?");
	int rc;

	memset(v, 0, sizeof(*v));
	if (!st)
		return -EIO;
	sqlite3_bind_int64(st, 1, fabric_id);
	if (sqlite3_step(st) != SQLITE_ROW) {
		sqlite3_reset(st);
		return -ENOENT;
	}
	snprintf(v->name, sizeof(v->name), "%s", sqlite3_column_text(st, 0));
	v->revision = sqlite3_column_int64(st, 1);
	rc = fabric_layout_load((const char *)sqlite3_column_text(st, 2),
	                        (const char *)sqlite3_column_text(st, 3),
	                        (uint32_t)sqlite3_column_int64(st, 4), &v->shape);
	sqlite3_reset(st);
	if (rc < 0)
		return -EIO;
	rc = load_members(s, fabric_id, v);
	if (!rc && v->m > FABRIC_VIEW_MAX_SERVERS) {
		free(v->names);
		v->names = NULL;
		return -E2BIG;
	}
	if (!rc)
		rc = load_circuits(s, fabric_id, v, details);
	if (rc)
		fabric_view_free(v);
	return rc;
}
