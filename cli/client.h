/*
 * The HTTP side of ofcctl: one libcurl handle talking to one daemon, reused
 * for every request of the process (so a command that sends several keeps
 * one connection). Follows redirects (a proxy or a standby pointing at the
 * leader), sending the bearer token only to the host and port it was given
 * for. Single-threaded.
 */
#ifndef OFCCTL_CLIENT_H
#define OFCCTL_CLIENT_H

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>

/** A reply body past this size is refused as a broken daemon. */
#define CLIENT_MAX_BODY (64u << 20)

struct client;

/** What the daemon answered. Zero it before use; client_reply_free releases it. */
struct client_reply {
	long status;  /**< HTTP status of the last response (after redirects) */
	char *body;   /**< the body as received, NUL-terminated (malloc'd; "" when none) */
	size_t len;   /**< bytes in body */
	json_t *json; /**< body parsed as JSON, or NULL when it is not JSON */
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
 * prefix), sending "Authorization: Bearer token" when token is not NULL (the
 * string is copied), checking an HTTPS daemon as tls says (NULL: against the
 * system's CAs; copied). NULL with the reason in err on failure.
 */
struct client *client_new(const char *url, const char *token, const struct client_tls *tls,
                          char *err, size_t errlen);

/** Frees the client and closes its connection; NULL is fine. */
void client_free(struct client *c);

/** s escaped for one URL path segment or query value; malloc'd (caller frees), NULL on ENOMEM. */
char *client_escape(struct client *c, const char *s);

/**
 * Sends method path (e.g. "GET", "/v1/fabrics") with body (JSON text, or
 * NULL for none) and waits for the reply, at most timeout_ms in all. Returns
 * 0 when a reply arrived, whatever its status, with it in r; -EIO when the
 * daemon could not be reached or the exchange broke, with the reason in err.
 */
int client_request(struct client *c, const char *method, const char *path, const char *body,
                   long timeout_ms, struct client_reply *r, char *err, size_t errlen);

/**
 * GETs path and hands the body to fn as it arrives while the status is 200,
 * with no overall time limit (an event stream). Any other status collects the
 * body into r as client_request does. Returns 0 when the reply ended, -EIO
 * (reason in err) when the daemon could not be reached or the stream broke,
 * or -ECANCELED when fn stopped it; r->status is set in every case a reply began.
 */
int client_stream(struct client *c, const char *path, client_chunk_fn fn, void *arg,
                  struct client_reply *r, char *err, size_t errlen);

/** Frees what r holds and zeroes it. */
void client_reply_free(struct client_reply *r);

#endif
