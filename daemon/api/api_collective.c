/*
 * Collective routes (documents 001-004): which algorithm to run for a
 * collective on a stored fabric or a what-if size, and the checked
 * round-by-round schedule of one algorithm on a stored fabric, with every
 * transfer between servers mapped to the circuit that carries it.
 *
 * The planner (coll.h) prices and schedules on positions 0..M-1; this file
 * derives its parameters from the topology (server and switch capabilities,
 * the circuits the fabric's plan really has) and turns positions back into
 * server names, devices and OCS ports.
 */
#include <errno.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "api_handlers.h"
#include "coll.h"
#include "coll_fit.h"
#include "decimal.h"
#include "domain/cost_set.h"
#include "log.h"
#include "base/config.h"
#include "domain/fabric.h"
#include "domain/fabric_layout.h"
#include "domain/fabric_view.h"
#include "plan.h"
#include "domain/topo.h"

/* Largest bytes accepted: 1 PiB is far beyond any collective's buffer. */
#define COLL_API_MAX_BYTES (1ull << 50)

/* Replies to a fabric_view_load() failure (rc) on fabric name. */
static void view_error(struct api_req *req, int rc, const struct fabric_view *f, const char *name)
{
	if (rc == -E2BIG)
		api_error(req, OFCD_E_UNPROCESSABLE, "fabric",
		          "fabric %s has %u servers; collectives are priced on fabrics of at most "
		          "%d (the per-pair tables of larger ones would take gigabytes)",
		          name, f->m, FABRIC_VIEW_MAX_SERVERS);
	else
		api_error(req, rc == -ENOMEM ? OFCD_E_INTERNAL : OFCD_E_STORE, NULL,
		          "cannot read fabric %s", name);
}

int api_fabric_view_named(struct api_req *req, const char *name, struct fabric_view *f)
{
	int64_t id = topo_fabric_id(req->env->store, name);
	int rc;

	if (!id) {
		api_error(req, OFCD_E_UNPROCESSABLE, "fabric", "no fabric %s", name);
		return -EINVAL;
	}
	rc = fabric_view_load(req->env->store, id, false, f);
	if (rc < 0) {
		view_error(req, rc, f, name);
		return -EINVAL;
	}
	return 0;
}

/* ---- parameters ---------------------------------------------------------- */

/*
 * The cluster constants come from [cost], so stage transfers and collectives agree; the
 * active parameter set, fitted to the cluster's own runs, goes over them.
 */
void api_cost_params(struct api_req *req, struct coll_params *p)
{
	const struct ofcd_config *cfg = req->env->cfg;

	coll_params_default(p);
	p->alpha_us = cfg->cost.inter_latency_us;
	p->link_gbps = cfg->cost.inter_gbps;
	p->intra_alpha_us = cfg->cost.intra_latency_us;
	p->intra_gbps = cfg->cost.intra_gbps;
	if (cost_set_load(req->env->store, NULL, p) < 0)
		log_warn("cost", "cannot read the active parameter set; pricing without it");
}

static void fab_params(struct api_req *req, const struct fabric_view *f, struct coll_params *p)
{
	api_cost_params(req, p);
	/*
	 * The planner reads 0 as "a full interconnection"; a member without any
	 * circuit is given 1 instead, and the schedule check against the stored
	 * circuits (fab_check_candidates) then refuses what it cannot carry.
	 */
	p->ports_per_server = f->min_degree ? f->min_degree : 1;
	/* A HyperX or torus fabric joins only its lines: the cost model prices what it has. */
	p->shape = fabric_layout_coll_shape(&f->shape);
	/* All-to-all is priced on the devices the stored circuits really end on. */
	p->circuit_device = f->circuit_device;
	p->ports_per_device = f->most_per_device ? f->most_per_device : 1;
	p->offload = f->m > 0 && f->offload;
	p->offload_switch = f->m > 0 && f->one_switch && f->sw_offload;
	p->aggregating_switch = f->m > 0 && f->one_switch && f->sw_aggregating;
	if (p->aggregating_switch) {
		p->switch_buffer = f->sw_buffer;
		p->window = f->sw_window;
	}
}

enum param_kind { PARAM_DOUBLE, PARAM_U32, PARAM_BOOL, PARAM_RELAY, PARAM_SYNC };

