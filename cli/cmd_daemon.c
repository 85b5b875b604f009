/* operations, events and health: what the daemon did, is doing, and whether it is up. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cmd.h"
#include "sse.h"
#include "table.h"

static int show_operations(const json_t *reply)
{
	static const char *const head[] = { "ID",     "OCS",     "TRIGGER", "ADDS",    "DELETES",
		                            "STATUS", "STARTED", "ENDED",   "FABRICS", "ERROR" };
	static const char *const keys[] = { "id",     "ocs",     "trigger", "nadds",   "ndeletes",
		                            "status", "started", "ended",   "fabrics", "error" };
	return cmd_print_rows(json_object_get(reply, "operations"), head, keys, 10);
}

/* Appends "?name=value" (or "&name=value" after the first) to the path being built in *p. */
static int add_query(struct cmd_ctx *c, char **p, const char *name, const char *value)
{
	char *esc = client_escape(c->client, value), *np = NULL;
	if (esc && asprintf(&np, "%s%c%s=%s", *p, strchr(*p, '?') ? '&' : '?', name, esc) < 0)
		np = NULL;
	free(esc);
	free(*p);
	*p = np;
	return np ? 0 : -ENOMEM;
}

int cmd_operations(struct cmd_ctx *c)
{
	char *path = strdup("/v1/operations"), limit[32];
	int rc = path ? 0 : -ENOMEM;
	snprintf(limit, sizeof(limit), "%ld", c->args.limit);
	if (!rc && (c->args.given & OPT_FABRIC))
		rc = add_query(c, &path, "fabric", c->args.fabric);
	if (!rc && (c->args.given & OPT_OCS))
		rc = add_query(c, &path, "ocs", c->args.ocs);
	if (!rc && (c->args.given & OPT_LIMIT))
		rc = add_query(c, &path, "limit", limit);
	if (rc)
		return cmd_fail(CMD_UNREACHABLE, "out of memory");
	rc = cmd_get_show(c, path, show_operations);
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

/* A JSON line for scripts: {"id", "event", "data"} with data as the daemon sent it. */
static void print_event_json(const struct sse_event *ev)
{
	json_t *data = json_loads(ev->data, JSON_DECODE_ANY, NULL);
	json_t *line = json_pack("{s:s, s:s, s:o}", "id", ev->id, "event", ev->event, "data",
	                         data ? data : json_string(ev->data));
	char *s = line ? json_dumps(line, JSON_COMPACT) : NULL;
	if (s)
		puts(s);
	free(s);
	json_decref(line);
}

struct events {
	struct cmd_ctx *c;
	struct sse sse;
	int err; /* the parser's error, when it stopped the stream */
};

static void on_event(const struct sse_event *ev, void *arg)
{
	struct events *e = arg;
	if (e->c->format == OUT_JSON)
		print_event_json(ev);
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
	    ((c->args.given & OPT_FABRIC) && add_query(c, &path, "fabric", c->args.fabric)))
		return cmd_fail(CMD_UNREACHABLE, "out of memory");
	sse_init(&e.sse, on_event, &e);
	int rc = client_stream(c->client, path, on_chunk, &e, &r, err, sizeof(err));
	if (rc == -ECANCELED)
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
	return cmd_get_show(c, "/v1/health", show_health);
}
