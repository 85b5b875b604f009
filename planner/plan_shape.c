/*
 * Shapes of a fabric: full mesh, HyperX and torus. Their derived fields, the
 * ring layout of a torus, the automatic choice and its candidates, and the
 * grid indexing the fabric planner and the verifier share. Pure and reentrant.
 *
 * The choice enumerates every grid of m servers (the multiplicative partitions
 * of m into at most PLAN_MAX_DIMS factors >= 2, factors non-increasing): a few
 * hundred at most for m <= PLAN_MAX_SHAPED_SERVERS, so sorting them all is
 * cheaper than being clever.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "plan.h"
#include "plan_internal.h"

const char *plan_topology_name(enum plan_topology t)
{
	switch (t) {
	case PLAN_TOPO_AUTO:
		return "auto";
	case PLAN_TOPO_FULL_MESH:
		return "full-mesh";
	case PLAN_TOPO_HYPERX:
		return "hyperx";
	case PLAN_TOPO_TORUS:
		return "torus";
	}
	return "?";
}

int plan_topology_parse(const char *name, enum plan_topology *out)
{
	for (int t = PLAN_TOPO_AUTO; t <= PLAN_TOPO_TORUS; t++) {
		if (name && !strcmp(name, plan_topology_name((enum plan_topology)t))) {
			if (out)
				*out = (enum plan_topology)t;
			return 0;
		}
	}
	return -EINVAL;
}

uint32_t plan_ring_planes(uint32_t k)
{
	if (k <= 1)
		return 0;
	if (k == 2)
		return 1;
	return k % 2 ? 3 : 2;
}

uint32_t plan_ring_dst(uint32_t k, uint32_t s, uint32_t d)
{
	if (k <= 1 || s >= k)
		return s;
	if (k == 2)
		return d == 0 ? 1 - s : s;
	if (k % 2 == 0) {
		if (d == 0)
			return s ^ 1;
		if (d == 1)
			return s % 2 ? (s + 1) % k : (s + k - 1) % k;
		return s;
	}
	switch (d) {
	case 0: /* {2j, 2j+1}; the last server idles */
		return s == k - 1 ? s : s ^ 1;
	case 1: /* {2j+1, 2j+2}; server 0 idles */
		if (s == 0)
			return s;
		return s % 2 ? s + 1 : s - 1;
	case 2: /* the pair that closes the ring */
		return s == 0 ? k - 1 : s == k - 1 ? 0 : s;
	}
	return s;
}

static uint32_t dim_planes(enum plan_topology t, uint32_t k)
{
	return t == PLAN_TOPO_TORUS ? plan_ring_planes(k) : plan_planes(k, PLAN_FORMULA_AUTO);
}

static const char *family_label(enum plan_topology t)
{
	switch (t) {
	case PLAN_TOPO_FULL_MESH:
		return "full mesh";
	case PLAN_TOPO_HYPERX:
		return "HyperX";
	case PLAN_TOPO_TORUS:
		return "torus";
	default:
		return "shape";
	}
}

char *plan_shape_format(const struct plan_shape *shape, char *buf, size_t len)
{
	size_t n;

	if (!buf || !len)
		return buf;
	buf[0] = '\0';
	if (!shape)
		return buf;
	n = (size_t)snprintf(buf, len, "%s ", family_label(shape->topology));
	for (uint32_t i = 0; i < shape->dims && i < PLAN_MAX_DIMS && n < len; i++)
		n += (size_t)snprintf(buf + n, len - n, i ? "x%u" : "%u", shape->k[i]);
	return buf;
}

int plan_shape_make(enum plan_topology topology, const uint32_t *k, uint32_t ndims,
                    struct plan_shape *out, char *why, size_t len)
{
	struct plan_shape sh;
	uint64_t prod = 1;
	uint32_t next = 0;