static const struct param_field {
	const char *name;
	enum param_kind kind;
	size_t offset;
	double min, max;
} param_fields[] = {
	{ "alpha_us", PARAM_DOUBLE, offsetof(struct coll_params, alpha_us), 0, 1e9 },
	{ "link_gbps", PARAM_DOUBLE, offsetof(struct coll_params, link_gbps), 1e-6, 1e9 },
	{ "intra_alpha_us", PARAM_DOUBLE, offsetof(struct coll_params, intra_alpha_us), 0, 1e9 },
	{ "intra_gbps", PARAM_DOUBLE, offsetof(struct coll_params, intra_gbps), 1e-6, 1e9 },
	{ "gamma_ns_per_byte", PARAM_DOUBLE, offsetof(struct coll_params, gamma_ns_per_byte), 0,
	  1e9 },
	{ "ports_per_server", PARAM_U32, offsetof(struct coll_params, ports_per_server), 0,
	  COLL_MAX_SERVERS - 1 },
	{ "mtu", PARAM_U32, offsetof(struct coll_params, mtu), 256, 1 << 20 },
	{ "segment_bytes", PARAM_U32, offsetof(struct coll_params, segment_bytes), 0, 1 << 20 },
	{ "offload", PARAM_BOOL, offsetof(struct coll_params, offload), 0, 0 },
	{ "offload_switch", PARAM_BOOL, offsetof(struct coll_params, offload_switch), 0, 0 },
	{ "aggregating_switch", PARAM_BOOL, offsetof(struct coll_params, aggregating_switch), 0,
	  0 },
	{ "switch_buffer", PARAM_U32, offsetof(struct coll_params, switch_buffer), 1, 1 << 20 },
	{ "window", PARAM_U32, offsetof(struct coll_params, window), 1, 1 << 20 },
	{ "root", PARAM_U32, offsetof(struct coll_params, root), 0, COLL_MAX_SERVERS - 1 },
	{ "launch_us", PARAM_DOUBLE, offsetof(struct coll_params, launch_us), 0, 1e9 },
	{ "overhead_us", PARAM_DOUBLE, offsetof(struct coll_params, overhead_us), 0, 1e9 },
	{ "switch_alpha_us", PARAM_DOUBLE, offsetof(struct coll_params, switch_alpha_us), 0, 1e9 },
	{ "link_efficiency", PARAM_DOUBLE, offsetof(struct coll_params, link_efficiency), 1e-6, 1 },
	{ "intra_efficiency", PARAM_DOUBLE, offsetof(struct coll_params, intra_efficiency), 1e-6,
	  1 },
	{ "device_link_gbps", PARAM_DOUBLE, offsetof(struct coll_params, device_link_gbps), 0,
	  1e9 },
	{ "ports_per_device", PARAM_U32, offsetof(struct coll_params, ports_per_device), 1,
	  COLL_MAX_SERVERS },
	{ "relay", PARAM_RELAY, offsetof(struct coll_params, relay), 0, 0 },
	{ "sync", PARAM_SYNC, offsetof(struct coll_params, sync), 0, 0 },
};

const char *const api_relay_names[] = { "none", "cut-through", "store-and-forward", NULL };
static const char *const sync_names[] = { "barrier", "pairwise", "dataflow", NULL };

#define NPARAMS (sizeof(param_fields) / sizeof(param_fields[0]))

static const struct param_field *param_find(const char *name)
{
	for (size_t i = 0; name && i < NPARAMS; i++)
		if (strcmp(param_fields[i].name, name) == 0)
			return &param_fields[i];
	return NULL;
}

int api_coll_params_read(struct api_req *req, json_t *body, struct coll_params *p,
                         bool *window_given)
{
	json_t *o = json_object_get(body, "params"), *v;
	const char *key;

	*window_given = false;
	if (!o || json_is_null(o))
		return 0;
	if (!json_is_object(o)) {
		api_error(req, OFCD_E_INVALID_FIELD, "params", "params must be an object");
		return -EINVAL;
	}
	json_object_foreach(o, key, v)
	{
		const struct param_field *pf = param_find(key);
		char *at = (char *)p + (pf ? pf->offset : 0);
		uint64_t u;
		bool b;
		int r;
		enum coll_fit_term t;

		/* A launch per algorithm: "launch_us.<algorithm>". */
		if (!pf && !strncmp(key, "launch_us.", 10) &&
		    coll_fit_term_from_name(key, &t) == 0) {
			double us;
			if (api_get_double(req, o, "params", key, true, 0, 1e9, &us) < 0)
				return -EINVAL;
			coll_fit_term_set(p, t, us);
			continue;
		}
		if (!pf) {
			char f[96];
			api_field(f, sizeof(f), "params", key);
			api_error(req, OFCD_E_INVALID_FIELD, f, "unknown field %s", f);
			return -EINVAL;
		}
		switch (pf->kind) {
		case PARAM_DOUBLE:
			if (api_get_double(req, o, "params", key, true, pf->min, pf->max,
			                   (double *)at) < 0)
				return -EINVAL;
			break;
		case PARAM_U32:
			if (api_get_uint(req, o, "params", key, true, (uint64_t)pf->min,
			                 (uint64_t)pf->max, &u) < 0)
				return -EINVAL;
			*(uint32_t *)at = (uint32_t)u;
			break;
		case PARAM_RELAY:
			if (api_get_enum(req, o, "params", key, true, api_relay_names, &r) < 0)
				return -EINVAL;
			*(enum coll_relay *)at = (enum coll_relay)r;
			break;
		case PARAM_SYNC:
			if (api_get_enum(req, o, "params", key, true, sync_names, &r) < 0)
				return -EINVAL;
			*(enum coll_sync *)at = (enum coll_sync)r;
			break;
		default:
			if (api_get_bool(req, o, "params", key, true, &b) < 0)
				return -EINVAL;
			*(bool *)at = b;
			break;
		}
		if (!strcmp(key, "window") || !strcmp(key, "switch_buffer"))
			*window_given = true;
	}
	return 0;
}

