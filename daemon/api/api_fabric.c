/*
 * Fabric routes: create, read, delete (with ?wait=), and device state
 * changes. What they do to the stored state is fabric.c's.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "api_handlers.h"
#include "decimal.h"
#include "domain/fabric.h"
#include "domain/topo.h"
#include "wait.h"

static struct fabric_ctx ctx_of(struct api_req *req)
{
	return (struct fabric_ctx){ .store = req->env->store,
		                    .desired = req->env->desired,
		                    .units = req->env->units };
}

/*
 * ?view=summary (the fabric without the lists of its plan: what schedulers
 * read often) or ?view=full (the default). 400 naming "view" otherwise.
 */
static int view_parse(struct api_req *req, bool *summary)
{
	const char *v = api_query(req, "view");
	*summary = v && strcmp(v, "summary") == 0;
	if (v && !*summary && strcmp(v, "full") != 0) {
		api_error(req, OFCD_E_INVALID_FIELD, "view",
		          "view must be summary or full, got \"%.64s\"", v);
		return -EINVAL;
	}
	return 0;
}

int api_fabric_layout_parse(struct api_req *req, json_t *body, struct fabric_layout *l)
{
	static const char *const topologies[] = { "auto", "full-mesh", "hyperx", "torus", NULL };
	static const char *const traffics[] = { "allreduce", "alltoall", "mixed", NULL };
	int topology = 0, traffic = -1;
	json_t *shape = json_object_get(body, "shape"), *k;
	size_t i;

	*l = FABRIC_LAYOUT_AUTO;
	if (api_get_enum(req, body, NULL, "topology", false, topologies, &topology) < 0 ||
	    api_get_enum(req, body, NULL, "traffic", false, traffics, &traffic) < 0)
		return -EINVAL;
	/* The enum's order is the API's: auto, full-mesh, hyperx, torus. */
	static const enum plan_topology of[] = { PLAN_TOPO_AUTO, PLAN_TOPO_FULL_MESH,
		                                 PLAN_TOPO_HYPERX, PLAN_TOPO_TORUS };
	l->topology = of[topology];
	l->traffic = traffic < 0 ? -1
	                         : (int[]){ COLL_TRAFFIC_ALLREDUCE, COLL_TRAFFIC_ALLTOALL,
		                            COLL_TRAFFIC_MIXED }[traffic];
	l->given = json_object_get(body, "topology") || shape;
	if (traffic >= 0 && l->topology != PLAN_TOPO_AUTO) {
		api_error(req, OFCD_E_INVALID_FIELD, "traffic",
		          "traffic only guides \"topology\": \"auto\"");
		return -EINVAL;
	}
	if (!shape)
		return 0;
	if (!json_is_array(shape) || json_array_size(shape) < 1 ||
	    json_array_size(shape) > PLAN_MAX_DIMS) {
		api_error(req, OFCD_E_INVALID_FIELD, "shape",
		          "shape must be an array of 1 to %d sizes, one per dimension",
		          PLAN_MAX_DIMS);
		return -EINVAL;
	}
	json_array_foreach(shape, i, k)
	{
		json_int_t v = json_integer_value(k);
		if (!json_is_integer(k) || v < 1 || v > PLAN_MAX_SHAPED_SERVERS) {
			api_error(req, OFCD_E_INVALID_FIELD, "shape",
			          "shape[%zu] must be an integer from 1 to %d", i,
			          PLAN_MAX_SHAPED_SERVERS);
			return -EINVAL;
		}
		l->k[i] = (uint32_t)v;
	}
	l->ndims = (uint32_t)json_array_size(shape);
	/* A grid alone is a HyperX unless the topology says otherwise. */
	if (!json_object_get(body, "topology"))
		l->topology = PLAN_TOPO_HYPERX;
	return 0;
}

