/*
 * Topology routes: OCS units, servers, wiring (cabling) and the whole
 * topology at once. Handlers check the form of the request, hand the values
 * to the domain (topo_apply.h) and reply; api_dispatch() wraps each write in
 * one transaction that a refusal rolls back.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <event2/event.h>

#include "api_handlers.h"
#include "wait.h"
#include "base/metrics.h"
#include "jsonin.h"
#include "domain/inventory.h"
#include "plan.h"
#include "reconcile/reconcile.h"
#include "domain/topo.h"
#include "domain/topo_apply.h"

/* ---- reading the form ----------------------------------------------------
 *
 * Request-free, so that a topology's body can be read off the loop
 * (api_topology_prepare()): each reader fills e with the refusal.
 */

/* jsonin's refusal (a field's form) as the request's: 400, the field named. */
static int form_fail(struct ofcd_error *e, const struct jsonin_err *je)
{
	return ofcd_fail(e, -EINVAL, OFCD_E_INVALID_FIELD, je->field[0] ? je->field : NULL, NULL,
	                 "%s", je->msg);
}

static int not_object(struct ofcd_error *e, const char *prefix)
{
	return ofcd_fail(e, -EINVAL, OFCD_E_INVALID_FIELD, prefix, NULL, "%s must be an object",
	                 prefix ? prefix : "body");
}

static int parse_ocs(json_t *o, const char *prefix, struct topo_ocs_spec *out, struct ofcd_error *e)
{
	static const char *const members[] = { "name", "driver", "ports", "endpoint", NULL };
	struct jsonin_err je;
	uint64_t ports = 0;
	*out = (struct topo_ocs_spec){ .driver = "sim", .endpoint = "" };

	if (!json_is_object(o))
		return not_object(e, prefix);
	int rc = jsonin_check_members_strict(&je, o, prefix, members);
	if (rc >= 0)
		rc = jsonin_name(&je, o, prefix, "name", true, &out->name);
	if (rc >= 0)
		rc = jsonin_string(&je, o, prefix, "driver", false, 1, 32, &out->driver);
	if (rc >= 0)
		rc = jsonin_uint(&je, o, prefix, "ports", true, 1, TOPO_OCS_MAX_PORTS, &ports);
	out->ports = (uint32_t)ports;
	json_t *ep = json_object_get(o, "endpoint");
	if (rc >= 0 && !(ep && json_is_string(ep) && json_string_length(ep) == 0))
		rc = jsonin_string(&je, o, prefix, "endpoint", false, 1, TOPO_ENDPOINT_MAX_LEN,
		                   &out->endpoint);
	return rc < 0 ? form_fail(e, &je) : topo_ocs_check(out, prefix, e);
}

static int parse_server(json_t *o, const char *prefix, struct topo_server_spec *out,
                        struct ofcd_error *e)
{
	/* null is how GET shows a server without a switch, so PUT takes it back. */
	static const char *const members[] = { "name",  "devices", "ports_per_device", "p2p",
		                               "intra", "offload", "switch?",          NULL };
	struct jsonin_err je;
	uint64_t devices = 0, ports = 1;
	*out = (struct topo_server_spec){ .ports_per_device = 1 };
	if (!json_is_object(o))
		return not_object(e, prefix);
	int rc = jsonin_check_members_strict(&je, o, prefix, members);
	if (rc >= 0)
		rc = jsonin_name(&je, o, prefix, "name", true, &out->name);
	if (rc >= 0)
		rc = jsonin_uint(&je, o, prefix, "devices", true, 1, PLAN_MAX_DEVICES, &devices);
	if (rc >= 0)
		rc = jsonin_uint(&je, o, prefix, "ports_per_device", false, 1, PLAN_MAX_PORTS,
		                 &ports);
	if (rc >= 0)
		rc = jsonin_bool(&je, o, prefix, "p2p", false, &out->p2p);
	if (rc >= 0)
		rc = jsonin_enum(&je, o, prefix, "intra", false, topo_intra_names, &out->intra);
	if (rc >= 0)
		rc = jsonin_bool(&je, o, prefix, "offload", false, &out->offload);
	if (rc >= 0)
		rc = jsonin_name(&je, o, prefix, "switch", false, &out->sw);
	out->devices = (uint32_t)devices;
	out->ports_per_device = (uint32_t)ports;
	return rc < 0 ? form_fail(e, &je) : topo_server_check(out, prefix, e);
}

