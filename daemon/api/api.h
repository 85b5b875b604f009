/*
 * The REST request as route handlers see it, and the helpers they use to
 * read input and write the reply.
 *
 * Lifecycle (http.c): route match → auth → media type → body (bounded by
 * [http] max_body) → JSON parse → handler. A handler for a write method runs
 * inside one store transaction that http.c opens before the call and commits
 * (with the audit row) when the reply is a success, or rolls back otherwise:
 * handlers never BEGIN or COMMIT themselves, and an error reply can never leave
 * a partial change behind. A handler either sets the reply before returning or
 * suspends the request (api_suspend) and replies later from another event.
 *
 * Everything runs on the loop thread.
 */
#ifndef OFCD_API_H
#define OFCD_API_H

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <time.h>

#include "base/auth.h"
#include "base/errors.h"

struct api_req;
struct api_stream;
struct desired;
struct domain_units;
struct event_base;
struct events;
struct ofcd_config;
struct reconciler;
struct store;
struct worker;

/**
 * What handlers work with: the daemon's parts, filled in by the composition
 * root (ofcd.c), which owns them; handlers only borrow. Loop thread only.
 */
/** Completion of api_cluster.append: rc 0 and the entry's revision, or -errno. */
typedef void (*api_append_done)(void *arg, int rc, int64_t revision);

/**
 * How a cluster member's writes reach the replicated log before they are
 * acknowledged (docs/ha.md); set by the composition root, NULL in a
 * single-node daemon. Loop thread only.
 */
struct api_cluster {
	/**
	 * Whether this member takes writes now: 0 it does (it leads, caught up
	 * and in touch with etcd); -EREMOTE another member leads, whose advertise
	 * URL is written into leader (len bytes); -EAGAIN no leader is known (an
	 * election is under way); -EHOSTUNREACH etcd cannot be reached or has no
	 * quorum; -EINPROGRESS just elected, still applying the log.
	 */
	int (*gate)(void *arg, char *leader, size_t len);
	/**
	 * Proposes a write's changeset (data, len bytes, copied) to the log. done
	 * runs later on the loop, never from inside: 0 with the change's etcd
	 * revision once it is in the log and applied to this member's store, as
	 * every member applies it; -EREMOTE in the log, but this member stopped
	 * leading and its replica applies it in turn; -EPROTO in the log but not
	 * applicable here (the member hands its leadership over); -ESTALE certainly
	 * not in the log (no longer the leader); -EIO refused by etcd; -ETIMEDOUT
	 * nobody can say. Returns 0, or -EFBIG (larger than the log takes), -ESTALE
	 * (not leading) or -ENOMEM; then done is not called.
	 */
	int (*append)(void *arg, const void *data, size_t len, api_append_done done,
	              void *done_arg);
	/**
	 * Confirms with etcd that this member still leads (a linearizable read
	 * sent now, whatever the monotonic clock says): done(done_arg, rc) runs
	 * later on the loop, 0 when it did, -ESTALE when it no longer leads,
	 * -EHOSTUNREACH when etcd could not say. One at a time. Returns 0,
	 * -ESTALE (not leading: done is not called), -EBUSY or -ENOMEM.
	 */
	int (*confirm)(void *arg, void (*done)(void *done_arg, int rc), void *done_arg);
	/** GET /v1/cluster's body (new reference). */
	json_t *(*status)(void *arg);
	void *arg; /**< passed back to each */
};

struct api_write;

struct api_read;

/** A leader's consistent reads waiting for etcd's word that it still leads (api_dispatch.c). */
struct api_reads {
	struct api_read *head; /**< waiting, oldest first */
	struct api_read *tail; /**< last of them */
	uint64_t sent;         /**< confirmations sent so far */
	bool out;              /**< the last one sent is not answered yet */
};

/** The writes of a cluster member, one in the log's hands at a time (api_dispatch.c). */
struct api_writes {
	struct api_write *current; /**< the write waiting for its append; NULL: none */
	struct api_write *head;    /**< writes waiting their turn, oldest first */
	struct api_write *tail;    /**< last of them */
};

