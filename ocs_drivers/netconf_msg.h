/*
 * What the netconf driver says to a unit and reads from its answers, apart
 * from the session that carries them: the unit's address, the YANG model of
 * its cross-connects, the edit-config of a batch, and the reading of
 * rpc-reply trees (get-config data, rpc-error). Pure functions, no I/O, so
 * that the fuzzer (tests/fuzz/fuzz_netconf_reply.c) and the unit tests reach
 * them without a server.
 *
 * Depends on libyang (the trees libnetconf2 hands back) and ocs_driver.h.
 */
#ifndef OFCD_NETCONF_MSG_H
#define OFCD_NETCONF_MSG_H

#include "ocs_driver.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct lyd_node;

/** Where a unit's NETCONF server is: netconf://user@host[:port]. */
struct ncm_endpoint {
	char user[64];  /**< SSH user name */
	char host[256]; /**< host name or address, without IPv6 brackets */
	uint16_t port;  /**< SSH port (830 when the endpoint gives none) */
};

/**
 * Parses "netconf://user@host[:port]" ("[v6addr]" for an IPv6 host). Returns
 * 0, or -EINVAL with a message naming the part that is wrong.
 */
int ncm_parse_endpoint(const char *endpoint, struct ncm_endpoint *out, char *err, size_t errlen);

/**
 * The names of a cross-connect model: a container holding a list of pairs,
 * each keyed by its ingress port with one egress port. Units of another
 * vendor are another entry of this shape (docs/drivers.md).
 */
struct ncm_model {
	char name[32];      /**< the model's name in the configuration ("ofcd", "polatis") */
	char ns[192];       /**< XML namespace of the module */
	char container[64]; /**< top-level container ("cross-connects") */
	char list[64];      /**< the list of pairs in it ("pair") */
	char ingress[64];   /**< the list's key leaf: the ingress port ("ingress") */
	char egress[64];    /**< the leaf of the egress port ("egress") */
	/**
	 * false: a pair is a circuit, light going both ways (ofcd's module).
	 * true: a pair carries light one way, from an ingress port to an egress
	 * port, the two sides numbered apart (Polatis: ingress 1..N, egress
	 * N+1..2N): ofcd's port p of a unit of N ports is ingress p and egress
	 * p + N, and a circuit (a, b) is the two pairs a -> b + N and b -> a + N.
	 */
	bool one_way;
};

/**
 * Reads a model as the configuration gives it: the name of a built-in one
 * ("ofcd", "polatis"), or its five names separated by spaces, "NAMESPACE
 * CONTAINER LIST INGRESS EGRESS", followed by "one-way" for a unit whose
 * pairs are one-way. Returns 0, or -EINVAL with a message.
 */
int ncm_model_parse(const char *value, struct ncm_model *out, char *err, size_t errlen);

/**
 * The subtree filter of a get-config that reads the model's cross-connects.
 * Returns a malloc'd string (caller frees) or NULL when out of memory.
 */
char *ncm_read_filter(const struct ncm_model *m);

/**
 * The subtree filter of a get-config that selects nothing (a pair of ingress
 * 0, which no port has): the keep-alive's, answered with empty data whatever
 * the unit holds. Malloc'd (caller frees) or NULL when out of memory.
 */
char *ncm_probe_filter(const struct ncm_model *m);

/**
 * The <config> content of the edit-config of one batch for a unit of ports
 * ports: every removal, then every addition, in the model's names. Two-way:
 * a circuit (a, b) is made as the pair ingress a, egress b, and removed by
 * the key it is held under, which is b for a circuit listed in held_reversed
 * (made by hand as ingress b, egress a; sorted by a then b). One-way: the
 * circuit is the pairs a -> b + ports and b -> a + ports, removed by keys a
 * and b. Removals use operation "remove", so a pair already gone is no error.
 * Returns a malloc'd string (caller frees) or NULL when out of memory.
 */
char *ncm_edit_config(const struct ncm_model *m, uint32_t ports, const struct ocs_batch *batch,
                      const struct ocs_xc *held_reversed, size_t nreversed);

/**
 * What a get-config answer holds, as read by ncm_read_pairs(). The arrays are
 * malloc'd and owned by the structure (ncm_pairs_free()).
 */
struct ncm_pairs {
	struct ocs_xc *xcs;      /**< one circuit per pair, (min, max) of its two ports */
	size_t nxcs;             /**< entries in xcs */
	struct ocs_xc *reversed; /**< the circuits held as ingress b, egress a (a < b), sorted */
	size_t nreversed;        /**< entries in reversed */
	/**
	 * ofcd's ports that a pair joins without a circuit: no egress (out_port
	 * 0), one port twice, or (one-way) a pair whose way back is missing
	 */
	struct ocs_flow *partial;
	size_t npartial; /**< entries in partial */
	struct ocs_flow
	    *foreign;    /**< pairs whose ports are outside the unit's, as numbered there */
	size_t nforeign; /**< entries in foreign */
};

/** Frees what p owns and empties it. */
void ncm_pairs_free(struct ncm_pairs *p);

/**
 * Reads the pairs of the model out of a get-config reply's operation tree
 * (libnetconf2's op: the <get-config> node with its <data> child), for a unit
 * of ports ports. A pair whose ports are not decimal numbers makes it fail;
 * one whose ports lie outside the unit's is foreign. Returns 0, or -EPROTO
 * with a message (the reply is not what the model says), or -ENOMEM.
 */
int ncm_read_pairs(const struct lyd_node *op, const struct ncm_model *m, uint32_t ports,
                   struct ncm_pairs *out, char *err, size_t errlen);

/**
 * The first rpc-error of a reply's envelope (libnetconf2's envp) as
 * "TAG: MESSAGE" (the server's error-tag and error-message, with its
 * error-path when it gave one). Returns true when envp holds an rpc-error.
 */
bool ncm_reply_error(const struct lyd_node *envp, char *buf, size_t len);

/** True when the reply's envelope is <ok/>. */
bool ncm_reply_ok(const struct lyd_node *envp);

/**
 * The session holding a lock, from a lock-denied rpc-error's error-info
 * <session-id>. Returns 0 and sets *sid, or -ENOENT.
 */
int ncm_lock_holder(const struct lyd_node *envp, uint32_t *sid);

#endif
