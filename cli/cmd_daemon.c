/*
 * operations, events, audit, health and version: what the daemon did, is
 * doing, who asked it, and whether it is up.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cmd.h"
#include "sse.h"
#include "table.h"
#include "version.h"

static int show_operations(const json_t *reply)
{
	static const char *const head[] = { "ID",     "OCS",     "TRIGGER", "ADDS",    "DELETES",
		                            "STATUS", "STARTED", "ENDED",   "FABRICS", "ERROR" };
	static const char *const keys[] = { "id",     "ocs",     "trigger", "nadds",   "ndeletes",
		                            "status", "started", "ended",   "fabrics", "error" };
	return cmd_print_rows(json_object_get(reply, "operations"), head, keys, 10);
}

int cmd_operations(struct cmd_ctx *c)
{
	char *path = strdup("/v1/operations"), limit[32];
	int rc = path ? 0 : -ENOMEM;
	snprintf(limit, sizeof(limit), "%ld", c->args.limit);
	if (!rc && (c->args.given & OPT_FABRIC))
		rc = cmd_add_query(c, &path, "fabric", c->args.fabric);
	if (!rc && (c->args.given & OPT_OCS))
		rc = cmd_add_query(c, &path, "ocs", c->args.ocs);
	if (!rc && (c->args.given & OPT_LIMIT))
		rc = cmd_add_query(c, &path, "limit", limit);
	if (rc)
		return cmd_fail(CMD_UNREACHABLE, "out of memory");
	rc = cmd_get_show(c, path, show_operations, NULL);
	free(path);
	return rc;
}

/* An event line for people: time, type, then the data's other members as key=value. */
static void print_event_line(const struct sse_event *ev)
{
	json_t *data = json_loads(ev->data, 0, NULL);
	const char *time = json_string_value(json_object_get(data, "time"));
	const char *key;
	json_t *v;
	if (!json_is_object(data)) {
		printf("%s %s\n", ev->event, ev->data);
		json_decref(data);
		return;
	}
	printf("%s %s", time ? time : "-", ev->event);
	json_object_foreach(data, key, v)
	{
		char buf[4096];
		if (strcmp(key, "time") != 0)
			printf(" %s=%s", key, table_text(v, buf, sizeof(buf)));
	}
	putchar('\n');
	json_decref(data);
}

/*
 * For scripts: {"id", "event", "data"} with data as the daemon sent it, as a
 * JSON line, or as a YAML document of its own.
 */
static void print_event_doc(struct cmd_ctx *c, const struct sse_event *ev)
{
	json_t *data = json_loads(ev->data, JSON_DECODE_ANY, NULL);
	json_t *doc = json_pack("{s:s, s:s, s:o}", "id", ev->id, "event", ev->event, "data",
	                        data ? data : json_string(ev->data));
	if (c->format == OUT_YAML)
		puts("---");
	if (doc)
		cmd_print_doc(c, doc);
	json_decref(doc);
}

struct events {
	struct cmd_ctx *c;
	struct sse sse;
	int err; /* the parser's error, when it stopped the stream */
};

static void on_event(const struct sse_event *ev, void *arg)
{
	struct events *e = arg;
	if (e->c->format == OUT_JSON || e->c->format == OUT_YAML)
		print_event_doc(e->c, ev);
	else
		print_event_line(ev);
	/* A pipe reader sees each event as it happens, not when a buffer fills. */
	fflush(stdout);
}

static int on_chunk(const char *data, size_t n, void *arg)
{
	struct events *e = arg;
	e->err = sse_feed(&e->sse, data, n);
	return e->err;
}

int cmd_events(struct cmd_ctx *c)
{
	struct events e = { .c = c };
	struct client_reply r = { 0 };
	char err[512] = "";
	char *path = strdup("/v1/events");
	if (!path ||
	    ((c->args.given & OPT_FABRIC) && cmd_add_query(c, &path, "fabric", c->args.fabric)))
		return cmd_fail(CMD_UNREACHABLE, "out of memory");
	struct client_req q = { .path = path,
		                .accept = "text/event-stream",
		                .fn = on_chunk,
		                .arg = &e,
		                .stop = cmd_stop_on_signals() };
	sse_init(&e.sse, on_event, &e);
	int rc = client_send(c->client, &q, &r, err, sizeof(err));
	if (rc == -EINTR)
		rc = CMD_OK; /* asked to stop: the stream was what was wanted */
	else if (rc == -ECANCELED)
		rc = cmd_fail(CMD_UNREACHABLE, "the event stream broke: %s",
		              e.err == -E2BIG ? "an event over 1 MiB" : "out of memory");
	else
		rc = cmd_report(c, rc, err, &r);
	sse_free(&e.sse);
	client_reply_free(&r);
	free(path);
	return rc;
}

static int show_health(const json_t *reply)
{
	static const char *const keys[] = { "status", "version", "uptime_s" };
	char buf[256];
	for (size_t i = 0; i < sizeof(keys) / sizeof(keys[0]); i++)
		table_kv(keys[i], "%s",
		         table_text(json_object_get(reply, keys[i]), buf, sizeof(buf)));
	return CMD_OK;
}

int cmd_health(struct cmd_ctx *c)
{
	return cmd_get_show(c, "/v1/health", show_health, NULL);
}

/* How long version waits for the daemon: it answers at once or not at all. */
#define VERSION_TIMEOUT_MS 10000L

/* The client's version always; the daemon's when it answers (exit 4 when it does not). */
int cmd_version(struct cmd_ctx *c)
{
	struct client_reply r = { 0 };
	struct client_req q = { .path = "/v1/health", .timeout_ms = VERSION_TIMEOUT_MS };
	char err[512] = "";
	int rc = client_send(c->client, &q, &r, err, sizeof(err));
	const char *server = rc == 0 && r.status == 200
	                         ? json_string_value(json_object_get(r.json, "version"))
	                         : NULL;
	json_t *doc = json_pack("{s:s, s:s?}", "client", OFCD_VERSION, "server", server);
	if (!cmd_print_doc(c, doc)) {
		table_kv("client", "%s", OFCD_VERSION);
		table_kv("server", "%s", server ? server : "-");
	}
	json_decref(doc);
	if (rc)
		rc = cmd_fail(CMD_UNREACHABLE, "cannot reach the daemon: %s", err);
	else if (!server)
		rc = cmd_fail(r.status >= 400 && r.status < 500 ? CMD_REFUSED : CMD_UNREACHABLE,
		              "%ld: the daemon did not say its version", r.status);
	client_reply_free(&r);
	return rc;
}

static int show_audit(const json_t *reply)
{
	static const char *const head[] = { "ID",     "AT",   "TOKEN", "CLIENT",
		                            "METHOD", "PATH", "STATUS" };
	static const char *const keys[] = { "id",     "at",   "token", "client",
		                            "method", "path", "status" };
	return cmd_print_rows(json_object_get(reply, "audit"), head, keys, 7);
}

int cmd_audit(struct cmd_ctx *c)
{
	char *path = strdup("/v1/audit"), limit[32];
	int rc = path ? 0 : -ENOMEM;
	snprintf(limit, sizeof(limit), "%ld", c->args.limit);
	if (!rc && (c->args.given & OPT_SINCE))
		rc = cmd_add_query(c, &path, "since", c->args.since);
	if (!rc && (c->args.given & OPT_LIMIT))
		rc = cmd_add_query(c, &path, "limit", limit);
	if (rc)
		return cmd_fail(CMD_UNREACHABLE, "out of memory");
	rc = cmd_get_show(c, path, show_audit, NULL);
	free(path);
	return rc;
}
