/*
 * Schedule building and the one checker every generated schedule must pass.
 */
#include "coll_internal.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* 4 Mi words (32 MiB) of chunk state: far above what 256 servers or 64 devices need. */
#define CHECK_MAX_WORDS (1ull << 22)

uint64_t coll_chunk_size(uint64_t bytes, uint32_t n, uint32_t c)
{
	return bytes / n + (c < bytes % n ? 1 : 0);
}

void coll_chunks_even(struct coll_schedule *s, uint64_t bytes, uint32_t origin)
{
	for (uint32_t c = 0; c < s->nchunks; c++) {
		s->chunks[c].origin = origin;
		s->chunks[c].dest = COLL_EVERY;
		s->chunks[c].bytes = coll_chunk_size(bytes, s->nchunks, c);
	}
}

int coll_schedule_init(struct coll_schedule *s, enum coll_collective collective, int algorithm,
                       uint32_t servers, uint32_t devices, uint32_t nchunks)
{
	memset(s, 0, sizeof(*s));
	if ((unsigned)collective >= COLL_COLLECTIVE__COUNT || !servers || !devices ||
	    (uint64_t)servers * devices > COLL_MAX_PARTICIPANTS)
		return -EINVAL;
	s->collective = collective;
	s->algorithm = algorithm;
	s->servers = servers;
	s->devices = devices;
	s->participants = servers * devices;
	if (nchunks) {
		s->chunks = calloc(nchunks, sizeof(*s->chunks));
		if (!s->chunks)
			return -ENOMEM;
	}
	s->nchunks = nchunks;
	for (uint32_t c = 0; c < nchunks; c++) {
		s->chunks[c].origin = COLL_EVERY;
		s->chunks[c].dest = COLL_EVERY;
	}
	return 0;
}

/* Make room for @more entries of @size bytes in *@arr (length *@n, capacity *@cap). */
static int grow(void **arr, uint32_t *cap, uint32_t n, uint32_t more, size_t size)
{
	uint64_t need = (uint64_t)n + more;
	uint64_t ncap;
	void *p;

	if (need <= *cap)
		return 0;
	if (need > UINT32_MAX)
		return -EOVERFLOW;
	ncap = *cap ? (uint64_t)*cap * 2 : 16;
	while (ncap < need)
		ncap *= 2;
	if (ncap > UINT32_MAX)
		ncap = UINT32_MAX;
	p = realloc(*arr, (size_t)ncap * size);
	if (!p)
		return -ENOMEM;
	*arr = p;
	*cap = (uint32_t)ncap;
	return 0;
}

int coll_schedule_add_round(struct coll_schedule *s)
{
	int rc = grow((void **)&s->rounds, &s->rounds_cap, s->nrounds, 1, sizeof(*s->rounds));

	if (rc)
		return rc;
	s->rounds[s->nrounds].first = s->ntransfers;
	s->rounds[s->nrounds].count = 0;
	s->nrounds++;
	return 0;
}

int coll_schedule_add_transfer(struct coll_schedule *s, uint32_t src, uint32_t dst, enum coll_op op,
                               const uint32_t *chunks, uint32_t nchunks)
{
	struct coll_transfer *t;
	uint64_t bytes = 0;
	int rc;

	if (!nchunks || !chunks)
		return -EINVAL;
	if (!s->nrounds) {
		rc = coll_schedule_add_round(s);
		if (rc)
			return rc;
	}
	rc = grow((void **)&s->transfers, &s->transfers_cap, s->ntransfers, 1,
	          sizeof(*s->transfers));
	if (!rc)
		rc = grow((void **)&s->chunk_refs, &s->refs_cap, s->nrefs, nchunks,
		          sizeof(*s->chunk_refs));
	if (rc)
		return rc;
	for (uint32_t k = 0; k < nchunks; k++) {
		s->chunk_refs[s->nrefs + k] = chunks[k];
		if (chunks[k] < s->nchunks)
			bytes += s->chunks[chunks[k]].bytes;
	}
	t = &s->transfers[s->ntransfers++];
	t->src = src;
	t->dst = dst;
	t->op = op;
	t->chunk_first = s->nrefs;
	t->nchunks = nchunks;
	t->bytes = bytes;
	s->nrefs += nchunks;
	s->rounds[s->nrounds - 1].count++;
	return 0;
}