json_t *api_coll_params_json(const struct coll_params *p)
{
	json_t *o = json_object();
	for (size_t i = 0; i < NPARAMS; i++) {
		const struct param_field *pf = &param_fields[i];
		const char *at = (const char *)p + pf->offset;
		json_t *v = pf->kind == PARAM_DOUBLE  ? json_real(*(const double *)at)
		            : pf->kind == PARAM_U32   ? json_integer(*(const uint32_t *)at)
		            : pf->kind == PARAM_RELAY ? json_string(coll_relay_name(p->relay))
		            : pf->kind == PARAM_SYNC  ? json_string(coll_sync_name(p->sync))
		                                      : json_boolean(*(const bool *)at);
		json_object_set_new(o, pf->name, v);
	}
	/* Only the launches set: 17 zeros would hide them. */
	for (unsigned a = 0; a < COLL_ALGORITHM__COUNT; a++)
		if (p->launch_alg_us[a] > 0)
			json_object_set_new(o, coll_fit_term_name(COLL_FIT_LAUNCH_ALG + a),
			                    json_real(p->launch_alg_us[a]));
	return o;
}

/* The 422 of a window that does not fit the switch buffer, naming both. */
static void reply_window(struct api_req *req, const struct coll_params *p,
                         const struct coll_error *e)
{
	api_error_details(req, OFCD_E_UNPROCESSABLE, "window",
	                  json_pack("{s:I, s:I}", "window", (json_int_t)p->window, "switch_buffer",
	                            (json_int_t)p->switch_buffer),
	                  "%s", e->reason);
}

/* ---- POST /v1/collective/select ------------------------------------------ */

const char *const api_collective_names[] = { "allreduce", "allgather", "alltoall", "broadcast",
	                                     NULL };

/* The first server pair (*a < *b) a schedule crosses without a circuit: 0, or -1 if none. */
static int schedule_first_missing(const struct coll_schedule *s, const struct fabric_view *f,
                                  uint32_t *a, uint32_t *b)
{
	for (uint32_t i = 0; i < s->ntransfers; i++) {
		uint32_t x = s->transfers[i].src / s->devices, y = s->transfers[i].dst / s->devices;
		if (x != y && f->pair[(size_t)x * f->m + y] < 0) {
			*a = x < y ? x : y;
			*b = x < y ? y : x;
			return 0;
		}
	}
	return -1;
}

/*
 * A degraded fabric lacks some server pairs, which the planner's per-server
 * circuit count cannot see: an eligible candidate whose schedule crosses a
 * missing pair is refused here, naming the pair. All-to-all always sends
 * between every two servers.
 */
static int fab_check_candidates(const struct fabric_view *f, const struct coll_params *p,
                                struct coll_selection *sel, uint64_t bytes)
{
	sel->chosen = -1;
	for (uint32_t i = 0; i < sel->ncandidates; i++) {
		struct coll_candidate *cd = &sel->candidates[i];
		struct coll_schedule sch;
		uint32_t a, b;

		if (cd->eligible && f->missing && cd->scheduled) {
			bool refuse = false;
			if (sel->collective == COLL_ALLTOALL) {
				refuse = true;
				snprintf(cd->reason, sizeof(cd->reason),
				         "every server sends to every other, and fabric %s lacks "
				         "%llu server pairs",
				         f->name, (unsigned long long)f->missing);
			} else {
				int rc = coll_generate(sel->collective, cd->algorithm, f->m,
				                       f->devices, bytes, p, &sch, NULL);
				if (rc == -ENOMEM) {
					coll_schedule_free(&sch);
					return rc;
				}
				/* Past the schedule size limit the per-server count has to do. */
				if (rc == 0 && schedule_first_missing(&sch, f, &a, &b) == 0) {
					refuse = true;
					snprintf(cd->reason, sizeof(cd->reason),
					         "needs a circuit between %s and %s, which "
					         "fabric %s lacks",
					         f->names[a], f->names[b], f->name);
				}
				coll_schedule_free(&sch);
			}
			if (refuse) {
				cd->eligible = false;
				cd->rounds = 0;
				cd->predicted_us = 0;
				cd->inter_messages = cd->intra_messages = 0;
				cd->circuits = 0;
			}
		}
		if (cd->eligible && (sel->chosen < 0 ||
		                     cd->predicted_us < sel->candidates[sel->chosen].predicted_us))
			sel->chosen = (int)i;
	}
	return 0;
}

