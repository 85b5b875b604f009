#include "jsonin.h"

#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "auth_rules.h"

int jsonin_fail(struct jsonin_err *e, const char *field, const char *fmt, ...)
{
	va_list ap;
	if (field != e->field)
		snprintf(e->field, sizeof(e->field), "%s", field);
	va_start(ap, fmt);
	vsnprintf(e->msg, sizeof(e->msg), fmt, ap);
	va_end(ap);
	return -EINVAL;
}

const char *jsonin_field(char *buf, size_t len, const char *prefix, const char *key)
{
	if (prefix && prefix[0])
		snprintf(buf, len, "%s.%s", prefix, key);
	else
		snprintf(buf, len, "%s", key);
	return buf;
}

int jsonin_member(struct jsonin_err *e, json_t *obj, const char *prefix, const char *key,
                  bool required, json_t **out)
{
	char f[JSONIN_FIELD_MAX];
	*out = json_object_get(obj, key);
	if (*out && !json_is_null(*out))
		return 0;
	*out = NULL;
	if (!required)
		return 1;
	jsonin_field(f, sizeof(f), prefix, key);
	return jsonin_fail(e, f, "%s is required", f);
}

int jsonin_uint(struct jsonin_err *e, json_t *obj, const char *prefix, const char *key,
                bool required, uint64_t min, uint64_t max, uint64_t *out)
{
	char f[JSONIN_FIELD_MAX];
	json_t *v;
	int rc = jsonin_member(e, obj, prefix, key, required, &v);
	if (rc)
		return rc;
	jsonin_field(f, sizeof(f), prefix, key);
	if (!json_is_integer(v))
		return jsonin_fail(e, f, "%s must be an integer from %llu to %llu", f,
		                   (unsigned long long)min, (unsigned long long)max);
	json_int_t i = json_integer_value(v);
	if (i < 0 || (uint64_t)i < min || (uint64_t)i > max)
		return jsonin_fail(e, f, "%s must be from %llu to %llu, got %lld", f,
		                   (unsigned long long)min, (unsigned long long)max, (long long)i);
	*out = (uint64_t)i;
	return 0;
}

int jsonin_double(struct jsonin_err *e, json_t *obj, const char *prefix, const char *key,
                  bool required, double min, double max, double *out)
{
	char f[JSONIN_FIELD_MAX];
	json_t *v;
	int rc = jsonin_member(e, obj, prefix, key, required, &v);
	if (rc)
		return rc;
	jsonin_field(f, sizeof(f), prefix, key);
	if (!json_is_number(v))
		return jsonin_fail(e, f, "%s must be a number from %g to %g", f, min, max);
	double d = json_number_value(v);
	if (!isfinite(d) || d < min || d > max)
		return jsonin_fail(e, f, "%s must be from %g to %g, got %g", f, min, max, d);
	*out = d;
	return 0;
}

int jsonin_bool(struct jsonin_err *e, json_t *obj, const char *prefix, const char *key,
                bool required, bool *out)
{
	char f[JSONIN_FIELD_MAX];
	json_t *v;
	int rc = jsonin_member(e, obj, prefix, key, required, &v);
	if (rc)
		return rc;
	if (!json_is_boolean(v)) {
		jsonin_field(f, sizeof(f), prefix, key);
		return jsonin_fail(e, f, "%s must be true or false", f);
	}
	*out = json_is_true(v);
	return 0;
}

int jsonin_string(struct jsonin_err *e, json_t *obj, const char *prefix, const char *key,
                  bool required, size_t minlen, size_t maxlen, const char **out)
{
	char f[JSONIN_FIELD_MAX];
	json_t *v;
	int rc = jsonin_member(e, obj, prefix, key, required, &v);
	if (rc)
		return rc;
	jsonin_field(f, sizeof(f), prefix, key);
	if (!json_is_string(v))
		return jsonin_fail(e, f, "%s must be a string", f);
	size_t len = json_string_length(v);
	if (len < minlen || len > maxlen || strlen(json_string_value(v)) != len)
		return jsonin_fail(e, f, "%s must be %zu to %zu characters (no NUL)", f, minlen,
		                   maxlen);
	*out = json_string_value(v);
	return 0;
}

int jsonin_name(struct jsonin_err *e, json_t *obj, const char *prefix, const char *key,
                bool required, const char **out)
{
	char f[JSONIN_FIELD_MAX];
	json_t *v;
	int rc = jsonin_member(e, obj, prefix, key, required, &v);
	if (rc)
		return rc;
	if (!json_is_string(v) || !auth_valid_name(json_string_value(v)) ||
	    strlen(json_string_value(v)) != json_string_length(v)) {
		jsonin_field(f, sizeof(f), prefix, key);
		return jsonin_fail(e, f,
		                   "%s must be a name of 1 to %d characters of [A-Za-z0-9._-]", f,
		                   AUTH_NAME_MAX);
	}
	*out = json_string_value(v);
	return 0;
}

int jsonin_enum(struct jsonin_err *e, json_t *obj, const char *prefix, const char *key,
                bool required, const char *const *choices, int *out)
{
	char f[JSONIN_FIELD_MAX], list[256] = "";
	json_t *v;
	int rc = jsonin_member(e, obj, prefix, key, required, &v);
	if (rc)
		return rc;
	for (int i = 0; json_is_string(v) && choices[i]; i++) {
		if (strcmp(json_string_value(v), choices[i]) == 0) {
			*out = i;
			return 0;
		}
	}
	for (int i = 0; choices[i]; i++) {
		size_t l = strlen(list);
		snprintf(list + l, sizeof(list) - l, "%s%s", i ? ", " : "", choices[i]);
	}
	jsonin_field(f, sizeof(f), prefix, key);
	return jsonin_fail(e, f, "%s must be one of: %s", f, list);
}

/* The allowed entry naming key ("key" or "key?"), or NULL. */
static const char *allowed_entry(const char *const *allowed, const char *key)
{
	size_t n = strlen(key);
	for (size_t i = 0; allowed[i]; i++)
		if (strncmp(allowed[i], key, n) == 0 &&
		    (allowed[i][n] == '\0' || (allowed[i][n] == '?' && allowed[i][n + 1] == '\0')))
			return allowed[i];
	return NULL;
}

static int check_members(struct jsonin_err *e, json_t *obj, const char *prefix,
                         const char *const *allowed, bool strict)
{
	char f[JSONIN_FIELD_MAX];
	const char *key;
	json_t *v;
	void *tmp;
	json_object_foreach_safe(obj, tmp, key, v)
	{
		const char *entry = allowed_entry(allowed, key);
		jsonin_field(f, sizeof(f), prefix, key);
		if (!entry)
			return jsonin_fail(e, f, "unknown field %s", f);
		if (!strict || !json_is_null(v))
			continue;
		if (entry[strlen(entry) - 1] != '?')
			return jsonin_fail(e, f,
			                   "%s must not be null: leave it out for the default", f);
		json_object_del(obj, key);
	}
	return 0;
}

int jsonin_check_members(struct jsonin_err *e, json_t *obj, const char *prefix,
                         const char *const *allowed)
{
	return check_members(e, obj, prefix, allowed, false);
}

int jsonin_check_members_strict(struct jsonin_err *e, json_t *obj, const char *prefix,
                                const char *const *allowed)
{
	return check_members(e, obj, prefix, allowed, true);
}