static int parse_switch(json_t *o, const char *prefix, struct topo_switch_spec *out,
                        struct ofcd_error *e)
{
	static const char *const members[] = { "name",    "aggregating", "offload",
		                               "buffer?", "window?",     NULL };
	struct jsonin_err je;
	uint64_t buffer = 0, window = 0;

	*out = (struct topo_switch_spec){ 0 };
	if (!json_is_object(o))
		return not_object(e, prefix);
	int rc = jsonin_check_members_strict(&je, o, prefix, members);
	if (rc >= 0)
		rc = jsonin_name(&je, o, prefix, "name", true, &out->name);
	if (rc >= 0)
		rc = jsonin_bool(&je, o, prefix, "aggregating", false, &out->aggregating);
	if (rc >= 0)
		rc = jsonin_bool(&je, o, prefix, "offload", false, &out->offload);
	if (rc >= 0)
		rc = jsonin_uint(&je, o, prefix, "buffer", false, 1, TOPO_SWITCH_MAX_MESSAGES,
		                 &buffer);
	if (rc >= 0)
		rc = jsonin_uint(&je, o, prefix, "window", false, 1, TOPO_SWITCH_MAX_MESSAGES,
		                 &window);
	out->buffer = (uint32_t)buffer;
	out->window = (uint32_t)window;
	return rc < 0 ? form_fail(e, &je) : topo_switch_check(out, prefix, e);
}

static int parse_link(json_t *l, const char *f, struct topo_link_spec *out, struct ofcd_error *e)
{
	static const char *const members[] = {
		"server", "device", "port", "ocs", "ocs_port", NULL
	};
	struct jsonin_err je;
	uint64_t dev = 0, port = 0, ocs_port = 0;
	if (!json_is_object(l))
		return not_object(e, f);
	int rc = jsonin_check_members_strict(&je, l, f, members);
	if (rc >= 0)
		rc = jsonin_name(&je, l, f, "server", true, &out->server);
	if (rc >= 0)
		rc = jsonin_uint(&je, l, f, "device", true, 0, PLAN_MAX_DEVICES - 1, &dev);
	if (rc >= 0)
		rc = jsonin_uint(&je, l, f, "port", true, 0, PLAN_MAX_PORTS - 1, &port);
	if (rc >= 0)
		rc = jsonin_name(&je, l, f, "ocs", true, &out->ocs);
	if (rc >= 0)
		rc = jsonin_uint(&je, l, f, "ocs_port", true, 1, TOPO_OCS_MAX_PORTS, &ocs_port);
	out->device = (uint32_t)dev;
	out->port = (uint32_t)port;
	out->ocs_port = (uint32_t)ocs_port;
	return rc < 0 ? form_fail(e, &je) : 0;
}

/* A reader's refusal as the reply: true when it read. */
static bool form_read(struct api_req *req, int rc, struct ofcd_error *e)
{
	if (rc < 0)
		api_fail(req, e);
	return rc == 0;
}

/* Each element of an array, by the reader of its kind. */
enum spec_kind { SPEC_OCS, SPEC_SERVER, SPEC_SWITCH, SPEC_LINK };

static int parse_element(enum spec_kind kind, json_t *o, const char *f, void *out,
                         struct ofcd_error *e)
{
	switch (kind) {
	case SPEC_OCS:
		return parse_ocs(o, f, out, e);
	case SPEC_SERVER:
		return parse_server(o, f, out, e);
	case SPEC_SWITCH:
		return parse_switch(o, f, out, e);
	case SPEC_LINK:
		return parse_link(o, f, out, e);
	}
	return -EINVAL;
}

/* Each element of the array arr as one of the specs (n of them, malloc'd into *out). */
static int parse_array(json_t *arr, const char *field, enum spec_kind kind, size_t size, void **out,
                       size_t *n, struct ofcd_error *e)
{
	char f[96];
	size_t i;
	json_t *v;

	*out = NULL;
	*n = 0;
	if (!json_is_array(arr))
		return ofcd_fail(e, -EINVAL, OFCD_E_INVALID_FIELD, field, NULL,
		                 "%s must be an array", field);
	*out = calloc(json_array_size(arr) + 1, size);
	if (!*out)
		return ofcd_fail(e, -ENOMEM, OFCD_E_INTERNAL, NULL, NULL, "out of memory");
	json_array_foreach(arr, i, v)
	{
		snprintf(f, sizeof(f), "%s[%zu]", field, i);
		if (parse_element(kind, v, f, (char *)*out + i * size, e) < 0)
			return -EINVAL;
	}
	*n = json_array_size(arr);
	return 0;
}

