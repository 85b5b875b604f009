/*
 * A fabric's layout (fabric_layout.h): the planner chooses, this module says
 * what a request meant, what the store holds and what a view shows.
 */
#include "fabric_layout.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Candidates an auto choice shows: the best few are what an operator compares. */
#define CHOICE_SHOWN 8

struct coll_shape fabric_layout_coll_shape(const struct plan_shape *s)
{
	struct coll_shape c = { 0 };
	if (s->topology == PLAN_TOPO_FULL_MESH)
		return c; /* the cost model's full mesh */
	c.topology = s->topology == PLAN_TOPO_HYPERX ? COLL_TOPO_HYPERX : COLL_TOPO_TORUS;
	c.dims = s->dims;
	memcpy(c.k, s->k, sizeof(c.k[0]) * s->dims);
	return c;
}

char *fabric_layout_grid(const struct plan_shape *s, char *buf, size_t len)
{
	size_t n = 0;
	buf[0] = '\0';
	for (uint32_t i = 0; s->topology != PLAN_TOPO_FULL_MESH && i < s->dims && n < len; i++)
		n += (size_t)snprintf(buf + n, len - n, "%s%u", i ? "x" : "", s->k[i]);
	return buf;
}

static json_t *candidate_json(const struct plan_shape *s, bool fits,
                              const struct coll_shape_price *price)
{
	char grid[64];
	json_t *c = json_pack("{s:s, s:s, s:I, s:I, s:I, s:I, s:b}", "topology",
	                      plan_topology_name(s->topology), "shape",
	                      s->topology == PLAN_TOPO_FULL_MESH
	                          ? "full mesh"
	                          : fabric_layout_grid(s, grid, sizeof(grid)),
	                      "diameter", (json_int_t)s->diameter, "degree", (json_int_t)s->degree,
	                      "planes", (json_int_t)plan_shape_planes_total(s), "bisection",
	                      (json_int_t)plan_shape_bisection(s), "fits", fits);
	if (price && price->eligible) {
		json_object_set_new(c, "predicted_us", json_real(price->predicted_us));
		/* The parts the profile has (a mixed one both). */
		if (price->allreduce_us > 0)
			json_object_set_new(c, "allreduce_us", json_real(price->allreduce_us));
		if (price->alltoall_us > 0)
			json_object_set_new(c, "alltoall_us", json_real(price->alltoall_us));
	}
	return c;
}

/*
 * Auto past the full mesh: the shapes that fit, priced for the job's traffic
 * (mixed when it declared none). A declared traffic takes the fastest; without
 * one the planner's order stands (diameter, bisection, planes), and the prices
 * only inform.
 */
static int choose_auto(const struct fabric_layout *l, uint32_t m, uint32_t n, uint32_t p,
                       struct plan_shape *out, json_t **choice, struct ofcd_error *e)
{
	struct plan_shape cand[CHOICE_SHOWN];
	struct coll_shape cs[CHOICE_SHOWN];
	struct coll_shape_price price[CHOICE_SHOWN];
	size_t count = 0, nfit = 0;
	char why[256];
	int best = 0;
	int rc = plan_shape_choose(m, n, p, PLAN_TOPO_AUTO, NULL, 0, out, why, sizeof(why));
	if (rc == -EDOM)
		return ofcd_fail(e, rc, OFCD_E_INFEASIBLE, "servers", NULL, "%s", why);
	if (rc < 0 ||
	    plan_shape_candidates(m, n, p, PLAN_TOPO_AUTO, cand, CHOICE_SHOWN, &count, &nfit) < 0)
		return ofcd_fail(e, -EINVAL, OFCD_E_INVALID_FIELD, "servers", NULL, "%s", why);
	size_t shown = count < CHOICE_SHOWN ? count : CHOICE_SHOWN;
	size_t priced = nfit < shown ? nfit : shown;
	enum coll_traffic traffic =
	    l->traffic >= 0 ? (enum coll_traffic)l->traffic : COLL_TRAFFIC_MIXED;
	struct coll_params defaults;
	coll_params_default(&defaults);
	for (size_t i = 0; i < priced; i++)
		cs[i] = fabric_layout_coll_shape(&cand[i]);
	bool have_prices =
	    priced > 0 &&
	    coll_profile_shapes(traffic, cs, (uint32_t)priced, m, n ? n : 1,
	                        l->price ? l->price : &defaults, price, &best, NULL) == 0;
	if (have_prices && l->traffic >= 0 && best >= 0)
		*out = cand[best];
	json_t *list = json_array();
	for (size_t i = 0; i < shown; i++)
		json_array_append_new(list,
		                      candidate_json(&cand[i], i < nfit,
		                                     have_prices && i < priced ? &price[i] : NULL));
	*choice =
	    json_pack("{s:s, s:s, s:b, s:o}", "reason", why, "traffic", coll_traffic_name(traffic),
	              "traffic_declared", l->traffic >= 0, "candidates", list);
	if (have_prices && l->traffic >= 0 && best >= 0) {
		char grid[64];
		json_object_set_new(*choice, "reason",
		                    json_sprintf("%s %s predicted fastest for %s traffic (%.1f us)",
		                                 plan_topology_name(out->topology),
		                                 fabric_layout_grid(out, grid, sizeof(grid)),
		                                 coll_traffic_name(traffic),
		                                 price[best].predicted_us));
	}
	return *choice ? 0 : ofcd_fail(e, -ENOMEM, OFCD_E_INTERNAL, NULL, NULL, "out of memory");
}

