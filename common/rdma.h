/*
 * RDMA inventory: the model of a host's RDMA devices and ports, its JSON form,
 * and the one small interface behind which the inventory is read.
 *
 * Two sources implement the interface: "verbs" (rdma_verbs.c, libibverbs: the
 * real one) and "recorded" (rdma_recorded.c: an inventory JSON file and an
 * event script, for tests and demos on machines without RDMA hardware), found
 * by name in the registry (rdma_source.c). Both build on the model in rdma.c,
 * which knows neither. The agent reads through the interface; the
 * controller's GET /v1/rdma/devices calls rdma_verbs_read().
 *
 * The model keeps the verbs attribute codes as they come from the kernel;
 * rdma.c converts them to names, Gb/s and bytes for JSON and back. This header
 * does not include <infiniband/verbs.h>: the codes are plain integers whose
 * values are those of the verbs enums.
 *
 * Everything runs on the caller's (loop) thread; nothing here is thread-safe.
 */
#ifndef OFCD_RDMA_H
#define OFCD_RDMA_H

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct event_base;

#define RDMA_NAME_MAX    64   /**< device name buffer (IBV_SYSFS_NAME_MAX), with the NUL */
#define RDMA_FW_MAX      64   /**< firmware version buffer, with the NUL */
#define RDMA_PCI_MAX     32   /**< PCI address buffer ("0000:3b:00.0"), with the NUL */
#define RDMA_REASON_MAX  256  /**< reason and error buffers, with the NUL */
#define RDMA_MAX_DEVICES 1024 /**< devices in one inventory */
#define RDMA_MAX_PORTS   255  /**< ports of one device (port numbers are 8 bits) */
#define RDMA_MAX_GIDS    64   /**< populated GIDs reported per port */
#define RDMA_GID_STRLEN  40   /**< "fe80:0000:0000:0000:0002:c903:00f1:2345" and NUL */
#define RDMA_GUID_STRLEN 20   /**< "0002:c903:00f1:2345" and NUL */

/** Stands for an attribute code the kernel gave but this build has no name for. */
#define RDMA_CODE_UNKNOWN 0xff

/** One populated GID table entry. */
struct rdma_gid {
	uint16_t index;  /**< index in the port's GID table */
	uint8_t raw[16]; /**< the GID, network byte order */
};

/** One port of a device, from ibv_query_port() and ibv_query_gid(). */
struct rdma_port {
	uint8_t num;           /**< port number, from 1 */
	int32_t index;         /**< the server's device index this port serves; -1 unmapped */
	uint8_t state;         /**< enum ibv_port_state (4 = active) or RDMA_CODE_UNKNOWN */
	uint8_t phys_state;    /**< physical state (5 = link up) or RDMA_CODE_UNKNOWN */
	uint8_t mtu;           /**< active MTU as enum ibv_mtu (1 = 256 ... 5 = 4096), 0 unknown */
	uint16_t speed;        /**< active_speed bit (1 SDR ... 128 NDR, 256 XDR), 0 unknown */
	uint8_t width;         /**< active_width bit (1 1x, 2 4x, 4 8x, 8 12x, 16 2x), 0 unknown */
	uint8_t link_layer;    /**< IBV_LINK_LAYER_* (0 unspecified, 1 InfiniBand, 2 Ethernet) */
	size_t ngids;          /**< entries in gids */
	struct rdma_gid *gids; /**< populated GIDs by index (malloc'd, owned by the port) */
};

/** One RDMA device, from ibv_query_device(). */
struct rdma_device {
	char name[RDMA_NAME_MAX];    /**< kernel name, e.g. "mlx5_0" */
	char pci[RDMA_PCI_MAX];      /**< PCI address, "" when unknown */
	char fw_ver[RDMA_FW_MAX];    /**< firmware version as the driver reports it */
	uint64_t node_guid;          /**< node GUID, host byte order */
	uint32_t vendor_id;          /**< IEEE OUI of the vendor (0x02c9 Mellanox) */
	uint32_t vendor_part_id;     /**< vendor's part id (4123 ConnectX-6) */
	uint8_t phys_port_cnt;       /**< ports the device has */
	bool fatal;                  /**< the device reported IBV_EVENT_DEVICE_FATAL */
	char error[RDMA_REASON_MAX]; /**< why it could not be read, "" when it could */
	size_t nports;               /**< entries in ports */
	struct rdma_port *ports;     /**< ports by number (malloc'd, owned by the device) */
};

/** What a host has. Owned by whoever filled it: release with rdma_inventory_free(). */
struct rdma_inventory {
	bool rdma;                    /**< RDMA is usable on the host (a device list was read) */
	char reason[RDMA_REASON_MAX]; /**< when rdma is false: why, e.g. "no RDMA device found" */
	size_t ndevices;              /**< entries in devices */
	struct rdma_device *devices;  /**< devices (malloc'd, owned by the inventory) */
};

