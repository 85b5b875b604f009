/*
 * Collectives over the fabric (documents 001-004 of the spec page): schedule generators,
 * alpha-beta-gamma costs, the window protocol of in-network aggregation, and the selector
 * that says which algorithm to use. The formulas and their derivations are in
 * docs/cost-model.md, part "Collectives over the fabric".
 *
 * Pure and reentrant: no I/O, no global state, libc and libm only. Any thread.
 * Sizes: "servers" is the number of servers of the fabric (M on the spec page), "devices" the
 * devices per server (N on the spec page; document 002 itself calls them M accelerators on N
 * nodes). "bytes" is q: for allreduce and broadcast the size of the data on each server, for
 * allgather the size of the gathered result (each server contributes bytes / servers), for
 * all-to-all the send buffer of each device (one block of bytes / (servers * devices) per
 * destination device). The HyperX and torus algorithms are server-level, all-to-all included:
 * there a server carries its devices' buffers, devices * bytes, one block per destination server
 * (docs/cost-model.md, "Collectives over HyperX and torus fabrics").
 */
#ifndef OFCD_COLL_H
#define OFCD_COLL_H

#include "coll_schedule.h"

/** Largest servers and devices per server priced (schedules: COLL_MAX_PARTICIPANTS). */
#define COLL_MAX_SERVERS 65536u
#define COLL_MAX_DEVICES 65536u

/** Algorithms. Which apply to which collective: see coll_select(). */
enum coll_algorithm {
	COLL_ALG_RING = 0,           /**< "ring": one-way ring (allreduce, allgather) */
	COLL_ALG_BIDIR_RING,         /**< "bidirectional-ring": two opposite one-way rings */
	COLL_ALG_RHD,                /**< "recursive-halving-doubling" (allreduce, 2^k servers) */
	COLL_ALG_RECURSIVE_DOUBLING, /**< "recursive-doubling" (allgather, 2^k servers) */
	COLL_ALG_FULL_MESH_DIRECT,   /**< "full-mesh-direct": all M-1 circuits in one round */
	COLL_ALG_CUBE_300,           /**< "cube-300": document 001, 8 servers, 8 rounds */
	COLL_ALG_CUBE_400,           /**< "cube-400": document 001, 8 servers, 6 rounds */
	COLL_ALG_BINOMIAL_TREE,      /**< "binomial-tree" (broadcast) */
	COLL_ALG_SCATTER_ALLGATHER,  /**< "scatter-allgather" over the full mesh (broadcast) */
	COLL_ALG_DIRECT,             /**< "direct": every device to every device (all-to-all) */
	COLL_ALG_PLANE_RELAYED,      /**< "plane-relayed": document 002 (all-to-all) */
	COLL_ALG_NIC_OFFLOAD,        /**< "nic-offload": document 003 (allreduce, priced only) */
	COLL_ALG_INA,                /**< "in-network-aggregation": document 004 (priced only) */
	COLL_ALG_HYPERX_DIM,         /**< "hyperx-dim-ordered": a full mesh per line, dimension by
	                                  dimension (allreduce, allgather, broadcast; HyperX) */
	COLL_ALG_HYPERX_A2A,         /**< "hyperx-dim-ordered-a2a": all-to-all relayed dimension by
	                                  dimension, each hop a line's full mesh (HyperX) */
	COLL_ALG_TORUS_RING,         /**< "torus-ring": bidirectional rings per dimension
	                                  (allreduce, allgather; torus) */
	COLL_ALG_TORUS_A2A,          /**< "torus-dim-ordered-a2a": all-to-all relayed along each
	                                  dimension's ring both ways, dimension by dimension */
	COLL_ALGORITHM__COUNT
};

/**
 * How a server moves data it received on one circuit to the device of the circuit it sends it on
 * (docs/cost-model.md, "In-server relays"). NONE is the convention that data sits on the device
 * of the circuit it uses.
 */
enum coll_relay {
	COLL_RELAY_NONE = 0,      /**< "none": no movement inside a server */
	COLL_RELAY_CUT_THROUGH,   /**< "cut-through": one in-server latency, the bytes stream on */
	COLL_RELAY_STORE_FORWARD, /**< "store-and-forward": latency plus the bytes over the mesh */
	COLL_RELAY__COUNT
};

