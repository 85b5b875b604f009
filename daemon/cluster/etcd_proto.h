/*
 * The etcd v3 JSON gateway's wire format (etcd 3.4, `/v3/...` over HTTP):
 * request bodies built and response bodies parsed, with no I/O, so that every
 * case can be tested without an etcd. Keys and values travel base64-encoded;
 * 64-bit numbers arrive as JSON strings ("revision": "42") and fields whose
 * value is zero or false are left out, so a missing member reads as zero.
 *
 * Every function is pure and reentrant; the caller owns what they return.
 */
#ifndef OFCD_ETCD_PROTO_H
#define OFCD_ETCD_PROTO_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/**
 * Base64 (RFC 4648, padded) of len bytes at data: a malloc'd NUL-terminated
 * string, or NULL when memory runs out.
 */
char *etcd_b64_encode(const void *data, size_t len);

/**
 * Decodes padded base64 text into *out (malloc'd, len bytes followed by a
 * NUL so that text values can be read as strings) and *len. Returns 0,
 * -EINVAL for text that is not base64, or -ENOMEM.
 */
int etcd_b64_decode(const char *text, unsigned char **out, size_t *len);

/*
 * Request bodies. Each returns malloc'd JSON text, or NULL when memory runs
 * out. Keys are NUL-terminated strings; values are bytes.
 */

/**
 * POST /v3/kv/range: the key, or with prefix every key that starts with it
 * (range_end is the key with its last byte plus one). min_mod_revision > 0
 * keeps only keys modified at or after that revision.
 */
char *etcd_req_range(const char *key, bool prefix, int64_t min_mod_revision);

/**
 * POST /v3/kv/txn that creates key with value attached to lease (0: none)
 * only if key does not exist (its create_revision is 0); otherwise it reads
 * key back, so the reply names the current holder. Leader election.
 */
char *etcd_req_create(const char *key, const void *value, size_t len, int64_t lease);

/**
 * POST /v3/kv/txn that creates key = value only while guard_key still has the
 * create_revision guard_rev, key does not exist yet and floor_key was last
 * changed at floor_rev (0: never written); otherwise it reads back guard_key,
 * key and floor_key, in that order. Appending to the replication log: sent
 * again after a lost answer, it cannot append twice, and the read-back says
 * whether the first try got through (or, through the floor, that a trim may
 * have removed it since). A try that reaches etcd only after a trim (held by
 * a member that hung) cannot put back an entry the trim removed: the trim
 * moved the floor.
 */
char *etcd_req_append(const char *guard_key, int64_t guard_rev, const char *key, const void *value,
                      size_t len, const char *floor_key, int64_t floor_rev);

/**
 * POST /v3/kv/txn that reads, at one revision, floor_key and the keys under
 * log_prefix modified at or after min_mod_revision (0: all): a replica's
 * catching up, which must know whether the log still starts early enough.
 * A page of it: the first limit keys (0: all) after after_key (NULL: from
 * the start), at revision (0: the current one; the reply's header says
 * which, for the next pages); the reply's more says whether keys are left.
 */
char *etcd_req_log_read(const char *floor_key, const char *log_prefix, const char *after_key,
                        int64_t min_mod_revision, int64_t revision, unsigned limit);

/**
 * POST /v3/kv/txn that, only while guard_key still has the create_revision
 * guard_rev and floor_key was last changed at floor_rev (0: never written),
 * deletes every key from log_prefix up to and with last_key and puts
 * floor_key = floor_value: a leader trimming the log. Otherwise it reads
 * floor_key back. A try that reaches etcd late cannot set the floor back.
 */
char *etcd_req_trim(const char *guard_key, int64_t guard_rev, const char *log_prefix,
                    const char *last_key, const char *floor_key, int64_t floor_rev,
                    const char *floor_value);

/** POST /v3/kv/put of key = value, attached to lease (0: none). */
char *etcd_req_put(const char *key, const void *value, size_t len, int64_t lease);

/**
 * POST /v3/kv/txn that deletes key only while its create_revision is rev: a
 * leader stepping down removes its own key and nobody else's.
 */
char *etcd_req_delete_guarded(const char *key, int64_t rev);

/** POST /v3/lease/grant for a lease of ttl_s seconds. */
char *etcd_req_lease_grant(unsigned ttl_s);

/** POST /v3/lease/keepalive (one renewal) or /v3/lease/revoke of lease id. */
char *etcd_req_lease_id(int64_t id);

/**
 * POST /v3/watch create request: events on key (or every key under it with
 * prefix) from start_revision on (0: from now).
 */
char *etcd_req_watch(const char *key, bool prefix, int64_t start_revision);

/** One key-value pair of a reply. */
struct etcd_kv {
	char *key;               /**< key, decoded (owned, NUL-terminated) */
	unsigned char *value;    /**< value, decoded (owned, NUL after value_len bytes) */
	size_t value_len;        /**< bytes of value */
	int64_t create_revision; /**< revision that created the key */
	int64_t mod_revision;    /**< revision of its last change */
	int64_t lease;           /**< lease it is attached to, 0 for none */
	bool deleted;            /**< a watch event that deleted it (value empty) */
};

/** What a reply says; members that do not apply to its kind stay zero. */
struct etcd_result {
	int64_t revision;         /**< header.revision: the store's revision when it answered */
	bool succeeded;           /**< txn: the compare held */
	struct etcd_kv *kvs;      /**< range, txn read-back, or watch events, in order (owned) */
	size_t nkvs;              /**< entries of kvs */
	int64_t lease_id;         /**< lease grant and keepalive: the lease */
	int64_t ttl;              /**< lease grant and keepalive: seconds left, 0 if it expired */
	bool created;             /**< watch: the stream's creation message */
	bool canceled;            /**< watch: etcd cancelled the watch */
	int64_t compact_revision; /**< watch: cancelled because history before it is gone */
	bool more;                /**< range (in a txn too): keys past its limit are left */
	char error[160];          /**< the gateway's error message when parsing returned -EIO */
	/**
	 * etcd.h: the call was sent to more than one endpoint, so a try before the
	 * one that answered may have reached etcd and done its work.
	 */
	bool resent;
};

/**
 * Parses one reply body (len bytes, not necessarily NUL-terminated) into
 * *out, which the caller zeroes or releases with etcd_result_free() first.
 * Keepalive and watch replies come wrapped in {"result": ...}; both shapes
 * are accepted. Returns 0; -EIO when etcd answered with an error (message
 * in out->error); -EPROTO when the body is not a reply etcd would send;
 * -ENOMEM.
 */
int etcd_parse(const char *body, size_t len, struct etcd_result *out);

/** Releases what out owns and zeroes it. */
void etcd_result_free(struct etcd_result *out);

#endif
