#include "wait.h"

#include <errno.h>
#include <event2/event.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "api.h"
#include "base/events.h"
#include "base/metrics.h"
#include "decimal.h"
#include "plan_state.h"
#include "reconcile/reconcile.h"
#include "domain/inventory.h"
#include "domain/topo.h"
#include "domain/units.h"

struct waiter {
	struct api_env *env;
	struct api_req *req;
	char name[65]; /* the fabric's, or for WAIT_SERVER_FREE the server's */
	enum wait_mode mode;
	bool summary;        /* ?view=summary: the reply leaves out the plan's lists */
	uint64_t generation; /* WAIT_REMOVED: a pass at least this new must have run */
	uint64_t closed;     /* WAIT_REMOVED: units the reconciler had closed at the commit */
	struct event *deadline;
	struct waiter *next, *prev;
};

/* One daemon per process: the list is process-wide, and on the bus while not empty. */
static struct waiter *waiters;
static struct events_sub *settled_sub;
static struct events *settled_bus;

int wait_parse(struct api_req *req, double *seconds)
{
	const char *v = api_query(req, "wait");
	*seconds = 0;
	if (!v)
		return 0;
	double s = decimal_plain(v) ? strtod(v, NULL) : -1;
	if (s < 0 || s > WAIT_MAX_S) {
		api_error(req, OFCD_E_INVALID_FIELD, "wait",
		          "wait must be 0 to %d seconds, got \"%s\"", WAIT_MAX_S, v);
		return -EINVAL;
	}
	*seconds = s;
	return 0;
}

static bool final(const char *state)
{
	enum plan_state s;
	return plan_state_parse(state, &s) == 0 && plan_state_final(s);
}

static bool done(struct waiter *w)
{
	struct api_env *d = w->env;
	/* Until the cluster's log has the change, the store does not show it yet. */
	if (w->req->replicating)
		return false;
	/*
	 * Only the units that held the fabric's circuits count: another unit
	 * down or busy with other fabrics does not hold up its removal.
	 */
	if (w->mode == WAIT_REMOVED)
		return reconcile_generation(d->reconciler) >= w->generation &&
		       reconcile_fabric_removed(d->reconciler, w->name, w->closed);
	if (w->mode == WAIT_SERVER_FREE) {
		int64_t id = topo_server_id(d->store, w->name);
		if (!id)
			return true; /* deleted meanwhile: refresh() says so */
		/* Not known (this member stopped leading, the store failed) is not free. */
		json_t *joined = topo_server_joined(d->store, d->units, id);
		bool free = json_is_array(joined) && json_array_size(joined) == 0;
		json_decref(joined);
		return free;
	}
	char state[16];
	if (topo_fabric_state(d->store, w->name, state, sizeof(state)) < 0)
		return true; /* deleted meanwhile: nothing more will happen */
	return final(state);
}

void api_fabric_view_reply(struct api_req *req, unsigned status, int64_t id, bool summary)
{
	struct store *s = req->env->store;
	size_t len;
	char *text = summary ? NULL : topo_fabric_json_text(s, id, &len);
	if (summary)
		api_reply(req, status, topo_fabric_summary_json(s, req->env->desired, id));
	else if (text)
		api_reply_text(req, status, "application/json", text, len);
	else
		api_error(req, OFCD_E_INTERNAL, NULL, "cannot read the fabric");
}

bool api_units_known(struct api_req *req)
{
	const struct domain_units *u = req->env->units;
	if (u && u->port_joined)
		return true;
	api_error(req, OFCD_E_NOT_LEADER, NULL,
	          "this member drives no OCS unit now (no leader is known, or it stopped "
	          "leading): which ports are joined is not known here; try again");
	return false;
}

void api_server_view_reply(struct api_req *req, int64_t id)
{
	struct store *s = req->env->store;
	json_t *view = inventory_view(s, id, topo_server_json(s, id, true));
	json_t *joined = topo_server_joined(s, req->env->units, id);
	if (view && joined)
		json_object_set(view, "joined", joined);
	json_decref(joined);
	api_reply(req, 200, view);
	api_set_etag(req, topo_server_revision(s, id));
}

