/*
 * Full-interconnect planner (document 000 of spec/SEEDS.md, S801-S803).
 *
 * Two layers:
 *
 *  - the abstract policy: from M servers, N devices per server and P optical
 *    ports per device, the minimum devices per server, feasibility, and which
 *    device port of which server joins which on every plane (Formula 1 or 3);
 *  - the cabled fabric plan: the same policy laid onto the real cabling of a
 *    fabric's servers (which device port goes to which OCS unit and port, and
 *    whether it is healthy), with the pairs the cabling cannot serve relocated to
 *    free healthy ports on a common OCS unit or listed as missing; and the
 *    least-disruption re-plan that keeps every working circuit exactly.
 *
 * A verifier for each layer checks the invariants; the daemon runs it on every
 * plan before storing or returning it.
 *
 * Past what a full mesh holds (devices * ports_per_device + 1 servers), a fabric
 * is laid out as a shape (struct plan_shape: a HyperX or torus grid whose lines
 * each use the policy, or a ring layout, on planes of their own), chosen with
 * plan_shape_choose() and planned with the *_shape() entry points.
 *
 * Vocabulary. Plane k (0 <= k < R) uses device k / P, port k % P of every
 * server. A server's slot is device * ports_per_device + port, its index into
 * its port table. Servers of a fabric are numbered 0..M-1 by their position in
 * the fabric's request.
 *
 * Threads and memory: everything here is pure computation on its arguments, no
 * I/O and no global state, so any thread may call any function concurrently on
 * distinct outputs. Inputs are borrowed for the duration of the call only.
 * Output arrays are allocated by the planner (malloc) and owned by the caller,
 * who releases them with plan_policy_free() / plan_fabric_free().
 *
 * Errors are 0 or -errno: -EINVAL for arguments out of range, -EDOM for an
 * infeasible request (more devices needed than the servers have), -ENOMEM.
 */
#ifndef OFCD_PLAN_H
#define OFCD_PLAN_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define PLAN_MAX_SERVERS 512  /**< largest M of a full mesh (and of a HyperX line) */
#define PLAN_MAX_DEVICES 1024 /**< largest devices per server */
#define PLAN_MAX_PORTS   1024 /**< largest optical ports per device */
/** Largest M of a HyperX or torus fabric (see struct plan_shape). */
#define PLAN_MAX_SHAPED_SERVERS 65536

/** Which target-server formula lays out the planes. */
enum plan_formula {
	PLAN_FORMULA_AUTO = 0, /**< 1 for odd M, 3 for even M (the optimal choice) */
	PLAN_FORMULA_1 = 1,    /**< dst = (d - s + M) mod M; any M, M planes when M is even */
	PLAN_FORMULA_3 = 3,    /**< pivot server M-1; even M only, M-1 planes */
};

/* ---- single values (the spec's test vectors) ------------------------------ */

/**
 * The formula to use: 1 or 3 for PLAN_FORMULA_AUTO / _1 / _3, or -EINVAL when f
 * is not one of them or is PLAN_FORMULA_3 with an odd m.
 */
int plan_formula_resolve(uint32_t m, enum plan_formula f);

/**
 * Number of planes R: 0 for m <= 1; m for odd m or when f is PLAN_FORMULA_1;
 * m - 1 otherwise (even m with formula 3 or auto).
 */
uint32_t plan_planes(uint32_t m, enum plan_formula f);

/**
 * Minimum devices per server n = ceil(plan_planes(m, f) / p). p must be at
 * least 1 (UINT32_MAX is returned for p == 0: no device count suffices).
 */
uint32_t plan_min_devices(uint32_t m, uint32_t p, enum plan_formula f);

/**
 * Formula 1: target server of server s on plane d among m servers,
 * (d - s + m) mod m. A result equal to s means s idles on that plane.
 * Requires m >= 1 and s < m; d may be any value.
 */
uint32_t plan_formula1_dst(uint32_t m, uint32_t s, uint32_t d);

/**
 * Formula 3: target server of server s on plane d among an even number m of
 * servers, server m-1 being the pivot. Requires even m >= 2, s < m, d < m - 1.
 * Never idles.
 */
uint32_t plan_formula3_dst(uint32_t m, uint32_t s, uint32_t d);

/* ---- abstract policy (POST /v1/plan) -------------------------------------- */

/** One end of an abstract link: a device port of a server. */
struct plan_link_end {
	uint32_t server; /**< server index, 0..M-1 */
	uint32_t device; /**< device index, plane / P */
	uint32_t port;   /**< port index on the device, plane % P */
};

