/* POST /v1/plan: the stateless connection policy for M servers. */
#include <errno.h>
#include <stdio.h>

#include "api_handlers.h"
#include "fabric.h"
#include "plan.h"

/* The 422 every infeasible plan gets, stateless or stored. */
static json_t *link_end(const struct plan_link_end *e)
{
	return json_pack("{s:I, s:I, s:I}", "server", (json_int_t)e->server, "device",
	                 (json_int_t)e->device, "port", (json_int_t)e->port);
}

void api_plan(struct api_req *req)
{
	static const char *const members[] = { "servers", "devices", "ports_per_device", "formula",
		                               NULL };
	static const char *const formulas[] = { "auto", "1", "3", NULL };
	static const enum plan_formula formula_of[] = { PLAN_FORMULA_AUTO, PLAN_FORMULA_1,
		                                        PLAN_FORMULA_3 };
	uint64_t m, n, p = 1;
	int f = 0;
	json_t *body = api_body_object(req);

	if (!body || api_check_members(req, body, NULL, members) < 0 ||
	    api_get_uint(req, body, NULL, "servers", true, 1, PLAN_MAX_SERVERS, &m) < 0 ||
	    api_get_uint(req, body, NULL, "devices", true, 1, PLAN_MAX_DEVICES, &n) < 0 ||
	    api_get_uint(req, body, NULL, "ports_per_device", false, 1, PLAN_MAX_PORTS, &p) < 0 ||
	    api_get_enum(req, body, NULL, "formula", false, formulas, &f) < 0)
		return;
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
	json_t *links = json_array();
	for (size_t i = 0; i < pol.nlinks; i++) {
		const struct plan_link *l = &pol.links[i];
		json_array_append_new(links,
		                      json_pack("{s:I, s:o, s:o}", "plane", (json_int_t)l->plane,
		                                "a", link_end(&l->a), "b", link_end(&l->b)));
	}
	char formula[4];
	snprintf(formula, sizeof(formula), "%d", pol.formula);
	api_reply(req, 200,
	          json_pack("{s:I, s:I, s:I, s:I, s:I, s:b, s:s, s:o}", "servers",
	                    (json_int_t)pol.servers, "devices", (json_int_t)pol.devices,
	                    "ports_per_device", (json_int_t)pol.ports_per_device, "planes",
	                    (json_int_t)pol.planes, "min_devices", (json_int_t)pol.min_devices,
	                    "feasible", 1, "formula", formula, "links", links));
	plan_policy_free(&pol);
}
