#include <errno.h>
#include <math.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cmd.h"
#include "yaml.h"

/* The daemon's ?wait= range (docs/api.md). */
#define WAIT_MAX_S 60.0

static int vfail(int code, const char *fmt, va_list ap)
{
	fputs("ofcctl: ", stderr);
	vfprintf(stderr, fmt, ap);
	fputc('\n', stderr);
	return code;
}

int cmd_usage(const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	int rc = vfail(CMD_USAGE, fmt, ap);
	va_end(ap);
	return rc;
}

int cmd_fail(int code, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	int rc = vfail(code, fmt, ap);
	va_end(ap);
	return rc;
}

int cmd_report(struct cmd_ctx *c, int rc, const char *err, const struct client_reply *r)
{
	if (rc)
		return cmd_fail(CMD_UNREACHABLE, "cannot reach the daemon: %s", err);
	if (r->status >= 200 && r->status < 300)
		return CMD_OK;
	int code = r->status >= 400 && r->status < 500 ? CMD_REFUSED : CMD_UNREACHABLE;
	json_t *e = json_object_get(r->json, "error");
	const char *ecode = json_string_value(json_object_get(e, "code"));
	const char *msg = json_string_value(json_object_get(e, "message"));
	if ((c->args.given & OPT_IGNORE_NOT_FOUND) && r->status == 404 && ecode &&
	    strcmp(ecode, "not_found") == 0)
		return CMD_OK;
	if (c->format == OUT_JSON)
		cmd_print_body(r);
	else if (c->format == OUT_YAML && r->json)
		yaml_print(stdout, r->json);
	const char *field = json_string_value(json_object_get(e, "field"));
	if (ecode && msg && c->name_field && field && !strstr(msg, field))
		return cmd_fail(code, "%ld %s: %s: %s", r->status, ecode, field, msg);
	if (ecode && msg)
		return cmd_fail(code, "%ld %s: %s", r->status, ecode, msg);
	/* Not ofcd's error shape (a proxy in between): the first line of what came back. */
	int len = (int)strcspn(r->body, "\r\n");
	return cmd_fail(code, "%ld: %.*s", r->status, len > 200 ? 200 : len,
	                len ? r->body : "no error message");
}

int cmd_send(struct cmd_ctx *c, struct client_req *q, struct client_reply *r)
{
	char err[512] = "";
	if (!q->timeout_ms && !q->fn)
		q->timeout_ms = CMD_REPLY_TIMEOUT_MS;
	int rc = client_send(c->client, q, r, err, sizeof(err));
	return cmd_report(c, rc, err, r);
}

int cmd_call(struct cmd_ctx *c, const char *method, const char *path, const char *body,
             double wait_s, struct client_reply *r)
{
	struct client_req q = {
		.method = method,
		.path = path,
		.body = body,
		.timeout_ms = CMD_REPLY_TIMEOUT_MS + (long)(wait_s * 1000),
	};
	if ((c->args.given & OPT_IF_MATCH) && strcmp(method, "GET") != 0)
		q.if_match = c->args.if_match;
	return cmd_send(c, &q, r);
}

int cmd_get_show(struct cmd_ctx *c, const char *path, cmd_show_fn table, cmd_show_fn wide)
{
	struct client_reply r = { 0 };
	int rc = cmd_call(c, "GET", path, NULL, 0, &r);
	if (rc == CMD_OK)
		rc = cmd_print(c, &r, table, wide);
	client_reply_free(&r);
	return rc;
}

char *cmd_path(struct cmd_ctx *c, const char *before, const char *name, const char *after)
{
	char *esc = client_escape(c->client, name), *path = NULL;
	if (!esc || asprintf(&path, "%s%s%s", before, esc, after) < 0)
		path = NULL;
	free(esc);
	if (!path)
		cmd_fail(CMD_UNREACHABLE, "out of memory");
	return path;
}

int cmd_add_query(struct cmd_ctx *c, char **p, const char *name, const char *value)
{
	char *esc = client_escape(c->client, value), *np = NULL;
	if (esc && asprintf(&np, "%s%c%s=%s", *p, strchr(*p, '?') ? '&' : '?', name, esc) < 0)
		np = NULL;
	free(esc);
	free(*p);
	*p = np;
	return np ? 0 : -ENOMEM;
}

int cmd_wait_param(struct cmd_ctx *c, char *buf, size_t len, double *seconds)
{
	char *end;
	buf[0] = '\0';
	*seconds = 0;
	if (!(c->args.given & OPT_WAIT))
		return CMD_OK;
	errno = 0;
	double s = strtod(c->args.wait, &end);
	if (errno || end == c->args.wait || *end || !isfinite(s) || s < 0 || s > WAIT_MAX_S)
		return cmd_usage("--wait must be a number of seconds from 0 to %g, got \"%s\"",
		                 WAIT_MAX_S, c->args.wait);
	*seconds = s;
	snprintf(buf, len, "?wait=%.3f", s);
	return CMD_OK;
}

static volatile sig_atomic_t stop_asked;

static void on_stop_signal(int sig)
{
	(void)sig;
	stop_asked = 1;
}

const volatile sig_atomic_t *cmd_stop_on_signals(void)
{
	struct sigaction sa = { .sa_handler = on_stop_signal };
	sigemptyset(&sa.sa_mask);
	sigaction(SIGINT, &sa, NULL);
	sigaction(SIGTERM, &sa, NULL);
	return &stop_asked;
}
