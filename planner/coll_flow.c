/*
 * An all-to-all priced without a barrier between its rounds: the schedule's messages replayed
 * as flows, each participant going on as soon as its own previous send and receive are through
 * (MPI's pairwise exchange), every link shared max-min fairly among the flows crossing it. Sums
 * of rounds cannot say this: across rounds, flows of different rounds meet on the same circuits
 * and in-server links, and which of them a link slows decides the end. Derivation:
 * docs/cost-model.md, "Without the barrier".
 */
#include "coll_internal.h"

#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

/* Two times this close are one event: SimGrid-class solvers resolve no finer. */
#define SAME_TIME(a, b) (fabs((a) - (b)) <= 1e-12 * fmax(1.0, fabs(a)))

struct flow {
	double left;    /* bytes still to go */
	double rate;    /* bytes per µs while active */
	double ready;   /* when the last message it waits for ended, µs */
	double latency; /* its route's, µs */
	uint32_t link[COLL_ROUTE_MAX];
	uint8_t nlinks;
	uint8_t waits; /* messages still to end before it may start */
	uint32_t next[2];
	uint8_t nnext;
};

struct link_state {
	double speed; /* bytes per µs */
	/* During a sharing: */
	double room;    /* what the flows fixed so far leave */
	double level;   /* room / open at the start of the round of filling */
	uint32_t open;  /* active flows on it not yet fixed */
	uint32_t stamp; /* the sharing that last reset it */
};

struct replay {
	uint32_t n;
	struct flow *f;
	struct link_state *link;
	uint32_t nlink;
	uint64_t *key; /* open addressing: link key, 0 free */
	uint32_t *id;
	uint32_t cap;
	uint32_t *active, nactive;
	bool *fixed;
	uint32_t *touched, ntouched; /* the links of the active flows, each once */
	uint32_t stamp;
	double *heap_t; /* starts not yet due: (time, flow), a binary min-heap */
	uint32_t *heap_f, nheap;
};

static uint32_t link_id(struct replay *r, const struct coll_links *l, uint64_t key)
{
	uint32_t mask = r->cap - 1, i = (uint32_t)((key * 0x9e3779b97f4a7c15ull) >> 32) & mask;

	while (r->key[i] && r->key[i] != key)
		i = (i + 1) & mask;
	if (!r->key[i]) {
		r->key[i] = key;
		r->id[i] = r->nlink;
		r->link[r->nlink++].speed = 1.0 / coll_links_rate(l, key);
	}
	return r->id[i];
}

static void heap_push(struct replay *r, double t, uint32_t f)
{
	uint32_t i = r->nheap++;

	while (i && r->heap_t[(i - 1) / 2] > t) {
		r->heap_t[i] = r->heap_t[(i - 1) / 2];
		r->heap_f[i] = r->heap_f[(i - 1) / 2];
		i = (i - 1) / 2;
	}
	r->heap_t[i] = t;
	r->heap_f[i] = f;
}

static uint32_t heap_pop(struct replay *r)
{
	uint32_t top = r->heap_f[0], i = 0, n = --r->nheap;
	double t = r->heap_t[n];

	for (;;) {
		uint32_t c = 2 * i + 1;

		if (c >= n)
			break;
		if (c + 1 < n && r->heap_t[c + 1] < r->heap_t[c])
			c++;
		if (r->heap_t[c] >= t)
			break;
		r->heap_t[i] = r->heap_t[c];
		r->heap_f[i] = r->heap_f[c];
		i = c;
	}
	r->heap_t[i] = t;
	r->heap_f[i] = r->heap_f[n];
	return top;
}

static void replay_free(struct replay *r)
{
	free(r->f);
	free(r->link);
	free(r->key);
	free(r->id);
	free(r->active);
	free(r->fixed);
	free(r->touched);
	free(r->heap_t);
	free(r->heap_f);
}

static int replay_alloc(struct replay *r, uint32_t n)
{
	memset(r, 0, sizeof(*r));
	r->n = n;
	r->cap = 16;
	while (r->cap < 2u * COLL_ROUTE_MAX * n)
		r->cap *= 2;
	r->f = calloc(n, sizeof(*r->f));
	r->link = calloc((size_t)COLL_ROUTE_MAX * n, sizeof(*r->link));
	r->key = calloc(r->cap, sizeof(*r->key));
	r->id = calloc(r->cap, sizeof(*r->id));
	r->active = calloc(n, sizeof(*r->active));
	r->fixed = calloc(n, sizeof(*r->fixed));
	r->touched = calloc((size_t)COLL_ROUTE_MAX * n, sizeof(*r->touched));
	r->heap_t = calloc(n, sizeof(*r->heap_t));
	r->heap_f = calloc(n, sizeof(*r->heap_f));
	if (r->f && r->link && r->key && r->id && r->active && r->fixed && r->touched &&
	    r->heap_t && r->heap_f)
		return 0;
	replay_free(r);
	return -ENOMEM;
}

