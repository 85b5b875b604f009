/*
 * What etcd's v3 JSON gateway sends a cluster member: replies to ranges,
 * txns, lease grants and keepalives, and the lines of a watch stream, through
 * etcd_parse() as etcd.c parses them, and base64 as the gateway encodes keys
 * and values. Input: bodies separated by NUL bytes (a watch stream's lines).
 *
 * A parsed reply keeps its promises: every key a NUL-terminated string, every
 * value NUL-terminated after its length, a refusal says why or leaves the
 * result empty; base64 that decodes encodes back to the same text (up to
 * padding), and anything encoded decodes back to itself.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cluster/etcd_proto.h"
#include "fuzz.h"
#include "log.h"

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
	(void)argc;
	(void)argv;
	log_set_level(LOG_LVL_ERROR);
	return 0;
}

static void check(bool ok, const char *what)
{
	if (!ok) {
		fprintf(stderr, "fuzz_etcd: %s\n", what);
		abort();
	}
}

static void one_reply(const char *body, size_t len)
{
	struct etcd_result res;
	memset(&res, 0, sizeof(res));
	int rc = etcd_parse(body, len, &res);
	check(rc == 0 || rc == -EIO || rc == -EPROTO || rc == -ENOMEM, "an unexpected error");
	if (rc == -EIO)
		check(res.error[0] != '\0', "an error reply without its message");
	if (rc == 0) {
		check(res.nkvs == 0 || res.kvs, "key-value pairs counted but absent");
		for (size_t i = 0; i < res.nkvs; i++) {
			check(res.kvs[i].key != NULL, "a pair without its key");
			check(strlen(res.kvs[i].key) < 1u << 20, "a key without its end");
			check(!res.kvs[i].value || res.kvs[i].value[res.kvs[i].value_len] == '\0',
			      "a value not NUL-terminated");
		}
	}
	etcd_result_free(&res);
	check(res.kvs == NULL && res.nkvs == 0, "a result not emptied");
}

static void base64(const uint8_t *data, size_t size)
{
	char *text = malloc(size + 1);
	unsigned char *raw = NULL;
	size_t n = 0;
	if (!text)
		return;
	memcpy(text, data, size);
	text[size] = '\0';
	/* Whatever the gateway might send as a key or value. */
	if (etcd_b64_decode(text, &raw, &n) == 0) {
		char *again = etcd_b64_encode(raw, n);
		unsigned char *back = NULL;
		size_t m = 0;
		check(again && etcd_b64_decode(again, &back, &m) == 0 && m == n &&
		          (n == 0 || memcmp(back, raw, n) == 0),
		      "decoded base64 does not encode back to itself");
		free(back);
		free(again);
	}
	free(raw);
	/* And whatever a member puts into etcd. */
	char *enc = etcd_b64_encode(data, size);
	unsigned char *dec = NULL;
	size_t k = 0;
	check(enc && etcd_b64_decode(enc, &dec, &k) == 0 && k == size &&
	          (size == 0 || memcmp(dec, data, size) == 0),
	      "encoded bytes do not decode back");
	free(dec);
	free(enc);
	free(text);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	const char *p = (const char *)data, *end = p + size;
	while (p <= end) {
		const char *nul = memchr(p, '\0', (size_t)(end - p));
		size_t len = nul ? (size_t)(nul - p) : (size_t)(end - p);
		one_reply(p, len);
		p += len + 1;
	}
	base64(data, size);
	return 0;
}
