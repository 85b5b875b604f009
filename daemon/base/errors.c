#include "errors.h"

#include <stdarg.h>
#include <stdio.h>

static const struct {
	unsigned status;
	const char *code;
} err_table[OFCD_E__COUNT] = {
	[OFCD_OK] = { 200, "ok" },
	[OFCD_E_INVALID_JSON] = { 400, "invalid_json" },
	[OFCD_E_INVALID_FIELD] = { 400, "invalid_field" },
	[OFCD_E_UNAUTHORIZED] = { 401, "unauthorized" },
	[OFCD_E_FORBIDDEN] = { 403, "forbidden" },
	[OFCD_E_NOT_FOUND] = { 404, "not_found" },
	[OFCD_E_METHOD_NOT_ALLOWED] = { 405, "method_not_allowed" },
	[OFCD_E_CONFLICT] = { 409, "conflict" },
	[OFCD_E_IN_USE] = { 409, "in_use" },
	[OFCD_E_BODY_TOO_LARGE] = { 413, "body_too_large" },
	[OFCD_E_UNSUPPORTED_MEDIA] = { 415, "unsupported_media_type" },
	[OFCD_E_UNPROCESSABLE] = { 422, "unprocessable" },
	[OFCD_E_INFEASIBLE] = { 422, "infeasible" },
	[OFCD_E_INTERNAL] = { 500, "internal" },
	[OFCD_E_STORE] = { 503, "store_unavailable" },
	[OFCD_E_SHUTTING_DOWN] = { 503, "shutting_down" },
	[OFCD_E_OVERLOADED] = { 503, "overloaded" },
	[OFCD_E_PRECONDITION] = { 412, "precondition_failed" },
	[OFCD_E_NOT_LEADER] = { 503, "not_leader" },
	[OFCD_E_CHANGE_TOO_LARGE] = { 413, "change_too_large" },
	[OFCD_E_OUTCOME_UNKNOWN] = { 504, "outcome_unknown" },
	[OFCD_E_BAD_REQUEST] = { 400, "bad_request" },
};

const char *ofcd_err_code(enum ofcd_err err)
{
	if ((unsigned)err >= OFCD_E__COUNT)
		return "internal";
	return err_table[err].code;
}

unsigned ofcd_err_status(enum ofcd_err err)
{
	if ((unsigned)err >= OFCD_E__COUNT)
		return 500;
	return err_table[err].status;
}

int ofcd_fail(struct ofcd_error *e, int rc, enum ofcd_err err, const char *field, json_t *details,
              const char *fmt, ...)
{
	va_list ap;
	e->err = err;
	snprintf(e->field, sizeof(e->field), "%s", field ? field : "");
	va_start(ap, fmt);
	vsnprintf(e->msg, sizeof(e->msg), fmt, ap);
	va_end(ap);
	json_decref(e->details);
	e->details = details;
	return rc;
}

void ofcd_error_clear(struct ofcd_error *e)
{
	json_decref(e->details);
	e->details = NULL;
	e->err = OFCD_OK;
}

const char *ofcd_field(char *buf, size_t len, const char *prefix, const char *key)
{
	if (prefix)
		snprintf(buf, len, "%s.%s", prefix, key);
	else
		snprintf(buf, len, "%s", key);
	return buf;
}
