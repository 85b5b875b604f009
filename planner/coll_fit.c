/*
 * Bounded Levenberg-Marquardt fit of the hardware terms to measured runs. Derivation and
 * limits: docs/cost-model.md, "Calibration".
 *
 * Each term is fitted through a variable in which the price is close to linear: delays and
 * the reduction rate as they are, an efficiency as its inverse (the per-byte time scales with
 * it) and the host link as its per-byte time (0 is "no limit", a bound like any other).
 */
#include "coll_fit.h"
#include "coll_internal.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MAX_STEPS    200
#define DELAY_MAX    1e6  /* µs */
#define GAMMA_MAX    1e3  /* ns per byte */
#define INV_EFF_MAX  100  /* an efficiency of 1 % */
#define CONFOUNDED   1e-3 /* share of a term's effect left once the others' is removed */
#define UNUSED       1e-7 /* relative change of the predictions a term's own scale makes */
#define DEV_LINK_MIN 1.0  /* Gb/s: the slowest host link a fit may find */

static const char *const base_names[COLL_FIT_LAUNCH_ALG] = {
	[COLL_FIT_LAUNCH] = "launch_us",
	[COLL_FIT_ALPHA] = "alpha_us",
	[COLL_FIT_INTRA_ALPHA] = "intra_alpha_us",
	[COLL_FIT_OVERHEAD] = "overhead_us",
	[COLL_FIT_SWITCH_ALPHA] = "switch_alpha_us",
	[COLL_FIT_LINK_EFFICIENCY] = "link_efficiency",
	[COLL_FIT_INTRA_EFFICIENCY] = "intra_efficiency",
	[COLL_FIT_GAMMA] = "gamma_ns_per_byte",
	[COLL_FIT_DEVICE_LINK] = "device_link_gbps",
};

/* "launch_us.<algorithm>" for every algorithm, built once into static storage. */
static const char *launch_name(enum coll_algorithm a)
{
	static const char *const names[COLL_ALGORITHM__COUNT] = {
#define L(alg, text) [alg] = "launch_us." text
		L(COLL_ALG_RING, "ring"),
		L(COLL_ALG_BIDIR_RING, "bidirectional-ring"),
		L(COLL_ALG_RHD, "recursive-halving-doubling"),
		L(COLL_ALG_RECURSIVE_DOUBLING, "recursive-doubling"),
		L(COLL_ALG_FULL_MESH_DIRECT, "full-mesh-direct"),
		L(COLL_ALG_CUBE_300, "cube-300"),
		L(COLL_ALG_CUBE_400, "cube-400"),
		L(COLL_ALG_BINOMIAL_TREE, "binomial-tree"),
		L(COLL_ALG_SCATTER_ALLGATHER, "scatter-allgather"),
		L(COLL_ALG_DIRECT, "direct"),
		L(COLL_ALG_PLANE_RELAYED, "plane-relayed"),
		L(COLL_ALG_NIC_OFFLOAD, "nic-offload"),
		L(COLL_ALG_INA, "in-network-aggregation"),
		L(COLL_ALG_HYPERX_DIM, "hyperx-dim-ordered"),
		L(COLL_ALG_HYPERX_A2A, "hyperx-dim-ordered-a2a"),
		L(COLL_ALG_TORUS_RING, "torus-ring"),
		L(COLL_ALG_TORUS_A2A, "torus-dim-ordered-a2a"),
#undef L
	};
	return names[a];
}

const char *coll_fit_term_name(enum coll_fit_term t)
{
	if ((unsigned)t < COLL_FIT_LAUNCH_ALG)
		return base_names[t];
	if ((unsigned)t < COLL_FIT__COUNT)
		return launch_name((enum coll_algorithm)(t - COLL_FIT_LAUNCH_ALG));
	return NULL;
}

int coll_fit_term_from_name(const char *name, enum coll_fit_term *t)
{
	for (unsigned i = 0; name && i < COLL_FIT__COUNT; i++)
		if (!strcmp(name, coll_fit_term_name((enum coll_fit_term)i))) {
			*t = (enum coll_fit_term)i;
			return 0;
		}
	return -EINVAL;
}