struct api_env {
	struct event_base *base;       /**< the one loop */
	const struct ofcd_config *cfg; /**< configuration in force (a SIGHUP may change it) */
	struct store *store;           /**< the durable desired state */
	struct desired *desired;       /**< the store's circuits in memory */
	struct reconciler *reconciler; /**< live state of the OCS units (read-only for handlers) */
	/** What the domain asks of the units (the reconciler's answers; the root keeps it). */
	const struct domain_units *units;
	struct events *events;             /**< the event bus */
	struct timespec started;           /**< CLOCK_MONOTONIC at start, for uptime */
	bool draining;                     /**< SIGTERM seen: writes and new waits are refused */
	const struct api_cluster *cluster; /**< the replicated log; NULL: a single node */
	struct api_writes writes;          /**< cluster writes in flight (api_dispatch.c's) */
	struct api_reads reads;            /**< consistent reads waiting (api_dispatch.c's) */
	/** Long replies' worker (api_offload()); NULL: they are made on the loop. */
	struct worker *compute;
};

/** Called once when a stream's client is gone or the server ends it. */
typedef void (*api_stream_close_fn)(void *arg);

struct api_transport;

/** A never-ending reply; a transport embeds it as the first member of its own stream. */
struct api_stream {
	const struct api_transport *transport; /**< the transport that made it */
};

/**
 * How a request reaches its client, implemented by the transport (http.c) or
 * by a test: handlers use it only through api_resume(), api_query() and
 * api_stream_*(). Every function runs on the loop thread.
 */
struct api_transport {
	/** Sends the reply of a request that was suspended (see api_suspend). */
	void (*resume)(struct api_req *req);
	/** Value of query parameter key ("" when given without "="), or NULL (owned by the
	 * transport). */
	const char *(*query)(struct api_req *req, const char *key);
	/** Value of request header name (case-insensitive), or NULL (owned by the transport). */
	const char *(*header)(struct api_req *req, const char *name);
	/**
	 * Calls fn with the name of each query parameter, in order, repeats
	 * included, until fn returns false (names owned by the transport).
	 */
	void (*query_names)(struct api_req *req, bool (*fn)(void *arg, const char *name),
	                    void *arg);
	/** See api_stream_start(). */
	struct api_stream *(*stream_start)(struct api_req *req, const char *content_type,
	                                   api_stream_close_fn on_close, void *arg);
	/** See api_stream_write(). */
	int (*stream_write)(struct api_stream *s, const char *data, size_t len);
	/** See api_stream_end(). */
	void (*stream_end)(struct api_stream *s);
};

/** A route handler: reads req, then replies or suspends. */
typedef void (*api_handler)(struct api_req *req);

/**
 * Reads a request's body (NULL when empty) into what its handler takes, for a
 * body too large to read in one loop turn: http.c calls it on its parser's
 * thread (body_parse.h), so it touches nothing but body, which it may change
 * and which outlives its result (the result may point into it), and what it
 * allocates. Returns the result, freed by the route's prepare->free, or NULL
 * with e set to the refusal. See api_prepared().
 */
typedef void *(*api_prepare_fn)(json_t *body, struct ofcd_error *e);

/** A route's body read ahead of its handler (api_prepared()). */
struct api_prepare {
	api_prepare_fn read;          /**< reads the body: any thread */
	void (*free)(void *prepared); /**< frees what read returned */
};

/**
 * Route flags. API_F_PURE: the handler only computes (e.g. POST /v1/plan): it
 * runs without a store transaction and leaves no audit row, like a GET.
 */
#define API_F_PURE 1u

/** One row of the route table (routes.c). */
struct api_route {
	const char *method;  /**< "GET", "POST", "PUT" or "DELETE" */
	const char *pattern; /**< path with {param} segments, e.g. "/v1/ocs/{name}" */
	api_handler handler; /**< the code that serves it */
	enum auth_role role; /**< least role needed when tokens are configured */
	unsigned flags;      /**< API_F_* */
	const char *query;   /**< comma-separated query parameters it takes; NULL: none */
	const struct api_prepare *prepare; /**< reads the body ahead of the handler, or NULL */
};

#define API_MAX_PARAMS 4

