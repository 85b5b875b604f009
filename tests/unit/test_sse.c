/* The event-stream parser: framing, comments, line ends, chunking, limits. */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "sse.h"

/* Every event heard, as "id|event|data;" */
struct heard {
	char text[4096];
	int n;
};

static void on_event(const struct sse_event *ev, void *arg)
{
	struct heard *h = arg;
	size_t len = strlen(h->text);
	snprintf(h->text + len, sizeof(h->text) - len, "%s|%s|%s;", ev->id, ev->event, ev->data);
	h->n++;
}

/* Feeds stream in pieces of chunk bytes and checks what was heard. */
static void assert_heard(const char *stream, size_t chunk, const char *want)
{
	struct heard h = { "", 0 };
	struct sse p;
	sse_init(&p, on_event, &h);
	for (size_t i = 0; i < strlen(stream); i += chunk) {
		size_t n = strlen(stream) - i < chunk ? strlen(stream) - i : chunk;
		assert_int_equal(sse_feed(&p, stream + i, n), 0);
	}
	sse_free(&p);
	assert_string_equal(h.text, want);
}

static void test_events(void **state)
{
	(void)state;
	const char *s = ": ofcd events\n\n"
	                "id: 7\nevent: fabric_state\ndata: {\"fabric\":\"a\"}\n\n"
	                ": keep-alive\n\n"
	                "event: operation\ndata: {\"id\":1}\n\n";
	const char *want = "7|fabric_state|{\"fabric\":\"a\"};7|operation|{\"id\":1};";
	/* The same events whatever the chunking, down to one byte at a time. */
	for (size_t chunk = 1; chunk <= strlen(s); chunk++)
		assert_heard(s, chunk, want);
}

static void test_framing(void **state)
{
	(void)state;
	/* CRLF and CR line ends; several data lines join with LF; no space after the colon. */
	assert_heard("data: a\r\ndata:b\r\n\r\n", 1, "|message|a\nb;");
	assert_heard("data: a\rdata: b\r\r", 3, "|message|a\nb;");
	/* An event without data is no event; an unfinished one is dropped; unknown fields too. */
	assert_heard("event: x\n\ndata: y", 4, "");
	assert_heard("retry: 10\nfoo\ndata\n\n", 2, "|message|;");
}

static void test_limit(void **state)
{
	(void)state;
	struct heard h = { "", 0 };
	struct sse p;
	char *big = malloc(SSE_MAX + 1);
	assert_non_null(big);
	memset(big, 'x', SSE_MAX + 1);
	sse_init(&p, on_event, &h);
	assert_int_equal(sse_feed(&p, "data: ", 6), 0);
	assert_int_equal(sse_feed(&p, big, SSE_MAX + 1), -E2BIG);
	sse_free(&p);
	free(big);
	assert_int_equal(h.n, 0);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_events),
		cmocka_unit_test(test_framing),
		cmocka_unit_test(test_limit),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