/** A direct circuit of the abstract policy; a.server < b.server, same device port. */
struct plan_link {
	uint32_t plane;         /**< plane index, 0..R-1 */
	struct plan_link_end a; /**< lower-numbered server's end */
	struct plan_link_end b; /**< higher-numbered server's end */
};

/** The abstract policy of M servers; filled by plan_policy_compute(). */
struct plan_policy {
	uint32_t servers;          /**< M */
	uint32_t devices;          /**< N, devices per server */
	uint32_t ports_per_device; /**< P */
	int formula;               /**< the formula used: 1 or 3 */
	uint32_t planes;           /**< R */
	uint32_t min_devices;      /**< n = ceil(R / P) */
	struct plan_link *links;   /**< owned; sorted by plane then a.server; NULL if none */
	size_t nlinks;             /**< M(M-1)/2 when feasible, 0 otherwise */
};

/**
 * Compute the abstract policy of m servers (1..PLAN_MAX_SERVERS), n devices
 * (1..PLAN_MAX_DEVICES) and p ports per device (1..PLAN_MAX_PORTS) with formula f.
 *
 * Returns 0 with *out filled; -EINVAL for a value out of range or a formula that
 * does not apply (out untouched); -EDOM when min_devices > n, in which case
 * every scalar field of *out is filled (so the caller can say "8 servers need
 * 7 devices per server, each has 6") and links is NULL; -ENOMEM.
 * On success free *out with plan_policy_free().
 */
int plan_policy_compute(uint32_t m, uint32_t n, uint32_t p, enum plan_formula f,
                        struct plan_policy *out);

/** Free the arrays of pol and zero it. NULL and a zeroed struct are fine. */
void plan_policy_free(struct plan_policy *pol);

/**
 * Check an abstract policy: plane < R; both ends of a link on the plane's
 * device and port (device < N); a.server < b.server < M; every server port in
 * at most one link; every unordered pair of servers joined exactly once.
 * Returns 0, -EINVAL with a one-line reason in why (if why is not NULL and
 * len > 0; always NUL-terminated), or -ENOMEM.
 */
int plan_policy_verify(const struct plan_policy *pol, char *why, size_t len);

/* ---- shapes: full mesh, HyperX, torus (fabrics larger than a full mesh) ---- */

/*
 * A full mesh of M servers needs plan_planes(M) planes per server, so it stops
 * at devices * ports_per_device + 1 servers. Larger fabrics are laid out as a
 * grid k[0] x k[1] x ... (product M); server s has the mixed-radix coordinates
 * s = c0 + k0 * (c1 + k1 * (c2 + ...)), dimension 0 varying fastest. A *line*
 * of dimension i is the k[i] servers that differ only in coordinate i.
 *
 *  - HyperX (Ahn et al., SC'09): every line is a full mesh of k[i] servers,
 *    laid out with formula 1 (odd k) or 3 (even k) on its own planes; two
 *    servers are joined when they are in one line. Diameter: the dimensions
 *    with k >= 2.
 *  - torus: every line is a ring; each server is joined to its +1 and -1
 *    neighbours on it (one neighbour when k == 2, none when k == 1), laid out
 *    with plan_ring_dst(). Diameter: the sum of floor(k / 2).
 *  - full mesh: dims 1, k[0] = M; what plan_fabric_compute() has always done.
 *
 * Each dimension uses its own planes (slots) first_plane[i] ..
 * first_plane[i] + planes[i] - 1; the shapes the planner makes lay them out one
 * after the other from plane 0. The "edges" of a shape are the pairs of
 * servers it joins; a fabric plan has one circuit per edge, or lists the edge
 * in missing.
 *
 * docs/architecture.md, "Fabrics larger than a full mesh: HyperX and torus",
 * explains the choice with a worked example.
 */

#define PLAN_MAX_DIMS 4 /**< most dimensions of a shape */

/** Family of a fabric's layout. */
enum plan_topology {
	PLAN_TOPO_AUTO = 0,  /**< let plan_shape_choose() pick (a request only, never a shape) */
	PLAN_TOPO_FULL_MESH, /**< every pair joined (document 000) */
	PLAN_TOPO_HYPERX,    /**< every line of the grid a full mesh */
	PLAN_TOPO_TORUS,     /**< every line of the grid a ring */
};

