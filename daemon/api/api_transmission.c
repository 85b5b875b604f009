/*
 * Transmission-method routes (issue 5; document 000, FIG. 14-19). Both only
 * compute (API_F_PURE) with the cost model of planner/cost.h:
 *
 *  - POST /v1/transmission/select prices one stage pair described by hand;
 *  - POST /v1/fabrics/{name}/pipeline prices every consecutive stage pair of
 *    a pipeline laid on a stored fabric, over the circuits its plan holds.
 *
 * The parameters are the [cost] section in force (SIGHUP reloads it) with a
 * request's "params" over them. docs/api.md documents the JSON.
 */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "api_handlers.h"
#include "base/config.h"
#include "coll.h"
#include "cost.h"
#include "domain/topo.h"

/* Bounds the reply: each pair carries every candidate, about 2.5 KB of JSON. */
#define PIPELINE_MAX_STAGES 4096

/*
 * A pair's error, not a request's: the reply stays 200 with the pair unpriced,
 * so that a degraded fabric still gets every other pair priced.
 */
#define PIPELINE_NO_CIRCUIT "no_circuit"

/* Choices built from the model's stable names, so that the API cannot drift from them. */
struct choices {
	const char *v[8];
};

static struct choices aggregation_choices(void)
{
	struct choices c = { { NULL } };
	for (unsigned i = 0; i < 7 && cost_aggregation_name((enum cost_aggregation)i); i++)
		c.v[i] = cost_aggregation_name((enum cost_aggregation)i);
	return c;
}

static struct choices policy_choices(void)
{
	struct choices c = { { NULL } };
	for (unsigned i = 0; i < 7 && cost_policy_name((enum cost_policy)i); i++)
		c.v[i] = cost_policy_name((enum cost_policy)i);
	return c;
}

static struct choices intra_choices(void)
{
	struct choices c = { { NULL } };
	for (unsigned i = 0; i < 7 && cost_intra_name((enum cost_intra)i); i++)
		c.v[i] = cost_intra_name((enum cost_intra)i);
	return c;
}

/* Whole numbers print as integers ("bytes": 16777216, not 16777216.0). */
static json_t *number(double v)
{
	if (v == floor(v) && fabs(v) <= 9007199254740992.0)
		return json_integer((json_int_t)v);
	return json_real(v);
}

static json_t *params_json(const struct cost_params *p)
{
	json_t *o = json_object();
	const char *name;
	double v;

	for (unsigned i = 0; (name = cost_params_name(i)); i++)
		if (cost_params_get(p, name, &v) == 0)
			json_object_set_new(o, name, number(v));
	return o;
}

/*
 * Reads the optional "params" object over *p (the configured values) and
 * checks the result, so that a bad override is named before anything else.
 */
static int get_params(struct api_req *req, json_t *body, struct cost_params *p)
{
	const char *names[COST_PARAM_COUNT + 1];
	json_t *obj = json_object_get(body, "params"), *v;
	const char *key, *bad = NULL;
	char f[96];

	if (!obj || json_is_null(obj))
		return 0;
	if (!json_is_object(obj)) {
		api_error(req, OFCD_E_INVALID_FIELD, "params",
		          "params must be an object of [cost] keys and numbers");
		return -EINVAL;
	}
	for (unsigned i = 0; i <= COST_PARAM_COUNT; i++)
		names[i] = cost_params_name(i);
	if (api_check_members(req, obj, "params", names) < 0)
		return -EINVAL;
	json_object_foreach(obj, key, v)
	{
		if (!json_is_number(v)) {
			api_field(f, sizeof(f), "params", key);
			api_error(req, OFCD_E_INVALID_FIELD, f, "%s must be %s", f,
			          config_cost_range(key));
			return -EINVAL;
		}
		cost_params_set(p, key, json_number_value(v));
	}
	if (cost_params_validate(p, &bad) < 0) {
		double got = 0;
		cost_params_get(p, bad, &got);
		api_field(f, sizeof(f), "params", bad);
		api_error(req, OFCD_E_INVALID_FIELD, f, "%s must be %s, got %g", f,
		          config_cost_range(bad), got);
		return -EINVAL;
	}
	return 0;
}

/*
 * [cost], with the active parameter set's step latencies and efficiencies (a calibration
 * fits them on the collectives' runs): stage transfers and collectives price the same links
 * alike. Without an active set, [cost] as it is.
 */
