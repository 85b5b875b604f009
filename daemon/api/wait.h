/*
 * ?wait=SECONDS on fabric routes: the reply is held (suspended connection, no
 * thread) until the fabric reaches a final state (applied, degraded, failed),
 * or, after a deletion, until its circuits are read back gone from the units
 * that held them, or until the time runs out; then it carries the state of
 * that moment. On GET /v1/servers/{name}: until no unit may still join the
 * server's ports to another port.
 * Waiters re-check their condition on every EVENTS_SETTLED of the bus (the
 * reconciler publishes one whenever states or sync may have changed).
 * Loop thread only.
 */
#ifndef OFCD_WAIT_H
#define OFCD_WAIT_H

#include <stdbool.h>
#include <stdint.h>

struct api_req;

#define WAIT_MAX_S 60

/** What a waiter waits for. */
enum wait_mode {
	WAIT_FINAL_STATE, /**< the fabric's state is applied, degraded or failed */
	WAIT_REMOVED,     /**< the deleted fabric's cross-connects are read back gone */
	WAIT_SERVER_FREE, /**< the server's "joined" ports (topo_server_joined()) are none */
};

/**
 * Reads ?wait: 0 when absent, else the seconds (0..60, plain decimals such as
 * "5" or "2.5"; no sign, exponent, hex or spaces).
 * On a bad value replies 400 naming "wait" and returns -EINVAL.
 */
int wait_parse(struct api_req *req, double *seconds);

/**
 * Holds req until mode's condition holds for `name` (a fabric; for
 * WAIT_SERVER_FREE a server) or `seconds` pass, then replaces the body with
 * its view of that moment: the fabric's (its summary when the request asked
 * ?view=summary), or the server's (api_server_view_reply()). The status
 * set by the handler is kept, and is what the audit records; for WAIT_REMOVED
 * it becomes 200 once the circuits are gone, and stays 202 while they are
 * not. The reply set before the call only needs the right status: it is
 * rebuilt in every case, so a handler waiting more than 0 s may set a cheap
 * placeholder. With seconds 0 it does nothing; when the condition already
 * holds it only rebuilds the reply.
 */
void wait_hold(struct api_req *req, const char *name, enum wait_mode mode, double seconds);

/**
 * Replies status with fabric id's view, as a wait ends with it: its summary,
 * or the whole fabric (written as text: a large fabric's links are most of
 * it). 500 when it cannot be read.
 */
void api_fabric_view_reply(struct api_req *req, unsigned status, int64_t id, bool summary);

/**
 * Replies 200 with server id's single view (devices, ports, inventory) and,
 * where this member drives the units, "joined" (topo_server_joined()), as a
 * wait ends with it; its ETag is the server's revision.
 */
void api_server_view_reply(struct api_req *req, int64_t id);

/**
 * Whether this member drives the units, and so knows which ports are joined;
 * when not (a follower whose leader is not known, a leader that stopped
 * leading) replies 503 not_leader and returns false.
 */
bool api_units_known(struct api_req *req);

#endif