/*
 * The body of a create: {"name", "servers", "topology"?, "shape"?,
 * "traffic"?} (for a PUT the name is the path's, api_put_body()). Fills
 * *name, *names (malloc'd, pointing into the body) and *l; returns the count
 * of names, or 0 after replying 400.
 */
static size_t parse_fabric(struct api_req *req, bool put, const char **name, const char ***names,
                           struct fabric_layout *l)
{
	static const char *const members[] = { "name",  "servers", "topology",
		                               "shape", "traffic", NULL };
	json_t *body = put ? api_put_body(req) : api_body_object(req);
	char f[32];
	size_t i;
	json_t *v;

	*names = NULL;
	if (!body || api_check_members(req, body, NULL, members) < 0 ||
	    api_get_name(req, body, NULL, "name", true, name) < 0 ||
	    api_fabric_layout_parse(req, body, l) < 0)
		return 0;
	/* A full mesh's own limit is the planner's refusal, naming the devices it lacks. */
	json_t *servers = json_object_get(body, "servers");
	size_t m = json_array_size(servers);
	if (!json_is_array(servers) || m < 1 || m > PLAN_MAX_SHAPED_SERVERS) {
		api_error(req, OFCD_E_INVALID_FIELD, "servers",
		          "servers must be an array of 1 to %d server names",
		          PLAN_MAX_SHAPED_SERVERS);
		return 0;
	}
	*names = calloc(m, sizeof(**names));
	if (!*names) {
		api_error(req, OFCD_E_INTERNAL, NULL, "out of memory");
		return 0;
	}
	json_array_foreach(servers, i, v)
	{
		snprintf(f, sizeof(f), "servers[%zu]", i);
		(*names)[i] = json_string_value(v);
		if (!(*names)[i] || !auth_valid_name((*names)[i])) {
			api_error(
			    req, OFCD_E_INVALID_FIELD, f,
			    "%s must be a server name of 1 to 64 characters of [A-Za-z0-9._-]", f);
			return 0;
		}
	}
	return m;
}

/* The fabric's view (a placeholder when a wait rebuilds it), its tag and, on 201, location. */
static void fabric_reply(struct api_req *req, unsigned status, int64_t fid, const char *name,
                         double wait, bool summary)
{
	struct store *s = req->env->store;
	/*
	 * A waiting request gets its view when the wait ends: build it once. A
	 * cluster member's wait may end without it (the leader stepped down
	 * while the log took the change): the view of now is its reply then.
	 */
	if (wait > 0 && !req->env->cluster)
		api_reply(req, status, NULL);
	else
		api_fabric_view_reply(req, status, fid, summary);
	api_set_etag(req, topo_fabric_revision(s, fid));
	if (status == 201)
		api_set_location(req, "/v1/fabrics/%s", name);
	wait_hold(req, name, WAIT_FINAL_STATE, wait);
}

/* A fabric written a part at a time (fabric.h, struct fabric_parts), and the reply it gets. */
struct fabric_rest {
	struct fabric_parts *parts;
	struct ofcd_error err; /* a step's refusal */
	char name[65];
	unsigned status;
	double wait;
	bool summary;
	bool removal; /* a delete: its reply is set at once */
};

static int rest_step(void *arg, bool *done)
{
	struct fabric_rest *r = arg;
	return fabric_parts_step(r->parts, done, &r->err);
}

static int rest_abandon(void *arg)
{
	return fabric_parts_drop(((struct fabric_rest *)arg)->parts);
}

static void rest_reply(void *arg, struct api_req *req, int rc)
{
	struct fabric_rest *r = arg;
	if (rc == 0 && r->removal)
		wait_hold(req, r->name, WAIT_REMOVED, r->wait);
	else if (rc == 0)
		fabric_reply(req, r->status, fabric_parts_id(r->parts), r->name, r->wait,
		             r->summary);
	else if (r->err.err != OFCD_OK)
		api_fail(req, &r->err);
	else
		api_error(req, OFCD_E_STORE, NULL, "the change could not be stored, try again");
}

