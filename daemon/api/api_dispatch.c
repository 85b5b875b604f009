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
#include <time.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include <event2/event.h>

#include "api.h"
#include "api_change.h"
#include "base/config.h"
#include "base/metrics.h"
#include "domain/fabric.h"
#include "domain/topo_apply.h"
#include "log.h"
#include "state/store.h"
#include "state/store_changes.h"
#include "monotonic.h"

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

/* A held request back in hand, without the reply it was held with: its next step sets one. */
static void unhold(struct api_req *req)
{
	req->suspended = false;
	req->on_abort = NULL;
	req->wait_arg = NULL;
	json_decref(req->reply);
	req->reply = NULL;
	req->status = 0;
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
static bool refuse_here(struct api_req *req);
static void confirm_then_read(struct api_req *req);
static void compute_first(struct api_req *req);
static void enqueue(struct api_req *req);
static void local_write(struct api_req *req);

void api_dispatch(struct api_req *req)
{
	struct api_env *env = req->env;
	bool write = needs_txn(req);

	if (write && env->cluster) {
		cluster_write(req);
		return;
	}
	/* A read that must not lag what was acknowledged: the leader's, once caught up. */
	const char *consistent = api_query(req, "consistent");
	if (consistent && strcmp(consistent, "true") != 0) {
		api_error(req, OFCD_E_INVALID_FIELD, "consistent",
		          "consistent must be true, got \"%s\"", consistent);
		return;
	}
	if (consistent && env->cluster) {
		if (!refuse_here(req))
			confirm_then_read(req);
		return;
	}
	/* Reads that need the units' live state: only the leader drives them. */
	if (env->cluster && (api_query(req, "wait") || api_query(req, "joined")) &&
	    wait_elsewhere(req))
		return;
	if (!write) {
		run_handler(req);
		return;
	}
	/* A write stored over several turns goes first: the others wait behind it. */
	if (env->writes.current || env->writes.head) {
		enqueue(req);
		return;
	}
	local_write(req);
}

/* ---- a single node's writes ----------------------------------------------
 *
 * A write's handler runs in a transaction that commits with its audit row. A
 * handler may leave the write to parts (api_continue()): those that fit the
 * turn's budget run in its transaction, and when that is all, the write ends
 * as any other. Otherwise what they stored commits without audit or events,
 * the request is held, and each later turn does parts in a transaction of
 * its own until the write is whole; it then commits with the audit row and
 * publishes its events. Later writes wait their turn in env->writes' queue,
 * as a cluster member's do. A part that fails undoes what the others stored,
 * and so does a client that goes away, unless the write goes on (a removal:
 * then it is finished, and its outcome was its first reply); a daemon that
 * stops first leaves the write marked unfinished for the next start to drop
 * (fabric_drop_unfinished()), or for a rule's cabling to finish
 * (topo_wiring_finish()).
 */

/* A write in hand or waiting its turn: a cluster member's, or a single node's done in parts. */
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
	/* A single node's write done in parts: the rest, and the turn that does it. */
	struct api_slices slices;
	struct event *turn;
	/* One that goes on without its client: its audit row's fields, and its status. */
	char *audit_token, *audit_client, *audit_method, *audit_path;
	unsigned audit_status;
	json_t *placeholder; /* its handler's reply, what the client hears if it cannot end now */
};

/* Work a turn gives a write in parts: what other clients may wait behind it. */
#define SLICES_BUDGET_US 5000

static void next_write(struct api_env *env);
static void write_free(struct api_write *w);

static char *dup_or_null(const char *s)
{
	return s ? strdup(s) : NULL;
}

static void slices_drop(struct api_slices *sl)
{
	if (sl->drop)
		sl->drop(sl->arg);
	memset(sl, 0, sizeof(*sl));
}

/*
 * Parts in the open transaction until the write is whole, one fails, one
 * asks for its commit, or the budget is spent. Returns 0 or -errno.
 */
static int slices_run(const struct api_slices *sl, const struct timespec *t0, bool *done)
{
	int rc;
	*done = false;
	do
		rc = sl->step(sl->arg, done);
	while (rc == 0 && !*done && mono_since(t0) * 1e6 < SLICES_BUDGET_US);
	return rc < 0 ? rc : 0;
}

