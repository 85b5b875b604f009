/* POST /v1/plan: the stateless connection policy for M servers. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "api_handlers.h"
#include "domain/fabric.h"
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

void api_plan(struct api_req *req)
{
	static const char *const members[] = { "servers", "devices", "ports_per_device",
		                               "formula", "links",   NULL };
	static const char *const formulas[] = { "auto", "1", "3", NULL };
	static const enum plan_formula formula_of[] = { PLAN_FORMULA_AUTO, PLAN_FORMULA_1,
		                                        PLAN_FORMULA_3 };
	uint64_t m, n, p = 1;
	int f = 0;
	bool want_links = true;
	json_t *body = api_body_object(req);

	if (!body || api_check_members(req, body, NULL, members) < 0 ||
	    api_get_uint(req, body, NULL, "servers", true, 1, PLAN_MAX_SERVERS, &m) < 0 ||
	    api_get_uint(req, body, NULL, "devices", true, 1, PLAN_MAX_DEVICES, &n) < 0 ||
	    api_get_uint(req, body, NULL, "ports_per_device", false, 1, PLAN_MAX_PORTS, &p) < 0 ||
	    api_get_enum(req, body, NULL, "formula", false, formulas, &f) < 0 ||
	    api_get_bool(req, body, NULL, "links", false, &want_links) < 0)
		return;
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
