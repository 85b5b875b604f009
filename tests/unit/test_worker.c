/*
 * base/worker.h: the bound on jobs in hand (blocks to free apart), and a
 * cancelled job's argument freed exactly once: at once when it waits, once its work ends when it
 * runs (the order of delivery and the cancels of parsed bodies are test_body_parse.c's).
 */
#include <semaphore.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>

#include <cmocka.h>

#include "base/worker.h"

struct counts {
	sem_t started, gate; /* the work says it runs, then waits for the test */
	int done, freed;
};

struct job {
	struct counts *c;
	bool gated;
};

static void work(void *arg)
{
	struct job *j = arg;
	if (j->gated) {
		sem_post(&j->c->started);
		sem_wait(&j->c->gate);
	}
}

static void on_done(void *arg)
{
	struct job *j = arg;
	j->c->done++;
}

static void on_free(void *arg)
{
	struct job *j = arg;
	j->c->freed++;
}

static void until(struct event_base *base, const int *n, int want)
{
	for (int i = 0; i < 10000 && *n < want; i++)
		event_base_loop(base, EVLOOP_ONCE);
	assert_int_equal(*n, want);
}

static void test_bounded_and_cancelled(void **state)
{
	(void)state;
	struct event_base *base = event_base_new();
	struct worker *w = worker_new(base, "test-worker", 2);
	assert_non_null(w);
	struct counts c = { .done = 0 };
	sem_init(&c.started, 0, 0);
	sem_init(&c.gate, 0, 0);
	struct job running = { &c, true }, waiting = { &c, false }, third = { &c, false };

	struct worker_job *r = worker_submit(w, work, on_done, on_free, &running);
	struct worker_job *q = worker_submit(w, work, on_done, on_free, &waiting);
	assert_non_null(r);
	assert_non_null(q);
	/* Two in hand: the third is the caller's still; a block to free takes no slot. */
	assert_null(worker_submit(w, work, on_done, on_free, &third));
	worker_free_later(w, malloc(64));
	assert_int_equal(worker_queued(w), 2);

	sem_wait(&c.started);
	worker_cancel(q); /* waiting: freed at once */
	assert_int_equal(c.freed, 1);
	worker_cancel(r); /* running: freed once its work ends, never delivered */
	assert_int_equal(c.freed, 1);
	sem_post(&c.gate);
	until(base, &c.freed, 2);
	assert_int_equal(c.done, 0);
	assert_int_equal(worker_queued(w), 0);

	/* Room again; a job delivered is freed after its delivery. */
	assert_non_null(worker_submit(w, work, on_done, on_free, &third));
	until(base, &c.freed, 3);
	assert_int_equal(c.done, 1);

	/* Stopped with a job left: freed, not delivered. */
	struct job last = { &c, true };
	worker_submit(w, work, on_done, on_free, &last);
	sem_wait(&c.started);
	sem_post(&c.gate);
	worker_free(w);
	assert_int_equal(c.freed, 4);
	assert_int_equal(c.done, 1);
	sem_destroy(&c.started);
	sem_destroy(&c.gate);
	event_base_free(base);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_bounded_and_cancelled),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
