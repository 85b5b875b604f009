/* Routes of the daemon itself: health probe, metrics and its place in a cluster. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "api_handlers.h"
#include "base/metrics.h"
#include "state/store_changes.h"
#include "version.h"

static double uptime(const struct api_env *env)
{
	struct timespec now;
	clock_gettime(CLOCK_MONOTONIC, &now);
	return (double)(now.tv_sec - env->started.tv_sec) +
	       (double)(now.tv_nsec - env->started.tv_nsec) / 1e9;
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
	          json_pack("{s:n, s:s, s:n, s:i, s:[], s:i, s:i, s:b}", "self", "role",
	                    "standalone", "leader", "generation", 0, "members", "revision", 0,
	                    "applied_revision", 0, "etcd_reachable", 0));
}

void api_cluster_snapshot(struct api_req *req)
{
	void *data;
	size_t len;
	int rc = store_snapshot(req->env->store, &data, &len);
	if (rc < 0) {
		api_error(req, rc == -EBUSY ? OFCD_E_STORE : OFCD_E_INTERNAL, NULL,
		          "cannot copy the store: %s", strerror(-rc));
		return;
	}
	api_reply_text(req, 200, "application/vnd.sqlite3", data, len);
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