/**
 * The layout of a fabric: its family and grid. Plain data (no pointers): copy
 * it freely. Filled by plan_shape_choose() or plan_shape_make(); every derived
 * field (planes, first_plane, diameter, degree) follows from topology, dims
 * and k, and plan_shape_check() holds a shape to that.
 */
struct plan_shape {
	enum plan_topology topology;    /**< FULL_MESH, HYPERX or TORUS, never AUTO once chosen */
	uint32_t dims;                  /**< 1 for a full mesh; 1..PLAN_MAX_DIMS */
	uint32_t k[PLAN_MAX_DIMS];      /**< servers along each dimension, product == M */
	uint32_t planes[PLAN_MAX_DIMS]; /**< planes (slots) each dimension uses */
	uint32_t first_plane[PLAN_MAX_DIMS]; /**< the first plane of each dimension; dimension i
	                                        uses first_plane[i] .. first_plane[i]+planes[i]-1 */
	uint32_t diameter;                   /**< hops between the farthest two servers */
	uint32_t degree; /**< circuits per server (links of a server, all dimensions) */
};

/** "auto", "full-mesh", "hyperx", "torus" (the API's names); "?" out of range. Static string. */
const char *plan_topology_name(enum plan_topology t);

/** Parses a topology name as plan_topology_name() writes it; returns 0 or -EINVAL. */
int plan_topology_parse(const char *name, enum plan_topology *out);

/**
 * Planes a ring of k servers needs: 0 for k <= 1, 1 for k == 2 (one pair), 2
 * for even k >= 4 (the pairs {2j, 2j+1} on plane 0, {2j+1, 2j+2 mod k} on
 * plane 1), 3 for odd k >= 3 (an odd cycle needs three planes: {2j, 2j+1} on
 * plane 0 with server k-1 idle, {2j+1, 2j+2} on plane 1 with server 0 idle,
 * {k-1, 0} alone on plane 2).
 */
uint32_t plan_ring_planes(uint32_t k);

/**
 * Ring layout: the neighbour of position s (< k) on ring plane d of a ring of
 * k servers (the torus' counterpart of plan_formula1_dst()). A result equal to
 * s means s idles on that plane; d >= plan_ring_planes(k) always idles. Each
 * plane is an involution and the planes together join every ring-adjacent pair
 * exactly once.
 */
uint32_t plan_ring_dst(uint32_t k, uint32_t s, uint32_t d);

/**
 * Build a shape from its family and grid: copies k[0..ndims-1], fills planes
 * (plan_planes(k, auto) per HyperX or full-mesh dimension, plan_ring_planes(k)
 * per torus dimension), first_plane (dimensions one after the other from plane
 * 0), diameter and degree. topology must not be AUTO; 1 <= ndims <=
 * PLAN_MAX_DIMS; every k >= 1; the product at most PLAN_MAX_SHAPED_SERVERS; a
 * full mesh has ndims 1 and k[0] <= PLAN_MAX_SERVERS, a HyperX every k <=
 * PLAN_MAX_SERVERS (a line is a full mesh). Does not look at ports: see
 * plan_shape_choose() for what fits.
 * Returns 0, or -EINVAL with a one-line reason in why (if why is not NULL and
 * len > 0; always NUL-terminated; "" on success); *out is untouched on error.
 */
int plan_shape_make(enum plan_topology topology, const uint32_t *k, uint32_t ndims,
                    struct plan_shape *out, char *why, size_t len);

/** Planes (slots) a server needs for the shape: the end of its highest dimension's range. */
uint32_t plan_shape_planes_total(const struct plan_shape *shape);

/**
 * Bisection of the shape, in links: the circuits crossing the smallest cut
 * that slices the grid across one dimension i into its first floor(k[i]/2)
 * positions and the rest, minimised over the dimensions with k >= 2. For a
 * HyperX a line of dimension i contributes floor(k/2) * ceil(k/2) links, so the
 * cut is (M / k[i]) * floor(k[i]/2) * ceil(k[i]/2) (M * k[i] / 4 for even k; a
 * full mesh is the one-dimensional case); for a torus a ring contributes 2
 * links (1 when k == 2), so (M / k[i]) * 2. 0 for a single server.
 */
uint64_t plan_shape_bisection(const struct plan_shape *shape);

/**
 * Writes the shape as "full mesh 64", "HyperX 32x16x16" or "torus 16x16" into
 * buf (always NUL-terminated when len > 0); returns buf.
 */
char *plan_shape_format(const struct plan_shape *shape, char *buf, size_t len);

