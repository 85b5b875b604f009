/*
 * Which write changes what, and the events that say so (api_change.h).
 */
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "api.h"
#include "api_change.h"
#include "base/events.h"

/*
 * A resource's routes are its collection and "COLLECTION/{name}"; a route
 * under those (a device, faults) is not the resource's write.
 */
static const struct {
	const char *collection;
	const char *resource;
	bool revisioned; /* its tag is its revision, not a hash of its view */
} resources[] = {
	{ "/v1/fabrics", "fabric", true }, { "/v1/ocs", "ocs", true },
	{ "/v1/servers", "server", true }, { "/v1/switches", "switch", true },
	{ "/v1/wiring", "wiring", false }, { "/v1/topology", "topology", false },
};

static int resource_of(const char *pattern)
{
	for (size_t i = 0; i < sizeof(resources) / sizeof(resources[0]); i++) {
		size_t n = strlen(resources[i].collection);
		if (strncmp(pattern, resources[i].collection, n) == 0 &&
		    (pattern[n] == '\0' || strcmp(pattern + n, "/{name}") == 0))
			return (int)i;
	}
	return -1;
}

static void add(json_t *changes, enum events_kind kind, json_t *data)
{
	json_array_append_new(changes, json_pack("{s:i, s:o}", "kind", (int)kind, "data", data));
}

/* The name a write was about: the path's, or a create's new location's last segment. */
static const char *name_of(const struct api_req *req)
{
	if (strstr(req->route->pattern, "{name}"))
		return req->params[0];
	const char *slash = strrchr(req->location, '/');
	return req->status == 201 && slash && slash[1] ? slash + 1 : NULL;
}

static const char *change_of(const struct api_req *req)
{
	if (strcmp(req->method, "DELETE") == 0)
		return "deleted";
	if (req->status == 201)
		return "created";
	/* The same tag before and after: it was replaced by what it was. */
	if (req->etag_before[0] && strcmp(req->etag_before, req->etag) == 0)
		return NULL;
	return "updated";
}

static void resource_change(const struct api_req *req, int r, json_t *changes)
{
	const char *change = change_of(req);
	if (!change)
		return;
	const char *name = name_of(req);
	bool fabric = strcmp(resources[r].resource, "fabric") == 0;
	json_t *data =
	    fabric ? json_object() : json_pack("{s:s}", "resource", resources[r].resource);
	if (name)
		json_object_set_new(data, fabric ? "fabric" : "name", json_string(name));
	json_object_set_new(data, "change", json_string(change));
	if (resources[r].revisioned && req->etag[0] == '"' && strcmp(change, "deleted") != 0)
		json_object_set_new(data, "revision",
		                    json_integer(strtoll(req->etag + 1, NULL, 10)));
	add(changes, fabric ? EVENTS_FABRIC : EVENTS_TOPOLOGY, data);
}

static void device_state(json_t *changes, json_t *server, json_t *change)
{
	if (json_is_true(json_object_get(change, "changed")))
		add(changes, EVENTS_DEVICE_STATE,
		    json_pack("{s:O, s:O, s:O}", "server", server, "device",
		              json_object_get(change, "device"), "state",
		              json_object_get(change, "state")));
}

/*
 * A device route's reply: {"server", "device", "state", "changed"} (one
 * device) or {"server", "changes": [those]} (an inventory), and "fabrics":
 * the fabric re-planned around them ({"name", "revision", ...}).
 */
static void device_changes(const struct api_req *req, json_t *changes)
{
	json_t *server = json_object_get(req->reply, "server");
	json_t *list = json_object_get(req->reply, "changes"), *c;
	size_t i;
	if (!json_is_string(server))
		return;
	if (!list)
		device_state(changes, server, req->reply);
	json_array_foreach(list, i, c) device_state(changes, server, c);
	/* A re-plan replaces the fabric's circuits as surely as a write of the fabric does. */
	json_array_foreach(json_object_get(req->reply, "fabrics"), i, c)
	    add(changes, EVENTS_FABRIC,
	        json_pack("{s:O, s:s, s:O}", "fabric", json_object_get(c, "name"), "change",
	                  "updated", "revision", json_object_get(c, "revision")));
}

json_t *api_changes_of(const struct api_req *req)
{
	if (!req->route || req->status < 200 || req->status >= 300)
		return NULL;
	json_t *changes = json_array();
	int r = resource_of(req->route->pattern);
	if (r >= 0)
		resource_change(req, r, changes);
	else if (strncmp(req->route->pattern, "/v1/servers/{name}/", 19) == 0)
		device_changes(req, changes);
	if (json_array_size(changes) == 0) {
		json_decref(changes);
		return NULL;
	}
	return changes;
}

void api_changes_publish(struct events *ev, json_t *changes)
{
	size_t i;
	json_t *c;
	json_array_foreach(changes, i, c)
	{
		json_t *data = json_object_get(c, "data");
		events_publish(ev, (enum events_kind)json_integer_value(json_object_get(c, "kind")),
		               json_incref(data));
	}
	json_decref(changes);
}
