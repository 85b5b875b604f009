/*
 * OpenFlow 1.3 codec against hand-built byte vectors. The expected bytes are
 * written field by field from the layouts of the OpenFlow Switch
 * Specification 1.3.x, appendix A, not produced by the encoder. The vectors
 * keep one wire field group per line, so clang-format leaves them alone.
 */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "of13.h"

/* clang-format off */
static const uint8_t hello[] = {
	0x04, 0x00, 0x00, 0x10, 0x00, 0x00, 0x00, 0x01,	/* HELLO, 16 bytes, xid 1 */
	0x00, 0x01, 0x00, 0x08,					/* VERSIONBITMAP, length 8 */
	0x00, 0x00, 0x00, 0x10,					/* bit 4: version 0x04 */
};

static const uint8_t flow_add[] = {
	0x04, 0x0e, 0x00, 0x58, 0x00, 0x00, 0x00, 0x07,	/* FLOW_MOD, 88 bytes, xid 7 */
	0x0f, 0xcd, 0x00, 0x00, 0x03, 0x00, 0x00, 0x07,	/* cookie: ofcd, circuit 3-7 */
	0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00,	/* cookie_mask */
	0x00, 0x00,						/* table 0, OFPFC_ADD */
	0x00, 0x00, 0x00, 0x00,					/* idle, hard timeout */
	0x03, 0xe8,						/* priority 1000 */
	0xff, 0xff, 0xff, 0xff,					/* buffer_id NO_BUFFER */
	0xff, 0xff, 0xff, 0xff,					/* out_port ANY */
	0xff, 0xff, 0xff, 0xff,					/* out_group ANY */
	0x00, 0x00, 0x00, 0x00,					/* flags, pad */
	0x00, 0x01, 0x00, 0x0c,					/* match OXM, length 12 */
	0x80, 0x00, 0x00, 0x04,					/* OXM in_port, 4 bytes */
	0x00, 0x00, 0x00, 0x03,					/* in_port 3 */
	0x00, 0x00, 0x00, 0x00,					/* match padding */
	0x00, 0x04, 0x00, 0x18, 0x00, 0x00, 0x00, 0x00,	/* APPLY_ACTIONS, 24 bytes */
	0x00, 0x00, 0x00, 0x10,					/* OUTPUT, 16 bytes */
	0x00, 0x00, 0x00, 0x07,					/* port 7 */
	0xff, 0xff, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00,	/* max_len NO_BUFFER, pad */
};

static const uint8_t flow_del_strict[] = {
	0x04, 0x0e, 0x00, 0x40, 0x00, 0x00, 0x00, 0x08,	/* FLOW_MOD, 64 bytes, xid 8 */
	0x0f, 0xcd, 0x00, 0x00, 0x03, 0x00, 0x00, 0x07,	/* cookie: ofcd, circuit 3-7 */
	0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff,	/* cookie_mask: all bits */
	0x00, 0x04,						/* table 0, OFPFC_DELETE_STRICT */
	0x00, 0x00, 0x00, 0x00,					/* idle, hard timeout */
	0x03, 0xe8,						/* priority 1000 */
	0xff, 0xff, 0xff, 0xff,					/* buffer_id NO_BUFFER */
	0xff, 0xff, 0xff, 0xff,					/* out_port ANY */
	0xff, 0xff, 0xff, 0xff,					/* out_group ANY */
	0x00, 0x00, 0x00, 0x00,					/* flags, pad */
	0x00, 0x01, 0x00, 0x0c,					/* match OXM, length 12 */
	0x80, 0x00, 0x00, 0x04,					/* OXM in_port, 4 bytes */
	0x00, 0x00, 0x00, 0x07,					/* in_port 7 */
	0x00, 0x00, 0x00, 0x00,					/* match padding */
};