	if (!out || !k)
		return plan_refuse(why, len, "no shape");
	if (topology != PLAN_TOPO_FULL_MESH && topology != PLAN_TOPO_HYPERX &&
	    topology != PLAN_TOPO_TORUS)
		return plan_refuse(why, len, "topology %d is not full_mesh, hyperx or torus",
		                   (int)topology);
	if (ndims < 1 || ndims > PLAN_MAX_DIMS)
		return plan_refuse(why, len, "%u dimensions is outside 1..%u", ndims,
		                   PLAN_MAX_DIMS);
	if (topology == PLAN_TOPO_FULL_MESH && ndims != 1)
		return plan_refuse(why, len, "a full mesh has one dimension, not %u", ndims);
	for (uint32_t i = 0; i < ndims; i++) {
		if (k[i] < 1)
			return plan_refuse(why, len, "dimension %u has no servers", i);
		if (topology != PLAN_TOPO_TORUS && k[i] > PLAN_MAX_SERVERS)
			return plan_refuse(
			    why, len, "dimension %u has %u servers: a %s line holds at most %u", i,
			    k[i], family_label(topology), PLAN_MAX_SERVERS);
		prod *= k[i];
		if (prod > PLAN_MAX_SHAPED_SERVERS)
			return plan_refuse(why, len, "the shape holds more than %u servers",
			                   PLAN_MAX_SHAPED_SERVERS);
	}

	memset(&sh, 0, sizeof(sh));
	sh.topology = topology;
	sh.dims = ndims;
	for (uint32_t i = 0; i < ndims; i++) {
		sh.k[i] = k[i];
		sh.planes[i] = dim_planes(topology, k[i]);
		sh.first_plane[i] = next;
		next += sh.planes[i];
		if (topology == PLAN_TOPO_TORUS) {
			sh.diameter += k[i] / 2;
			sh.degree += k[i] >= 3 ? 2 : k[i] - 1;
		} else {
			sh.diameter += k[i] >= 2;
			sh.degree += k[i] - 1;
		}
	}
	*out = sh;
	if (why && len)
		why[0] = '\0';
	return 0;
}

uint32_t plan_shape_planes_total(const struct plan_shape *shape)
{
	uint32_t end = 0;

	for (uint32_t i = 0; shape && i < shape->dims && i < PLAN_MAX_DIMS; i++)
		if (shape->planes[i] && shape->first_plane[i] + shape->planes[i] > end)
			end = shape->first_plane[i] + shape->planes[i];
	return end;
}

static uint64_t shape_servers(const struct plan_shape *shape)
{
	uint64_t m = 1;

	for (uint32_t i = 0; i < shape->dims && i < PLAN_MAX_DIMS; i++)
		m *= shape->k[i];
	return m;
}

uint64_t plan_shape_bisection(const struct plan_shape *shape)
{
	uint64_t m, best = UINT64_MAX;

	if (!shape)
		return 0;
	m = shape_servers(shape);
	for (uint32_t i = 0; i < shape->dims && i < PLAN_MAX_DIMS; i++) {
		uint64_t k = shape->k[i], cut;

		if (k < 2)
			continue;
		if (shape->topology == PLAN_TOPO_TORUS)
			cut = m / k * (k == 2 ? 1 : 2);
		else
			cut = m / k * (k / 2) * ((k + 1) / 2);
		if (cut < best)
			best = cut;
	}
	return best == UINT64_MAX ? 0 : best;
}