/**
 * How the participants of a collective wait for one another between its rounds
 * (docs/cost-model.md, "Without the barrier"). Only the all-to-all price tells them apart: every
 * server-level schedule takes the same time either way.
 *   barrier:  every round ends for all at once (the sum of the rounds);
 *   pairwise: a participant goes on once its own send and receive of the round are through
 *             (MPI's pairwise exchange);
 *   dataflow: a send waits only for its sender's previous one and the data it carries (a
 *             library that posts every send at once, NCCL).
 */
enum coll_sync { COLL_SYNC_BARRIER = 0, COLL_SYNC_PAIRWISE, COLL_SYNC_DATAFLOW, COLL_SYNC__COUNT };

/** Reduction operators of the in-network aggregation simulator. */
enum coll_reduce_op {
	COLL_RED_SUM = 0,
	COLL_RED_MEAN,
	COLL_RED_MIN,
	COLL_RED_MAX,
};

/**
 * Cost and capability parameters. Start from coll_params_default() and override; the
 * defaults are given in brackets. The daemon fills the capability fields from the topology
 * (a what-if request may give them under the same names).
 * @alpha_us:           latency of one message over an inter-server circuit, µs [3.0].
 * @link_gbps:          one-way bandwidth of one circuit, Gbit/s [200].
 * @intra_alpha_us:     latency of one message over an in-server path, µs [1.0].
 * @intra_gbps:         one-way bandwidth of one in-server path, Gbit/s [400].
 * @gamma_ns_per_byte:  time to reduce one byte into another, ns [0.01].
 * @ports_per_server:   circuits one server can terminate for the collective; 0 means the full
 *                      interconnection of document 000 (servers - 1) [0].
 * @mtu:                path MTU in bytes, 256..1048576 [4096].
 * @segment_bytes:      offload / aggregation segment (one message of document 004), at most
 *                      @mtu; 0 means @mtu [0].
 * @offload:            every server has an offload-capable NIC (document 003) [false].
 * @offload_switch:     an offload-capable switch reaches every server (tree instead of a ring
 *                      among the NICs) [false].
 * @aggregating_switch: an aggregating switch reaches every member (document 004) [false].
 * @switch_buffer:      B, messages the aggregating switch can buffer per job [64].
 * @window:             W, sliding send window of each member, W <= B [32].
 * @root:               root server of a broadcast [0].
 * @circuit_device:     which device ends each circuit, for all-to-all (the only collective with
 *                      one participant per device): borrowed table of servers x servers
 *                      entries, entry [a * servers + b] the device of server a on the circuit
 *                      joining a and b (< COLL_MAX_DEVICES; it need not be one of the
 *                      participating devices); a message between other devices hops inside the
 * server to and from it. NULL means the document 000 plan: formula 1 for an odd number of servers,
 * 3 for an even one, one port per device, so the device of both ends is the plane
 * (coll_plan_circuit_device()) [NULL].
 * Terms of the hardware the formulas leave out (docs/cost-model.md, "Terms a calibration fits");
 * each default leaves the prices above unchanged:
 * @launch_us:          fixed cost of starting one collective, any algorithm, µs [0].
 * @launch_alg_us:      added to @launch_us for one algorithm, indexed by enum coll_algorithm, µs
 *                      [0 each].
 * @overhead_us:        sender overhead of one message (LogGP's o): a participant's messages of one
 *                      round leave one after another, each costing this much, µs [0].
 * @switch_alpha_us:    latency a switch adds to each step through it (the offload tree, the
 *                      aggregating switch), µs [0].
 * @link_efficiency:    share of @link_gbps a transfer gets (protocol and framing), (0, 1] [1].
 * @intra_efficiency:   share of @intra_gbps a transfer gets, (0, 1] [1].
 * @device_link_gbps:   the host link (PCIe) behind which a device's optical ports sit, shared by
 *                      the circuits the device sends on at once; 0 means no such limit [0].
 * @ports_per_device:   most circuits one device sends on at once, for @device_link_gbps (the
 *                      daemon counts them on the fabric's circuits) [1].
 * @relay:              how data a server received on one circuit reaches the device of the
 *                      circuit it leaves on (enum coll_relay) [none].
 * @sync:               how participants wait for one another between rounds (enum coll_sync):
 *                      "pairwise" and "dataflow" price an all-to-all as its schedule's
 *                      messages sharing the links max-min fairly, each starting once what it
 *                      waits for under that convention is through [barrier].
 * @shape:              the circuits the fabric has (struct coll_shape); the product of its
 *                      dimensions must be the number of servers priced. On a HyperX or torus
 *                      shape an algorithm is eligible only where every pair of servers it
 *                      exchanges with is joined, the shape algorithms (hyperx-*, torus-*) only
 *                      on their own shape, and ports_per_server 0 means the shape's circuits per
 *                      server [full mesh].
 */