static const uint8_t flow_stats_request[] = {
	0x04, 0x12, 0x00, 0x38, 0x00, 0x00, 0x00, 0x09,	/* MULTIPART_REQUEST, 56, xid 9 */
	0x00, 0x01, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00,	/* OFPMP_FLOW, flags 0, pad */
	0xff, 0x00, 0x00, 0x00,					/* table ALL, pad */
	0xff, 0xff, 0xff, 0xff,					/* out_port ANY */
	0xff, 0xff, 0xff, 0xff,					/* out_group ANY */
	0x00, 0x00, 0x00, 0x00,					/* pad */
	0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00,	/* cookie */
	0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00,	/* cookie_mask */
	0x00, 0x01, 0x00, 0x04, 0x00, 0x00, 0x00, 0x00,	/* empty OXM match, padded */
};

/* A circuit half 3 -> 7, then a table-miss style flow to CONTROLLER in table 2. */
static const uint8_t flow_stats_reply[] = {
	0x04, 0x13, 0x00, 0xb8, 0x00, 0x00, 0x00, 0x09,	/* MULTIPART_REPLY, 184 bytes, xid 9 */
	0x00, 0x01, 0x00, 0x01, 0x00, 0x00, 0x00, 0x00,	/* OFPMP_FLOW, REPLY_MORE, pad */
	/* entry 1 at 16: 48 fixed + 16 match + 24 instructions = 88 bytes */
	0x00, 0x58, 0x00, 0x00,					/* length, table 0, pad */
	0x00, 0x00, 0x00, 0x0a, 0x00, 0x00, 0x00, 0x00,	/* duration */
	0x03, 0xe8, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00,	/* priority 1000, timeouts, flags */
	0x00, 0x00, 0x00, 0x00,					/* pad */
	0x0f, 0xcd, 0x00, 0x00, 0x03, 0x00, 0x00, 0x07,	/* cookie */
	0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x05,	/* packet_count */
	0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x01, 0x00,	/* byte_count */
	0x00, 0x01, 0x00, 0x0c, 0x80, 0x00, 0x00, 0x04,	/* match at 64: in_port */
	0x00, 0x00, 0x00, 0x03, 0x00, 0x00, 0x00, 0x00,	/* 3, padding */
	0x00, 0x04, 0x00, 0x18, 0x00, 0x00, 0x00, 0x00,	/* APPLY_ACTIONS at 80 */
	0x00, 0x00, 0x00, 0x10, 0x00, 0x00, 0x00, 0x07,	/* OUTPUT at 88: port 7 */
	0xff, 0xff, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00,
	/* entry 2 at 104: 48 fixed + 8 match + 24 instructions = 80 bytes */
	0x00, 0x50, 0x02, 0x00,					/* length, table 2, pad */
	0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00,	/* duration */
	0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00,	/* priority 0, timeouts, flags */
	0x00, 0x00, 0x00, 0x00,					/* pad */
	0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00,	/* cookie 0 */
	0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00,	/* packet_count */
	0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00,	/* byte_count */
	0x00, 0x01, 0x00, 0x04, 0x00, 0x00, 0x00, 0x00,	/* empty match */
	0x00, 0x04, 0x00, 0x18, 0x00, 0x00, 0x00, 0x00,	/* APPLY_ACTIONS */
	0x00, 0x00, 0x00, 0x10, 0xff, 0xff, 0xff, 0xfd,	/* OUTPUT CONTROLLER */
	0xff, 0xff, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00,
};

static const uint8_t port_status[] = {
	0x04, 0x0c, 0x00, 0x50, 0x00, 0x00, 0x00, 0x00,	/* PORT_STATUS, 80 bytes */
	0x02, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00,	/* OFPPR_MODIFY, pad */
	0x00, 0x00, 0x00, 0x05, 0x00, 0x00, 0x00, 0x00,	/* port 5, pad */
	0x02, 0x00, 0x00, 0x00, 0x00, 0x05, 0x00, 0x00,	/* hw_addr, pad */
	'p',  '5',  0x00, 0x00, 0x00, 0x00, 0x00, 0x00,	/* name */
	0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00,
	0x00, 0x00, 0x00, 0x01,					/* config PORT_DOWN */
	0x00, 0x00, 0x00, 0x04,					/* state LIVE */
	0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00,	/* curr, advertised */
	0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00,	/* supported, peer */
	0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00,	/* curr_speed, max_speed */
};