int plan_shape_check(const struct plan_shape *shape, uint32_t m, char *why, size_t len)
{
	struct plan_shape want;
	char name[64];
	int ret;

	if (!shape)
		return plan_refuse(why, len, "no shape");
	if (shape->dims < 1 || shape->dims > PLAN_MAX_DIMS)
		return plan_refuse(why, len, "%u dimensions is outside 1..%u", shape->dims,
		                   PLAN_MAX_DIMS);
	ret = plan_shape_make(shape->topology, shape->k, shape->dims, &want, why, len);
	if (ret)
		return ret;
	plan_shape_format(&want, name, sizeof(name));
	if (shape_servers(&want) != m)
		return plan_refuse(why, len, "the %s holds %llu servers, the fabric has %u", name,
		                   (unsigned long long)shape_servers(&want), m);
	for (uint32_t i = 0; i < shape->dims; i++) {
		if (shape->planes[i] != want.planes[i])
			return plan_refuse(why, len,
			                   "dimension %u of the %s claims %u planes, it needs %u",
			                   i, name, shape->planes[i], want.planes[i]);
		if ((uint64_t)shape->first_plane[i] + shape->planes[i] > UINT32_MAX)
			return plan_refuse(why, len, "dimension %u of the %s: planes out of range",
			                   i, name);
		for (uint32_t j = 0; j < i; j++) {
			uint32_t a0 = shape->first_plane[i], a1 = a0 + shape->planes[i];
			uint32_t b0 = shape->first_plane[j], b1 = b0 + shape->planes[j];

			if (a0 < b1 && b0 < a1)
				return plan_refuse(
				    why, len,
				    "dimensions %u and %u of the %s share planes %u..%u and "
				    "%u..%u",
				    j, i, name, b0, b1 - 1, a0, a1 - 1);
		}
	}
	if (shape->diameter != want.diameter)
		return plan_refuse(why, len, "the %s claims diameter %u, it has %u", name,
		                   shape->diameter, want.diameter);
	if (shape->degree != want.degree)
		return plan_refuse(why, len, "the %s claims degree %u, it has %u", name,
		                   shape->degree, want.degree);
	if (why && len)
		why[0] = '\0';
	return 0;
}

/* ---- candidates and the choice ------------------------------------------ */

struct cand {
	struct plan_shape sh;
	uint32_t planes;
	uint64_t bisection;
	bool fits;
};

struct cands {
	struct cand *v;
	size_t n;
	size_t cap;
	uint64_t slots;
	int err;
};

static void cands_add(struct cands *c, enum plan_topology t, const uint32_t *k, uint32_t ndims)
{
	struct cand x;

	if (c->err || plan_shape_make(t, k, ndims, &x.sh, NULL, 0))
		return;
	if (c->n == c->cap) {
		size_t cap = c->cap ? c->cap * 2 : 32;
		struct cand *v = realloc(c->v, cap * sizeof(*v));

		if (!v) {
			c->err = -ENOMEM;
			return;
		}
		c->v = v;
		c->cap = cap;
	}
	x.planes = plan_shape_planes_total(&x.sh);
	x.bisection = plan_shape_bisection(&x.sh);
	x.fits = x.planes <= c->slots;
	c->v[c->n++] = x;
}

/* Grids of `rest` servers with factors <= maxf, non-increasing, dims mindims..PLAN_MAX_DIMS. */
static void factorise(struct cands *c, enum plan_topology t, uint32_t *k, uint32_t depth,
                      uint32_t rest, uint32_t maxf, uint32_t mindims)
{
	if (rest == 1) {
		if (depth >= mindims)
			cands_add(c, t, k, depth);
		return;
	}
	if (depth == PLAN_MAX_DIMS)
		return;
	if (depth == PLAN_MAX_DIMS - 1) {
		if (rest <= maxf) {
			k[depth] = rest;
			cands_add(c, t, k, depth + 1);
		}
		return;
	}
	for (uint32_t f = rest < maxf ? rest : maxf; f >= 2; f--) {
		if (rest % f)
			continue;
		k[depth] = f;
		factorise(c, t, k, depth + 1, rest / f, f, mindims);
	}
}

static void family(struct cands *c, enum plan_topology t, uint32_t m)
{
	uint32_t k[PLAN_MAX_DIMS] = { 1 };

	if (m == 1) {
		cands_add(c, t, k, 1);
		return;
	}
	switch (t) {
	case PLAN_TOPO_FULL_MESH:
		k[0] = m;
		cands_add(c, t, k, 1);
		break;
	case PLAN_TOPO_HYPERX:
		factorise(c, t, k, 0, m, PLAN_MAX_SERVERS, 2);
		break;
	case PLAN_TOPO_TORUS:
		factorise(c, t, k, 0, m, m, 1);
		break;
	default:
		break;
	}
}

static int family_rank(enum plan_topology t)
{
	return t == PLAN_TOPO_FULL_MESH ? 0 : t == PLAN_TOPO_HYPERX ? 1 : 2;
}

