/*
 * The OpenFlow 1.3 decoders on bytes as a switch might send them: the input
 * is cut into messages by their header's length (the last one may be cut
 * short), and each message, copied into a buffer of exactly its size so that
 * ASan sees any read past it, goes through every decoder, whatever its type,
 * with the message's own length and with one byte less. What a decoder
 * accepts must hold together: pointers inside the message, lengths that add
 * up, flow entries that end inside the body.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fuzz.h"
#include "of13.h"

static void check(bool ok, const char *what)
{
	if (!ok) {
		fprintf(stderr, "fuzz_of13: %s\n", what);
		abort();
	}
}

static void flow_stats(const struct of13_multipart *mp, const uint8_t *msg, size_t len)
{
	struct of13_flow_iter it;
	struct of13_flow_stats fs;
	int r;

	of13_flow_stats_iter(&it, mp->body, mp->body_len);
	while ((r = of13_flow_stats_next(&it, &fs)) == 1) {
		check(it.p >= msg && it.p + it.left == msg + len, "flow entry outside the body");
		check(!fs.n_outputs || fs.out_port == fs.outputs[0], "first output differs");
	}
	check(r == 0 || r == -EBADMSG, "flow_stats_next: unexpected return");
}

/* Every decoder on msg[0..len), a buffer of exactly len bytes. */
static void decode_all(const uint8_t *msg, size_t len)
{
	struct of13_hdr h;
	uint32_t versions;
	struct of13_features f;
	struct of13_error e;
	struct of13_port_status ps;
	struct of13_multipart mp;
	struct of13_role_status rs;
	uint32_t role;
	uint64_t generation;
	char buf[96], tiny[8];

	if (of13_decode_header(msg, len, &h) < 0)
		return;
	of13_decode_hello(msg, len, &versions);
	of13_decode_features_reply(msg, len, &f);
	if (of13_decode_error(msg, len, &e) == 0) {
		check((const uint8_t *)e.data + e.data_len == msg + h.length, "error data length");
		of13_error_str(e.type, e.code, buf, sizeof(buf));
		of13_error_str(e.type, e.code, tiny, sizeof(tiny));
	}
	of13_decode_role_reply(msg, len, &role, &generation);
	of13_decode_role_status(msg, len, &rs);
	if (of13_decode_port_status(msg, len, &ps) == 0)
		check(strlen(ps.name) <= 16, "port name unterminated");
	if (of13_decode_multipart_reply(msg, len, &mp) == 0) {
		check((const uint8_t *)mp.body + mp.body_len == msg + h.length, "multipart length");
		flow_stats(&mp, msg, h.length);
	}
}

static void decode_copy(const uint8_t *data, size_t len)
{
	uint8_t *msg = malloc(len ? len : 1);

	if (!msg)
		return;
	memcpy(msg, data, len);
	decode_all(msg, len);
	free(msg);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct of13_hdr h;

	while (size >= OF13_HDR_LEN) {
		if (of13_decode_header(data, size, &h) < 0)
			return 0;
		size_t len = h.length <= size ? h.length : size;
		decode_copy(data, len);
		decode_copy(data, len - 1);
		data += len;
		size -= len;
	}
	if (size)
		decode_copy(data, size);
	return 0;
}
