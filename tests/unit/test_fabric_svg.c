/* The fabric picture as SVG (fabric_svg.c) and the embedded files (console.c). */
#include <setjmp.h>
#include <stdbool.h>
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

/*
 * A k0 x k1 grid of servers srv0.. (position c0 + k0 * c1): a HyperX joins
 * every pair of a line, a torus each neighbour and the ends of each ring.
 * Circuit k on unit "ocs<dimension>".
 */
static json_t *grid(size_t k0, size_t k1, bool torus)
{
	json_t *servers = json_array(), *links = json_array();
	size_t n = k0 * k1, k = 0, kk[2] = { k0, k1 }, stride[2] = { 1, k0 };
	char a[32], b[32], ocs[32];
	for (size_t i = 0; i < n; i++) {
		snprintf(a, sizeof(a), "srv%zu", i);
		json_array_append_new(servers, json_string(a));
	}
	for (size_t d = 0; d < 2; d++)
		for (size_t p = 0; p < n; p++)
			for (size_t q = p + 1; q < n; q++) {
				/* Same line of dimension d: the other coordinate equal. */
				size_t cp = p / stride[d] % kk[d], cq = q / stride[d] % kk[d];
				if (p - cp * stride[d] != q - cq * stride[d])
					continue;
				if (torus && cq - cp != 1 && !(cp == 0 && cq == kk[d] - 1))
					continue;
				snprintf(a, sizeof(a), "srv%zu", p);
				snprintf(b, sizeof(b), "srv%zu", q);
				snprintf(ocs, sizeof(ocs), "ocs%zu", d);
				json_array_append_new(
				    links,
				    json_pack("{s:i, s:{s:s, s:i, s:i, s:s, s:i}, "
				              "s:{s:s, s:i, s:i, s:s, s:i}}",
				              "plane", (int)k, "a", "server", a, "device", (int)d,
				              "port", 0, "ocs", ocs, "ocs_port", (int)(2 * k + 1),
				              "b", "server", b, "device", (int)d, "port", 0, "ocs",
				              ocs, "ocs_port", (int)(2 * k + 2)));
				k++;
			}
	return json_pack("{s:s, s:s, s:i, s:s, s:[i, i], s:i, s:i, s:o, s:o, s:[]}", "name", "g",
	                 "state", "applied", "revision", 1, "topology", torus ? "torus" : "hyperx",
	                 "shape", (int)k0, (int)k1, "diameter", 2, "degree",
	                 torus ? 4 : (int)(k0 + k1 - 2), "servers", servers, "links", links,
	                 "missing");
}

/*
 * Whether text is well-formed XML as ofcd writes it: elements nest and close,
 * attributes are quoted, '&' starts one of the five entities or a character
 * reference, no '<' in text or attributes.
 */
static bool well_formed(const char *text)
{
	const char *stack[256];
	size_t lens[256], depth = 0;
	const char *p = text;
	while (*p) {
		if (*p == '&') {
			const char *e = strchr(p, ';');
			if (!e || e - p > 8)
				return false;
			if (strncmp(p, "&amp;", 5) && strncmp(p, "&lt;", 4) &&
			    strncmp(p, "&gt;", 4) && strncmp(p, "&quot;", 6) &&
			    strncmp(p, "&apos;", 6) && p[1] != '#')
				return false;
			p = e + 1;
			continue;
		}
		if (*p != '<') {
			if (*p == '>')
				return false;
			p++;
			continue;
		}
		bool closing = p[1] == '/';
		const char *name = p + (closing ? 2 : 1);
		size_t len = strcspn(name, " \t\n/>");
		if (!len)
			return false;
		const char *q = name + len;
		/* Attributes: name="value" */
		while (*q && *q != '>' && *q != '/') {
			if (*q == ' ' || *q == '\n' || *q == '\t') {
				q++;
				continue;
			}
			if (closing)
				return false;
			q += strcspn(q, "=> \n");
			if (*q != '=' || q[1] != '"')
				return false;
			const char *end = strchr(q + 2, '"');
			if (!end || memchr(q + 2, '<', (size_t)(end - q - 2)))
				return false;
			q = end + 1;
			if (*q != ' ' && *q != '\n' && *q != '>' && *q != '/')
				return false;
		}
		if (*q == '/') {
			if (closing || q[1] != '>')
				return false;
			p = q + 2;
			continue;
		}
		if (*q != '>')
			return false;
		if (closing) {
			if (!depth || lens[depth - 1] != len ||
			    strncmp(stack[depth - 1], name, len))
				return false;
			depth--;
		} else {
			if (depth == 256)
				return false;
			stack[depth] = name;
			lens[depth++] = len;
		}
		p = q + 1;
	}
	return depth == 0;
}

