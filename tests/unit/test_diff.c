/* Reconciler diff: desired minus actual, break before make, batch splitting. */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>

#include <cmocka.h>

#include "plan_diff.h"

#define N(a) (sizeof(a) / sizeof((a)[0]))

static void assert_xcs(const struct plan_xc *got, size_t n, const struct plan_xc *want, size_t m)
{
	assert_int_equal(n, m);
	for (size_t i = 0; i < n; i++) {
		assert_int_equal(got[i].a, want[i].a);
		assert_int_equal(got[i].b, want[i].b);
	}
}

static void test_diff_basic(void **state)
{
	(void)state;
	const struct plan_xc desired[] = { { 1, 2 }, { 3, 4 }, { 5, 9 } };
	const struct plan_xc actual[] = { { 1, 2 }, { 3, 5 }, { 7, 8 } };
	struct plan_batch b;
	assert_int_equal(plan_diff(desired, N(desired), actual, N(actual), 0, &b), 0);
	const struct plan_xc del[] = { { 3, 5 }, { 7, 8 } };
	const struct plan_xc add[] = { { 3, 4 }, { 5, 9 } };
	assert_xcs(b.del, b.ndel, del, N(del));
	assert_xcs(b.add, b.nadd, add, N(add));
	assert_int_equal(b.deferred, 0);
	plan_batch_free(&b);

	/* In sync: an empty batch. */
	assert_int_equal(plan_diff(desired, N(desired), desired, N(desired), 0, &b), 0);
	assert_int_equal(b.ndel + b.nadd, 0);
	plan_batch_free(&b);
	/* Empty sides. */
	assert_int_equal(plan_diff(NULL, 0, actual, N(actual), 0, &b), 0);
	assert_xcs(b.del, b.ndel, actual, N(actual));
	assert_int_equal(b.nadd, 0);
	plan_batch_free(&b);
	assert_int_equal(plan_diff(desired, N(desired), NULL, 0, 0, &b), 0);
	assert_xcs(b.add, b.nadd, desired, N(desired));
	plan_batch_free(&b);
}

static void test_diff_rejects_unsorted(void **state)
{
	(void)state;
	const struct plan_xc bad_order[] = { { 3, 4 }, { 1, 2 } };
	const struct plan_xc bad_pair[] = { { 4, 3 } };
	const struct plan_xc dup[] = { { 1, 2 }, { 1, 2 } };
	struct plan_batch b;
	assert_int_equal(plan_diff(bad_order, 2, NULL, 0, 0, &b), -EINVAL);
	assert_int_equal(plan_diff(NULL, 0, bad_pair, 1, 0, &b), -EINVAL);
	assert_int_equal(plan_diff(dup, 2, NULL, 0, 0, &b), -EINVAL);
}

/*
 * A port moving from one circuit to another: the removal that frees port 3
 * must go before the addition that needs it, also when the batch is split.
 */
static void test_break_before_make(void **state)
{
	(void)state;
	struct plan_xc desired[64], actual[64];
	for (uint32_t i = 0; i < 64; i++) {
		actual[i] = (struct plan_xc){ 2 * i + 1, 2 * i + 2 };  /* 1-2, 3-4, ... */
		desired[i] = (struct plan_xc){ 2 * i + 2, 2 * i + 3 }; /* 2-3, 4-5, ... */
	}
	/* Unlimited: all 64 removals, then all 64 additions. */
	struct plan_batch b;
	assert_int_equal(plan_diff(desired, 64, actual, 64, 0, &b), 0);
	assert_int_equal(b.ndel, 64);
	assert_int_equal(b.nadd, 64);
	plan_batch_free(&b);

	/* Split at 40: removals first, no addition until every removal is out. */
	struct plan_xc cur[64];
	size_t ncur = 64, batches = 0;
	for (size_t i = 0; i < 64; i++)
		cur[i] = actual[i];
	for (;;) {
		assert_int_equal(plan_diff(desired, 64, cur, ncur, 40, &b), 0);
		if (b.ndel + b.nadd == 0) {
			plan_batch_free(&b);
			break;
		}
		assert_true(b.ndel + b.nadd <= 40);
		batches++;
		/* Apply as a unit that refuses an add on a joined port would. */
		uint32_t peer[200] = { 0 };
		for (size_t i = 0; i < ncur; i++)
			peer[cur[i].a] = cur[i].b, peer[cur[i].b] = cur[i].a;
		for (size_t i = 0; i < b.ndel; i++)
			peer[b.del[i].a] = peer[b.del[i].b] = 0;
		for (size_t i = 0; i < b.nadd; i++) {
			assert_int_equal(peer[b.add[i].a], 0);
			assert_int_equal(peer[b.add[i].b], 0);
			peer[b.add[i].a] = b.add[i].b, peer[b.add[i].b] = b.add[i].a;
		}
		ncur = 0;
		for (uint32_t p = 1; p < 200; p++)
			if (peer[p] > p)
				cur[ncur++] = (struct plan_xc){ p, peer[p] };
		plan_batch_free(&b);
		assert_true(batches < 10);
	}
	assert_int_equal(batches, 4); /* 40 del | 24 del + 16 add | 40 add | 8 add */
	assert_xcs(cur, ncur, desired, 64);
}

static void test_split_counts(void **state)
{
	(void)state;
	const struct plan_xc desired[] = { { 1, 2 }, { 3, 4 }, { 5, 6 } };
	const struct plan_xc actual[] = { { 7, 8 }, { 9, 10 } };
	struct plan_batch b;
	assert_int_equal(plan_diff(desired, 3, actual, 2, 1, &b), 0);
	assert_int_equal(b.ndel, 1);
	assert_int_equal(b.nadd, 0);
	assert_int_equal(b.deferred, 4);
	plan_batch_free(&b);
	assert_int_equal(plan_diff(desired, 3, actual, 2, 3, &b), 0);
	assert_int_equal(b.ndel, 2);
	assert_int_equal(b.nadd, 1);
	assert_int_equal(b.deferred, 2);
	plan_batch_free(&b);
}

static void test_sort_unique(void **state)
{
	(void)state;
	struct plan_xc in_order[] = { { 1, 2 }, { 1, 5 }, { 3, 4 } };
	assert_int_equal(plan_xc_sort_unique(in_order, 3), 3);
	assert_int_equal(in_order[1].b, 5);
	struct plan_xc v[] = { { 3, 4 }, { 1, 5 }, { 3, 4 }, { 1, 2 }, { 1, 5 } };
	assert_int_equal(plan_xc_sort_unique(v, 5), 3);
	const struct plan_xc want[] = { { 1, 2 }, { 1, 5 }, { 3, 4 } };
	for (size_t i = 0; i < 3; i++) {
		assert_int_equal(v[i].a, want[i].a);
		assert_int_equal(v[i].b, want[i].b);
	}
	assert_int_equal(plan_xc_sort_unique(v, 0), 0);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_diff_basic),
		cmocka_unit_test(test_diff_rejects_unsorted),
		cmocka_unit_test(test_break_before_make),
		cmocka_unit_test(test_split_counts),
		cmocka_unit_test(test_sort_unique),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
