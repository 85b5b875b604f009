/*
 * OCS driver interface: how the daemon programs one optical circuit switch unit.
 *
 * A driver is a const table of operations (struct ocs_driver_ops) listed in the
 * registry (registry.c). The daemon opens one instance per OCS unit of the
 * topology, with the unit's `endpoint` string, and then talks to it only through
 * these operations. Everything is asynchronous on the daemon's libevent loop: no
 * operation blocks, every result comes back through a callback on the loop thread,
 * and no callback is ever called from inside the call that started the work (it
 * is deferred to the loop), so callers may hold state across the call.
 *
 * Cross-connects are circuits between two OCS ports, always given with a < b.
 * Port numbers are those of the unit (1..ports).
 *
 * Depends only on libevent and this header.
 */
#ifndef OFCD_OCS_DRIVER_H
#define OFCD_OCS_DRIVER_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct event_base;

/** A cross-connect (circuit) between OCS ports a and b, a < b. */
struct ocs_xc {
	uint32_t a; /**< lower port number */
	uint32_t b; /**< higher port number */
};

/** ocs_flow.in_port of an entry that matches every port. */
#define OCS_PORT_ANY 0u
/** ocs_flow.out_port of an entry that may send to every port (flood, all, normal). */
#define OCS_PORT_EVERY 0xffffffffu

/**
 * A one-way switching entry (in_port -> out_port), for entries that do not form
 * a circuit. An entry sending to no other port (drop, controller, back out of
 * in_port) has out_port 0.
 */
struct ocs_flow {
	uint32_t in_port;  /**< ingress port */
	uint32_t out_port; /**< egress port */
};

/**
 * A batch of changes for one unit. The driver applies all deletes before any
 * add (break before make) and commits the batch as one unit of work (OpenFlow:
 * a BARRIER after the last message). Arrays are owned by the caller and only
 * need to live for the duration of the apply() call (drivers copy what they need).
 */
struct ocs_batch {
	/**
	 * Cross-connects to remove: a < b, or, for an entry read back as
	 * partial that holds one port only (a pair without an egress, or from a
	 * port to itself), a = 0 or a = b, naming port b. Only a driver that
	 * reads such entries back is given them.
	 */
	const struct ocs_xc *del;
	size_t ndel;              /**< number of entries in del */
	const struct ocs_xc *add; /**< cross-connects to make */
	size_t nadd;              /**< number of entries in add */
};

/**
 * What a unit holds, as read back. Arrays are owned by the driver and valid only
 * during the read callback; copy what you keep.
 */
struct ocs_readback {
	const struct ocs_xc *xcs;       /**< circuits made by ofcd, both directions present */
	size_t nxcs;                    /**< number of entries in xcs */
	const struct ocs_flow *partial; /**< ofcd entries that do not form a circuit */
	size_t npartial;                /**< number of entries in partial */
	const struct ocs_flow *foreign; /**< entries ofcd did not make: reported, never deleted */
	size_t nforeign;                /**< number of entries in foreign */
};

/** Connection state of a driver instance to its unit's controller. */
enum ocs_conn_state {
	OCS_CONN_DOWN = 0,   /**< not connected; the driver retries with backoff */
	OCS_CONN_CONNECTING, /**< connecting or negotiating */
	OCS_CONN_UP,         /**< connected and ready for apply()/read() */
};

/**
 * Completion of apply(): status 0 when the whole batch is committed, else a
 * negative errno and a message (owned by the driver, valid during the call).
 * After a failure part of the batch may have been applied: read back to know.
 */
typedef void (*ocs_apply_cb)(void *arg, int status, const char *err);

/** Completion of read(): status 0 and rb filled, or a negative errno, rb NULL and a message. */
typedef void (*ocs_read_cb)(void *arg, int status, const char *err, const struct ocs_readback *rb);

/**
 * Events a driver instance reports to the daemon, on the loop thread. Set at
 * open() and kept by the driver; any member may be NULL.
 */
struct ocs_events {
	/** The connection changed state; err says why it went down (NULL otherwise). */
	void (*conn_state)(void *arg, enum ocs_conn_state state, const char *err);
	/** An OCS port's link went up or down (OpenFlow PORT_STATUS). */
	void (*port_state)(void *arg, uint32_t port, bool up);
	void *arg; /**< passed back to every event */
};