int fabric_layout_choose(const struct fabric_layout *l, uint32_t m, uint32_t n, uint32_t p,
                         struct plan_shape *out, json_t **choice, struct ofcd_error *e)
{
	char why[256];
	*choice = NULL;
	if (l->topology == PLAN_TOPO_AUTO && !l->ndims) {
		int rc = plan_shape_choose(m, n, p, PLAN_TOPO_AUTO, NULL, 0, out, why, sizeof(why));
		/* A full mesh is every pair one hop apart: nothing to weigh. */
		if (rc == 0 && out->topology == PLAN_TOPO_FULL_MESH)
			return 0;
		return choose_auto(l, m, n, p, out, choice, e);
	}
	int rc = plan_shape_choose(m, n, p, l->topology, l->ndims ? l->k : NULL, l->ndims, out, why,
	                           sizeof(why));
	if (rc == -EDOM)
		return ofcd_fail(e, rc, OFCD_E_INFEASIBLE, l->ndims ? "shape" : "servers", NULL,
		                 "%s", why);
	if (rc < 0)
		return ofcd_fail(e, rc, OFCD_E_INVALID_FIELD, l->ndims ? "shape" : "topology", NULL,
		                 "%s", why);
	return 0;
}

int fabric_layout_load(const char *topology, const char *grid, uint32_t m, struct plan_shape *out)
{
	enum plan_topology t;
	uint32_t k[PLAN_MAX_DIMS], n = 0;
	if (!topology || plan_topology_parse(topology, &t) < 0 || t == PLAN_TOPO_AUTO)
		return -EINVAL;
	if (t == PLAN_TOPO_FULL_MESH)
		return plan_shape_make(t, &m, 1, out, NULL, 0);
	uint64_t product = 1;
	const char *q = grid ? grid : "";
	while (*q && n < PLAN_MAX_DIMS) {
		char *end;
		unsigned long v = strtoul(q, &end, 10);
		if (end == q || v == 0 || v > PLAN_MAX_SHAPED_SERVERS || (*end && *end != 'x') ||
		    (*end == 'x' && !end[1]))
			return -EINVAL;
		k[n++] = (uint32_t)v;
		product *= v;
		q = *end ? end + 1 : end;
	}
	/* A grid of other servers than the fabric's is not its grid. */
	if (*q || !n || product != m)
		return -EINVAL;
	return plan_shape_make(t, k, n, out, NULL, 0);
}

void fabric_layout_json(json_t *f, const struct plan_shape *s, const char *choice_text)
{
	json_object_set_new(f, "topology", json_string(plan_topology_name(s->topology)));
	if (s->topology != PLAN_TOPO_FULL_MESH) {
		json_t *k = json_array();
		for (uint32_t i = 0; i < s->dims; i++)
			json_array_append_new(k, json_integer(s->k[i]));
		json_object_set_new(f, "shape", k);
		json_object_set_new(f, "diameter", json_integer(s->diameter));
		json_object_set_new(f, "degree", json_integer(s->degree));
	}
	if (choice_text)
		json_object_set_new(f, "choice", json_loads(choice_text, 0, NULL));
}