double coll_fit_term_get(const struct coll_params *p, enum coll_fit_term t)
{
	switch (t) {
	case COLL_FIT_LAUNCH:
		return p->launch_us;
	case COLL_FIT_ALPHA:
		return p->alpha_us;
	case COLL_FIT_INTRA_ALPHA:
		return p->intra_alpha_us;
	case COLL_FIT_OVERHEAD:
		return p->overhead_us;
	case COLL_FIT_SWITCH_ALPHA:
		return p->switch_alpha_us;
	case COLL_FIT_LINK_EFFICIENCY:
		return p->link_efficiency;
	case COLL_FIT_INTRA_EFFICIENCY:
		return p->intra_efficiency;
	case COLL_FIT_GAMMA:
		return p->gamma_ns_per_byte;
	case COLL_FIT_DEVICE_LINK:
		return p->device_link_gbps;
	default:
		return p->launch_alg_us[t - COLL_FIT_LAUNCH_ALG];
	}
}

void coll_fit_term_set(struct coll_params *p, enum coll_fit_term t, double v)
{
	switch (t) {
	case COLL_FIT_LAUNCH:
		p->launch_us = v;
		break;
	case COLL_FIT_ALPHA:
		p->alpha_us = v;
		break;
	case COLL_FIT_INTRA_ALPHA:
		p->intra_alpha_us = v;
		break;
	case COLL_FIT_OVERHEAD:
		p->overhead_us = v;
		break;
	case COLL_FIT_SWITCH_ALPHA:
		p->switch_alpha_us = v;
		break;
	case COLL_FIT_LINK_EFFICIENCY:
		p->link_efficiency = v;
		break;
	case COLL_FIT_INTRA_EFFICIENCY:
		p->intra_efficiency = v;
		break;
	case COLL_FIT_GAMMA:
		p->gamma_ns_per_byte = v;
		break;
	case COLL_FIT_DEVICE_LINK:
		p->device_link_gbps = v;
		break;
	default:
		p->launch_alg_us[t - COLL_FIT_LAUNCH_ALG] = v;
		break;
	}
}

void coll_fit_request_default(struct coll_fit_request *req)
{
	memset(req, 0, sizeof(*req));
	for (unsigned t = 0; t < COLL_FIT_LAUNCH_ALG; t++)
		req->fit[t] = true;
	req->fit_relay = true;
}

const char *coll_fit_why_text(enum coll_fit_why w)
{
	switch (w) {
	case COLL_FIT_DETERMINED:
		return "fitted";
	case COLL_FIT_NOT_ASKED:
		return "not asked";
	case COLL_FIT_UNUSED:
		return "no run depends on it";
	default:
		return "cannot be told from the others";
	}
}

/* ---- the variables ------------------------------------------------------- */

/* The variable of term t, from the term's value. */
static double to_var(enum coll_fit_term t, double v)
{
	if (t == COLL_FIT_LINK_EFFICIENCY || t == COLL_FIT_INTRA_EFFICIENCY)
		return 1.0 / v;
	if (t == COLL_FIT_DEVICE_LINK)
		return v > 0 ? 1.0 / (125.0 * v) : 0;
	return v;
}

static double from_var(enum coll_fit_term t, double x)
{
	if (t == COLL_FIT_LINK_EFFICIENCY || t == COLL_FIT_INTRA_EFFICIENCY)
		return 1.0 / x;
	if (t == COLL_FIT_DEVICE_LINK)
		return x > 0 ? 1.0 / (125.0 * x) : 0;
	return x;
}

static void var_bounds(enum coll_fit_term t, double *lo, double *hi, double *scale)
{
	*lo = 0;
	*scale = 1;
	switch (t) {
	case COLL_FIT_LINK_EFFICIENCY:
	case COLL_FIT_INTRA_EFFICIENCY:
		*lo = 1;
		*hi = INV_EFF_MAX;
		break;
	case COLL_FIT_GAMMA:
		*hi = GAMMA_MAX;
		*scale = 0.01;
		break;
	case COLL_FIT_DEVICE_LINK:
		*hi = 1.0 / (125.0 * DEV_LINK_MIN);
		*scale = 1.0 / (125.0 * 400);
		break;
	default:
		*hi = DELAY_MAX;
		break;
	}
}