static void rest_drop(void *arg)
{
	struct fabric_rest *r = arg;
	ofcd_error_clear(&r->err);
	fabric_parts_free(r->parts);
	free(r);
}

/*
 * A single node writes a fabric a part at a time, so that a large one never
 * holds the loop (api_continue()); a cluster member's write is one entry of
 * its log, made at once.
 */
static struct fabric_parts **parts_of(struct api_req *req, struct fabric_parts **parts)
{
	*parts = NULL;
	return req->env->cluster ? NULL : parts;
}

/*
 * Leaves the rest of a write to its parts: a create's reply comes with its
 * last part (a placeholder until then), a removal's is the one already set.
 */
static void continue_parts(struct api_req *req, struct fabric_parts *parts, unsigned status,
                           const char *name, double wait, bool summary, bool removal)
{
	struct fabric_rest *r = calloc(1, sizeof(*r));
	if (!r) {
		fabric_parts_free(parts);
		api_error(req, OFCD_E_INTERNAL, NULL, "out of memory");
		return;
	}
	*r = (struct fabric_rest){ .parts = parts,
		                   .status = status,
		                   .wait = wait,
		                   .summary = summary,
		                   .removal = removal };
	snprintf(r->name, sizeof(r->name), "%s", name);
	if (!removal)
		api_reply(req, 202, NULL);
	api_continue(req, &(struct api_slices){ .step = rest_step,
	                                        .abandon = rest_abandon,
	                                        .reply = rest_reply,
	                                        .drop = rest_drop,
	                                        .arg = r,
	                                        .goes_on = removal });
}

/* The reply of a write that created fabric fid, or that its parts create. */
static void created_reply(struct api_req *req, unsigned status, int64_t fid, const char *name,
                          double wait, bool summary, struct fabric_parts *parts)
{
	if (parts)
		continue_parts(req, parts, status, name, wait, summary, false);
	else
		fabric_reply(req, status, fid, name, wait, summary);
}

void api_fabric_create(struct api_req *req)
{
	struct fabric_ctx c = ctx_of(req);
	struct ofcd_error e = { 0 };
	const char **names = NULL;
	const char *name = NULL;
	double wait;
	bool summary;

	if (wait_parse(req, &wait) < 0 || view_parse(req, &summary) < 0)
		return;
	struct fabric_layout layout;
	struct coll_params price;
	size_t m = parse_fabric(req, false, &name, &names, &layout);
	if (m) {
		struct fabric_parts *parts;

		/* After the request is read: the active cost set is a read of the store. */
		api_cost_params(req, &price);
		layout.price = &price;
		int64_t fid = fabric_create(&c, name, names, m, &layout, parts_of(req, &parts), &e);
		if (fid < 0)
			api_fail(req, &e);
		else
			created_reply(req, 201, fid, name, wait, summary, parts);
	}
	free(names);
}

void api_fabric_put(struct api_req *req)
{
	struct fabric_ctx c = ctx_of(req);
	struct ofcd_error e = { 0 };
	const char **names = NULL;
	const char *name = NULL;
	bool created, summary;
	double wait;

	if (wait_parse(req, &wait) < 0 || view_parse(req, &summary) < 0)
		return;
	struct fabric_layout layout;
	struct coll_params price;
	size_t m = parse_fabric(req, true, &name, &names, &layout);
	if (m &&
	    api_if_match(req, topo_fabric_revision(c.store, topo_fabric_id(c.store, name))) == 0) {
		struct fabric_parts *parts;

		api_cost_params(req, &price);
		layout.price = &price;
		int64_t fid =
		    fabric_put(&c, name, names, m, &layout, &created, parts_of(req, &parts), &e);
		if (fid < 0)
			api_fail(req, &e);
		else
			created_reply(req, created ? 201 : 200, fid, name, wait, summary, parts);
	}
	free(names);
}

