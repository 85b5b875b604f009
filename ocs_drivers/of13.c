/*
 * OpenFlow 1.3 message codec; see of13.h. Layouts follow the OpenFlow Switch
 * Specification 1.3.x, appendix A.
 */
#include "of13.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>

/* OXM header of an exact in_port match: class OPENFLOW_BASIC, field IN_PORT, 4 bytes. */
#define OXM_IN_PORT 0x80000004u

#define OFPMT_OXM            1
#define OFPIT_APPLY_ACTIONS  4
#define OFPAT_OUTPUT         0
#define OFPHET_VERSIONBITMAP 1
#define OFP_NO_BUFFER        0xffffffffu
#define OFPCML_NO_BUFFER     0xffff

/* Fixed parts of the messages, from the start of the message. */
#define FLOW_MOD_FIXED     48 /* ofp_flow_mod up to its match */
#define FLOW_STATS_FIXED   48 /* ofp_flow_stats up to its match */
#define MULTIPART_FIXED    16 /* header + type, flags, pad */
#define PORT_STATUS_LEN    80 /* header + reason, pad + ofp_port (64) */
#define FEATURES_REPLY_LEN 32
#define ERROR_FIXED        12
#define MATCH_IN_PORT_LEN  16 /* type, length (12), one OXM, padded to 8 */
#define APPLY_OUTPUT_LEN   24 /* apply-actions instruction holding one output action */

static inline void put8(uint8_t *p, uint8_t v)
{
	p[0] = v;
}

static inline void put16(uint8_t *p, uint16_t v)
{
	p[0] = (uint8_t)(v >> 8);
	p[1] = (uint8_t)v;
}

static inline void put32(uint8_t *p, uint32_t v)
{
	p[0] = (uint8_t)(v >> 24);
	p[1] = (uint8_t)(v >> 16);
	p[2] = (uint8_t)(v >> 8);
	p[3] = (uint8_t)v;
}

static inline void put64(uint8_t *p, uint64_t v)
{
	put32(p, (uint32_t)(v >> 32));
	put32(p + 4, (uint32_t)v);
}

static inline uint16_t get16(const uint8_t *p)
{
	return (uint16_t)(p[0] << 8 | p[1]);
}

