/* Error table and error bodies, route matching and token checks. */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "api/api.h"
#include "base/auth.h"
#include "base/errors.h"

static void test_error_table(void **state)
{
	(void)state;
	assert_string_equal(ofcd_err_code(OFCD_E_INVALID_JSON), "invalid_json");
	assert_int_equal(ofcd_err_status(OFCD_E_INVALID_JSON), 400);
	assert_string_equal(ofcd_err_code(OFCD_E_INVALID_FIELD), "invalid_field");
	assert_int_equal(ofcd_err_status(OFCD_E_UNAUTHORIZED), 401);
	assert_int_equal(ofcd_err_status(OFCD_E_FORBIDDEN), 403);
	assert_string_equal(ofcd_err_code(OFCD_E_NOT_FOUND), "not_found");
	assert_string_equal(ofcd_err_code(OFCD_E_METHOD_NOT_ALLOWED), "method_not_allowed");
	assert_int_equal(ofcd_err_status(OFCD_E_IN_USE), 409);
	assert_string_equal(ofcd_err_code(OFCD_E_BODY_TOO_LARGE), "body_too_large");
	assert_int_equal(ofcd_err_status(OFCD_E_BODY_TOO_LARGE), 413);
	assert_string_equal(ofcd_err_code(OFCD_E_UNSUPPORTED_MEDIA), "unsupported_media_type");
	assert_int_equal(ofcd_err_status(OFCD_E_INFEASIBLE), 422);
	/* Every entry has a code and a status; codes are unique. */
	for (int i = 1; i < OFCD_E__COUNT; i++) {
		assert_non_null(ofcd_err_code(i));
		assert_true(ofcd_err_status(i) >= 400 && ofcd_err_status(i) < 600);
		for (int j = 1; j < i; j++)
			assert_string_not_equal(ofcd_err_code(i), ofcd_err_code(j));
	}
	assert_string_equal(ofcd_err_code(OFCD_E__COUNT), "internal");
	assert_int_equal(ofcd_err_status((enum ofcd_err)999), 500);
}

/* What the client sent, echoed in a message, never costs the error body its JSON. */
static void test_error_echoes_invalid_utf8(void **state)
{
	(void)state;
	struct api_req req = { 0 };
	/* Overlong, surrogate, past U+10FFFF, overlong, cut short, then a valid é. */
	api_error(&req, OFCD_E_NOT_FOUND, "f\xc0\x80", "no route /v1/%s",
	          "\xc0\x80|\xed\xa0\x80|\xf4\x90\x80\x80|\xe0\x80\x80|\xe2\x82|\xc3\xa9");
	assert_int_equal(req.status, 404);
	json_t *e = json_object_get(req.reply, "error");
	assert_string_equal(json_string_value(json_object_get(e, "code")), "not_found");
	assert_string_equal(json_string_value(json_object_get(e, "message")),
	                    "no route /v1/??|???|????|???|??|\xc3\xa9");
	assert_string_equal(json_string_value(json_object_get(e, "field")), "f??");
	json_decref(req.reply);
}

static const struct api_route *match(const char *method, const char *path, const char **params,
                                     bool *known, char *allow)
{
	static char buf[256];
	return api_route_match(method, path, buf, sizeof(buf), params, known, allow, 64);
}

static void test_route_match(void **state)
{
	(void)state;
	const char *params[API_MAX_PARAMS] = { 0 };
	bool known;
	char allow[64];

	const struct api_route *r = match("GET", "/v1/health", params, &known, allow);
	assert_non_null(r);
	assert_string_equal(r->pattern, "/v1/health");

	assert_null(match("POST", "/v1/health", params, &known, allow));
	assert_true(known);
	assert_string_equal(allow, "GET, HEAD, OPTIONS");

	/* HEAD is served by the GET route; OPTIONS by none, with every method allowed. */
	r = match("HEAD", "/v1/fabrics/x", params, &known, allow);
	assert_non_null(r);
	assert_string_equal(r->method, "GET");
	assert_string_equal(params[0], "x");
	assert_null(match("OPTIONS", "/v1/fabrics/x", params, &known, allow));
	assert_true(known);
	assert_string_equal(allow, "GET, HEAD, PUT, DELETE, OPTIONS");
	assert_null(match("OPTIONS", "/v1/nowhere", params, &known, allow));
	assert_false(known);

	assert_null(match("GET", "/v1/healthz", params, &known, allow));
	assert_false(known);
	assert_null(match("GET", "/v1/health/", params, &known, allow));
	assert_false(known);
	assert_null(match("GET", "/v1", params, &known, allow));
	assert_null(match("GET", "", params, &known, allow));
	/* The root is the web console's page. */
	r = match("GET", "/", params, &known, allow);
	assert_non_null(r);
	assert_string_equal(r->pattern, "/");
	assert_null(match("POST", "/", params, &known, allow));
	assert_true(known);

	/* Parameters: every route with a {param} takes it out of the path. */
	for (const struct api_route *rt = api_routes; rt->method; rt++) {
		if (!strchr(rt->pattern, '{'))
			continue;
		char path[256], want[256];
		size_t o = 0;
		int n = 0;
		for (const char *p = rt->pattern; *p;) {
			if (*p == '{') {
				o += (size_t)snprintf(path + o, sizeof(path) - o, "x%d", n++);
				p = strchr(p, '}') + 1;
			} else {
				path[o++] = *p++;
			}
		}
		path[o] = '\0';
		r = match(rt->method, path, params, &known, allow);
		assert_non_null(r);
		assert_string_equal(r->pattern, rt->pattern);
		for (int i = 0; i < n; i++) {
			snprintf(want, sizeof(want), "x%d", i);
			assert_string_equal(params[i], want);
		}
		/* An empty parameter never matches. */
		char *x0 = strstr(path, "x0");
		memmove(x0, x0 + 2, strlen(x0 + 2) + 1);
		assert_true(match(rt->method, path, params, &known, allow) != rt);
	}
}

