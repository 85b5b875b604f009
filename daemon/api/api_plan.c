/* POST /v1/plan: the stateless connection policy for M servers. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "api_handlers.h"
#include "domain/fabric.h"
#include "domain/fabric_layout.h"
#include "plan.h"

/*
 * The reply with its links written as text: jansson takes ~15 us per link
 * object, fprintf well under one, and a reply may list 16,384 of them.
 */
static char *reply_with_links(json_t *head, const struct plan_policy *pol, size_t *len)
{
	char *text = NULL, *h = json_dumps(head, JSON_COMPACT);
	size_t hlen = h ? strlen(h) : 0;
	FILE *f = h && hlen > 2 ? open_memstream(&text, len) : NULL;
	if (!f) {
		free(h);
		return NULL;
	}
	/* head is an object: drop its closing brace and go on with "links". */
	fprintf(f, "%.*s,\"links\":[", (int)(hlen - 1), h);
	for (size_t i = 0; i < pol->nlinks; i++) {
		const struct plan_link *l = &pol->links[i];
		fprintf(f,
		        "%s{\"plane\":%u,\"a\":{\"server\":%u,\"device\":%u,\"port\":%u},"
		        "\"b\":{\"server\":%u,\"device\":%u,\"port\":%u}}",
		        i ? "," : "", l->plane, l->a.server, l->a.device, l->a.port, l->b.server,
		        l->b.device, l->b.port);
	}
	fputs("]}\n", f);
	free(h);
	if (fclose(f) != 0) {
		free(text);
		return NULL;
	}
	return text;
}

/*
 * Links one reply may list: building and sending 130,816 of them (512
 * servers) held the loop for two seconds. 16,384 is a 181-server fabric.
 */
#define PLAN_REPLY_MAX_LINKS 16384

/* The what-if of a grid, handed to the compute worker with all it reads. */
struct shaped_job {
	struct fabric_layout layout; /* its price points at price */
	struct coll_params price;
	uint32_t m, n, p;
};

/*
 * Which layout m servers of n devices of p ports get, and for auto the
 * candidates weighed (65,536 servers: about 200 ms, off the loop); its
 * circuits are the fabric's to list.
 */
static void plan_shaped(void *arg, struct api_req *out)
{
	struct shaped_job *j = arg;
	struct ofcd_error e = { 0 };
	struct plan_shape shape;
	json_t *choice = NULL;
	j->layout.price = &j->price;
	if (fabric_layout_choose(&j->layout, j->m, j->n, j->p, &shape, &choice, &e) < 0) {
		api_fail(out, &e);
		return;
	}
	json_t *reply =
	    json_pack("{s:I, s:I, s:I, s:I, s:b}", "servers", (json_int_t)j->m, "devices",
	              (json_int_t)j->n, "ports_per_device", (json_int_t)j->p, "planes",
	              (json_int_t)plan_shape_planes_total(&shape), "feasible", 1);
	fabric_layout_json(reply, &shape, NULL);
	if (shape.topology == PLAN_TOPO_FULL_MESH)
		json_object_set_new(reply, "degree", json_integer(shape.degree));
	if (choice)
		json_object_set_new(reply, "choice", choice);
	api_reply(out, 200, reply);
}

/* Hands the what-if of a grid to the compute worker. */
static void plan_shaped_offload(struct api_req *req, const struct fabric_layout *l, uint64_t m,
                                uint64_t n, uint64_t p)
{
	struct shaped_job *j = calloc(1, sizeof(*j));
	if (!j) {
		api_error(req, OFCD_E_INTERNAL, NULL, "out of memory");
		return;
	}
	*j = (struct shaped_job){
		.layout = *l, .m = (uint32_t)m, .n = (uint32_t)n, .p = (uint32_t)p
	};
	api_cost_params(req, &j->price);
	api_offload(req, plan_shaped, free, j);
}

