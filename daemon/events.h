/*
 * Change events for schedulers: fabric state changes, operation results, OCS
 * connects and disconnects, drift repairs and isolation violations, streamed
 * as Server-Sent Events on GET /v1/events. Loop thread only.
 */
#ifndef OFCD_EVENTS_H
#define OFCD_EVENTS_H

#include <jansson.h>

struct ofcd;
struct api_req;
struct events;

/** Creates the subscriber list and its keep-alive timer. Returns 0 or -ENOMEM. */
int events_init(struct ofcd *d, struct events **out);

/** Ends every stream (shutdown, before the HTTP server stops). */
void events_close_all(struct events *ev);

/** Frees the list. Streams must already be gone (http_destroy first). */
void events_free(struct events *ev);

/**
 * Sends event `type` with object data (stolen; "time" is added) to every
 * subscriber whose filter matches: a subscriber with ?fabric=NAME gets only
 * events whose "fabric" is NAME or whose "fabrics" array holds it.
 */
void events_emit(struct events *ev, const char *type, json_t *data);

#endif