/*
 * An all-to-all priced round by round is kept as its profile, priced again in microseconds
 * where the schedule would take milliseconds: its other terms are the launch and the sends.
 */
struct run_cache {
	struct coll_profile profile; /* nrounds 0: priced by coll_predict() */
	uint64_t sends;
};

/* One fit's working state: k variables over n runs. */
struct fit {
	const struct coll_run *runs;
	struct run_cache *cache;
	uint32_t n, k;
	struct coll_params p; /* the parameters being fitted */
	enum coll_fit_term term[COLL_FIT__COUNT];
	double lo[COLL_FIT__COUNT], hi[COLL_FIT__COUNT], scale[COLL_FIT__COUNT];
	double *r, *r2, *J; /* n, n, n * k (column-major) */
	double *Q;          /* n * k: judge()'s orthonormal columns */
	uint32_t iterations;
};

static void put(struct fit *f, const double *x)
{
	for (uint32_t j = 0; j < f->k; j++)
		coll_fit_term_set(&f->p, f->term[j], from_var(f->term[j], x[j]));
}

/* Relative residuals at x into r; returns their sum of squares. */
static double residuals_at(struct fit *f, const double *x, double *r)
{
	double ss = 0;

	put(f, x);
	for (uint32_t i = 0; i < f->n; i++) {
		const struct coll_run *u = &f->runs[i];
		const struct run_cache *c = &f->cache[i];
		struct coll_estimate e;

		if (c->profile.nrounds)
			e.predicted_us = coll_profile_price(&c->profile, &f->p) + f->p.launch_us +
			                 f->p.launch_alg_us[u->algorithm] +
			                 (double)c->sends * f->p.overhead_us;
		else if (coll_predict(u->collective, u->algorithm, u->bytes, u->servers, u->devices,
		                      &f->p, &e, NULL))
			e.predicted_us = INFINITY; /* checked beforehand: cannot happen */
		r[i] = e.predicted_us / u->measured_us - 1;
		ss += r[i] * r[i];
	}
	return ss;
}

static void jacobian(struct fit *f, double *x)
{
	for (uint32_t j = 0; j < f->k; j++) {
		double keep = x[j], h = 1e-6 * fmax(fabs(x[j]), f->scale[j]);
		double *col = f->J + (size_t)j * f->n;

		if (f->lo[j] >= f->hi[j]) { /* pinned: no step, no slope */
			memset(col, 0, sizeof(double) * f->n);
			continue;
		}
		if (x[j] + h > f->hi[j])
			h = -h;
		x[j] = keep + h;
		residuals_at(f, x, col);
		x[j] = keep;
		for (uint32_t i = 0; i < f->n; i++)
			col[i] = (col[i] - f->r[i]) / h;
	}
	put(f, x);
}

/* Solves the k x k system A d = b in place (Cholesky; A symmetric positive definite). */
static int solve(double *A, double *b, uint32_t k)
{
	for (uint32_t j = 0; j < k; j++) {
		double d = A[j * k + j];

		for (uint32_t m = 0; m < j; m++)
			d -= A[j * k + m] * A[j * k + m];
		if (!(d > 0))
			return -1;
		A[j * k + j] = sqrt(d);
		for (uint32_t i = j + 1; i < k; i++) {
			double s = A[i * k + j];

			for (uint32_t m = 0; m < j; m++)
				s -= A[i * k + m] * A[j * k + m];
			A[i * k + j] = s / A[j * k + j];
		}
	}
	for (uint32_t i = 0; i < k; i++) {
		for (uint32_t m = 0; m < i; m++)
			b[i] -= A[i * k + m] * b[m];
		b[i] /= A[i * k + i];
	}
	for (uint32_t i = k; i-- > 0;) {
		for (uint32_t m = i + 1; m < k; m++)
			b[i] -= A[m * k + i] * b[m];
		b[i] /= A[i * k + i];
	}
	return 0;
}

/*
 * Levenberg-Marquardt from x, projected onto the bounds: a variable at a bound that the
 * gradient pushes past it is held for the step. Returns the final sum of squares.
 */
