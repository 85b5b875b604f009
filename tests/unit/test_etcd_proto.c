/* etcd v3 JSON gateway format: base64, request bodies, and replies recorded from etcd 3.4. */
#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>
#include <errno.h>
#include <jansson.h>

#include "cluster/etcd_proto.h"

static void test_b64(void **state)
{
	(void)state;
	static const char *plain[] = { "", "f", "fo", "foo", "foob", "fooba", "foobar" };
	static const char *coded[] = { "",         "Zg==",     "Zm8=",    "Zm9v",
		                       "Zm9vYg==", "Zm9vYmE=", "Zm9vYmFy" };
	for (size_t i = 0; i < sizeof(plain) / sizeof(plain[0]); i++) {
		char *s = etcd_b64_encode(plain[i], strlen(plain[i]));
		unsigned char *back;
		size_t len;
		assert_string_equal(s, coded[i]);
		assert_int_equal(etcd_b64_decode(s, &back, &len), 0);
		assert_int_equal(len, strlen(plain[i]));
		assert_memory_equal(back, plain[i], len);
		assert_int_equal(back[len], 0);
		free(back);
		free(s);
	}
	/* Every byte value, so every character of the alphabet. */
	unsigned char bin[256];
	for (size_t i = 0; i < sizeof(bin); i++)
		bin[i] = (unsigned char)(i * 7);
	char *s = etcd_b64_encode(bin, sizeof(bin));
	unsigned char *back;
	size_t len;
	assert_int_equal(etcd_b64_decode(s, &back, &len), 0);
	assert_int_equal(len, sizeof(bin));
	assert_memory_equal(back, bin, len);
	free(back);
	free(s);
	static const char *bad[] = { "Zg=", "Z===", "Zg=a", "Zm9v!A==", "=Zm9", "Zg==Zg==" };
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
		assert_int_equal(etcd_b64_decode(bad[i], &back, &len), -EINVAL);
}

/* Parses req and checks the member at path ("a.0.b") equals want. */
static void check_member(const char *req, const char *path, const char *want)
{
	json_t *root = json_loads(req, 0, NULL);
	json_t *v = root;
	char buf[128];
	assert_non_null(root);
	snprintf(buf, sizeof(buf), "%s", path);
	for (char *save, *tok = strtok_r(buf, ".", &save); tok; tok = strtok_r(NULL, ".", &save))
		v = json_is_array(v) ? json_array_get(v, strtoul(tok, NULL, 10))
		                     : json_object_get(v, tok);
	if (!want) {
		assert_null(v);
	} else {
		if (!json_is_string(v))
			fail_msg("%s: no string at %s", req, path);
		assert_string_equal(json_string_value(v), want);
	}
	json_decref(root);
}