static void cluster_params(struct api_req *req, struct cost_params *c)
{
	struct coll_params p;

	*c = req->env->cfg->cost;
	api_cost_params(req, &p);
	c->inter_latency_us = p.alpha_us;
	c->inter_gbps = p.link_gbps * p.link_efficiency;
	c->intra_latency_us = p.intra_alpha_us;
	c->intra_gbps = p.intra_gbps * p.intra_efficiency;
}

/* The members both routes share: aggregation, bytes, policy and params. */
static int get_common(struct api_req *req, json_t *body, struct cost_request *cr)
{
	struct choices agg = aggregation_choices(), pol = policy_choices();
	int a = 0, p = COST_POLICY_MIN_COST;

	memset(cr, 0, sizeof(*cr));
	cluster_params(req, &cr->params);
	if (api_get_enum(req, body, NULL, "aggregation", true, agg.v, &a) < 0 ||
	    api_get_double(req, body, NULL, "bytes", true, 0, COST_MAX_BYTES, &cr->bytes) < 0 ||
	    api_get_enum(req, body, NULL, "policy", false, pol.v, &p) < 0 ||
	    get_params(req, body, &cr->params) < 0)
		return -EINVAL;
	cr->aggregation = (enum cost_aggregation)a;
	cr->policy = (enum cost_policy)p;
	return 0;
}

/* One side of POST /v1/transmission/select; 1 when absent and not required. */
static int get_server(struct api_req *req, json_t *body, const char *side, bool required,
                      struct cost_server *out)
{
	static const char *const members[] = { "devices", "p2p", "intra", "circuit_device", NULL };
	struct choices intra = intra_choices();
	json_t *o = json_object_get(body, side);
	uint64_t devices = 0, circuit_device = 0;
	int in = COST_INTRA_FULL_MESH;
	bool p2p = false;

	if (!o || json_is_null(o)) {
		if (!required)
			return 1;
		api_error(req, OFCD_E_INVALID_FIELD, side, "%s is required", side);
		return -EINVAL;
	}
	if (!json_is_object(o)) {
		api_error(req, OFCD_E_INVALID_FIELD, side,
		          "%s must be an object {devices, p2p, intra, circuit_device}", side);
		return -EINVAL;
	}
	if (api_check_members(req, o, side, members) < 0 ||
	    api_get_uint(req, o, side, "devices", true, 1, COST_MAX_DEVICES, &devices) < 0 ||
	    api_get_bool(req, o, side, "p2p", false, &p2p) < 0 ||
	    api_get_enum(req, o, side, "intra", false, intra.v, &in) < 0 ||
	    api_get_uint(req, o, side, "circuit_device", false, 0, COST_MAX_DEVICES - 1,
	                 &circuit_device) < 0)
		return -EINVAL;
	*out = (struct cost_server){ .devices = (unsigned)devices,
		                     .p2p = p2p,
		                     .intra = (enum cost_intra)in,
		                     .circuit_device = (unsigned)circuit_device };
	return 0;
}

/* 400 for what cost_select() refused (the members were read one by one). */
static void reply_bad_request(struct api_req *req, const struct cost_request *cr, const char *bad)
{
	const struct cost_server *sv = strncmp(bad, "target.", 7) == 0 ? &cr->target : &cr->source;
	const char *dot = strchr(bad, '.');

	if (dot && strcmp(dot, ".devices") == 0 && sv->intra == COST_INTRA_TWO_GROUPS)
		api_error(req, OFCD_E_INVALID_FIELD, bad,
		          "%s must be even for a two-groups server (two equal groups), got %u", bad,
		          sv->devices);
	else if (dot && strcmp(dot, ".circuit_device") == 0)
		api_error(req, OFCD_E_INVALID_FIELD, bad,
		          "%s must be below the server's %u devices, got %u", bad, sv->devices,
		          sv->circuit_device);
	else
		api_error(req, OFCD_E_INVALID_FIELD, bad, "%s is out of range", bad);
}

static json_t *operators_json(const struct cost_operator *ops, unsigned n)
{
	json_t *a = json_array();
	for (unsigned i = 0; i < n; i++)
		json_array_append_new(a, json_string(cost_operator_name(ops[i].op, ops[i].scope)));
	return a;
}

