#include "api.h"

#include "jsonin.h"
#include "utf8.h"

#include <errno.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

void api_suspend(struct api_req *req, api_abort_fn on_abort, void *arg)
{
	req->suspended = true;
	req->on_abort = on_abort;
	req->wait_arg = arg;
}

void api_resume(struct api_req *req)
{
	req->transport->resume(req);
}

void api_continue(struct api_req *req, const struct api_slices *rest)
{
	req->slices = *rest;
}

const char *api_query(struct api_req *req, const char *key)
{
	return req->transport->query(req, key);
}

const char *api_header(struct api_req *req, const char *name)
{
	return req->transport->header(req, name);
}

struct api_stream *api_stream_start(struct api_req *req, const char *content_type,
                                    api_stream_close_fn on_close, void *arg)
{
	return req->transport->stream_start(req, content_type, on_close, arg);
}

int api_stream_write(struct api_stream *s, const char *data, size_t len)
{
	return s->transport->stream_write(s, data, len);
}

void api_stream_end(struct api_stream *s)
{
	s->transport->stream_end(s);
}

void api_reply_text_drop(struct api_req *req)
{
	if (req->reply_text_free)
		req->reply_text_free(req->reply_text_cls);
	else
		free(req->reply_text);
	req->reply_text = NULL;
	req->reply_text_free = NULL;
	req->reply_text_cls = NULL;
}

void api_reply(struct api_req *req, unsigned status, json_t *body)
{
	json_decref(req->reply);
	api_reply_text_drop(req);
	req->content_type = NULL;
	req->status = status;
	req->reply = body ? body : json_object();
}

void api_reply_text(struct api_req *req, unsigned status, const char *content_type, char *text,
                    size_t len)
{
	json_decref(req->reply);
	req->reply = NULL;
	api_reply_text_drop(req);
	req->status = status;
	req->reply_text = text;
	req->reply_len = len;
	req->content_type = content_type;
}

void api_reply_text_owned(struct api_req *req, unsigned status, const char *content_type,
                          const char *text, size_t len, void (*free_fn)(void *cls), void *cls)
{
	/* Never written through: only sent, then handed back to free_fn. */
	api_reply_text(req, status, content_type, (char *)text, len);
	req->reply_text_free = free_fn;
	req->reply_text_cls = cls;
}

static void verror(struct api_req *req, enum ofcd_err err, const char *field, json_t *details,
                   const char *fmt, va_list ap)
{
	char msg[512], f[160];
	vsnprintf(msg, sizeof(msg), fmt, ap);
	utf8_clean(msg);
	if (field) {
		snprintf(f, sizeof(f), "%s", field);
		utf8_clean(f);
		field = f;
	}
	/* An error is about the request, not the object: no tag, no location. */
	req->etag[0] = req->location[0] = '\0';
	json_t *e = json_pack("{s:s, s:s}", "code", ofcd_err_code(err), "message", msg);
	if (field)
		json_object_set_new(e, "field", json_string(field));
	if (details)
		json_object_set_new(e, "details", details);
	api_reply(req, ofcd_err_status(err), json_pack("{s:o}", "error", e));
}

void api_error(struct api_req *req, enum ofcd_err err, const char *field, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	verror(req, err, field, NULL, fmt, ap);
	va_end(ap);
}

void api_error_details(struct api_req *req, enum ofcd_err err, const char *field, json_t *details,
                       const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	verror(req, err, field, details, fmt, ap);
	va_end(ap);
}

char *api_json_text(const json_t *reply, size_t *len)
{
	/* 15 significant digits: exact to a double's noise, and cheaper to print than 17. */
	char *text = json_dumps(reply, JSON_COMPACT | JSON_REAL_PRECISION(15));
	size_t n = text ? strlen(text) : 0;
	char *buf = text ? realloc(text, n + 2) : NULL;
	if (!buf) {
		free(text);
		return NULL;
	}
	buf[n] = '\n';
	buf[n + 1] = '\0';
	*len = n + 1;
	return buf;
}

void api_fail(struct api_req *req, struct ofcd_error *e)
{
	json_t *details = e->details;
	e->details = NULL;
	api_error_details(req, e->err == OFCD_OK ? OFCD_E_INTERNAL : e->err,
	                  e->field[0] ? e->field : NULL, details, "%s", e->msg);
}

static void etag_of_revision(char *buf, size_t len, int64_t revision)
{
	snprintf(buf, len, "\"%" PRId64 "\"", revision);
}

