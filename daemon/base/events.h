/*
 * The event bus: the reconciler and the domain publish typed events, and any
 * number of subscribers hear them in the order they were published. The SSE
 * route (api_events.c) is one subscriber per client, ?wait= (wait.c) another.
 * A publisher never knows who listens. Loop thread only; a subscriber's
 * callback must not publish (events are delivered in order, never nested).
 */
#ifndef OFCD_EVENTS_H
#define OFCD_EVENTS_H

#include <jansson.h>
#include <stdbool.h>

struct events;
struct events_sub;

/** What happened. The public kinds are streamed to clients under their names. */
enum events_kind {
	EVENTS_FABRIC_STATE,        /**< a fabric changed state: "fabric_state" */
	EVENTS_OPERATION,           /**< a batch ended: "operation" */
	EVENTS_OCS_CONNECTION,      /**< a unit connected or went away: "ocs_connection" */
	EVENTS_PORT_STATE,          /**< an OCS port went up or down: "port_state" */
	EVENTS_DRIFT,               /**< a unit held something else than last read: "drift" */
	EVENTS_ISOLATION_VIOLATION, /**< a unit joins two tenants: "isolation_violation" */
	EVENTS_CLUSTER_ROLE,        /**< this cluster member's role changed: "cluster_role" */
	/** Internal: fabric states or units' sync may have changed (re-check a condition). */
	EVENTS_SETTLED,
	EVENTS_KIND_COUNT
};

/** Mask bit of a kind, for events_subscribe(). */
#define EVENTS_BIT(kind) (1u << (kind))
/** Every kind streamed to clients. */
#define EVENTS_PUBLIC (EVENTS_BIT(EVENTS_SETTLED) - 1u)

/** One event as subscribers see it; valid during the callback only. */
struct events_msg {
	enum events_kind kind; /**< what happened */
	const char *name;      /**< its stream name ("fabric_state", ...) */
	unsigned long long id; /**< public kinds: increasing per bus, from 1; internal: 0 */
	json_t *data;          /**< the event's object, with "time" (borrowed; do not change) */
};

/** Called for every published event of a subscribed kind. */
typedef void (*events_fn)(void *arg, const struct events_msg *msg);

/** Public events kept for replay (events_replay), oldest dropped first. */
#define EVENTS_HISTORY 4096

/**
 * Creates an empty bus with a new instance tag (events_instance). Returns 0
 * or -ENOMEM.
 */
int events_new(struct events **out);

/**
 * A tag that differs between two buses (two runs of the daemon, even within
 * the same second): event ids are unique only together with it, so a client
 * that reconnects can tell a restart from a gap.
 */
const char *events_instance(const struct events *ev);

/**
 * Calls fn, in order, for every public event of a kind in mask still kept
 * whose id is above after. Returns 0, or -ERANGE when some event above after
 * is no longer kept (or after is an id this bus never gave): the caller
 * missed events it cannot be given.
 */
int events_replay(struct events *ev, unsigned long long after, unsigned mask, events_fn fn,
                  void *arg);

/** Frees the bus. Every subscriber must have left. NULL is fine. */
void events_free(struct events *ev);

/**
 * Adds a subscriber for the kinds in mask (EVENTS_BIT()s). The handle is owned
 * by the bus until events_unsubscribe(). Returns NULL when out of memory.
 */
struct events_sub *events_subscribe(struct events *ev, unsigned mask, events_fn fn, void *arg);

/** Removes a subscriber; safe from inside any subscriber's callback. NULL is fine. */
void events_unsubscribe(struct events *ev, struct events_sub *sub);

/**
 * Publishes an event of kind with object data (stolen; "time" is added; NULL
 * gives an empty object) to every subscriber of that kind.
 */
void events_publish(struct events *ev, enum events_kind kind, json_t *data);

/** The compact JSON text of msg->data (cached per event, owned by the bus). */
const char *events_msg_json(const struct events_msg *msg);

/** The stream name of a kind. */
const char *events_kind_name(enum events_kind kind);

#endif