/* Ineligible candidates have no time or counts: null, not 0. */
static json_t *candidate_json(const struct coll_candidate *cd)
{
	bool e = cd->eligible;
	return json_pack("{s:s, s:b, s:b, s:s, s:o, s:o, s:o, s:o, s:o}", "algorithm", cd->name,
	                 "eligible", e, "scheduled", cd->scheduled, "reason", cd->reason, "rounds",
	                 e ? json_integer(cd->rounds) : json_null(), "predicted_us",
	                 e ? json_real(cd->predicted_us) : json_null(), "inter_messages",
	                 e ? json_integer((json_int_t)cd->inter_messages) : json_null(),
	                 "intra_messages",
	                 e ? json_integer((json_int_t)cd->intra_messages) : json_null(), "circuits",
	                 e ? json_integer(cd->circuits) : json_null());
}

static json_t *candidates_json(const struct coll_selection *sel)
{
	json_t *a = json_array();
	for (uint32_t i = 0; i < sel->ncandidates; i++)
		json_array_append_new(a, candidate_json(&sel->candidates[i]));
	return a;
}

/*
 * Reads the size: either a stored fabric (loaded into *f) or the what-if
 * servers and devices. A what-if without devices has the fewest the full
 * interconnection of document 000 needs. Returns 0, or -EINVAL after replying.
 */
static int select_size(struct api_req *req, json_t *body, struct fabric_view *f, uint64_t *servers,
                       uint64_t *devices)
{
	const char *fname = NULL;
	bool has_servers = json_object_get(body, "servers") != NULL;

	if (api_get_name(req, body, NULL, "fabric", false, &fname) < 0)
		return -EINVAL;
	if (!fname) {
		if (api_get_uint(req, body, NULL, "servers", true, 1, COLL_MAX_SERVERS, servers) <
		    0)
			return -EINVAL;
		*devices = plan_min_devices((uint32_t)*servers, 1, PLAN_FORMULA_AUTO);
		if (*devices < 1)
			*devices = 1;
		if (api_get_uint(req, body, NULL, "devices", false, 1, COLL_MAX_DEVICES, devices) <
		    0)
			return -EINVAL;
		return 0;
	}
	if (has_servers || json_object_get(body, "devices")) {
		api_error(req, OFCD_E_INVALID_FIELD, has_servers ? "servers" : "devices",
		          "give either fabric or servers and devices: a fabric's size comes from "
		          "its members");
		return -EINVAL;
	}
	if (api_fabric_view_named(req, fname, f) < 0)
		return -EINVAL;
	*servers = f->m;
	*devices = f->devices;
	return 0;
}

/* Maps a planner error about the request to a reply. */
static void reply_coll_error(struct api_req *req, int rc, const struct coll_error *e,
                             const struct coll_params *p, const struct fabric_view *f)
{
	char field[64];

	if (rc == -ENOBUFS) {
		reply_window(req, p, e);
	} else if (rc == -EINVAL && e->field && param_find(e->field)) {
		api_error(req, OFCD_E_INVALID_FIELD,
		          api_field(field, sizeof(field), "params", e->field), "params.%s",
		          e->reason);
	} else if (rc == -EINVAL && e->field && f && f->name[0] &&
	           (!strcmp(e->field, "servers") || !strcmp(e->field, "devices"))) {
		api_error(req, OFCD_E_INFEASIBLE, "fabric", "fabric %s: %s", f->name, e->reason);
	} else if (rc == -EINVAL && e->field) {
		api_error(req, OFCD_E_INVALID_FIELD, e->field, "%s", e->reason);
	} else if (rc == -ENOMEM) {
		api_error(req, OFCD_E_INTERNAL, NULL, "out of memory");
	} else {
		log_error("coll", "unexpected planner error %d: %s", rc, e->reason);
		api_error(req, OFCD_E_INTERNAL, NULL, "collective planner failed (%d): %s", rc,
		          e->reason);
	}
}