/* A wiring object {"rule"} or {"links"}; *links (malloc'd) backs out->links. */
static int parse_wiring(json_t *wiring, const char *prefix, struct topo_wiring_spec *out,
                        struct topo_link_spec **links, struct ofcd_error *e)
{
	static const char *const members[] = { "rule", "links", NULL };
	struct jsonin_err je;
	char f[96];
	void *v = NULL;

	*out = (struct topo_wiring_spec){ .rule = -1 };
	*links = NULL;
	if (!json_is_object(wiring))
		return not_object(e, prefix);
	if (jsonin_check_members_strict(&je, wiring, prefix, members) < 0 ||
	    jsonin_enum(&je, wiring, prefix, "rule", false, topo_wiring_rules, &out->rule) < 0)
		return form_fail(e, &je);
	json_t *l = json_object_get(wiring, "links");
	if ((out->rule >= 0) == (l != NULL))
		return ofcd_fail(e, -EINVAL, OFCD_E_INVALID_FIELD,
		                 ofcd_field(f, sizeof(f), prefix, "rule"), NULL,
		                 "give either rule or links");
	if (out->rule >= 0)
		return 0;
	int rc = parse_array(l, ofcd_field(f, sizeof(f), prefix, "links"), SPEC_LINK,
	                     sizeof(**links), &v, &out->nlinks, e);
	*links = v;
	out->links = *links;
	return rc;
}

/* ---- OCS units ----------------------------------------------------------- */

static void ocs_reply(struct api_req *req, unsigned status, int64_t id, const char *name)
{
	struct store *s = req->env->store;
	api_reply(req, status, topo_ocs_json(s, id));
	api_set_etag(req, topo_ocs_revision(s, id));
	if (status == 201)
		api_set_location(req, "/v1/ocs/%s", name);
}

void api_ocs_create(struct api_req *req)
{
	struct ofcd_error e = { 0 };
	struct topo_ocs_spec o;
	json_t *body = api_body_object(req);
	if (!body || !form_read(req, parse_ocs(body, NULL, &o, &e), &e))
		return;
	int64_t id = topo_ocs_add(req->env->store, &o, &e);
	if (id < 0)
		api_fail(req, &e);
	else
		ocs_reply(req, 201, id, o.name);
}

void api_ocs_put(struct api_req *req)
{
	struct store *s = req->env->store;
	struct ofcd_error e = { 0 };
	struct topo_ocs_spec o;
	bool created;
	json_t *body = api_put_body(req);
	if (!body || !form_read(req, parse_ocs(body, NULL, &o, &e), &e) ||
	    api_if_match(req, topo_ocs_revision(s, topo_ocs_id(s, o.name))) < 0)
		return;
	int64_t id = topo_ocs_put(s, &o, &created, &e);
	if (id < 0)
		api_fail(req, &e);
	else
		ocs_reply(req, created ? 201 : 200, id, o.name);
}

/* 200 {key: list}, or 503 when the store could not give the whole list (NULL). */
static void reply_list(struct api_req *req, const char *key, json_t *list)
{
	if (list)
		api_reply(req, 200, json_pack("{s:o}", key, list));
	else
		api_error(req, OFCD_E_STORE, NULL, "cannot read the %s, try again", key);
}

void api_ocs_list(struct api_req *req)
{
	reply_list(req, "ocs", topo_ocs_list(req->env->store));
}

static int64_t ocs_param(struct api_req *req)
{
	int64_t id = topo_ocs_id(req->env->store, req->params[0]);
	if (!id)
		api_error(req, OFCD_E_NOT_FOUND, "name", "no OCS unit %s", req->params[0]);
	return id;
}