static const uint8_t error_msg[] = {
	0x04, 0x01, 0x00, 0x14, 0x00, 0x00, 0x00, 0x2a,	/* ERROR, 20 bytes, xid 42 */
	0x00, 0x05, 0x00, 0x01,					/* FLOW_MOD_FAILED/TABLE_FULL */
	0x04, 0x0e, 0x00, 0x58, 0x00, 0x00, 0x00, 0x2a,	/* start of the failed request */
};

static const uint8_t features_reply[] = {
	0x04, 0x06, 0x00, 0x20, 0x00, 0x00, 0x00, 0x02,	/* FEATURES_REPLY, 32 bytes */
	0x00, 0x00, 0x12, 0x34, 0x56, 0x78, 0x9a, 0xbc,	/* datapath_id */
	0x00, 0x00, 0x01, 0x00,					/* n_buffers 256 */
	0xfe, 0x00, 0x00, 0x00,					/* n_tables, aux id, pad */
	0x00, 0x00, 0x00, 0x4f,					/* capabilities */
	0x00, 0x00, 0x00, 0x00,					/* reserved */
};

static const uint8_t hello_bitmap[] = {
	0x06, 0x00, 0x00, 0x10, 0x00, 0x00, 0x00, 0x01,	/* HELLO version 1.5 */
	0x00, 0x01, 0x00, 0x08, 0x00, 0x00, 0x00, 0x52,	/* bitmap: 1.0, 1.3, 1.5 */
};

static const uint8_t hello_plain[] = {
	0x05, 0x00, 0x00, 0x08, 0x00, 0x00, 0x00, 0x01,	/* HELLO version 1.4, no elements */
};

static const uint8_t hello_bad[] = {
	0x04, 0x00, 0x00, 0x10, 0x00, 0x00, 0x00, 0x01,
	0x00, 0x01, 0x00, 0x40, 0x00, 0x00, 0x00, 0x10,	/* element past the message */
};
/* clang-format on */

static void test_hello(void **state)
{
	uint8_t buf[64];

	(void)state;
	assert_int_equal(of13_encode_hello(buf, sizeof(buf), 1), sizeof(hello));
	assert_int_equal(sizeof(hello), OF13_HELLO_LEN);
	assert_memory_equal(buf, hello, sizeof(hello));
	assert_int_equal(of13_encode_hello(buf, 15, 1), -ENOSPC);
}