/* A method that cannot apply at all (costed false) has no time: null, not 0. */
static json_t *candidate_json(const struct cost_candidate *c)
{
	json_t *steps = json_array();
	for (unsigned i = 0; i < c->n_steps; i++) {
		const struct cost_step *st = &c->steps[i];
		json_array_append_new(steps, json_pack("{s:s, s:s, s:o, s:f}", "scope",
		                                       cost_scope_name(st->scope), "operator",
		                                       cost_op_name(st->op), "bytes",
		                                       number(st->bytes), "us", st->us));
	}
	return json_pack("{s:s, s:i, s:b, s:s, s:o, s:o}", "method", cost_method_name(c->method),
	                 "method_id", (int)c->method, "eligible", c->eligible, "reason", c->reason,
	                 "predicted_us", c->costed ? json_real(c->predicted_us) : json_null(),
	                 "steps", steps);
}

/* Adds the selection's members to o ("policy" only when with_policy). */
static void selection_add(json_t *o, const struct cost_selection *sel, bool with_policy)
{
	json_t *cands = json_array();
	for (unsigned m = 0; m < COST_METHOD_COUNT; m++)
		json_array_append_new(cands, candidate_json(&sel->candidates[m]));
	json_object_set_new(o, "method", json_string(cost_method_name(sel->method)));
	json_object_set_new(o, "method_id", json_integer(sel->method));
	if (with_policy)
		json_object_set_new(o, "policy", json_string(cost_policy_name(sel->policy)));
	json_object_set_new(o, "predicted_us", json_real(sel->predicted_us));
	json_object_set_new(o, "rule", json_string(sel->rule));
	json_object_set_new(o, "operators", operators_json(sel->operators, sel->n_operators));
	json_object_set_new(o, "reverse_operators",
	                    operators_json(sel->reverse_operators, sel->n_operators));
	json_object_set_new(o, "candidates", cands);
}

void api_transmission_select(struct api_req *req)
{
	static const char *const members[] = { "aggregation", "bytes",  "source",      "target",
		                               "policy",      "params", "same_server", NULL };
	json_t *body = api_body_object(req);
	struct cost_request cr;
	struct cost_selection sel;
	const char *bad = "request";
	bool same = false;

	if (!body || api_check_members(req, body, NULL, members) < 0 ||
	    get_common(req, body, &cr) < 0 ||
	    api_get_bool(req, body, NULL, "same_server", false, &same) < 0 ||
	    get_server(req, body, "source", true, &cr.source) < 0 ||
	    get_server(req, body, "target", !same, &cr.target) < 0)
		return;
	cr.same_server = same;
	if (cost_select(&cr, &sel, &bad) < 0) {
		reply_bad_request(req, &cr, bad);
		return;
	}
	json_t *o = json_object();
	selection_add(o, &sel, true);
	json_object_set_new(o, "params", params_json(&cr.params));
	api_reply(req, 200, o);
}

/* ---- pipeline ------------------------------------------------------------- */

static int member_cmp(const void *a, const void *b)
{
	return strcmp((*(const struct topo_member *const *)a)->name,
	              (*(const struct topo_member *const *)b)->name);
}

static int member_key_cmp(const void *key, const void *elem)
{
	return strcmp(key, (*(const struct topo_member *const *)elem)->name);
}

/*
 * Resolves every stage name to a server of the fabric and its cost-model
 * view; replies 422 naming stages[i] when one is not in the fabric or its
 * interconnect cannot be modelled.
 */
static int resolve_stages(struct api_req *req, json_t *stages, const char *fabric,
                          struct topo_member *mem, uint32_t m, const struct topo_member **stage,
                          struct cost_server *srv)
{
	const struct topo_member **byname = malloc((m ? m : 1) * sizeof(*byname));
	size_t n = json_array_size(stages);
	char f[32];
	int rc = 0;