void coll_schedule_free(struct coll_schedule *s)
{
	if (!s)
		return;
	free(s->chunks);
	free(s->rounds);
	free(s->transfers);
	free(s->chunk_refs);
	memset(s, 0, sizeof(*s));
}

/* Structure of the arrays: everything the replay indexes must be in range. */
static int check_shape(const struct coll_schedule *s, struct coll_error *err)
{
	uint64_t expect = 0;

	if (!s->servers || !s->devices || (uint64_t)s->servers * s->devices != s->participants ||
	    s->participants > COLL_MAX_PARTICIPANTS) {
		coll_err_set(err, NULL, "schedule shape %u servers x %u devices != %u participants",
		             s->servers, s->devices, s->participants);
		return -EINVAL;
	}
	if (coll_shape_validate(&s->shape, s->servers, err))
		return -EINVAL;
	if ((s->nchunks && !s->chunks) || (s->nrounds && !s->rounds) ||
	    (s->ntransfers && !s->transfers) || (s->nrefs && !s->chunk_refs)) {
		coll_err_set(err, NULL, "schedule arrays missing");
		return -EINVAL;
	}
	for (uint32_t c = 0; c < s->nchunks; c++) {
		const struct coll_chunk *ch = &s->chunks[c];

		if ((ch->origin != COLL_EVERY && ch->origin >= s->participants) ||
		    (ch->dest != COLL_EVERY && ch->dest >= s->participants)) {
			coll_err_set(err, NULL, "chunk %u: origin or dest out of range", c);
			return -EINVAL;
		}
	}
	for (uint32_t r = 0; r < s->nrounds; r++) {
		if (s->rounds[r].first != expect) {
			coll_err_set(err, NULL, "round %u does not start where round %u ended", r,
			             r ? r - 1 : 0);
			return -EINVAL;
		}
		expect += s->rounds[r].count;
	}
	if (expect != s->ntransfers) {
		coll_err_set(err, NULL, "rounds cover %llu transfers, schedule has %u",
		             (unsigned long long)expect, s->ntransfers);
		return -EINVAL;
	}
	for (uint32_t i = 0; i < s->ntransfers; i++) {
		const struct coll_transfer *t = &s->transfers[i];

		if ((uint64_t)t->chunk_first + t->nchunks > s->nrefs) {
			coll_err_set(err, NULL, "transfer %u: chunk list out of range", i);
			return -EINVAL;
		}
	}
	if (s->nrounds >= (1u << 30)) {
		coll_err_set(err, NULL, "%u rounds are too many to check", s->nrounds);
		return -E2BIG;
	}
	return 0;
}

/* Replay state; one allocation each, freed by check_free(). */
struct check {
	const struct coll_schedule *s;
	uint32_t P, C, W;
	uint64_t *state;   /* [P][C][W]: contributions participant p holds of chunk c */
	uint64_t *scratch; /* [refs in the largest round][W]: sources read at round start */
	uint32_t *wstamp;  /* [P][C]: 2*(round+1), | 1 if copied into */
	uint32_t *link;    /* [P][P]: round+1 in which src->dst was last used */
	uint32_t *circ;    /* [S][S]: round+1 in which the circuit a->b was last used */
	uint32_t *ncirc;   /* [S][S]: transfers on the circuit a->b in that round */
	struct coll_error *err;
};

static void check_free(struct check *k)
{
	free(k->state);
	free(k->scratch);
	free(k->wstamp);
	free(k->link);
	free(k->circ);
	free(k->ncirc);
}

static uint64_t *cell(const struct check *k, uint32_t p, uint32_t c)
{
	return &k->state[((uint64_t)p * k->C + c) * k->W];
}

static int fail_at(const struct check *k, uint32_t r, uint32_t i, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));