/* The preference among shapes that fit (or, for those that do not, after their planes). */
static int cmp_pref(const struct cand *a, const struct cand *b)
{
	if (a->sh.diameter != b->sh.diameter)
		return a->sh.diameter < b->sh.diameter ? -1 : 1;
	if (a->bisection != b->bisection)
		return a->bisection > b->bisection ? -1 : 1;
	if (a->planes != b->planes)
		return a->planes < b->planes ? -1 : 1;
	if (a->sh.dims != b->sh.dims)
		return a->sh.dims < b->sh.dims ? -1 : 1;
	for (uint32_t i = 0; i < a->sh.dims; i++)
		if (a->sh.k[i] != b->sh.k[i])
			return a->sh.k[i] > b->sh.k[i] ? -1 : 1;
	return 0;
}

static int cmp_cand(const void *x, const void *y)
{
	const struct cand *a = x, *b = y;

	if (a->fits != b->fits)
		return a->fits ? -1 : 1;
	if (!a->fits && a->planes != b->planes)
		return a->planes < b->planes ? -1 : 1;
	if (a->sh.topology != b->sh.topology)
		return family_rank(a->sh.topology) < family_rank(b->sh.topology) ? -1 : 1;
	return cmp_pref(a, b);
}

static int check_args(uint32_t m, uint32_t n, uint32_t p, enum plan_topology want, char *why,
                      size_t len)
{
	if (m < 1 || m > PLAN_MAX_SHAPED_SERVERS)
		return plan_refuse(why, len, "%u servers is outside 1..%u", m,
		                   PLAN_MAX_SHAPED_SERVERS);
	if (n > PLAN_MAX_DEVICES)
		return plan_refuse(why, len, "%u devices is outside 0..%u", n, PLAN_MAX_DEVICES);
	if (p < 1 || p > PLAN_MAX_PORTS)
		return plan_refuse(why, len, "%u ports per device is outside 1..%u", p,
		                   PLAN_MAX_PORTS);
	if (want < PLAN_TOPO_AUTO || want > PLAN_TOPO_TORUS)
		return plan_refuse(why, len, "topology %d is not auto, full_mesh, hyperx or torus",
		                   (int)want);
	return 0;
}

/* Every candidate of the request, sorted; the caller frees c->v. */
static int collect(struct cands *c, uint32_t m, uint32_t n, uint32_t p, enum plan_topology want)
{
	memset(c, 0, sizeof(*c));
	c->slots = (uint64_t)n * p;
	if (want == PLAN_TOPO_AUTO) {
		if (m <= PLAN_MAX_SERVERS)
			family(c, PLAN_TOPO_FULL_MESH, m);
		if (m > 1) {
			family(c, PLAN_TOPO_HYPERX, m);
			family(c, PLAN_TOPO_TORUS, m);
		}
	} else {
		family(c, want, m);
	}
	if (c->err)
		return c->err;
	if (c->n)
		qsort(c->v, c->n, sizeof(*c->v), cmp_cand);
	return 0;
}

int plan_shape_candidates(uint32_t m, uint32_t n_devices, uint32_t ports_per_device,
                          enum plan_topology want, struct plan_shape *out, size_t cap,
                          size_t *count, size_t *nfit)
{
	struct cands c;
	size_t fit = 0;
	int ret;

	if (!count || (cap && !out))
		return -EINVAL;
	ret = check_args(m, n_devices, ports_per_device, want, NULL, 0);
	if (!ret)
		ret = collect(&c, m, n_devices, ports_per_device, want);
	if (ret)
		return ret;
	for (size_t i = 0; i < c.n; i++) {
		if (i < cap)
			out[i] = c.v[i].sh;
		fit += c.v[i].fits;
	}
	*count = c.n;
	if (nfit)
		*nfit = fit;
	free(c.v);
	return 0;
}

/* Does any shape of the request fit m servers? (-ENOMEM counts as no.) */
static bool any_fits(uint32_t m, uint64_t slots, enum plan_topology want)
{
	struct cands c;
	bool fits;

	/* slots beyond 32 bits hold any shape of at most PLAN_MAX_SHAPED_SERVERS */
	if (collect(&c, m, (uint32_t)(slots > UINT32_MAX ? UINT32_MAX : slots), 1, want))
		return false;
	fits = c.n && c.v[0].fits;
	free(c.v);
	return fits;
}

