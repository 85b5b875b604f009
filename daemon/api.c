#include "api.h"

#include <errno.h>
#include <math.h>
#include <stdarg.h>
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

void api_reply(struct api_req *req, unsigned status, json_t *body)
{
	json_decref(req->reply);
	free(req->reply_text);
	req->reply_text = NULL;
	req->content_type = NULL;
	req->status = status;
	req->reply = body ? body : json_object();
}

void api_reply_text(struct api_req *req, unsigned status, const char *content_type, char *text,
                    size_t len)
{
	json_decref(req->reply);
	req->reply = NULL;
	free(req->reply_text);
	req->status = status;
	req->reply_text = text;
	req->reply_len = len;
	req->content_type = content_type;
}

/*
 * Messages echo what the client sent (paths, member names) and may be cut in
 * the middle of a character: JSON needs valid UTF-8, so anything else becomes
 * '?' rather than an error body jansson refuses to build.
 */
static void utf8_clean(char *s)
{
	unsigned char *p = (unsigned char *)s;
	while (*p) {
		size_t n = *p < 0x80           ? 1
		           : (*p >> 5) == 0x6  ? 2
		           : (*p >> 4) == 0xe  ? 3
		           : (*p >> 3) == 0x1e ? 4
		                               : 0;
		size_t ok = n;
		for (size_t i = 1; i < n && ok; i++)
			if ((p[i] & 0xc0) != 0x80)
				ok = 0;
		if (!ok || (n == 1 && *p < 0x20)) {
			*p++ = '?';
			continue;
		}
		p += n;
	}
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

void api_fail(struct api_req *req, struct ofcd_error *e)
{
	json_t *details = e->details;
	e->details = NULL;
	api_error_details(req, e->err == OFCD_OK ? OFCD_E_INTERNAL : e->err,
	                  e->field[0] ? e->field : NULL, details, "%s", e->msg);
}

const char *api_field(char *buf, size_t len, const char *prefix, const char *key)
{
	if (prefix)
		snprintf(buf, len, "%s.%s", prefix, key);
	else
		snprintf(buf, len, "%s", key);
	return buf;
}

json_t *api_body_object(struct api_req *req)
{
	if (!req->body) {
		api_error(req, OFCD_E_INVALID_JSON, NULL,
		          "request body is empty, expected a JSON object");
		return NULL;
	}
	if (!json_is_object(req->body)) {
		api_error(req, OFCD_E_INVALID_FIELD, NULL, "request body must be a JSON object");
		return NULL;
	}
	return req->body;
}

/* Looks the member up; 1 when absent and optional, -EINVAL (replied) when absent and required. */
static int member(struct api_req *req, json_t *obj, const char *prefix, const char *key,
                  bool required, json_t **out)
{
	char f[160];
	*out = json_object_get(obj, key);
	if (*out && !json_is_null(*out))
		return 0;
	if (!required)
		return 1;
	api_error(req, OFCD_E_INVALID_FIELD, api_field(f, sizeof(f), prefix, key), "%s is required",
	          api_field(f, sizeof(f), prefix, key));
	return -EINVAL;
}

int api_get_uint(struct api_req *req, json_t *obj, const char *prefix, const char *key,
                 bool required, uint64_t min, uint64_t max, uint64_t *out)
{
	json_t *v;
	char f[160];
	int rc = member(req, obj, prefix, key, required, &v);
	if (rc)
		return rc;
	api_field(f, sizeof(f), prefix, key);
	if (!json_is_integer(v)) {
		api_error(req, OFCD_E_INVALID_FIELD, f, "%s must be an integer from %llu to %llu",
		          f, (unsigned long long)min, (unsigned long long)max);
		return -EINVAL;
	}
	json_int_t i = json_integer_value(v);
	if (i < 0 || (uint64_t)i < min || (uint64_t)i > max) {
		api_error(req, OFCD_E_INVALID_FIELD, f, "%s must be from %llu to %llu, got %lld", f,
		          (unsigned long long)min, (unsigned long long)max, (long long)i);
		return -EINVAL;
	}
	*out = (uint64_t)i;
	return 0;
}

int api_get_double(struct api_req *req, json_t *obj, const char *prefix, const char *key,
                   bool required, double min, double max, double *out)
{
	json_t *v;
	char f[160];
	int rc = member(req, obj, prefix, key, required, &v);
	if (rc)
		return rc;
	api_field(f, sizeof(f), prefix, key);
	if (!json_is_number(v)) {
		api_error(req, OFCD_E_INVALID_FIELD, f, "%s must be a number from %g to %g", f, min,
		          max);
		return -EINVAL;
	}
	double d = json_number_value(v);
	if (!isfinite(d) || d < min || d > max) {
		api_error(req, OFCD_E_INVALID_FIELD, f, "%s must be from %g to %g, got %g", f, min,
		          max, d);
		return -EINVAL;
	}
	*out = d;
	return 0;
}

int api_get_bool(struct api_req *req, json_t *obj, const char *prefix, const char *key,
                 bool required, bool *out)
{
	json_t *v;
	char f[160];
	int rc = member(req, obj, prefix, key, required, &v);
	if (rc)
		return rc;
	if (!json_is_boolean(v)) {
		api_field(f, sizeof(f), prefix, key);
		api_error(req, OFCD_E_INVALID_FIELD, f, "%s must be true or false", f);
		return -EINVAL;
	}
	*out = json_is_true(v);
	return 0;
}

int api_get_string(struct api_req *req, json_t *obj, const char *prefix, const char *key,
                   bool required, size_t maxlen, const char **out)
{
	json_t *v;
	char f[160];
	int rc = member(req, obj, prefix, key, required, &v);
	if (rc)
		return rc;
	api_field(f, sizeof(f), prefix, key);
	if (!json_is_string(v)) {
		api_error(req, OFCD_E_INVALID_FIELD, f, "%s must be a string", f);
		return -EINVAL;
	}
	size_t len = json_string_length(v);
	if (len == 0 || len > maxlen || strlen(json_string_value(v)) != len) {
		api_error(req, OFCD_E_INVALID_FIELD, f, "%s must be 1 to %zu characters (no NUL)",
		          f, maxlen);
		return -EINVAL;
	}
	*out = json_string_value(v);
	return 0;
}

int api_get_name(struct api_req *req, json_t *obj, const char *prefix, const char *key,
                 bool required, const char **out)
{
	json_t *v;
	char f[160];
	int rc = member(req, obj, prefix, key, required, &v);
	if (rc)
		return rc;
	api_field(f, sizeof(f), prefix, key);
	if (!json_is_string(v) || !auth_valid_name(json_string_value(v)) ||
	    strlen(json_string_value(v)) != json_string_length(v)) {
		api_error(req, OFCD_E_INVALID_FIELD, f,
		          "%s must be a name of 1 to 64 characters of [A-Za-z0-9._-]", f);
		return -EINVAL;
	}
	*out = json_string_value(v);
	return 0;
}

int api_get_enum(struct api_req *req, json_t *obj, const char *prefix, const char *key,
                 bool required, const char *const *choices, int *out)
{
	json_t *v;
	char f[160];
	int rc = member(req, obj, prefix, key, required, &v);
	if (rc)
		return rc;
	api_field(f, sizeof(f), prefix, key);
	if (json_is_string(v)) {
		for (int i = 0; choices[i]; i++) {
			if (strcmp(json_string_value(v), choices[i]) == 0) {
				*out = i;
				return 0;
			}
		}
	}
	char list[256] = "";
	for (int i = 0; choices[i]; i++) {
		size_t l = strlen(list);
		snprintf(list + l, sizeof(list) - l, "%s%s", i ? ", " : "", choices[i]);
	}
	api_error(req, OFCD_E_INVALID_FIELD, f, "%s must be one of: %s", f, list);
	return -EINVAL;
}

int api_check_members(struct api_req *req, json_t *obj, const char *prefix,
                      const char *const *allowed)
{
	const char *key;
	json_t *v;
	char f[160];
	json_object_foreach(obj, key, v)
	{
		bool ok = false;
		for (int i = 0; allowed[i] && !ok; i++)
			ok = strcmp(key, allowed[i]) == 0;
		if (!ok) {
			api_field(f, sizeof(f), prefix, key);
			api_error(req, OFCD_E_INVALID_FIELD, f, "unknown field %s", f);
			return -EINVAL;
		}
	}
	return 0;
}