/* FNV-1a of a view's text: equal views give equal tags. */
uint64_t api_text_hash(uint64_t h, const char *text, size_t n)
{
	for (size_t i = 0; i < n; i++)
		h = (h ^ (unsigned char)text[i]) * 1099511628211ull;
	return h;
}

static void etag_of_text(char *buf, size_t len, const char *text, size_t n)
{
	snprintf(buf, len, "\"%016" PRIx64 "\"", api_text_hash(API_TEXT_HASH_START, text, n));
}

void api_set_etag_hash(struct api_req *req, uint64_t hash)
{
	snprintf(req->etag, sizeof(req->etag), "\"%016" PRIx64 "\"", hash);
}

void api_set_etag(struct api_req *req, int64_t revision)
{
	etag_of_revision(req->etag, sizeof(req->etag), revision);
}

void api_set_etag_text(struct api_req *req, const char *text, size_t len)
{
	etag_of_text(req->etag, sizeof(req->etag), text, len);
}

void api_set_location(struct api_req *req, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(req->location, sizeof(req->location), fmt, ap);
	va_end(ap);
}

/*
 * If-Match (RFC 9110 13.1.1): "*", or entity tags separated by commas. The
 * comparison is strong, so a weak tag (W/"...") never matches. current is
 * the object's quoted tag, NULL when there is no object.
 */
static int check_if_match(struct api_req *req, const char *current)
{
	const char *h = api_header(req, "If-Match");
	bool match = false;
	snprintf(req->etag_before, sizeof(req->etag_before), "%s", current ? current : "");
	if (!h)
		return 0;
	h += strspn(h, " \t");
	if (strcmp(h, "*") == 0) {
		match = current != NULL;
	} else {
		const char *p = h;
		while (*p) {
			p += strspn(p, " \t,");
			if (!*p)
				break;
			bool weak = strncmp(p, "W/", 2) == 0;
			const char *q = weak ? p + 2 : p;
			const char *end = *q == '"' ? strchr(q + 1, '"') : NULL;
			if (!end || (end[1] && !strchr(" \t,", end[1]))) {
				api_error(req, OFCD_E_INVALID_FIELD, "If-Match",
				          "If-Match must be * or entity tags such as \"3\", got %s",
				          h);
				return -EINVAL;
			}
			size_t n = (size_t)(end + 1 - q);
			if (!weak && current && strlen(current) == n && memcmp(q, current, n) == 0)
				match = true;
			p = end + 1;
		}
	}
	if (match)
		return 0;
	if (current)
		api_error(req, OFCD_E_PRECONDITION, "If-Match",
		          "If-Match %s does not match the current version %s: read it again", h,
		          current);
	else
		api_error(req, OFCD_E_PRECONDITION, "If-Match",
		          "If-Match %s: there is no such object", h);
	if (current)
		snprintf(req->etag, sizeof(req->etag), "%s", current);
	return -EINVAL;
}

int api_if_match(struct api_req *req, int64_t revision)
{
	char tag[40];
	if (revision > 0)
		etag_of_revision(tag, sizeof(tag), revision);
	return check_if_match(req, revision > 0 ? tag : NULL);
}

int api_if_match_text(struct api_req *req, const char *text, size_t len)
{
	char tag[40];
	if (text)
		etag_of_text(tag, sizeof(tag), text, len);
	return check_if_match(req, text ? tag : NULL);
}

const char *api_field(char *buf, size_t len, const char *prefix, const char *key)
{
	return jsonin_field(buf, len, prefix, key);
}

int api_body_check(const json_t *body, struct ofcd_error *e)
{
	if (!body)
		return ofcd_fail(e, -EINVAL, OFCD_E_INVALID_JSON, NULL, NULL,
		                 "request body is empty, expected a JSON object");
	if (!json_is_object(body))
		return ofcd_fail(e, -EINVAL, OFCD_E_INVALID_FIELD, NULL, NULL,
		                 "request body must be a JSON object");
	return 0;
}

json_t *api_body_object(struct api_req *req)
{
	struct ofcd_error e = { 0 };
	if (api_body_check(req->body, &e) < 0) {
		api_fail(req, &e);
		return NULL;
	}
	return req->body;
}