static inline uint32_t get32(const uint8_t *p)
{
	return (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 | (uint32_t)p[2] << 8 | p[3];
}

static inline uint64_t get64(const uint8_t *p)
{
	return (uint64_t)get32(p) << 32 | get32(p + 4);
}

static void put_header(uint8_t *p, uint8_t type, uint16_t length, uint32_t xid)
{
	put8(p, OF13_VERSION);
	put8(p + 1, type);
	put16(p + 2, length);
	put32(p + 4, xid);
}

ssize_t of13_encode_hello(void *buf, size_t cap, uint32_t xid)
{
	uint8_t *p = buf;

	if (cap < OF13_HELLO_LEN)
		return -ENOSPC;
	put_header(p, OF13_T_HELLO, OF13_HELLO_LEN, xid);
	put16(p + 8, OFPHET_VERSIONBITMAP);
	put16(p + 10, 8);
	put32(p + 12, 1u << OF13_VERSION);
	return OF13_HELLO_LEN;
}

ssize_t of13_encode_role_request(void *buf, size_t cap, uint32_t xid, uint32_t role,
                                 uint64_t generation_id)
{
	uint8_t *p = buf;

	if (cap < OF13_ROLE_LEN)
		return -ENOSPC;
	memset(p, 0, OF13_ROLE_LEN);
	put_header(p, OF13_T_ROLE_REQUEST, OF13_ROLE_LEN, xid);
	put32(p + 8, role);
	put64(p + 16, generation_id);
	return OF13_ROLE_LEN;
}

ssize_t of13_encode_header(void *buf, size_t cap, uint8_t type, uint16_t length, uint32_t xid)
{
	if (length < OF13_HDR_LEN)
		return -EINVAL;
	if (cap < OF13_HDR_LEN)
		return -ENOSPC;
	put_header(buf, type, length, xid);
	return OF13_HDR_LEN;
}

ssize_t of13_encode_msg(void *buf, size_t cap, uint8_t type, uint32_t xid, const void *body,
                        size_t body_len)
{
	uint8_t *p = buf;
	size_t len = OF13_HDR_LEN + body_len;

	if (len > OF13_MAX_LEN)
		return -EMSGSIZE;
	if (cap < len)
		return -ENOSPC;
	put_header(p, type, (uint16_t)len, xid);
	if (body_len)
		memcpy(p + OF13_HDR_LEN, body, body_len);
	return (ssize_t)len;
}

ssize_t of13_encode_error(void *buf, size_t cap, uint32_t xid, uint16_t type, uint16_t code,
                          const void *data, size_t data_len)
{
	uint8_t *p = buf;
	size_t len;

	if (data_len > OF13_MAX_LEN - ERROR_FIXED)
		data_len = OF13_MAX_LEN - ERROR_FIXED;
	len = ERROR_FIXED + data_len;
	if (cap < len)
		return -ENOSPC;
	put_header(p, OF13_T_ERROR, (uint16_t)len, xid);
	put16(p + 8, type);
	put16(p + 10, code);
	if (data_len)
		memcpy(p + ERROR_FIXED, data, data_len);
	return (ssize_t)len;
}

/*
 * The fixed part and the match of both flow_mods. Byte offsets within
 * ofp_flow_mod: cookie 8, cookie_mask 16, table_id 24, command 25,
 * idle/hard timeouts 26/28, priority 30, buffer_id 32, out_port 36,
 * out_group 40, flags 44, pad 46, match 48.
 */
static void put_flow_mod(uint8_t *p, uint16_t len, uint32_t xid, uint8_t command,
                         const struct of13_flow *f, uint64_t cookie_mask)
{
	put_header(p, OF13_T_FLOW_MOD, len, xid);
	put64(p + 8, f->cookie);
	put64(p + 16, cookie_mask);
	put8(p + 24, f->table_id);
	put8(p + 25, command);
	put32(p + 26, 0);
	put16(p + 30, f->priority);
	put32(p + 32, OFP_NO_BUFFER);
	put32(p + 36, OF13_PORT_ANY);
	put32(p + 40, OF13_GROUP_ANY);
	put32(p + 44, 0);
	/* match: OXM type, length 4 + 8 (excluding padding), in_port, 4 pad bytes */
	put16(p + 48, OFPMT_OXM);
	put16(p + 50, 12);
	put32(p + 52, OXM_IN_PORT);
	put32(p + 56, f->in_port);
	put32(p + 60, 0);
}

ssize_t of13_encode_flow_add(void *buf, size_t cap, uint32_t xid, const struct of13_flow *f)
{
	uint8_t *p = buf;

	if (cap < OF13_FLOW_ADD_LEN)
		return -ENOSPC;
	put_flow_mod(p, OF13_FLOW_ADD_LEN, xid, OF13_FC_ADD, f, 0);
	/* instruction apply-actions (8) with one output action (16) */
	p += FLOW_MOD_FIXED + MATCH_IN_PORT_LEN;
	put16(p, OFPIT_APPLY_ACTIONS);
	put16(p + 2, APPLY_OUTPUT_LEN);
	put32(p + 4, 0);
	put16(p + 8, OFPAT_OUTPUT);
	put16(p + 10, 16);
	put32(p + 12, f->out_port);
	put16(p + 16, OFPCML_NO_BUFFER);
	put16(p + 18, 0);
	put32(p + 20, 0);
	return OF13_FLOW_ADD_LEN;
}

ssize_t of13_encode_flow_del_strict(void *buf, size_t cap, uint32_t xid, const struct of13_flow *f)
{
	if (cap < OF13_FLOW_DEL_LEN)
		return -ENOSPC;
	put_flow_mod(buf, OF13_FLOW_DEL_LEN, xid, OF13_FC_DELETE_STRICT, f, f->cookie_mask);
	return OF13_FLOW_DEL_LEN;
}

ssize_t of13_encode_flow_stats_request(void *buf, size_t cap, uint32_t xid)
{
	uint8_t *p = buf;

	if (cap < OF13_FLOW_STATS_REQUEST_LEN)
		return -ENOSPC;
	memset(p, 0, OF13_FLOW_STATS_REQUEST_LEN);
	put_header(p, OF13_T_MULTIPART_REQUEST, OF13_FLOW_STATS_REQUEST_LEN, xid);
	put16(p + 8, OF13_MP_FLOW);
	/* flags 0, pad; ofp_flow_stats_request from byte 16 */
	put8(p + 16, OF13_TABLE_ALL);
	put32(p + 20, OF13_PORT_ANY);
	put32(p + 24, OF13_GROUP_ANY);
	/* cookie and cookie_mask stay 0: every flow; empty OXM match */
	put16(p + 48, OFPMT_OXM);
	put16(p + 50, 4);
	return OF13_FLOW_STATS_REQUEST_LEN;
}

int of13_decode_header(const void *buf, size_t len, struct of13_hdr *h)
{
	const uint8_t *p = buf;

	if (len < OF13_HDR_LEN)
		return -EAGAIN;
	h->version = p[0];
	h->type = p[1];
	h->length = get16(p + 2);
	h->xid = get32(p + 4);
	return h->length < OF13_HDR_LEN ? -EBADMSG : 0;
}

/* Checks that msg holds one whole message of at least min bytes; returns its length. */
static int msg_len(const void *msg, size_t len, size_t min)
{
	struct of13_hdr h;

	if (of13_decode_header(msg, len, &h) < 0)
		return -EBADMSG;
	if (h.length > len || h.length < min)
		return -EBADMSG;
	return h.length;
}

int of13_decode_hello(const void *msg, size_t len, uint32_t *versions)
{
	const uint8_t *p = msg;
	uint8_t version;
	int n = msg_len(msg, len, OF13_HDR_LEN);
	size_t off = OF13_HDR_LEN;

	if (n < 0)
		return n;
	version = p[0];
	*versions = version >= 31 ? 0xfffffffeu : ((1u << (version + 1)) - 1) & ~1u;
	/* elements: type, length (header included, padding excluded), padded to 8 */
	while ((size_t)n - off >= 4) {
		uint16_t type = get16(p + off);
		uint16_t elen = get16(p + off + 2);
		size_t padded = ((size_t)elen + 7) / 8 * 8;

		if (elen < 4 || elen > (size_t)n - off)
			return -EBADMSG;
		if (type == OFPHET_VERSIONBITMAP) {
			if (elen < 8)
				return -EBADMSG;
			/* versions 0..31 are in the first word; higher ones do not concern 1.3 */
			*versions = get32(p + off + 4);
			return 0;
		}
		if (padded > (size_t)n - off)
			break;
		off += padded;
	}
	return 0;
}

int of13_decode_role_reply(const void *msg, size_t len, uint32_t *role, uint64_t *generation_id)
{
	const uint8_t *p = msg;
	int n = msg_len(msg, len, OF13_ROLE_LEN);

	if (n < 0)
		return n;
	*role = get32(p + 8);
	*generation_id = get64(p + 16);
	return 0;
}

int of13_decode_role_status(const void *msg, size_t len, struct of13_role_status *rs)
{
	const uint8_t *p = msg;
	int n = msg_len(msg, len, 16);

	if (n < 0)
		return n;
	if (p[1] != OF13_T_EXPERIMENTER || get32(p + 8) != OF13_EXPERIMENTER_ONF ||
	    get32(p + 12) != OF13_ONFT_ROLE_STATUS)
		return -ENOMSG;
	if (n < OF13_ROLE_STATUS_LEN)
		return -EBADMSG;
	rs->role = get32(p + 16);
	rs->reason = p[20];
	rs->generation_id = get64(p + 24);
	return 0;
}

int of13_decode_features_reply(const void *msg, size_t len, struct of13_features *f)
{
	const uint8_t *p = msg;
	int n = msg_len(msg, len, FEATURES_REPLY_LEN);

	if (n < 0)
		return n;
	f->datapath_id = get64(p + 8);
	f->n_buffers = get32(p + 16);
	f->n_tables = p[20];
	f->auxiliary_id = p[21];
	f->capabilities = get32(p + 24);
	return 0;
}

int of13_decode_error(const void *msg, size_t len, struct of13_error *e)
{
	const uint8_t *p = msg;
	int n = msg_len(msg, len, ERROR_FIXED);

	if (n < 0)
		return n;
	e->type = get16(p + 8);
	e->code = get16(p + 10);
	e->data = p + ERROR_FIXED;
	e->data_len = (size_t)n - ERROR_FIXED;
	return 0;
}

int of13_decode_port_status(const void *msg, size_t len, struct of13_port_status *ps)
{
	const uint8_t *p = msg;
	int n = msg_len(msg, len, PORT_STATUS_LEN);

	if (n < 0)
		return n;
	ps->reason = p[8];
	/* ofp_port at 16: port_no, pad 4, hw_addr 6, pad 2, name 16, config, state */
	ps->port_no = get32(p + 16);
	memcpy(ps->name, p + 32, 16);
	ps->name[16] = '\0';
	ps->config = get32(p + 48);
	ps->state = get32(p + 52);
	return 0;
}

int of13_decode_multipart_reply(const void *msg, size_t len, struct of13_multipart *mp)
{
	const uint8_t *p = msg;
	int n = msg_len(msg, len, MULTIPART_FIXED);

	if (n < 0)
		return n;
	mp->type = get16(p + 8);
	mp->flags = get16(p + 10);
	mp->body = p + MULTIPART_FIXED;
	mp->body_len = (size_t)n - MULTIPART_FIXED;
	return 0;
}

void of13_flow_stats_iter(struct of13_flow_iter *it, const void *body, size_t body_len)
{
	it->p = body;
	it->left = body_len;
}

/* Reads an OXM match of mlen bytes (its length field, padding excluded). */
static int parse_match(const uint8_t *m, size_t mlen, struct of13_flow_stats *fs)
{
	size_t off = 4;
	bool seen_in_port = false;

	if (get16(m) != OFPMT_OXM)
		return -EBADMSG;
	while (off < mlen) {
		uint32_t oxm;
		size_t olen;

		if (mlen - off < 4)
			return -EBADMSG;
		oxm = get32(m + off);
		olen = oxm & 0xff;
		if (olen > mlen - off - 4)
			return -EBADMSG;
		if (oxm == OXM_IN_PORT && !seen_in_port) {
			fs->in_port = get32(m + off + 4);
			seen_in_port = true;
		} else {
			fs->other_match = true;
		}
		off += 4 + olen;
	}
	return 0;
}

/* Reads the actions of an apply-actions instruction. */
static int parse_actions(const uint8_t *a, size_t len, struct of13_flow_stats *fs)
{
	while (len) {
		uint16_t type, alen;

		if (len < 8)
			return -EBADMSG;
		type = get16(a);
		alen = get16(a + 2);
		if (alen < 8 || alen % 8 || alen > len)
			return -EBADMSG;
		if (type == OFPAT_OUTPUT) {
			if (alen < 16)
				return -EBADMSG;
			if (!fs->n_outputs)
				fs->out_port = get32(a + 4);
			if (fs->n_outputs < OF13_MAX_OUTPUTS)
				fs->outputs[fs->n_outputs] = get32(a + 4);
			fs->n_outputs++;
		} else {
			fs->other_instr = true;
		}
		a += alen;
		len -= alen;
	}
	return 0;
}

static int parse_instructions(const uint8_t *in, size_t len, struct of13_flow_stats *fs)
{
	while (len) {
		uint16_t type, ilen;
		int r;

		if (len < 8)
			return -EBADMSG;
		type = get16(in);
		ilen = get16(in + 2);
		if (ilen < 8 || ilen % 8 || ilen > len)
			return -EBADMSG;
		if (type == OFPIT_APPLY_ACTIONS) {
			r = parse_actions(in + 8, ilen - 8u, fs);
			if (r < 0)
				return r;
		} else {
			fs->other_instr = true;
		}
		in += ilen;
		len -= ilen;
	}
	return 0;
}

int of13_flow_stats_next(struct of13_flow_iter *it, struct of13_flow_stats *fs)
{
	const uint8_t *p = it->p;
	size_t elen, mlen, mpadded;
	int r;

	if (!it->left)
		return 0;
	if (it->left < FLOW_STATS_FIXED + 8)
		return -EBADMSG;
	elen = get16(p);
	if (elen < FLOW_STATS_FIXED + 8 || elen > it->left)
		return -EBADMSG;
	memset(fs, 0, sizeof(*fs));
	fs->table_id = p[2];
	fs->priority = get16(p + 12);
	fs->cookie = get64(p + 24);
	mlen = get16(p + FLOW_STATS_FIXED + 2);
	mpadded = (mlen + 7) / 8 * 8;
	if (mlen < 4 || mpadded > elen - FLOW_STATS_FIXED)
		return -EBADMSG;
	r = parse_match(p + FLOW_STATS_FIXED, mlen, fs);
	if (r < 0)
		return r;
	r = parse_instructions(p + FLOW_STATS_FIXED + mpadded, elen - FLOW_STATS_FIXED - mpadded,
	                       fs);
	if (r < 0)
		return r;
	it->p += elen;
	it->left -= elen;
	return 1;
}

static const char *const error_types[] = {
	[0] = "OFPET_HELLO_FAILED",
	[1] = "OFPET_BAD_REQUEST",
	[2] = "OFPET_BAD_ACTION",
	[3] = "OFPET_BAD_INSTRUCTION",
	[4] = "OFPET_BAD_MATCH",
	[5] = "OFPET_FLOW_MOD_FAILED",
	[6] = "OFPET_GROUP_MOD_FAILED",
	[7] = "OFPET_PORT_MOD_FAILED",
	[8] = "OFPET_TABLE_MOD_FAILED",
	[9] = "OFPET_QUEUE_OP_FAILED",
	[10] = "OFPET_SWITCH_CONFIG_FAILED",
	[11] = "OFPET_ROLE_REQUEST_FAILED",
	[12] = "OFPET_METER_MOD_FAILED",
	[13] = "OFPET_TABLE_FEATURES_FAILED",
};

static const char *const hello_failed[] = { "OFPHFC_INCOMPATIBLE", "OFPHFC_EPERM" };

static const char *const bad_request[] = {
	"OFPBRC_BAD_VERSION",    "OFPBRC_BAD_TYPE",
	"OFPBRC_BAD_MULTIPART",  "OFPBRC_BAD_EXPERIMENTER",
	"OFPBRC_BAD_EXP_TYPE",   "OFPBRC_EPERM",
	"OFPBRC_BAD_LEN",        "OFPBRC_BUFFER_EMPTY",
	"OFPBRC_BUFFER_UNKNOWN", "OFPBRC_BAD_TABLE_ID",
	"OFPBRC_IS_SLAVE",       "OFPBRC_BAD_PORT",
	"OFPBRC_BAD_PACKET",     "OFPBRC_MULTIPART_BUFFER_OVERFLOW",
};

static const char *const bad_action[] = {
	"OFPBAC_BAD_TYPE",
	"OFPBAC_BAD_LEN",
	"OFPBAC_BAD_EXPERIMENTER",
	"OFPBAC_BAD_EXP_TYPE",
	"OFPBAC_BAD_OUT_PORT",
	"OFPBAC_BAD_ARGUMENT",
	"OFPBAC_EPERM",
	"OFPBAC_TOO_MANY",
	"OFPBAC_BAD_QUEUE",
	"OFPBAC_BAD_OUT_GROUP",
	"OFPBAC_MATCH_INCONSISTENT",
	"OFPBAC_UNSUPPORTED_ORDER",
	"OFPBAC_BAD_TAG",
	"OFPBAC_BAD_SET_TYPE",
	"OFPBAC_BAD_SET_LEN",
	"OFPBAC_BAD_SET_ARGUMENT",
};

static const char *const bad_instruction[] = {
	"OFPBIC_UNKNOWN_INST",
	"OFPBIC_UNSUP_INST",
	"OFPBIC_BAD_TABLE_ID",
	"OFPBIC_UNSUP_METADATA",
	"OFPBIC_UNSUP_METADATA_MASK",
	"OFPBIC_BAD_EXPERIMENTER",
	"OFPBIC_BAD_EXP_TYPE",
	"OFPBIC_BAD_LEN",
	"OFPBIC_EPERM",
};

static const char *const bad_match[] = {
	"OFPBMC_BAD_TYPE",         "OFPBMC_BAD_LEN",          "OFPBMC_BAD_TAG",
	"OFPBMC_BAD_DL_ADDR_MASK", "OFPBMC_BAD_NW_ADDR_MASK", "OFPBMC_BAD_WILDCARDS",
	"OFPBMC_BAD_FIELD",        "OFPBMC_BAD_VALUE",        "OFPBMC_BAD_MASK",
	"OFPBMC_BAD_PREREQ",       "OFPBMC_DUP_FIELD",        "OFPBMC_EPERM",
};

static const char *const flow_mod_failed[] = {
	"OFPFMFC_UNKNOWN", "OFPFMFC_TABLE_FULL",  "OFPFMFC_BAD_TABLE_ID", "OFPFMFC_OVERLAP",
	"OFPFMFC_EPERM",   "OFPFMFC_BAD_TIMEOUT", "OFPFMFC_BAD_COMMAND",  "OFPFMFC_BAD_FLAGS",
};

static const char *const role_request_failed[] = {
	"OFPRRFC_STALE",
	"OFPRRFC_UNSUP",
	"OFPRRFC_BAD_ROLE",
};

#define CODES(a)                                                                                   \
	{                                                                                          \
		a, sizeof(a) / sizeof(a[0])                                                        \
	}

static const struct {
	const char *const *names;
	size_t n;
} error_codes[] = {
	[0] = CODES(hello_failed),         [1] = CODES(bad_request), [2] = CODES(bad_action),
	[3] = CODES(bad_instruction),      [4] = CODES(bad_match),   [5] = CODES(flow_mod_failed),
	[11] = CODES(role_request_failed),
};

const char *of13_error_type_name(uint16_t type)
{
	if (type == 0xffff)
		return "OFPET_EXPERIMENTER";
	if (type >= sizeof(error_types) / sizeof(error_types[0]))
		return NULL;
	return error_types[type];
}

const char *of13_error_code_name(uint16_t type, uint16_t code)
{
	if (type >= sizeof(error_codes) / sizeof(error_codes[0]))
		return NULL;
	if (code >= error_codes[type].n)
		return NULL;
	return error_codes[type].names[code];
}

char *of13_error_str(uint16_t type, uint16_t code, char *buf, size_t len)
{
	const char *tn = of13_error_type_name(type);
	const char *cn = of13_error_code_name(type, code);

	snprintf(buf, len, "%s(%u)/%s(%u)", tn ? tn : "OFPET", type, cn ? cn : "code", code);
	return buf;
}
