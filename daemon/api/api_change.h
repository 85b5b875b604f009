/*
 * The events a committed write makes, so that a watcher (ofcctl --watch, the
 * console, a scheduler's health service) sees every change without reading
 * everything again:
 *   - "fabric": a fabric created, replaced or deleted, or re-planned around
 *     a device that failed or came back;
 *   - "topology": an OCS unit, a server, a switch, the wiring or the whole
 *     topology written and changed;
 *   - "device_state": a server's device failed or came back.
 * Derived from the route and the reply rather than published by each
 * handler, so that no route can forget them, and kept with the write until
 * it is committed (on a cluster member, until the log took it, even when its
 * client went away meanwhile). Loop thread only.
 */
#ifndef OFCD_API_CHANGE_H
#define OFCD_API_CHANGE_H

#include <jansson.h>

struct api_req;
struct events;

/**
 * The events of req's write, which succeeded (2xx) and is about to be
 * committed: an array of {"kind": enum events_kind, "data": {...}}, or NULL
 * when it makes none (not a resource's write, or a replace by what it was:
 * its tag did not change). The caller owns the result.
 */
json_t *api_changes_of(const struct api_req *req);

/** Publishes the events api_changes_of() gave, in order; frees changes (NULL is fine). */
void api_changes_publish(struct events *ev, json_t *changes);

#endif
