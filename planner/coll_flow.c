/*
 * An all-to-all priced without a barrier between its rounds: the schedule's transfers replayed
 * as flows, every link shared max-min fairly among the flows crossing it, each transfer
 * starting as soon as what it waits for is through:
 *   pairwise (MPI's pairwise exchange): its sender's transfer of the round before and the
 *     transfer that round brought the sender;
 *   dataflow (a library that posts every send at once, NCCL): its sender's transfer of the
 *     round before and the transfers that brought the sender the chunks it carries.
 * Sums of rounds cannot say this: across rounds, flows of different rounds meet on the same
 * circuits and in-server links, and which of them a link slows decides the end. Derivation:
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
	double ready;   /* when the last transfer it waits for ended, µs */
	double latency; /* its route's, µs */
	uint32_t link[COLL_ROUTE_MAX];
	uint8_t nlinks;
	uint32_t waits;      /* transfers still to end before it may start */
	uint32_t next_first; /* its dependents: next[next_first .. next_first + nnext) */
	uint32_t nnext;
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
	struct link_state *link; /* link_cap entries, nlink used */
	uint32_t nlink, link_cap;
	uint64_t *key; /* open addressing: link key, 0 free; cap entries, a power of two */
	uint32_t *id;
	uint32_t cap;
	uint32_t *active, nactive;
	bool *fixed;
	uint32_t *touched, ntouched; /* the links of the active flows, each once */
	uint32_t stamp;
	double *heap_t; /* starts not yet due: (time, flow), a binary min-heap */
	uint32_t *heap_f, nheap;
	uint32_t *next; /* every flow's dependents, flow by flow */
};

/* The key table twice as large, its keys placed again. Returns 0 or -ENOMEM. */
static int rehash(struct replay *r)
{
	uint32_t cap = r->cap ? 2 * r->cap : 256, mask = cap - 1;
	uint64_t *key = calloc(cap, sizeof(*key));
	uint32_t *id = malloc(cap * sizeof(*id));

	if (!key || !id) {
		free(key);
		free(id);
		return -ENOMEM;
	}
	for (uint32_t j = 0; j < r->cap; j++) {
		uint32_t i = (uint32_t)((r->key[j] * 0x9e3779b97f4a7c15ull) >> 32) & mask;

		if (!r->key[j])
			continue;
		while (key[i])
			i = (i + 1) & mask;
		key[i] = r->key[j];
		id[i] = r->id[j];
	}
	free(r->key);
	free(r->id);
	r->key = key;
	r->id = id;
	r->cap = cap;
	return 0;
}

/*
 * The id of the link of @key, added when new: the tables grow with the links (a few hundred
 * for thousands of transfers), so that a replay touches no more memory than it uses. Returns
 * UINT32_MAX when out of memory.
 */
static uint32_t link_id(struct replay *r, const struct coll_links *l, uint64_t key)
{
	uint32_t mask, i;

	if (2 * (r->nlink + 1) > r->cap && rehash(r) < 0)
		return UINT32_MAX;
	mask = r->cap - 1;
	i = (uint32_t)((key * 0x9e3779b97f4a7c15ull) >> 32) & mask;
	while (r->key[i] && r->key[i] != key)
		i = (i + 1) & mask;
	if (r->key[i])
		return r->id[i];
	if (r->nlink == r->link_cap) {
		uint32_t cap = r->link_cap ? 2 * r->link_cap : 128;
		struct link_state *link = realloc(r->link, cap * sizeof(*link));
		uint32_t *touched = link ? realloc(r->touched, cap * sizeof(*touched)) : NULL;

		if (link)
			r->link = link;
		if (!touched)
			return UINT32_MAX;
		r->touched = touched;
		r->link_cap = cap;
	}
	r->key[i] = key;
	r->id[i] = r->nlink;
	r->link[r->nlink] = (struct link_state){ .speed = 1.0 / coll_links_rate(l, key) };
	return r->nlink++;
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
	free(r->next);
}

static int replay_alloc(struct replay *r, uint32_t n)
{
	memset(r, 0, sizeof(*r));
	r->n = n;
	r->f = calloc(n, sizeof(*r->f));
	r->active = calloc(n, sizeof(*r->active));
	r->fixed = calloc(n, sizeof(*r->fixed));
	r->heap_t = calloc(n, sizeof(*r->heap_t));
	r->heap_f = calloc(n, sizeof(*r->heap_f));
	if (r->f && r->active && r->fixed && r->heap_t && r->heap_f)
		return 0;
	replay_free(r);
	return -ENOMEM;
}

