/*
 * A client of etcd's v3 JSON gateway on the daemon's libevent loop (evhttp):
 * one request at a time per call, answered through a callback, and watches
 * that stream their events. The client knows several endpoints (the members
 * of one etcd cluster) and moves to the next one when the current one does
 * not answer (connection refused or reset, timeout, 5xx), trying each at most
 * once per call; it stays on the endpoint that answered.
 *
 * A call that failed over may have reached etcd before its answer was lost
 * (its result says resent); callers make their writes safe to repeat (a
 * guarded txn that put the same key and value again is harmless) and read a
 * failed compare of a resent call as "maybe mine". Loop thread only.
 */
#ifndef OFCD_ETCD_H
#define OFCD_ETCD_H

#include <stddef.h>

#include "etcd_proto.h"

struct event_base;
struct etcd_client;
struct etcd_watch;

/**
 * Called once when a call ends. rc is 0 with res parsed (borrowed: valid
 * until the callback returns), -EIO when etcd refused the request (res->error
 * says why), -EPROTO for a reply that is not etcd's, or -EHOSTUNREACH when
 * no endpoint answered. Not called for calls still in flight when the client
 * is freed.
 */
typedef void (*etcd_done_fn)(int rc, const struct etcd_result *res, void *arg);

/**
 * Called for every message of a watch (rc 0, res borrowed: its kvs are the
 * events), and once more with rc < 0 when the stream ends (-EHOSTUNREACH: the
 * endpoint went away; -EPROTO: a message that is not etcd's), after which the
 * watch is over: the caller frees it with etcd_watch_free() and may start
 * another from the last revision it saw.
 */
typedef void (*etcd_event_fn)(int rc, const struct etcd_result *res, void *arg);

/**
 * Creates a client of the n endpoints ("http://HOST:PORT") on base; a call
 * that gets no answer from an endpoint within timeout_s seconds moves on.
 * Returns 0, -EINVAL for an endpoint that is not such a URL, or -ENOMEM.
 */
int etcd_client_new(struct event_base *base, const char (*endpoints)[128], size_t n,
                    unsigned timeout_s, struct etcd_client **out);

/** Frees the client; calls in flight end without their callback. Watches must be freed first. */
void etcd_client_free(struct etcd_client *c);

/**
 * POSTs body (a request of etcd_proto.h; the call takes it and frees it) to
 * path ("/v3/kv/txn") and calls done(rc, res, arg) on the loop, never before
 * etcd_call() has returned (the call is sent from the loop). Returns 0, or
 * -ENOMEM (body freed, done never called).
 */
int etcd_call(struct etcd_client *c, const char *path, char *body, etcd_done_fn done, void *arg);

/**
 * etcd_call(), its first try on the endpoint after the current one: a second
 * try sent while the first may be stuck on a member that hangs (a lease
 * renewal or an append that must not wait out the call timeout). Once it is
 * answered, calls go to the endpoint that answered. Loop thread.
 */
int etcd_call_elsewhere(struct etcd_client *c, const char *path, char *body, etcd_done_fn done,
                        void *arg);

/** The endpoint calls go to now (the last that answered). */
const char *etcd_endpoint(const struct etcd_client *c);

/** How many endpoints the client knows. */
size_t etcd_endpoints(const struct etcd_client *c);

/**
 * Opens a watch stream (body from etcd_req_watch(), taken) on the current
 * endpoint, or the next ones when it cannot connect; fn receives its
 * messages, from the loop once etcd_watch() has returned (the stream is
 * opened from there). Returns 0 and the watch in *out, or -ENOMEM. fn may
 * free the watch with etcd_watch_free().
 */
int etcd_watch(struct etcd_client *c, char *body, etcd_event_fn fn, void *arg,
               struct etcd_watch **out);

/** Closes the stream (fn is not called again) and frees w; NULL is a no-op. */
void etcd_watch_free(struct etcd_watch *w);

#endif
