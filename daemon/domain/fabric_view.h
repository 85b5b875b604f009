/*
 * A stored fabric as the collective routes see it (documents 001-004): its
 * members, what they share (fewest devices, NIC offload, one switch) and
 * which server pairs its plan joins by a circuit.
 *
 * Loop thread only, against the daemon's store (inside whatever transaction
 * the caller has open).
 */
#ifndef OFCD_FABRIC_VIEW_H
#define OFCD_FABRIC_VIEW_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "plan.h"

struct store;

/** One stored circuit of a fabric; index 0 is its a end, 1 its b end. */
struct fabric_view_circuit {
	uint32_t plane;       /**< plane of the circuit */
	uint32_t pos[2];      /**< server positions of the ends */
	uint32_t device[2];   /**< devices of the ends */
	uint32_t port[2];     /**< optical ports of those devices */
	uint32_t ocs_port[2]; /**< OCS ports they are cabled to */
	char ocs[65];         /**< name of the OCS unit holding it */
};

/**
 * What the cost model and the schedule mapping need of a stored fabric. The
 * arrays belong to the view: free them with fabric_view_free().
 */
struct fabric_view {
	char name[65];       /**< fabric name */
	int64_t revision;    /**< fabric revision */
	uint32_t m;          /**< servers */
	char (*names)[65];   /**< server names by position (NULL when none) */
	uint32_t devices;    /**< fewest devices of a member */
	bool offload;        /**< every member's NIC offloads collectives */
	bool one_switch;     /**< every member reaches the same switch */
	bool sw_aggregating; /**< with one_switch: that switch aggregates */
	bool sw_offload;     /**< with one_switch: it runs offloaded reduction trees */
	uint32_t sw_buffer;  /**< with one_switch: its buffer B (0: not given) */
	uint32_t sw_window;  /**< with one_switch: its window W (0: not given) */
	/** Circuits, one per server pair at most (the first stored); NULL without details. */
	struct fabric_view_circuit *circuits;
	size_t ncircuits; /**< entries in circuits (or pairs joined, without details) */
	int32_t *pair;    /**< m x m: index of the circuit joining two positions, or -1 */
	/** m x m: device of position a on the circuit joining a and b ([a * m + b]; 0 if none) */
	uint32_t *circuit_device;
	uint32_t min_degree;      /**< fewest servers one member has a circuit to */
	uint32_t most_per_device; /**< most circuits ending on one device of one member */
	uint64_t missing;         /**< server pairs the layout joins that have no circuit */
	struct plan_shape shape;  /**< its layout: a full mesh, or a HyperX or torus grid */
};

/**
 * Largest fabric a view is built for: pair and circuit_device are m x m
 * tables (32 MiB at 2,048 servers, 512 MiB at 8,192), which the cost model
 * takes as they are.
 */
#define FABRIC_VIEW_MAX_SERVERS 2048

/**
 * Loads fabric fabric_id into *v (overwritten). Choosing an algorithm needs
 * only which server pairs are joined; a schedule also needs each circuit's
 * devices and ports: pass details. Returns 0, -ENOENT (no such fabric),
 * -E2BIG (more than FABRIC_VIEW_MAX_SERVERS servers; v->m and v->name are
 * set), -ENOMEM or -EIO; on failure *v holds nothing to free.
 */
int fabric_view_load(struct store *s, int64_t fabric_id, bool details, struct fabric_view *v);

/** Frees what v owns and zeroes it; a zeroed view is fine. */
void fabric_view_free(struct fabric_view *v);

#endif