/** Called when a suspended request ends without a normal reply (see api_suspend). */
typedef void (*api_abort_fn)(struct api_req *req, bool conn_closed);

/**
 * A write done a part at a time (api_continue()), so that a large one never
 * holds the loop: its parts run in the handler's turn while they fit a few
 * milliseconds, then one turn after another, each turn's in a transaction of
 * its own; meanwhile other writes wait their turn and reads go on. Single
 * node only (a cluster member's write is one entry of its log). Loop thread.
 */
struct api_slices {
	/**
	 * Does the next part in the open transaction; *done once the write is
	 * whole. 0; 1 when the turn should end with this part (its commit costs
	 * as much again); or -errno: the write fails (rolled back, then abandoned).
	 */
	int (*step)(void *arg, bool *done);
	/**
	 * Undoes the parts before, in the open transaction: 0 or -errno. For a
	 * write that goes on (below), finishes it at once instead.
	 */
	int (*abandon)(void *arg);
	/**
	 * Sets the reply: with rc 0 after the last part, inside its transaction
	 * (what the audit records and the events tell; it may hold the request,
	 * as a handler may); with rc < 0, why the write failed.
	 */
	void (*reply)(void *arg, struct api_req *req, int rc);
	/** Frees arg. */
	void (*drop)(void *arg);
	void *arg; /**< what they work on */
	/**
	 * The write cannot be undone once begun (a removal): the handler's reply
	 * is its outcome (audited, and its events told, even when the client
	 * goes away meanwhile); a part that fails makes abandon() finish it.
	 * Otherwise the client's leaving abandons the write.
	 */
	bool goes_on;
};

/** A request. Owned by http.c; valid until it is answered and the connection is done. */
struct api_req {
	struct api_env *env;           /**< what the handler works with (borrowed) */
	const struct api_route *route; /**< matched route */
	const char *method;            /**< request method */
	const char *path;              /**< request path (percent-decoded, no query) */
	/** The client's address as text ("127.0.0.1", "::1"), for the audit trail; NULL when
	 * unknown. */
	const char *client;
	const char *params[API_MAX_PARAMS]; /**< path parameters, in pattern order */
	json_t *body; /**< parsed JSON body (owned by req) or NULL when empty */
	/** The route's prepare->read of body (owned by req, api_prepared_drop()), or NULL. */
	void *prepared;
	/** Its refusal when the transport read it (owned), for api_prepared() to reply. */
	struct ofcd_error *prepare_refusal;
	/** What api_compute_first() computed (owned, api_req_release()), or NULL. */
	void *computed;
	void (*computed_free)(void *computed); /**< frees computed; NULL: nothing to free */
	/**
	 * A write's work to do before its handler writes, as api_compute_first()
	 * recorded it for the dispatch to hand to the worker (owned until then).
	 */
	void (*compute_work)(void *arg, struct api_req *out);
	void (*compute_free)(void *arg); /**< frees compute_arg; NULL: nothing to free */
	void *compute_arg;               /**< compute_work's argument */
	bool computing; /**< a write's work is recorded or on the worker, before it writes */
	/** Its reply or its write's work is being made off the loop: a drain lets it finish. */
	bool offloaded;
	/** Who asked (a copy without the secret, valid for the request); NULL when unauthenticated.
	 */
	const struct auth_token *token;
	/** Where api_begin() copies the token (a SIGHUP reload frees the configuration's). */
	struct auth_token token_copy;
	/* Reply, set through the helpers below. */
	unsigned status;  /**< HTTP status; 0 while unanswered */
	json_t *reply;    /**< JSON reply (owned by req) */
	char *reply_text; /**< non-JSON reply (owned by req: see api_reply_text_drop()) */
	size_t reply_len; /**< length of reply_text */
	/** How reply_text is released when not by free(): reply_text_free(reply_text_cls). */
	void (*reply_text_free)(void *cls);
	void *reply_text_cls;     /**< reply_text_free's argument */
	const char *content_type; /**< type of reply_text (static string) */
	/**
	 * Reply headers the transport sends with the reply, "" for none: the
	 * object's entity tag (quoted, see api_set_etag()) and, on a 201, where the
	 * new object lives (api_set_location()). An error reply clears both.
	 */
	char etag[40];
	char location[512]; /**< see etag (also a 307's URL on the leader) */
	/**
	 * The object's tag before a write, as api_if_match() found it ("" when
	 * there was none or the handler did not look): a replace that leaves the
	 * tag as it was changed nothing (api_change.h).
	 */
	char etag_before[40];

