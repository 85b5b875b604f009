/*
 * Collective schedules: the round-by-round description of a collective
 * (allreduce, allgather, broadcast, all-to-all) and the one checker that
 * proves any such schedule correct by tracking every chunk.
 *
 * Pure and reentrant: no I/O, no global state. Every function may be called
 * from any thread on distinct objects; a schedule is not locked.
 */
#ifndef OFCD_COLL_SCHEDULE_H
#define OFCD_COLL_SCHEDULE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/** Most participants a schedule may have (the checker's state is participants² chunks). */
#define COLL_MAX_PARTICIPANTS 256u

/** Chunk origin/destination meaning "every participant". */
#define COLL_EVERY UINT32_MAX

/** Length of a human-readable reason, terminator included. */
#define COLL_REASON_LEN 192

/** The collectives ofcd knows. */
enum coll_collective {
	COLL_ALLREDUCE = 0, /**< every participant ends with the reduction of all inputs */
	COLL_ALLGATHER,     /**< every participant ends with every participant's block */
	COLL_ALLTOALL,      /**< participant j ends with block (i -> j) of every i */
	COLL_BROADCAST,     /**< every participant ends with the root's data */
	COLL_COLLECTIVE__COUNT
};

/** Most dimensions of a HyperX or torus shape. */
#define COLL_MAX_DIMS 4u

/** How the fabric's circuits join its servers. */
enum coll_topology {
	COLL_TOPO_FULL_MESH = 0, /**< "full-mesh": one circuit per pair of servers (document 000) */
	COLL_TOPO_HYPERX,        /**< "hyperx": a grid whose every line is a full mesh */
	COLL_TOPO_TORUS,         /**< "torus": a grid joining each server to its +-1 neighbours */
	COLL_TOPOLOGY__COUNT
};

/**
 * The shape of a fabric's circuits. The servers form a grid k[0] x k[1] x ... (dimension 0
 * fastest): server s has coordinate i (s / (k[0] ... k[i-1])) mod k[i]. HyperX joins every
 * two servers that differ in exactly one coordinate (each line a full mesh of k[i]); torus
 * joins each server to the servers one step either way on each dimension, wrapping around
 * (a dimension of 2 gives one neighbour, of 1 none). One circuit per joined pair.
 * Plain data, owned by whoever holds it; all-zero is the full mesh.
 * @topology: COLL_TOPO_FULL_MESH ignores @dims and @k.
 * @dims:     1..COLL_MAX_DIMS for HyperX and torus.
 * @k:        size of each dimension (>= 1); the product of k[0..dims) is the number of
 *            servers. Entries from @dims on are ignored.
 */
struct coll_shape {
	enum coll_topology topology;
	uint32_t dims;
	uint32_t k[COLL_MAX_DIMS];
};

/**
 * Whether servers @a and @b (both < @servers, a != b) of shape @sh are joined by a circuit.
 * A NULL @sh or a full mesh joins every pair. @sh must be valid for @servers
 * (coll_shape_validate() in coll.h); pure, any thread.
 */
bool coll_shape_has_circuit(const struct coll_shape *sh, uint32_t servers, uint32_t a, uint32_t b);

/** What a transfer does at its destination. */
enum coll_op {
	COLL_OP_COPY = 0, /**< the destination's copy of each chunk is replaced by the source's */
	COLL_OP_REDUCE,   /**< the source's contributions are reduced into the destination's */
};

/**
 * Why a call failed, for humans (and for the REST error body).
 * @field:  name of the offending parameter (a static string, e.g. "window"), or NULL when the
 *          failure is not about one parameter.
 * @reason: NUL-terminated sentence, e.g. "round 3, transfer 5 (2->3): ...".
 */
struct coll_error {
	const char *field;
	char reason[COLL_REASON_LEN];
};

/**
 * One chunk of the data. A chunk is the unit the checker tracks.
 * @origin: COLL_EVERY when every participant contributes its own copy that must be reduced
 *          (allreduce); else the one participant that holds the chunk at the start.
 * @dest:   COLL_EVERY when every participant must end with the complete chunk; else the one
 *          participant that must (all-to-all block i -> j has origin i and dest j).
 * @bytes:  size of the chunk.
 */
struct coll_chunk {
	uint32_t origin;
	uint32_t dest;
	uint64_t bytes;
};

/**
 * One transfer: @src sends the chunks chunk_refs[@chunk_first .. @chunk_first + @nchunks) of the
 * schedule to @dst over the link src->dst (an inter-server circuit, or an in-server path when
 * both participants are on the same server), as one message of @bytes bytes (the sum of the
 * chunks' sizes).
 */
struct coll_transfer {
	uint32_t src;
	uint32_t dst;
	enum coll_op op;
	uint32_t chunk_first;
	uint32_t nchunks;
	uint64_t bytes;
};

/** One round: transfers[@first .. @first + @count) of the schedule, all concurrent. */
struct coll_round {
	uint32_t first;
	uint32_t count;
};