void api_ocs_get(struct api_req *req)
{
	int64_t id = ocs_param(req);
	if (!id)
		return;
	json_t *o = topo_ocs_json(req->env->store, id);
	json_t *live = reconcile_unit_json(req->env->reconciler, id);
	api_set_etag(req, topo_ocs_revision(req->env->store, id));
	if (live) {
		json_t *conn = json_pack("{s:O, s:O, s:O}", "state", json_object_get(live, "state"),
		                         "last_error", json_object_get(live, "last_error"),
		                         "in_sync", json_object_get(live, "in_sync"));
		json_object_set_new(o, "connection", conn);
		json_object_set(o, "ports_down", json_object_get(live, "ports_down"));
		json_object_set(o, "foreign", json_object_get(live, "foreign"));
		json_decref(live);
	}
	api_reply(req, 200, o);
}

void api_ocs_delete(struct api_req *req)
{
	struct ofcd_error e = { 0 };
	const char *force = api_query(req, "force");
	int64_t id = ocs_param(req);
	if (!id || api_if_match(req, topo_ocs_revision(req->env->store, id)) < 0)
		return;
	if (force && strcmp(force, "true") != 0) {
		api_error(req, OFCD_E_INVALID_FIELD, "force", "force must be true when given");
		return;
	}
	if (topo_ocs_remove(req->env->store, req->env->units, req->params[0], force != NULL, &e) <
	    0)
		api_fail(req, &e);
	else
		api_reply(req, 200, json_pack("{s:s}", "deleted", req->params[0]));
}

void api_ocs_cross_connects(struct api_req *req)
{
	int64_t id = ocs_param(req);
	if (!id)
		return;
	json_t *desired = topo_desired_json(req->env->store, id);
	json_t *live = reconcile_unit_json(req->env->reconciler, id);
	json_t *actual = live ? json_incref(json_object_get(live, "actual")) : json_array();
	json_t *o = json_pack("{s:s, s:o, s:o, s:b}", "ocs", req->params[0], "desired", desired,
	                      "actual", actual, "in_sync",
	                      live && json_is_true(json_object_get(live, "in_sync")) &&
	                          json_equal(desired, actual));
	if (live) {
		json_object_set(o, "partial", json_object_get(live, "partial"));
		json_object_set(o, "foreign", json_object_get(live, "foreign"));
		json_decref(live);
	}
	api_reply(req, 200, o);
}

/* ---- switches ------------------------------------------------------------ */

static void switch_reply(struct api_req *req, unsigned status, const char *name)
{
	struct store *s = req->env->store;
	api_reply(req, status, topo_switch_json(s, name));
	api_set_etag(req, topo_switch_revision(s, name));
	if (status == 201)
		api_set_location(req, "/v1/switches/%s", name);
}

void api_switch_create(struct api_req *req)
{
	struct ofcd_error e = { 0 };
	struct topo_switch_spec w;
	json_t *body = api_body_object(req);

	if (!body || !form_read(req, parse_switch(body, NULL, &w, &e), &e))
		return;
	if (topo_switch_add(req->env->store, &w, &e) < 0)
		api_fail(req, &e);
	else
		switch_reply(req, 201, w.name);
}

void api_switch_put(struct api_req *req)
{
	struct store *s = req->env->store;
	struct ofcd_error e = { 0 };
	struct topo_switch_spec w;
	bool created;
	json_t *body = api_put_body(req);

	if (!body || !form_read(req, parse_switch(body, NULL, &w, &e), &e) ||
	    api_if_match(req, topo_switch_revision(s, w.name)) < 0)
		return;
	if (topo_switch_put(s, &w, &created, &e) < 0)
		api_fail(req, &e);
	else
		switch_reply(req, created ? 201 : 200, w.name);
}

void api_switch_list(struct api_req *req)
{
	reply_list(req, "switches", topo_switch_list(req->env->store, true));
}

void api_switch_get(struct api_req *req)
{
	json_t *o = topo_switch_json(req->env->store, req->params[0]);
	if (!o) {
		api_error(req, OFCD_E_NOT_FOUND, "name", "no switch %s", req->params[0]);
		return;
	}
	api_reply(req, 200, o);
	api_set_etag(req, topo_switch_revision(req->env->store, req->params[0]));
}

void api_switch_delete(struct api_req *req)
{
	struct ofcd_error e = { 0 };
	int64_t rev = topo_switch_revision(req->env->store, req->params[0]);
	/* No such switch: the 404 below, whatever If-Match says. */
	if (rev && api_if_match(req, rev) < 0)
		return;
	if (topo_switch_remove(req->env->store, req->params[0], &e) < 0)
		api_fail(req, &e);
	else
		api_reply(req, 200, json_pack("{s:s}", "deleted", req->params[0]));
}

