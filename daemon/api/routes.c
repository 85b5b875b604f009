/*
 * The route table: every REST route in one place, like Redis' command table.
 * Order does not matter; patterns must not overlap for the same method.
 */
#include <stdio.h>
#include <string.h>

#include "api.h"
#include "api_handlers.h"

static const struct api_prepare topology_prepare = { api_topology_prepare,
	                                             api_topology_prepared_free };

const struct api_route api_routes[] = {
	{ "GET", "/v1/health", api_health, AUTH_NONE, 0, NULL, NULL },
	{ "GET", "/metrics", api_metrics, AUTH_NONE, 0, NULL, NULL },
	{ "GET", "/v1/cluster", api_cluster_get, AUTH_READ, 0, NULL, NULL },
	/* The whole store, tokens' audit trail included: administrators only. */
	{ "GET", "/v1/cluster/snapshot", api_cluster_snapshot, AUTH_ADMIN, 0, "consistent", NULL },
	/* The console's files and the API's description hold no data: no token. */
	{ "GET", "/", api_console_page, AUTH_NONE, 0, NULL, NULL },
	{ "GET", "/console/{file}", api_console_file, AUTH_NONE, 0, NULL, NULL },
	{ "GET", "/v1/openapi.json", api_openapi, AUTH_NONE, 0, NULL, NULL },

	/* What-if computations store nothing: any reader may ask. */
	{ "POST", "/v1/plan", api_plan, AUTH_READ, API_F_PURE, NULL, NULL },
	{ "GET", "/v1/audit", api_audit_list, AUTH_ADMIN, 0, "since,limit", NULL },

	{ "POST", "/v1/ocs", api_ocs_create, AUTH_ADMIN, 0, NULL, NULL },
	{ "GET", "/v1/ocs", api_ocs_list, AUTH_READ, 0, NULL, NULL },
	{ "GET", "/v1/ocs/{name}", api_ocs_get, AUTH_READ, 0, NULL, NULL },
	{ "PUT", "/v1/ocs/{name}", api_ocs_put, AUTH_ADMIN, 0, NULL, NULL },
	{ "DELETE", "/v1/ocs/{name}", api_ocs_delete, AUTH_ADMIN, 0, "force", NULL },
	{ "GET", "/v1/ocs/{name}/cross-connects", api_ocs_cross_connects, AUTH_READ, 0, NULL,
	  NULL },
	{ "POST", "/v1/ocs/{name}/faults", api_ocs_faults, AUTH_ADMIN, 0, NULL, NULL },

	{ "GET", "/v1/operations", api_operations_list, AUTH_READ, 0, "fabric,ocs,limit,before",
	  NULL },
	{ "GET", "/v1/operations/{id}", api_operation_get, AUTH_READ, 0, NULL, NULL },
	{ "GET", "/v1/events", api_events, AUTH_READ, 0, "fabric", NULL },

	{ "POST", "/v1/servers", api_server_create, AUTH_ADMIN, 0, NULL, NULL },
	{ "GET", "/v1/servers", api_server_list, AUTH_READ, 0, "joined", NULL },
	{ "GET", "/v1/servers/{name}", api_server_get, AUTH_READ, 0, "wait", NULL },
	{ "PUT", "/v1/servers/{name}", api_server_put, AUTH_ADMIN, 0, NULL, NULL },
	{ "DELETE", "/v1/servers/{name}", api_server_delete, AUTH_ADMIN, 0, NULL, NULL },
	/* AUTH_AGENT routes also check in the handler that an agent writes its own server. */
	{ "PUT", "/v1/servers/{name}/devices/{index}", api_device_put, AUTH_AGENT, 0, NULL, NULL },
	{ "PUT", "/v1/servers/{name}/inventory", api_inventory_put, AUTH_AGENT, 0, NULL, NULL },
	{ "POST", "/v1/servers/{name}/runs", api_server_runs_post, AUTH_AGENT, 0, "batch", NULL },
	{ "GET", "/v1/rdma/devices", api_rdma_devices, AUTH_READ, 0, NULL, NULL },

	{ "GET", "/v1/wiring", api_wiring_get, AUTH_READ, 0, NULL, NULL },
	{ "PUT", "/v1/wiring", api_wiring_put, AUTH_ADMIN, 0, NULL, NULL },
	{ "GET", "/v1/topology", api_topology_get, AUTH_READ, 0, NULL, NULL },
	/* A 32,768-server topology is read off the loop (api_topology_prepare()). */
	{ "PUT", "/v1/topology", api_topology_put, AUTH_ADMIN, 0, NULL, &topology_prepare },

	{ "POST", "/v1/switches", api_switch_create, AUTH_ADMIN, 0, NULL, NULL },
	{ "GET", "/v1/switches", api_switch_list, AUTH_READ, 0, NULL, NULL },
	{ "GET", "/v1/switches/{name}", api_switch_get, AUTH_READ, 0, NULL, NULL },
	{ "PUT", "/v1/switches/{name}", api_switch_put, AUTH_ADMIN, 0, NULL, NULL },
	{ "DELETE", "/v1/switches/{name}", api_switch_delete, AUTH_ADMIN, 0, NULL, NULL },

	{ "POST", "/v1/fabrics", api_fabric_create, AUTH_ADMIN, 0, "wait,view", NULL },
	{ "GET", "/v1/fabrics", api_fabric_list, AUTH_READ, 0, "view,consistent", NULL },
	{ "GET", "/v1/fabrics/{name}", api_fabric_get, AUTH_READ, 0, "wait,view,consistent", NULL },
	{ "PUT", "/v1/fabrics/{name}", api_fabric_put, AUTH_ADMIN, 0, "wait,view", NULL },
	{ "DELETE", "/v1/fabrics/{name}", api_fabric_delete, AUTH_ADMIN, 0, "wait", NULL },
	{ "GET", "/v1/fabrics/{name}/picture.svg", api_fabric_svg, AUTH_READ, 0, NULL, NULL },
	{ "POST", "/v1/fabrics/{name}/pipeline", api_pipeline, AUTH_READ, API_F_PURE, NULL, NULL },
	{ "GET", "/v1/fabrics/{name}/schedule", api_fabric_schedule, AUTH_READ, 0,
	  "collective,algorithm,bytes,root,round,limit", NULL },

	{ "POST", "/v1/transmission/select", api_transmission_select, AUTH_READ, API_F_PURE, NULL,
	  NULL },
	{ "POST", "/v1/collective/select", api_collective_select, AUTH_READ, API_F_PURE, NULL,
	  NULL },

	{ "POST", "/v1/cost/calibrate", api_cost_calibrate, AUTH_ADMIN, 0, NULL, NULL },
	{ "GET", "/v1/cost/params", api_cost_params_get, AUTH_READ, 0, NULL, NULL },
	{ "GET", "/v1/cost/runs", api_cost_runs_get, AUTH_READ, 0,
	  "fabric,collector,since,before,limit", NULL },
	{ "DELETE", "/v1/cost/runs", api_cost_runs_delete, AUTH_ADMIN, 0,
	  "fabric,collector,since,before", NULL },
	{ "GET", "/v1/cost/params/{name}", api_cost_set_get, AUTH_READ, 0, NULL, NULL },
	{ "DELETE", "/v1/cost/params/{name}", api_cost_set_delete, AUTH_ADMIN, 0, NULL, NULL },
	{ "PUT", "/v1/cost/active", api_cost_active_put, AUTH_ADMIN, 0, NULL, NULL },

	{ NULL, NULL, NULL, AUTH_NONE, 0, NULL, NULL },
};