/* No flow: a chunk still at its origin, a participant that has not sent yet. */
#define NONE UINT32_MAX

/*
 * What each transfer waits for, as the header says, into deps[first[i] .. first[i + 1]) for
 * transfer i (in schedule order). Every round must be a permutation (each participant sends one
 * transfer and receives one), as the all-to-all generators make them. Returns 0, -EINVAL or
 * -ENOMEM; *deps and *first are the caller's to free.
 */
static int waits_of(const struct coll_schedule *s, enum coll_sync sync, uint32_t **deps,
                    uint32_t **first)
{
	uint32_t P = s->participants, n = s->ntransfers, used = 0, cap = 2 * n + 1;
	uint32_t *sent = malloc(P * sizeof(*sent)), *got = malloc(P * sizeof(*got));
	uint32_t *holder = malloc((s->nchunks + 1) * sizeof(*holder));
	uint32_t *writer = malloc((s->nchunks + 1) * sizeof(*writer));
	uint32_t *seen = malloc(((size_t)n + 1) * sizeof(*seen));
	uint32_t *d = malloc(cap * sizeof(*d)), *f = malloc(((size_t)n + 1) * sizeof(*f));
	int rc = sent && got && holder && writer && seen && d && f ? 0 : -ENOMEM;

	for (uint32_t x = 0; !rc && x < P; x++)
		sent[x] = got[x] = NONE;
	for (uint32_t c = 0; !rc && c < s->nchunks; c++) {
		holder[c] = s->chunks[c].origin;
		writer[c] = NONE;
	}
	for (uint32_t i = 0; !rc && i <= n; i++)
		seen[i] = NONE;
	for (uint32_t k = 0; !rc && k < s->nrounds; k++) {
		const struct coll_round *rd = &s->rounds[k];

		if (rd->count != P) {
			rc = -EINVAL;
			break;
		}
		for (uint32_t j = 0; !rc && j < rd->count; j++) {
			uint32_t i = rd->first + j;
			const struct coll_transfer *t = &s->transfers[i];
			uint32_t want[2] = { sent[t->src],
				             sync == COLL_SYNC_PAIRWISE ? got[t->src] : NONE };

			f[i] = used;
			if ((size_t)used + 2 + t->nchunks > cap) {
				size_t more = 2 * ((size_t)cap + 2 + t->nchunks);
				uint32_t *bigger =
				    more <= UINT32_MAX ? realloc(d, more * sizeof(*d)) : NULL;

				if (!bigger) {
					rc = -ENOMEM;
					break;
				}
				d = bigger;
				cap = (uint32_t)more;
			}
			for (unsigned w = 0; w < 2; w++)
				if (want[w] != NONE && seen[want[w]] != i) {
					seen[want[w]] = i;
					d[used++] = want[w];
				}
			for (uint32_t c = 0; !rc && c < t->nchunks; c++) {
				uint32_t ch = s->chunk_refs[t->chunk_first + c];

				/* One holder a chunk: it moves along one path, as in all-to-all. */
				if (holder[ch] != t->src)
					rc = -EINVAL;
				else if (sync == COLL_SYNC_DATAFLOW && writer[ch] != NONE &&
				         seen[writer[ch]] != i) {
					seen[writer[ch]] = i;
					d[used++] = writer[ch];
				}
			}
		}
		/* What the round did, once every transfer of it has read what came before. */
		for (uint32_t j = 0; !rc && j < rd->count; j++) {
			uint32_t i = rd->first + j;
			const struct coll_transfer *t = &s->transfers[i];

			/* Two sends, or two receives, of one participant in the round. */
			if ((sent[t->src] != NONE && sent[t->src] >= rd->first) ||
			    (got[t->dst] != NONE && got[t->dst] >= rd->first))
				rc = -EINVAL;
			sent[t->src] = i;
			got[t->dst] = i;
			for (uint32_t c = 0; c < t->nchunks; c++) {
				uint32_t ch = s->chunk_refs[t->chunk_first + c];

				holder[ch] = t->dst;
				writer[ch] = i;
			}
		}
	}
	if (!rc)
		f[n] = used;
	free(sent);
	free(got);
	free(holder);
	free(writer);
	free(seen);
	if (rc) {
		free(d);
		free(f);
		return rc;
	}
	*deps = d;
	*first = f;
	return 0;
}

/* The flows of @s's transfers, their links and latencies, and who waits for whom. */
static int build(struct replay *r, const struct coll_links *l, const struct coll_schedule *s,
                 enum coll_sync sync)
{
	uint32_t *deps, *first;
	int rc = waits_of(s, sync, &deps, &first);