/* ---- servers ------------------------------------------------------------- */

static void server_reply(struct api_req *req, unsigned status, int64_t id, const char *name)
{
	struct store *s = req->env->store;
	api_reply(req, status, topo_server_json(s, id, true));
	api_set_etag(req, topo_server_revision(s, id));
	if (status == 201)
		api_set_location(req, "/v1/servers/%s", name);
}

void api_server_create(struct api_req *req)
{
	struct ofcd_error e = { 0 };
	struct topo_server_spec v;
	json_t *body = api_body_object(req);
	if (!body || !form_read(req, parse_server(body, NULL, &v, &e), &e))
		return;
	int64_t id = topo_server_add(req->env->store, &v, &e);
	if (id < 0)
		api_fail(req, &e);
	else
		server_reply(req, 201, id, v.name);
}

void api_server_put(struct api_req *req)
{
	struct store *s = req->env->store;
	struct ofcd_error e = { 0 };
	struct topo_server_spec v;
	bool created;
	json_t *body = api_put_body(req);
	if (!body || !form_read(req, parse_server(body, NULL, &v, &e), &e) ||
	    api_if_match(req, topo_server_revision(s, topo_server_id(s, v.name))) < 0)
		return;
	int64_t id = topo_server_put(s, &v, &created, &e);
	if (id < 0)
		api_fail(req, &e);
	else
		server_reply(req, created ? 201 : 200, id, v.name);
}

/*
 * ?joined=true: the servers whose ports a unit may still join to another
 * port, each as listed plus its "joined". Only the cables of units that may
 * join a port are read: none, usually.
 */
static void server_list_joined(struct api_req *req, const struct topo_names *stale)
{
	struct store *s = req->env->store;
	json_t *joined = topo_servers_joined(s, req->env->units), *j;
	json_t *list = json_array();
	size_t i;
	json_array_foreach(joined, i, j)
	{
		int64_t id = (int64_t)json_integer_value(json_object_get(j, "id"));
		json_t *v = topo_server_json(s, id, false);
		if (!v)
			continue; /* the store fails: the reply below says so */
		const char *name = json_string_value(json_object_get(v, "name"));
		json_object_set_new(v, "stale",
		                    json_boolean(name && stale->n &&
		                                 bsearch(&name, stale->v, stale->n,
		                                         sizeof(*stale->v), topo_names_cmp)));
		json_object_set(v, "joined", json_object_get(j, "joined"));
		json_array_append_new(list, v);
	}
	if (joined && json_array_size(list) == json_array_size(joined))
		api_reply(req, 200, json_pack("{s:o}", "servers", list));
	else {
		json_decref(list);
		api_error(req, OFCD_E_STORE, NULL, "cannot read the servers, try again");
	}
	json_decref(joined);
}

/* Written as text from the rows: as JSON values, 32,768 servers held the loop 250 ms. */
void api_server_list(struct api_req *req)
{
	const char *joined = api_query(req, "joined");
	if (joined && strcmp(joined, "true") != 0) {
		api_error(req, OFCD_E_INVALID_FIELD, "joined", "joined must be true, got \"%s\"",
		          joined);
		return;
	}
	if (joined && !api_units_known(req))
		return;
	struct topo_names stale;
	size_t len = 0;
	if (joined) {
		if (inventory_stale_names(req->env->store, &stale) == 0)
			server_list_joined(req, &stale);
		else
			api_error(req, OFCD_E_STORE, NULL, "cannot read the servers, try again");
		topo_names_free(&stale);
		return;
	}
	char *text = inventory_stale_names(req->env->store, &stale) == 0
	                 ? topo_servers_text(req->env->store, &stale, &len)
	                 : NULL;
	topo_names_free(&stale);
	if (text)
		api_reply_text(req, 200, "application/json", text, len);
	else
		api_error(req, OFCD_E_STORE, NULL, "cannot read the servers, try again");
}

void api_server_get(struct api_req *req)
{
	double wait;
	if (wait_parse(req, &wait) < 0)
		return;
	int64_t id = api_server_param(req);
	if (!id || (api_query(req, "wait") && !api_units_known(req)))
		return;
	api_server_view_reply(req, id);
	wait_hold(req, req->params[0], WAIT_SERVER_FREE, wait);
}