struct coll_params {
	double alpha_us;
	double link_gbps;
	double intra_alpha_us;
	double intra_gbps;
	double gamma_ns_per_byte;
	uint32_t ports_per_server;
	uint32_t mtu;
	uint32_t segment_bytes;
	bool offload;
	bool offload_switch;
	bool aggregating_switch;
	uint32_t switch_buffer;
	uint32_t window;
	uint32_t root;
	const uint32_t *circuit_device;
	double launch_us;
	double launch_alg_us[COLL_ALGORITHM__COUNT];
	double overhead_us;
	double switch_alpha_us;
	double link_efficiency;
	double intra_efficiency;
	double device_link_gbps;
	uint32_t ports_per_device;
	enum coll_relay relay;
	enum coll_sync sync;
	struct coll_shape shape;
};

/**
 * A priced algorithm.
 * @rounds:         sequential steps (the alpha terms of the formula). For the priced-only
 *                  algorithms: 2 for a tree or the aggregating switch (up, down), 2(M-1) for
 *                  the ring among NICs.
 * @predicted_us:   the formula's time.
 * @inter_messages: messages between servers: the transfers of the schedule (0 for the
 *                  priced-only algorithms, whose traffic is segments, not messages).
 * @intra_messages: messages inside servers (all-to-all; 0 otherwise).
 * @circuits:       circuits per server the algorithm uses (0 for the priced-only algorithms,
 *                  which do not run over OCS circuits; servers - 1 for all-to-all).
 * @scheduled:      coll_generate() can produce a checkable round-by-round schedule.
 * What the hardware terms of struct coll_params are charged on (filled whatever their values):
 * @sends:          the sum over rounds of the most messages one participant sends in the round.
 * @fanout:         most circuits one server sends on at once (0: the host link is not priced).
 * @circuit_bytes:  bytes the busiest circuit carries, summed over the rounds.
 * @relay_hops:     rounds whose sends forward what arrived over another circuit.
 * @relay_bytes:    bytes one server so forwards, summed over those rounds.
 */
struct coll_estimate {
	uint32_t rounds;
	double predicted_us;
	uint64_t inter_messages;
	uint64_t intra_messages;
	uint32_t circuits;
	bool scheduled;
	uint64_t sends;
	uint32_t fanout;
	double circuit_bytes;
	uint32_t relay_hops;
	double relay_bytes;
};

/** Most candidates a collective has. */
#define COLL_MAX_CANDIDATES 12

/**
 * One candidate of a selection.
 * @name:     static string ("cube-400", ...).
 * @eligible: it fits the size and the capabilities.
 * @scheduled: coll_generate() can produce its schedule (whether or not it is eligible).
 * @reason:   why it is not eligible, or how it runs when it is.
 * The other fields are those of struct coll_estimate, zero when not eligible.
 */
struct coll_candidate {
	enum coll_algorithm algorithm;
	const char *name;
	bool eligible;
	bool scheduled;
	char reason[COLL_REASON_LEN];
	uint32_t rounds;
	double predicted_us;
	uint64_t inter_messages;
	uint64_t intra_messages;
	uint32_t circuits;
};

/**
 * The answer of coll_select(): no allocation, the caller owns the struct.
 * @candidates: @ncandidates entries, in a fixed order per collective.
 * @chosen:     index of the cheapest eligible candidate (the first on a tie), -1 if none.
 */
struct coll_selection {
	enum coll_collective collective;
	uint32_t ncandidates;
	struct coll_candidate candidates[COLL_MAX_CANDIDATES];
	int chosen;
};

/** Fill @p with the defaults listed at struct coll_params. */
void coll_params_default(struct coll_params *p);

/**
 * Check every field of @p. Returns 0; -EINVAL with @err->field naming the bad field; or
 * -ENOBUFS when @aggregating_switch is set and the window does not fit the switch buffer
 * (W > B), with a reason naming both values. @err may be NULL.
 */
int coll_params_validate(const struct coll_params *p, struct coll_error *err);