/* Undoes what the parts stored; the next start does when even that fails. */
static void slices_abandon(const struct api_slices *sl, struct store *st)
{
	int rc = store_begin(st);
	if (rc == 0)
		rc = sl->abandon(sl->arg);
	if (rc == 0)
		rc = store_commit(st);
	if (rc < 0) {
		store_rollback(st);
		log_error("api", "cannot drop an unfinished write; the next start does");
	}
}

/*
 * A write's end in the open transaction: its audit row, the commit, then its
 * events and the committed hook. False when the commit failed (rolled back).
 */
static bool commit_write(struct api_req *req)
{
	struct store *st = req->env->store;
	json_t *changes = api_changes_of(req);
	if (store_audit(st, token_name(req), req->client, req->method, req->path, req->status) <
	        0 ||
	    store_commit(st) < 0) {
		json_decref(changes);
		store_rollback(st);
		return false;
	}
	api_changes_publish(req->env->events, changes);
	if (req->committed)
		req->committed(req);
	return true;
}

/* The write in parts is whole in the open transaction: its reply, then its end. */
static bool slices_commit(struct api_req *req, const struct api_slices *sl)
{
	sl->reply(sl->arg, req, 0);
	return commit_write(req);
}

/* Lets go of a hold (?wait=) a reply set up for a change that was not committed. */
static void drop_hold(struct api_req *req)
{
	if (req->suspended) {
		req->suspended = false;
		if (req->on_abort)
			req->on_abort(req, true);
	}
}

/* Ends a write that failed, in the handler's turn or a later one: nothing of it stays. */
static void slices_fail(struct api_req *req, const struct api_slices *sl, int rc, bool stored)
{
	store_rollback(req->env->store);
	if (stored)
		slices_abandon(sl, req->env->store);
	drop_hold(req);
	sl->reply(sl->arg, req, rc);
	api_audit_refusal(req);
}

/*
 * A held write is whole in the open transaction: its reply (when its client
 * is still there), audit row, commit and events. False when the commit
 * failed (rolled back).
 */
static bool slices_end(struct api_write *w)
{
	struct api_req *req = w->req;
	struct store *st = w->env->store;
	if (!w->slices.goes_on)
		return slices_commit(req, &w->slices);
	if (req)
		w->slices.reply(w->slices.arg, req, 0);
	if (store_audit(st, w->audit_token, w->audit_client, w->audit_method, w->audit_path,
	                req ? req->status : w->audit_status) < 0 ||
	    store_commit(st) < 0) {
		store_rollback(st);
		return false;
	}
	api_changes_publish(w->env->events, w->changes);
	w->changes = NULL;
	if (req && req->committed)
		req->committed(req);
	return true;
}

static void slice_turn(evutil_socket_t fd, short what, void *arg)
{
	struct metrics_loop l = metrics_loop_enter("api");
	struct api_write *w = arg;
	struct api_env *env = w->env;
	struct api_req *req = w->req;
	struct store *st = env->store;
	bool goes_on = w->slices.goes_on, done = false;
	struct timespec t0;
	int rc;
	(void)fd;
	(void)what;
	clock_gettime(CLOCK_MONOTONIC, &t0);
	if (!req && !goes_on) {
		/* Its client went away before it was whole: it is not made. */
		slices_abandon(&w->slices, st);
		goto end;
	}
	/*
	 * The parts of a write that goes on commit without fsync: a stop that
	 * loses some leaves it unfinished, as one between two parts does, and its
	 * end commits in a transaction of its own that syncs them all with it.
	 * A write that may be undone ends in its last part's transaction.
	 */
	rc = goes_on ? store_begin_relaxed(st) : store_begin(st);
	if (rc == 0)
		rc = slices_run(&w->slices, &t0, &done);
	if (rc == 0 && (!done || goes_on))
		rc = store_commit(st);
	if (rc == 0 && !done) {
		static const struct timeval now = { 0, 0 };
		evtimer_add(w->turn, &now); /* a timer: the loop polls its sockets first */
		metrics_loop_leave(l);
		return;
	}
	if (rc == 0 && goes_on)
		rc = store_begin(st);
	if (rc < 0 && goes_on) {
		/* It cannot stop part-way: the rest at once. */
		store_rollback(st);
		rc = store_begin(st);
		if (rc == 0)
			rc = w->slices.abandon(w->slices.arg);
		done = rc == 0;
	}
	if (req) {
		req->replicating = false;
		req->suspended = false;
		req->on_abort = NULL;
		req->wait_arg = NULL;
	}
	bool ok = rc == 0 && slices_end(w);
	if (!ok && goes_on) {
		/* Accepted and out of sight: the next write, or the next start, finishes it. */
		store_rollback(st);
		log_error("api", "%s %s: cannot finish it now; the next write or start does",
		          w->audit_method, w->audit_path);
		if (req) {
			drop_hold(req);
			/* Not the reply of a whole write: the handler's, which says it goes on. */
			api_reply(req, w->audit_status, json_deep_copy(w->placeholder));
			req->etag[0] = req->location[0] = '\0';
		}
		store_audit(st, w->audit_token, w->audit_client, w->audit_method, w->audit_path,
		            w->audit_status);
		api_changes_publish(env->events, w->changes);
		w->changes = NULL;
	} else if (!ok) {
		store_rollback(st);
		slices_abandon(&w->slices, st);
		if (req)
			slices_fail(req, &w->slices, rc < 0 ? rc : -EIO, false);
	}
	/* The reply may hold it (?wait=), as a handler's may. */
	if (req && !req->suspended)
		api_resume(req);
end:
	write_free(w);
	next_write(env);
	metrics_loop_leave(l);
}

