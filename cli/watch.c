/*
 * --watch: the answer of a GET, printed again whenever the event stream says
 * it may have changed. The stream has a connection of its own; the re-reads
 * go over a second one while it stays open, so no event is missed between a
 * read and the next. A stream that drops is resumed with Last-Event-ID: the
 * daemon replays what was missed, or sends `reset` when it cannot (another
 * run, too old), after which the answer is read again.
 */
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "cmd.h"
#include "sse.h"
#include "yaml.h"

/* Reconnection delays: quick after a blip, every 5 s at most while the daemon is away. */
#define RETRY_FIRST_MS 200
#define RETRY_MAX_MS   5000

/* Set by SIGINT and SIGTERM (cmd_stop_on_signals()): the watch ends, exit 0. */
static const volatile sig_atomic_t *stop;

struct watch {
	struct cmd_ctx *c;
	const struct watch_spec *w;
	struct client *reader; /* the second connection, for re-reads */
	struct sse sse;
	char last_id[256]; /* the last event id seen: where a reconnection resumes */
	char *shown;       /* the body printed last (malloc'd) */
	bool opened;       /* the stream's connection sent its first bytes */
	bool stale;        /* a re-read failed: read again once the stream is back */
	int parse_err;     /* the SSE parser's error, when it stopped the stream */
	int end;           /* the exit code once the watch must end; -1 while it goes on */
};

/* What an event means for the answer watched. */
enum action {
	IGNORE,
	REREAD,
	GONE,
};

/* For each event type, the member of its data naming the object it is about, and its kind. */
static const struct {
	const char *event;
	const char *resource; /* NULL: the data's own "resource" member says */
	const char *member;
} about[] = {
	{ "fabric", "fabric", "fabric" }, { "fabric_state", "fabric", "fabric" },
	{ "topology", NULL, "name" },     { "ocs_connection", "ocs", "ocs" },
	{ "port_state", "ocs", "ocs" },   { "device_state", "server", "server" },
};

static enum action judge(const struct watch_spec *w, const char *event, const json_t *data)
{
	bool listed = false;
	if (strcmp(event, "reset") == 0)
		return REREAD;
	for (const char *const *k = w->kinds; *k; k++)
		listed |= strcmp(*k, event) == 0;
	if (!listed || !w->name)
		return listed ? REREAD : IGNORE;
	for (size_t i = 0; i < sizeof(about) / sizeof(about[0]); i++) {
		if (strcmp(about[i].event, event) != 0)
			continue;
		const char *res = about[i].resource
		                      ? about[i].resource
		                      : json_string_value(json_object_get(data, "resource"));
		const char *name = json_string_value(json_object_get(data, about[i].member));
		const char *change = json_string_value(json_object_get(data, "change"));
		/* Another object of the same kind; an event about anything else may still matter.
		 */
		if (!res || !name || strcmp(res, w->resource) != 0)
			return REREAD;
		if (strcmp(name, w->name) != 0)
			return IGNORE;
		return change && strcmp(change, "deleted") == 0 ? GONE : REREAD;
	}
	return REREAD;
}

/* Prints an answer; cl is a connection free for the reads that complete it. */
static void print(struct watch *wt, struct client *cl, const struct client_reply *r)
{
	struct cmd_ctx *c = wt->c;
	if (c->format == OUT_JSON) {
		char *s = r->json ? json_dumps(r->json, JSON_COMPACT) : NULL;
		puts(s ? s : r->body);
		free(s);
	} else if (c->format == OUT_YAML) {
		puts("---");
		yaml_print(stdout, r->json);
	} else {
		if (wt->shown)
			putchar('\n');
		cmd_show_fn show =
		    c->format == OUT_WIDE && wt->w->wide ? wt->w->wide : wt->w->table;
		if (wt->w->complete && r->json)
			wt->w->complete(cl, r->json);
		show(r->json);
	}
	/* A pipe reader sees each change as it happens. */
	fflush(stdout);
}

static void gone(struct watch *wt)
{
	if (wt->c->format == OUT_TABLE || wt->c->format == OUT_WIDE)
		printf("%s %s deleted\n", wt->w->resource, wt->w->name);
	else
		fprintf(stderr, "ofcctl: %s %s deleted\n", wt->w->resource, wt->w->name);
	fflush(stdout);
	wt->end = CMD_OK;
}