/**
 * Check a shape against a fabric of m servers: topology not AUTO, 1 <= dims <=
 * PLAN_MAX_DIMS, every k >= 1 with product m, planes, diameter and degree as
 * plan_shape_make() computes them from topology and k, the dimensions' plane
 * ranges not overlapping. Returns 0 or -EINVAL with a reason in why.
 */
int plan_shape_check(const struct plan_shape *shape, uint32_t m, char *why, size_t len);

/**
 * Choose the shape of a fabric of m servers (1..PLAN_MAX_SHAPED_SERVERS) whose
 * servers have n_devices devices (0..PLAN_MAX_DEVICES) of ports_per_device
 * optical ports (1..PLAN_MAX_PORTS), so n_devices * ports_per_device planes.
 * A shape "fits" when plan_shape_planes_total() <= that.
 *
 * Without shape_or_null:
 *  - want AUTO: the full mesh when it fits (m <= PLAN_MAX_SERVERS and
 *    plan_planes(m) planes: exactly the fabrics plan_fabric_compute() accepts);
 *    else the fitting HyperX (2..PLAN_MAX_DIMS dimensions, every k >= 2) with
 *    the smallest diameter, then the largest plan_shape_bisection(), then the
 *    fewest planes, then the fewest dimensions, then the larger k[0], k[1]...;
 *    else the fitting torus (1..PLAN_MAX_DIMS dimensions, every k >= 2, a
 *    one-dimensional torus being a ring) in the same order;
 *  - want FULL_MESH, HYPERX or TORUS: that family only, same order.
 * Grid dimensions come in non-increasing order of k (dimension 0 the largest).
 *
 * With shape_or_null (ndims entries, 1..PLAN_MAX_DIMS, every k >= 1, product
 * m): that grid, as want's family (FULL_MESH needs ndims 1); with want AUTO the
 * first of full mesh (ndims 1 only), HyperX, torus that fits.
 *
 * Returns 0 with *out the chosen shape and why a one-line account of the
 * choice (e.g. "a full mesh of 1024 servers needs 1023 planes, the servers
 * have 64; HyperX 32x32 (diameter 2, bisection 8192 links, 62 planes) is the
 * best of 1 HyperX shapes that fit"); -EINVAL for an argument out of range or
 * a bad shape (out untouched); -EDOM when nothing fits, with *out the
 * candidate needing the fewest planes (topology AUTO when there is none) and
 * why naming, per family, the fewest planes m servers need and the largest
 * fabric below m that would fit (e.g. "no topology of 5001 servers fits 2
 * planes per server (2 devices x 1 ports): a full mesh holds at most 512
 * servers, no HyperX grid (2 to 4 factors of 2..512), torus 5001 needs 3; 5000
 * would fit (torus 5000)"). why may be NULL (len 0); it is always
 * NUL-terminated when len > 0; 256 bytes hold every message.
 */
int plan_shape_choose(uint32_t m, uint32_t n_devices, uint32_t ports_per_device,
                      enum plan_topology want, const uint32_t *shape_or_null, uint32_t ndims,
                      struct plan_shape *out, char *why, size_t len);

/**
 * The candidates plan_shape_choose() considers without an explicit shape, for
 * an API that shows why auto chose what it chose: the shapes that fit first,
 * in preference order (with want AUTO: the full mesh, then the HyperX shapes,
 * then the tori), then the ones that do not, fewest planes first. out (cap
 * entries, caller-owned; may be NULL when cap is 0) receives the first
 * min(cap, *count) of them; *count is set to how many there are (a few hundred
 * at most for m <= PLAN_MAX_SHAPED_SERVERS). *nfit (may be NULL) is set to how
 * many of them fit. out[0] is what plan_shape_choose() returns when *nfit > 0.
 * Same ranges as plan_shape_choose(); returns 0, -EINVAL or -ENOMEM.
 */
int plan_shape_candidates(uint32_t m, uint32_t n_devices, uint32_t ports_per_device,
                          enum plan_topology want, struct plan_shape *out, size_t cap,
                          size_t *count, size_t *nfit);

/* ---- cabled fabric plan (POST /v1/fabrics, device failure and recovery) --- */

/** Cabling and health of one device port (one slot of a server). */
struct plan_port {
	int32_t ocs;       /**< OCS unit index (the caller's numbering, >= 0); -1: not cabled */
	uint32_t ocs_port; /**< port on that OCS unit; meaningless when ocs is -1 */
	bool healthy;      /**< false when the device (or the port) has failed */
};