	if (rc)
		return rc;
	r->next = malloc(((size_t)first[s->ntransfers] + 1) * sizeof(*r->next));
	if (!r->next) {
		free(deps);
		free(first);
		return -ENOMEM;
	}
	for (uint32_t i = 0; i < s->ntransfers; i++) {
		const struct coll_transfer *t = &s->transfers[i];
		struct flow *f = &r->f[i];
		uint64_t key[COLL_ROUTE_MAX];
		int cls;

		f->left = (double)t->bytes;
		f->nlinks = (uint8_t)coll_links_route(l, t->src, t->dst, key, &cls);
		for (unsigned j = 0; j < f->nlinks; j++) {
			f->link[j] = link_id(r, l, key[j]);
			if (f->link[j] == UINT32_MAX) {
				free(deps);
				free(first);
				return -ENOMEM;
			}
		}
		f->latency = l->lat[cls];
		f->waits = first[i + 1] - first[i];
		for (uint32_t j = first[i]; j < first[i + 1]; j++)
			r->f[deps[j]].nnext++;
	}
	for (uint32_t i = 0, at = 0; i < s->ntransfers; i++) {
		r->f[i].next_first = at;
		at += r->f[i].nnext;
		r->f[i].nnext = 0;
	}
	for (uint32_t i = 0; i < s->ntransfers; i++)
		for (uint32_t j = first[i]; j < first[i + 1]; j++) {
			struct flow *w = &r->f[deps[j]];

			r->next[w->next_first + w->nnext++] = i;
		}
	free(deps);
	free(first);
	return 0;
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

	for (uint32_t j = 0; j < f->nnext; j++) {
		uint32_t k = r->next[f->next_first + j];
		struct flow *g = &r->f[k];

		g->ready = fmax(g->ready, t);
		if (!--g->waits)
			heap_push(r, g->ready + g->latency, k);
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

/* Its rounds cover its transfers in order, and every index a transfer holds is in range. */
static bool well_formed(const struct coll_schedule *s)
{
	uint32_t at = 0;

	if (!s->participants || (uint64_t)s->servers * s->devices != s->participants)
		return false;
	for (uint32_t k = 0; k < s->nrounds; k++) {
		if (s->rounds[k].first != at || s->rounds[k].count > s->ntransfers - at)
			return false;
		at += s->rounds[k].count;
	}
	if (at != s->ntransfers)
		return false;
	for (uint32_t i = 0; i < s->ntransfers; i++) {
		const struct coll_transfer *t = &s->transfers[i];

		if (t->src >= s->participants || t->dst >= s->participants ||
		    (uint64_t)t->chunk_first + t->nchunks > s->nrefs)
			return false;
		for (uint32_t c = 0; c < t->nchunks; c++)
			if (s->chunk_refs[t->chunk_first + c] >= s->nchunks)
				return false;
	}
	return true;
}

/*
 * Both all-to-all algorithms are replayed, or neither: a pick compares prices of one kind. The
 * larger is direct, P (P - 1) transfers.
 */
static bool too_large(uint64_t P)
{
	return P * (P - 1) > COLL_FLOW_MAX;
}

int coll_schedule_flow_price(const struct coll_schedule *s, const struct coll_params *p, double *us)
{
	struct coll_links l;
	struct replay r;
	int rc;

	if (p->sync == COLL_SYNC_BARRIER || s->collective != COLL_ALLTOALL || !well_formed(s))
		return -EINVAL;
	if (too_large(s->participants) || s->ntransfers > COLL_FLOW_MAX)
		return -E2BIG;
	rc = coll_links_init(&l, p, s->servers, s->devices, 1);
	if (rc)
		return rc;
	rc = replay_alloc(&r, s->ntransfers);
	if (!rc) {
		rc = build(&r, &l, s, p->sync);
		if (!rc)
			*us = run(&r);
		replay_free(&r);
	}
	coll_links_free(&l);
	return rc;
}

int coll_alltoall_flow_price(enum coll_algorithm a, const struct coll_params *p, double q,
                             uint32_t S, uint32_t D, double *us)
{
	struct coll_schedule s;
	int rc;

	if (a != COLL_ALG_DIRECT && a != COLL_ALG_PLANE_RELAYED)
		return -EINVAL;
	if (too_large((uint64_t)S * D))
		return -E2BIG;
	rc = coll_gen_alltoall(a, S, D, (uint64_t)llround(q), &s);
	if (rc)
		return rc;
	rc = coll_schedule_flow_price(&s, p, us);
	coll_schedule_free(&s);
	return rc;
}