/* Reads the answer again and prints it if it changed. */
static void reread(struct watch *wt)
{
	struct client_reply r = { 0 };
	struct client_req q = { .path = wt->w->path,
		                .timeout_ms = CMD_REPLY_TIMEOUT_MS,
		                .stop = stop };
	char err[512] = "";
	int rc = client_send(wt->reader, &q, &r, err, sizeof(err));
	wt->stale = false;
	if (rc == -EINTR) {
		wt->end = CMD_OK;
	} else if (rc == 0 && r.status == 404 && wt->w->name) {
		gone(wt);
	} else if (rc || r.status >= 500) {
		wt->stale = true; /* the stream is most likely going too: after it comes back */
	} else if (r.status >= 300) {
		wt->end = cmd_report(wt->c, rc, err, &r);
	} else if (!wt->shown || strcmp(wt->shown, r.body) != 0) {
		print(wt, wt->reader, &r);
		free(wt->shown);
		wt->shown = r.body;
		r.body = NULL;
	}
	client_reply_free(&r);
}

static void on_event(const struct sse_event *ev, void *arg)
{
	struct watch *wt = arg;
	if (ev->id[0])
		snprintf(wt->last_id, sizeof(wt->last_id), "%s", ev->id);
	if (wt->end >= 0)
		return;
	json_t *data = json_loads(ev->data, 0, NULL);
	enum action a = judge(wt->w, ev->event, data);
	json_decref(data);
	if (a == GONE)
		gone(wt);
	else if (a == REREAD)
		reread(wt);
}

static int on_chunk(const char *data, size_t n, void *arg)
{
	struct watch *wt = arg;
	/* Open again without a place to resume from: what changed meanwhile is unknown. */
	if (!wt->opened) {
		wt->opened = true;
		if (!wt->last_id[0] || wt->stale)
			reread(wt);
	}
	wt->parse_err = sse_feed(&wt->sse, data, n);
	return wt->parse_err ? wt->parse_err : wt->end >= 0;
}

static void pause_ms(long ms)
{
	struct timespec ts = { ms / 1000, (ms % 1000) * 1000000L };
	nanosleep(&ts, NULL); /* a signal cuts it short */
}

/* Follows the stream, reconnecting, until the watch ends; returns its exit code. */
static int follow(struct watch *wt, const char *path)
{
	long delay = RETRY_FIRST_MS;
	bool warned = false;
	while (wt->end < 0 && !*stop) {
		struct client_reply r = { 0 };
		struct client_req q = { .path = path,
			                .accept = "text/event-stream",
			                .last_event_id = wt->last_id[0] ? wt->last_id : NULL,
			                .fn = on_chunk,
			                .arg = wt,
			                .stop = stop };
		char err[512] = "";
		wt->opened = false;
		sse_init(&wt->sse, on_event, wt);
		int rc = client_send(wt->c->client, &q, &r, err, sizeof(err));
		sse_free(&wt->sse);
		if (rc == -ECANCELED && wt->parse_err)
			wt->end = cmd_fail(CMD_UNREACHABLE, "the event stream broke: %s",
			                   wt->parse_err == -E2BIG ? "an event over 1 MiB"
			                                           : "out of memory");
		else if (rc == 0 && r.status >= 400 && r.status < 500)
			wt->end = cmd_report(wt->c, rc, err, &r);
		client_reply_free(&r);
		if (wt->end >= 0 || *stop)
			break;
		if (wt->opened) {
			delay = RETRY_FIRST_MS;
			warned = false;
		}
		if (!warned)
			fprintf(stderr, "ofcctl: lost the event stream (%s); reconnecting\n",
			        rc ? err : "the daemon ended it");
		warned = true;
		pause_ms(delay);
		delay = delay * 2 > RETRY_MAX_MS ? RETRY_MAX_MS : delay * 2;
	}
	return wt->end >= 0 ? wt->end : CMD_OK;
}

int cmd_watch(struct cmd_ctx *c, const struct watch_spec *w)
{
	struct watch wt = { .c = c, .w = w, .end = -1 };
	struct client_reply r = { 0 };
	char err[512];
	char *path = strdup("/v1/events");

	/* The first answer: a refusal here (no such fabric) ends the watch as any command. */
	int rc = cmd_call(c, "GET", w->path, NULL, 0, &r);
	if (rc) {
		client_reply_free(&r);
		free(path);
		return rc;
	}
	print(&wt, c->client, &r);
	wt.shown = r.body;
	r.body = NULL;
	client_reply_free(&r);

	if (!path || (w->fabric && cmd_add_query(c, &path, "fabric", w->fabric)))
		rc = cmd_fail(CMD_UNREACHABLE, "out of memory");
	else if (!(wt.reader = client_clone(c->client, err, sizeof(err))))
		rc = cmd_fail(CMD_UNREACHABLE, "%s", err);
	if (rc == CMD_OK) {
		stop = cmd_stop_on_signals(); /* the pause between reconnections ends at once */
		rc = follow(&wt, path);
	}
	client_free(wt.reader);
	free(wt.shown);
	free(path);
	return rc;
}