/*
 * Status 499 in the audit trail: the client of a write in parts went away
 * before its reply, and the write was undone.
 */
#define AUDIT_CLIENT_GONE 499

static void on_slices_abort(struct api_req *req, bool conn_closed)
{
	struct api_write *w = req->wait_arg;
	req->replicating = false;
	/*
	 * The next turn undoes it or goes on; if the loop ends first, the next
	 * start drops it. One that goes on is audited at its end, from copies.
	 */
	w->req = NULL;
	if (w->slices.goes_on)
		return;
	if (!conn_closed)
		api_error(req, OFCD_E_SHUTTING_DOWN, NULL,
		          "the daemon is shutting down; the change was not made");
	store_audit(req->env->store, token_name(req), req->client, req->method, req->path,
	            conn_closed ? AUDIT_CLIENT_GONE : req->status);
}

/* Holds req while later turns do the rest of its write (its first parts are committed). */
static void slices_hold(struct api_req *req)
{
	struct api_env *env = req->env;
	struct api_write *w = calloc(1, sizeof(*w));
	bool goes_on = req->slices.goes_on;
	if (w) {
		w->env = env;
		w->turn = evtimer_new(env->base, slice_turn, w);
		if (goes_on) {
			w->audit_token = dup_or_null(token_name(req));
			w->audit_client = dup_or_null(req->client);
			w->audit_method = strdup(req->method);
			w->audit_path = strdup(req->path);
			w->audit_status = req->status;
			w->placeholder = json_deep_copy(req->reply);
		}
	}
	if (!w || !w->turn ||
	    (goes_on &&
	     ((token_name(req) && !w->audit_token) || (req->client && !w->audit_client) ||
	      !w->audit_method || !w->audit_path || (req->reply && !w->placeholder)))) {
		/* Undone, or for one that goes on, finished by the next start. */
		if (!goes_on)
			slices_abandon(&req->slices, env->store);
		slices_drop(&req->slices);
		if (w)
			write_free(w);
		api_error(req, OFCD_E_STORE, NULL, "out of memory, try again");
		api_audit_refusal(req);
		return;
	}
	w->req = req;
	w->slices = req->slices;
	memset(&req->slices, 0, sizeof(req->slices));
	if (goes_on)
		w->changes = api_changes_of(req);
	api_suspend(req, on_slices_abort, w);
	req->replicating = true;
	env->writes.current = w;
	static const struct timeval now = { 0, 0 };
	evtimer_add(w->turn, &now);
}

/* A handler that left its write to parts: this turn's, then the others' (slices_hold()). */
static void local_slices(struct api_req *req, const struct timespec *t0)
{
	struct api_slices *sl = &req->slices;
	bool done = false;
	/* A handler that spent the turn's budget leaves every part to the turns after. */
	int rc = mono_since(t0) * 1e6 < SLICES_BUDGET_US ? slices_run(sl, t0, &done) : 0;
	if (rc < 0) {
		slices_fail(req, sl, rc, false);
	} else if (done) {
		if (!slices_commit(req, sl))
			slices_fail(req, sl, -EIO, false);
	} else if (store_commit(req->env->store) < 0) {
		slices_fail(req, sl, -EIO, false);
	} else {
		slices_hold(req);
		return;
	}
	slices_drop(sl);
}

