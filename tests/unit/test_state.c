/* The fabric state machine, transition by transition. */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include "plan_state.h"

enum {
	P = PLAN_STATE_PENDING,
	A = PLAN_STATE_APPLYING,
	OK = PLAN_STATE_APPLIED,
	D = PLAN_STATE_DEGRADED,
	F = PLAN_STATE_FAILED
};

static void test_transitions(void **state)
{
	(void)state;
	static const struct {
		int current;
		bool all_held;
		size_t missing;
		bool failing, busy;
		int want;
	} cases[] = {
		/* A new plan waits until its first batch goes out. */
		{ P, false, 0, false, false, P },
		{ P, false, 0, false, true, A },
		/* In flight, or partly held: applying. */
		{ A, false, 0, false, true, A },
		{ A, false, 0, false, false, A },
		/* Everything held: applied, or degraded when pairs are missing in the plan. */
		{ A, true, 0, false, false, OK },
		{ A, true, 3, false, false, D },
		{ P, true, 0, false, false, OK }, /* an empty plan, or already on the units */
		/* Holding everything wins over a failing unit (it failed on someone else). */
		{ A, true, 0, true, false, OK },
		/* A failing unit fails the fabric, pending or not, busy or not. */
		{ A, false, 0, true, true, F },
		{ P, false, 0, true, false, F },
		/* Failed recovers through applying to applied. */
		{ F, false, 0, false, true, A },
		{ F, true, 0, false, false, OK },
		/* Drift on an applied fabric: back to applying until repaired. */
		{ OK, false, 0, false, false, A },
		{ D, false, 2, false, true, A },
	};
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		struct plan_state_input in = { .current = (enum plan_state)cases[i].current,
			                       .all_held = cases[i].all_held,
			                       .missing_pairs = cases[i].missing,
			                       .unit_failing = cases[i].failing,
			                       .busy = cases[i].busy };
		enum plan_state got = plan_state_next(&in);
		if ((int)got != cases[i].want)
			fail_msg("case %zu: got %s, want %s", i, plan_state_name(got),
			         plan_state_name((enum plan_state)cases[i].want));
	}
}

static void test_names(void **state)
{
	(void)state;
	enum plan_state s;
	for (int i = 0; i < PLAN_STATE__COUNT; i++) {
		assert_int_equal(plan_state_parse(plan_state_name((enum plan_state)i), &s), 0);
		assert_int_equal(s, i);
	}
	assert_int_equal(plan_state_parse("planned", &s), -EINVAL);
	assert_string_equal(plan_state_name(PLAN_STATE__COUNT), "?");
	assert_true(plan_state_final(PLAN_STATE_APPLIED));
	assert_true(plan_state_final(PLAN_STATE_DEGRADED));
	assert_true(plan_state_final(PLAN_STATE_FAILED));
	assert_false(plan_state_final(PLAN_STATE_PENDING));
	assert_false(plan_state_final(PLAN_STATE_APPLYING));
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_transitions),
		cmocka_unit_test(test_names),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