/* ---- attribute codes ----------------------------------------------------- */

/** Signalling rate of one lane for an active_speed code in Gb/s (as ibv_devinfo), 0 unknown. */
double rdma_speed_lane_gbps(unsigned code);

/** Name of an active_speed code ("SDR" ... "NDR", "XDR"), "unknown" otherwise. Static. */
const char *rdma_speed_name(unsigned code);

/** Lanes of an active_width code (1, 2, 4, 8, 12), 0 unknown. */
unsigned rdma_width_lanes(unsigned code);

/** Name of an active_width code ("1x", "2x", "4x", "8x", "12x"), "unknown" otherwise. Static. */
const char *rdma_width_name(unsigned code);

/** Link rate in Gb/s: lanes of width times the lane rate of speed; 0 when either is unknown. */
double rdma_rate_gbps(unsigned speed, unsigned width);

/** Bytes of an enum ibv_mtu value (256 ... 4096), 0 unknown. */
unsigned rdma_mtu_bytes(unsigned code);

/** Name of a port state ("down", "init", "armed", "active", ...), "unknown" otherwise. Static. */
const char *rdma_port_state_name(unsigned state);

/** Name of a physical port state ("sleep", "polling", "disabled", "link_up", ...). Static. */
const char *rdma_phys_state_name(unsigned phys_state);

/** Name of a link layer ("unspecified", "infiniband", "ethernet"), "unknown" otherwise. Static. */
const char *rdma_link_layer_name(unsigned link_layer);

/** Writes the GID as 8 groups of 4 lower-case hex digits joined by ':' (as ibv_devinfo). */
void rdma_gid_format(const uint8_t raw[16], char out[RDMA_GID_STRLEN]);

/** Parses the form rdma_gid_format() writes (either case). Returns 0 or -EINVAL. */
int rdma_gid_parse(const char *s, uint8_t raw[16]);

/** True when every byte of the GID is zero (an unpopulated table entry). */
bool rdma_gid_is_zero(const uint8_t raw[16]);

/** Writes a GUID as 4 groups of 4 lower-case hex digits joined by ':' (as ibv_devinfo). */
void rdma_guid_format(uint64_t guid, char out[RDMA_GUID_STRLEN]);

/** Parses the form rdma_guid_format() writes (either case). Returns 0 or -EINVAL. */
int rdma_guid_parse(const char *s, uint64_t *guid);

/** True when the port can carry traffic: state active and its device neither fatal nor failed. */
bool rdma_port_is_up(const struct rdma_device *dev, const struct rdma_port *port);

/* ---- the model ----------------------------------------------------------- */

/** Releases everything inv owns and leaves it empty ({rdma false, no devices}). */
void rdma_inventory_free(struct rdma_inventory *inv);

/** Deep copy of src into dst (dst is overwritten, not freed). Returns 0 or -ENOMEM. */
int rdma_inventory_copy(struct rdma_inventory *dst, const struct rdma_inventory *src);

/** Finds a device by name, or NULL. */
struct rdma_device *rdma_inventory_device(const struct rdma_inventory *inv, const char *name);

/** Finds a port of a device by number, or NULL. */
struct rdma_port *rdma_device_port(const struct rdma_device *dev, unsigned num);

/**
 * JSON flag: the form an agent reports (PUT /v1/servers/{name}/inventory),
 * where each port may carry the server's device "index" and the top level the
 * agent's heartbeat "interval". Without it both members are refused.
 */
#define RDMA_JSON_REPORT 1u

/**
 * The inventory as JSON: {"rdma", "reason", "devices": [{"name", "pci",
 * "fw_ver", "node_guid", "vendor_id", "vendor_part_id", "phys_port_cnt",
 * "fatal", "error", "ports": [{"port", "state", "phys_state", "mtu", "speed",
 * "lane_gbps", "width", "rate_gbps", "link_layer", "gids": [{"index",
 * "gid"}]}]}]}. With RDMA_JSON_REPORT each mapped port also has "index".
 * Returns a new reference (NULL only when out of memory).
 */
json_t *rdma_inventory_to_json(const struct rdma_inventory *inv, unsigned flags);

/**
 * Parses the JSON form strictly into inv (which the caller then owns): every
 * member typed and bounded (at most RDMA_MAX_DEVICES devices, RDMA_MAX_PORTS
 * ports per device, RDMA_MAX_GIDS GIDs per port), unknown members refused,
 * device names and port numbers unique. "lane_gbps" and "rate_gbps" are
 * derived: they must be numbers and are recomputed. With RDMA_JSON_REPORT,
 * *interval gets "interval" (1 to 86400 s, default 10; may be NULL otherwise).
 * Returns 0, or -EINVAL with the member to blame in field (e.g.
 * "devices[1].ports[0].gids[2].gid") and the reason in err; inv is then empty.
 */