/*
 * What a failed write in parts left behind (see slice_turn()) goes first, in
 * a transaction of its own: a write refused next must not undo it again.
 */
static int finish_left_behind(struct store *st)
{
	/* Almost always nothing: a read, not a transaction, to say so. */
	if (!topo_unfinished_writes(st))
		return 0;
	int rc = store_begin(st);
	if (rc == 0 && (rc = fabric_drop_unfinished(st)) == 0 &&
	    (rc = topo_wiring_finish(st, true)) == 0)
		rc = store_commit(st);
	if (rc < 0)
		store_rollback(st);
	return rc;
}

static void local_write(struct api_req *req)
{
	struct store *st = req->env->store;
	struct timespec t0;
	clock_gettime(CLOCK_MONOTONIC, &t0);
	if ((!req->env->writes.current && finish_left_behind(st) < 0) || store_begin(st) < 0) {
		/* The store is locked or failing: an audit row would only wait again. */
		api_error(req, OFCD_E_STORE, NULL, "the store is not available, try again");
		return;
	}
	run_handler(req);
	if (req->computing) {
		store_rollback(st); /* it wrote nothing */
		compute_first(req);
		return;
	}
	if (req->status >= 400) {
		store_rollback(st);
		slices_drop(&req->slices);
		api_audit_refusal(req);
		return;
	}
	if (req->slices.step) {
		local_slices(req, &t0);
	} else if (!commit_write(req)) {
		fail_commit(req);
		api_audit_refusal(req);
	}
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

/* ---- consistent reads ----------------------------------------------------
 *
 * A leader answers ?consistent=true once etcd, read after the request came,
 * still names it the leader: its store then holds every change acknowledged
 * before it, whatever its monotonic clock did meanwhile (a paused machine's
 * may stop while its lease lapses and another member takes over). One
 * confirmation is out at a time; the reads that come while it is share the
 * next one.
 */

/* A consistent read waiting for etcd's word. */
struct api_read {
	struct api_req *req;   /* NULL once the client went away */
	uint64_t round;        /* the confirmation that answers for it */
	struct api_read *next; /* in env->reads */
};

static void on_read_abort(struct api_req *req, bool conn_closed)
{
	struct api_read *r = req->wait_arg;
	(void)conn_closed; /* at a stop, the refusal set before suspending is sent */
	r->req = NULL;
}

/* The answer of a read whose leader could not be confirmed (rc from the confirmation). */
static void refuse_unconfirmed(struct api_req *req, int rc)
{
	if (rc == -EHOSTUNREACH)
		api_error(req, OFCD_E_STORE, NULL,
		          "etcd could not confirm that this member still leads: try again");
	else if (rc != -ESTALE)
		api_error(req, OFCD_E_STORE, NULL,
		          "this member could not ask etcd whether it still leads: %s; try again",
		          strerror(-rc));
	else if (!refuse_here(req)) /* stepped down: the leader now, when one is known */
		api_error(req, OFCD_E_NOT_LEADER, NULL,
		          "the leadership changed while etcd was asked: try again");
}

static void send_confirmation(struct api_env *env);

/* Answers the reads waiting that round (UINT64_MAX: all) covers, with rc's outcome. */
static void answer_reads(struct api_env *env, uint64_t round, int rc)
{
	struct api_reads *q = &env->reads;
	while (q->head && q->head->round <= round) {
		struct api_read *r = q->head;
		struct api_req *req = r->req;
		q->head = r->next;
		if (!q->head)
			q->tail = NULL;
		free(r);
		if (!req)
			continue;
		unhold(req);
		if (rc == 0)
			run_handler(req); /* a ?wait= suspends it again */
		else
			refuse_unconfirmed(req, rc);
		if (!req->suspended)
			api_resume(req);
	}
}

static void on_confirmed(void *arg, int rc)
{
	struct api_env *env = arg;
	env->reads.out = false;
	answer_reads(env, env->reads.sent, rc);
	if (env->reads.head)
		send_confirmation(env);
}

static void send_confirmation(struct api_env *env)
{
	int rc = env->cluster->confirm(env->cluster->arg, on_confirmed, env);
	if (rc == 0) {
		env->reads.sent++;
		env->reads.out = true;
	} else {
		answer_reads(env, UINT64_MAX, rc);
	}
}

static void confirm_then_read(struct api_req *req)
{
	struct api_env *env = req->env;
	struct api_reads *q = &env->reads;
	struct api_read *r = calloc(1, sizeof(*r));
	if (!r) {
		api_error(req, OFCD_E_STORE, NULL, "out of memory, try again");
		return;
	}
	/* A confirmation out now was sent before this read came: the next one answers it. */
	r->req = req;
	r->round = q->sent + 1;
	if (q->tail)
		q->tail->next = r;
	else
		q->head = r;
	q->tail = r;
	api_error(req, OFCD_E_SHUTTING_DOWN, NULL,
	          "this member stopped before etcd confirmed that it leads: try again");
	api_suspend(req, on_read_abort, r);
	/* Refused at once (not leading any more): answered from here, still in dispatch. */
	if (!q->out)
		send_confirmation(env);
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
	slices_drop(&w->slices);
	if (w->turn)
		event_free(w->turn);
	free(w->audit_token);
	free(w->audit_client);
	free(w->audit_method);
	free(w->audit_path);
	json_decref(w->placeholder);
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
		else if (rc == -EXDEV)
			/* In etcd's log: a member whose store lags may yet apply it. */
			api_error(
			    req, OFCD_E_OUTCOME_UNKNOWN, NULL,
			    "etcd's revision %lld is behind this member's store (etcd restored "
			    "from a backup, or replaced): the change is in etcd's log, which a "
			    "member whose store is behind may apply; see docs/ha.md, \"etcd "
			    "restored\"",
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
	struct timespec t0;

	clock_gettime(CLOCK_MONOTONIC, &t0);
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
	if (req->computing) {
		store_rollback(st); /* it wrote nothing */
		store_capture_free(cap);
		free(w);
		compute_first(req);
		return;
	}
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
	metrics_observe_write_stage("handler", mono_since(&t0));
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
		if ((env->cluster && refuse_here(req)) || !api_admit(req)) {
			req->suspended = false;
			api_audit_refusal(req);
			api_resume(req);
			continue;
		}
		if (env->cluster) {
			run_write(req);
			/* Unless in the log's hands, or its work off the loop. */
			if (!req->suspended)
				api_resume(req); /* answered at once: a refusal */
			continue;
		}
		req->suspended = false;
		req->on_abort = NULL;
		req->wait_arg = NULL;
		local_write(req);
		/* Unless held: stored in parts, or waiting (?wait=) for the units. */
		if (!req->suspended)
			api_resume(req);
	}
}

/* ---- writes that compute first ------------------------------------------
 *
 * A handler that calls api_compute_first() has written nothing: its
 * transaction is dropped, its work goes to the compute worker and the other
 * writes go on. Once the work is done, a refusal is its reply; otherwise the
 * write is dispatched again, and its handler's second run writes.
 */

static void on_computed(struct api_req *req, enum api_offload_end end)
{
	bool held = req->suspended; /* its work ran off the loop */
	req->computing = false;
	if (end == API_OFFLOAD_GONE || end == API_OFFLOAD_STOPPED) {
		/* Refused like a write that waits its turn, but in the audit trail. */
		store_audit(req->env->store, token_name(req), req->client, req->method, req->path,
		            end == API_OFFLOAD_GONE ? AUDIT_CLIENT_GONE : req->status);
		return;
	}
	if (end == API_OFFLOAD_REFUSED) {
		api_audit_refusal(req);
		if (held)
			api_resume(req);
		return;
	}
	/* Not the reply its wait set: the handler's, or its turn's. */
	unhold(req);
	api_dispatch(req);
	if (held && !req->suspended)
		api_resume(req);
}

static void compute_first(struct api_req *req)
{
	api_offload_fn work = req->compute_work;
	void (*free_arg)(void *arg) = req->compute_free;
	void *arg = req->compute_arg;
	req->compute_work = NULL;
	req->compute_free = NULL;
	req->compute_arg = NULL;
	api_offload_then(req, work, free_arg, arg, on_computed);
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
	enqueue(req);
}

/* Holds req until the writes before it are done (next_write()). */
static void enqueue(struct api_req *req)
{
	struct api_writes *q = &req->env->writes;
	struct api_write *w = calloc(1, sizeof(*w));
	if (!w) {
		api_error(req, OFCD_E_STORE, NULL, "out of memory, try again");
		return;
	}
	w->env = req->env;
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