static int fail_at(const struct check *k, uint32_t r, uint32_t i, const char *fmt, ...)
{
	const struct coll_transfer *t = coll_round_transfer(k->s, r, i);
	char what[COLL_REASON_LEN];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(what, sizeof(what), fmt, ap);
	va_end(ap);
	coll_err_set(k->err, NULL, "round %u, transfer %u (%u->%u): %s", r, i, t->src, t->dst,
	             what);
	return -EINVAL;
}

/*
 * Transfers between two servers share the one circuit joining them, whichever devices they
 * join: count them per circuit direction against what the schedule says it needs.
 */
static int check_circuit(struct check *k, uint32_t r, uint32_t i)
{
	const struct coll_schedule *s = k->s;
	const struct coll_transfer *t = coll_round_transfer(s, r, i);
	uint32_t a = t->src / s->devices, b = t->dst / s->devices;
	uint32_t limit = s->circuit_load ? s->circuit_load : 1;
	uint64_t key = (uint64_t)a * s->servers + b;

	if (a == b)
		return 0;
	if (!coll_shape_has_circuit(&s->shape, s->servers, a, b)) {
		char what[64];

		coll_shape_describe(&s->shape, s->servers, what, sizeof(what));
		return fail_at(k, r, i, "no circuit joins servers %u and %u in the %s", a, b, what);
	}
	if (k->circ[key] != r + 1) {
		k->circ[key] = r + 1;
		k->ncirc[key] = 0;
	}
	if (++k->ncirc[key] > limit)
		return fail_at(k, r, i,
		               "circuit %u->%u already carries %u transfers in this round, the "
		               "schedule allows %u",
		               a, b, k->ncirc[key] - 1, limit);
	return 0;
}

/* Per-transfer validation, the one-transfer-per-link-direction rule and circuit sharing. */
static int check_round_links(struct check *k, uint32_t r)
{
	const struct coll_schedule *s = k->s;

	for (uint32_t i = 0; i < s->rounds[r].count; i++) {
		const struct coll_transfer *t = coll_round_transfer(s, r, i);
		const uint32_t *ch = coll_transfer_chunks(s, t);
		uint64_t bytes = 0;
		uint64_t key;

		if (t->src >= k->P || t->dst >= k->P)
			return fail_at(k, r, i, "participant out of range (%u participants)", k->P);
		if (t->src == t->dst)
			return fail_at(k, r, i, "sends to itself");
		if (t->op != COLL_OP_COPY && t->op != COLL_OP_REDUCE)
			return fail_at(k, r, i, "unknown op %d", (int)t->op);
		if (!t->nchunks)
			return fail_at(k, r, i, "carries no chunk");
		for (uint32_t j = 0; j < t->nchunks; j++) {
			if (ch[j] >= k->C)
				return fail_at(k, r, i, "chunk %u out of range (%u chunks)", ch[j],
				               k->C);
			bytes += s->chunks[ch[j]].bytes;
		}
		if (bytes != t->bytes)
			return fail_at(k, r, i, "its chunks hold %llu bytes but it says %llu",
			               (unsigned long long)bytes, (unsigned long long)t->bytes);
		key = (uint64_t)t->src * k->P + t->dst;
		if (k->link[key] == r + 1) {
			uint32_t j = 0;

			while (j < i && (coll_round_transfer(s, r, j)->src != t->src ||
			                 coll_round_transfer(s, r, j)->dst != t->dst))
				j++;
			return fail_at(
			    k, r, i, "link direction already used by transfer %u of this round", j);
		}
		k->link[key] = r + 1;
		if (check_circuit(k, r, i))
			return -EINVAL;
	}
	return 0;
}