/* A what-if's "param_set": price with that set instead of the active one. 0 or -1 (replied). */
static int param_set_read(struct api_req *req, json_t *body, struct coll_params *p)
{
	const char *name = NULL;
	int rc;

	if (api_get_name(req, body, NULL, "param_set", false, &name) < 0)
		return -1;
	if (!name)
		return 0;
	rc = cost_set_load(req->env->store, name, p);
	if (rc == 0)
		api_error(req, OFCD_E_NOT_FOUND, "param_set", "no parameter set %s", name);
	else if (rc < 0)
		api_error(req, OFCD_E_STORE, NULL, "cannot read parameter set %s", name);
	return rc > 0 ? 0 : -1;
}

void api_collective_select(struct api_req *req)
{
	static const char *const members[] = { "collective", "bytes",  "fabric",    "servers",
		                               "devices",    "params", "param_set", NULL };
	json_t *body = api_body_object(req);
	struct fabric_view f = { 0 };
	struct coll_params p;
	struct coll_selection sel;
	struct coll_error err = { 0 };
	uint64_t bytes, servers, devices;
	bool window_given;
	int c, rc;

	if (!body || api_check_members(req, body, NULL, members) < 0 ||
	    api_get_enum(req, body, NULL, "collective", true, api_collective_names, &c) < 0 ||
	    api_get_uint(req, body, NULL, "bytes", true, 1, COLL_API_MAX_BYTES, &bytes) < 0)
		return;
	if (select_size(req, body, &f, &servers, &devices) < 0)
		goto out;
	if (f.name[0])
		fab_params(req, &f, &p);
	else
		api_cost_params(req, &p);
	if (param_set_read(req, body, &p) < 0 ||
	    api_coll_params_read(req, body, &p, &window_given) < 0)
		goto out;
	/*
	 * A what-if on the full interconnection (ports_per_server 0) prices circuits
	 * that only exist when the servers have the devices the plan needs: refuse
	 * the shape /v1/plan refuses, with the same error, rather than price circuits
	 * that cannot exist.
	 */
	uint32_t need = plan_min_devices((uint32_t)servers, 1, PLAN_FORMULA_AUTO);
	if (!f.name[0] && !p.ports_per_server && devices < need) {
		struct ofcd_error e = { 0 };
		fabric_infeasible(&e, (uint32_t)servers, need, (uint32_t)devices);
		api_fail(req, &e);
		goto out;
	}
	if ((p.aggregating_switch || window_given) &&
	    coll_ina_check_window(p.window, p.switch_buffer, &err) == -ENOBUFS) {
		reply_window(req, &p, &err);
		goto out;
	}
	enum coll_collective coll;
	coll_collective_from_name(api_collective_names[c], &coll);
	rc = coll_select(coll, bytes, (uint32_t)servers, (uint32_t)devices, &p, &sel, &err);
	if (rc == 0 || rc == -ENOENT) {
		if (f.name[0] && fab_check_candidates(&f, &p, &sel, bytes) < 0) {
			api_error(req, OFCD_E_INTERNAL, NULL, "out of memory");
			goto out;
		}
		if (sel.chosen < 0) {
			api_error_details(req, OFCD_E_INFEASIBLE, NULL,
			                  json_pack("{s:o}", "candidates", candidates_json(&sel)),
			                  "no %s algorithm fits %s%s%llu servers with these "
			                  "capabilities",
			                  api_collective_names[c], f.name[0] ? f.name : "",
			                  f.name[0] ? ": " : "", (unsigned long long)servers);
			goto out;
		}
	} else {
		reply_coll_error(req, rc, &err, &p, &f);
		goto out;
	}
	const struct coll_candidate *best = &sel.candidates[sel.chosen];
	json_t *o = json_pack("{s:s, s:I, s:I, s:I, s:s, s:f, s:o, s:o}", "collective",
	                      api_collective_names[c], "bytes", (json_int_t)bytes, "servers",
	                      (json_int_t)servers, "devices", (json_int_t)devices, "algorithm",
	                      best->name, "predicted_us", best->predicted_us, "params",
	                      api_coll_params_json(&p), "candidates", candidates_json(&sel));
	if (f.name[0])
		json_object_set_new(o, "fabric", json_string(f.name));
	api_reply(req, 200, o);
out:
	fabric_view_free(&f);
}

/* ---- GET /v1/fabrics/{name}/schedule -------------------------------------- */

/* A required query parameter, or NULL after replying 400. */
static const char *query_required(struct api_req *req, const char *key)
{
	const char *v = api_query(req, key);
	if (!v || !*v)
		api_error(req, OFCD_E_INVALID_FIELD, key, "query parameter %s is required", key);
	return v && *v ? v : NULL;
}