/** Parameters for open(); owned by the caller, copied by the driver. */
struct ocs_open_params {
	const char *name;     /**< unit name, for logs */
	const char *endpoint; /**< driver-specific address, e.g. "tcp:127.0.0.1:6653" */
	uint32_t ports;       /**< number of ports of the unit (1..ports) */
	/**
	 * Fencing among several daemons that may reach the same unit. 0 (the
	 * single-node daemon): none, the driver behaves as it always did.
	 * Otherwise the generation of this daemon's leadership, which must grow
	 * with each election (the leader key's create revision,
	 * cluster_generation()): the driver claims the unit for it on every
	 * connection, before reporting UP, and the unit refuses a claim older than
	 * one it has granted. A connection that is refused, or later loses the
	 * unit to a newer generation, is reported DOWN with an error starting
	 * "fenced:", and an apply() in flight then fails with -EPERM; such a
	 * daemon must open a new instance with its new generation once it is
	 * elected again. openflow: ROLE_REQUEST MASTER with this generation_id;
	 * sim (in-process, a single daemon by construction): ignored.
	 */
	uint64_t master_generation;
	/**
	 * Fencing in time: asked right before any byte goes to the unit (a batch,
	 * a read-back, a role request, a keep-alive); while it says false nothing
	 * is sent, what waits is held and asked about again, and the daemon
	 * closes the instance once it stops leading. A leader that wakes past its
	 * lease's deadline sends nothing, whatever work was pending (docs/ha.md).
	 * NULL: always. openflow: checked at every write to the socket; sim
	 * (in-process, a single daemon by construction): ignored.
	 */
	bool (*may_send)(void *arg);
	void *may_send_arg; /**< passed back to may_send */
	/**
	 * The unit's driver settings (the configuration's section named after
	 * the driver, "KEY.UNIT" before "KEY"): returns the value of key or NULL.
	 * Asked only during open(); the driver copies what it keeps. The string
	 * returned is owned by the daemon. NULL: no settings. netconf: key,
	 * known_hosts, model, yang_dir and the model's names (docs/drivers.md);
	 * sim and openflow: none.
	 */
	const char *(*setting)(void *arg, const char *key);
	void *setting_arg; /**< passed back to setting */
};

/** Fault injection, for drivers that support it (sim). */
enum ocs_fault_kind {
	OCS_FAULT_FAIL_BATCHES = 1, /**< the next `count` batches fail without change */
	OCS_FAULT_DISCONNECT,       /**< drop the connection now (it comes back after a delay) */
	OCS_FAULT_PARTIAL,          /**< the next batch applies only its first `count` operations */
	OCS_FAULT_SET_XC,           /**< make cross-connect (a, b) behind the controller's back */
	OCS_FAULT_CLEAR_XC,         /**< remove cross-connect (a, b) behind the controller's back */
	OCS_FAULT_DELAY, /**< set the switching delay per batch to `count` milliseconds */
};

/** One fault to inject; see enum ocs_fault_kind for which fields matter. */
struct ocs_fault {
	enum ocs_fault_kind kind; /**< what to do */
	uint32_t count;           /**< batches, operations or milliseconds */
	uint32_t a;               /**< first port, for SET_XC/CLEAR_XC */
	uint32_t b;               /**< second port, for SET_XC/CLEAR_XC */
};

/** Opaque driver instance. */
struct ocs_handle;

/**
 * The operations of one driver. All are called on the loop thread.
 * Return values are 0 or a negative errno.
 */
struct ocs_driver_ops {
	const char *name; /**< registry name, the unit's `driver` field */

	/**
	 * Checks an endpoint string without opening anything, for validating
	 * topology input. Returns 0 or -EINVAL with a message in err.
	 */
	int (*check_endpoint)(const char *endpoint, char *err, size_t errlen);

	/**
	 * Creates an instance and starts connecting (the connection comes up later,
	 * reported through ev->conn_state). On error returns -errno and a message.
	 * The instance is owned by the caller and released with close().
	 */
	int (*open)(struct event_base *base, const struct ocs_open_params *params,
	            const struct ocs_events *ev, struct ocs_handle **out, char *err, size_t errlen);

	/** Closes the connection and frees the instance. Pending callbacks are never called. */
	void (*close)(struct ocs_handle *h);

	/**
	 * Applies a batch. At most one apply or read is in flight per instance:
	 * returns -EBUSY otherwise, -ENOTCONN when the connection is not up.
	 * On 0, cb is called exactly once (unless close() comes first).
	 */
	int (*apply)(struct ocs_handle *h, const struct ocs_batch *batch, ocs_apply_cb cb,
	             void *arg);

	/** Reads back all cross-connects; same rules as apply(). */
	int (*read)(struct ocs_handle *h, ocs_read_cb cb, void *arg);

	/** Injects a fault (NULL when the driver has no fault injection). */
	int (*inject)(struct ocs_handle *h, const struct ocs_fault *fault);
};

/** Finds a driver by name; NULL when unknown. Any thread. */
const struct ocs_driver_ops *ocs_driver_find(const char *name);

/** NULL-terminated list of all built-in drivers (for listing them). */
extern const struct ocs_driver_ops *const ocs_drivers[];

#endif
