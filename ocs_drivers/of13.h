/*
 * OpenFlow 1.3 (wire version 0x04) message codec: the subset ofcd needs to
 * program circuits as flows and read them back.
 *
 * Pure: no I/O, no allocation, no global state. Encoders write into a buffer
 * the caller owns and return the number of bytes written, or -ENOSPC when the
 * buffer is too small (nothing useful is written then). Decoders read from a
 * buffer the caller owns and fill plain structs; pointers they return point
 * into that buffer. Every decoder checks lengths against the buffer and against
 * the message's own length fields and returns -EBADMSG on malformed input, so
 * the bytes of a peer may be fed in as they come.
 *
 * All multi-byte fields on the wire are big-endian; the structs here hold host
 * byte order. Any thread (the codec has no state).
 */
#ifndef OFCD_OF13_H
#define OFCD_OF13_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#define OF13_VERSION 0x04  /* wire version of OpenFlow 1.3 */
#define OF13_HDR_LEN 8     /* struct ofp_header */
#define OF13_MAX_LEN 65535 /* the header's 16-bit length field bounds every message */

/* Message types (enum ofp_type) used by ofcd. */
#define OF13_T_HELLO             0
#define OF13_T_ERROR             1
#define OF13_T_ECHO_REQUEST      2
#define OF13_T_ECHO_REPLY        3
#define OF13_T_EXPERIMENTER      4
#define OF13_T_FEATURES_REQUEST  5
#define OF13_T_FEATURES_REPLY    6
#define OF13_T_FLOW_REMOVED      11
#define OF13_T_PORT_STATUS       12
#define OF13_T_FLOW_MOD          14
#define OF13_T_MULTIPART_REQUEST 18
#define OF13_T_MULTIPART_REPLY   19
#define OF13_T_BARRIER_REQUEST   20
#define OF13_T_BARRIER_REPLY     21
#define OF13_T_ROLE_REQUEST      24
#define OF13_T_ROLE_REPLY        25

/* Flow-mod commands (enum ofp_flow_mod_command). */
#define OF13_FC_ADD           0
#define OF13_FC_DELETE_STRICT 4

/* Multipart: type OFPMP_FLOW and the "more replies follow" flag. */
#define OF13_MP_FLOW        1
#define OF13_MPF_REPLY_MORE 0x0001

/* Reserved port and group numbers. */
#define OF13_PORT_MAX        0xffffff00u /* highest regular port number */
#define OF13_PORT_ANY        0xffffffffu
#define OF13_PORT_IN_PORT    0xfffffff8u
#define OF13_PORT_TABLE      0xfffffff9u
#define OF13_PORT_NORMAL     0xfffffffau
#define OF13_PORT_FLOOD      0xfffffffbu
#define OF13_PORT_ALL        0xfffffffcu
#define OF13_PORT_CONTROLLER 0xfffffffdu
#define OF13_PORT_LOCAL      0xfffffffeu
#define OF13_GROUP_ANY       0xffffffffu
#define OF13_TABLE_ALL       0xff

/* Controller roles (enum ofp_controller_role). */
#define OF13_ROLE_NOCHANGE 0
#define OF13_ROLE_EQUAL    1
#define OF13_ROLE_MASTER   2 /**< the switch obeys this controller alone */
#define OF13_ROLE_SLAVE    3 /**< read-only: the switch refuses its changes */

/* Port config and state bits (PORT_STATUS). */
#define OF13_PC_PORT_DOWN 0x00000001u /* administratively down */
#define OF13_PS_LINK_DOWN 0x00000001u /* no physical link */

/* PORT_STATUS reasons. */
#define OF13_PR_ADD    0
#define OF13_PR_DELETE 1
#define OF13_PR_MODIFY 2