/** "allreduce", "allgather", "alltoall", "broadcast"; NULL when out of range. */
const char *coll_collective_name(enum coll_collective c);

/** Algorithm name as listed at enum coll_algorithm; NULL when out of range. */
const char *coll_algorithm_name(enum coll_algorithm a);

/** Parse a collective name into @c. Returns 0 or -EINVAL. */
int coll_collective_from_name(const char *name, enum coll_collective *c);

/** Parse an algorithm name into @a. Returns 0 or -EINVAL. */
int coll_algorithm_from_name(const char *name, enum coll_algorithm *a);

/**
 * Price algorithm @a for collective @c with the closed-form formula. @p NULL means defaults.
 * Returns 0 and fills @est; -EINVAL for arguments out of range (more than COLL_MAX_SERVERS
 * or COLL_MAX_DEVICES, a NULL @est) or an algorithm that does not apply to @c; -EDOM when it does
 * not fit this size or these capabilities (a cube on 6 servers, recursive halving on 12, more
 * circuits than ports, no offload NIC, ...); -ENOBUFS as coll_params_validate(). @err says why and
 * may be NULL. On a HyperX or torus @p->shape, -EINVAL (field "shape") when it does not fit
 * @servers, and -EDOM when the algorithm exchanges over a pair the shape does not join or is a
 * shape algorithm of the other topology.
 */
int coll_predict(enum coll_collective c, enum coll_algorithm a, uint64_t bytes, uint32_t servers,
                 uint32_t devices, const struct coll_params *p, struct coll_estimate *est,
                 struct coll_error *err);

/**
 * Price every candidate for @c and choose the cheapest eligible one. Candidates:
 *   allreduce: ring, bidirectional-ring, recursive-halving-doubling, full-mesh-direct,
 *              cube-300, cube-400, nic-offload, in-network-aggregation;
 *   allgather: ring, recursive-doubling, full-mesh-direct;
 *   broadcast: binomial-tree, full-mesh-direct, scatter-allgather;
 *   alltoall:  direct, plane-relayed;
 * then, when @p->shape is a HyperX or torus, the shape algorithms of @c: hyperx-dim-ordered
 * and torus-ring (allreduce, allgather, broadcast), hyperx-dim-ordered-a2a and
 * torus-dim-ordered-a2a (alltoall), each eligible only on its own topology (torus-ring never
 * for broadcast, with the reason). A full mesh lists exactly the candidates above.
 * @p NULL means defaults. Returns 0 with @sel filled; -EINVAL / -ENOBUFS for bad arguments or
 * parameters (then @sel is not usable); -ENOENT when no candidate is eligible (@sel filled,
 * chosen -1). @err may be NULL.
 */
int coll_select(enum coll_collective c, uint64_t bytes, uint32_t servers, uint32_t devices,
                const struct coll_params *p, struct coll_selection *sel, struct coll_error *err);

/**
 * Generate the schedule of algorithm @a for collective @c into @out (initialised here; free
 * it with coll_schedule_free()). Server-level collectives ignore @devices (the schedule has
 * one participant per server); all-to-all has one participant per device. @p supplies the
 * broadcast root and may be NULL. Returns 0; -EINVAL (bad arguments, or @a does not apply to
 * @c); -EDOM (does not fit this size: e.g. a cube needs exactly 8 servers); -EOPNOTSUPP
 * (nic-offload and in-network-aggregation are priced, not scheduled); -E2BIG (more than
 * COLL_MAX_PARTICIPANTS, or more than 64 for all-to-all); -ENOMEM. @err may be NULL.
 * @p->shape: the schedule's shape (the checker holds its transfers to the shape's circuits);
 * an algorithm that needs a pair the shape lacks is -EDOM, as in coll_predict(). The shape
 * algorithms have one participant per server (all-to-all too, of devices * bytes).
 */
int coll_generate(enum coll_collective c, enum coll_algorithm a, uint32_t servers, uint32_t devices,
                  uint64_t bytes, const struct coll_params *p, struct coll_schedule *out,
                  struct coll_error *err);