static void test_requests(void **state)
{
	(void)state;
	char *r = etcd_req_range("/ofcd/log/", true, 0);
	check_member(r, "key", "L29mY2QvbG9nLw==");       /* "/ofcd/log/" */
	check_member(r, "range_end", "L29mY2QvbG9nMA=="); /* "/ofcd/log0" */
	check_member(r, "min_mod_revision", NULL);
	free(r);
	r = etcd_req_range("a", false, 7);
	check_member(r, "range_end", NULL);
	check_member(r, "min_mod_revision", "7");
	free(r);

	r = etcd_req_create("/ofcd/leader", "a", 1, 4111120189691404039);
	check_member(r, "compare.0.key", "L29mY2QvbGVhZGVy");
	check_member(r, "compare.0.target", "CREATE");
	check_member(r, "compare.0.create_revision", "0");
	check_member(r, "success.0.request_put.value", "YQ==");
	check_member(r, "success.0.request_put.lease", "4111120189691404039");
	check_member(r, "failure.0.request_range.key", "L29mY2QvbGVhZGVy");
	free(r);

	r = etcd_req_append("/ofcd/leader", 12, "/ofcd/log/1", "xy", 2, "/ofcd/log_floor", 0);
	check_member(r, "compare.0.create_revision", "12");
	check_member(r, "compare.0.key", "L29mY2QvbGVhZGVy");
	check_member(r, "compare.1.create_revision", "0");
	check_member(r, "compare.1.key", "L29mY2QvbG9nLzE=");
	check_member(r, "compare.2.key", "L29mY2QvbG9nX2Zsb29y");
	check_member(r, "compare.2.target", "MOD");
	check_member(r, "compare.2.mod_revision", "0");
	check_member(r, "success.0.request_put.key", "L29mY2QvbG9nLzE=");
	check_member(r, "success.0.request_put.value", "eHk=");
	check_member(r, "success.0.request_put.lease", NULL);
	check_member(r, "failure.0.request_range.key", "L29mY2QvbGVhZGVy");
	check_member(r, "failure.1.request_range.key", "L29mY2QvbG9nLzE=");
	check_member(r, "failure.2.request_range.key", "L29mY2QvbG9nX2Zsb29y");
	free(r);

	r = etcd_req_trim("/ofcd/leader", 12, "/ofcd/log/", "/ofcd/log/1", "/ofcd/log_floor", 40,
	                  "41 /ofcd/log/1");
	check_member(r, "compare.0.create_revision", "12");
	check_member(r, "compare.1.key", "L29mY2QvbG9nX2Zsb29y");
	check_member(r, "compare.1.target", "MOD");
	check_member(r, "compare.1.mod_revision", "40");
	check_member(r, "success.1.request_put.key", "L29mY2QvbG9nX2Zsb29y");
	check_member(r, "failure.0.request_range.key", "L29mY2QvbG9nX2Zsb29y");
	free(r);

	/* The first page of a replica's read, then the next one, after its last key. */
	r = etcd_req_log_read("/ofcd/log_floor", "/ofcd/log/", NULL, 5, 0, 64);
	check_member(r, "success.0.request_range.key", "L29mY2QvbG9nX2Zsb29y");
	check_member(r, "success.0.request_range.revision", NULL);
	check_member(r, "success.1.request_range.key", "L29mY2QvbG9nLw==");
	check_member(r, "success.1.request_range.range_end", "L29mY2QvbG9nMA==");
	check_member(r, "success.1.request_range.min_mod_revision", "5");
	check_member(r, "success.1.request_range.limit", "64");
	check_member(r, "success.1.request_range.revision", NULL);
	free(r);
	r = etcd_req_log_read("/ofcd/log_floor", "/ofcd/log/", "/ofcd/log/1", 5, 40, 64);
	check_member(r, "success.0.request_range.revision", "40");
	check_member(r, "success.1.request_range.key", "L29mY2QvbG9nLzEA"); /* "/ofcd/log/1\0" */
	check_member(r, "success.1.request_range.range_end", "L29mY2QvbG9nMA==");
	check_member(r, "success.1.request_range.revision", "40");
	free(r);

	r = etcd_req_put("/ofcd/members/a", "xy", 2, 7);
	check_member(r, "key", "L29mY2QvbWVtYmVycy9h");
	check_member(r, "lease", "7");
	free(r);

	r = etcd_req_delete_guarded("/ofcd/leader", 12);
	check_member(r, "compare.0.create_revision", "12");
	check_member(r, "success.0.request_delete_range.key", "L29mY2QvbGVhZGVy");
	free(r);

	r = etcd_req_lease_grant(5);
	check_member(r, "TTL", "5");
	free(r);
	r = etcd_req_lease_id(-3);
	check_member(r, "ID", "-3");
	free(r);
	r = etcd_req_watch("/ofcd/log/", true, 9);
	check_member(r, "create_request.range_end", "L29mY2QvbG9nMA==");
	check_member(r, "create_request.start_revision", "9");
	free(r);
	/* A prefix of 0xff bytes has no successor: the range runs to the end. */
	r = etcd_req_range("\xff", true, 0);
	check_member(r, "range_end", "AA==");
	free(r);
}

static int parse(const char *body, struct etcd_result *out)
{
	memset(out, 0, sizeof(*out));
	return etcd_parse(body, strlen(body), out);
}

#define HDR                                                                                        \
	"\"header\":{\"cluster_id\":\"1\",\"member_id\":\"2\",\"revision\":\"2\",\"raft_term\":"   \
	"\"2\"}"