static int check_round_data(struct check *k, uint32_t r)
{
	const struct coll_schedule *s = k->s;
	uint32_t W = k->W;
	uint64_t pos = 0;

	/* Stage every source first: a transfer only sends what was held at round start. */
	for (uint32_t i = 0; i < s->rounds[r].count; i++) {
		const struct coll_transfer *t = coll_round_transfer(s, r, i);
		const uint32_t *ch = coll_transfer_chunks(s, t);

		for (uint32_t j = 0; j < t->nchunks; j++, pos++) {
			const uint64_t *src = cell(k, t->src, ch[j]);
			uint64_t any = 0;

			for (uint32_t w = 0; w < W; w++)
				any |= src[w];
			if (!any)
				return fail_at(k, r, i,
				               "sends chunk %u, which participant %u does "
				               "not hold yet",
				               ch[j], t->src);
			memcpy(&k->scratch[pos * W], src, W * sizeof(uint64_t));
		}
	}
	pos = 0;
	for (uint32_t i = 0; i < s->rounds[r].count; i++) {
		const struct coll_transfer *t = coll_round_transfer(s, r, i);
		const uint32_t *ch = coll_transfer_chunks(s, t);
		uint32_t stamp = 2 * (r + 1);

		for (uint32_t j = 0; j < t->nchunks; j++, pos++) {
			uint64_t *dst = cell(k, t->dst, ch[j]);
			const uint64_t *v = &k->scratch[pos * W];
			uint32_t *ws = &k->wstamp[(uint64_t)t->dst * k->C + ch[j]];

			if (t->op == COLL_OP_COPY) {
				if ((*ws >> 1) == r + 1)
					return fail_at(k, r, i,
					               "copies chunk %u into participant %u, "
					               "already written in this round",
					               ch[j], t->dst);
				memcpy(dst, v, W * sizeof(uint64_t));
				*ws = stamp | 1;
				continue;
			}
			if (*ws == (stamp | 1))
				return fail_at(k, r, i,
				               "reduces chunk %u into participant %u, "
				               "already copied into in this round",
				               ch[j], t->dst);
			for (uint32_t w = 0; w < W; w++) {
				uint64_t both = dst[w] & v[w];

				if (both)
					return fail_at(k, r, i,
					               "reduce of chunk %u would count the "
					               "contribution of participant %u twice",
					               ch[j],
					               w * 64 + (uint32_t)__builtin_ctzll(both));
				dst[w] |= v[w];
			}
			*ws = stamp;
		}
	}
	return 0;
}

static int check_final(const struct check *k)
{
	const struct coll_schedule *s = k->s;

	for (uint32_t c = 0; c < k->C; c++) {
		const struct coll_chunk *ch = &s->chunks[c];
		uint32_t want = ch->origin == COLL_EVERY ? k->P : 1;
		uint32_t p0 = ch->dest == COLL_EVERY ? 0 : ch->dest;
		uint32_t p1 = ch->dest == COLL_EVERY ? k->P : ch->dest + 1;

		for (uint32_t p = p0; p < p1; p++) {
			const uint64_t *v = cell(k, p, c);
			uint32_t have = 0;
			int complete;

			for (uint32_t w = 0; w < k->W; w++)
				have += (uint32_t)__builtin_popcountll(v[w]);
			if (ch->origin == COLL_EVERY)
				complete = have == k->P;
			else
				complete =
				    have == 1 && (v[ch->origin / 64] >> (ch->origin % 64) & 1);
			if (!complete) {
				coll_err_set(
				    k->err, NULL,
				    "after the last round (%u rounds): participant %u holds "
				    "chunk %u with %u of %u contributions",
				    s->nrounds, p, c, have, want);
				return -EINVAL;
			}
		}
	}
	return 0;
}