void api_fabric_list(struct api_req *req)
{
	bool summary;
	if (view_parse(req, &summary) < 0)
		return;
	api_reply(req, 200,
	          json_pack("{s:o}", "fabrics",
	                    topo_fabric_list(req->env->store, req->env->desired, summary)));
}

static int64_t fabric_param(struct api_req *req)
{
	int64_t id = topo_fabric_id(req->env->store, req->params[0]);
	if (!id)
		api_error(req, OFCD_E_NOT_FOUND, "name", "no fabric %s", req->params[0]);
	return id;
}

void api_fabric_get(struct api_req *req)
{
	double wait;
	bool summary;
	if (wait_parse(req, &wait) < 0 || view_parse(req, &summary) < 0)
		return;
	int64_t id = fabric_param(req);
	if (id)
		fabric_reply(req, 200, id, req->params[0], wait, summary);
}

void api_fabric_delete(struct api_req *req)
{
	struct fabric_ctx c = ctx_of(req);
	struct ofcd_error e = { 0 };
	double wait;
	if (wait_parse(req, &wait) < 0)
		return;
	int64_t id = topo_fabric_id(c.store, req->params[0]);
	if (id && api_if_match(req, topo_fabric_revision(c.store, id)) < 0)
		return;
	struct fabric_parts *parts;
	if (fabric_delete(&c, req->params[0], parts_of(req, &parts), &e) < 0) {
		api_fail(req, &e);
		return;
	}
	/* Accepted, not done: the circuits come off the units after the commit. */
	api_reply(req, 202,
	          json_pack("{s:s, s:s}", "deleted", req->params[0], "state", "removing"));
	if (parts)
		continue_parts(req, parts, 202, req->params[0], wait, false, true);
	else
		wait_hold(req, req->params[0], WAIT_REMOVED, wait);
}

void api_device_put(struct api_req *req)
{
	static const char *const members[] = { "state", NULL };
	static const char *const states[] = { "ok", "failed", NULL };
	struct fabric_ctx c = ctx_of(req);
	struct ofcd_error e = { 0 };
	json_t *body = api_body_object(req);
	json_t *fabric;
	int state;
	bool changed;

	if (api_agent_scope(req) < 0)
		return;
	if (!body || api_check_members(req, body, NULL, members) < 0 ||
	    api_get_enum(req, body, NULL, "state", true, states, &state) < 0)
		return;
	int64_t sid = api_server_param(req);
	if (!sid || api_if_match(req, topo_server_revision(c.store, sid)) < 0)
		return;
	json_t *srv = topo_server_json(c.store, sid, false);
	json_int_t devices = json_integer_value(json_object_get(srv, "devices"));
	json_decref(srv);
	uint64_t index;
	/* One spelling per device: "01" and "+1" are not device 1. */
	if (devices < 1 || !decimal_u64(req->params[1], (uint64_t)devices - 1, &index)) {
		api_error(req, OFCD_E_NOT_FOUND, "index", "server %s has devices 0 to %lld, not %s",
		          req->params[0], (long long)devices - 1, req->params[1]);
		return;
	}

	uint32_t idx = (uint32_t)index;
	bool failed = state;
	if (fabric_devices_set(&c, sid, req->params[0], 1, &idx, &failed, &changed, &fabric, &e) <
	    0) {
		api_fail(req, &e);
		return;
	}
	json_t *fabrics = json_array();
	if (fabric)
		json_array_append_new(fabrics, fabric);
	api_reply(req, 200,
	          json_pack("{s:s, s:I, s:s, s:b, s:o}", "server", req->params[0], "device",
	                    (json_int_t)index, "state", states[state], "changed", changed,
	                    "fabrics", fabrics));
	/* The server's tag, so a client can chain If-Match on it. */
	api_set_etag(req, topo_server_revision(c.store, sid));
}
