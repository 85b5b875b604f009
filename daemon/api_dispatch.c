/*
 * The unit of work of a request: begin → handler → audit → commit → on_commit.
 * The transport (http.c) only parses; what a request changes, and when that
 * change is final, is decided here.
 */
#include <string.h>

#include "api.h"
#include "log.h"
#include "store.h"

static bool is_write_method(const char *method)
{
	return strcmp(method, "GET") != 0 && strcmp(method, "HEAD") != 0 &&
	       strcmp(method, "OPTIONS") != 0;
}

static bool needs_txn(const struct api_req *req)
{
	return is_write_method(req->method) && !(req->route && req->route->flags & API_F_PURE);
}

static const char *token_name(const struct api_req *req)
{
	return req->token ? req->token->name : NULL;
}

bool api_admit(struct api_req *req)
{
	if (needs_txn(req) && req->env->draining) {
		api_error(req, OFCD_E_SHUTTING_DOWN, NULL, "the daemon is shutting down");
		return false;
	}
	return true;
}

void api_audit_refusal(struct api_req *req)
{
	if (needs_txn(req))
		store_audit(req->env->store, token_name(req), req->client, req->method, req->path,
		            req->status);
}

/* The change is stored: tell the client it failed, and anyone holding the request. */
static void fail_commit(struct api_req *req)
{
	if (req->suspended) {
		req->suspended = false;
		if (req->on_abort)
			req->on_abort(req, true);
	}
	api_error(req, OFCD_E_STORE, NULL, "the change could not be stored, try again");
}

void api_dispatch(struct api_req *req)
{
	struct api_env *env = req->env;
	struct store *st = env->store;
	bool write = needs_txn(req);

	if (write && store_begin(st) < 0) {
		/* The store is locked or failing: an audit row would only wait again. */
		api_error(req, OFCD_E_STORE, NULL, "the store is not available, try again");
		return;
	}
	req->route->handler(req);
	if (req->status == 0) {
		/* A handler that suspends must first set the reply it would give now. */
		log_error("api", "%s %s: handler gave no reply", req->method, req->path);
		req->suspended = false;
		api_error(req, OFCD_E_INTERNAL, NULL, "internal error");
	}
	if (!write)
		return;
	if (req->status >= 400) {
		store_rollback(st);
		api_audit_refusal(req);
		return;
	}
	if (store_audit(st, token_name(req), req->client, req->method, req->path, req->status) <
	        0 ||
	    store_commit(st) < 0) {
		store_rollback(st);
		fail_commit(req);
		api_audit_refusal(req);
		return;
	}
	if (!req->desired_unchanged && env->on_commit)
		env->on_commit(env->on_commit_arg);
}
