/* The framing of a change sent in several log entries (log_part.h). */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "cluster/log_part.h"

static void test_round_trip(void **state)
{
	(void)state;
	const char slice[] = "abcdef";
	unsigned char *e = log_part_make(2, 5, slice, 6);
	uint32_t index, count;
	const void *payload;
	size_t len;
	assert_non_null(e);
	assert_true(log_part_parse(e, LOG_PART_HEADER + 6, &index, &count, &payload, &len));
	assert_int_equal(index, 2);
	assert_int_equal(count, 5);
	assert_int_equal(len, 6);
	assert_memory_equal(payload, slice, 6);
	free(e);
}

static void test_not_a_part(void **state)
{
	(void)state;
	uint32_t index, count;
	const void *payload;
	size_t len;
	/* A changeset starts with 'T' (its first table). */
	const unsigned char changeset[] = { 'T', 3,   0, 0, 's', 'e', 'r', 'v',
		                            'e', 'r', 0, 0, 0,   0,   0,   0 };
	assert_false(log_part_parse(changeset, sizeof(changeset), &index, &count, &payload, &len));
	unsigned char *e = log_part_make(0, 2, "x", 1);
	assert_false(log_part_parse(e, LOG_PART_HEADER - 1, &index, &count, &payload, &len));
	free(e);
	/* An index past the count, or no parts at all: malformed, not a part. */
	e = log_part_make(3, 3, "x", 1);
	assert_false(log_part_parse(e, LOG_PART_HEADER + 1, &index, &count, &payload, &len));
	free(e);
	e = log_part_make(0, 0, "x", 1);
	assert_false(log_part_parse(e, LOG_PART_HEADER + 1, &index, &count, &payload, &len));
	free(e);
}

static void test_reassembly(void **state)
{
	(void)state;
	struct log_part_buf b = { 0 };
	assert_int_equal(log_part_add(&b, 0, 3, "ab", 2), 0);
	assert_int_equal(log_part_add(&b, 1, 3, "cd", 2), 0);
	assert_int_equal(log_part_add(&b, 2, 3, "e", 1), 1);
	assert_int_equal(b.len, 5);
	assert_memory_equal(b.data, "abcde", 5);
	log_part_reset(&b);

	/* Out of order, or from a change of another size: the change under way is dropped. */
	assert_int_equal(log_part_add(&b, 0, 3, "ab", 2), 0);
	assert_int_equal(log_part_add(&b, 2, 3, "e", 1), -EPROTO);
	assert_int_equal(b.next, 0);
	assert_int_equal(log_part_add(&b, 0, 3, "ab", 2), 0);
	assert_int_equal(log_part_add(&b, 1, 4, "cd", 2), -EPROTO);
	/* A part 0 starts afresh, whatever was under way. */
	assert_int_equal(log_part_add(&b, 0, 2, "xy", 2), 0);
	assert_int_equal(log_part_add(&b, 0, 2, "zz", 2), 0);
	assert_int_equal(log_part_add(&b, 1, 2, "!", 1), 1);
	assert_memory_equal(b.data, "zz!", 3);
	log_part_reset(&b);
	/* A later part with nothing under way belongs to a change whose start was not seen. */
	assert_int_equal(log_part_add(&b, 1, 2, "x", 1), -EPROTO);
	log_part_reset(&b);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_round_trip),
		cmocka_unit_test(test_not_a_part),
		cmocka_unit_test(test_reassembly),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