/* Error types and codes ofcd sends or acts upon (enum ofp_error_type and its codes). */
#define OF13_ET_HELLO_FAILED        0
#define OF13_HFC_INCOMPATIBLE       0
#define OF13_ET_BAD_REQUEST         1
#define OF13_BRC_IS_SLAVE           10 /* a SLAVE controller asked for a change */
#define OF13_ET_ROLE_REQUEST_FAILED 11
#define OF13_RRFC_STALE             0 /* generation_id older than the switch's */
#define OF13_RRFC_UNSUP             1 /* the switch does not do roles */
#define OF13_RRFC_BAD_ROLE          2 /* not a role the switch knows */

/*
 * ROLE_STATUS in OpenFlow 1.3 is the ONF extension 1911 (an EXPERIMENTER
 * message, "ONFT13_ROLE_STATUS"): the switch tells a controller its role
 * changed, e.g. a MASTER demoted to SLAVE because another became MASTER.
 * OpenFlow 1.4 made it message type 30 with the same body.
 */
#define OF13_EXPERIMENTER_ONF   0x4f4e4600u /* ONF_VENDOR_ID, "ONF\0" */
#define OF13_ONFT_ROLE_STATUS   1911u
#define OF13_ROLE_STATUS_LEN    32 /* experimenter header (16) + ofp14_role_status (16) */
#define OF13_CRR_MASTER_REQUEST 0  /* another controller asked to be master */
#define OF13_CRR_CONFIG         1  /* the switch's configuration changed */
#define OF13_CRR_EXPERIMENTER   2

/* Encoded sizes of the fixed-size messages ofcd sends. */
#define OF13_HELLO_LEN              16 /* header + one version-bitmap element */
#define OF13_FLOW_ADD_LEN           88 /* flow_mod, in_port match, apply-actions output */
#define OF13_FLOW_DEL_LEN           64 /* flow_mod, in_port match, no instructions */
#define OF13_FLOW_STATS_REQUEST_LEN 56 /* multipart header + ofp_flow_stats_request */
#define OF13_ROLE_LEN               24 /* ofp_role_request and ofp_role_reply */

/** The OpenFlow header of any message (struct ofp_header), host byte order. */
struct of13_hdr {
	uint8_t version; /**< wire version (0x04 for 1.3) */
	uint8_t type;    /**< OF13_T_* */
	uint16_t length; /**< whole message length, header included */
	uint32_t xid;    /**< transaction id, echoed in replies */
};

/**
 * One circuit half as a flow in the form ofcd writes it: in table table_id at
 * priority, match exactly in_port, apply-actions output:out_port.
 */
struct of13_flow {
	uint8_t table_id;  /**< flow table */
	uint16_t priority; /**< flow priority */
	uint64_t cookie;   /**< cookie written by ADD; matched under cookie_mask by DELETE_STRICT */
	uint64_t
	    cookie_mask;   /**< DELETE_STRICT only: cookie bits that must match (0: any cookie) */
	uint32_t in_port;  /**< match in_port */
	uint32_t out_port; /**< ADD only: output port */
};

/** Body of FEATURES_REPLY (struct ofp_switch_features). */
struct of13_features {
	uint64_t datapath_id;  /**< switch datapath id */
	uint32_t n_buffers;    /**< packet buffers */
	uint8_t n_tables;      /**< flow tables */
	uint8_t auxiliary_id;  /**< 0 on the main connection */
	uint32_t capabilities; /**< OFPC_* bits */
};

/** Body of ERROR (struct ofp_error_msg). */
struct of13_error {
	uint16_t type; /**< OFPET_* */
	uint16_t code; /**< code, meaning depends on type */
	const void
	    *data;       /**< points into the decoded message: usually the failed request's start */
	size_t data_len; /**< bytes at data */
};

/** A ROLE_STATUS (ONF extension 1911 in OpenFlow 1.3), host byte order. */
struct of13_role_status {
	uint32_t role;          /**< the role now held, OF13_ROLE_* */
	uint8_t reason;         /**< why it changed, OF13_CRR_* */
	uint64_t generation_id; /**< the switch's master generation */
};

