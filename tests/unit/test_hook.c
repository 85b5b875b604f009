/*
 * base/hook.h: typed hooks with any number of listeners, in priority order,
 * listeners removing themselves or others from inside a call.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "base/hook.h"

HOOK_TYPE(test_news, (int value, char *log), (value, log))

static struct hook news;

/* Each listener writes its letter and the value into the log. */
static void append(char *log, char c, int value)
{
	size_t n = strlen(log);
	log[n] = c;
	log[n + 1] = (char)('0' + value);
	log[n + 2] = '\0';
}

static void listen_a(void *arg, int value, char *log)
{
	(void)arg;
	append(log, 'a', value);
}

static void listen_b(void *arg, int value, char *log)
{
	(void)arg;
	append(log, 'b', value);
}

static void listen_c(void *arg, int value, char *log)
{
	(void)arg;
	append(log, 'c', value);
}

static void test_order_and_priority(void **state)
{
	(void)state;
	char log[64] = "";
	assert_true(hook_empty(&news));
	test_news_hook_call(&news, 1, log); /* nobody listens: nothing happens */
	assert_string_equal(log, "");
	assert_int_equal(test_news_hook_add(&news, listen_a, NULL), 0);
	assert_int_equal(test_news_hook_add(&news, listen_b, NULL), 0);
	assert_int_equal(test_news_hook_add_prio(&news, listen_c, NULL, -1), 0);
	assert_false(hook_empty(&news));
	test_news_hook_call(&news, 7, log);
	assert_string_equal(log, "c7a7b7");
	test_news_hook_del(&news, listen_a, NULL);
	log[0] = '\0';
	test_news_hook_call(&news, 2, log);
	assert_string_equal(log, "c2b2");
	/* The same function with another argument is another listener. */
	assert_int_equal(test_news_hook_add(&news, listen_b, log), 0);
	test_news_hook_del(&news, listen_b, NULL);
	log[0] = '\0';
	test_news_hook_call(&news, 3, log);
	assert_string_equal(log, "c3b3");
	hook_clear(&news);
	assert_true(hook_empty(&news));
}

static void remove_self(void *arg, int value, char *log)
{
	(void)arg;
	append(log, 's', value);
	test_news_hook_del(&news, remove_self, NULL);
}

static void remove_next(void *arg, int value, char *log)
{
	(void)arg;
	append(log, 'r', value);
	test_news_hook_del(&news, listen_b, NULL);
}

static void call_again(void *arg, int value, char *log)
{
	(void)arg;
	append(log, 'n', value);
	if (value > 0)
		test_news_hook_call(&news, value - 1,
		                    log); /* nested: removals wait for the outer */
}

/* A listener removed during a call is never called again, whoever removed it. */
static void test_removal_inside_a_call(void **state)
{
	(void)state;
	char log[64] = "";
	assert_int_equal(test_news_hook_add(&news, remove_self, NULL), 0);
	assert_int_equal(test_news_hook_add(&news, remove_next, NULL), 0);
	assert_int_equal(test_news_hook_add(&news, listen_b, NULL), 0);
	assert_int_equal(test_news_hook_add(&news, listen_a, NULL), 0);
	test_news_hook_call(&news, 1, log);
	assert_string_equal(log, "s1r1a1");
	log[0] = '\0';
	test_news_hook_call(&news, 2, log);
	assert_string_equal(log, "r2a2");
	hook_clear(&news);

	log[0] = '\0';
	assert_int_equal(test_news_hook_add(&news, call_again, NULL), 0);
	assert_int_equal(test_news_hook_add(&news, remove_self, NULL), 0);
	test_news_hook_call(&news, 1, log);
	/* The inner call meets remove_self first; the outer one skips it afterwards. */
	assert_string_equal(log, "n1n0s0");
	hook_clear(&news);
	assert_true(hook_empty(&news));
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_order_and_priority),
		cmocka_unit_test(test_removal_inside_a_call),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
