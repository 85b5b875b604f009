/* The fabric picture as SVG (fabric_svg.c) and the embedded files (console.c). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "api/console.h"
#include "api/fabric_svg.h"

static size_t count(const char *text, const char *needle)
{
	size_t n = 0;
	for (const char *p = strstr(text, needle); p; p = strstr(p + 1, needle))
		n++;
	return n;
}

/* The text between the first "from" and the next "to". */
static char *section(const char *text, const char *from, const char *to)
{
	const char *a = strstr(text, from);
	assert_non_null(a);
	const char *b = strstr(a, to);
	assert_non_null(b);
	return strndup(a, (size_t)(b - a));
}

/* A full mesh of m servers, circuit k on unit "ocs<k % units>". */
static json_t *mesh(size_t m, size_t units)
{
	json_t *servers = json_array(), *links = json_array();
	char a[32], b[32], ocs[32];
	size_t k = 0;
	for (size_t i = 0; i < m; i++) {
		snprintf(a, sizeof(a), "srv%zu", i);
		json_array_append_new(servers, json_string(a));
	}
	for (size_t i = 0; i < m; i++)
		for (size_t j = i + 1; j < m; j++, k++) {
			snprintf(a, sizeof(a), "srv%zu", i);
			snprintf(b, sizeof(b), "srv%zu", j);
			snprintf(ocs, sizeof(ocs), "ocs%zu", k % units);
			json_array_append_new(
			    links,
			    json_pack(
			        "{s:i, s:{s:s, s:i, s:i, s:s, s:i}, s:{s:s, s:i, s:i, s:s, s:i}}",
			        "plane", (int)k, "a", "server", a, "device", 0, "port", 0, "ocs",
			        ocs, "ocs_port", (int)(2 * k + 1), "b", "server", b, "device", 1,
			        "port", 0, "ocs", ocs, "ocs_port", (int)(2 * k + 2)));
		}
	return json_pack("{s:s, s:s, s:i, s:o, s:o, s:[]}", "name", "job<a>", "state", "degraded",
	                 "revision", 3, "servers", servers, "links", links, "missing");
}

static void test_small_fabric(void **state)
{
	(void)state;
	json_t *f = mesh(5, 2);
	json_array_append_new(json_object_get(f, "missing"), json_pack("[s, s]", "srv0", "srv4"));
	json_t *failed = json_pack("{s:[i, i]}", "srv3", 1, 2);
	size_t len = 0;
	char *svg = fabric_svg_render(f, failed, &len);
	assert_non_null(svg);
	assert_int_equal(strlen(svg), len);
	assert_true(strncmp(svg, "<svg xmlns=\"http://www.w3.org/2000/svg\"", 39) == 0);
	assert_non_null(strstr(svg, "</svg>\n"));

	char *circuits = section(svg, "<g id=\"circuits\"", "<g id=\"missing\"");
	assert_int_equal(count(circuits, "<line "), 10);
	/* Colours by unit name: ocs0 the first of the palette, ocs1 the second. */
	assert_int_equal(count(circuits, "<g stroke=\"#4e79a7\">"), 1);
	assert_int_equal(count(circuits, "<g stroke=\"#f28e2b\">"), 1);
	assert_non_null(strstr(circuits, "<title>ocs0: srv0 device 0 port 0 (OCS port 1) — srv1 "
	                                 "device 1 port 0 (OCS port 2)</title>"));
	free(circuits);

	char *missing = section(svg, "<g id=\"missing\"", "</g>");
	assert_int_equal(count(missing, "<line "), 1);
	assert_non_null(strstr(missing, "<title>missing: srv0 — srv4</title>"));
	free(missing);

	assert_non_null(strstr(svg, "<title>srv3: failed devices 1, 2</title>"));
	assert_non_null(strstr(svg, "<title>srv2</title>"));
	/* Names are escaped; the header counts what the picture shows. */
	assert_non_null(strstr(svg, "fabric job&lt;a&gt;</text>"));
	assert_null(strstr(svg, "job<a>"));
	assert_non_null(strstr(svg, "revision 3 · 5 servers · 10 circuits · 1 missing · "
	                            "1 with failed devices"));
	assert_non_null(strstr(svg, ">ocs1 (5 circuits)</text>"));
	free(svg);
	json_decref(failed);
	json_decref(f);
}

/* A large fabric: one path per unit (no title per circuit), no server names. */
static void test_large_fabric(void **state)
{
	(void)state;
	json_t *f = mesh(80, 3);
	size_t len = 0;
	char *svg = fabric_svg_render(f, NULL, &len);
	assert_non_null(svg);
	char *circuits = section(svg, "<g id=\"circuits\"", "<g id=\"missing\"");
	assert_int_equal(count(circuits, "<path "), 3);
	assert_int_equal(count(circuits, "<line "), 0);
	assert_int_equal(count(circuits, "M"), 80 * 79 / 2);
	free(circuits);
	assert_int_equal(count(svg, "<circle "), 80 + 1); /* and the legend's dot */
	assert_null(strstr(svg, ">srv7</text>"));
	free(svg);
	json_decref(f);
}

static void test_empty_fabric(void **state)
{
	(void)state;
	json_t *f = json_pack("{s:s, s:s, s:i, s:[], s:[], s:[]}", "name", "e", "state", "pending",
	                      "revision", 1, "servers", "links", "missing");
	size_t len = 0;
	char *svg = fabric_svg_render(f, NULL, &len);
	assert_non_null(svg);
	assert_non_null(strstr(svg, "0 servers · 0 circuits"));
	free(svg);
	json_decref(f);
}

static void test_embedded_files(void **state)
{
	(void)state;
	const struct console_file *page = console_find(console_files, "index.html");
	assert_non_null(page);
	assert_string_equal(page->content_type, "text/html; charset=utf-8");
	assert_int_equal(strlen(page->data), page->len);
	assert_non_null(strstr(page->data, "<title>ofcd console</title>"));
	assert_string_equal(console_find(console_files, "app.js")->content_type,
	                    "text/javascript; charset=utf-8");
	assert_null(console_find(console_files, "nothing.js"));
	/* The OpenAPI document is JSON with every path. */
	const struct console_file *doc = console_find(console_openapi, "openapi.json");
	assert_non_null(doc);
	json_error_t err;
	json_t *j = json_loadb(doc->data, doc->len, 0, &err);
	assert_non_null(j);
	assert_string_equal(json_string_value(json_object_get(j, "openapi")), "3.1.0");
	assert_non_null(
	    json_object_get(json_object_get(j, "paths"), "/v1/fabrics/{name}/picture.svg"));
	json_decref(j);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_small_fabric),
		cmocka_unit_test(test_large_fabric),
		cmocka_unit_test(test_empty_fabric),
		cmocka_unit_test(test_embedded_files),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