void api_server_delete(struct api_req *req)
{
	struct ofcd_error e = { 0 };
	int64_t id = topo_server_id(req->env->store, req->params[0]);
	if (id && api_if_match(req, topo_server_revision(req->env->store, id)) < 0)
		return;
	if (topo_server_remove(req->env->store, req->params[0], &e) < 0)
		api_fail(req, &e);
	else
		api_reply(req, 200, json_pack("{s:s}", "deleted", req->params[0]));
}

/* ---- views tagged by their content: wiring and topology -------------------- */

/* The topology's view, or the wiring's, as text (topo.h). */
static char *view_text(struct store *s, bool topology, size_t *len)
{
	return topology ? topo_json_text(s, len) : topo_wiring_text(s, len);
}

/*
 * A view, tagged by its text. After parts already committed (stored) a view that cannot be
 * read does not turn the write into a failure: the reply says it is stored and where to read
 * it.
 */
static void reply_view(struct api_req *req, struct store *s, bool topology, bool stored)
{
	size_t len = 0;
	char *text = view_text(s, topology, &len);
	if (text) {
		api_set_etag_text(req, text, len);
		api_reply_text(req, 200, "application/json", text, len);
	} else if (stored) {
		api_reply(req, 200,
		          json_pack("{s:s}", "message",
		                    topology ? "the topology is stored; its view could not be read "
		                               "now: GET /v1/topology"
		                             : "the wiring is stored; its view could not be read "
		                               "now: GET /v1/wiring"));
	} else {
		api_error(req, OFCD_E_STORE, NULL, "cannot read the %s",
		          topology ? "topology" : "wiring");
	}
}

/* api_if_match_text() against the stored view: 0 to go on, else the reply is set. */
static int if_match_view(struct api_req *req, struct store *s, bool topology)
{
	size_t len = 0;
	char *text = view_text(s, topology, &len);
	if (!text) {
		api_error(req, OFCD_E_STORE, NULL, "cannot read the %s",
		          topology ? "topology" : "wiring");
		return -EIO;
	}
	int rc = api_if_match_text(req, text, len);
	free(text);
	return rc;
}

/*
 * A rule's cables inserted a part at a time (topo_apply.h, struct
 * topo_cables), so that 2 million of them do not hold the loop; the last part
 * sets the reply, the view a write at once would have had. Everything that
 * can be refused was checked before the first part: the write goes on
 * without its client, and a failing part has the rest inserted at once.
 */
struct cables_rest {
	struct topo_cables *cables;
	struct store *store;
	bool topology; /* the reply is the topology's view, else the wiring's */
};

static int cables_step(void *arg, bool *done)
{
	struct cables_rest *r = arg;
	return topo_cables_step(r->store, r->cables, done);
}

/*
 * The rest at once, after a part failed: from the rule again, not from where
 * the parts were (the failed part's cables were rolled back with it).
 */
static int cables_abandon(void *arg)
{
	struct cables_rest *r = arg;
	return topo_wiring_finish(r->store, false);
}

static void cables_reply(void *arg, struct api_req *req, int rc)
{
	struct cables_rest *r = arg;
	if (rc == 0)
		reply_view(req, r->store, r->topology, true);
	else /* in the handler's own turn: all of it rolled back */
		api_error(req, OFCD_E_STORE, NULL, "the change could not be stored, try again");
}

static void cables_drop(void *arg)
{
	struct cables_rest *r = arg;
	topo_cables_free(r->cables);
	free(r);
}

/* Where a cluster member's write is one entry of its log, made at once. */
static struct topo_cables **cables_of(struct api_req *req, struct topo_cables **cables)
{
	*cables = NULL;
	return req->env->cluster ? NULL : cables;
}

/* The reply of a wiring change, or of its parts when it left some (cables). */
static void cables_continue(struct api_req *req, struct topo_cables *cables, bool topology)
{
	struct store *s = req->env->store;
	struct cables_rest *r = cables ? calloc(1, sizeof(*r)) : NULL;
	if (!r) {
		/* None left, or no room to leave them: at once. */
		if (cables && topo_cables_finish(s, cables) < 0)
			api_error(req, OFCD_E_STORE, NULL, "cannot store the wiring");
		else
			reply_view(req, s, topology, false);
		topo_cables_free(cables);
		return;
	}
	*r = (struct cables_rest){ .cables = cables, .store = s, .topology = topology };
	/* What a client hears only if the write cannot end now: a stop, a failing store. */
	api_reply(req, 202,
	          json_pack("{s:s, s:s}", "state", "storing", "message",
	                    "the cabling is being stored; the next start, or the next write "
	                    "once the store takes it, finishes it"));
	api_continue(req, &(struct api_slices){ .step = cables_step,
	                                        .abandon = cables_abandon,
	                                        .reply = cables_reply,
	                                        .drop = cables_drop,
	                                        .arg = r,
	                                        .goes_on = true });
}