static void test_hyperx_grid(void **state)
{
	(void)state;
	json_t *f = grid(4, 4, false);
	assert_int_equal(json_array_size(json_object_get(f, "links")), 48);
	json_array_append_new(json_object_get(f, "missing"), json_pack("[s, s]", "srv5", "srv7"));
	json_t *failed = json_pack("{s:[i]}", "srv5", 0);
	size_t len = 0;
	char *svg = fabric_svg_render(f, failed, &len);
	assert_non_null(svg);
	assert_true(well_formed(svg));
	/* Each line of a dimension one bus, in the dimension's colour. */
	char *dim0 = section(svg, "<g id=\"dim0\"", "</g>");
	assert_non_null(strstr(dim0, "stroke=\"#4e79a7\""));
	assert_int_equal(count(dim0, "<line "), 4);
	assert_int_equal(count(dim0, "<path "), 0);
	assert_non_null(strstr(dim0, "<title>dimension 0: srv4 … srv7, 6 circuits</title>"));
	free(dim0);
	char *dim1 = section(svg, "<g id=\"dim1\"", "</g>");
	assert_non_null(strstr(dim1, "stroke=\"#f28e2b\""));
	assert_int_equal(count(dim1, "<line "), 4);
	assert_non_null(strstr(dim1, "<title>dimension 1: srv1 … srv13, 6 circuits</title>"));
	free(dim1);
	assert_null(strstr(svg, "id=\"dim2\""));
	/* A bus is vertical or horizontal: srv0 (0, 0) to srv3 (3, 0) on one row. */
	assert_non_null(strstr(svg, "<line x1=\"62.0\" y1=\"118.0\" x2=\"230.0\" y2=\"118.0\">"));

	char *missing = section(svg, "<g id=\"missing\"", "</g>");
	assert_int_equal(count(missing, "<path "), 1);
	assert_non_null(strstr(missing, "<title>missing: srv5 — srv7</title>"));
	free(missing);
	char *servers = section(svg, "<g id=\"servers\"", "</g>");
	assert_int_equal(count(servers, "<circle "), 16);
	assert_non_null(strstr(servers, "<title>srv6 (2, 1)</title>"));
	assert_non_null(strstr(servers, "<title>srv5 (1, 1): failed device 0</title>"));
	free(servers);
	/* The legend names the shape and the dimensions. */
	char *legend = section(svg, "<g id=\"legend\"", "</g>");
	assert_non_null(strstr(legend, "HyperX 4 × 4</text>"));
	assert_non_null(strstr(legend, "diameter 2 · degree 6</text>"));
	assert_non_null(strstr(legend, ">dimension 0 (across)</text>"));
	assert_non_null(strstr(legend, ">4 lines of 4, 24 circuits</text>"));
	assert_non_null(strstr(legend, ">dimension 1 (down)</text>"));
	free(legend);
	free(svg);
	json_decref(failed);
	json_decref(f);
}

static void test_torus_grid(void **state)
{
	(void)state;
	/* The checker itself refuses what is not XML. */
	assert_false(well_formed("<g><line></g>"));
	assert_false(well_formed("<g a=b/>"));
	assert_false(well_formed("<t>a & b</t>"));
	assert_true(well_formed("<g a=\"1\"><t>a &amp; b</t><c/></g>"));
	json_t *f = grid(3, 3, true);
	assert_int_equal(json_array_size(json_object_get(f, "links")), 18);
	size_t len = 0;
	char *svg = fabric_svg_render(f, NULL, &len);
	assert_non_null(svg);
	assert_true(well_formed(svg));
	/* Per ring: two segments and the arc that closes it. */
	for (int d = 0; d < 2; d++) {
		char *dim = section(svg, d ? "<g id=\"dim1\"" : "<g id=\"dim0\"", "</g>");
		assert_int_equal(count(dim, "<line "), 3 * 2);
		assert_int_equal(count(dim, "<path "), 3);
		assert_int_equal(count(dim, "class=\"wrap\""), 3);
		free(dim);
	}
	assert_non_null(strstr(svg, "<title>wrap-around: srv0 — srv2</title>"));
	assert_non_null(strstr(svg, "<title>wrap-around: srv2 — srv8</title>"));
	assert_non_null(strstr(svg, ">torus 3 × 3</text>"));
	assert_non_null(strstr(svg, ">3 rings of 3, 9 circuits</text>"));
	char *missing = section(svg, "<g id=\"missing\"", "</g>");
	assert_int_equal(count(missing, "<path "), 0);
	free(missing);
	assert_int_equal(count(svg, "<circle "), 9 + 1); /* and the legend's dot */
	free(svg);
	json_decref(f);
}

/* A full mesh with a topology is still drawn around a circle. */
static void test_full_mesh_topology(void **state)
{
	(void)state;
	json_t *f = mesh(5, 2);
	json_object_set_new(f, "topology", json_string("full-mesh"));
	size_t len = 0;
	char *svg = fabric_svg_render(f, NULL, &len);
	assert_non_null(svg);
	assert_true(well_formed(svg));
	assert_null(strstr(svg, "id=\"dim0\""));
	char *circuits = section(svg, "<g id=\"circuits\"", "<g id=\"missing\"");
	assert_int_equal(count(circuits, "<line "), 10);
	free(circuits);
	free(svg);
	json_decref(f);
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
	assert_true(well_formed(svg));

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
		cmocka_unit_test(test_small_fabric),   cmocka_unit_test(test_large_fabric),
		cmocka_unit_test(test_empty_fabric),   cmocka_unit_test(test_hyperx_grid),
		cmocka_unit_test(test_torus_grid),     cmocka_unit_test(test_full_mesh_topology),
		cmocka_unit_test(test_embedded_files),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
