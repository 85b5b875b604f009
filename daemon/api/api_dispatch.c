/*
 * The request's policy and its unit of work: route → authenticate → query and
 * media type (api_begin), then begin → handler → audit → commit (api_dispatch).
 * The transport (http.c) only moves bytes; who may ask what, what a request
 * changes, and when that change is final, is decided here. The reconciler
 * hears of a change from the state it changed (desired.h's hooks); watchers
 * hear of it from the events published here once it is final (api_change.h).
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "api.h"
#include "api_change.h"
#include "base/config.h"
#include "log.h"
#include "state/store.h"
#include "state/store_changes.h"

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

/* Sets req->token from the Authorization header; false with 401/403 set when it may not go on. */
static bool authenticate(struct api_req *req)
{
	const struct ofcd_config *cfg = req->env->cfg;
	/* OPTIONS tells only which methods a path has: no token needed, like a probe. */
	bool options = strcmp(req->method, "OPTIONS") == 0;
	enum auth_role needed = options ? AUTH_NONE : req->route ? req->route->role : AUTH_READ;
	req->token = NULL;
	if (cfg->tokens.n == 0 || needed == AUTH_NONE)
		return true; /* no tokens: everyone is admin (loopback or explicitly allowed) */
	size_t len = 0;
	const char *hdr = api_header(req, "Authorization");
	const char *secret = auth_bearer(hdr, &len);
	const struct auth_token *tok = secret ? auth_lookup(&cfg->tokens, secret, len) : NULL;
	if (!tok) {
		api_error(req, OFCD_E_UNAUTHORIZED, NULL,
		          hdr ? "the bearer token is not valid"
		              : "this route needs an Authorization: Bearer token");
		return false;
	}
	req->token_copy = *tok;
	explicit_bzero(req->token_copy.secret, sizeof(req->token_copy.secret));
	req->token = &req->token_copy;
	if (tok->role < needed) {
		api_error(req, OFCD_E_FORBIDDEN, NULL, "token %s has role %s; %s %s needs %s",
		          tok->name, auth_role_name(tok->role), req->method, req->path,
		          auth_role_name(needed));
		return false;
	}
	return true;
}

/* More than any route takes: a repeat is always caught. */
#define API_MAX_QUERY 8

struct query_check {
	struct api_req *req;
	const char *seen[API_MAX_QUERY];
	size_t n;
};

/* A misspelt parameter is an error, not silently ignored (like unknown JSON members). */
static bool query_name_ok(void *arg, const char *key)
{
	struct query_check *q = arg;
	const char *list = q->req->route->query;
	size_t n = strlen(key);
	for (const char *p = list; p && *p;) {
		size_t len = strcspn(p, ",");
		if (len == n && strncmp(p, key, n) == 0) {
			/* A parameter given twice has no one meaning (?wait=1&wait=60). */
			for (size_t i = 0; i < q->n; i++)
				if (strcmp(q->seen[i], key) == 0) {
					api_error(q->req, OFCD_E_INVALID_FIELD, key,
					          "query parameter %s is given more than once",
					          key);
					return false;
				}
			if (q->n < API_MAX_QUERY)
				q->seen[q->n++] = key;
			return true;
		}
		p += len + (p[len] == ',');
	}
	api_error(q->req, OFCD_E_INVALID_FIELD, key, "unknown query parameter %s%s%s", key,
	          list ? "; this route takes: " : "; this route takes none", list ? list : "");
	return false;
}

static bool media_type_ok(struct api_req *req)
{
	if (strcmp(req->method, "POST") != 0 && strcmp(req->method, "PUT") != 0)
		return true;
	const char *ct = api_header(req, "Content-Type");
	size_t n = strlen("application/json");
	if (ct && strncasecmp(ct, "application/json", n) == 0 &&
	    (ct[n] == '\0' || ct[n] == ';' || ct[n] == ' '))
		return true;
	api_error(req, OFCD_E_UNSUPPORTED_MEDIA, NULL, "%s needs Content-Type: application/json",
	          req->method);
	return false;
}

bool api_begin(struct api_req *req, char *buf, size_t buflen, char *allow, size_t allowlen)
{
	bool path_known = false;
	req->route = api_route_match(req->method, req->path, buf, buflen, req->params, &path_known,
	                             allow, allowlen);
	if (!authenticate(req))
		return false;
	if (!req->route) {
		if (strcmp(req->method, "OPTIONS") == 0 && path_known)
			api_reply(req, 204, NULL);
		else if (path_known)
			api_error(req, OFCD_E_METHOD_NOT_ALLOWED, NULL, "%s is not allowed on %s",
			          req->method, req->path);
		else
			api_error(req, OFCD_E_NOT_FOUND, NULL, "no route %s", req->path);
		return false;
	}
	struct query_check q = { .req = req };
	if (req->transport->query_names)
		req->transport->query_names(req, query_name_ok, &q);
	return req->status == 0 && api_admit(req) && media_type_ok(req);
}

