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
	EVENTS_DEVICE_STATE,        /**< a server's device failed or came back: "device_state" */
	EVENTS_CLUSTER_ROLE,        /**< this cluster member's role changed: "cluster_role" */
	EVENTS_FABRIC,              /**< a fabric was created, replaced or deleted: "fabric" */
	EVENTS_TOPOLOGY,            /**< a unit, server, switch or the wiring changed: "topology" */
	/** Internal: fabric states or units' sync may have changed (re-check a condition). */
	EVENTS_SETTLED,
	EVENTS_KIND_COUNT
};

/** Mask bit of a kind, for events_subscribe(). */
#define EVENTS_BIT(kind) (1u << (kind))
/** Every kind streamed to clients. */
#define EVENTS_PUBLIC (EVENTS_BIT(EVENTS_SETTLED) - 1u)

/** Longest instance tag, with its NUL. */
#define EVENTS_INSTANCE_MAX 24

/** One event as subscribers see it; valid during the callback only. */
struct events_msg {
	enum events_kind kind; /**< what happened */
	const char *name;      /**< its stream name ("fabric_state", ...) */
	/**
	 * Its id is "INSTANCE-ID": id increases from 1 within an instance; 0 for an
	 * event that has none (internal kinds, and a cluster member's own ones).
	 */
	unsigned long long id;
	const char *instance; /**< the instance of its id ("" when it has none) */
	json_t *data;         /**< the event's object, with "time" (borrowed; do not change) */
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
 * The tag of the ids this bus gives now: it differs between two buses (two
 * runs of the daemon, even within the same second), so a client that
 * reconnects can tell a restart from a gap.
 */
const char *events_instance(const struct events *ev);

/**
 * Gives ids under instance (at most EVENTS_INSTANCE_MAX - 1 characters) from
 * now on, starting again from 1: a cluster leader's leadership ("g" and its
 * generation), whose ids its followers publish its events under too.
 */
void events_set_instance(struct events *ev, const char *instance);

/**
 * The kinds in mask are this bus's own from now on: published without an id
 * and not kept for replay (a cluster member's role: the other members'
 * streams do not have it, and ids must mean the same on every member).
 */
void events_set_own(struct events *ev, unsigned mask);

/**
 * Calls fn, in order, for every event of a kind in mask still kept that was
 * published after the one whose id is last ("INSTANCE-ID", as a stream
 * shows it). Returns 0, or -ERANGE when that event is no longer kept, or was
 * never published here: the caller missed events it cannot be given.
 */
int events_replay(struct events *ev, const char *last, unsigned mask, events_fn fn, void *arg);

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

/**
 * Publishes an event that another bus published first, under its id
 * (instance, id; id above 0) and with its data (stolen, "time" kept): a
 * cluster follower's copy of its leader's event, so that a client can resume
 * a stream of one member on another.
 */
void events_publish_as(struct events *ev, enum events_kind kind, const char *instance,
                       unsigned long long id, json_t *data);

/** The kind named name ("fabric_state", ...), or EVENTS_KIND_COUNT. */
enum events_kind events_kind_of(const char *name);

/** The compact JSON text of msg->data (cached per event, owned by the bus). */
const char *events_msg_json(const struct events_msg *msg);

/** The stream name of a kind. */
const char *events_kind_name(enum events_kind kind);

#endif