/* ---- wiring -------------------------------------------------------------- */

void api_wiring_put(struct api_req *req)
{
	struct ofcd_error e = { 0 };
	struct topo_wiring_spec w;
	struct topo_link_spec *links = NULL;
	json_t *body = api_body_object(req);
	struct topo_cables *cables;
	if (body && form_read(req, parse_wiring(body, NULL, &w, &links, &e), &e) &&
	    if_match_view(req, req->env->store, false) == 0) {
		if (topo_wiring_apply(req->env->store, req->env->units, &w, NULL,
		                      cables_of(req, &cables), &e) < 0)
			api_fail(req, &e);
		else
			cables_continue(req, cables, false);
	}
	free(links);
}

/*
 * Links a turn of GET /v1/wiring writes: about 15 ms. At 32,768 servers its 2.1 million
 * links held the loop 3.6 s written at once (the console asks for them when it opens).
 */
#define WIRING_LINKS_A_TURN 8192

/* A GET /v1/wiring being written, a part per turn, and tagged as it grows. */
struct wiring_get {
	struct api_req *req;
	struct topo_wiring_job *job;
	struct event *turn;
	uint64_t hash; /* api_text_hash() of the text's first hashed bytes */
	size_t hashed;
};

/* The bytes written since the last call into the tag's hash. */
static void wiring_get_hash(struct wiring_get *g, const char *text, size_t len)
{
	g->hash = api_text_hash(g->hash, text + g->hashed, len - g->hashed);
	g->hashed = len;
}

static void wiring_get_free(struct wiring_get *g)
{
	if (!g)
		return;
	topo_wiring_job_free(g->job);
	if (g->turn)
		event_free(g->turn);
	free(g);
}

static void on_wiring_get_abort(struct api_req *req, bool conn_closed)
{
	(void)conn_closed; /* the 503 set before suspending is the answer at a shutdown */
	wiring_get_free(req->wait_arg);
}

/* The reply once every link is written, or the error of a part that failed. */
static void wiring_get_end(struct wiring_get *g, int rc)
{
	size_t len = 0;
	char *text = rc == 0 ? topo_wiring_text_end(g->job, &len) : NULL;
	if (rc == 0)
		g->job = NULL;
	if (text) {
		wiring_get_hash(g, text, len);
		api_set_etag_hash(g->req, g->hash);
		api_reply_text(g->req, 200, "application/json", text, len);
	} else {
		api_error(g->req, OFCD_E_STORE, NULL, "cannot read the wiring");
	}
}

static void on_wiring_get_turn(evutil_socket_t fd, short what, void *arg)
{
	struct metrics_loop l = metrics_loop_enter("api");
	struct wiring_get *g = arg;
	struct api_req *req = g->req;
	(void)fd;
	(void)what;
	int rc = topo_wiring_text_step(g->job, WIRING_LINKS_A_TURN);
	if (rc == 1) {
		size_t len = 0;
		const char *text = topo_wiring_text_so_far(g->job, &len);
		wiring_get_hash(g, text, len);
		/* A timer: the loop polls its sockets before the next part. */
		static const struct timeval now = { 0, 0 };
		evtimer_add(g->turn, &now);
	} else {
		wiring_get_end(g, rc);
		req->wait_arg = NULL;
		wiring_get_free(g);
		api_resume(req);
	}
	metrics_loop_leave(l);
}