	/* Suspension, see api_suspend(). */
	bool suspended; /**< waiting for an event to reply */
	/**
	 * A write whose change is not all in the store yet (api_dispatch.c): a
	 * cluster member's on its way to the replicated log, or a large one stored
	 * a part per loop turn (api_continue()). Whoever holds the request (a
	 * ?wait=) must not answer until this is false, and a drain lets it end.
	 */
	bool replicating;
	/** Set by api_continue(): the rest of the write, for the dispatch to store. */
	struct api_slices slices;
	/**
	 * Set by a handler: called once the request's change is committed (on a
	 * cluster member, after the log took it), before the reconciler hears of
	 * it; never for a change rolled back or refused. NULL: none.
	 */
	void (*committed)(struct api_req *req);
	api_abort_fn on_abort; /**< called if it must end early */
	void *wait_arg;        /**< owned by whoever suspended the request */

	const struct api_transport *transport; /**< how the reply travels (borrowed) */
	void *transport_arg;                   /**< the transport's private part */
};

/** Replies status with the JSON value body (stolen; NULL gives an empty object). */
void api_reply(struct api_req *req, unsigned status, json_t *body);

/**
 * Replies a non-JSON body that stays another owner's until free_fn(cls) releases it, after
 * the reply is sent or dropped: text is not copied (a store snapshot of hundreds of MiB).
 */
void api_reply_text_owned(struct api_req *req, unsigned status, const char *content_type,
                          const char *text, size_t len, void (*free_fn)(void *cls), void *cls);

/** Releases req's non-JSON reply however it is owned (free(), or its reply_text_free). */
void api_reply_text_drop(struct api_req *req);

/** Replies a non-JSON body (text is stolen, malloc'd) with the given content type. */
void api_reply_text(struct api_req *req, unsigned status, const char *content_type, char *text,
                    size_t len);

/**
 * Replies with the error object {"error": {"code", "message", "field"?}}:
 * status and code from the error table, field when one is to blame.
 */
void api_error(struct api_req *req, enum ofcd_err err, const char *field, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));

/** api_error() plus "details" (stolen) inside the error object. */
void api_error_details(struct api_req *req, enum ofcd_err err, const char *field, json_t *details,
                       const char *fmt, ...) __attribute__((format(printf, 5, 6)));

/** Replies with a domain module's refusal (its details are moved into the reply). */
void api_fail(struct api_req *req, struct ofcd_error *e);

/**
 * A JSON reply as the transport sends it: compact, reals to 15 significant
 * digits, a newline. Returns malloc'd text and its length, or NULL (out of
 * memory). Any thread, on a value no other thread holds.
 */
char *api_json_text(const json_t *reply, size_t *len);

/**
 * Replies on out as a handler replies on its request; called on the compute
 * worker's thread (api_offload()). out is a bare request: no transport, env,
 * params, body or query; only api_reply*(), api_error*() and api_fail().
 */
typedef void (*api_offload_fn)(void *arg, struct api_req *out);

/**
 * Makes req's reply off the loop (base/worker.h): a handler checks the
 * request and copies what it needs from the store into arg, then hands the
 * long part (a plan of 65,536 servers, a 4,096-stage pipeline's 7 MB of
 * JSON) to work, which replies on its own bare request; a JSON reply is
 * written out as text there too. Then, on the loop, req takes that reply
 * and is sent. free_arg(arg) is called once, on the loop thread, whatever
 * becomes of req (its client may go first). The reply's text is freed on
 * the worker (worker_free_later()), which must outlive the request. Without
 * a worker (env->compute NULL) the work runs at once. When the worker has too many requests in
 * hand, req gets 503 overloaded. Loop thread, from a handler, which must
 * return without replying after it.
 */
