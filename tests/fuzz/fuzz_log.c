/*
 * The framing of the replicated log as a follower meets it (log_part.h,
 * log_bundle.h): entries that are parts of a large change or whole changes,
 * put back together as replica.c does, each whole change then parsed as a
 * bundle of changesets. Input: entries, each a 2-byte big-endian length and
 * its bytes.
 *
 * Parts are accepted only in order and whole: a completed change is exactly
 * its slices; whatever a bundle parses to lies inside it, and a bundle made
 * from what was parsed parses to the same changesets again.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cluster/log_bundle.h"
#include "cluster/log_part.h"
#include "fuzz.h"

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
	(void)argc;
	(void)argv;
	return 0;
}

static void check(bool ok, const char *what)
{
	if (!ok) {
		fprintf(stderr, "fuzz_log: %s\n", what);
		abort();
	}
}

static void bundle(const uint8_t *change, size_t len)
{
	struct log_changeset v[LOG_BUNDLE_MAX], w[LOG_BUNDLE_MAX];
	int n = log_bundle_parse(change, len, v, LOG_BUNDLE_MAX);
	check(n == -EPROTO || (n >= 0 && n <= LOG_BUNDLE_MAX), "a count out of range");
	if (n < 0)
		return;
	for (int i = 0; i < n; i++)
		check((const uint8_t *)v[i].data >= change &&
		          (const uint8_t *)v[i].data + v[i].len <= change + len,
		      "a changeset outside its change");
	size_t again_len;
	void *again = log_bundle_make(v, (size_t)n, &again_len);
	if (!again)
		return;
	check(log_bundle_parse(again, again_len, w, LOG_BUNDLE_MAX) == n,
	      "a remade bundle differs");
	for (int i = 0; i < n; i++)
		check(w[i].kind == v[i].kind && w[i].len == v[i].len &&
		          (v[i].len == 0 || memcmp(w[i].data, v[i].data, v[i].len) == 0),
		      "a remade changeset differs");
	free(again);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct log_part_buf parts = { 0 };
	size_t expected = 0; /* bytes of slices accepted for the change under way */
	while (size >= 2) {
		size_t len = (size_t)data[0] << 8 | data[1];
		data += 2;
		size -= 2;
		if (len > size)
			len = size;
		uint32_t index, count;
		const void *slice;
		size_t n;
		if (!log_part_parse(data, len, &index, &count, &slice, &n)) {
			log_part_reset(&parts);
			expected = 0;
			bundle(data, len);
		} else {
			check(index < count && n == len - LOG_PART_HEADER,
			      "a part's header misread");
			uint32_t before = parts.next;
			int rc = log_part_add(&parts, index, count, slice, n);
			check(rc == 1 || rc == 0 || rc == -EPROTO || rc == -ENOMEM,
			      "an unexpected answer");
			if (index == 0)
				expected = 0; /* a new change: whatever was under way is dropped */
			if (rc == -EPROTO) {
				expected = 0;
			} else if (rc >= 0) {
				check(index == 0 || index == before,
				      "a part out of order accepted");
				expected += n;
				check(parts.len == expected, "slices lost or doubled");
			}
			if (rc == 1) {
				bundle(parts.data, parts.len);
				log_part_reset(&parts);
				expected = 0;
			}
		}
		data += len;
		size -= len;
	}
	log_part_reset(&parts);
	return 0;
}
