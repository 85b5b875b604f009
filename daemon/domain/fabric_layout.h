/*
 * A fabric's layout: a full mesh where it fits, or a HyperX or torus grid
 * (planner/plan.h, struct plan_shape), as a request asks for it, as it is
 * stored (fabric.topology, fabric.shape, fabric.choice) and as a fabric's
 * view shows it. Loop thread only (the planner's part is pure).
 */
#ifndef OFCD_FABRIC_LAYOUT_H
#define OFCD_FABRIC_LAYOUT_H

#include <jansson.h>
#include <stdbool.h>
#include <stdint.h>

#include "base/errors.h"
#include "coll.h"
#include "plan.h"

/** What a request asks for ("topology", "shape", "traffic" of POST/PUT /v1/fabrics). */
struct fabric_layout {
	enum plan_topology topology; /**< AUTO: a full mesh where it fits, else the best shape */
	uint32_t k[PLAN_MAX_DIMS];   /**< an explicit grid, when ndims > 0 */
	uint32_t ndims;              /**< 0: no grid given */
	int traffic;                 /**< enum coll_traffic the job declares, or -1: none */
	bool given; /**< the request named a topology or a shape: a PUT confirms only the same */
	/** The cost model's parameters an auto choice prices candidates with (borrowed). */
	const struct coll_params *price;
};

/** The layout of a request that says nothing: auto, a full mesh where it fits. */
#define FABRIC_LAYOUT_AUTO ((struct fabric_layout){ .topology = PLAN_TOPO_AUTO, .traffic = -1 })

/** A full mesh asked for: refused, naming the devices it lacks, where it does not fit. */
#define FABRIC_LAYOUT_FULL_MESH                                                                    \
	((struct fabric_layout){ .topology = PLAN_TOPO_FULL_MESH, .traffic = -1, .given = true })

/**
 * Chooses the shape of m servers of n devices of p ports (the fewest of the
 * fabric's servers) as l asks. *choice gets, for an auto choice, the
 * candidates weighed and why (a new reference to store and show), else NULL.
 * Returns 0, or with e set: -EINVAL (400 on "shape" or "topology"), -EDOM
 * (422 infeasible on "servers", or on "shape" for a grid given, naming what
 * would fit), -ENOMEM.
 */
int fabric_layout_choose(const struct fabric_layout *l, uint32_t m, uint32_t n, uint32_t p,
                         struct plan_shape *out, json_t **choice, struct ofcd_error *e);

/** The cost model's description of shape s (coll.h): what the collectives may use. */
struct coll_shape fabric_layout_coll_shape(const struct plan_shape *s);

/**
 * The grid of a shape as stored and shown, "32x16x16", into buf (len bytes);
 * "" for a full mesh. Returns buf.
 */
char *fabric_layout_grid(const struct plan_shape *s, char *buf, size_t len);

/**
 * The shape of a stored fabric of m servers from its topology and grid
 * columns (grid NULL or "" for a full mesh). Returns 0, or -EINVAL for a
 * grid that is not "AxBx..." (1 to PLAN_MAX_DIMS sizes) of product m.
 */
int fabric_layout_load(const char *topology, const char *grid, uint32_t m, struct plan_shape *out);

/**
 * Adds to a fabric's view f: "topology", and for a HyperX or torus "shape"
 * (the grid as an array), "diameter" and "degree" (circuits per server), and
 * "choice" (choice_text parsed, when not NULL).
 */
void fabric_layout_json(json_t *f, const struct plan_shape *s, const char *choice_text);

#endif