void api_offload(struct api_req *req, api_offload_fn work, void (*free_arg)(void *arg), void *arg);

/** How api_offload_then()'s work ended, for its then. */
enum api_offload_end {
	API_OFFLOAD_DONE,    /**< done without a reply: req->computed holds arg (and frees it) */
	API_OFFLOAD_REFUSED, /**< the work replied, or could not be handed over: req has it */
	API_OFFLOAD_GONE,    /**< req's client went away first: nobody hears */
	API_OFFLOAD_STOPPED, /**< the daemon ends req first (a drain): its reply is set */
};

/**
 * Called on the loop once api_offload_then()'s work is over, instead of
 * sending the work's reply. DONE and REFUSED come before api_offload_then()
 * returns when the work ran at once (no worker) or could not be handed over,
 * so req is suspended only when the work ran off the loop; GONE and STOPPED
 * come from the request's abort, which then ends it (the callee must not
 * resume it).
 */
typedef void (*api_offload_then_fn)(struct api_req *req, enum api_offload_end end);

/**
 * Whether the compute worker is full: then req gets 503 overloaded and true
 * is returned. A handler that will hand work over asks first, before it
 * reads what it would copy (a client that tries again must not cost the
 * loop those reads each time). Loop thread.
 */
bool api_offload_full(struct api_req *req);

/** api_offload() with what follows the work left to then (the dispatch's writes). */
void api_offload_then(struct api_req *req, api_offload_fn work, void (*free_arg)(void *arg),
                      void *arg, api_offload_then_fn then);

/**
 * For a write whose handler has long work to do before it writes (a
 * calibration's fit over 4,000 runs: 130-800 ms): called from the handler,
 * which must have written nothing yet, it records work for the dispatch,
 * which drops the write's transaction, hands work to the compute worker
 * (api_offload_then()) and lets the other writes go on. When work replied on
 * out (a refusal), that is the reply, audited as a refused write. Otherwise
 * the write is dispatched again in its turn (on a cluster, on the member that
 * leads then) and its handler runs again with api_computed(req) = arg, and
 * writes. free_arg(arg) is called once, on the loop thread, whatever becomes
 * of req. Loop thread, from a write's handler, which must return without
 * replying after it.
 */
void api_compute_first(struct api_req *req, api_offload_fn work, void (*free_arg)(void *arg),
                       void *arg);

/** What api_compute_first() computed for req; NULL in its handler's first run. */
void *api_computed(struct api_req *req);

/**
 * Requests the compute worker takes in hand at most (waiting or running):
 * one runs at a time, and each waiting one holds what it read (a schedule's
 * fabric view: up to 32 MiB at 2,048 servers).
 */
#define API_OFFLOAD_MAX_IN_HAND 8

/** Shows api_offload()'s counters at zero before their first use. Loop thread. */
void api_offload_metrics_init(void);

/*
 * Entity tags. An object stored with a revision (fabric, OCS unit, server,
 * switch) is tagged "REVISION"; a view without one (the topology, the
 * wiring) is tagged by a hash of its JSON, so equal content gives an equal
 * tag. A PUT or DELETE with If-Match is carried out only when the tag
 * matches (RFC 9110: "*" matches any existing object); otherwise 412
 * precondition_failed, carrying the current tag.
 */

/** Sets the reply's ETag to the revision of the object it shows. */
void api_set_etag(struct api_req *req, int64_t revision);

/** Sets the reply's ETag to a hash of a view written as text (its writer's one form). */
void api_set_etag_text(struct api_req *req, const char *text, size_t len);

/** Where api_text_hash() starts (FNV-1a's offset basis). */
#define API_TEXT_HASH_START 14695981039346656037ull

/**
 * The hash api_set_etag_text() tags a text by, taken a piece at a time: h is
 * API_TEXT_HASH_START or what the text's pieces before gave. Any thread.
 */
uint64_t api_text_hash(uint64_t h, const char *text, size_t n);

/** The tag of a text whose api_text_hash() is hash: as api_set_etag_text() would set it. */
void api_set_etag_hash(struct api_req *req, uint64_t hash);