static void test_simple_messages(void **state)
{
	static const uint8_t features[] = { 0x04, 0x05, 0x00, 0x08, 0x00, 0x00, 0x00, 0x02 };
	static const uint8_t barrier[] = { 0x04, 0x14, 0x00, 0x08, 0x00, 0x00, 0x12, 0x34 };
	static const uint8_t echo[] = { 0x04, 0x03, 0x00, 0x0b, 0xde, 0xad,
		                        0xbe, 0xef, 'a',  'b',  'c' };
	static const uint8_t err[] = { 0x04, 0x01, 0x00, 0x0e, 0x00, 0x00, 0x00,
		                       0x05, 0x00, 0x00, 0x00, 0x00, 'x',  'y' };
	uint8_t buf[64];

	(void)state;
	assert_int_equal(of13_encode_msg(buf, sizeof(buf), OF13_T_FEATURES_REQUEST, 2, NULL, 0), 8);
	assert_memory_equal(buf, features, 8);
	assert_int_equal(of13_encode_msg(buf, sizeof(buf), OF13_T_BARRIER_REQUEST, 0x1234, NULL, 0),
	                 8);
	assert_memory_equal(buf, barrier, 8);
	assert_int_equal(of13_encode_msg(buf, sizeof(buf), OF13_T_ECHO_REPLY, 0xdeadbeef, "abc", 3),
	                 sizeof(echo));
	assert_memory_equal(buf, echo, sizeof(echo));
	assert_int_equal(of13_encode_error(buf, sizeof(buf), 5, OF13_ET_HELLO_FAILED,
	                                   OF13_HFC_INCOMPATIBLE, "xy", 2),
	                 sizeof(err));
	assert_memory_equal(buf, err, sizeof(err));
	assert_int_equal(of13_encode_header(buf, sizeof(buf), OF13_T_BARRIER_REQUEST, 8, 0x1234),
	                 8);
	assert_memory_equal(buf, barrier, 8);
	assert_int_equal(of13_encode_header(buf, sizeof(buf), OF13_T_ECHO_REPLY, 7, 1), -EINVAL);
	assert_int_equal(of13_encode_msg(buf, 7, OF13_T_BARRIER_REQUEST, 1, NULL, 0), -ENOSPC);
	assert_int_equal(of13_encode_msg(buf, sizeof(buf), OF13_T_ECHO_REPLY, 1, buf, 65535 - 7),
	                 -EMSGSIZE);
}

static void test_flow_add(void **state)
{
	struct of13_flow f = {
		.table_id = 0,
		.priority = 1000,
		.cookie = 0x0fcd000003000007ull,
		.cookie_mask = ~0ull, /* ignored by ADD */
		.in_port = 3,
		.out_port = 7,
	};
	uint8_t buf[128];

	(void)state;
	assert_int_equal(sizeof(flow_add), OF13_FLOW_ADD_LEN);
	assert_int_equal(of13_encode_flow_add(buf, sizeof(buf), 7, &f), sizeof(flow_add));
	assert_memory_equal(buf, flow_add, sizeof(flow_add));
	assert_int_equal(of13_encode_flow_add(buf, OF13_FLOW_ADD_LEN - 1, 7, &f), -ENOSPC);
}

static void test_flow_del_strict(void **state)
{
	struct of13_flow f = {
		.priority = 1000,
		.cookie = 0x0fcd000003000007ull,
		.cookie_mask = ~0ull,
		.in_port = 7,
		.out_port = 3, /* ignored by DELETE_STRICT */
	};
	uint8_t buf[128];

	(void)state;
	assert_int_equal(sizeof(flow_del_strict), OF13_FLOW_DEL_LEN);
	assert_int_equal(of13_encode_flow_del_strict(buf, sizeof(buf), 8, &f),
	                 sizeof(flow_del_strict));
	assert_memory_equal(buf, flow_del_strict, sizeof(flow_del_strict));
	assert_int_equal(of13_encode_flow_del_strict(buf, OF13_FLOW_DEL_LEN - 1, 8, &f), -ENOSPC);
}

static void test_flow_stats_request(void **state)
{
	uint8_t buf[128];

	(void)state;
	assert_int_equal(sizeof(flow_stats_request), OF13_FLOW_STATS_REQUEST_LEN);
	assert_int_equal(of13_encode_flow_stats_request(buf, sizeof(buf), 9),
	                 sizeof(flow_stats_request));
	assert_memory_equal(buf, flow_stats_request, sizeof(flow_stats_request));
	assert_int_equal(of13_encode_flow_stats_request(buf, sizeof(flow_stats_request) - 1, 9),
	                 -ENOSPC);
}

