/*
 * Shared between the planner/coll*.c files only; not part of the public API (coll.h).
 * Same rules: pure, reentrant, any thread.
 */
#ifndef OFCD_COLL_INTERNAL_H
#define OFCD_COLL_INTERNAL_H

#include "coll.h"

/** Most participants of a checkable all-to-all schedule (its chunks grow as participants²). */
#define COLL_MAX_ALLTOALL_PARTICIPANTS 64u

/** Index of @name among names[0..n) (NULL entries skipped), or -EINVAL (also for NULL). */
int coll_name_index(const char *const *names, unsigned n, const char *name);

/** Set @err (may be NULL) to @field and the formatted reason. */
void coll_err_set(struct coll_error *err, const char *field, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

/** Size of chunk @c when @bytes are cut into @n chunks (the first bytes % n get one more). */
uint64_t coll_chunk_size(uint64_t bytes, uint32_t n, uint32_t c);

/** Set every chunk of @s to origin @origin, dest COLL_EVERY and an even share of @bytes. */
void coll_chunks_even(struct coll_schedule *s, uint64_t bytes, uint32_t origin);

/** µs per byte over a circuit: the share of its rate a transfer gets (1 Gbit/s is 125 B/µs). */
static inline double coll_beta(const struct coll_params *p)
{
	return 1.0 / (125.0 * p->link_gbps * p->link_efficiency);
}

/** µs per byte over an in-server link, as coll_beta(). */
static inline double coll_beta_intra(const struct coll_params *p)
{
	return 1.0 / (125.0 * p->intra_gbps * p->intra_efficiency);
}

/** 1 when @x is a power of two (x > 0). */
static inline int coll_is_pow2(uint32_t x)
{
	return x && !(x & (x - 1));
}

/** ceil(log2(x)) for x >= 1. */
static inline uint32_t coll_ceil_log2(uint32_t x)
{
	uint32_t k = 0;

	while (k < 32 && (1ull << k) < x)
		k++;
	return k;
}

/**
 * Whether algorithm @a applies to collective @c and fits @servers x @devices (shape only, no
 * capabilities or ports). Returns 0, -EINVAL (does not apply, bad size) or -EDOM (does not
 * fit), with a reason in @err.
 */
int coll_fit_shape(enum coll_collective c, enum coll_algorithm a, uint32_t servers,
                   uint32_t devices, struct coll_error *err);

/** Allreduce generators (ring, bidirectional-ring, rhd, full-mesh-direct, cube-300/400). */
int coll_gen_allreduce(enum coll_algorithm a, uint32_t servers, uint64_t bytes,
                       struct coll_schedule *s);

/** Allgather generators (ring, recursive-doubling, full-mesh-direct). */
int coll_gen_allgather(enum coll_algorithm a, uint32_t servers, uint64_t bytes,
                       struct coll_schedule *s);

/** Broadcast generators (binomial-tree, full-mesh-direct, scatter-allgather) from @root. */
int coll_gen_broadcast(enum coll_algorithm a, uint32_t servers, uint32_t root, uint64_t bytes,
                       struct coll_schedule *s);

/** All-to-all generators (direct, plane-relayed). */
int coll_gen_alltoall(enum coll_algorithm a, uint32_t servers, uint32_t devices, uint64_t bytes,
                      struct coll_schedule *s);

/** Rounds of all-to-all algorithm @a on @S servers of @D devices (UINT32_MAX at most). */
uint32_t coll_alltoall_rounds(enum coll_algorithm a, uint32_t S, uint32_t D);

/**
 * The destination of participant @x in round @r of all-to-all algorithm @a, and in @blocks how
 * many blocks its message carries: the one description both the generator and the price use.
 */
uint64_t coll_alltoall_step(enum coll_algorithm a, uint32_t S, uint32_t D, uint32_t r, uint64_t x,
                            uint32_t *blocks);

/**
 * Price all-to-all algorithm @a for @q bytes per device into @e (rounds, counts, circuits,
 * time) on the circuits of @p (validated), with the barrier whatever @p->sync (the caller
 * replays it without: coll_alltoall_flow_price()). Returns 0 or -ENOMEM.
 */
int coll_price_alltoall(enum coll_algorithm a, const struct coll_params *p, double q, uint32_t S,
                        uint32_t D, struct coll_estimate *e);

/** Bytes one link carries in a round, by latency class (see struct coll_links). */
struct coll_link_load {
	uint64_t key;    /* 0: free slot */
	double bytes[4]; /* by latency class */
};

/**
 * The links of one round and what each carries, to price the round by its busiest link. A
 * message between two servers takes the circuit joining them and, when servers have several
 * devices, a hop on an in-server link to the circuit's device and one from it; a message inside
 * a server takes the in-server link between its devices. Latency classes: 0 an in-server
 * message (alpha_i), 1 to 3 an inter-server one with 0 to 2 hops (alpha + hops alpha_i).
 */
struct coll_links {
	const struct coll_params *p;
	uint32_t servers, devices;
	double lat[4];                     /* latency of each class, µs */
	double k_circuit, k_intra, k_host; /* µs per byte (k_host 0: no host links) */
	uint32_t cap;                      /* slots, a power of two */
	struct coll_link_load *slot;       /* open addressing on key */
	uint32_t *used;                    /* slots taken this round */
	uint32_t nused;
};

/**
 * Start with room for @flows messages per round (a round must not add more: the table is
 * sized for them and does not grow). Returns 0 or -ENOMEM.
 */
int coll_links_init(struct coll_links *l, const struct coll_params *p, uint32_t servers,
                    uint32_t devices, uint32_t flows);

/** Add a message of @bytes from participant @src to @dst to the round. */
void coll_links_add(struct coll_links *l, uint32_t src, uint32_t dst, double bytes);

/** Most links one message crosses: a hop, the circuit, two host links, a hop. */
#define COLL_ROUTE_MAX 5

/**
 * The links a message from participant @src to @dst crosses, in order, as keys into @key (one
 * key per link and direction, the same whatever the message), and its latency class in @cls
 * (an index of @l->lat). Returns how many. Reads @l only: any thread that owns it.
 */
unsigned coll_links_route(const struct coll_links *l, uint32_t src, uint32_t dst,
                          uint64_t key[COLL_ROUTE_MAX], int *cls);

/** µs per byte on the link of @key (a key coll_links_route() gave). */
double coll_links_rate(const struct coll_links *l, uint64_t key);

/**
 * Price all-to-all schedule @s with no barrier between rounds (@p->sync pairwise or dataflow):
 * its transfers replayed as flows sharing every link max-min fairly, each starting its route's
 * latency after its sender's transfer of the round before and, pairwise, the transfer that
 * round brought the sender, dataflow, the transfers that brought the sender the chunks it
 * carries. The time the last transfer ends into *us. Returns 0; -E2BIG past COLL_FLOW_MAX
 * transfers, or when direct's P (P - 1) would be (both algorithms are replayed or neither);
 * -EINVAL (the barrier, another collective, an index out of range, a round that is not a
 * permutation of the participants, a chunk sent by a participant that does not hold it); or
 * -ENOMEM.
 */
int coll_schedule_flow_price(const struct coll_schedule *s, const struct coll_params *p,
                             double *us);

/** coll_schedule_flow_price() of all-to-all algorithm @a's schedule for @q bytes per device. */
int coll_alltoall_flow_price(enum coll_algorithm a, const struct coll_params *p, double q,
                             uint32_t S, uint32_t D, double *us);

/**
 * Most transfers coll_schedule_flow_price() replays (about 2 µs of CPU each, on the caller):
 * all-to-all on 64 participants.
 */
#define COLL_FLOW_MAX 4096u

/** One link's time in a round as a linear function of the rates: the sum of each times its rate. */
struct coll_lin {
	double a;  /* inter-server latencies (alpha_us) */
	double ai; /* in-server latencies (intra_alpha_us) */
	double b;  /* bytes over the circuit (coll_beta()) */
	double bi; /* bytes over in-server links (coll_beta_intra()) */
	double bh; /* bytes over a device's host link (device_link_gbps) */
};

/**
 * A round-by-round price kept as linear pieces, so that it can be priced again under other
 * rates without the schedule: the price is the sum over rounds of the largest piece of each
 * (every rate being >= 0, a link's latency order does not depend on them). Owned by its
 * maker; free with coll_profile_free().
 */
struct coll_profile {
	uint32_t nrounds;
	uint32_t *first;        /* nrounds + 1 offsets into piece */
	struct coll_lin *piece; /* the pieces no other piece of its round dominates */
};

/**
 * End the round as coll_links_round() does, appending its pieces to @pr instead of pricing it.
 * Returns 0 or -ENOMEM.
 */
int coll_links_round_profile(struct coll_links *l, struct coll_profile *pr);

/** The price of @pr under @p's rates, µs. */
double coll_profile_price(const struct coll_profile *pr, const struct coll_params *p);

void coll_profile_free(struct coll_profile *pr);

/**
 * Messages all-to-all algorithm @a sends on @S servers of @D devices when it is priced round by
 * round (the work of pricing it, or of its profile), 0 when it is priced by the closed-form
 * bound.
 */
uint64_t coll_alltoall_flows(enum coll_algorithm a, uint32_t S, uint32_t D);

/**
 * The profile of all-to-all algorithm @a (direct or plane-relayed) on the document 000 plan:
 * what coll_price_alltoall() computes round by round. Returns 0, -E2BIG when that price is the
 * closed-form bound instead (then coll_predict() is as cheap), -EINVAL or -ENOMEM.
 */
int coll_alltoall_profile(enum coll_algorithm a, const struct coll_params *p, double q, uint32_t S,
                          uint32_t D, struct coll_profile *out);

/** The round's time (its busiest link), and start the next round empty. */
double coll_links_round(struct coll_links *l);

/** Release what @l holds. */
void coll_links_free(struct coll_links *l);

/**
 * Steps of a one-way ring over order[0..n-1] (n >= 2) on chunks base..base+n-1, appended to
 * the current round of @s. Reduce-scatter step t (0..n-2): position i reduces chunk
 * base + (i - t) mod n into position i+1, so position i ends with chunk base + (i+1) mod n
 * complete. Allgather step t (0..n-2): position i copies chunk base + (i + shift - t) mod n
 * to position i+1 (shift 1 after a reduce-scatter, 0 when position i starts with chunk i).
 * Return 0 or -ENOMEM / -EOVERFLOW.
 */
int coll_ring_rs_step(struct coll_schedule *s, const uint32_t *order, uint32_t n, uint32_t base,
                      uint32_t t);
int coll_ring_ag_step(struct coll_schedule *s, const uint32_t *order, uint32_t n, uint32_t base,
                      uint32_t shift, uint32_t t);

/*
 * Allgather by recursive doubling over M servers (a power of two), server i starting with
 * chunk i: log2(M) rounds, in round d each server copies its 2^d chunks to the partner
 * i ^ 2^d. @scratch holds at least M entries. Return 0 or -ENOMEM / -EOVERFLOW.
 */
int coll_rd_allgather(struct coll_schedule *s, uint32_t M, uint32_t *scratch);

/**
 * A shape as a grid: M servers, @dims dimensions of @k, server s at coordinate
 * (s / stride[i]) % k[i]. A full mesh is one dimension of M (a single line).
 */
struct coll_grid {
	uint32_t M, dims;
	uint32_t k[COLL_MAX_DIMS];
	uint32_t stride[COLL_MAX_DIMS];
};

/** The grid of shape @sh (NULL or valid for @servers). */
void coll_grid_of(const struct coll_shape *sh, uint32_t servers, struct coll_grid *g);

/** Coordinate @i of server @s. */
static inline uint32_t coll_grid_coord(const struct coll_grid *g, uint32_t s, uint32_t i)
{
	return s / g->stride[i] % g->k[i];
}

/** Server @s with coordinate @i set to @v. */
static inline uint32_t coll_grid_move(const struct coll_grid *g, uint32_t s, uint32_t i, uint32_t v)
{
	return s - coll_grid_coord(g, s, i) * g->stride[i] + v * g->stride[i];
}

/** "3 x 4 HyperX", "full mesh", ... into @buf, for reasons. */
void coll_shape_describe(const struct coll_shape *sh, uint32_t servers, char *buf, size_t len);

/** Whether @a is one of the algorithms for HyperX or torus shapes. */
static inline int coll_is_shape_alg(enum coll_algorithm a)
{
	return a == COLL_ALG_HYPERX_DIM || a == COLL_ALG_HYPERX_A2A || a == COLL_ALG_TORUS_RING ||
	       a == COLL_ALG_TORUS_A2A;
}

/**
 * Whether algorithm @a for @c fits the circuits of @p->shape on @servers servers: the shape
 * is valid (-EINVAL, field "shape"); a shape algorithm runs on its own topology and size
 * (-EDOM); any other algorithm exchanges only with servers the shape joins (-EDOM naming the
 * first pair that is not). A full mesh fits every algorithm but the shape ones.
 */
int coll_shape_fit(enum coll_collective c, enum coll_algorithm a, uint32_t servers,
                   const struct coll_params *p, struct coll_error *err);

/**
 * Price shape algorithm @a for @c on @p->shape (valid, fitting): rounds, messages, circuits
 * and time for @n bytes (all-to-all: @n per device, @devices per server, carried per server).
 */
void coll_price_shape(enum coll_collective c, enum coll_algorithm a, const struct coll_params *p,
                      double n, uint32_t servers, uint32_t devices, struct coll_estimate *e);

/** Generators of the shape algorithms into @s (one participant per server). */
int coll_gen_shape(enum coll_collective c, enum coll_algorithm a, const struct coll_params *p,
                   uint32_t servers, uint32_t devices, uint64_t bytes, struct coll_schedule *s);

/** All-to-all of @bytes per server on grid @g (hyperx-dim-ordered-a2a, torus-dim-ordered-a2a). */
int coll_gen_shape_a2a(enum coll_algorithm a, const struct coll_grid *g, uint64_t bytes,
                       struct coll_schedule *s);

/** Rounds of the torus all-to-all along a ring of @k: clockwise steps floor(k/2). */
static inline uint32_t coll_torus_cw(uint32_t k)
{
	return k / 2;
}

/** Counter-clockwise steps of the torus all-to-all along a ring of @k: floor((k-1)/2). */
static inline uint32_t coll_torus_ccw(uint32_t k)
{
	return (k - 1) / 2;
}

#endif