int coll_check(const struct coll_schedule *s, struct coll_error *err)
{
	struct check k = { .s = s, .err = err };
	uint64_t words, maxrefs = 0;
	int rc;

	if (!s) {
		coll_err_set(err, NULL, "no schedule");
		return -EINVAL;
	}
	rc = check_shape(s, err);
	if (rc)
		return rc;
	k.P = s->participants;
	k.C = s->nchunks;
	k.W = (k.P + 63) / 64;
	words = (uint64_t)k.P * k.C * k.W;
	for (uint32_t r = 0; r < s->nrounds; r++) {
		uint64_t refs = 0;

		for (uint32_t i = 0; i < s->rounds[r].count; i++)
			refs += coll_round_transfer(s, r, i)->nchunks;
		if (refs > maxrefs)
			maxrefs = refs;
	}
	if (words > CHECK_MAX_WORDS || maxrefs * k.W > CHECK_MAX_WORDS) {
		coll_err_set(err, NULL, "schedule too large to check (%u participants, %u chunks)",
		             k.P, k.C);
		return -E2BIG;
	}
	k.state = calloc(words ? words : 1, sizeof(uint64_t));
	k.scratch = calloc(maxrefs ? maxrefs * k.W : 1, sizeof(uint64_t));
	k.wstamp = calloc(k.C ? (uint64_t)k.P * k.C : 1, sizeof(uint32_t));
	k.link = calloc((uint64_t)k.P * k.P, sizeof(uint32_t));
	k.circ = calloc((uint64_t)s->servers * s->servers, sizeof(uint32_t));
	k.ncirc = calloc((uint64_t)s->servers * s->servers, sizeof(uint32_t));
	if (!k.state || !k.scratch || !k.wstamp || !k.link || !k.circ || !k.ncirc) {
		check_free(&k);
		coll_err_set(err, NULL, "out of memory");
		return -ENOMEM;
	}
	for (uint32_t c = 0; c < k.C; c++) {
		uint32_t o = s->chunks[c].origin;

		if (o != COLL_EVERY) {
			cell(&k, o, c)[o / 64] |= 1ull << (o % 64);
			continue;
		}
		for (uint32_t p = 0; p < k.P; p++)
			cell(&k, p, c)[p / 64] |= 1ull << (p % 64);
	}
	for (uint32_t r = 0; r < s->nrounds && !rc; r++) {
		rc = check_round_links(&k, r);
		if (!rc)
			rc = check_round_data(&k, r);
	}
	if (!rc)
		rc = check_final(&k);
	check_free(&k);
	return rc;
}

int coll_schedule_stats(const struct coll_schedule *s, struct coll_schedule_stats *st)
{
	uint32_t P = s->participants, S = s->servers;
	uint32_t *load;
	uint8_t *peer;

	memset(st, 0, sizeof(*st));
	if (!P || P > COLL_MAX_PARTICIPANTS || !s->devices || (uint64_t)S * s->devices != P)
		return -EINVAL;
	peer = calloc((size_t)P * P, 1);
	load = calloc((size_t)S * S, sizeof(*load));
	if (!peer || !load) {
		free(peer);
		free(load);
		return -ENOMEM;
	}
	st->rounds = s->nrounds;
	st->transfers = s->ntransfers;
	for (uint32_t r = 0; r < s->nrounds; r++) {
		if ((uint64_t)s->rounds[r].first + s->rounds[r].count > s->ntransfers) {
			free(peer);
			free(load);
			return -EINVAL;
		}
		for (uint32_t i = 0; i < s->rounds[r].count; i++) {
			const struct coll_transfer *t = coll_round_transfer(s, r, i);
			uint32_t a = t->src / s->devices, b = t->dst / s->devices;

			if (t->src >= P || t->dst >= P) {
				free(peer);
				free(load);
				return -EINVAL;
			}
			if (a == b) {
				st->intra_messages++;
			} else {
				st->inter_messages++;
				if (++load[(size_t)a * S + b] > st->max_circuit_load)
					st->max_circuit_load = load[(size_t)a * S + b];
			}
			st->bytes_sent += t->bytes;
			peer[(size_t)t->src * P + t->dst] = 1;
			peer[(size_t)t->dst * P + t->src] = 1;
		}
		/* The loads are per round: clear what this round counted. */
		for (uint32_t i = 0; i < s->rounds[r].count; i++) {
			const struct coll_transfer *t = coll_round_transfer(s, r, i);

			load[(size_t)(t->src / s->devices) * S + t->dst / s->devices] = 0;
		}
	}
	free(load);
	for (uint32_t p = 0; p < P; p++) {
		uint32_t d = 0;

		for (uint32_t q = 0; q < P; q++)
			d += peer[(size_t)p * P + q];
		if (d > st->max_degree)
			st->max_degree = d;
	}
	free(peer);
	return 0;
}