static void test_flow_stats_reply(void **state)
{
	struct of13_hdr h;
	struct of13_multipart mp;
	struct of13_flow_iter it;
	struct of13_flow_stats fs;

	(void)state;
	assert_int_equal(of13_decode_header(flow_stats_reply, sizeof(flow_stats_reply), &h), 0);
	assert_int_equal(h.version, 4);
	assert_int_equal(h.type, OF13_T_MULTIPART_REPLY);
	assert_int_equal(h.length, sizeof(flow_stats_reply));
	assert_int_equal(h.xid, 9);
	assert_int_equal(
	    of13_decode_multipart_reply(flow_stats_reply, sizeof(flow_stats_reply), &mp), 0);
	assert_int_equal(mp.type, OF13_MP_FLOW);
	assert_int_equal(mp.flags, OF13_MPF_REPLY_MORE);
	assert_int_equal(mp.body_len, 88 + 80);

	of13_flow_stats_iter(&it, mp.body, mp.body_len);
	assert_int_equal(of13_flow_stats_next(&it, &fs), 1);
	assert_int_equal(fs.table_id, 0);
	assert_int_equal(fs.priority, 1000);
	assert_true(fs.cookie == 0x0fcd000003000007ull);
	assert_int_equal(fs.in_port, 3);
	assert_false(fs.other_match);
	assert_int_equal(fs.out_port, 7);
	assert_int_equal(fs.n_outputs, 1);
	assert_false(fs.other_instr);

	assert_int_equal(of13_flow_stats_next(&it, &fs), 1);
	assert_int_equal(fs.table_id, 2);
	assert_int_equal(fs.priority, 0);
	assert_true(fs.cookie == 0);
	assert_int_equal(fs.in_port, 0);
	assert_false(fs.other_match);
	assert_int_equal(fs.out_port, 0xfffffffd);
	assert_int_equal(fs.n_outputs, 1);

	assert_int_equal(of13_flow_stats_next(&it, &fs), 0);
}

static void test_flow_stats_shapes(void **state)
{
	uint8_t msg[sizeof(flow_stats_reply)];
	struct of13_multipart mp;
	struct of13_flow_iter it;
	struct of13_flow_stats fs;

	(void)state;
	/* entry 1 with a masked in_port (value 3, mask 0 from the padding): other_match */
	memcpy(msg, flow_stats_reply, sizeof(msg));
	msg[64 + 3] = 0x10; /* match length 16 */
	msg[64 + 6] = 0x01; /* OXM in_port, hasmask */
	msg[64 + 7] = 0x08; /* 8 bytes: value and mask */
	assert_int_equal(of13_decode_multipart_reply(msg, sizeof(msg), &mp), 0);
	of13_flow_stats_iter(&it, mp.body, mp.body_len);
	assert_int_equal(of13_flow_stats_next(&it, &fs), 1);
	assert_int_equal(fs.in_port, 0);
	assert_true(fs.other_match);
	assert_int_equal(fs.out_port, 7);

	/* entry 1 with WRITE_ACTIONS in place of APPLY_ACTIONS: other_instr, no output */
	memcpy(msg, flow_stats_reply, sizeof(msg));
	msg[80 + 1] = 0x03;
	assert_int_equal(of13_decode_multipart_reply(msg, sizeof(msg), &mp), 0);
	of13_flow_stats_iter(&it, mp.body, mp.body_len);
	assert_int_equal(of13_flow_stats_next(&it, &fs), 1);
	assert_int_equal(fs.in_port, 3);
	assert_true(fs.other_instr);
	assert_int_equal(fs.n_outputs, 0);
	assert_int_equal(fs.out_port, 0);
}

