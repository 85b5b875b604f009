/*
 * The HTTP side of ofcctl: one libcurl handle talking to one daemon, or to
 * the members of a cluster in turn, reused for every request of the process
 * (so a command that sends several keeps one connection). Follows redirects
 * itself (a proxy or a follower pointing at the leader), sending the bearer
 * token only to the hosts and ports it was given for and to the members
 * their cluster names. Single-threaded.
 */
#ifndef OFCCTL_CLIENT_H
#define OFCCTL_CLIENT_H

#include <jansson.h>
#include <signal.h>
#include <stdbool.h>
#include <stddef.h>

/** A reply body past this size is refused as a broken daemon. */
#define CLIENT_MAX_BODY (64u << 20)

struct client;

/** What the daemon answered. Zero it before use; client_reply_free releases it. */
struct client_reply {
	long status;    /**< HTTP status of the last response (after redirects) */
	char *body;     /**< the body as received, NUL-terminated (malloc'd; "" when none) */
	size_t len;     /**< bytes in body */
	json_t *json;   /**< body parsed as JSON, or NULL when it is not JSON */
	char etag[128]; /**< the last response's ETag header as sent (quotes kept), "" when none */
};

/** Receives a streamed body chunk by chunk; a non-zero return stops the stream. */
typedef int (*client_chunk_fn)(const char *data, size_t n, void *arg);

/** How the client checks an HTTPS daemon's certificate. */
struct client_tls {
	const char *cacert; /**< PEM file of the CAs to trust; NULL or "" for the system's */
	bool insecure;      /**< check nothing (a test daemon's self-signed certificate) */
};

/**
 * A client for the daemon at url ("http://host:port", optionally with a path
 * prefix), or for the members of a cluster, their URLs comma-separated (the
 * first that answers is asked first, see client_send; none may be
 * empty: settings_resolve() refuses such a list), sending "Authorization: Bearer
 * token" when token is not NULL (the string is copied), checking an HTTPS daemon as tls says (NULL:
 * against the system's CAs; copied). NULL with the reason in err on failure.
 */
struct client *client_new(const char *url, const char *token, const struct client_tls *tls,
                          char *err, size_t errlen);

/**
 * A second client for the same daemon, token and TLS settings, with a
 * connection of its own (to send requests while c follows a stream). NULL
 * with the reason in err on failure; free it with client_free.
 */
struct client *client_clone(const struct client *c, char *err, size_t errlen);

/**
 * How long, in seconds, client_send keeps sending a request that no member
 * took (0, the default: each member once).
 */
void client_set_retry(struct client *c, double seconds);

/** Frees the client and closes its connection; NULL is fine. */
void client_free(struct client *c);

/** s escaped for one URL path segment or query value; malloc'd (caller frees), NULL on ENOMEM. */
char *client_escape(struct client *c, const char *s);

/** One request; members left zero take the defaults said. */
struct client_req {
	const char *method;        /**< "GET", "PUT", ...; NULL: GET */
	const char *path;          /**< e.g. "/v1/fabrics", query included */
	const char *body;          /**< JSON text to send, or NULL for none */
	const char *accept;        /**< Accept header; NULL: application/json */
	const char *if_match;      /**< If-Match header, sent as is; NULL: none */
	const char *last_event_id; /**< Last-Event-ID header; NULL: none */
	long timeout_ms;           /**< longest the whole exchange may take; 0: no limit */
	/** Receives the body of a 200 reply as it arrives instead of collecting it; NULL: collect.
	 */
	client_chunk_fn fn;
	void *arg; /**< passed to fn */
	/** Checked while waiting (at least once a second): non-zero ends the exchange. */
	const volatile sig_atomic_t *stop;
};

/**
 * Sends q and waits for the reply. Returns 0 when a reply arrived and ended,
 * whatever its status, with it in r (a body handed to q->fn is not in r);
 * -EIO when the daemon could not be reached or the exchange broke, with the
 * reason in err; -ECANCELED when q->fn stopped it; -EINTR when *q->stop
 * ended it. r->status is set in every case a reply began. Redirects are
 * followed (307 and 308; any of a GET), five at most. The token goes on to
 * another host or port a redirect leads to only when it is one of the
 * members given, or one the given member's GET /v1/cluster names; the client
 * then goes there from the start (a cluster's leader).
 *
 * A request that changed nothing (a write that reached no daemon: no
 * connection to the member or to the leader it redirected to; a 503
 * not_leader, store_unavailable, shutting_down or overloaded; a GET that
 * failed before any of its streamed body was handed to q->fn) goes to the
 * next member given, and once each has failed, after a pause (0.1 s,
 * doubling up to 1 s), round again until the retry time set has passed (the
 * try under way then is the last); the first such round is noted on stderr.
 * The outcome is then the last refusal a member answered, else the last
 * failure. With several members, the first request of a client asks every
 * member GET /v1/health at once (2 s at most) and starts at the first given
 * that answered 200; when one did, that request's first round passes over
 * those whose probe failed and probes again, the last of the round
 * included, those it had no answer from yet.
 * After that, each member but the last of a round is asked GET /v1/health
 * (2 s) before the first request that goes there, and so is any other host
 * or port a redirect leads to: one that does not answer 200 is passed over
 * as one that cannot be reached (a frozen daemon takes connections and
 * answers nothing). -EINTR when *q->stop ended a pause. The client keeps to
 * the member that answered. A write that went out and was cut off may have
 * been applied: it is not sent again, and its error is returned.
 */
int client_send(struct client *c, const struct client_req *q, struct client_reply *r, char *err,
                size_t errlen);

/** Frees what r holds and zeroes it. */
void client_reply_free(struct client_reply *r);

#endif
