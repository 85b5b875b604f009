/* Replies and writes' work made off the loop: see api_offload() in api.h. */
#include <stdlib.h>

#include "api.h"
#include "base/metrics.h"
#include "base/worker.h"

#define OFFLOADED_HELP                                                                             \
	"Requests whose reply, or whose write's work, was made on the compute worker, off the "    \
	"loop."
#define REFUSED_HELP                                                                               \
	"Requests refused with 503 overloaded because the compute worker had too many in hand."

struct offload {
	struct api_req *req; /* loop thread only */
	struct api_req out;  /* the work's own reply */
	api_offload_fn work;
	void (*free_arg)(void *arg);
	void *arg;
	struct worker_job *job;
	api_offload_then_fn then; /* NULL: req takes the work's reply and is sent */
};

void api_offload_metrics_init(void)
{
	metrics_counter_add("ofcd_http_offloaded_total", OFFLOADED_HELP, NULL, 0);
	metrics_counter_add("ofcd_http_offload_refused_total", REFUSED_HELP, NULL, 0);
}

static void offload_work(void *p)
{
	struct offload *o = p;
	o->work(o->arg, &o->out);
	size_t len;
	char *text = o->out.reply ? api_json_text(o->out.reply, &len) : NULL;
	/* Without memory for the text the loop writes it out, as for any reply. */
	if (text)
		api_reply_text(&o->out, o->out.status, "application/json", text, len);
}

/* A reply's text written on the worker, to be freed there (worker_free_later()). */
struct worker_text {
	struct worker *w;
	char *text;
};

static void free_on_worker(void *cls)
{
	struct worker_text *t = cls;
	worker_free_later(t->w, t->text);
	free(t);
}

/* req's reply becomes out's; out keeps nothing. w: the worker out's reply was made on. */
static void take_reply(struct api_req *req, struct api_req *out, struct worker *w)
{
	struct worker_text *t = w && out->reply_text ? malloc(sizeof(*t)) : NULL;
	if (t) {
		*t = (struct worker_text){ w, out->reply_text };
		api_reply_text_owned(req, out->status, out->content_type, out->reply_text,
		                     out->reply_len, free_on_worker, t);
		out->reply_text = NULL;
	} else if (out->reply_text) {
		api_reply_text(req, out->status, out->content_type, out->reply_text,
		               out->reply_len);
		out->reply_text = NULL;
	} else if (out->reply) {
		api_reply(req, out->status, out->reply);
		out->reply = NULL;
	} else {
		api_error(req, OFCD_E_INTERNAL, NULL, "the request's work made no reply");
	}
	if (req->status >= 400)
		req->etag[0] = req->location[0] = '\0';
}

static bool replied(const struct api_req *out)
{
	return out->reply || out->reply_text;
}

/*
 * The work is done: with then, req keeps arg when work did not reply (then
 * decides what follows); else req takes the work's reply, and is sent when
 * it was held for it (not when the work ran at once, inside its handler).
 */
static void deliver(struct offload *o, struct worker *w, bool held)
{
	struct api_req *req = o->req;
	bool refused = replied(&o->out);
	if (!o->then || refused)
		take_reply(req, &o->out, w);
	if (o->then && !refused) {
		req->computed = o->arg;
		req->computed_free = o->free_arg;
		o->free_arg = NULL;
	}
	if (o->then)
		o->then(req, refused ? API_OFFLOAD_REFUSED : API_OFFLOAD_DONE);
	else if (held)
		api_resume(req);
}

static void offload_done(void *p)
{
	struct offload *o = p;
	struct api_req *req = o->req;
	req->on_abort = NULL;
	req->wait_arg = NULL;
	req->offloaded = false;
	deliver(o, req->env->compute, true);
}

static void offload_free(void *p)
{
	struct offload *o = p;
	json_decref(o->out.reply);
	api_reply_text_drop(&o->out);
	if (o->free_arg)
		o->free_arg(o->arg);
	free(o);
}

static void on_offload_abort(struct api_req *req, bool conn_closed)
{
	struct offload *o = req->wait_arg;
	api_offload_then_fn then = o->then;
	req->offloaded = false;
	/*
	 * Its work may be running: the worker frees it when done, and nobody
	 * hears. The reply set in api_offload_then() says why, if anyone hears.
	 */
	worker_cancel(o->job);
	if (then)
		then(req, conn_closed ? API_OFFLOAD_GONE : API_OFFLOAD_STOPPED);
}

/* 503 overloaded: the worker has as many requests in hand as it takes. */
static void refuse(struct api_req *req)
{
	metrics_counter_add("ofcd_http_offload_refused_total", REFUSED_HELP, NULL, 1);
	api_error(req, OFCD_E_OVERLOADED, NULL,
	          "the daemon has %zu long requests in hand (plans, pipelines, schedules, "
	          "calibrations): try again shortly",
	          worker_queued(req->env->compute));
}

bool api_offload_full(struct api_req *req)
{
	struct worker *w = req->env->compute;
	if (!w || worker_queued(w) < API_OFFLOAD_MAX_IN_HAND)
		return false;
	refuse(req);
	return true;
}

void api_offload_then(struct api_req *req, api_offload_fn work, void (*free_arg)(void *arg),
                      void *arg, api_offload_then_fn then)
{
	struct worker *w = req->env->compute;
	struct offload *o = calloc(1, sizeof(*o));
	if (!o) {
		if (free_arg)
			free_arg(arg);
		api_error(req, OFCD_E_INTERNAL, NULL, "out of memory");
		if (then)
			then(req, API_OFFLOAD_REFUSED);
		return;
	}
	*o = (struct offload){
		.req = req, .work = work, .free_arg = free_arg, .arg = arg, .then = then
	};
	if (!w) {
		o->work(o->arg, &o->out);
		deliver(o, NULL, false);
		offload_free(o);
		return;
	}
	o->job = worker_submit(w, offload_work, offload_done, offload_free, o);
	if (!o->job) {
		offload_free(o);
		refuse(req);
		if (then)
			then(req, API_OFFLOAD_REFUSED);
		return;
	}
	metrics_counter_add("ofcd_http_offloaded_total", OFFLOADED_HELP, NULL, 1);
	/* What it would answer if it had to end before its work is done. */
	api_error(req, OFCD_E_SHUTTING_DOWN, NULL, "the daemon is shutting down");
	api_suspend(req, on_offload_abort, o);
	req->offloaded = true;
}

void api_offload(struct api_req *req, api_offload_fn work, void (*free_arg)(void *arg), void *arg)
{
	api_offload_then(req, work, free_arg, arg, NULL);
}