	if (!byname) {
		api_error(req, OFCD_E_INTERNAL, NULL, "out of memory");
		return -ENOMEM;
	}
	for (uint32_t i = 0; i < m; i++)
		byname[i] = &mem[i];
	qsort(byname, m, sizeof(*byname), member_cmp);
	for (size_t i = 0; i < n && rc == 0; i++) {
		const char *name = json_string_value(json_array_get(stages, i));
		const struct topo_member *const *hit =
		    bsearch(name, byname, m, sizeof(*byname), member_key_cmp);
		enum cost_intra intra;

		snprintf(f, sizeof(f), "stages[%zu]", i);
		if (!hit) {
			if (topo_server_id(req->env->store, name))
				api_error(req, OFCD_E_UNPROCESSABLE, f,
				          "%s: server %s is not in fabric %s", f, name, fabric);
			else
				api_error(req, OFCD_E_UNPROCESSABLE, f, "%s: no server %s", f,
				          name);
			rc = -EINVAL;
			break;
		}
		stage[i] = *hit;
		if (cost_parse_intra((*hit)->intra, &intra) < 0 ||
		    (intra == COST_INTRA_TWO_GROUPS && (*hit)->devices % 2)) {
			api_error(req, OFCD_E_UNPROCESSABLE, f,
			          "%s: server %s (%s, %u devices) cannot be priced: a two-groups "
			          "server needs an even number of devices",
			          f, name, (*hit)->intra, (*hit)->devices);
			rc = -EINVAL;
			break;
		}
		srv[i] = (struct cost_server){ .devices = (*hit)->devices,
			                       .p2p = (*hit)->p2p,
			                       .intra = intra };
	}
	free(byname);
	return rc;
}

/* The circuit members of a pair; all null when the pair has no circuit. */
static void pair_circuit(json_t *p, const struct topo_circuit *c)
{
	bool on = c && c->found;
	json_object_set_new(p, "src_device", on ? json_integer(c->src_device) : json_null());
	json_object_set_new(p, "src_port", on ? json_integer(c->src_port) : json_null());
	json_object_set_new(p, "dst_device", on ? json_integer(c->dst_device) : json_null());
	json_object_set_new(p, "dst_port", on ? json_integer(c->dst_port) : json_null());
	json_object_set_new(p, "ocs", on ? json_string(c->ocs) : json_null());
	json_object_set_new(p, "src_ocs_port", on ? json_integer(c->src_ocs_port) : json_null());
	json_object_set_new(p, "dst_ocs_port", on ? json_integer(c->dst_ocs_port) : json_null());
}

/*
 * Prices every pair; returns the pairs array, or NULL after replying 500 on out (the
 * inputs were validated, so a refusal here is a bug or inconsistent rows).
 */
static json_t *pipeline_pairs(struct api_req *out, const char *fabric,
                              const struct cost_request *base, const struct topo_member **stage,
                              const struct cost_server *srv, const struct topo_circuit *circ,
                              size_t n, double *total_us, bool *complete)
{
	json_t *pairs = json_array();
	struct cost_selection sel;
	char msg[256];

	*total_us = 0;
	*complete = true;
	for (size_t k = 0; k + 1 < n; k++) {
		const struct topo_member *a = stage[k], *b = stage[k + 1];
		bool same = a == b;
		struct cost_request cr = *base;
		const char *bad = "request";
		json_t *p = json_pack("{s:I, s:s, s:s}", "stage", (json_int_t)k, "source", a->name,
		                      "target", b->name);

		json_array_append_new(pairs, p);
		pair_circuit(p, same ? NULL : &circ[k]);
		if (!same && !circ[k].found) {
			*complete = false;
			snprintf(msg, sizeof(msg),
			         "no circuit between %s and %s in fabric %s: the pair is missing "
			         "from its plan",
			         a->name, b->name, fabric);
			json_object_set_new(
			    p, "error",
			    json_pack("{s:s, s:s}", "code", PIPELINE_NO_CIRCUIT, "message", msg));
			continue;
		}
		cr.same_server = same;
		cr.source = srv[k];
		cr.target = srv[k + 1];
		if (!same) {
			cr.source.circuit_device = circ[k].src_device;
			cr.target.circuit_device = circ[k].dst_device;
		}
		if (cost_select(&cr, &sel, &bad) < 0) {
			json_decref(pairs);
			api_error(out, OFCD_E_INTERNAL, NULL,
			          "cannot price stages %zu and %zu (%s to %s): %s is out of range",
			          k, k + 1, a->name, b->name, bad);
			return NULL;
		}
		selection_add(p, &sel, false);
		*total_us += sel.predicted_us;
	}
	return pairs;
}

/* A pipeline's pricing, handed to the compute worker with all it reads. */
struct pipeline_job {
	char fabric[65];
	int64_t revision;
	struct cost_request base;
	struct topo_member *mem; /* the fabric's servers, which stage[] points into */
	const struct topo_member **stage;
	struct cost_server *srv;
	struct topo_circuit *circ;
	size_t n;
};