/**
 * Checks If-Match against an object's revision (0: there is no such object).
 * Returns 0 when the request may go on (no If-Match, or it matches), or
 * -EINVAL with the reply set: 412 precondition_failed, or 400 invalid_field
 * naming If-Match when the header is not "*" or a list of quoted tags.
 */
int api_if_match(struct api_req *req, int64_t revision);

/** Same as api_if_match() for a view tagged by its text (api_set_etag_text(); NULL: none). */
int api_if_match_text(struct api_req *req, const char *text, size_t len);

/** Sets the reply's Location header (a path such as /v1/fabrics/job-a). */
void api_set_location(struct api_req *req, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));

/** Value of query parameter key ("" when given without "="), or NULL when absent. */
const char *api_query(struct api_req *req, const char *key);

/** Value of request header name (case-insensitive), or NULL. */
const char *api_header(struct api_req *req, const char *name);

/**
 * Answers req with a response that never ends by itself (200, chunked, of the
 * given content type, e.g. text/event-stream): data is sent as it is written.
 * The stream is owned by the transport; on_close(arg) runs once when it is
 * over, after which the pointer is invalid. Returns NULL on allocation failure
 * (then req carries a 500).
 */
struct api_stream *api_stream_start(struct api_req *req, const char *content_type,
                                    api_stream_close_fn on_close, void *arg);

/**
 * Queues data on the stream. A client that lets more than 1 MiB pile up is too
 * slow: its stream is ended and -ENOBUFS returned. Returns 0 otherwise.
 */
int api_stream_write(struct api_stream *s, const char *data, size_t len);

/** Ends a stream once its queued data is sent. */
void api_stream_end(struct api_stream *s);

/**
 * Runs a parsed request (route, params, token, body set; status 0) as one unit
 * of work: a write runs its handler inside one store transaction, committed
 * with its audit row only when the reply is a success, rolled back otherwise
 * with the refusal audited. Reads and API_F_PURE
 * routes run without a transaction. On return the reply is set, or the
 * request is suspended.
 */
void api_dispatch(struct api_req *req);

/**
 * The request's policy once its headers are in, before its body is read:
 * the route (404; 405; OPTIONS answered 204), the bearer token against the
 * configuration's (401, 403; everyone is admin without tokens), the names of
 * the query parameters (400: unknown or repeated), a write while the daemon
 * drains (503), the media type of a POST or PUT (415). req's env, method,
 * path, client and transport must be set; the path parameters are cut from a
 * copy of the path in buf (buflen bytes, which must live as long as req), and
 * allow gets the path's methods for an Allow header (allowlen bytes). True
 * when the request goes on to its body; false with the refusal as its reply
 * (for api_audit_refusal()). The transport only moves bytes: it calls this
 * and then api_dispatch().
 */
bool api_begin(struct api_req *req, char *buf, size_t buflen, char *allow, size_t allowlen);

/**
 * The API's word on a request whose turn comes (part of api_begin(), and again
 * for a cluster write that waited): false (with the reply set) for a write
 * arriving while the daemon drains. A write admitted earlier still runs:
 * in-flight requests finish.
 */
bool api_admit(struct api_req *req);

/**
 * Records a refused write (auth, media type, size, a handler's 4xx, the
 * cluster's refusals) in the audit trail; reads, pure routes and writes
 * redirected to the leader (307, audited there) leave no row.
 */
void api_audit_refusal(struct api_req *req);

/**
 * Holds the request (the connection is suspended: no thread waits). Before
 * suspending, the handler sets the reply it would give now (for a write, that
 * status is what the transaction commits and the audit records). Later, from
 * any event on the loop, update the reply and call api_resume(). If the
 * request must end first, on_abort is called once: conn_closed = true when
 * the client went away or the change could not be stored (forget the request;
 * it is freed after the call); false when the daemon shuts down (refresh the
 * reply and forget the request; http.c sends it).
 */
void api_suspend(struct api_req *req, api_abort_fn on_abort, void *arg);

/** Sends the reply of a suspended request. */
void api_resume(struct api_req *req);

/**
 * From a write's handler on a single node: the write is done by rest's
 * parts (struct api_slices), from this turn on, instead of by the handler;
 * the handler sets a placeholder reply below 400 and returns. rest->arg is
 * the dispatch's to drop from then on.
 */