/* A flow that copies to several ports keeps every output: isolation is judged per pair. */
static void test_flow_stats_outputs(void **state)
{
	uint8_t msg[16 + 88 + 16];
	static const uint8_t second[16] = { 0x00, 0x00, 0x00, 0x10, 0x00, 0x00, 0x00, 0x09,
		                            0xff, 0xff, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00 };
	struct of13_multipart mp;
	struct of13_flow_iter it;
	struct of13_flow_stats fs;

	(void)state;
	memcpy(msg, flow_stats_reply, 16 + 88);
	memcpy(msg + 16 + 88, second, sizeof(second));
	msg[3] = sizeof(msg);    /* message length */
	msg[16 + 1] = 88 + 16;   /* entry length */
	msg[80 + 3] = 0x18 + 16; /* APPLY_ACTIONS length: two OUTPUT actions */
	assert_int_equal(of13_decode_multipart_reply(msg, sizeof(msg), &mp), 0);
	of13_flow_stats_iter(&it, mp.body, mp.body_len);
	assert_int_equal(of13_flow_stats_next(&it, &fs), 1);
	assert_int_equal(fs.in_port, 3);
	assert_int_equal(fs.n_outputs, 2);
	assert_int_equal(fs.outputs[0], 7);
	assert_int_equal(fs.outputs[1], 9);
	assert_int_equal(fs.out_port, 7);
	assert_int_equal(of13_flow_stats_next(&it, &fs), 0);
}

static void test_flow_stats_malformed(void **state)
{
	static const struct {
		size_t off;
		uint8_t val;
	} bad[] = {
		{ 16 + 1, 0xb0 }, /* entry length past the body */
		{ 16 + 1, 0x08 }, /* entry length below the fixed part */
		{ 64 + 1, 0x02 }, /* match type STANDARD */
		{ 64 + 3, 0x40 }, /* match length past the entry */
		{ 64 + 7, 0x40 }, /* OXM length past the match */
		{ 80 + 3, 0x14 }, /* instruction length not a multiple of 8 */
		{ 80 + 3, 0x40 }, /* instruction length past the entry */
		{ 88 + 3, 0x08 }, /* output action shorter than 16 */
		{ 88 + 3, 0x18 }, /* action length past the instruction */
	};
	uint8_t msg[sizeof(flow_stats_reply)];
	struct of13_multipart mp;
	struct of13_flow_iter it;
	struct of13_flow_stats fs;
	size_t i;

	(void)state;
	for (i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		memcpy(msg, flow_stats_reply, sizeof(msg));
		msg[bad[i].off] = bad[i].val;
		assert_int_equal(of13_decode_multipart_reply(msg, sizeof(msg), &mp), 0);
		of13_flow_stats_iter(&it, mp.body, mp.body_len);
		assert_int_equal(of13_flow_stats_next(&it, &fs), -EBADMSG);
	}
	/* a body that ends inside an entry */
	of13_flow_stats_iter(&it, flow_stats_reply + 16, 40);
	assert_int_equal(of13_flow_stats_next(&it, &fs), -EBADMSG);
	/* a reply shorter than the multipart header, or than its own length field */
	assert_int_equal(of13_decode_multipart_reply(flow_stats_reply, 12, &mp), -EBADMSG);
	assert_int_equal(of13_decode_multipart_reply(flow_stats_reply, 100, &mp), -EBADMSG);
}

static void test_port_status(void **state)
{
	struct of13_port_status ps;

	(void)state;
	assert_int_equal(of13_decode_port_status(port_status, sizeof(port_status), &ps), 0);
	assert_int_equal(ps.reason, OF13_PR_MODIFY);
	assert_int_equal(ps.port_no, 5);
	assert_string_equal(ps.name, "p5");
	assert_int_equal(ps.config, OF13_PC_PORT_DOWN);
	assert_int_equal(ps.state, 4);
	assert_int_equal(of13_decode_port_status(port_status, sizeof(port_status) - 1, &ps),
	                 -EBADMSG);
}

