/*
 * domain/fabric_layout.h: a stored layout is read back only when it is the
 * fabric's (a well-formed grid of its servers), and a request's layout is
 * chosen or refused naming the field to blame.
 */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "domain/fabric_layout.h"

static void test_load(void **state)
{
	struct plan_shape s;
	(void)state;
	assert_int_equal(fabric_layout_load("full-mesh", NULL, 8, &s), 0);
	assert_int_equal(s.topology, PLAN_TOPO_FULL_MESH);
	assert_int_equal(s.degree, 7);
	assert_int_equal(fabric_layout_load("hyperx", "4x4", 16, &s), 0);
	assert_int_equal(s.dims, 2);
	assert_int_equal(s.diameter, 2);
	assert_int_equal(s.degree, 6);
	assert_int_equal(fabric_layout_load("torus", "4x2x2", 16, &s), 0);
	assert_int_equal(s.topology, PLAN_TOPO_TORUS);
	/* Not a grid of these 16 servers, or not a grid at all. */
	static const char *const bad[] = { "4x",   "x4", "4xx4", "4,4",         "0x16",
		                           "4x4 ", "",   "4x5",  "2x2x2x2x1x1", "abc" };
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
		assert_int_equal(fabric_layout_load("hyperx", bad[i], 16, &s), -EINVAL);
	assert_int_equal(fabric_layout_load("hyperx", NULL, 16, &s), -EINVAL);
	assert_int_equal(fabric_layout_load("ring", "16", 16, &s), -EINVAL);
	assert_int_equal(fabric_layout_load("auto", "4x4", 16, &s), -EINVAL);
	assert_int_equal(fabric_layout_load(NULL, "4x4", 16, &s), -EINVAL);
}

static void test_choose(void **state)
{
	struct fabric_layout l = FABRIC_LAYOUT_FULL_MESH;
	struct ofcd_error e = { 0 };
	struct plan_shape s;
	json_t *choice = NULL;
	(void)state;
	/* Auto past the full mesh: a grid, and why, with the candidates priced. */
	l.topology = PLAN_TOPO_AUTO;
	assert_int_equal(fabric_layout_choose(&l, 1024, 8, 8, &s, &choice, &e), 0);
	assert_int_equal(s.topology, PLAN_TOPO_HYPERX);
	assert_int_equal(s.k[0], 32);
	assert_int_equal(s.k[1], 32);
	assert_non_null(choice);
	json_t *first = json_array_get(json_object_get(choice, "candidates"), 0);
	assert_string_equal(json_string_value(json_object_get(first, "shape")), "32x32");
	assert_true(json_real_value(json_object_get(first, "predicted_us")) > 0);
	json_decref(choice);
	/* Auto where the full mesh fits: the full mesh, nothing to weigh. */
	assert_int_equal(fabric_layout_choose(&l, 64, 8, 8, &s, &choice, &e), 0);
	assert_int_equal(s.topology, PLAN_TOPO_FULL_MESH);
	assert_null(choice);
	/* A grid of other servers: 400 on shape. */
	l.topology = PLAN_TOPO_HYPERX;
	l.k[0] = 3;
	l.k[1] = 5;
	l.ndims = 2;
	assert_int_equal(fabric_layout_choose(&l, 16, 8, 8, &s, &choice, &e), -EINVAL);
	assert_string_equal(e.field, "shape");
	json_decref(e.details);
	/* Nothing fits two planes: 422 on servers. */
	struct fabric_layout a = FABRIC_LAYOUT_FULL_MESH;
	struct ofcd_error e2 = { 0 };
	a.topology = PLAN_TOPO_AUTO;
	assert_int_equal(fabric_layout_choose(&a, 5001, 2, 1, &s, &choice, &e2), -EDOM);
	assert_int_equal(e2.err, OFCD_E_INFEASIBLE);
	assert_string_equal(e2.field, "servers");
	assert_non_null(strstr(e2.msg, "5000 would fit"));
	json_decref(e2.details);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_load),
		cmocka_unit_test(test_choose),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