void api_audit_refusal(struct api_req *req)
{
	/* A redirected write is the leader's to audit, when it gets there. */
	if (needs_txn(req) && req->status != 307)
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

/* Runs the route's handler; a handler that suspends must first set the reply it would give now. */
static void run_handler(struct api_req *req)
{
	req->route->handler(req);
	if (req->status == 0) {
		log_error("api", "%s %s: handler gave no reply", req->method, req->path);
		req->suspended = false;
		api_error(req, OFCD_E_INTERNAL, NULL, "internal error");
	}
}

static void cluster_write(struct api_req *req);
static bool wait_elsewhere(struct api_req *req);

void api_dispatch(struct api_req *req)
{
	struct api_env *env = req->env;
	struct store *st = env->store;
	bool write = needs_txn(req);

	if (write && env->cluster) {
		cluster_write(req);
		return;
	}
	if (env->cluster && api_query(req, "wait") && wait_elsewhere(req))
		return;

	if (write && store_begin(st) < 0) {
		/* The store is locked or failing: an audit row would only wait again. */
		api_error(req, OFCD_E_STORE, NULL, "the store is not available, try again");
		return;
	}
	run_handler(req);
	if (!write)
		return;
	if (req->status >= 400) {
		store_rollback(st);
		api_audit_refusal(req);
		return;
	}
	json_t *changes = api_changes_of(req);
	if (store_audit(st, token_name(req), req->client, req->method, req->path, req->status) <
	        0 ||
	    store_commit(st) < 0) {
		json_decref(changes);
		store_rollback(st);
		fail_commit(req);
		api_audit_refusal(req);
		return;
	}
	api_changes_publish(env->events, changes);
	if (req->committed)
		req->committed(req);
}

/* ---- a cluster member's writes -------------------------------------------
 *
 * The handler runs in a transaction that records its changeset and is then
 * rolled back: nothing is in the store until the log holds the change. Once
 * the append is confirmed, the changeset is applied and committed like any
 * follower's, and only then does the client hear 2xx. A refused or failed
 * append leaves no trace but the refusal's own audit row. One write is in the
 * log's hands at a time (its changeset is relative to the store as it is);
 * the others wait their turn, suspended.
 */

struct api_write {
	struct api_env *env;
	struct api_req *req; /* NULL once the client went away */
	void *data;          /* the changeset */
	size_t len;
	json_t *changes; /* its events (api_change.h), published once the log took it */
	/* A handler that suspended its request itself (?wait=) gets it back afterwards. */
	bool held;
	api_abort_fn held_abort;
	void *held_arg;
	struct api_write *next; /* in env->writes' queue */
};

static void next_write(struct api_env *env);

/* Replies now to a request suspended here. */
static void finish(struct api_req *req)
{
	if (req->suspended)
		api_resume(req);
}

/*
 * Percent-encodes what is not safe in a URL's path or query onto out (len
 * bytes). False when it did not all fit.
 */
static bool url_append(char *out, size_t len, const char *text, bool path)
{
	size_t n = strlen(out);
	const unsigned char *p = (const unsigned char *)text;
	for (; *p && n + 4 < len; p++) {
		if ((*p >= 'a' && *p <= 'z') || (*p >= 'A' && *p <= 'Z') ||
		    (*p >= '0' && *p <= '9') || strchr("-._~", *p) || (path && *p == '/'))
			out[n++] = (char)*p;
		else
			n += (size_t)snprintf(out + n, len - n, "%%%02X", *p);
	}
	out[n < len ? n : len - 1] = '\0';
	return *p == '\0';
}

/* 307 to the same request on the leader: curl -L and ofcctl send it again there. */
static void redirect(struct api_req *req, const char *leader)
{
	char url[sizeof(req->location)];
	char sep = '?';
	snprintf(url, sizeof(url), "%s", leader);
	bool fits = url_append(url, sizeof(url), req->path, true);
	for (const char *q = req->route->query; fits && q && *q;) {
		char key[32];
		size_t k = strcspn(q, ",");
		snprintf(key, sizeof(key), "%.*s", (int)k, q);
		q += k + (q[k] == ',');
		const char *v = api_query(req, key);
		if (!v)
			continue;
		size_t n = strlen(url);
		fits = (size_t)snprintf(url + n, sizeof(url) - n, "%c%s=", sep, key) <
		           sizeof(url) - n &&
		       url_append(url, sizeof(url), v, false);
		sep = '&';
	}
	if (!fits) {
		/* A cut URL would be another request on the leader. */
		api_error(req, OFCD_E_NOT_LEADER, NULL,
		          "this member does not lead, and this request's URL is too long to "
		          "redirect: send it to the leader, %s",
		          leader);
		return;
	}
	api_reply(req, 307,
	          json_pack("{s:s, s:s}", "leader", leader, "message",
	                    "this member does not lead: send this request to the leader"));
	snprintf(req->location, sizeof(req->location), "%s", url);
}

/* Says why this member cannot take the write now; false when it can. */
static bool refuse_here(struct api_req *req)
{
	char leader[256] = "";
	switch (req->env->cluster->gate(req->env->cluster->arg, leader, sizeof(leader))) {
	case 0:
		return false;
	case -EREMOTE:
		redirect(req, leader);
		break;
	case -EAGAIN:
		api_error(req, OFCD_E_NOT_LEADER, NULL,
		          "this member does not lead and no leader is known yet (an election is "
		          "under way): try again");
		break;
	case -EINPROGRESS:
		api_error(req, OFCD_E_STORE, NULL,
		          "this member was just elected and is still applying the log: try again");
		break;
	default:
		api_error(req, OFCD_E_STORE, NULL,
		          "the cluster's store (etcd) cannot be reached or has no quorum: nothing "
		          "changed, try again");
		break;
	}
	return true;
}

/*
 * A read that waits for the reconciler (?wait=) waits on the leader: a
 * follower runs none, so it would only time out.
 */
static bool wait_elsewhere(struct api_req *req)
{
	char leader[256] = "";
	if (req->env->cluster->gate(req->env->cluster->arg, leader, sizeof(leader)) != -EREMOTE)
		return false;
	redirect(req, leader);
	return true;
}

static void on_queued_abort(struct api_req *req, bool conn_closed)
{
	struct api_write *w = req->wait_arg;
	struct api_writes *q = &req->env->writes;
	/* Out of the queue: its handler never ran, nothing was changed. */
	struct api_write **pp = &q->head, *prev = NULL;
	while (*pp && *pp != w) {
		prev = *pp;
		pp = &(*pp)->next;
	}
	if (*pp) {
		*pp = w->next;
		if (q->tail == w)
			q->tail = prev;
	}
	if (!conn_closed)
		api_error(req, OFCD_E_SHUTTING_DOWN, NULL, "the daemon is shutting down");
	free(w);
}

/* Ends the handler's own hold (?wait=), which expects its own argument back. */
static void release_hold(struct api_write *w, struct api_req *req)
{
	if (!w->held)
		return;
	w->held = false;
	req->on_abort = w->held_abort;
	req->wait_arg = w->held_arg;
	if (w->held_abort)
		w->held_abort(req, true);
}

static void on_inflight_abort(struct api_req *req, bool conn_closed)
{
	struct api_write *w = req->wait_arg;
	req->replicating = false;
	release_hold(w, req); /* the handler's own hold goes with the request */
	w->req = NULL;        /* the change goes on: the log decides, as if the client had stayed */
	if (!conn_closed)
		api_error(req, OFCD_E_OUTCOME_UNKNOWN, NULL,
		          "the daemon stopped before the cluster's log confirmed the change: read "
		          "it back to know whether it was made");
}

static void write_free(struct api_write *w)
{
	if (w->env->writes.current == w)
		w->env->writes.current = NULL;
	json_decref(w->changes);
	free(w->data);
	free(w);
}

static void on_appended(void *arg, int rc, int64_t revision)
{
	struct api_write *w = arg;
	struct api_env *env = w->env;
	struct api_req *req = w->req;
	if (req)
		req->replicating = false;
	/*
	 * 0: applied here like every member applies it, so the handler's hold
	 * (?wait=) finds it in the store. -EREMOTE: in the log, but this member
	 * stepped down and its replica applies it in turn: acknowledged, held no
	 * longer.
	 */
	/*
	 * The change is in the log (rc 0, or -EREMOTE and -EPROTO: this member's
	 * replica or the next leader applies it), even when its client went away:
	 * watchers must hear of it. After a step-down only this member's streams
	 * do, under its own ids; the other members' never do (the events of a
	 * write do not travel in its log entry yet).
	 */
	if (rc == 0 || rc == -EREMOTE || rc == -EPROTO) {
		api_changes_publish(env->events, w->changes);
		w->changes = NULL;
	}
	bool hold = req && rc == 0 && w->held;
	if (hold) {
		/* Back to the handler's own hold: its event replies. */
		req->on_abort = w->held_abort;
		req->wait_arg = w->held_arg;
		if (req->committed)
			req->committed(req);
	}
	if (req && !hold) {
		if (rc == 0 && req->committed)
			req->committed(req);
		release_hold(w, req);
		if (rc == -EREMOTE)
			rc = 0;
		else if (rc == -EPROTO)
			api_error(
			    req, OFCD_E_INTERNAL, NULL,
			    "the change is in the cluster's log (revision %lld) but could not be "
			    "applied on this member; the next leader applies it",
			    (long long)revision);
		else if (rc == -ETIMEDOUT)
			api_error(
			    req, OFCD_E_OUTCOME_UNKNOWN, NULL,
			    "etcd did not confirm whether the cluster's log took the change before "
			    "this member stopped leading: read it back before trying again");
		else if (rc < 0 && !refuse_here(req))
			api_error(req, OFCD_E_STORE, NULL,
			          "the cluster's log did not take the change: nothing changed, try "
			          "again");
		if (rc < 0 && rc != -EPROTO)
			api_audit_refusal(req);
		finish(req);
	}
	write_free(w);
	next_write(env);
}

/* Runs the handler of a write whose turn it is (its request may be suspended in the queue). */
static void run_write(struct api_req *req)
{
	struct api_env *env = req->env;
	struct store *st = env->store;
	struct store_capture *cap = NULL;
	struct api_write *w = calloc(1, sizeof(*w));

	req->suspended = false;
	req->on_abort = NULL;
	req->wait_arg = NULL;
	if (!w || store_capture_start(st, NULL, &cap) < 0 || store_begin(st) < 0) {
		store_capture_free(cap);
		free(w);
		api_error(req, OFCD_E_STORE, NULL, "the store is not available, try again");
		return;
	}
	run_handler(req);
	int rc = req->status >= 400 ? 0
	                            : store_audit(st, token_name(req), req->client, req->method,
	                                          req->path, req->status);
	if (req->status < 400 && rc == 0)
		rc = store_capture_take(cap, &w->data, &w->len);
	store_rollback(st);
	store_capture_free(cap);
	if (req->status >= 400 || rc < 0) {
		if (rc < 0)
			fail_commit(req);
		else if (req->suspended && req->on_abort) /* an error never holds */
			req->on_abort(req, true);
		req->suspended = false;
		api_audit_refusal(req);
		free(w->data);
		free(w);
		return;
	}
	w->env = env;
	w->req = req;
	w->changes = api_changes_of(req);
	w->held = req->suspended;
	w->held_abort = req->on_abort;
	w->held_arg = req->wait_arg;
	api_suspend(req, on_inflight_abort, w);
	req->replicating = true;
	env->writes.current = w;
	rc = env->cluster->append(env->cluster->arg, w->data, w->len, on_appended, w);
	if (rc < 0) {
		req->suspended = false;
		req->replicating = false;
		release_hold(w, req);
		if (rc == -EFBIG)
			api_error(req, OFCD_E_CHANGE_TOO_LARGE, NULL,
			          "the change (%zu bytes) is larger than the cluster's log takes "
			          "(64 MiB); nothing changed",
			          w->len);
		else if (rc != -ESTALE || !refuse_here(req))
			api_error(req, OFCD_E_STORE, NULL,
			          "the cluster's log is not available, try again");
		api_audit_refusal(req);
		write_free(w);
	}
}

static void next_write(struct api_env *env)
{
	struct api_writes *q = &env->writes;
	while (!q->current && q->head) {
		struct api_write *w = q->head;
		struct api_req *req = w->req;
		q->head = w->next;
		if (!q->head)
			q->tail = NULL;
		free(w);
		/* The gate may have closed while it waited. */
		if (refuse_here(req) || !api_admit(req)) {
			req->suspended = false;
			api_audit_refusal(req);
			api_resume(req);
			continue;
		}
		run_write(req);
		if (!q->current || q->current->req != req)
			api_resume(req); /* answered at once: a refusal */
	}
}

static void cluster_write(struct api_req *req)
{
	struct api_env *env = req->env;
	struct api_writes *q = &env->writes;
	if (refuse_here(req)) {
		api_audit_refusal(req);
		return;
	}
	if (!q->current && !q->head) {
		run_write(req);
		return;
	}
	struct api_write *w = calloc(1, sizeof(*w));
	if (!w) {
		api_error(req, OFCD_E_STORE, NULL, "out of memory, try again");
		return;
	}
	w->env = env;
	w->req = req;
	if (q->tail)
		q->tail->next = w;
	else
		q->head = w;
	q->tail = w;
	/* What it would answer if it had to end before its turn. */
	api_error(req, OFCD_E_SHUTTING_DOWN, NULL, "the daemon is shutting down");
	api_suspend(req, on_queued_abort, w);
}