static void test_error(void **state)
{
	struct of13_error e;
	char buf[96];

	(void)state;
	assert_int_equal(of13_decode_error(error_msg, sizeof(error_msg), &e), 0);
	assert_int_equal(e.type, 5);
	assert_int_equal(e.code, 1);
	assert_int_equal(e.data_len, 8);
	assert_ptr_equal(e.data, error_msg + 12);
	assert_string_equal(of13_error_str(e.type, e.code, buf, sizeof(buf)),
	                    "OFPET_FLOW_MOD_FAILED(5)/OFPFMFC_TABLE_FULL(1)");
	assert_string_equal(of13_error_str(13, 99, buf, sizeof(buf)),
	                    "OFPET_TABLE_FEATURES_FAILED(13)/code(99)");
	assert_string_equal(of13_error_str(200, 1, buf, sizeof(buf)), "OFPET(200)/code(1)");
	assert_int_equal(of13_decode_error(error_msg, 11, &e), -EBADMSG);
}

static void test_features_and_hello(void **state)
{
	struct of13_features f;
	uint32_t versions;

	(void)state;
	assert_int_equal(of13_decode_features_reply(features_reply, sizeof(features_reply), &f), 0);
	assert_true(f.datapath_id == 0x123456789abcull);
	assert_int_equal(f.n_buffers, 256);
	assert_int_equal(f.n_tables, 254);
	assert_int_equal(f.capabilities, 0x4f);
	assert_int_equal(of13_decode_features_reply(features_reply, 24, &f), -EBADMSG);

	assert_int_equal(of13_decode_hello(hello, sizeof(hello), &versions), 0);
	assert_int_equal(versions, 0x10);
	assert_int_equal(of13_decode_hello(hello_bitmap, sizeof(hello_bitmap), &versions), 0);
	assert_int_equal(versions, 0x52);
	/* no bitmap: every version up to the header's, here 1.0 .. 1.4 */
	assert_int_equal(of13_decode_hello(hello_plain, sizeof(hello_plain), &versions), 0);
	assert_int_equal(versions, 0x3e);
	assert_int_equal(of13_decode_hello(hello_bad, sizeof(hello_bad), &versions), -EBADMSG);
}

/* Fencing: MASTER with a generation, as the spec lays it out; the reply read back. */
static void test_role(void **state)
{
	(void)state;
	static const uint8_t want[OF13_ROLE_LEN] = {
		0x04, 24,   0x00, 24,   0x00, 0x00, 0x00, 0x07, /* header, xid 7 */
		0x00, 0x00, 0x00, 0x02, 0x00, 0x00, 0x00, 0x00, /* MASTER, pad */
		0x00, 0x00, 0x00, 0x01, 0x00, 0x00, 0x00, 0x2a, /* generation_id */
	};
	uint8_t buf[64];
	uint32_t role;
	uint64_t gen;
	assert_int_equal(of13_encode_role_request(buf, sizeof(buf), 7, OF13_ROLE_MASTER,
	                                          ((uint64_t)1 << 32) | 42),
	                 OF13_ROLE_LEN);
	assert_memory_equal(buf, want, OF13_ROLE_LEN);
	assert_int_equal(of13_encode_role_request(buf, OF13_ROLE_LEN - 1, 7, OF13_ROLE_MASTER, 1),
	                 -ENOSPC);

	uint8_t reply[OF13_ROLE_LEN];
	memcpy(reply, want, sizeof(reply));
	reply[1] = OF13_T_ROLE_REPLY;
	reply[11] = OF13_ROLE_SLAVE;
	assert_int_equal(of13_decode_role_reply(reply, sizeof(reply), &role, &gen), 0);
	assert_int_equal(role, OF13_ROLE_SLAVE);
	assert_true(gen == (((uint64_t)1 << 32) | 42));
	reply[3] = 16; /* shorter than a role reply */
	assert_int_equal(of13_decode_role_reply(reply, sizeof(reply), &role, &gen), -EBADMSG);
}

/*
 * What a fenced controller hears: ROLE_STATUS (ONF extension 1911 in 1.3, as
 * Open vSwitch sends it to a demoted master), and the errors' numbers.
 */