/** Body of PORT_STATUS (struct ofp_port_status with its struct ofp_port). */
struct of13_port_status {
	uint8_t reason;   /**< OF13_PR_* */
	uint32_t port_no; /**< port number */
	uint32_t config;  /**< OFPPC_* bits */
	uint32_t state;   /**< OFPPS_* bits */
	char name[17];    /**< port name, NUL-terminated */
};

/** Header of MULTIPART_REPLY (struct ofp_multipart_reply); body points into the message. */
struct of13_multipart {
	uint16_t type;    /**< OFPMP_* */
	uint16_t flags;   /**< OF13_MPF_REPLY_MORE when more replies follow */
	const void *body; /**< the entries, inside the decoded message */
	size_t body_len;  /**< bytes at body */
};

/**
 * One entry of an OFPMP_FLOW reply, reduced to what classifying a flow needs.
 * Ports are 0 when absent (no in_port in the match, no output action).
 */
#define OF13_MAX_OUTPUTS 8

struct of13_flow_stats {
	uint8_t table_id;   /**< table the flow is in */
	uint16_t priority;  /**< flow priority */
	uint64_t cookie;    /**< flow cookie */
	uint32_t in_port;   /**< matched in_port, 0 when the match has none */
	bool other_match;   /**< the match has fields besides an exact in_port */
	uint32_t out_port;  /**< port of the first output action, 0 when none */
	unsigned n_outputs; /**< number of output actions */
	/** Ports of the first OF13_MAX_OUTPUTS output actions (a flow may copy to several). */
	uint32_t outputs[OF13_MAX_OUTPUTS];
	bool other_instr; /**< instructions or actions besides apply-actions output */
};

/** Cursor over the entries of an OFPMP_FLOW reply body; set up with of13_flow_stats_iter(). */
struct of13_flow_iter {
	const uint8_t *p; /**< next entry, inside the caller's buffer */
	size_t left;      /**< bytes left in the body */
};

/**
 * Encodes a HELLO announcing only OpenFlow 1.3 (header version 0x04 and a
 * version-bitmap element with bit 4 set). OF13_HELLO_LEN bytes.
 */
ssize_t of13_encode_hello(void *buf, size_t cap, uint32_t xid);

/**
 * Encodes only a header announcing a message of length bytes (header
 * included), for a body the caller appends itself. OF13_HDR_LEN bytes;
 * -EINVAL when length is below OF13_HDR_LEN.
 */
ssize_t of13_encode_header(void *buf, size_t cap, uint8_t type, uint16_t length, uint32_t xid);

/**
 * Encodes a message made of a header of the given type and an opaque body
 * (FEATURES_REQUEST, BARRIER_REQUEST, ECHO_REQUEST/REPLY: body may be NULL
 * when body_len is 0). Returns -EMSGSIZE when the message would pass 65535 bytes.
 */
ssize_t of13_encode_msg(void *buf, size_t cap, uint8_t type, uint32_t xid, const void *body,
                        size_t body_len);

/** Encodes an ERROR with type, code and data (truncated to fit 65535 bytes). */
ssize_t of13_encode_error(void *buf, size_t cap, uint32_t xid, uint16_t type, uint16_t code,
                          const void *data, size_t data_len);

/**
 * Encodes an OFPFC_ADD flow_mod for f (cookie, table_id, priority, in_port,
 * out_port; cookie_mask ignored), with no timeouts, no buffer, no flags.
 * OF13_FLOW_ADD_LEN bytes.
 */
ssize_t of13_encode_flow_add(void *buf, size_t cap, uint32_t xid, const struct of13_flow *f);

/**
 * Encodes an OFPFC_DELETE_STRICT flow_mod for f (table_id, priority, in_port,
 * cookie under cookie_mask; out_port ignored: any port, any group).
 * OF13_FLOW_DEL_LEN bytes.
 */