void *api_prepared(struct api_req *req)
{
	if (req->prepare_refusal) {
		api_fail(req, req->prepare_refusal);
		api_prepared_drop(req);
		return NULL;
	}
	if (!req->prepared && req->route && req->route->prepare) {
		struct ofcd_error e = { 0 };
		req->prepared = req->route->prepare->read(req->body, &e);
		if (!req->prepared)
			api_fail(req, &e);
	}
	return req->prepared;
}

void api_prepared_drop(struct api_req *req)
{
	if (req->prepared && req->route && req->route->prepare)
		req->route->prepare->free(req->prepared);
	req->prepared = NULL;
	if (req->prepare_refusal)
		ofcd_error_clear(req->prepare_refusal);
	free(req->prepare_refusal);
	req->prepare_refusal = NULL;
}

void api_req_release(struct api_req *req)
{
	api_prepared_drop(req);
	if (req->computed && req->computed_free)
		req->computed_free(req->computed);
	req->computed = NULL;
	req->computed_free = NULL;
	if (req->compute_arg && req->compute_free)
		req->compute_free(req->compute_arg);
	req->compute_arg = NULL;
	req->compute_free = NULL;
}

void api_compute_first(struct api_req *req, api_offload_fn work, void (*free_arg)(void *arg),
                       void *arg)
{
	req->compute_work = work;
	req->compute_free = free_arg;
	req->compute_arg = arg;
	req->computing = true;
	/* What it would answer if it had to end before its work is done. */
	api_error(req, OFCD_E_SHUTTING_DOWN, NULL, "the daemon is shutting down");
}

void *api_computed(struct api_req *req)
{
	return req->computed;
}

json_t *api_put_body(struct api_req *req)
{
	json_t *body = api_body_object(req);
	if (!body)
		return NULL;
	const char *path = req->params[0];
	json_t *name = json_object_get(body, "name");
	if (!name && json_object_set_new(body, "name", json_string(path)) < 0) {
		/* Not UTF-8: no name at all. */
		api_error(req, OFCD_E_INVALID_FIELD, "name",
		          "name must be 1 to 64 characters of [A-Za-z0-9._-]");
		return NULL;
	}
	if (name && (!json_is_string(name) || strcmp(json_string_value(name), path) != 0)) {
		api_error(req, OFCD_E_INVALID_FIELD, "name",
		          "name must be the one in the path, %s, when given", path);
		return NULL;
	}
	return body;
}

/* A failed check becomes the reply; 0 and 1 pass through. */
static int reply_check(struct api_req *req, int rc, const struct jsonin_err *e)
{
	if (rc < 0)
		api_error(req, OFCD_E_INVALID_FIELD, e->field, "%s", e->msg);
	return rc;
}

int api_get_uint(struct api_req *req, json_t *obj, const char *prefix, const char *key,
                 bool required, uint64_t min, uint64_t max, uint64_t *out)
{
	struct jsonin_err e;
	return reply_check(req, jsonin_uint(&e, obj, prefix, key, required, min, max, out), &e);
}

int api_get_double(struct api_req *req, json_t *obj, const char *prefix, const char *key,
                   bool required, double min, double max, double *out)
{
	struct jsonin_err e;
	return reply_check(req, jsonin_double(&e, obj, prefix, key, required, min, max, out), &e);
}

int api_get_bool(struct api_req *req, json_t *obj, const char *prefix, const char *key,
                 bool required, bool *out)
{
	struct jsonin_err e;
	return reply_check(req, jsonin_bool(&e, obj, prefix, key, required, out), &e);
}

int api_get_string(struct api_req *req, json_t *obj, const char *prefix, const char *key,
                   bool required, size_t maxlen, const char **out)
{
	struct jsonin_err e;
	return reply_check(req, jsonin_string(&e, obj, prefix, key, required, 1, maxlen, out), &e);
}

int api_get_name(struct api_req *req, json_t *obj, const char *prefix, const char *key,
                 bool required, const char **out)
{
	struct jsonin_err e;
	return reply_check(req, jsonin_name(&e, obj, prefix, key, required, out), &e);
}

int api_get_enum(struct api_req *req, json_t *obj, const char *prefix, const char *key,
                 bool required, const char *const *choices, int *out)
{
	struct jsonin_err e;
	return reply_check(req, jsonin_enum(&e, obj, prefix, key, required, choices, out), &e);
}

int api_check_members(struct api_req *req, json_t *obj, const char *prefix,
                      const char *const *allowed)
{
	struct jsonin_err e;
	return reply_check(req, jsonin_check_members_strict(&e, obj, prefix, allowed), &e);
}