/**
 * One server of a fabric, as the daemon sees it. No two cabled slots of the
 * fabric may share an (ocs, ocs_port); plan_verify() rejects plans built on such
 * cabling.
 */
struct plan_server {
	uint32_t devices;              /**< devices of this server, 0..PLAN_MAX_DEVICES */
	uint32_t ports_per_device;     /**< optical ports per device, 1..PLAN_MAX_PORTS */
	const struct plan_port *ports; /**< borrowed; devices * ports_per_device entries
	                                    indexed by slot; may be NULL when devices is 0 */
};

/** One end of a cabled circuit. */
struct plan_end {
	uint32_t server;   /**< server index in the fabric, 0..M-1 */
	uint32_t device;   /**< device index on that server */
	uint32_t port;     /**< port index on that device */
	int32_t ocs;       /**< OCS unit the port is cabled to */
	uint32_t ocs_port; /**< OCS port the device port is cabled to */
};

/**
 * A circuit: two device ports joined through one OCS unit (a.ocs == b.ocs),
 * a.server < b.server. plane is the policy plane for a circuit laid out by the
 * policy, or the slot of its a end for a circuit relocated to other ports.
 */
struct plan_circuit {
	uint32_t plane;    /**< policy plane, or slot of the a end when relocated */
	struct plan_end a; /**< lower-numbered server's end */
	struct plan_end b; /**< higher-numbered server's end */
};

/** A pair of servers without a circuit (an edge of the shape); a < b. */
struct plan_pair {
	uint32_t a; /**< lower server index */
	uint32_t b; /**< higher server index */
};

/** A fabric's plan; filled by plan_fabric_compute() or plan_fabric_replan(). */
struct plan_fabric {
	uint32_t servers;              /**< M */
	uint32_t devices;              /**< N: fewest devices of any server */
	uint32_t ports_per_device;     /**< P: fewest ports per device of any server */
	int formula;                   /**< formula of a full mesh: 1 or 3 (auto); 0 for a HyperX
	                                    or torus (each HyperX line uses 1 for odd k, 3 for
	                                    even k; a torus line, plan_ring_dst()) */
	uint32_t planes;               /**< R: plan_shape_planes_total() of the shape */
	uint32_t min_devices;          /**< n = ceil(R / P) */
	struct plan_circuit *circuits; /**< owned; sorted by plane, a.server, a.device, a.port */
	size_t ncircuits;              /**< number of circuits */
	struct plan_pair *missing;     /**< owned; pairs without a circuit, sorted; NULL if none */
	size_t nmissing;               /**< number of missing pairs (> 0: the fabric is degraded) */
	struct plan_shape shape;       /**< the shape planned (a full mesh of M for the entry
	                                    points without a shape); all zero (topology AUTO) in
	                                    a plan the caller built without one */
};

/**
 * Plan a fabric of m servers (1..PLAN_MAX_SERVERS) from scratch, with the auto
 * formula over N = min devices and P = min ports_per_device of its servers.
 * A policy link whose two ports are healthy and cabled to the same OCS unit
 * becomes a circuit; every other pair is relocated to free healthy ports of its
 * two servers on a common OCS unit (the lowest such slot of server a, then the
 * lowest slot of server b on that unit), pairs taken in increasing (a, b)
 * order; a pair with no such ports is listed in missing.
 *
 * Returns 0 with *out filled (free with plan_fabric_free()); -EINVAL for bad
 * arguments (out untouched); -EDOM when min_devices > N, with the scalar fields
 * of *out filled and no arrays; -ENOMEM.
 */
int plan_fabric_compute(const struct plan_server *servers, uint32_t m, struct plan_fabric *out);

/**
 * Re-plan a fabric with the least disruption after its servers' health or
 * cabling changed. Every circuit of prev whose two ends are still healthy and
 * cabled to the same OCS unit and port is kept exactly (same ports, same plane);
 * every other pair (broken circuits, prev's missing pairs) is relocated as in
 * plan_fabric_compute(), or listed in missing. A working circuit never moves.
 * Never fails with -EDOM: feasibility was settled when the fabric was created
 * (the scalar fields are recomputed all the same).
 *
 * prev must be a plan of the same m servers (-EINVAL otherwise, or when one of
 * its circuits or missing pairs names a server outside the fabric or joins a
 * server to itself). prev is only read; it may be freed afterwards.
 * Returns 0 with *out filled (free with plan_fabric_free()), -EINVAL, -ENOMEM.
 */
int plan_fabric_replan(const struct plan_server *servers, uint32_t m,
                       const struct plan_fabric *prev, struct plan_fabric *out);