void api_wiring_get(struct api_req *req)
{
	struct wiring_get *g = calloc(1, sizeof(*g));
	int rc = g ? topo_wiring_text_begin(req->env->store, &g->job) : -ENOMEM;
	if (g)
		g->hash = API_TEXT_HASH_START;
	if (rc == 0)
		rc = topo_wiring_text_step(g->job, WIRING_LINKS_A_TURN);
	if (rc == 1 && !(g->turn = evtimer_new(req->env->base, on_wiring_get_turn, g)))
		rc = -ENOMEM;
	if (rc != 1) {
		/* Written in its first turn; at once for a store in memory (no second connection).
		 */
		if (rc == -ENOTSUP) {
			reply_view(req, req->env->store, false, false);
		} else if (g) {
			g->req = req;
			wiring_get_end(g, rc);
		} else {
			api_error(req, OFCD_E_INTERNAL, NULL, "out of memory");
		}
		wiring_get_free(g);
		return;
	}
	g->req = req;
	/* The answer if the daemon stops before the view is whole. */
	api_error(req, OFCD_E_SHUTTING_DOWN, NULL, "the daemon stopped before the wiring was read");
	api_suspend(req, on_wiring_get_abort, g);
	static const struct timeval now = { 0, 0 };
	evtimer_add(g->turn, &now);
}

/* ---- the whole topology -------------------------------------------------- */

void api_topology_get(struct api_req *req)
{
	reply_view(req, req->env->store, true, false);
}

/* What a PUT /v1/topology says (api_topology_prepare()): t and the arrays behind it. */
struct topo_put {
	struct topo_spec t;
	struct topo_ocs_spec *ocs;
	struct topo_switch_spec *switches;
	struct topo_server_spec *servers;
	struct topo_link_spec *links;
};

void api_topology_prepared_free(void *prepared)
{
	struct topo_put *p = prepared;
	if (p) {
		free(p->ocs);
		free(p->switches);
		free(p->servers);
		free(p->links);
	}
	free(p);
}

static const char *const topology_members[] = { "ocs", "switches?", "servers", "wiring", NULL };

void *api_topology_prepare(json_t *body, struct ofcd_error *e)
{
	struct jsonin_err je;
	if (api_body_check(body, e) < 0)
		return NULL;
	if (jsonin_check_members_strict(&je, body, NULL, topology_members) < 0) {
		form_fail(e, &je);
		return NULL;
	}
	json_t *jo = json_object_get(body, "ocs"), *js = json_object_get(body, "servers");
	if (!json_is_array(jo) || !json_is_array(js)) {
		const char *f = json_is_array(jo) ? "servers" : "ocs";
		ofcd_fail(e, -EINVAL, OFCD_E_INVALID_FIELD, f, NULL, "%s must be an array", f);
		return NULL;
	}
	struct topo_put *p = calloc(1, sizeof(*p));
	if (!p) {
		ofcd_fail(e, -ENOMEM, OFCD_E_INTERNAL, NULL, NULL, "out of memory");
		return NULL;
	}
	p->t.wiring.rule = -1;
	json_t *jw = json_object_get(body, "switches"), *wiring = json_object_get(body, "wiring");
	void *ocs = NULL, *switches = NULL, *servers = NULL;
	int rc = parse_array(jo, "ocs", SPEC_OCS, sizeof(*p->ocs), &ocs, &p->t.nocs, e);
	/* Like the wiring, switches not given are none. */
	if (rc == 0 && jw)
		rc = parse_array(jw, "switches", SPEC_SWITCH, sizeof(*p->switches), &switches,
		                 &p->t.nswitches, e);
	if (rc == 0)
		rc = parse_array(js, "servers", SPEC_SERVER, sizeof(*p->servers), &servers,
		                 &p->t.nservers, e);
	p->t.ocs = p->ocs = ocs;
	p->t.switches = p->switches = switches;
	p->t.servers = p->servers = servers;
	if (rc == 0 && wiring)
		rc = parse_wiring(wiring, "wiring", &p->t.wiring, &p->links, e);
	if (rc < 0) {
		api_topology_prepared_free(p);
		return NULL;
	}
	return p;
}

void api_topology_put(struct api_req *req)
{
	struct ofcd_error e = { 0 };
	struct topo_put *p;
	struct topo_cables *cables;
	/* The body's form, then If-Match, then its contents: the order of every PUT. */
	json_t *body = api_body_object(req);
	if (!body || api_check_members(req, body, NULL, topology_members) < 0 ||
	    if_match_view(req, req->env->store, true) < 0 || !(p = api_prepared(req)))
		return;
	if (topo_apply(req->env->store, req->env->units, &p->t, cables_of(req, &cables), &e) < 0)
		api_fail(req, &e);
	else
		cables_continue(req, cables, true);
}