ssize_t of13_encode_flow_del_strict(void *buf, size_t cap, uint32_t xid, const struct of13_flow *f);

/**
 * Encodes an OFPMP_FLOW multipart request for every flow of every table
 * (table all, out_port any, out_group any, cookie 0 mask 0, empty match).
 * OF13_FLOW_STATS_REQUEST_LEN bytes.
 */
ssize_t of13_encode_flow_stats_request(void *buf, size_t cap, uint32_t xid);

/**
 * Encodes a ROLE_REQUEST for role (OF13_ROLE_*) with generation_id: a switch
 * refuses (OFPRRFC_STALE) a MASTER or SLAVE request whose generation is older
 * than the last it saw, which fences a controller that lost its leadership.
 * OF13_ROLE_LEN bytes.
 */
ssize_t of13_encode_role_request(void *buf, size_t cap, uint32_t xid, uint32_t role,
                                 uint64_t generation_id);

/** Decodes a ROLE_REPLY: the role granted and the switch's generation_id. */
int of13_decode_role_reply(const void *msg, size_t len, uint32_t *role, uint64_t *generation_id);

/**
 * Decodes an EXPERIMENTER message as the ONF ROLE_STATUS extension (Open
 * vSwitch sends it to a master demoted by another controller's ROLE_REQUEST).
 * Returns 0 with rs filled, -ENOMSG when msg is another experimenter's
 * message (not an error: it is to be ignored), or -EBADMSG when malformed.
 * Properties after the fixed body are ignored.
 */
int of13_decode_role_status(const void *msg, size_t len, struct of13_role_status *rs);

/**
 * Decodes the header at buf (len >= OF13_HDR_LEN bytes available). Returns 0,
 * -EAGAIN when fewer than 8 bytes are given, or -EBADMSG when the length field
 * is below 8. Does not look at the version: HELLO may carry any.
 */
int of13_decode_header(const void *buf, size_t len, struct of13_hdr *h);

/**
 * Decodes a HELLO into the set of versions the peer supports, as a bitmap
 * (bit v set: wire version v). Without a version-bitmap element the peer
 * supports every version up to its header version (the spec's negotiation
 * then picks the lower of both).
 */
int of13_decode_hello(const void *msg, size_t len, uint32_t *versions);

/** Decodes a FEATURES_REPLY. */
int of13_decode_features_reply(const void *msg, size_t len, struct of13_features *f);

/** Decodes an ERROR; e->data points into msg. */
int of13_decode_error(const void *msg, size_t len, struct of13_error *e);

/** Decodes a PORT_STATUS. */
int of13_decode_port_status(const void *msg, size_t len, struct of13_port_status *ps);

/** Decodes the header of a MULTIPART_REPLY; mp->body points into msg. */
int of13_decode_multipart_reply(const void *msg, size_t len, struct of13_multipart *mp);

/** Starts iterating over the entries of an OFPMP_FLOW reply body. */
void of13_flow_stats_iter(struct of13_flow_iter *it, const void *body, size_t body_len);

/**
 * Decodes the next flow entry. Returns 1 with fs filled, 0 at the end of the
 * body, or -EBADMSG when an entry, its match or its instructions are malformed.
 */
int of13_flow_stats_next(struct of13_flow_iter *it, struct of13_flow_stats *fs);

/** Name of an error type ("OFPET_FLOW_MOD_FAILED"), or NULL when unknown. */
const char *of13_error_type_name(uint16_t type);

/** Name of an error code within its type ("OFPFMFC_TABLE_FULL"), or NULL when unknown. */
const char *of13_error_code_name(uint16_t type, uint16_t code);

/**
 * Formats an error as "OFPET_X(t)/OFPXXC_Y(c)" (numbers alone where the name
 * is unknown) into buf, always NUL-terminated. Returns buf.
 */
char *of13_error_str(uint16_t type, uint16_t code, char *buf, size_t len);

#endif