static void test_replies(void **state)
{
	(void)state;
	struct etcd_result res;

	assert_int_equal(parse("{" HDR ",\"ID\":\"4111120189691404037\",\"TTL\":\"5\"}", &res), 0);
	assert_int_equal(res.revision, 2);
	assert_int_equal(res.lease_id, 4111120189691404037);
	assert_int_equal(res.ttl, 5);
	etcd_result_free(&res);

	assert_int_equal(parse("{" HDR ",\"succeeded\":true,\"responses\":[{\"response_put\":"
	                       "{\"header\":{\"revision\":\"2\"}}}]}",
	                       &res),
	                 0);
	assert_true(res.succeeded);
	assert_int_equal(res.nkvs, 0);
	etcd_result_free(&res);

	/* A failed compare: "succeeded" is left out, the read-back names the holder. */
	assert_int_equal(
	    parse("{" HDR ",\"responses\":[{\"response_range\":{\"header\":{\"revision\":\"2\"},"
	          "\"kvs\":[{\"key\":\"L29mY2QvbGVhZGVy\",\"create_revision\":\"2\",\"mod_"
	          "revision\":\"3\",\"version\":\"1\",\"value\":\"YQ==\",\"lease\":"
	          "\"4111120189691404039\"}],\"count\":\"1\"}}]}",
	          &res),
	    0);
	assert_false(res.succeeded);
	assert_int_equal(res.nkvs, 1);
	assert_string_equal(res.kvs[0].key, "/ofcd/leader");
	assert_int_equal(res.kvs[0].value_len, 1);
	assert_string_equal((char *)res.kvs[0].value, "a");
	assert_int_equal(res.kvs[0].create_revision, 2);
	assert_int_equal(res.kvs[0].mod_revision, 3);
	assert_int_equal(res.kvs[0].lease, 4111120189691404039);
	assert_false(res.more);
	etcd_result_free(&res);

	/* A page of a longer range: more is set, in a txn's responses as in a range's reply. */
	assert_int_equal(parse("{" HDR ",\"succeeded\":true,\"responses\":[{\"response_range\":{"
	                       "\"header\":{},\"count\":\"1\"}},{\"response_range\":{\"header\":{},"
	                       "\"more\":true,\"count\":\"9\"}}]}",
	                       &res),
	                 0);
	assert_true(res.more);
	etcd_result_free(&res);
	assert_int_equal(parse("{" HDR ",\"more\":true,\"count\":\"9\"}", &res), 0);
	assert_true(res.more);
	etcd_result_free(&res);

	/* Keepalive of a lease that expired: TTL left out. */
	assert_int_equal(parse("{\"result\":{" HDR ",\"ID\":\"123\"}}", &res), 0);
	assert_int_equal(res.lease_id, 123);
	assert_int_equal(res.ttl, 0);
	etcd_result_free(&res);

	assert_int_equal(parse("{\"result\":{" HDR ",\"created\":true}}", &res), 0);
	assert_true(res.created);
	etcd_result_free(&res);

	assert_int_equal(parse("{\"result\":{" HDR ",\"events\":[{\"kv\":{\"key\":\"YQ==\","
	                       "\"value\":\"Yg==\",\"mod_revision\":\"4\"}},{\"type\":\"DELETE\","
	                       "\"kv\":{\"key\":\"YQ==\",\"mod_revision\":\"5\"}}]}}",
	                       &res),
	                 0);
	assert_int_equal(res.nkvs, 2);
	assert_false(res.kvs[0].deleted);
	assert_string_equal((char *)res.kvs[0].value, "b");
	assert_true(res.kvs[1].deleted);
	assert_int_equal(res.kvs[1].value_len, 0);
	assert_int_equal(res.kvs[1].mod_revision, 5);
	etcd_result_free(&res);

	assert_int_equal(
	    parse("{\"result\":{" HDR ",\"canceled\":true,\"compact_revision\":\"9\"}}", &res), 0);
	assert_true(res.canceled);
	assert_int_equal(res.compact_revision, 9);
	etcd_result_free(&res);

	assert_int_equal(parse("{\"error\":\"illegal base64 data at input byte 0\",\"message\":"
	                       "\"illegal base64 data at input byte 0\",\"code\":3}",
	                       &res),
	                 -EIO);
	assert_string_equal(res.error, "illegal base64 data at input byte 0");
	etcd_result_free(&res);

	static const char *bad[] = {
		"",
		"[]",
		"{\"kvs\":[]}", /* no header */
		"{" HDR ",\"ID\":\"12x\"}",
		"{" HDR ",\"succeeded\":\"yes\"}",
		"{" HDR ",\"kvs\":[{\"key\":\"!!\"}]}",
		"{" HDR ",\"kvs\":{}}",
		"{\"result\":{" HDR ",\"events\":[{\"type\":\"BOTH\",\"kv\":{}}]}}",
		"{\"result\":[]}",
	};
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		if (parse(bad[i], &res) != -EPROTO)
			fail_msg("case %zu accepted: %s", i, bad[i]);
		etcd_result_free(&res);
	}
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_b64),
		cmocka_unit_test(test_requests),
		cmocka_unit_test(test_replies),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