int rdma_inventory_from_json(json_t *j, unsigned flags, struct rdma_inventory *inv,
                             unsigned *interval, char *field, size_t fieldlen, char *err,
                             size_t errlen);

/* ---- sources ------------------------------------------------------------- */

/** Asynchronous events a source reports. */
enum rdma_event_kind {
	RDMA_EV_PORT_ERR,     /**< IBV_EVENT_PORT_ERR: the port's link went down */
	RDMA_EV_PORT_ACTIVE,  /**< IBV_EVENT_PORT_ACTIVE: the port's link is up */
	RDMA_EV_DEVICE_FATAL, /**< IBV_EVENT_DEVICE_FATAL: the device is dead until reset */
};

/** Script name of an event: "port_err", "port_active", "device_fatal". Static. */
const char *rdma_event_name(enum rdma_event_kind kind);

/**
 * Called on the loop thread for every event, after the source's state already
 * reflects it (a query from inside the callback sees the change). port is 0
 * for RDMA_EV_DEVICE_FATAL. device is valid during the call only.
 */
typedef void (*rdma_event_fn)(void *arg, const char *device, unsigned port,
                              enum rdma_event_kind kind);

/** What a source is opened with. Strings are read during open only. */
struct rdma_source_conf {
	const char *inventory_path; /**< recorded: the inventory JSON file (required) */
	const char *events_path;    /**< recorded: the event script, NULL for none */
};

struct rdma_source_ops;

/** An open source; each implementation embeds this as its first member. */
struct rdma_source {
	const struct rdma_source_ops *ops; /**< the implementation */
};

/** A source of inventory and events. */
struct rdma_source_ops {
	const char *name; /**< "verbs" or "recorded", as in [agent] source */
	/**
	 * Opens the source on base (its events become libevent events there; NULL
	 * base: no events). cb(arg, ...) gets the events. Returns 0 and the source
	 * in *out (owned by the caller: close it), or -errno with a message in err.
	 * Having no RDMA device is not an error: query reports it.
	 */
	int (*open)(struct event_base *base, const struct rdma_source_conf *conf, rdma_event_fn cb,
	            void *arg, struct rdma_source **out, char *err, size_t errlen);
	/** Fills out (owned by the caller) with the current inventory. Returns 0 or -ENOMEM. */
	int (*query)(struct rdma_source *src, struct rdma_inventory *out);
	/** Closes the source; no callback runs afterwards. NULL is fine. */
	void (*close)(struct rdma_source *src);
};

/** libibverbs: the real source (rdma_verbs.c). */
extern const struct rdma_source_ops rdma_verbs_source;
/** A recorded inventory file and event script (rdma_recorded.c). */
extern const struct rdma_source_ops rdma_recorded_source;

/** The source of that name ("verbs", "recorded"), or NULL (rdma_source.c, the registry). */
const struct rdma_source_ops *rdma_source_find(const char *name);

/**
 * Reads this host's inventory once through libibverbs (opens, queries and
 * closes every device): what GET /v1/rdma/devices shows. Returns 0 or -ENOMEM;
 * no device or no RDMA support is {"rdma": false, "reason"}, not an error.
 */
int rdma_verbs_read(struct rdma_inventory *out);

/** One line of an event script: at at_ms after the source opened, event on device:port. */
struct rdma_script_event {
	uint32_t at_ms;             /**< milliseconds after open */
	char device[RDMA_NAME_MAX]; /**< device name */
	uint8_t port;               /**< port number; 0 for device_fatal */
	enum rdma_event_kind kind;  /**< what happens */
};

/**
 * Parses an event script: lines "DELAY_MS DEVICE PORT EVENT" (EVENT one of
 * port_err, port_active, device_fatal; DELAY_MS from the source's start, never
 * decreasing; PORT ignored by device_fatal but must be a number), '#' comments
 * and blank lines. Every device and port must exist in inv. Returns 0 with a
 * malloc'd array in *out (caller frees) and its length in *n, or -EINVAL with
 * "NAME:LINE: reason" in err.
 */
int rdma_script_parse(const char *text, const char *name, const struct rdma_inventory *inv,
                      struct rdma_script_event **out, size_t *n, char *err, size_t errlen);

/**
 * Applies one event to a recorded inventory: port_err takes the port down
 * (state down, physical state polling), port_active brings it up (active,
 * link up) and clears the device's fatal flag, device_fatal marks the device
 * fatal and every port down. Returns 0, or -ENOENT for an unknown device/port.
 */
int rdma_script_apply(struct rdma_inventory *inv, const struct rdma_script_event *ev);

#endif
