#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cmd.h"
#include "table.h"

/* Time for the daemon to answer, on top of any ?wait= it was asked to hold the reply. */
#define REPLY_TIMEOUT_MS 30000L

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

int cmd_print_rows(const json_t *list, const char *const *head, const char *const *keys,
                   size_t ncols)
{
	struct table t;
	const json_t *e;
	size_t i;
	table_init(&t, ncols, head);
	json_array_foreach(list, i, e)
	{
		for (size_t k = 0; k < ncols; k++)
			table_json(&t, json_object_get(e, keys[k]));
	}
	int rc = table_print(&t, stdout);
	table_free(&t);
	return rc ? CMD_UNREACHABLE : CMD_OK;
}

void cmd_print_body(const struct client_reply *r)
{
	fwrite(r->body, 1, r->len, stdout);
	if (r->len && r->body[r->len - 1] != '\n')
		putchar('\n');
}

int cmd_report(struct cmd_ctx *c, int rc, const char *err, const struct client_reply *r)
{
	if (rc)
		return cmd_fail(CMD_UNREACHABLE, "cannot reach the daemon: %s", err);
	if (r->status >= 200 && r->status < 300)
		return CMD_OK;
	int code = r->status >= 400 && r->status < 500 ? CMD_REFUSED : CMD_UNREACHABLE;
	if (c->format == OUT_JSON)
		cmd_print_body(r);
	json_t *e = json_object_get(r->json, "error");
	const char *ecode = json_string_value(json_object_get(e, "code"));
	const char *msg = json_string_value(json_object_get(e, "message"));
	if (ecode && msg)
		return cmd_fail(code, "%ld %s: %s", r->status, ecode, msg);
	/* Not ofcd's error shape (a proxy in between): the first line of what came back. */
	int len = (int)strcspn(r->body, "\r\n");
	return cmd_fail(code, "%ld: %.*s", r->status, len > 200 ? 200 : len,
	                len ? r->body : "no error message");
}

int cmd_call(struct cmd_ctx *c, const char *method, const char *path, const char *body,
             double wait_s, struct client_reply *r)
{
	char err[512] = "";
	long timeout = REPLY_TIMEOUT_MS + (long)(wait_s * 1000);
	int rc = client_request(c->client, method, path, body, timeout, r, err, sizeof(err));
	return cmd_report(c, rc, err, r);
}

int cmd_get_show(struct cmd_ctx *c, const char *path, cmd_show_fn show)
{
	struct client_reply r = { 0 };
	int rc = cmd_call(c, "GET", path, NULL, 0, &r);
	if (rc == CMD_OK && c->format == OUT_JSON)
		cmd_print_body(&r);
	else if (rc == CMD_OK)
		rc = show(r.json);
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