static double minimise(struct fit *f, double *x)
{
	uint32_t k = f->k;
	double A[COLL_FIT__COUNT * COLL_FIT__COUNT], g[COLL_FIT__COUNT], d[COLL_FIT__COUNT];
	double y[COLL_FIT__COUNT], cost = residuals_at(f, x, f->r), lambda = 1e-3;

	for (uint32_t step = 0; step < MAX_STEPS && k; step++) {
		bool held[COLL_FIT__COUNT];
		double next = cost;

		f->iterations++;
		jacobian(f, x);
		/* In units of each variable's scale, so that the system is well conditioned. */
		for (uint32_t a = 0; a < k; a++) {
			double *ca = f->J + (size_t)a * f->n;

			g[a] = 0;
			for (uint32_t i = 0; i < f->n; i++) {
				ca[i] *= f->scale[a];
				g[a] += ca[i] * f->r[i];
			}
			held[a] = (x[a] <= f->lo[a] && g[a] > 0) || (x[a] >= f->hi[a] && g[a] < 0);
		}
		for (; lambda < 1e12; lambda *= 4) {
			double M[COLL_FIT__COUNT * COLL_FIT__COUNT];

			for (uint32_t a = 0; a < k; a++)
				for (uint32_t b = 0; b <= a; b++) {
					const double *ca = f->J + (size_t)a * f->n;
					const double *cb = f->J + (size_t)b * f->n;
					double s = 0;

					if (!held[a] && !held[b])
						for (uint32_t i = 0; i < f->n; i++)
							s += ca[i] * cb[i];
					A[a * k + b] = A[b * k + a] = s;
				}
			/*
			 * Damping proportional to each curvature, with a floor: a direction the
			 * runs hardly see would otherwise take a huge step on gradient noise.
			 */
			double floor = 0;
			for (uint32_t a = 0; a < k; a++)
				floor = fmax(floor, 1e-6 * A[a * k + a]);
			memcpy(M, A, sizeof(double) * k * k);
			for (uint32_t a = 0; a < k; a++) {
				M[a * k + a] +=
				    lambda * fmax(A[a * k + a], floor) + 1e-300 + (held[a] ? 1 : 0);
				d[a] = held[a] ? 0 : -g[a];
			}
			if (solve(M, d, k))
				continue;
			for (uint32_t a = 0; a < k; a++)
				y[a] = fmin(f->hi[a], fmax(f->lo[a], x[a] + d[a] * f->scale[a]));
			next = residuals_at(f, y, f->r2);
			if (next < cost)
				break;
		}
		if (!(next < cost))
			break;
		memcpy(x, y, sizeof(double) * k);
		memcpy(f->r, f->r2, sizeof(double) * f->n);
		lambda = fmax(lambda / 3, 1e-9);
		if (cost - next <= 1e-12 * cost) {
			cost = next;
			break;
		}
		cost = next;
	}
	residuals_at(f, x, f->r);
	return cost;
}

/*
 * Which variables the runs determine at x: Gram-Schmidt over the Jacobian's columns, each
 * scaled by its variable's size, the strongest first. A column with no effect is unused; one
 * whose effect the earlier columns explain all but CONFOUNDED of is confounded.
 */
static void judge(struct fit *f, double *x, enum coll_fit_why *why)
{
	double *Q = f->Q;
	double norm[COLL_FIT__COUNT];
	bool done[COLL_FIT__COUNT] = { false };
	uint32_t kept = 0;

	jacobian(f, x);
	for (uint32_t j = 0; j < f->k; j++) {
		double s = fmax(fabs(x[j]), f->scale[j]), ss = 0;
		double *c = f->J + (size_t)j * f->n;

		for (uint32_t i = 0; i < f->n; i++) {
			c[i] *= s;
			ss += c[i] * c[i];
		}
		norm[j] = sqrt(ss / f->n);
		why[j] = norm[j] < UNUSED ? COLL_FIT_UNUSED : COLL_FIT_DETERMINED;
	}
	for (uint32_t round = 0; round < f->k; round++) {
		int best = -1;

		for (uint32_t j = 0; j < f->k; j++)
			if (!done[j] && why[j] == COLL_FIT_DETERMINED &&
			    (best < 0 || norm[j] > norm[best]))
				best = (int)j;
		if (best < 0)
			break;
		done[best] = true;
		double *c = f->J + (size_t)best * f->n, left = 0;
		for (uint32_t q = 0; q < kept; q++) {
			const double *e = Q + (size_t)q * f->n;
			double dot = 0;

			for (uint32_t i = 0; i < f->n; i++)
				dot += c[i] * e[i];
			for (uint32_t i = 0; i < f->n; i++)
				c[i] -= dot * e[i];
		}
		for (uint32_t i = 0; i < f->n; i++)
			left += c[i] * c[i];
		left = sqrt(left / f->n);
		if (left < CONFOUNDED * norm[best]) {
			why[best] = COLL_FIT_CONFOUNDED;
			continue;
		}
		for (uint32_t i = 0; i < f->n; i++)
			Q[(size_t)kept * f->n + i] = c[i] / (left * sqrt((double)f->n));
		kept++;
	}
}

