/*
 * The host agent: `ofcd-agent -c FILE` (main.c), run on every server of the cluster.
 *
 * It reads the server's RDMA inventory through an RDMA source (rdma.h:
 * libibverbs, or a recorded file for tests and demos), maps RDMA device ports
 * to the server's device indices, and reports to the controller with
 * libevent's HTTP client: PUT /v1/servers/{name}/inventory at start, on every
 * change and every heartbeat (always the whole current inventory, retried with
 * backoff while the controller is unreachable), and PUT
 * /v1/servers/{name}/devices/{index} at once when a port goes down or up.
 * With [agent] runs_dir it also sends the files of measured collective runs that
 * jobs drop there, POST /v1/servers/{name}/runs, one at a time, oldest first,
 * at start and every heartbeat, and moves each into done/ or rejected/ by the
 * controller's answer (runs_dir.h).
 * One thread, one libevent loop; SIGTERM/SIGINT end it with exit status 0.
 */
#ifndef OFCD_AGENT_H
#define OFCD_AGENT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "auth_rules.h"
#include "cfgtab.h"
#include "log.h"
#include "rdma.h"

#define AGENT_HEARTBEAT_DEFAULT 10   /**< [agent] heartbeat default, seconds */
#define AGENT_HEARTBEAT_MAX     3600 /**< [agent] heartbeat upper bound, seconds */

/** One device.N = DEV:PORT line: RDMA device port DEV:PORT serves device index N. */
struct agent_map_entry {
	uint32_t index;             /**< N, the server's device index */
	char device[RDMA_NAME_MAX]; /**< RDMA device name, e.g. "mlx5_0" */
	uint8_t port;               /**< RDMA port number, from 1 */
};

/** Most addresses [agent] controller takes: the members of an HA cluster. */
#define AGENT_CONTROLLERS_MAX 8

/** One address of the controller: a single daemon, or one member of its cluster. */
struct agent_controller {
	char url[300];  /**< "http(s)://HOST:PORT" as written */
	char host[256]; /**< its HOST (brackets of an IPv6 address removed) */
	uint16_t port;  /**< its PORT */
};

/** The agent's configuration ([agent] and [log]). Owned by whoever loaded it. */
struct agent_config {
	char path[512];        /**< file it came from */
	char controller[1024]; /**< [agent] controller as written: one or more addresses */
	/** Its addresses, in the order written; a 307 is followed to these only. */
	struct agent_controller controllers[AGENT_CONTROLLERS_MAX];
	size_t ncontrollers; /**< entries of controllers in use (at least 1 once loaded) */
	bool tls;          /**< the addresses are https:// (all alike): TLS, certificates checked */
	char ca_file[512]; /**< [agent] ca_file: CAs to check it with, "" for the system's */
	char server[AUTH_NAME_MAX + 1]; /**< [agent] server: this server's name at the controller */
	char token[AUTH_SECRET_MAX + 1];      /**< [agent] token: bearer secret, "" for none */
	unsigned heartbeat_s;                 /**< [agent] heartbeat, seconds */
	bool pci_order;                       /**< [agent] map = pci-order */
	struct agent_map_entry *map;          /**< device.N entries by index (malloc'd, owned) */
	size_t nmap;                          /**< entries in map */
	const struct rdma_source_ops *source; /**< [agent] source: verbs (default) or recorded */
	char recorded_inventory[512];         /**< [agent] recorded_inventory file */
	char recorded_events[512];            /**< [agent] recorded_events file, "" for none */
	char runs_dir[512];                   /**< [agent] runs_dir, "" when not collecting */
	enum log_level log_level;             /**< [log] level */
};

/** Every key of the agent's file ([agent] and [log]); none is reloaded (no SIGHUP reload). */
extern const struct cfgtab agent_config_table;

/**
 * Loads the agent configuration from path. Unknown sections or keys, keys
 * given twice and bad values are errors "FILE:LINE: [section] key: reason";
 * missing required keys and inconsistent ones "FILE: ...". Returns 0, or
 * -EINVAL (-errno when the file cannot be read) with the message in err. In
 * both cases cfg owns memory afterwards: release it with agent_config_free().
 */
int agent_config_load(const char *path, struct agent_config *cfg, char *err, size_t errlen);

/** Same as agent_config_load() for INI text in memory; name is used in messages. */
int agent_config_load_string(const char *text, const char *name, struct agent_config *cfg,
                             char *err, size_t errlen);

/** Releases what cfg owns; it may be loaded again afterwards. */
void agent_config_free(struct agent_config *cfg);

/**
 * Runs the agent with cfg (borrowed; it must outlive the call) until SIGTERM
 * or SIGINT: sets the log level, opens the RDMA source, reports, and returns
 * 0 after the signal, or -errno (logged) when it cannot start. On the calling
 * thread, which becomes the agent's loop thread.
 */
int agent_run(const struct agent_config *cfg);

#endif
