/* Path parameters that several route families share. */
#include <errno.h>
#include <string.h>

#include "api_handlers.h"
#include "decimal.h"
#include "domain/topo.h"

int api_agent_scope(struct api_req *req)
{
	const struct auth_token *t = req->token;
	if (!t || t->role != AUTH_AGENT || strcmp(t->server, req->params[0]) == 0)
		return 0;
	api_error(req, OFCD_E_FORBIDDEN, NULL,
	          "token %s is the agent token of server %s, not of %s", t->name, t->server,
	          req->params[0]);
	return -EPERM;
}

int64_t api_server_param(struct api_req *req)
{
	int64_t id = topo_server_id(req->env->store, req->params[0]);
	if (!id)
		api_error(req, OFCD_E_NOT_FOUND, "name", "no server %s", req->params[0]);
	return id;
}

int api_query_uint(struct api_req *req, const char *key, uint64_t lo, uint64_t hi, uint64_t def,
                   uint64_t *out)
{
	const char *v = api_query(req, key);
	uint64_t x = 0;

	*out = def;
	if (!v)
		return 0;
	if (!decimal_u64(v, hi, &x) || x < lo) {
		api_error(req, OFCD_E_INVALID_FIELD, key,
		          "%s must be an integer from %llu to %llu, got \"%.32s\"", key,
		          (unsigned long long)lo, (unsigned long long)hi, v);
		return -EINVAL;
	}
	*out = x;
	return 0;
}
