/*
 * net/body_parse.h: bodies parsed and read on the worker thread, results
 * delivered on the loop in order, cancelled jobs never delivered, and every
 * job freed whatever becomes of it (the sanitizer build checks the leaks).
 */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "net/body_parse.h"

/* What each delivery saw, in order. */
struct seen {
	int n;
	int order[8];
	json_t *values[8];
	void *prepared[8];
	enum ofcd_err refusals[8];
	int lines[8];
};

struct ticket {
	struct seen *seen;
	int id;
};

static void on_done(void *arg, struct body_parsed *r)
{
	struct ticket *t = arg;
	struct seen *s = t->seen;
	s->order[s->n] = t->id;
	s->values[s->n] = r->value;
	s->prepared[s->n] = r->prepared;
	s->refusals[s->n] = r->refusal.err;
	s->lines[s->n] = r->value ? 0 : r->err.line;
	s->n++;
}

/* Reads {"n": N} into a malloc'd int, refusing any other shape. */
static void *read_n(json_t *body, struct ofcd_error *e)
{
	json_t *n = json_object_get(body, "n");
	if (!json_is_integer(n)) {
		ofcd_fail(e, -EINVAL, OFCD_E_INVALID_FIELD, "n", json_pack("{s:s}", "why", "test"),
		          "n must be an integer");
		return NULL;
	}
	int *v = malloc(sizeof(*v));
	*v = (int)json_integer_value(n);
	return v;
}

static const struct api_prepare reader = { read_n, free };

static char *copy(const char *s)
{
	return strdup(s);
}

/* Runs the loop until want deliveries are in (each wakes the loop once or more). */
static void deliver(struct event_base *base, struct seen *s, int want)
{
	for (int i = 0; i < 1000 && s->n < want; i++)
		event_base_loop(base, EVLOOP_ONCE);
	assert_int_equal(s->n, want);
}

static void free_seen(struct seen *s, bool prepared)
{
	for (int i = 0; i < s->n; i++) {
		json_decref(s->values[i]);
		if (prepared)
			free(s->prepared[i]);
	}
}

static void test_parsed_in_order(void **state)
{
	(void)state;
	struct event_base *base = event_base_new();
	struct body_parser *p = body_parser_new(base);
	assert_non_null(p);
	struct seen s = { 0 };
	struct ticket t[3] = { { &s, 0 }, { &s, 1 }, { &s, 2 } };
	const char *bodies[3] = { "{\"a\": [1, 2, 3]}", "{\"a\": \n[1, 2", "[true]" };
	for (int i = 0; i < 3; i++)
		assert_non_null(body_parser_submit(p, copy(bodies[i]), strlen(bodies[i]),
		                                   JSON_DECODE_ANY, NULL, on_done, &t[i]));
	deliver(base, &s, 3);
	assert_int_equal(s.order[0], 0);
	assert_int_equal(s.order[1], 1);
	assert_int_equal(s.order[2], 2);
	assert_int_equal(json_array_size(json_object_get(s.values[0], "a")), 3);
	assert_null(s.values[1]);
	assert_int_equal(s.lines[1], 2); /* jansson's place of the error */
	assert_true(json_is_true(json_array_get(s.values[2], 0)));
	assert_null(s.prepared[0]);
	free_seen(&s, false);
	body_parser_free(p);
	event_base_free(base);
}

static void test_prepared_or_refused(void **state)
{
	(void)state;
	struct event_base *base = event_base_new();
	struct body_parser *p = body_parser_new(base);
	struct seen s = { 0 };
	struct ticket t[3] = { { &s, 0 }, { &s, 1 }, { &s, 2 } };
	const char *bodies[3] = { "{\"n\": 42}", "{\"n\": \"x\"}", "not json" };
	for (int i = 0; i < 3; i++)
		body_parser_submit(p, copy(bodies[i]), strlen(bodies[i]), 0, &reader, on_done,
		                   &t[i]);
	deliver(base, &s, 3);
	assert_non_null(s.prepared[0]);
	assert_int_equal(*(int *)s.prepared[0], 42);
	assert_int_equal(s.refusals[0], OFCD_OK);
	/* Refused by the reader: its refusal (and details, freed with the job) come back. */
	assert_null(s.prepared[1]);
	assert_non_null(s.values[1]);
	assert_int_equal(s.refusals[1], OFCD_E_INVALID_FIELD);
	/* Not JSON: the reader never ran. */
	assert_null(s.values[2]);
	assert_int_equal(s.refusals[2], OFCD_OK);
	free_seen(&s, true);
	body_parser_free(p);
	event_base_free(base);
}

static void test_cancelled_never_delivered(void **state)
{
	(void)state;
	struct event_base *base = event_base_new();
	struct body_parser *p = body_parser_new(base);
	struct seen s = { 0 };
	struct ticket t[4] = { { &s, 0 }, { &s, 1 }, { &s, 2 }, { &s, 3 } };
	struct body_job *j[4];
	for (int i = 0; i < 4; i++)
		j[i] = body_parser_submit(p, copy("{\"n\": 1}"), 8, 0, &reader, on_done, &t[i]);
	/* Whether still queued, being parsed or parsed: never delivered, freed all the same. */
	body_parser_cancel(j[1]);
	body_parser_cancel(j[3]);
	deliver(base, &s, 2);
	for (int i = 0; i < 20; i++)
		event_base_loop(base, EVLOOP_NONBLOCK);
	assert_int_equal(s.n, 2);
	assert_int_equal(s.order[0], 0);
	assert_int_equal(s.order[1], 2);
	free_seen(&s, true);
	body_parser_free(p);
	event_base_free(base);
}

static void test_freed_with_jobs_left(void **state)
{
	(void)state;
	struct event_base *base = event_base_new();
	struct body_parser *p = body_parser_new(base);
	struct seen s = { 0 };
	struct ticket t = { &s, 0 };
	/* Queued, parsed or waiting for the loop when the parser stops: dropped, not leaked. */
	for (int i = 0; i < 6; i++)
		body_parser_submit(p, copy("{\"n\": 7}"), 8, 0, &reader, on_done, &t);
	body_parser_free(p);
	assert_int_equal(s.n, 0);
	event_base_free(base);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_parsed_in_order),
		cmocka_unit_test(test_prepared_or_refused),
		cmocka_unit_test(test_cancelled_never_delivered),
		cmocka_unit_test(test_freed_with_jobs_left),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
