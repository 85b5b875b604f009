#include "events.h"

#include <errno.h>
#include <event2/event.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "api.h"
#include "api_handlers.h"
#include "http.h"
#include "log.h"
#include "ofcd.h"

#define KEEPALIVE_S 15

struct subscriber {
	struct events *ev;
	struct http_stream *stream;
	char fabric[65]; /* filter; empty for all events */
	struct subscriber *next, *prev;
};

struct events {
	struct subscriber *subs;
	struct event *keepalive;
	unsigned long long next_id;
};

/* A comment line every KEEPALIVE_S: proxies keep the stream open, and a dead client is noticed. */
static void on_keepalive(evutil_socket_t fd, short what, void *arg)
{
	struct events *ev = arg;
	(void)fd;
	(void)what;
	for (struct subscriber *s = ev->subs, *next; s; s = next) {
		next = s->next;
		http_stream_write(s->stream, ": keepalive\n\n", 13);
	}
}

int events_init(struct ofcd *d, struct events **out)
{
	struct events *ev = calloc(1, sizeof(*ev));
	if (!ev)
		return -ENOMEM;
	ev->next_id = 1;
	ev->keepalive = event_new(d->base, -1, EV_PERSIST, on_keepalive, ev);
	struct timeval tv = { KEEPALIVE_S, 0 };
	if (!ev->keepalive || event_add(ev->keepalive, &tv) < 0) {
		events_free(ev);
		return -ENOMEM;
	}
	*out = ev;
	return 0;
}

void events_close_all(struct events *ev)
{
	for (struct subscriber *s = ev ? ev->subs : NULL; s; s = s->next)
		http_stream_end(s->stream);
}

void events_free(struct events *ev)
{
	if (!ev)
		return;
	if (ev->keepalive)
		event_free(ev->keepalive);
	free(ev);
}

static bool wanted(const struct subscriber *s, json_t *data)
{
	if (!s->fabric[0])
		return true;
	const char *f = json_string_value(json_object_get(data, "fabric"));
	if (f && strcmp(f, s->fabric) == 0)
		return true;
	size_t i;
	json_t *v;
	json_array_foreach(json_object_get(data, "fabrics"), i, v)
	{
		if (json_is_string(v) && strcmp(json_string_value(v), s->fabric) == 0)
			return true;
	}
	return false;
}

void events_emit(struct events *ev, const char *type, json_t *data)
{
	char when[64];
	struct timespec ts;
	struct tm tm;
	clock_gettime(CLOCK_REALTIME, &ts);
	gmtime_r(&ts.tv_sec, &tm);
	snprintf(when, sizeof(when), "%04d-%02d-%02dT%02d:%02d:%02d.%03ldZ", tm.tm_year + 1900,
	         tm.tm_mon + 1, tm.tm_mday, tm.tm_hour, tm.tm_min, tm.tm_sec, ts.tv_nsec / 1000000);
	json_object_set_new(data, "time", json_string(when));
	unsigned long long id = ev->next_id++;
	char *text = NULL;
	for (struct subscriber *s = ev->subs, *next; s; s = next) {
		next = s->next;
		if (!wanted(s, data))
			continue;
		if (!text) {
			char *json = json_dumps(data, JSON_COMPACT);
			if (!json || asprintf(&text, "id: %llu\nevent: %s\ndata: %s\n\n", id, type,
			                      json) < 0)
				text = NULL;
			free(json);
			if (!text)
				break;
		}
		http_stream_write(s->stream, text, strlen(text));
	}
	free(text);
	json_decref(data);
}

static void on_close(void *arg)
{
	struct subscriber *s = arg;
	if (s->prev)
		s->prev->next = s->next;
	else
		s->ev->subs = s->next;
	if (s->next)
		s->next->prev = s->prev;
	free(s);
}

void api_events(struct api_req *req)
{
	struct events *ev = req->d->events;
	const char *fabric = api_query(req, "fabric");
	if (req->d->draining) {
		api_error(req, OFCD_E_SHUTTING_DOWN, NULL, "the daemon is shutting down");
		return;
	}
	if (fabric && !auth_valid_name(fabric)) {
		api_error(req, OFCD_E_INVALID_FIELD, "fabric",
		          "fabric must be a name of 1 to 64 characters of [A-Za-z0-9._-]");
		return;
	}
	struct subscriber *s = calloc(1, sizeof(*s));
	if (!s) {
		api_error(req, OFCD_E_INTERNAL, NULL, "out of memory");
		return;
	}
	s->ev = ev;
	if (fabric)
		snprintf(s->fabric, sizeof(s->fabric), "%s", fabric);
	s->stream = http_stream_start(req, "text/event-stream", on_close, s);
	if (!s->stream) {
		free(s);
		return;
	}
	s->next = ev->subs;
	if (s->next)
		s->next->prev = s;
	ev->subs = s;
	/* The first bytes tell the client the stream is open. */
	http_stream_write(s->stream, ": ofcd events\n\n", 15);
}