/* Fits f's variables from x (k of them); drops the undetermined ones and fits again. */
static double fit_from(struct fit *f, double *x, const double *start, enum coll_fit_why *why)
{
	double cost = minimise(f, x);

	judge(f, x, why);
	bool redo = false;
	for (uint32_t j = 0; j < f->k; j++)
		if (why[j] != COLL_FIT_DETERMINED) {
			x[j] = start[j];
			f->lo[j] = f->hi[j] = start[j];
			redo = true;
		}
	if (redo)
		cost = minimise(f, x);
	put(f, x);
	return cost;
}

int coll_run_check(const struct coll_run *run, const struct coll_params *start,
                   struct coll_error *err)
{
	struct coll_estimate e;
	int rc;

	if (!coll_collective_name(run->collective)) {
		coll_err_set(err, "collective", "unknown collective");
		return -EINVAL;
	}
	if (!coll_algorithm_name(run->algorithm)) {
		coll_err_set(err, "algorithm", "unknown algorithm");
		return -EINVAL;
	}
	if (run->servers < 2 || run->servers > COLL_MAX_SERVERS) {
		coll_err_set(err, "servers", "servers must be 2..%u, got %u", COLL_MAX_SERVERS,
		             run->servers);
		return -EINVAL;
	}
	if (!run->bytes) {
		coll_err_set(err, "bytes", "bytes must be at least 1");
		return -EINVAL;
	}
	if (!(run->measured_us > 0 && isfinite(run->measured_us))) {
		coll_err_set(err, "measured_us", "measured_us must be a finite time above 0");
		return -EINVAL;
	}
	/* Whether it can be priced does not depend on the sync mode; the barrier's price is the
	 * cheap one (an all-to-all without it is a replay). */
	struct coll_params barrier = *start;
	barrier.sync = COLL_SYNC_BARRIER;
	rc = coll_predict(run->collective, run->algorithm, run->bytes, run->servers, run->devices,
	                  &barrier, &e, err);
	if (rc && err && !err->field)
		err->field = "algorithm";
	return rc;
}

/*
 * Profiles of the all-to-all runs priced round by round, and what the runs can tell: whether
 * any relays (*relays) and the pieces the profiles hold (*pieces). Returns 0 or -ENOMEM.
 */
static int cache_runs(struct fit *f, bool *relays, uint64_t *pieces)
{
	*relays = false;
	*pieces = 0;
	for (uint32_t i = 0; i < f->n; i++) {
		const struct coll_run *u = &f->runs[i];
		struct run_cache *c = &f->cache[i];
		struct coll_estimate e;

		coll_predict(u->collective, u->algorithm, u->bytes, u->servers, u->devices, &f->p,
		             &e, NULL);
		*relays |= e.relay_hops > 0 && u->devices > 1;
		*pieces += 1;
		if (u->collective != COLL_ALLTOALL || coll_is_shape_alg(u->algorithm))
			continue;
		c->sends = e.sends;
		if (coll_alltoall_profile(u->algorithm, &f->p, (double)u->bytes, u->servers,
		                          u->devices, &c->profile) == -ENOMEM)
			return -ENOMEM;
		if (c->profile.nrounds)
			*pieces += c->profile.first[c->profile.nrounds];
	}
	return 0;
}