/**
 * The time of a schedule under @p (NULL: defaults): the sum over rounds of the busiest link
 * plus gamma times the most bytes any participant reduces in that round. A transfer between
 * two servers rides the circuit joining them, and in a schedule with several devices per server
 * (all-to-all) it first hops inside the source server to the circuit's device and last from the
 * circuit's device to its destination (@p->circuit_device), each hop an in-server link and an
 * in-server alpha; a transfer inside a server rides the in-server link joining its two devices.
 * A link's time in a round is the latest, over its transfers, of one's latency (the alphas of
 * its whole route) plus the bytes of every transfer on the link that starts no earlier, over
 * the link's bandwidth: the link is kept busy from then on. For every generated schedule this
 * equals coll_predict() when the chunks divide evenly. With @p->sync "pairwise" or "dataflow" a
 * direct or plane-relayed all-to-all schedule of at most 64 participants is priced as
 * coll_predict() prices it then: replayed without the barrier. Returns 0 and sets @us, -EINVAL
 * or -ENOMEM.
 */
int coll_schedule_cost(const struct coll_schedule *s, const struct coll_params *p, double *us);

/**
 * The device of server @a on the circuit joining servers @a and @b (both < @servers, a != b)
 * in the document 000 plan of @servers servers (formula 1 for an odd count, 3 for an even one)
 * with one port per device: the plane of the pair, which is the same on both ends.
 */
uint32_t coll_plan_circuit_device(uint32_t servers, uint32_t a, uint32_t b);

/**
 * Message counts of all-to-all algorithm @a (direct or plane-relayed) for any size (an
 * inter-server message is counted once, however many in-server hops it takes):
 * direct: inter = devices² servers (servers - 1), intra = servers devices (devices - 1);
 * plane-relayed: inter = devices servers (servers - 1), intra = servers devices (devices - 1).
 * Returns 0, -EINVAL (other algorithm, zero size) or -EOVERFLOW.
 */
int coll_alltoall_counts(enum coll_algorithm a, uint32_t servers, uint32_t devices, uint64_t *inter,
                         uint64_t *intra);

/** "none", "cut-through", "store-and-forward"; NULL when out of range. */
const char *coll_relay_name(enum coll_relay r);

/** Parse a relay name into @r. Returns 0 or -EINVAL. */
int coll_relay_from_name(const char *name, enum coll_relay *r);

/** "barrier", "pairwise", "dataflow"; NULL when out of range. */
const char *coll_sync_name(enum coll_sync s);

/** Parse a sync name into @s. Returns 0 or -EINVAL. */
int coll_sync_from_name(const char *name, enum coll_sync *s);

/** "full-mesh", "hyperx", "torus"; NULL when out of range. */
const char *coll_topology_name(enum coll_topology t);

/** Parse a topology name into @t. Returns 0 or -EINVAL. */
int coll_topology_from_name(const char *name, enum coll_topology *t);

/**
 * Check shape @sh against @servers: a known topology; for HyperX and torus 1..COLL_MAX_DIMS
 * dimensions of at least 1 whose product is @servers. Returns 0 or -EINVAL with @err->field
 * "shape" (@err may be NULL). A NULL @sh is the full mesh.
 */
int coll_shape_validate(const struct coll_shape *sh, uint32_t servers, struct coll_error *err);

/**
 * Circuits per server of shape @sh (valid for @servers): servers - 1 for a full mesh, the sum
 * of (k[i] - 1) for HyperX, of the neighbours per dimension (0, 1 or 2) for a torus.
 */
uint32_t coll_shape_degree(const struct coll_shape *sh, uint32_t servers);

/** Traffic a job runs, for choosing a fabric shape (coll_profile_shapes()). */
enum coll_traffic {
	COLL_TRAFFIC_ALLREDUCE = 0, /**< "allreduce" */
	COLL_TRAFFIC_ALLTOALL,      /**< "alltoall" */
	COLL_TRAFFIC_MIXED,         /**< "mixed": one of each, both of COLL_PROFILE_BYTES */
	COLL_TRAFFIC__COUNT
};

/**
 * Size each collective of a traffic profile is priced at: 64 MiB, large enough that every
 * shape's price is set by its bandwidth (the alpha terms stay under a few percent) and the
 * size of a typical gradient bucket or expert-parallel exchange (docs/cost-model.md).
 */
#define COLL_PROFILE_BYTES (64ull << 20)

/** Parse "allreduce", "alltoall" or "mixed" into @t. Returns 0 or -EINVAL. */
int coll_traffic_from_name(const char *name, enum coll_traffic *t);

/** The name parsed by coll_traffic_from_name(); NULL when out of range. */
const char *coll_traffic_name(enum coll_traffic t);