static int query_bytes(struct api_req *req, uint64_t *out)
{
	const char *v = query_required(req, "bytes");
	uint64_t x = 0;

	if (!v)
		return -EINVAL;
	if (!decimal_u64(v, COLL_API_MAX_BYTES, &x) || x < 1) {
		api_error(req, OFCD_E_INVALID_FIELD, "bytes",
		          "bytes must be an integer from 1 to %llu, got \"%.32s\"",
		          COLL_API_MAX_BYTES, v);
		return -EINVAL;
	}
	*out = x;
	return 0;
}

/* Transfers in one page of a schedule: a default that keeps replies small, and a ceiling. */
#define SCHEDULE_PAGE_DEFAULT 4096
#define SCHEDULE_PAGE_MAX     65536

static json_t *circuit_json(const struct fabric_view *f, uint32_t src, uint32_t dst)
{
	const struct fabric_view_circuit *c = &f->circuits[f->pair[(size_t)src * f->m + dst]];
	int s = c->pos[0] == src ? 0 : 1, d = 1 - s;
	return json_pack("{s:s, s:I, s:I, s:I, s:I, s:I, s:I, s:I}", "ocs", c->ocs, "plane",
	                 (json_int_t)c->plane, "src_device", (json_int_t)c->device[s], "src_port",
	                 (json_int_t)c->port[s], "src_ocs_port", (json_int_t)c->ocs_port[s],
	                 "dst_device", (json_int_t)c->device[d], "dst_port", (json_int_t)c->port[d],
	                 "dst_ocs_port", (json_int_t)c->ocs_port[d]);
}

/* A participant as JSON: its server name, or null for "every participant". */
static json_t *who_json(const struct fabric_view *f, const struct coll_schedule *s, uint32_t p)
{
	return p == COLL_EVERY ? json_null() : json_string(f->names[p / s->devices]);
}

/*
 * One page of the schedule: whole rounds from round first on, as long as
 * their transfers stay within limit (the first round always, whatever its
 * size); the chunks with the first page only. *next gets the round the next
 * page starts at (s->nrounds when this one ends the schedule).
 */
static json_t *schedule_json(const struct fabric_view *f, const struct coll_schedule *s,
                             uint32_t first, uint64_t limit, uint32_t *next)
{
	bool per_device = s->collective == COLL_ALLTOALL;
	json_t *chunks = json_array(), *rounds = json_array();
	uint64_t sent = 0;

	for (uint32_t i = 0; first == 0 && i < s->nchunks; i++) {
		const struct coll_chunk *ch = &s->chunks[i];
		json_t *o =
		    json_pack("{s:o, s:o, s:I}", "origin", who_json(f, s, ch->origin), "dest",
		              who_json(f, s, ch->dest), "bytes", (json_int_t)ch->bytes);
		if (per_device) {
			json_object_set_new(o, "origin_device",
			                    ch->origin == COLL_EVERY
			                        ? json_null()
			                        : json_integer(ch->origin % s->devices));
			json_object_set_new(o, "dest_device",
			                    ch->dest == COLL_EVERY
			                        ? json_null()
			                        : json_integer(ch->dest % s->devices));
		}
		json_array_append_new(chunks, o);
	}
	uint32_t r;
	for (r = first; r < s->nrounds; r++) {
		if (r > first && sent + s->rounds[r].count > limit)
			break;
		sent += s->rounds[r].count;
		json_t *ts = json_array();
		for (uint32_t i = 0; i < s->rounds[r].count; i++) {
			const struct coll_transfer *t = coll_round_transfer(s, r, i);
			const uint32_t *refs = coll_transfer_chunks(s, t);
			uint32_t a = t->src / s->devices, b = t->dst / s->devices;
			json_t *ids = json_array();
			for (uint32_t k = 0; k < t->nchunks; k++)
				json_array_append_new(ids, json_integer(refs[k]));
			json_t *o = json_pack("{s:s, s:s, s:s, s:I, s:o, s:o}", "src", f->names[a],
			                      "dst", f->names[b], "op",
			                      t->op == COLL_OP_REDUCE ? "reduce" : "copy", "bytes",
			                      (json_int_t)t->bytes, "chunks", ids, "circuit",
			                      a == b ? json_null() : circuit_json(f, a, b));
			if (per_device) {
				json_object_set_new(o, "src_device",
				                    json_integer(t->src % s->devices));
				json_object_set_new(o, "dst_device",
				                    json_integer(t->dst % s->devices));
			}
			json_array_append_new(ts, o);
		}
		json_array_append_new(
		    rounds, json_pack("{s:I, s:o}", "round", (json_int_t)r, "transfers", ts));
	}
	*next = r;
	if (first) {
		json_decref(chunks);
		return json_pack("{s:o}", "rounds", rounds);
	}
	return json_pack("{s:o, s:o}", "chunks", chunks, "rounds", rounds);
}