/* Flow r * P + x is participant x's message of round r; each waits as the header says. */
static void build(struct replay *r, const struct coll_links *l, enum coll_algorithm a,
                  uint32_t rounds, uint64_t P, double blk)
{
	for (uint32_t k = 0; k < rounds; k++)
		for (uint64_t x = 0; x < P; x++) {
			struct flow *f = &r->f[k * P + x];
			uint64_t key[COLL_ROUTE_MAX];
			uint32_t blocks;
			int cls;
			uint64_t y = coll_alltoall_step(a, l->servers, l->devices, k, x, &blocks);

			f->left = blocks * blk;
			f->nlinks =
			    (uint8_t)coll_links_route(l, (uint32_t)x, (uint32_t)y, key, &cls);
			for (unsigned i = 0; i < f->nlinks; i++)
				f->link[i] = link_id(r, l, key[i]);
			f->latency = l->lat[cls];
			if (k + 1 < rounds) {
				f->next[f->nnext++] = (uint32_t)((k + 1) * P + x);
				f->next[f->nnext++] = (uint32_t)((k + 1) * P + y);
				r->f[(k + 1) * P + x].waits++;
				r->f[(k + 1) * P + y].waits++;
			}
		}
}

/*
 * Max-min fair rates of the active flows (progressive filling): every flow's rate rises
 * together until a link is full; the flows on it keep that rate, and the others go on.
 */
static void share(struct replay *r)
{
	r->stamp++;
	r->ntouched = 0;
	for (uint32_t i = 0; i < r->nactive; i++) {
		const struct flow *f = &r->f[r->active[i]];

		for (unsigned j = 0; j < f->nlinks; j++) {
			struct link_state *k = &r->link[f->link[j]];

			if (k->stamp != r->stamp) {
				k->stamp = r->stamp;
				k->room = k->speed;
				k->open = 0;
				r->touched[r->ntouched++] = f->link[j];
			}
			k->open++;
		}
		r->fixed[i] = false;
	}
	for (uint32_t left = r->nactive; left;) {
		double level = INFINITY;

		for (uint32_t i = 0; i < r->ntouched; i++) {
			struct link_state *k = &r->link[r->touched[i]];

			k->level = k->open ? k->room / k->open : INFINITY;
			if (k->level < level)
				level = k->level;
		}
		for (uint32_t i = 0; i < r->nactive; i++) {
			struct flow *f = &r->f[r->active[i]];
			bool full = false;

			if (r->fixed[i])
				continue;
			for (unsigned j = 0; j < f->nlinks && !full; j++)
				full = r->link[f->link[j]].level <= level * (1 + 1e-12);
			if (!full)
				continue;
			f->rate = level;
			r->fixed[i] = true;
			left--;
			for (unsigned j = 0; j < f->nlinks; j++) {
				struct link_state *k = &r->link[f->link[j]];

				k->room = k->room > level ? k->room - level : 0;
				k->open--;
			}
		}
	}
}

/* Flow @i ends at @t: what waited only for it may start, its latency later. */
static void end(struct replay *r, uint32_t i, double t)
{
	const struct flow *f = &r->f[i];

	for (unsigned j = 0; j < f->nnext; j++) {
		struct flow *g = &r->f[f->next[j]];

		g->ready = fmax(g->ready, t);
		if (!--g->waits)
			heap_push(r, g->ready + g->latency, f->next[j]);
	}
}

static double run(struct replay *r)
{
	double now = 0;
	uint32_t ended = 0;
	bool stale = false;

	for (uint32_t i = 0; i < r->n; i++)
		if (!r->f[i].waits)
			heap_push(r, r->f[i].latency, i);
	while (ended < r->n) {
		double step = INFINITY;

		while (r->nheap && (r->heap_t[0] <= now || SAME_TIME(r->heap_t[0], now))) {
			uint32_t i = heap_pop(r);

			if (r->f[i].left > 0) {
				r->active[r->nactive++] = i;
				stale = true;
			} else {
				ended++;
				end(r, i, now);
			}
		}
		if (!r->nactive) {
			if (!r->nheap)
				break; /* every flow is reachable: cannot happen */
			now = r->heap_t[0];
			continue;
		}
		if (stale)
			share(r);
		stale = false;
		for (uint32_t i = 0; i < r->nactive; i++) {
			const struct flow *f = &r->f[r->active[i]];

			if (f->left < step * f->rate)
				step = f->left / f->rate;
		}
		if (r->nheap && r->heap_t[0] - now < step)
			step = r->heap_t[0] - now;
		now += step;
		for (uint32_t i = 0; i < r->nactive;) {
			uint32_t k = r->active[i];
			struct flow *f = &r->f[k];
			double t = f->left / f->rate;

			if (t > step && !SAME_TIME(t, step)) {
				f->left -= f->rate * step;
				i++;
				continue;
			}
			f->left = 0;
			r->active[i] = r->active[--r->nactive];
			ended++;
			end(r, k, now);
			stale = true;
		}
	}
	return now;
}

int coll_alltoall_flow_price(enum coll_algorithm a, const struct coll_params *p, double q,
                             uint32_t S, uint32_t D, double *us)
{
	uint64_t P = (uint64_t)S * D;
	uint32_t rounds = coll_alltoall_rounds(a, S, D);
	struct coll_links l;
	struct replay r;
	int rc;

	if (a != COLL_ALG_DIRECT && a != COLL_ALG_PLANE_RELAYED)
		return -EINVAL;
	if ((double)P * rounds > COLL_FLOW_MAX)
		return -E2BIG;
	rc = coll_links_init(&l, p, S, D, 1);
	if (rc)
		return rc;
	rc = replay_alloc(&r, (uint32_t)(P * rounds));
	if (!rc) {
		build(&r, &l, a, rounds, P, q / (double)P);
		*us = run(&r);
		replay_free(&r);
	}
	coll_links_free(&l);
	return rc;
}