void api_plan(struct api_req *req)
{
	static const char *const members[] = { "servers", "devices", "ports_per_device",
		                               "formula", "links",   "topology",
		                               "shape",   "traffic", NULL };
	static const char *const formulas[] = { "auto", "1", "3", NULL };
	static const enum plan_formula formula_of[] = { PLAN_FORMULA_AUTO, PLAN_FORMULA_1,
		                                        PLAN_FORMULA_3 };
	uint64_t m, n, p = 1;
	int f = 0;
	bool want_links = true;
	json_t *body = api_body_object(req);

	struct fabric_layout layout;
	if (!body || api_check_members(req, body, NULL, members) < 0 ||
	    api_fabric_layout_parse(req, body, &layout) < 0)
		return;
	/*
	 * Without a topology, formula or links (which only a full mesh has), auto:
	 * the full mesh's what-if where it fits, else the grid a fabric would get.
	 */
	bool shaped = layout.given && !(layout.topology == PLAN_TOPO_FULL_MESH && !layout.ndims);
	bool auto_mesh =
	    !layout.given && !json_object_get(body, "formula") && !json_object_get(body, "links");
	if (api_get_uint(req, body, NULL, "servers", true, 1,
	                 shaped || auto_mesh ? PLAN_MAX_SHAPED_SERVERS : PLAN_MAX_SERVERS,
	                 &m) < 0 ||
	    api_get_uint(req, body, NULL, "devices", true, 1, PLAN_MAX_DEVICES, &n) < 0 ||
	    api_get_uint(req, body, NULL, "ports_per_device", false, 1, PLAN_MAX_PORTS, &p) < 0 ||
	    api_get_enum(req, body, NULL, "formula", false, formulas, &f) < 0 ||
	    api_get_bool(req, body, NULL, "links", false, &want_links) < 0)
		return;
	if (auto_mesh &&
	    (m > PLAN_MAX_SERVERS || plan_planes((uint32_t)m, PLAN_FORMULA_AUTO) > n * p))
		shaped = true;
	if (shaped) {
		if (json_object_get(body, "formula") ||
		    json_is_true(json_object_get(body, "links"))) {
			api_error(req, OFCD_E_INVALID_FIELD,
			          json_object_get(body, "formula") ? "formula" : "links",
			          "a grid's lines each take their formula, and its circuits are "
			          "listed by the fabric it makes: ask without formula and links");
			return;
		}
		plan_shaped_offload(req, &layout, m, n, p);
		return;
	}
	if (want_links && m * (m - 1) / 2 > PLAN_REPLY_MAX_LINKS) {
		api_error(req, OFCD_E_UNPROCESSABLE, "links",
		          "%llu servers have %llu links, more than one reply lists (%d); ask with "
		          "\"links\": false for the plan without them",
		          (unsigned long long)m, (unsigned long long)(m * (m - 1) / 2),
		          PLAN_REPLY_MAX_LINKS);
		return;
	}
	if (formula_of[f] == PLAN_FORMULA_3 && m % 2 == 1) {
		api_error(req, OFCD_E_INVALID_FIELD, "formula",
		          "formula 3 needs an even number of servers, got %llu",
		          (unsigned long long)m);
		return;
	}

	struct plan_policy pol;
	char why[256];
	int rc = plan_policy_compute((uint32_t)m, (uint32_t)n, (uint32_t)p, formula_of[f], &pol);
	if (rc == -EDOM) {
		struct ofcd_error e = { 0 };
		fabric_infeasible(&e, (uint32_t)m, pol.min_devices, (uint32_t)n);
		api_fail(req, &e);
		return;
	}
	if (rc < 0) {
		api_error(req, OFCD_E_INTERNAL, NULL, "planning failed (%d)", rc);
		return;
	}
	if (plan_policy_verify(&pol, why, sizeof(why)) < 0) {
		plan_policy_free(&pol);
		api_error(req, OFCD_E_INTERNAL, NULL, "the plan failed verification: %s", why);
		return;
	}
	char formula[4];
	snprintf(formula, sizeof(formula), "%d", pol.formula);
	json_t *reply =
	    json_pack("{s:I, s:I, s:I, s:I, s:I, s:b, s:s, s:I}", "servers",
	              (json_int_t)pol.servers, "devices", (json_int_t)pol.devices,
	              "ports_per_device", (json_int_t)pol.ports_per_device, "planes",
	              (json_int_t)pol.planes, "min_devices", (json_int_t)pol.min_devices,
	              "feasible", 1, "formula", formula, "nlinks", (json_int_t)pol.nlinks);
	size_t len = 0;
	char *text = want_links ? reply_with_links(reply, &pol, &len) : NULL;
	if (text) {
		api_reply_text(req, 200, "application/json", text, len);
		json_decref(reply);
	} else if (want_links) {
		api_error(req, OFCD_E_INTERNAL, NULL, "out of memory");
		json_decref(reply);
	} else {
		api_reply(req, 200, reply);
	}
	plan_policy_free(&pol);
}