/*
 * The server pairs a schedule needs that the fabric lacks, as [[a, b], ...]
 * by name, each once. NULL when out of memory.
 */
static json_t *schedule_missing(const struct fabric_view *f, const struct coll_schedule *s)
{
	uint8_t *seen = calloc((size_t)f->m * f->m, 1);
	json_t *list = json_array();

	if (!seen || !list) {
		free(seen);
		json_decref(list);
		return NULL;
	}
	for (uint32_t i = 0; i < s->ntransfers; i++) {
		uint32_t x = s->transfers[i].src / s->devices, y = s->transfers[i].dst / s->devices;
		uint32_t a = x < y ? x : y, b = x < y ? y : x;
		if (a == b || f->pair[(size_t)a * f->m + b] >= 0 || seen[(size_t)a * f->m + b])
			continue;
		seen[(size_t)a * f->m + b] = 1;
		json_array_append_new(list, json_pack("[s, s]", f->names[a], f->names[b]));
	}
	free(seen);
	return list;
}

/* Replies to a coll_generate() failure on fabric f. */
static void reply_generate_error(struct api_req *req, int rc, const struct coll_error *e,
                                 const struct fabric_view *f, const char *algorithm)
{
	switch (rc) {
	case -EDOM:
		api_error(req, OFCD_E_INFEASIBLE, "algorithm", "%s does not fit fabric %s: %s",
		          algorithm, f->name, e->reason);
		break;
	case -EOPNOTSUPP:
		api_error(req, OFCD_E_UNPROCESSABLE, "algorithm", "%s", e->reason);
		break;
	case -E2BIG:
		api_error(req, OFCD_E_UNPROCESSABLE, "algorithm", "fabric %s is too large: %s",
		          f->name, e->reason);
		break;
	case -EINVAL:
		if (e->field && !strcmp(e->field, "algorithm"))
			api_error(req, OFCD_E_INVALID_FIELD, "algorithm", "%s", e->reason);
		else if (e->field && !strcmp(e->field, "root"))
			api_error(req, OFCD_E_INVALID_FIELD, "root", "%s", e->reason);
		else
			api_error(req, OFCD_E_INFEASIBLE, "algorithm", "fabric %s: %s", f->name,
			          e->reason);
		break;
	default:
		log_error("coll", "fabric %s: generating %s failed (%d): %s", f->name, algorithm,
		          rc, e->reason);
		api_error(req, OFCD_E_INTERNAL, NULL, "cannot generate the schedule: %s",
		          rc == -ENOMEM ? "out of memory" : e->reason);
		break;
	}
}

/* A schedule's page, handed to the compute worker with all it reads. */
struct schedule_job {
	struct fabric_view f;
	struct coll_params p; /* its circuit_device points into f */
	enum coll_collective coll;
	enum coll_algorithm alg;
	char cname[16], aname[32];
	uint64_t bytes, from, limit;
};

static void schedule_job_free(void *arg)
{
	struct schedule_job *j = arg;
	fabric_view_free(&j->f);
	free(j);
}

