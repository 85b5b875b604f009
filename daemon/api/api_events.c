/*
 * GET /v1/events: the event bus as Server-Sent Events, one bus subscriber per
 * client, optionally filtered to one fabric.
 */
#include <event2/event.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "api_handlers.h"
#include "base/events.h"

#define KEEPALIVE_S 15

struct sse_client {
	struct events *bus;
	struct events_sub *sub;
	struct api_stream *stream;
	struct event *keepalive;
	char fabric[65]; /* filter; empty for all events */
};

static bool wanted(const struct sse_client *c, json_t *data)
{
	if (!c->fabric[0])
		return true;
	const char *f = json_string_value(json_object_get(data, "fabric"));
	if (f && strcmp(f, c->fabric) == 0)
		return true;
	size_t i;
	json_t *v;
	json_array_foreach(json_object_get(data, "fabrics"), i, v)
	{
		if (json_is_string(v) && strcmp(json_string_value(v), c->fabric) == 0)
			return true;
	}
	return false;
}

static void on_event(void *arg, const struct events_msg *msg)
{
	struct sse_client *c = arg;
	char *text = NULL;
	if (!wanted(c, msg->data))
		return;
	/* An event without an id (a member's own) leaves the client's last id as it was. */
	int rc = msg->id
	             ? asprintf(&text, "id: %s-%llu\nevent: %s\ndata: %s\n\n", msg->instance,
	                        msg->id, msg->name, events_msg_json(msg))
	             : asprintf(&text, "event: %s\ndata: %s\n\n", msg->name, events_msg_json(msg));
	if (rc < 0)
		return;
	api_stream_write(c->stream, text, strlen(text));
	free(text);
}

/*
 * Where a reconnecting client left off: Last-Event-ID "INSTANCE-N" of an
 * event this member still keeps (its own, or in a cluster its leader's,
 * which every member publishes under the leader's id) replays what followed
 * it; anything else (another run, an id older than the history, garbage)
 * gets a `reset` event instead, telling the client to read the state again
 * before following the stream.
 */
static void resume(struct sse_client *c, const char *last)
{
	if (events_replay(c->bus, last, EVENTS_PUBLIC, on_event, c) == 0)
		return;
	/* A restart shows as an id of another instance than this bus's. */
	const char *instance = events_instance(c->bus);
	size_t n = strlen(instance);
	const char *reason =
	    strncmp(last, instance, n) == 0 && last[n] == '-' ? "history" : "restart";
	char *text = NULL;
	if (asprintf(&text, "event: reset\ndata: {\"reason\":\"%s\"}\n\n", reason) >= 0)
		api_stream_write(c->stream, text, strlen(text));
	free(text);
}

/* A comment line every KEEPALIVE_S: proxies keep the stream open, and a dead client is noticed. */
static void on_keepalive(evutil_socket_t fd, short what, void *arg)
{
	struct sse_client *c = arg;
	(void)fd;
	(void)what;
	api_stream_write(c->stream, ": keepalive\n\n", 13);
}

static void on_close(void *arg)
{
	struct sse_client *c = arg;
	events_unsubscribe(c->bus, c->sub);
	if (c->keepalive)
		event_free(c->keepalive);
	free(c);
}

void api_events(struct api_req *req)
{
	const char *fabric = api_query(req, "fabric");
	if (req->env->draining) {
		api_error(req, OFCD_E_SHUTTING_DOWN, NULL, "the daemon is shutting down");
		return;
	}
	if (fabric && !auth_valid_name(fabric)) {
		api_error(req, OFCD_E_INVALID_FIELD, "fabric",
		          "fabric must be a name of 1 to 64 characters of [A-Za-z0-9._-]");
		return;
	}
	struct sse_client *c = calloc(1, sizeof(*c));
	struct timeval tv = { KEEPALIVE_S, 0 };
	if (!c)
		goto nomem;
	c->bus = req->env->events;
	if (fabric)
		snprintf(c->fabric, sizeof(c->fabric), "%s", fabric);
	c->keepalive = event_new(req->env->base, -1, EV_PERSIST, on_keepalive, c);
	c->sub = events_subscribe(c->bus, EVENTS_PUBLIC, on_event, c);
	if (!c->keepalive || !c->sub || event_add(c->keepalive, &tv) < 0)
		goto nomem;
	c->stream = api_stream_start(req, "text/event-stream", on_close, c);
	if (!c->stream)
		goto fail; /* the transport replied 500 */
	/* The first bytes tell the client the stream is open. */
	api_stream_write(c->stream, ": ofcd events\n\n", 15);
	const char *last = api_header(req, "Last-Event-ID");
	if (last)
		resume(c, last);
	return;
nomem:
	api_error(req, OFCD_E_INTERNAL, NULL, "out of memory");
fail:
	if (c) {
		events_unsubscribe(c->bus, c->sub);
		if (c->keepalive)
			event_free(c->keepalive);
	}
	free(c);
}
