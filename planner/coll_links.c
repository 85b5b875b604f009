/*
 * The links of a round on a document 000 fabric and what each carries: the price of a round is
 * its busiest link. Used by the schedule price and the all-to-all price alike, so that both
 * see the same circuits. Derivations: docs/cost-model.md, "All-to-all (document 002)".
 */
#include "coll_internal.h"

#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

uint32_t coll_plan_circuit_device(uint32_t servers, uint32_t a, uint32_t b)
{
	uint32_t n = servers - 1;

	/* Formula 1 puts the pair {a, b} on plane (a + b) mod M. */
	if (servers % 2)
		return (uint32_t)(((uint64_t)a + b) % servers);
	/*
	 * Formula 3 (pivot n = M - 1): two other servers meet on plane a + b - 1 mod n, server s
	 * meets the pivot on plane 2s - 1 mod n (where formula 3 would send s to itself).
	 */
	if (a == n || b == n)
		return (uint32_t)((2ull * (a == n ? b : a) + n - 1) % n);
	return (uint32_t)(((uint64_t)a + b + n - 1) % n);
}

static uint32_t circuit_device(const struct coll_links *l, uint32_t a, uint32_t b)
{
	return l->p->circuit_device ? l->p->circuit_device[(size_t)a * l->servers + b]
	                            : coll_plan_circuit_device(l->servers, a, b);
}

int coll_links_init(struct coll_links *l, const struct coll_params *p, uint32_t servers,
                    uint32_t devices, uint32_t flows)
{
	uint64_t cap = 16;

	memset(l, 0, sizeof(*l));
	/* Five links a message at most (with the host links), the table at most half full. */
	while (cap < 10ull * flows)
		cap *= 2;
	if (cap > (1u << 31))
		return -ENOMEM;
	l->slot = calloc(cap, sizeof(*l->slot));
	l->used = calloc(cap, sizeof(*l->used));
	if (!l->slot || !l->used) {
		coll_links_free(l);
		return -ENOMEM;
	}
	l->cap = (uint32_t)cap;
	l->p = p;
	l->servers = servers;
	l->devices = devices;
	l->lat[0] = p->intra_alpha_us;
	l->lat[1] = p->alpha_us;
	l->lat[2] = p->alpha_us + p->intra_alpha_us;
	l->lat[3] = p->alpha_us + 2 * p->intra_alpha_us;
	l->k_circuit = coll_beta(p);
	l->k_intra = coll_beta_intra(p);
	l->k_host = p->device_link_gbps > 0 ? 1.0 / (125.0 * p->device_link_gbps) : 0;
	return 0;
}

void coll_links_free(struct coll_links *l)
{
	free(l->slot);
	free(l->used);
	memset(l, 0, sizeof(*l));
}

/*
 * Key 4 * index + kind: kind 1 a circuit direction a -> b, 2 an in-server link s: d -> e, 3 the
 * host link of device d of server s, one way.
 */
enum { KIND_CIRCUIT = 1, KIND_INTRA = 2, KIND_HOST = 3 };
static void load(struct coll_links *l, uint64_t key, int cls, double bytes)
{
	uint32_t mask = l->cap - 1;
	uint32_t i = (uint32_t)((key * 0x9e3779b97f4a7c15ull) >> 32) & mask;

	while (l->slot[i].key && l->slot[i].key != key)
		i = (i + 1) & mask;
	if (!l->slot[i].key) {
		l->slot[i].key = key;
		l->used[l->nused++] = i;
	}
	l->slot[i].bytes[cls] += bytes;
}

/* Strides of COLL_MAX_DEVICES: a circuit may end on a device that is not a participant. */
static uint64_t intra_key(uint32_t s, uint32_t d, uint32_t e)
{
	return (((uint64_t)s * COLL_MAX_DEVICES + d) * COLL_MAX_DEVICES + e) * 4 + KIND_INTRA;
}

static uint64_t host_key(uint32_t s, uint32_t d, int out)
{
	return (((uint64_t)s * COLL_MAX_DEVICES + d) * 2 + (uint64_t)out) * 4 + KIND_HOST;
}

double coll_links_rate(const struct coll_links *l, uint64_t key)
{
	switch (key % 4) {
	case KIND_CIRCUIT:
		return l->k_circuit;
	case KIND_INTRA:
		return l->k_intra;
	default:
		return l->k_host;
	}
}

unsigned coll_links_route(const struct coll_links *l, uint32_t src, uint32_t dst,
                          uint64_t key[COLL_ROUTE_MAX], int *cls)
{
	uint32_t D = l->devices, a = src / D, b = dst / D, d = src % D, e = dst % D;
	uint32_t ca, cb;
	unsigned n = 0;

	if (a == b) {
		key[0] = intra_key(a, d, e);
		*cls = 0;
		return 1;
	}
	/* A server of one device holds everything where its circuits end (no hop). */
	ca = D > 1 ? circuit_device(l, a, b) : d;
	cb = D > 1 ? circuit_device(l, b, a) : e;
	*cls = 1 + (d != ca) + (e != cb);
	if (d != ca)
		key[n++] = intra_key(a, d, ca);
	key[n++] = ((uint64_t)a * l->servers + b) * 4 + KIND_CIRCUIT;
	/* The circuit's devices reach their ports through their host links (server-level
	 * schedules have one participant per server, not its devices: none there). */
	if (l->k_host > 0 && D > 1) {
		key[n++] = host_key(a, ca, 1);
		key[n++] = host_key(b, cb, 0);
	}
	if (e != cb)
		key[n++] = intra_key(b, cb, e);
	return n;
}