int coll_fit_work(const struct coll_run *runs, uint32_t nruns, struct coll_error *err)
{
	uint64_t flows = 0;

	for (uint32_t i = 0; i < nruns; i++)
		if (runs[i].collective == COLL_ALLTOALL && !coll_is_shape_alg(runs[i].algorithm) &&
		    runs[i].servers >= 2 && runs[i].devices >= 1 &&
		    runs[i].servers <= COLL_MAX_SERVERS && runs[i].devices <= COLL_MAX_DEVICES)
			flows += coll_alltoall_flows(runs[i].algorithm, runs[i].servers,
			                             runs[i].devices);
	if (flows <= COLL_FIT_MAX_FLOWS)
		return 0;
	coll_err_set(err, "runs",
	             "the all-to-all runs send %llu messages priced round by round, at most %u fit "
	             "in one calibration: give fewer or smaller all-to-all runs",
	             (unsigned long long)flows, COLL_FIT_MAX_FLOWS);
	return -E2BIG;
}

static void summarise(const struct fit *f, struct coll_fit_result *out)
{
	double ss = 0;

	out->max_abs = 0;
	out->within_5 = out->within_10 = 0;
	for (uint32_t i = 0; i < f->n; i++) {
		double a = fabs(f->r[i]);

		ss += a * a;
		out->max_abs = fmax(out->max_abs, a);
		out->within_5 += a <= 0.05;
		out->within_10 += a <= 0.10;
	}
	out->rms = sqrt(ss / f->n);
}

int coll_fit(const struct coll_run *runs, uint32_t nruns, const struct coll_params *start,
             const struct coll_fit_request *req, struct coll_fit_result *out, double *residuals,
             struct coll_error *err)
{
	struct fit f = { .runs = runs, .n = nruns };
	double x0[COLL_FIT__COUNT] = { 0 }, x[COLL_FIT__COUNT], best_x[COLL_FIT__COUNT];
	double lo[COLL_FIT__COUNT], hi[COLL_FIT__COUNT];
	enum coll_fit_why why[COLL_FIT__COUNT], best_why[COLL_FIT__COUNT] = { 0 };
	double best = INFINITY, relay_cost[COLL_RELAY__COUNT];
	bool relays;
	uint64_t pieces;
	enum coll_relay best_relay = start ? start->relay : COLL_RELAY_NONE;
	int rc = -EINVAL;

	if (!runs || !nruns || nruns > COLL_FIT_MAX_RUNS || !start || !req || !out) {
		coll_err_set(err, "runs", "1..%u runs are needed", COLL_FIT_MAX_RUNS);
		return -EINVAL;
	}
	if (coll_params_validate(start, err))
		return -EINVAL;
	rc = coll_fit_work(runs, nruns, err);
	if (rc)
		return rc;
	/* Without the barrier an all-to-all's price is a replay of its schedule, milliseconds
	 * each, and a fit prices every run hundreds of times. */
	for (uint32_t i = 0; i < nruns && start->sync != COLL_SYNC_BARRIER; i++)
		if (runs[i].collective == COLL_ALLTOALL && !coll_is_shape_alg(runs[i].algorithm)) {
			coll_err_set(
			    err, "params.sync",
			    "run %u is an all-to-all, which is fitted with sync barrier only: "
			    "fit it with the barrier, or leave the all-to-all runs out",
			    i);
			return -EDOM;
		}
	rc = -EINVAL;
	for (uint32_t i = 0; i < nruns; i++) {
		struct coll_error why_run = { 0 };

		if (coll_run_check(&runs[i], start, &why_run)) {
			coll_err_set(err, "runs", "run %u: %s: %s", i, why_run.field,
			             why_run.reason);
			return -EINVAL;
		}
	}
	memset(out, 0, sizeof(*out));
	f.p = *start;
	for (unsigned t = 0; t < COLL_FIT__COUNT; t++)
		if (req->fit[t]) {
			f.term[f.k] = (enum coll_fit_term)t;
			var_bounds(f.term[f.k], &lo[f.k], &hi[f.k], &f.scale[f.k]);
			x0[f.k] =
			    fmin(hi[f.k],
			         fmax(lo[f.k],
			              to_var(f.term[f.k], coll_fit_term_get(start, f.term[f.k]))));
			f.k++;
		}
	f.r = malloc(sizeof(double) * nruns);
	f.r2 = malloc(sizeof(double) * nruns);
	f.J = malloc(sizeof(double) * nruns * (f.k ? f.k : 1));
	f.Q = malloc(sizeof(double) * nruns * (f.k ? f.k : 1));
	f.cache = calloc(nruns, sizeof(*f.cache));
	rc = !f.r || !f.r2 || !f.J || !f.Q || !f.cache ? -ENOMEM : cache_runs(&f, &relays, &pieces);
	if (rc) {
		coll_err_set(err, NULL, "out of memory");
		goto out;
	}
	/* The fit prices every piece some thousand times: bound what it holds the caller for. */
	if (pieces > COLL_FIT_MAX_PIECES) {
		coll_err_set(
		    err, "runs",
		    "these runs hold %llu pieces to price (all-to-all runs priced round by "
		    "round count their busiest links), at most %u fit in one calibration: "
		    "give fewer or smaller all-to-all runs",
		    (unsigned long long)pieces, COLL_FIT_MAX_PIECES);
		rc = -E2BIG;
		goto out;
	}
	memcpy(best_x, x0, sizeof(x0));
	out->start_rms = sqrt(residuals_at(&f, x0, f.r) / nruns);