/*
 * The largest fabric below m that some shape of the request fits: 0 when none
 * does, UINT32_MAX when the walk gave up (no claim then). With 3 planes every m
 * fits a ring, with 2 every even m, with 1 only 2 servers, with none 1; so only
 * the full-mesh and HyperX families may need a longer walk, bounded here.
 */
static uint32_t largest_below(uint32_t m, uint64_t slots, enum plan_topology want)
{
	uint32_t stop = m > 4096 ? m - 4096 : 1;

	if (slots <= 1 && want != PLAN_TOPO_HYPERX)
		return m > slots + 1 ? (uint32_t)slots + 1 : 0;
	for (uint32_t x = m - 1; x >= stop && x >= 1; x--)
		if (any_fits(x, slots, want))
			return x;
	return stop > 1 ? UINT32_MAX : 0;
}

/* "HyperX 100x50 needs 148", the fewest planes of the family, or why it has no candidate. */
static void family_need(const struct cands *c, enum plan_topology t, char *buf, size_t len)
{
	const struct cand *best = NULL;
	char name[64];

	for (size_t i = 0; i < c->n; i++)
		if (c->v[i].sh.topology == t && (!best || c->v[i].planes < best->planes))
			best = &c->v[i];
	if (best)
		snprintf(buf, len, "%s needs %u", plan_shape_format(&best->sh, name, sizeof(name)),
		         best->planes);
	else if (t == PLAN_TOPO_FULL_MESH)
		snprintf(buf, len, "a full mesh holds at most %u servers", PLAN_MAX_SERVERS);
	else
		snprintf(buf, len, "no %s grid (2 to %u factors of 2..%u)", family_label(t),
		         PLAN_MAX_DIMS, PLAN_MAX_SERVERS);
}

static int infeasible(const struct cands *c, uint32_t m, uint32_t n, uint32_t p,
                      enum plan_topology want, struct plan_shape *out, char *why, size_t len)
{
	uint64_t slots = (uint64_t)n * p;
	char parts[3][80], below[96] = "";
	uint32_t x;
	size_t np = 0;

	memset(out, 0, sizeof(*out));
	if (c->n)
		*out = c->v[0].sh; /* not fitting: fewest planes first */
	for (int t = PLAN_TOPO_FULL_MESH; t <= PLAN_TOPO_TORUS; t++) {
		if (want != PLAN_TOPO_AUTO && want != (enum plan_topology)t)
			continue;
		family_need(c, (enum plan_topology)t, parts[np++], sizeof(parts[0]));
	}
	x = largest_below(m, slots, want);
	if (x && x != UINT32_MAX) {
		struct plan_shape sh;
		char name[64];

		if (!plan_shape_choose(x, n, p, want, NULL, 0, &sh, NULL, 0))
			snprintf(below, sizeof(below), "; %u would fit (%s)", x,
			         plan_shape_format(&sh, name, sizeof(name)));
	} else if (!x) {
		snprintf(below, sizeof(below), "; no smaller fabric fits either");
	}
	if (want == PLAN_TOPO_AUTO)
		snprintf(why, len,
		         "no topology of %u servers fits %llu planes per server (%u devices x %u "
		         "ports): %s, %s, %s%s",
		         m, (unsigned long long)slots, n, p, parts[0], parts[1], parts[2], below);
	else
		snprintf(why, len,
		         "no %s of %u servers fits %llu planes per server (%u devices x %u ports): "
		         "%s%s",
		         family_label(want), m, (unsigned long long)slots, n, p, parts[0], below);
	return -EDOM;
}

/* Explicit grid: want's family, or with AUTO the first of full mesh, HyperX, torus that fits. */
static int choose_explicit(uint32_t m, uint64_t slots, uint32_t n, uint32_t p,
                           enum plan_topology want, const uint32_t *k, uint32_t ndims,
                           struct plan_shape *out, char *why, size_t len)
{
	static const enum plan_topology order[] = { PLAN_TOPO_FULL_MESH, PLAN_TOPO_HYPERX,
		                                    PLAN_TOPO_TORUS };
	struct plan_shape best = { 0 }, sh;
	uint64_t prod = 1;
	char name[64];
	int ret = -EINVAL;