void api_continue(struct api_req *req, const struct api_slices *rest);

/*
 * Input helpers: the checks of jsonin.h, each turning a failure into the
 * reply 400 invalid_field naming the member (prefix + "." + key when prefix
 * is set) and returning -EINVAL, so a handler can write:
 *     if (api_get_uint(req, body, NULL, "ports", true, 1, 4096, &ports) < 0) return;
 * Unless required, a missing member leaves *out untouched and returns 1.
 */

/** The body as an object, or 400 (invalid_json when empty, invalid_field when not an object). */
json_t *api_body_object(struct api_req *req);

/** api_body_object()'s check without a request: 0, or -EINVAL with e set. Any thread. */
int api_body_check(const json_t *body, struct ofcd_error *e);

/**
 * What the route's prepare made of the body: made now if the transport did
 * not (a small body), or NULL with the refusal replied. The handler asks when
 * its order of checks says (a stale If-Match may come first). Loop thread.
 */
void *api_prepared(struct api_req *req);

/** Frees req->prepared and its refusal. */
void api_prepared_drop(struct api_req *req);

/**
 * Frees what req holds besides its body and reply: what its route prepared,
 * and what api_compute_first() was given or computed. The transport calls it
 * when the request is done.
 */
void api_req_release(struct api_req *req);

/**
 * The body of a PUT to /v1/KIND/{name} as an object whose "name" is the
 * path's (req->params[0]), put in when absent: a name in the body must be
 * the same, or 400. The handler checks the name like any other (so a bad
 * name in the path is refused too). NULL after replying.
 */
json_t *api_put_body(struct api_req *req);

/** An integer member within [min, max]. */
int api_get_uint(struct api_req *req, json_t *obj, const char *prefix, const char *key,
                 bool required, uint64_t min, uint64_t max, uint64_t *out);

/** A number member (integer or real), finite, within [min, max]. */
int api_get_double(struct api_req *req, json_t *obj, const char *prefix, const char *key,
                   bool required, double min, double max, double *out);

/** A boolean member. */
int api_get_bool(struct api_req *req, json_t *obj, const char *prefix, const char *key,
                 bool required, bool *out);

/** A string member of 1..maxlen bytes; *out points into obj. */
int api_get_string(struct api_req *req, json_t *obj, const char *prefix, const char *key,
                   bool required, size_t maxlen, const char **out);

/** A name member: 1..64 characters of [A-Za-z0-9._-]. */
int api_get_name(struct api_req *req, json_t *obj, const char *prefix, const char *key,
                 bool required, const char **out);

/** A string member that must be one of the NULL-terminated choices; *out is its index. */
int api_get_enum(struct api_req *req, json_t *obj, const char *prefix, const char *key,
                 bool required, const char *const *choices, int *out);

/**
 * Rejects members of obj not listed in the NULL-terminated allowed list
 * (400 invalid_field naming the first unknown one): a misspelt option is an
 * error, not silently ignored. A null member is refused too, unless its
 * allowed name ends in '?' ("switch?"): null is then its documented "none"
 * and the member is removed, so the getters see it absent.
 */
int api_check_members(struct api_req *req, json_t *obj, const char *prefix,
                      const char *const *allowed);

/** Builds "prefix.key" (or "key") into buf for messages. */
const char *api_field(char *buf, size_t len, const char *prefix, const char *key);

/** Routes and their matching (routes.c). */

/** The route table, terminated by an entry with method NULL. */
extern const struct api_route api_routes[];

/**
 * Finds the route for method and path and fills params (pointers into
 * buf, a copy of path of buflen bytes); HEAD finds the GET route. Returns the
 * route, or NULL with *path_known telling whether another method would match
 * (then allow gets the comma-separated list of methods for the Allow header:
 * the routes' methods, HEAD beside GET, and OPTIONS).
 */
const struct api_route *api_route_match(const char *method, const char *path, char *buf,
                                        size_t buflen, const char *params[API_MAX_PARAMS],
                                        bool *path_known, char *allow, size_t allowlen);

#endif
