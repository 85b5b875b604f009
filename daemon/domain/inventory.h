/*
 * The RDMA inventories the host agents report, and their effect on device
 * states. A report is judged against the topology: each declared device of
 * the server must be served by a mapped RDMA port that is up. A report
 * changes a device's state only where it differs from the previous report of
 * that server (inventory_fault keeps what the last one said), so a device
 * failed or restored by hand stays so until the agent sees that device
 * change, and resending the same report (every heartbeat) changes nothing. A
 * server whose agent stopped reporting is flagged stale; its devices are left
 * as they are.
 *
 * Runs inside the caller's store transaction. Loop thread only.
 */
#ifndef OFCD_INVENTORY_H
#define OFCD_INVENTORY_H

#include <jansson.h>
#include <stdbool.h>
#include <stdint.h>

#include "base/errors.h"

struct fabric_ctx;
struct rdma_inventory;
struct store;
struct topo_names;

/** Heartbeats an agent may miss before its server is flagged stale. */
#define INVENTORY_STALE_MISSED 3

/**
 * Stores server's report inv (sent every interval seconds), fails or
 * restores the devices whose state it changed (re-planning their fabric
 * through fabric_devices_set()). *result gets {"failed": [{"device",
 * "reason"}], "changes": [{"device", "state", "changed"}], "fabrics": [...]}
 * (new reference). Returns
 * 0 or -errno with e set (422/400 for port indices that do not fit the
 * server, 503 when it could not be stored).
 */
int inventory_apply(const struct fabric_ctx *c, int64_t server_id, const char *server,
                    const struct rdma_inventory *inv, unsigned interval, json_t **result,
                    struct ofcd_error *e);

/**
 * Adds "inventory" (the last report with its "heartbeat" time and "interval",
 * or null) and "stale" (INVENTORY_STALE_MISSED heartbeats missed) to a server
 * object from topo_server_json(); returns it (NULL stays NULL).
 */
json_t *inventory_view(struct store *s, int64_t server_id, json_t *server);

/**
 * The names of the servers whose inventory is stale (as inventory_view() says), sorted,
 * into *out (topo_names_free()). 0, or -EIO / -ENOMEM with *out empty.
 */
int inventory_stale_names(struct store *s, struct topo_names *out);

#endif
