/* Routes of the daemon itself: health probe, metrics and its place in a cluster. */
#include <errno.h>
#include <event2/event.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "api_handlers.h"
#include "base/metrics.h"
#include "state/store_changes.h"
#include "version.h"
#include "monotonic.h"

static double uptime(const struct api_env *env)
{
	return mono_since(&env->started);
}

void api_health(struct api_req *req)
{
	api_reply(req, 200,
	          json_pack("{s:s, s:s, s:I}", "status", req->env->draining ? "draining" : "ok",
	                    "version", OFCD_VERSION, "uptime_s", (json_int_t)uptime(req->env)));
}

void api_cluster_get(struct api_req *req)
{
	const struct api_cluster *c = req->env->cluster;
	if (c) {
		api_reply(req, 200, c->status(c->arg));
		return;
	}
	/* A single daemon is its own leader: the same shape, so clients need no special case. */
	api_reply(req, 200,
	          json_pack("{s:n, s:s, s:n, s:n, s:i, s:[], s:i, s:i, s:b}", "self", "role",
	                    "standalone", "leader", "leader_advertise", "generation", 0, "members",
	                    "revision", 0, "applied_revision", 0, "etcd_reachable", 0));
}

/*
 * Pages of the store a snapshot copies per loop turn: 8 MiB of 4 KiB pages, a few
 * milliseconds, so that a copy of a large store (180 MiB at 32,770 servers) never holds the
 * loop a leader renews its lease on.
 */
#define SNAPSHOT_PAGES 2048

/* A snapshot being made for a request, a part per turn. */
struct snapshot_job {
	struct api_req *req;
	struct store_snapshot *ss;
	struct event *turn;
};

static void snapshot_job_free(struct snapshot_job *j)
{
	if (!j)
		return;
	store_snapshot_free(j->ss);
	if (j->turn)
		event_free(j->turn);
	free(j);
}

static void snapshot_job_release(void *cls)
{
	snapshot_job_free(cls);
}

static void on_snapshot_abort(struct api_req *req, bool conn_closed)
{
	(void)req;
	(void)conn_closed; /* the 503 set before suspending is the answer at a shutdown */
	snapshot_job_free(req->wait_arg);
}

/*
 * The next part in a later loop turn, after what else is ready: a timer, since an event made
 * active from its own callback would run again before the loop looks at its sockets.
 */
static void snapshot_next(struct snapshot_job *j, bool busy)
{
	struct timeval tv = { 0, busy ? 5000 : 0 };
	evtimer_add(j->turn, &tv);
}

static void on_snapshot_turn(evutil_socket_t fd, short what, void *arg)
{
	struct metrics_loop l = metrics_loop_enter("api");
	struct snapshot_job *j = arg;
	struct api_req *req = j->req;
	const void *data = NULL;
	size_t len = 0;
	(void)fd;
	(void)what;
	int rc = store_snapshot_step(j->ss, SNAPSHOT_PAGES);
	if (rc == 0 || rc == -EBUSY) {
		snapshot_next(j, rc == -EBUSY);
	} else {
		if (rc == 1)
			data = store_snapshot_data(j->ss, &len);
		/* The copy's memory is sent as it is, the job freed once it is sent. */
		req->wait_arg = NULL;
		if (data)
			api_reply_text_owned(req, 200, "application/vnd.sqlite3", data, len,
			                     snapshot_job_release, j);
		else
			api_error(req, OFCD_E_INTERNAL, NULL, "cannot copy the store: %s",
			          strerror(rc < 0 ? -rc : ENOMEM));
		if (!data)
			snapshot_job_free(j);
		api_resume(req);
	}
	metrics_loop_leave(l);
}

void api_cluster_snapshot(struct api_req *req)
{
	struct snapshot_job *j = calloc(1, sizeof(*j));
	int rc = j ? store_snapshot_begin(req->env->store, &j->ss) : -ENOMEM;

	if (rc == 0 && !(j->turn = evtimer_new(req->env->base, on_snapshot_turn, j)))
		rc = -ENOMEM;
	if (rc < 0) {
		if (j)
			snapshot_job_free(j);
		/* Busy: the file is being recovered or checkpointed; a retry is the cure. */
		api_error(req, rc == -EBUSY ? OFCD_E_STORE : OFCD_E_INTERNAL, NULL,
		          "cannot copy the store: %s", strerror(-rc));
		return;
	}
	j->req = req;
	/* The answer if the daemon stops before the copy is whole. */
	api_error(req, OFCD_E_SHUTTING_DOWN, NULL, "the daemon stopped before the copy was whole");
	api_suspend(req, on_snapshot_abort, j);
	snapshot_next(j, false);
}

void api_metrics(struct api_req *req)
{
	size_t len = 0;
	char *text = metrics_render(&len);
	if (!text) {
		api_error(req, OFCD_E_INTERNAL, NULL, "cannot render metrics");
		return;
	}
	api_reply_text(req, 200, "text/plain; version=0.0.4", text, len);
}