static void test_route_table(void **state)
{
	(void)state;
	/* No two routes share method and pattern; every route has a handler. */
	for (const struct api_route *a = api_routes; a->method; a++) {
		assert_non_null(a->handler);
		assert_true(a->pattern[0] == '/');
		for (const struct api_route *b = api_routes; b != a; b++)
			assert_false(strcmp(a->method, b->method) == 0 &&
			             strcmp(a->pattern, b->pattern) == 0);
		/*
		 * Writes never run without a role when tokens are configured. Agent
		 * tokens write only under /v1/servers/{name}/, whose handlers check
		 * the server is the token's own (api_agent_scope). A computation that
		 * stores nothing (API_F_PURE) is a read whatever its method.
		 */
		if (strcmp(a->method, "GET") != 0 && !(a->flags & API_F_PURE))
			assert_true(a->role == AUTH_ADMIN ||
			            (a->role == AUTH_AGENT &&
			             strncmp(a->pattern, "/v1/servers/{name}/", 19) == 0));
		if (a->flags & API_F_PURE)
			assert_int_equal(a->role, AUTH_READ);
		/* The audit trail shows who did what: admins only. */
		if (strcmp(a->pattern, "/v1/audit") == 0)
			assert_int_equal(a->role, AUTH_ADMIN);
	}
}

static void test_tokens(void **state)
{
	(void)state;
	struct auth_tokens t = { 0 };
	assert_int_equal(auth_tokens_add(&t, "ops", AUTH_ADMIN, "0123456789abcdef"), 0);
	assert_int_equal(auth_tokens_add(&t, "mon", AUTH_READ, "fedcba9876543210"), 0);
	assert_int_equal(auth_tokens_add(&t, "ops", AUTH_READ, "0123456789abcdeX"), -EEXIST);
	assert_int_equal(auth_tokens_add(&t, "bad name", AUTH_READ, "0123456789abcdeX"), -EINVAL);
	assert_int_equal(auth_tokens_add(&t, "x", AUTH_READ, "short"), -EINVAL);
	assert_int_equal(auth_tokens_add(&t, "x", AUTH_READ, "0123456789abcde\""), -EINVAL);

	const struct auth_token *k = auth_lookup(&t, "fedcba9876543210", 16);
	assert_non_null(k);
	assert_string_equal(k->name, "mon");
	assert_null(auth_lookup(&t, "fedcba987654321", 15));
	assert_null(auth_lookup(&t, "fedcba98765432100", 17));
	assert_null(auth_lookup(&t, "", 0));

	size_t len;
	const char *s = auth_bearer("Bearer abc ", &len);
	assert_non_null(s);
	assert_int_equal(len, 3);
	assert_non_null(auth_bearer("bearer abc", &len));
	assert_null(auth_bearer("Basic abc", &len));
	assert_null(auth_bearer("Bearer ", &len));
	assert_null(auth_bearer(NULL, &len));

	struct auth_tokens c;
	assert_int_equal(auth_tokens_copy(&c, &t), 0);
	assert_int_equal(c.n, 2);
	auth_tokens_free(&c);
	auth_tokens_free(&t);
	assert_int_equal(t.n, 0);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_error_table),
		cmocka_unit_test(test_error_echoes_invalid_utf8),
		cmocka_unit_test(test_route_match),
		cmocka_unit_test(test_route_table),
		cmocka_unit_test(test_tokens),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