/* The reply of the moment: the fabric's view, or for a removal how far it got. */
static void refresh(struct waiter *w)
{
	struct api_env *d = w->env;
	unsigned status = w->req->status;
	if (w->mode == WAIT_REMOVED) {
		bool gone = done(w);
		/* 200 once the circuits are off the units; 202 while they are still coming off. */
		api_reply(w->req, gone ? 200 : 202,
		          json_pack("{s:s, s:s}", "deleted", w->name, "state",
		                    gone ? "removed" : "removing"));
		return;
	}
	if (w->mode == WAIT_SERVER_FREE) {
		int64_t id = topo_server_id(d->store, w->name);
		if (!id)
			api_error(w->req, OFCD_E_NOT_FOUND, "name",
			          "server %s was deleted while waiting", w->name);
		else if (api_units_known(w->req)) /* else answered 503 */
			api_server_view_reply(w->req, id);
		return;
	}
	int64_t id = topo_fabric_id(d->store, w->name);
	if (!id) {
		api_error(w->req, OFCD_E_NOT_FOUND, "name", "fabric %s was deleted while waiting",
		          w->name);
		return;
	}
	api_fabric_view_reply(w->req, status, id, w->summary);
	/* A re-plan during the wait moved the revision on. */
	api_set_etag(w->req, topo_fabric_revision(d->store, id));
}

static void unlink_waiter(struct waiter *w)
{
	if (w->prev)
		w->prev->next = w->next;
	else if (waiters == w)
		waiters = w->next;
	if (w->next)
		w->next->prev = w->prev;
	if (w->deadline)
		event_free(w->deadline);
	free(w);
	if (!waiters && settled_sub) {
		events_unsubscribe(settled_bus, settled_sub);
		settled_sub = NULL;
	}
}

static void finish(struct waiter *w)
{
	struct api_req *req = w->req;
	refresh(w);
	unlink_waiter(w);
	api_resume(req);
}

static void on_deadline(evutil_socket_t fd, short what, void *arg)
{
	struct metrics_loop l = metrics_loop_enter("wait");
	struct waiter *w = arg;
	(void)fd;
	(void)what;
	if (w->req->replicating) {
		/* The answer waits for the log's: it says whether the change was made. */
		struct timeval soon = { 0, 100 * 1000 };
		evtimer_add(w->deadline, &soon);
	} else {
		finish(w);
	}
	metrics_loop_leave(l);
}

static void on_abort(struct api_req *req, bool conn_closed)
{
	struct waiter *w = req->wait_arg;
	if (!conn_closed)
		refresh(w);
	unlink_waiter(w);
}

/* Fabric states or unit sync may have changed: finish the waiters whose condition holds. */
static void on_settled(void *arg, const struct events_msg *msg)
{
	(void)arg;
	(void)msg;
	for (struct waiter *w = waiters, *next; w; w = next) {
		next = w->next;
		if (done(w))
			finish(w);
	}
}

/* The pass that sees the change is the one after its commit, which may come late. */
static void on_committed(struct api_req *req)
{
	struct waiter *w = req->wait_arg;
	w->generation = reconcile_generation(w->env->reconciler) + 1;
	w->closed = reconcile_units_closed(w->env->reconciler);
}

void wait_hold(struct api_req *req, const char *name, enum wait_mode mode, double seconds)
{
	struct api_env *d = req->env;
	struct waiter *w = calloc(1, sizeof(*w));
	if (!w)
		return; /* the reply already set is an honest answer */
	w->env = d;
	w->req = req;
	w->mode = mode;
	/* The handler has refused any other value. */
	const char *view = api_query(req, "view");
	w->summary = view && strcmp(view, "summary") == 0;
	snprintf(w->name, sizeof(w->name), "%s", name);
	/* The change is committed after the handler returns; the pass that sees it comes later. */
	w->generation = reconcile_generation(d->reconciler) + 1;
	w->closed = reconcile_units_closed(d->reconciler);
	/* A daemon that is draining answers at once: nothing may hold its stop. */
	if (seconds <= 0 || d->draining) {
		if (seconds > 0)
			refresh(w);
		free(w);
		return;
	}
	if (mode != WAIT_REMOVED && done(w)) {
		refresh(w); /* the caller may have set a placeholder reply */
		free(w);
		return;
	}
	if (!settled_sub) {
		settled_bus = d->events;
		settled_sub =
		    events_subscribe(d->events, EVENTS_BIT(EVENTS_SETTLED), on_settled, NULL);
		if (!settled_sub) {
			free(w);
			return;
		}
	}
	w->deadline = evtimer_new(d->base, on_deadline, w);
	struct timeval tv = { .tv_sec = (time_t)seconds,
		              .tv_usec = (suseconds_t)((seconds - floor(seconds)) * 1e6) };
	w->next = waiters;
	if (waiters)
		waiters->prev = w;
	waiters = w;
	if (!w->deadline || evtimer_add(w->deadline, &tv) < 0) {
		unlink_waiter(w); /* the reply already set is an honest answer */
		return;
	}
	api_suspend(req, on_abort, w);
	req->committed = on_committed;
}