/** Free the arrays of plan and zero it. NULL and a zeroed struct are fine. */
void plan_fabric_free(struct plan_fabric *plan);

/**
 * Check a fabric plan against its m servers: every unordered pair of servers
 * joined by exactly one circuit or listed in missing exactly once (not both);
 * no circuit joining a server to itself or naming a server outside the fabric;
 * a.server < b.server; no device port in two circuits; both ends of every
 * circuit healthy and cabled to the same OCS unit with the stated ocs_port; no
 * OCS port in two circuits. O(circuits + M^2 / 8 + slots / 8) time and memory.
 *
 * Returns 0, -EINVAL with a one-line human-readable reason in why (if why is
 * not NULL and len > 0; always NUL-terminated), or -ENOMEM.
 */
int plan_verify(const struct plan_server *servers, uint32_t m, const struct plan_fabric *plan,
                char *why, size_t len);

/* ---- cabled plan of a shape (HyperX, torus; a full mesh as well) ---------- */

/*
 * The shaped entry points generalise the three above: shape NULL means the
 * full mesh of m servers, and then each behaves exactly as its unshaped
 * counterpart (which is how those are implemented). With a shape (checked with
 * plan_shape_check(); m up to PLAN_MAX_SHAPED_SERVERS):
 *
 *  - every line of dimension i is laid out on planes first_plane[i].. of its
 *    servers: on plane first_plane[i] + d, the server at position j of the
 *    line is joined to the one at plan_formula1_dst()/plan_formula3_dst()
 *    (HyperX: formula 1 for odd k, 3 for even k) or plan_ring_dst() (torus)
 *    of (k[i], j, d); device plane / P, port plane % P as for a full mesh;
 *  - a policy circuit the cabling cannot carry is relocated exactly as in
 *    plan_fabric_compute() (lowest free healthy slot of a on an OCS unit where
 *    b has one), edges taken in increasing (a, b) order, or listed missing;
 *  - missing lists edges of the shape only (pairs in one line; on a torus,
 *    neighbours on one ring).
 *
 * Time and memory are linear in the circuits (plus the servers' slots): one
 * bit per (line, position, position) of each HyperX dimension, never M^2.
 */

/**
 * Plan a fabric of m servers laid out as shape (NULL: the full mesh). Scalars
 * as plan_fabric_compute(), with planes = plan_shape_planes_total(shape) and
 * formula 0 for a HyperX or torus; out->shape is a copy of the shape.
 * Returns 0 (free with plan_fabric_free()); -EINVAL for bad arguments or a
 * shape that is not one of m servers (out untouched); -EDOM when the servers'
 * fewest devices cannot hold the shape's planes, with the scalar fields and
 * shape of *out filled and no arrays; -ENOMEM.
 */
int plan_fabric_compute_shape(const struct plan_server *servers, uint32_t m,
                              const struct plan_shape *shape, struct plan_fabric *out);

/**
 * Least-disruption re-plan of a shaped fabric: as plan_fabric_replan(), every
 * circuit of prev that joins an edge of shape and whose two ends still work is
 * kept exactly; every other edge is relocated or listed missing. A circuit of
 * prev that is not an edge of shape (prev laid out in another shape) is
 * dropped, so re-planning into a new shape keeps what the two shapes share.
 * shape NULL: the full mesh. Returns 0, -EINVAL, -ENOMEM.
 */
int plan_fabric_replan_shape(const struct plan_server *servers, uint32_t m,
                             const struct plan_shape *shape, const struct plan_fabric *prev,
                             struct plan_fabric *out);

/**
 * Check a shaped plan: the shape itself (plan_shape_check(): product, planes,
 * the diameter and degree it claims), the plan's own shape when it has one
 * (topology not AUTO) equal to it; every edge of the shape joined by exactly
 * one circuit or listed missing once (so every server has exactly the degree
 * the shape claims, counting its missing edges); no circuit or missing pair
 * that is not an edge ("not in one line"); and every check of plan_verify()
 * on the circuits (ports used once, one OCS unit, healthy, cabled as stated).
 * shape NULL: the full mesh, i.e. plan_verify(). O(circuits + edges / 8 +
 * slots / 8). Returns 0, -EINVAL with a reason in why, or -ENOMEM.
 */
int plan_verify_shape(const struct plan_server *servers, uint32_t m, const struct plan_shape *shape,
                      const struct plan_fabric *plan, char *why, size_t len);

#endif