	/*
	 * The host link's price has a kink (it counts only once slower than the circuits), so a
	 * fit from "no limit" sees no slope: it also starts from the circuits' rate and half of it.
	 */
	uint32_t dev = f.k;
	for (uint32_t j = 0; j < f.k; j++)
		if (f.term[j] == COLL_FIT_DEVICE_LINK)
			dev = j;
	double dev_starts[3] = { x0[dev < f.k ? dev : 0], coll_beta(start), 2 * coll_beta(start) };
	unsigned nstarts = dev < f.k ? 3 : 1;
	/* The relay mode is fitted only where some run relays: else every mode fits alike. */
	bool fit_relay = req->fit_relay && relays;
	unsigned nrelays = fit_relay ? COLL_RELAY__COUNT : 1;

	for (unsigned rl = 0; rl < nrelays; rl++) {
		double relay_best = INFINITY;

		f.p = *start;
		if (fit_relay)
			f.p.relay = (enum coll_relay)rl;
		for (unsigned s = 0; s < nstarts; s++) {
			double cost;

			memcpy(f.lo, lo, sizeof(lo));
			memcpy(f.hi, hi, sizeof(hi));
			memcpy(x, x0, sizeof(x));
			if (dev < f.k)
				x[dev] = fmin(hi[dev], dev_starts[s]);
			cost = fit_from(&f, x, x0, why);
			relay_best = fmin(relay_best, cost);
			if (cost < best) {
				best = cost;
				best_relay = f.p.relay;
				memcpy(best_x, x, sizeof(x));
				memcpy(best_why, why, sizeof(why));
			}
		}
		relay_cost[rl] = relay_best;
	}
	if (!isfinite(best)) {
		coll_err_set(err, "runs",
		             "no fit prices the runs to finite relative errors (a measured time "
		             "far too small?)");
		rc = -EDOM;
		goto out;
	}
	f.p = *start;
	f.p.relay = best_relay;
	memcpy(f.lo, lo, sizeof(lo));
	memcpy(f.hi, hi, sizeof(hi));
	residuals_at(&f, best_x, f.r);
	summarise(&f, out);
	out->params = f.p;
	out->iterations = f.iterations;
	/* Determined when the runner-up fits worse, not merely the worst mode. */
	out->relay_determined = fit_relay;
	for (unsigned rl = 0; fit_relay && rl < nrelays; rl++)
		if (rl != (unsigned)best_relay && !(relay_cost[rl] > best * (1 + 1e-6) + 1e-18))
			out->relay_determined = false;
	for (unsigned t = 0; t < COLL_FIT__COUNT; t++)
		out->why[t] = COLL_FIT_NOT_ASKED;
	for (uint32_t j = 0; j < f.k; j++)
		out->why[f.term[j]] = best_why[j];
	if (residuals)
		memcpy(residuals, f.r, sizeof(double) * nruns);
	rc = 0;
out:
	for (uint32_t i = 0; f.cache && i < nruns; i++)
		coll_profile_free(&f.cache[i].profile);
	free(f.cache);
	free(f.r);
	free(f.r2);
	free(f.J);
	free(f.Q);
	return rc;
}