static void pipeline_job_free(void *arg)
{
	struct pipeline_job *j = arg;
	free(j->circ);
	free(j->srv);
	free(j->stage);
	free(j->mem);
	free(j);
}

/* 4,096 stages make 7 MB of JSON: hundreds of milliseconds, off the loop. */
static void pipeline_price(void *arg, struct api_req *out)
{
	struct pipeline_job *j = arg;
	double total_us;
	bool complete;
	json_t *pairs = pipeline_pairs(out, j->fabric, &j->base, j->stage, j->srv, j->circ, j->n,
	                               &total_us, &complete);
	if (!pairs)
		return;
	api_reply(out, 200,
	          json_pack("{s:s, s:I, s:s, s:o, s:o, s:f, s:b}", "fabric", j->fabric, "revision",
	                    (json_int_t)j->revision, "policy", cost_policy_name(j->base.policy),
	                    "params", params_json(&j->base.params), "pairs", pairs, "total_us",
	                    total_us, "complete", complete));
}

void api_pipeline(struct api_req *req)
{
	static const char *const members[] = { "stages", "bytes",  "aggregation",
		                               "policy", "params", NULL };
	struct store *s = req->env->store;
	json_t *body = api_body_object(req);
	struct pipeline_job *j = NULL;
	uint32_t m = 0;
	char f[32];
	size_t i;
	json_t *v;

	if (api_offload_full(req) || !body || api_check_members(req, body, NULL, members) < 0)
		return;
	json_t *stages = json_object_get(body, "stages");
	size_t n = json_array_size(stages);
	if (!json_is_array(stages) || n < 2 || n > PIPELINE_MAX_STAGES) {
		api_error(req, OFCD_E_INVALID_FIELD, "stages",
		          "stages must be an array of 2 to %d server names, one per stage",
		          PIPELINE_MAX_STAGES);
		return;
	}
	json_array_foreach(stages, i, v)
	{
		const char *name = json_string_value(v);
		if (!name || !auth_valid_name(name) || strlen(name) != json_string_length(v)) {
			snprintf(f, sizeof(f), "stages[%zu]", i);
			api_error(req, OFCD_E_INVALID_FIELD, f,
			          "%s must be a server name of 1 to 64 characters of "
			          "[A-Za-z0-9._-]",
			          f);
			return;
		}
	}
	if (!(j = calloc(1, sizeof(*j)))) {
		api_error(req, OFCD_E_INTERNAL, NULL, "out of memory");
		return;
	}
	if (get_common(req, body, &j->base) < 0)
		goto fail;
	int64_t fid = topo_fabric_id(s, req->params[0]);
	if (!fid) {
		api_error(req, OFCD_E_NOT_FOUND, "name", "no fabric %s", req->params[0]);
		goto fail;
	}
	if (topo_fabric_members(s, fid, &j->mem, &m) < 0) {
		api_error(req, OFCD_E_STORE, NULL, "cannot read fabric %s", req->params[0]);
		goto fail;
	}
	j->n = n;
	j->stage = calloc(n, sizeof(*j->stage));
	j->srv = calloc(n, sizeof(*j->srv));
	j->circ = calloc(n - 1, sizeof(*j->circ));
	if (!j->stage || !j->srv || !j->circ) {
		api_error(req, OFCD_E_INTERNAL, NULL, "out of memory");
		goto fail;
	}
	if (resolve_stages(req, stages, req->params[0], j->mem, m, j->stage, j->srv) < 0)
		goto fail;
	for (i = 0; i + 1 < n; i++) {
		j->circ[i].src = j->stage[i]->position;
		j->circ[i].dst = j->stage[i + 1]->position;
	}
	if (topo_fabric_circuits(s, fid, j->circ, n - 1) < 0) {
		api_error(req, OFCD_E_STORE, NULL, "cannot read the circuits of fabric %s",
		          req->params[0]);
		goto fail;
	}
	snprintf(j->fabric, sizeof(j->fabric), "%s", req->params[0]);
	j->revision = topo_fabric_revision(s, fid);
	api_offload(req, pipeline_price, pipeline_job_free, j);
	return;
fail:
	pipeline_job_free(j);
}