	if (ndims < 1 || ndims > PLAN_MAX_DIMS)
		return plan_refuse(why, len, "a shape has 1 to %u dimensions, not %u",
		                   PLAN_MAX_DIMS, ndims);
	for (uint32_t i = 0; i < ndims; i++) {
		if (k[i] < 1)
			return plan_refuse(why, len, "dimension %u of the shape has no servers", i);
		prod *= k[i];
		if (prod > m)
			break;
	}
	if (prod > m)
		return plan_refuse(why, len,
		                   "the shape's dimensions multiply to more than %u servers", m);
	if (prod < m)
		return plan_refuse(why, len,
		                   "the shape's dimensions multiply to %llu servers, the fabric "
		                   "has %u",
		                   (unsigned long long)prod, m);
	for (size_t o = 0; o < sizeof(order) / sizeof(order[0]); o++) {
		enum plan_topology t = order[o];

		if (want != PLAN_TOPO_AUTO && want != t)
			continue;
		if (want == PLAN_TOPO_AUTO && t == PLAN_TOPO_FULL_MESH && ndims != 1)
			continue;
		ret = plan_shape_make(t, k, ndims, &sh, why, len);
		if (ret)
			continue;
		if (plan_shape_planes_total(&sh) <= slots) {
			*out = sh;
			snprintf(why, why ? len : 0, "%s as asked: %u planes of %llu",
			         plan_shape_format(&sh, name, sizeof(name)),
			         plan_shape_planes_total(&sh), (unsigned long long)slots);
			return 0;
		}
		if (!best.dims || plan_shape_planes_total(&sh) < plan_shape_planes_total(&best))
			best = sh;
	}
	if (!best.dims)
		return ret; /* why says what plan_shape_make() refused */
	*out = best;
	snprintf(why, why ? len : 0,
	         "the %s needs %u planes per server, the servers have %llu (%u devices x %u "
	         "ports)",
	         plan_shape_format(&best, name, sizeof(name)), plan_shape_planes_total(&best),
	         (unsigned long long)slots, n, p);
	return -EDOM;
}

int plan_shape_choose(uint32_t m, uint32_t n_devices, uint32_t ports_per_device,
                      enum plan_topology want, const uint32_t *shape_or_null, uint32_t ndims,
                      struct plan_shape *out, char *why, size_t len)
{
	uint64_t slots = (uint64_t)n_devices * ports_per_device;
	const struct cand *best;
	struct cands c;
	size_t nfam = 0;
	char name[64];
	int ret;

	if (why && len)
		why[0] = '\0';
	if (!out)
		return plan_refuse(why, len, "no output");
	ret = check_args(m, n_devices, ports_per_device, want, why, len);
	if (ret)
		return ret;
	if (shape_or_null)
		return choose_explicit(m, slots, n_devices, ports_per_device, want, shape_or_null,
		                       ndims, out, why, len);
	if (want == PLAN_TOPO_FULL_MESH && m > PLAN_MAX_SERVERS)
		return plan_refuse(why, len, "a full mesh holds at most %u servers, not %u",
		                   PLAN_MAX_SERVERS, m);