/*
 * Compares a copy of path (in buf) with pattern segment by segment; a
 * "{name}" pattern segment takes any non-empty segment as a parameter, which
 * is cut out of buf in place once the whole path matched.
 */
static bool pattern_match(const char *pattern, const char *path, char *buf, size_t buflen,
                          const char *params[API_MAX_PARAMS])
{
	char *ends[API_MAX_PARAMS];
	size_t np = 0;
	size_t len = strlen(path);
	if (len + 1 > buflen)
		return false;
	memcpy(buf, path, len + 1);

	const char *p = pattern;
	char *s = buf;
	while (*p || *s) {
		if (*p != '/' || *s != '/')
			return false;
		p++;
		s++;
		size_t plen = strcspn(p, "/");
		size_t slen = strcspn(s, "/");
		if (plen >= 2 && p[0] == '{' && p[plen - 1] == '}') {
			if (slen == 0 || np == API_MAX_PARAMS)
				return false;
			params[np] = s;
			ends[np++] = s + slen;
		} else if (plen != slen || memcmp(p, s, plen) != 0) {
			return false;
		}
		p += plen;
		s += slen;
	}
	for (size_t i = 0; i < np; i++)
		*ends[i] = '\0';
	return true;
}

static void allow_add(char *allow, size_t allowlen, const char *method)
{
	size_t l = strlen(allow);
	snprintf(allow + l, allowlen - l, "%s%s", l ? ", " : "", method);
}

const struct api_route *api_route_match(const char *method, const char *path, char *buf,
                                        size_t buflen, const char *params[API_MAX_PARAMS],
                                        bool *path_known, char *allow, size_t allowlen)
{
	/* HEAD is GET without the body (the transport leaves it out). */
	const char *want = strcmp(method, "HEAD") == 0 ? "GET" : method;
	*path_known = false;
	allow[0] = '\0';
	for (const struct api_route *r = api_routes; r->method; r++) {
		const char *tmp[API_MAX_PARAMS] = { 0 };
		if (!pattern_match(r->pattern, path, buf, buflen, tmp))
			continue;
		if (strcmp(r->method, want) == 0) {
			memcpy(params, tmp, sizeof(tmp));
			return r;
		}
		*path_known = true;
		allow_add(allow, allowlen, r->method);
		if (strcmp(r->method, "GET") == 0)
			allow_add(allow, allowlen, "HEAD");
	}
	if (*path_known)
		allow_add(allow, allowlen, "OPTIONS");
	return NULL;
}