void coll_links_add(struct coll_links *l, uint32_t src, uint32_t dst, double bytes)
{
	uint64_t key[COLL_ROUTE_MAX];
	int cls;
	unsigned n = coll_links_route(l, src, dst, key, &cls);

	for (unsigned i = 0; i < n; i++)
		load(l, key[i], cls, bytes);
}

/*
 * A link whose messages start at their route's latency keeps busy from the start of any of
 * them until every message starting no earlier is through: the latest such end is its time.
 */
static double busy(const struct coll_links *l, const struct coll_link_load *ld, double k)
{
	double t = 0;

	for (int c = 0; c < 4; c++) {
		double after = 0;

		if (ld->bytes[c] <= 0)
			continue;
		for (int o = 0; o < 4; o++)
			if (l->lat[o] >= l->lat[c])
				after += ld->bytes[o];
		t = fmax(t, l->lat[c] + after * k);
	}
	return t;
}

double coll_links_round(struct coll_links *l)
{
	double t = 0;

	for (uint32_t i = 0; i < l->nused; i++) {
		struct coll_link_load *ld = &l->slot[l->used[i]];

		t = fmax(t, busy(l, ld, coll_links_rate(l, ld->key)));
		memset(ld, 0, sizeof(*ld));
	}
	l->nused = 0;
	return t;
}

/* Piece x is no larger than y under every rate: it can never be the largest. */
static bool dominated(const struct coll_lin *x, const struct coll_lin *y)
{
	return x->a <= y->a && x->ai <= y->ai && x->b <= y->b && x->bi <= y->bi && x->bh <= y->bh;
}

/* The latency of each class in alphas: a circuit and its hops. */
static const double class_a[4] = { 0, 1, 1, 1 }, class_ai[4] = { 1, 0, 1, 2 };

int coll_links_round_profile(struct coll_links *l, struct coll_profile *pr)
{
	uint32_t start = pr->first ? pr->first[pr->nrounds] : 0, n = start;
	uint32_t *first = realloc(pr->first, sizeof(*first) * (pr->nrounds + 2));
	struct coll_lin *piece;

	if (!first)
		return -ENOMEM;
	pr->first = first;
	first[pr->nrounds] = start;
	piece = realloc(pr->piece, sizeof(*piece) * ((size_t)start + 4 * l->nused + 1));
	if (!piece)
		return -ENOMEM;
	pr->piece = piece;
	for (uint32_t i = 0; i < l->nused; i++) {
		struct coll_link_load *ld = &l->slot[l->used[i]];

		for (int c = 0; c < 4; c++) {
			struct coll_lin x = { class_a[c], class_ai[c], 0, 0, 0 };
			double after = 0;
			bool keep = true;

			if (ld->bytes[c] <= 0)
				continue;
			for (int o = 0; o < 4; o++)
				if (class_a[o] >= class_a[c] && class_ai[o] >= class_ai[c])
					after += ld->bytes[o];
			*(ld->key % 4 == KIND_CIRCUIT ? &x.b
			  : ld->key % 4 == KIND_INTRA ? &x.bi
			                              : &x.bh) = after;
			for (uint32_t j = start; j < n && keep; j++)
				keep = !dominated(&x, &piece[j]);
			if (!keep)
				continue;
			for (uint32_t j = start; j < n;)
				if (dominated(&piece[j], &x))
					piece[j] = piece[--n];
				else
					j++;
			piece[n++] = x;
		}
		memset(ld, 0, sizeof(*ld));
	}
	l->nused = 0;
	pr->nrounds++;
	first[pr->nrounds] = n;
	return 0;
}

double coll_profile_price(const struct coll_profile *pr, const struct coll_params *p)
{
	double a = p->alpha_us, ai = p->intra_alpha_us, b = coll_beta(p), bi = coll_beta_intra(p);
	double bh = p->device_link_gbps > 0 ? 1.0 / (125.0 * p->device_link_gbps) : 0, total = 0;

	for (uint32_t r = 0; r < pr->nrounds; r++) {
		double t = 0;

		for (uint32_t j = pr->first[r]; j < pr->first[r + 1]; j++) {
			const struct coll_lin *x = &pr->piece[j];
			t = fmax(t, x->a * a + x->ai * ai + x->b * b + x->bi * bi + x->bh * bh);
		}
		total += t;
	}
	return total;
}

void coll_profile_free(struct coll_profile *pr)
{
	free(pr->first);
	free(pr->piece);
	memset(pr, 0, sizeof(*pr));
}