	ret = collect(&c, m, n_devices, ports_per_device, want);
	if (ret)
		return ret;
	if (!c.n || !c.v[0].fits) {
		ret = infeasible(&c, m, n_devices, ports_per_device, want, out, why, len);
		free(c.v);
		return ret;
	}
	best = &c.v[0];
	*out = best->sh;
	for (size_t i = 0; i < c.n; i++)
		nfam += c.v[i].fits && c.v[i].sh.topology == best->sh.topology;
	plan_shape_format(&best->sh, name, sizeof(name));
	if (best->sh.topology == PLAN_TOPO_FULL_MESH) {
		snprintf(why, why ? len : 0, "a full mesh of %u servers needs %u planes of %llu", m,
		         best->planes, (unsigned long long)slots);
	} else {
		char pre[128] = "";

		if (want == PLAN_TOPO_AUTO && m <= PLAN_MAX_SERVERS)
			snprintf(pre, sizeof(pre),
			         "a full mesh of %u servers needs %u planes, the servers have "
			         "%llu; ",
			         m, plan_planes(m, PLAN_FORMULA_AUTO), (unsigned long long)slots);
		else if (want == PLAN_TOPO_AUTO)
			snprintf(pre, sizeof(pre), "a full mesh holds at most %u servers; ",
			         PLAN_MAX_SERVERS);
		if (want == PLAN_TOPO_AUTO && best->sh.topology == PLAN_TOPO_TORUS)
			snprintf(pre + strlen(pre), sizeof(pre) - strlen(pre), "no HyperX fits; ");
		snprintf(why, why ? len : 0,
		         "%s%s (diameter %u, bisection %llu links, %u planes) is the best of %zu "
		         "%s shapes that fit",
		         pre, name, best->sh.diameter, (unsigned long long)best->bisection,
		         best->planes, nfam, family_label(best->sh.topology));
	}
	free(c.v);
	return 0;
}

/* ---- grid indexing (plan_internal.h) ------------------------------------ */

void plan_grid_init(struct plan_grid *g, const struct plan_shape *sh)
{
	uint32_t stride = 1;
	size_t base = 0;

	memset(g, 0, sizeof(*g));
	g->dims = sh->dims;
	g->ring = sh->topology == PLAN_TOPO_TORUS;
	for (uint32_t i = 0; i < sh->dims; i++) {
		g->k[i] = sh->k[i];
		g->stride[i] = stride;
		stride *= sh->k[i];
	}
	g->m = stride;
	for (uint32_t i = 0; i < sh->dims; i++) {
		size_t k = g->k[i], lines = g->m / k;

		g->base[i] = base;
		base += lines * (g->ring ? k : k * k);
		if (g->ring)
			g->nedges += lines * (k >= 3 ? k : k - 1);
		else
			g->nedges += lines * (k * (k - 1) / 2);
	}
	g->base[sh->dims] = base;
}

size_t plan_grid_edge(const struct plan_grid *g, uint32_t a, uint32_t b)
{
	uint32_t dim = UINT32_MAX;

	if (a >= b || b >= g->m)
		return SIZE_MAX;
	for (uint32_t i = 0; i < g->dims; i++) {
		if (plan_grid_coord(g, a, i) == plan_grid_coord(g, b, i))
			continue;
		if (dim != UINT32_MAX)
			return SIZE_MAX;
		dim = i;
	}
	if (dim == UINT32_MAX)
		return SIZE_MAX;
	/* b > a and they differ only along dim, so b's coordinate there is the larger */
	return plan_grid_edge_at(g, dim, plan_grid_line(g, a, dim), plan_grid_coord(g, a, dim),
	                         plan_grid_coord(g, b, dim));
}

uint32_t plan_grid_up(const struct plan_grid *g, uint32_t a, uint32_t *out, size_t *bit)
{
	uint32_t n = 0;

	/* dimension i's partners lie within a's line span of dimension i + 1: increasing */
	for (uint32_t i = 0; i < g->dims; i++) {
		uint32_t k = g->k[i], ja = plan_grid_coord(g, a, i);
		size_t line = plan_grid_line(g, a, i);
		uint32_t ring[2], nring = 0;

		if (g->ring) {
			/* the next position, and the last one for position 0 */
			if (ja + 1 < k)
				ring[nring++] = ja + 1;
			if (ja == 0 && k >= 3)
				ring[nring++] = k - 1;
		}
		for (uint32_t r = 0, jb = ja + 1; g->ring ? r < nring : jb < k; r++, jb++) {
			uint32_t to = g->ring ? ring[r] : jb;

			out[n] = a + (to - ja) * g->stride[i];
			if (bit)
				bit[n] = plan_grid_edge_at(g, i, line, ja, to);
			n++;
		}
	}
	return n;
}