/**
 * The price of one candidate shape for a traffic profile. Plain data, owned by the caller.
 * @eligible:     every collective of the profile has an eligible algorithm on the shape.
 * @predicted_us: the sum of those collectives' best prices (0 when not eligible).
 * @allreduce_us, @alltoall_us: each part's best price (0 when not part of the profile or
 *                none is eligible).
 * @allreduce, @alltoall: the algorithm of each part (COLL_ALGORITHM__COUNT when none).
 * @reason:       why not eligible (the first part with no algorithm, and why), or "".
 */
struct coll_shape_price {
	bool eligible;
	double predicted_us;
	double allreduce_us;
	double alltoall_us;
	enum coll_algorithm allreduce;
	enum coll_algorithm alltoall;
	char reason[COLL_REASON_LEN];
};

/**
 * Price traffic profile @t on each of @nshapes candidate shapes of @servers servers of
 * @devices devices, each with the best eligible algorithm of coll_select() at
 * COLL_PROFILE_BYTES: the allreduce, the all-to-all, or both summed (mixed). @p (NULL:
 * defaults) gives the parameters; its shape is ignored, each of @shapes used instead.
 * @out (caller-owned, @nshapes entries) gets each shape's price; @best, when not NULL, the
 * index of the cheapest eligible shape (the first on a tie), or -1. Returns 0; -EINVAL (bad
 * arguments, parameters or a shape that does not fit @servers, with @err->field); -ENOENT when
 * no shape is eligible (@out filled); -ENOMEM. @err may be NULL. Pure, any thread.
 */
int coll_profile_shapes(enum coll_traffic t, const struct coll_shape *shapes, uint32_t nshapes,
                        uint32_t servers, uint32_t devices, const struct coll_params *p,
                        struct coll_shape_price *out, int *best, struct coll_error *err);

/**
 * Check that an aggregation window fits the switch buffer (document 004). Returns 0; -EINVAL
 * when either is 0 (field "window" or "switch_buffer"); -ENOBUFS when @window > @switch_buffer,
 * the reason naming both. @err may be NULL.
 */
int coll_ina_check_window(uint32_t window, uint32_t switch_buffer, struct coll_error *err);

/**
 * Input of the window-protocol simulator of document 004 (borrowed, not kept).
 * @senders:       N members.
 * @messages:      K messages each member sends, in order 0..K-1.
 * @values:        N*K values; values[s * K + i] is message i of sender s.
 * @lost:          N*K flags or NULL; a set flag means that contribution never reaches the
 *                 switch.
 * @window:        W; a sender may send message i only while i < (lowest message it has not
 *                 seen aggregated) + W, so the aggregate of message i releases message i + W.
 * @switch_buffer: B slots; message i is buffered in slot i mod B from its first contribution
 *                 until its aggregate leaves.
 * @op:            how the switch aggregates the N contributions.
 */
struct coll_ina_sim {
	uint32_t senders;
	uint32_t messages;
	const double *values;
	const bool *lost;
	uint32_t window;
	uint32_t switch_buffer;
	enum coll_reduce_op op;
};

/**
 * Output of the simulator. The caller provides the arrays.
 * @aggregates:      [in] array of K doubles; out: the aggregate of each message, NAN for a
 *                  message never aggregated.
 * @sent:            [in] array of N counters, or NULL; out: messages each sender sent.
 * @completed:       messages aggregated and returned to every member.
 * @steps:           simulation steps; in one step every sender sends what its window allows,
 *                   the switch aggregates every complete message and returns it.
 * @peak_buffer:     most switch slots occupied at once (never above W).
 * @max_outstanding: most messages a sender had sent beyond its window base.
 * @stalled:         the protocol stopped before every message was aggregated.
 */
struct coll_ina_result {
	double *aggregates;
	uint32_t *sent;
	uint32_t completed;
	uint32_t steps;
	uint32_t peak_buffer;
	uint32_t max_outstanding;
	bool stalled;
};

/**
 * Run the window protocol until nothing moves. Returns 0 (a stall is a result, not an
 * error); -EINVAL (no senders, no messages, NULL arrays, sizes overflowing); -ENOBUFS as
 * coll_ina_check_window(); -ENOMEM. @err may be NULL.
 */
int coll_ina_simulate(const struct coll_ina_sim *sim, struct coll_ina_result *res,
                      struct coll_error *err);

#endif