/* Generates, checks and writes out a schedule's page: 100 ms and more, off the loop. */
static void schedule_page(void *arg, struct api_req *out)
{
	struct schedule_job *j = arg;
	const struct fabric_view *f = &j->f;
	const char *cname = j->cname, *aname = j->aname;
	struct coll_schedule sch = { 0 };
	struct coll_schedule_stats stats;
	struct coll_error err = { 0 };
	double us = 0;

	int rc = coll_generate(j->coll, j->alg, f->m, f->devices, j->bytes, &j->p, &sch, &err);
	if (rc < 0) {
		reply_generate_error(out, rc, &err, f, aname);
		goto out;
	}
	/* The planner's tests prove its generators; a failure here is a bug to report. */
	rc = coll_check(&sch, &err);
	if (rc < 0) {
		log_error("coll", "fabric %s: %s %s schedule failed the checker (%d): %s", f->name,
		          cname, aname, rc, err.reason);
		api_error(out, OFCD_E_INTERNAL, NULL, "the %s schedule failed the checker: %s",
		          aname, err.reason);
		goto out;
	}
	json_t *missing = schedule_missing(f, &sch);
	if (!missing) {
		api_error(out, OFCD_E_INTERNAL, NULL, "out of memory");
		goto out;
	}
	if (json_array_size(missing)) {
		json_t *first = json_array_get(missing, 0);
		size_t more = json_array_size(missing) - 1;
		char also[48] = "";
		if (more)
			snprintf(also, sizeof(also), " (and %zu more pair%s)", more,
			         more == 1 ? "" : "s");
		api_error_details(out, OFCD_E_INFEASIBLE, "algorithm",
		                  json_pack("{s:o}", "missing", missing),
		                  "%s needs a circuit between %s and %s%s, which fabric %s lacks",
		                  aname, json_string_value(json_array_get(first, 0)),
		                  json_string_value(json_array_get(first, 1)), also, f->name);
		goto out;
	}
	json_decref(missing);
	if (j->from && j->from >= sch.nrounds) {
		api_error(out, OFCD_E_INVALID_FIELD, "round",
		          "round must be below %u, the schedule's rounds", sch.nrounds);
		goto out;
	}
	if (coll_schedule_stats(&sch, &stats) < 0 || coll_schedule_cost(&sch, &j->p, &us) < 0) {
		api_error(out, OFCD_E_INTERNAL, NULL, "cannot measure the schedule");
		goto out;
	}
	json_t *names = json_array();
	for (uint32_t i = 0; i < f->m; i++)
		json_array_append_new(names, json_string(f->names[i]));
	json_t *o =
	    json_pack("{s:s, s:I, s:s, s:s, s:I, s:o, s:I, s:f, s:{s:I, s:I, s:I, s:I, s:I, "
	              "s:I, s:I}, s:{s:b}}",
	              "fabric", f->name, "revision", (json_int_t)f->revision, "collective", cname,
	              "algorithm", aname, "bytes", (json_int_t)j->bytes, "servers", names,
	              "devices", (json_int_t)sch.devices, "predicted_us", us, "stats", "rounds",
	              (json_int_t)stats.rounds, "transfers", (json_int_t)stats.transfers,
	              "inter_messages", (json_int_t)stats.inter_messages, "intra_messages",
	              (json_int_t)stats.intra_messages, "max_degree", (json_int_t)stats.max_degree,
	              "max_circuit_load", (json_int_t)stats.max_circuit_load, "bytes_sent",
	              (json_int_t)stats.bytes_sent, "check", "valid", 1);
	uint32_t next;
	json_object_update_new(o, schedule_json(f, &sch, (uint32_t)j->from, j->limit, &next));
	if (next < sch.nrounds)
		json_object_set_new(o, "next_round", json_integer(next));
	api_reply(out, 200, o);
out:
	coll_schedule_free(&sch);
}

void api_fabric_schedule(struct api_req *req)
{
	struct store *s = req->env->store;
	struct schedule_job *j = NULL;

	if (api_offload_full(req))
		return;
	int64_t id = topo_fabric_id(s, req->params[0]);
	if (!id) {
		api_error(req, OFCD_E_NOT_FOUND, "name", "no fabric %s", req->params[0]);
		return;
	}
	if (!(j = calloc(1, sizeof(*j)))) {
		api_error(req, OFCD_E_INTERNAL, NULL, "out of memory");
		return;
	}
	const char *cname = query_required(req, "collective");
	if (!cname)
		goto fail;
	if (coll_collective_from_name(cname, &j->coll) < 0) {
		api_error(req, OFCD_E_INVALID_FIELD, "collective",
		          "collective must be one of: allreduce, allgather, alltoall, broadcast, "
		          "got \"%.64s\"",
		          cname);
		goto fail;
	}
	const char *aname = query_required(req, "algorithm");
	if (!aname)
		goto fail;
	if (coll_algorithm_from_name(aname, &j->alg) < 0) {
		api_error(req, OFCD_E_INVALID_FIELD, "algorithm", "unknown algorithm \"%.64s\"",
		          aname);
		goto fail;
	}
	/* Both names are known ones, and short. */
	snprintf(j->cname, sizeof(j->cname), "%s", cname);
	snprintf(j->aname, sizeof(j->aname), "%s", aname);
	if (query_bytes(req, &j->bytes) < 0 ||
	    api_query_uint(req, "round", 0, UINT32_MAX, 0, &j->from) < 0 ||
	    api_query_uint(req, "limit", 1, SCHEDULE_PAGE_MAX, SCHEDULE_PAGE_DEFAULT, &j->limit) <
	        0)
		goto fail;
	int rc = fabric_view_load(s, id, true, &j->f);
	if (rc < 0) {
		view_error(req, rc, &j->f, req->params[0]);
		goto fail;
	}
	fab_params(req, &j->f, &j->p);
	const char *root = api_query(req, "root");
	if (root) {
		for (j->p.root = 0; j->p.root < j->f.m && strcmp(j->f.names[j->p.root], root) != 0;
		     j->p.root++)
			;
		if (j->p.root == j->f.m) {
			api_error(req, OFCD_E_INVALID_FIELD, "root",
			          "root must be a server of fabric %s, got \"%.64s\"", j->f.name,
			          root);
			goto fail;
		}
	}
	api_offload(req, schedule_page, schedule_job_free, j);
	return;
fail:
	schedule_job_free(j);
}