static void test_role_status(void **state)
{
	(void)state;
	static const uint8_t role_status[] = {
		0x04, 0x04, 0x00, 0x20, 0x00, 0x00, 0x00, 0x00, /* EXPERIMENTER, 32 bytes */
		0x4f, 0x4e, 0x46, 0x00, 0x00, 0x00, 0x07, 0x77, /* ONF, exp_type 1911 */
		0x00, 0x00, 0x00, 0x03, 0x00, 0x00, 0x00, 0x00, /* SLAVE, MASTER_REQUEST, pad */
		0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x06, /* generation_id 6 */
	};
	uint8_t buf[OF13_ROLE_STATUS_LEN];
	struct of13_role_status rs;
	char name[96];

	assert_int_equal(sizeof(role_status), OF13_ROLE_STATUS_LEN);
	assert_int_equal(of13_decode_role_status(role_status, sizeof(role_status), &rs), 0);
	assert_int_equal(rs.role, OF13_ROLE_SLAVE);
	assert_int_equal(rs.reason, OF13_CRR_MASTER_REQUEST);
	assert_true(rs.generation_id == 6);
	/* another experimenter's message, or another ONF one: not ours to judge */
	memcpy(buf, role_status, sizeof(buf));
	buf[11] = 0x01;
	assert_int_equal(of13_decode_role_status(buf, sizeof(buf), &rs), -ENOMSG);
	memcpy(buf, role_status, sizeof(buf));
	buf[15] = 0x78;
	assert_int_equal(of13_decode_role_status(buf, sizeof(buf), &rs), -ENOMSG);
	/* ours but cut short, or longer than the bytes given */
	memcpy(buf, role_status, sizeof(buf));
	buf[3] = 24;
	assert_int_equal(of13_decode_role_status(buf, sizeof(buf), &rs), -EBADMSG);
	assert_int_equal(of13_decode_role_status(role_status, sizeof(role_status) - 1, &rs),
	                 -EBADMSG);
	assert_int_equal(of13_decode_role_status(role_status, 12, &rs), -EBADMSG);

	assert_string_equal(
	    of13_error_str(OF13_ET_ROLE_REQUEST_FAILED, OF13_RRFC_STALE, name, sizeof(name)),
	    "OFPET_ROLE_REQUEST_FAILED(11)/OFPRRFC_STALE(0)");
	assert_string_equal(
	    of13_error_str(OF13_ET_BAD_REQUEST, OF13_BRC_IS_SLAVE, name, sizeof(name)),
	    "OFPET_BAD_REQUEST(1)/OFPBRC_IS_SLAVE(10)");
	assert_string_equal(
	    of13_error_str(OF13_ET_ROLE_REQUEST_FAILED, OF13_RRFC_BAD_ROLE, name, sizeof(name)),
	    "OFPET_ROLE_REQUEST_FAILED(11)/OFPRRFC_BAD_ROLE(2)");
}

static void test_header_malformed(void **state)
{
	static const uint8_t short_len[] = { 0x04, 0x02, 0x00, 0x07, 0x00, 0x00, 0x00, 0x01 };
	struct of13_hdr h;

	(void)state;
	assert_int_equal(of13_decode_header(short_len, sizeof(short_len), &h), -EBADMSG);
	assert_int_equal(of13_decode_header(short_len, 7, &h), -EAGAIN);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_hello),
		cmocka_unit_test(test_simple_messages),
		cmocka_unit_test(test_flow_add),
		cmocka_unit_test(test_flow_del_strict),
		cmocka_unit_test(test_flow_stats_request),
		cmocka_unit_test(test_flow_stats_reply),
		cmocka_unit_test(test_flow_stats_shapes),
		cmocka_unit_test(test_flow_stats_outputs),
		cmocka_unit_test(test_flow_stats_malformed),
		cmocka_unit_test(test_port_status),
		cmocka_unit_test(test_error),
		cmocka_unit_test(test_features_and_hello),
		cmocka_unit_test(test_header_malformed),
		cmocka_unit_test(test_role),
		cmocka_unit_test(test_role_status),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