/**
 * A schedule. Participants are numbered 0..participants-1; participant p is device
 * (p % @devices) of server (p / @devices). Server-level collectives have @devices == 1, so a
 * participant is a server; the all-to-all of document 002 has one participant per device.
 *
 * All arrays are owned by the schedule (allocated by coll_schedule_init() and the add
 * functions, released by coll_schedule_free()). Callers may read and, e.g. in tests, edit
 * the entries in place; the checker re-validates every index.
 *
 * @collective, @algorithm: what was generated (informational; the checker derives the
 *                          goal from the chunks alone). @algorithm is an enum coll_algorithm
 *                          from coll.h, or -1 for a hand-built schedule.
 * @servers, @devices:      shape; @participants == @servers * @devices.
 * @bytes:                  per-participant data size the schedule was generated for.
 * @shape:                  the circuits transfers between servers may use: the full mesh
 *                          (all-zero, what coll_schedule_init() leaves) unless a generator for
 *                          a HyperX or torus fabric sets it; the checker fails a transfer
 *                          between two servers the shape does not join.
 * @circuit_load:           most transfers one circuit direction may carry in one round. Two
 *                          servers are joined by one circuit (document 000), so every transfer
 *                          between them, whichever devices it joins, shares it; the generators
 *                          set what their price assumes and the checker holds every round to it.
 *                          0 means 1.
 * @chunks:                 @nchunks entries.
 * @rounds:                 @nrounds entries, in order, covering @transfers contiguously.
 * @transfers:              @ntransfers entries.
 * @chunk_refs:             @nrefs chunk indexes, referenced by the transfers.
 * The *_cap fields are allocation sizes; do not touch them.
 */
struct coll_schedule {
	enum coll_collective collective;
	int algorithm;
	uint32_t servers;
	uint32_t devices;
	uint32_t participants;
	uint64_t bytes;
	struct coll_shape shape;
	uint32_t circuit_load;
	uint32_t nchunks;
	struct coll_chunk *chunks;
	uint32_t nrounds;
	uint32_t rounds_cap;
	struct coll_round *rounds;
	uint32_t ntransfers;
	uint32_t transfers_cap;
	struct coll_transfer *transfers;
	uint32_t nrefs;
	uint32_t refs_cap;
	uint32_t *chunk_refs;
};

/**
 * Figures computed from a schedule.
 * @rounds, @transfers: counts.
 * @inter_messages:     transfers between participants on different servers.
 * @intra_messages:     transfers between participants on the same server.
 * @max_degree:         most distinct peers any participant exchanges with (for a server-level
 *                      schedule, the circuits per server it needs).
 * @max_circuit_load:   most transfers one circuit direction (one ordered pair of servers)
 *                      carries in one round.
 * @bytes_sent:         sum of all transfers' bytes.
 */
struct coll_schedule_stats {
	uint32_t rounds;
	uint32_t transfers;
	uint64_t inter_messages;
	uint64_t intra_messages;
	uint32_t max_degree;
	uint32_t max_circuit_load;
	uint64_t bytes_sent;
};

/**
 * Start an empty schedule of @servers x @devices participants and @nchunks chunks, every chunk
 * with origin and dest COLL_EVERY and 0 bytes: set s->chunks[] before adding transfers.
 * @s need not be initialised; on error it is left empty (coll_schedule_free() is safe).
 * Returns 0, -EINVAL (zero or too many participants, bad collective), -ENOMEM.
 */
int coll_schedule_init(struct coll_schedule *s, enum coll_collective collective, int algorithm,
                       uint32_t servers, uint32_t devices, uint32_t nchunks);

/** Append an empty round; later transfers go into it. Returns 0 or -ENOMEM / -EOVERFLOW. */
int coll_schedule_add_round(struct coll_schedule *s);

/**
 * Append a transfer to the last round (adding a first round if there is none). @chunks
 * (@nchunks indexes) is copied; the transfer's bytes are the sum of those chunks' current
 * sizes. Indexes are checked by coll_check(), not here. Returns 0, -EINVAL (@nchunks == 0),
 * -ENOMEM or -EOVERFLOW.
 */
int coll_schedule_add_transfer(struct coll_schedule *s, uint32_t src, uint32_t dst, enum coll_op op,
                               const uint32_t *chunks, uint32_t nchunks);

/** Release everything @s owns and leave it empty. NULL or an empty schedule is fine. */
void coll_schedule_free(struct coll_schedule *s);

/** Transfer @i of round @r (both in range; not checked). */
static inline const struct coll_transfer *coll_round_transfer(const struct coll_schedule *s,
                                                              uint32_t r, uint32_t i)
{
	return &s->transfers[s->rounds[r].first + i];
}

/** The chunk indexes a transfer carries (t->nchunks entries, owned by @s). */
static inline const uint32_t *coll_transfer_chunks(const struct coll_schedule *s,
                                                   const struct coll_transfer *t)
{
	return &s->chunk_refs[t->chunk_first];
}

/**
 * The checker. Replays @s keeping, for every participant and chunk, the set of contributions
 * held (a bitset over participants). Initially a chunk with origin COLL_EVERY is held by
 * every participant with its own contribution, any other chunk only by its origin. In each
 * round every transfer reads its source's sets as they were at the start of the round, then:
 * COPY replaces the destination's set, REDUCE merges into it and fails if a contribution is
 * already present (it would be counted twice). It fails when a round uses one link direction
 * (src->dst) twice, when the transfers between two servers in one round (which share the one
 * circuit joining them) outnumber @circuit_load, when a transfer sends a chunk its source does
 * not hold, when a transfer joins two servers that @shape does not join, when one chunk
 * of one participant is both copied into and written otherwise in one round, on any index out
 * of range, and when a transfer's bytes are not the sum of its chunks. At the end every
 * participant named by a chunk's dest (all for COLL_EVERY) must hold the complete chunk:
 * every participant's contribution for an origin-COLL_EVERY chunk, the origin's otherwise.
 *
 * Returns 0 when the schedule is correct, -EINVAL with @err->reason naming the round and the
 * transfer, -E2BIG (too large to check), -ENOMEM. @err may be NULL.
 */
int coll_check(const struct coll_schedule *s, struct coll_error *err);

/** Fill @st from @s. Returns 0, -EINVAL (participant out of range) or -ENOMEM. */
int coll_schedule_stats(const struct coll_schedule *s, struct coll_schedule_stats *st);

#endif
