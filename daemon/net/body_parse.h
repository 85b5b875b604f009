/*
 * Large request bodies parsed off the loop thread. jansson reads a 3.3 MB
 * topology (32,768 servers) in about 130 ms, all of which would hold every
 * other client, and reading that into a topology's spec another 30 ms. A
 * worker thread of its own (base/worker.h) parses the bodies handed to it, in
 * order, and reads each with its route's prepare (api.h). It touches nothing
 * but the body, and what it builds.
 */
#ifndef OFCD_NET_BODY_PARSE_H
#define OFCD_NET_BODY_PARSE_H

#include <stddef.h>

#include <event2/event.h>
#include <jansson.h>

#include "api/api.h"

struct body_parser;
struct body_job;

/** What the worker made of a body. */
struct body_parsed {
	json_t *value;    /**< the body's value, or NULL when it is not JSON (err says where) */
	json_error_t err; /**< jansson's reason when value is NULL */
	void *prepared;   /**< prepare->read(value) when a prepare was given and read it */
	struct ofcd_error refusal; /**< prepare->read's refusal when prepared is NULL */
};

/**
 * Called on the loop thread once the worker is done with a body: the callee
 * takes value and prepared over (and may clear refusal); the rest is freed.
 */
typedef void (*body_parsed_fn)(void *arg, struct body_parsed *r);

/** Starts the worker, its results delivered on base. NULL when it cannot start. */
struct body_parser *body_parser_new(struct event_base *base);

/**
 * Parses buf (len bytes; taken over, freed once parsed) with jansson's
 * flags, reads the value with prepare (borrowed, static; NULL: none) when it
 * is JSON, then calls done(arg, ...) on the loop thread. Returns the job, for
 * body_parser_cancel() until done is called, or NULL when there is no room
 * (buf is then still the caller's). Loop thread.
 */
struct body_job *body_parser_submit(struct body_parser *p, char *buf, size_t len, size_t flags,
                                    const struct api_prepare *prepare, body_parsed_fn done,
                                    void *arg);

/** The job's requester is gone: done is never called, its value dropped. Loop thread. */
void body_parser_cancel(struct body_job *j);

/** Stops the worker and drops every job left, without their callbacks. NULL is fine. */
void body_parser_free(struct body_parser *p);

#endif
