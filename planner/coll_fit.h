/*
 * Calibration of the collective cost model from measured runs (issue 30): bounded least
 * squares of the relative error over the terms of struct coll_params that describe the
 * hardware, with the fit's residuals and the terms the runs could not determine.
 * docs/cost-model.md, "Calibration", derives the method.
 *
 * Pure and reentrant: no I/O, no global state. Any thread. The caller owns every array.
 */
#ifndef OFCD_COLL_FIT_H
#define OFCD_COLL_FIT_H

#include "coll.h"

/** Most runs one calibration takes. */
#define COLL_FIT_MAX_RUNS 100000u

/**
 * Most pieces the runs may hold: one per run, plus the linear pieces of each all-to-all run
 * priced round by round. A fit prices each some thousand times: about a second for this many.
 */
#define COLL_FIT_MAX_PIECES 200000u

/**
 * Most messages the all-to-all runs priced round by round may send in all: building their
 * profiles costs about a second for this many.
 */
#define COLL_FIT_MAX_FLOWS 2000000u

/**
 * The terms a calibration can fit. Bandwidths of the links themselves (link_gbps, intra_gbps)
 * are facts of the topology, not fitted: their efficiencies are.
 */
enum coll_fit_term {
	COLL_FIT_LAUNCH = 0,       /**< "launch_us" */
	COLL_FIT_ALPHA,            /**< "alpha_us" */
	COLL_FIT_INTRA_ALPHA,      /**< "intra_alpha_us" */
	COLL_FIT_OVERHEAD,         /**< "overhead_us" */
	COLL_FIT_SWITCH_ALPHA,     /**< "switch_alpha_us" */
	COLL_FIT_LINK_EFFICIENCY,  /**< "link_efficiency" */
	COLL_FIT_INTRA_EFFICIENCY, /**< "intra_efficiency" */
	COLL_FIT_GAMMA,            /**< "gamma_ns_per_byte" */
	COLL_FIT_DEVICE_LINK,      /**< "device_link_gbps" (0, no limit, is a value it can take) */
	COLL_FIT_LAUNCH_ALG,       /**< "launch_us.<algorithm>": COLL_ALGORITHM__COUNT terms */
	COLL_FIT__COUNT = COLL_FIT_LAUNCH_ALG + COLL_ALGORITHM__COUNT
};

/**
 * One measured run.
 * @collective, @algorithm: what ran (the algorithm must apply to the collective).
 * @servers, @devices:      its size (servers >= 2).
 * @bytes:                  its size in the sense of coll.h (> 0).
 * @measured_us:            the time measured, > 0.
 */
struct coll_run {
	enum coll_collective collective;
	enum coll_algorithm algorithm;
	uint32_t servers;
	uint32_t devices;
	uint64_t bytes;
	double measured_us;
};

/**
 * What to fit. @fit[t]: term t is fitted (otherwise it keeps its start value). @fit_relay: the
 * relay mode is chosen too, as the one of the three whose fit is best.
 */
struct coll_fit_request {
	bool fit[COLL_FIT__COUNT];
	bool fit_relay;
};

/** Why a term was not determined by the runs. */
enum coll_fit_why {
	COLL_FIT_DETERMINED = 0, /**< fitted */
	COLL_FIT_NOT_ASKED,      /**< not asked to fit: kept its start value */
	COLL_FIT_UNUSED,         /**< no run's time depends on it: kept its start value */
	COLL_FIT_CONFOUNDED,     /**< the runs cannot tell it from the other terms: kept */
};

/**
 * The result. Plain data, owned by the caller.
 * @params:       the start parameters with the fitted terms replaced.
 * @why:          per term, whether it was determined.
 * @rms:          root mean square of the relative residuals (predicted / measured - 1).
 * @max_abs:      the largest absolute relative residual.
 * @within_5, @within_10: runs predicted within 5 % and 10 %.
 * @start_rms:    @rms of the start parameters, the gap the calibration closes.
 * @iterations:   Levenberg-Marquardt steps taken, over every start tried.
 * @relay_determined: the relay mode was chosen and one mode fits better than the others (it
 *                  is then @params.relay); false when not asked or the runs cannot tell.
 */
struct coll_fit_result {
	struct coll_params params;
	enum coll_fit_why why[COLL_FIT__COUNT];
	double rms;
	double max_abs;
	uint32_t within_5;
	uint32_t within_10;
	double start_rms;
	uint32_t iterations;
	bool relay_determined;
};

/** Name of term @t ("alpha_us", "launch_us.ring", ...): static, NULL when out of range. */
const char *coll_fit_term_name(enum coll_fit_term t);

/** Parse a term name into @t. Returns 0 or -EINVAL. */
int coll_fit_term_from_name(const char *name, enum coll_fit_term *t);

/** Value of term @t in @p, in the units of its name. */
double coll_fit_term_get(const struct coll_params *p, enum coll_fit_term t);

/** Set term @t of @p to @v (unchecked: coll_params_validate() checks). */
void coll_fit_term_set(struct coll_params *p, enum coll_fit_term t, double v);

/** The default request: every term but the per-algorithm launches, and the relay mode. */
void coll_fit_request_default(struct coll_fit_request *req);

/** "fitted", "not asked", "no run depends on it", "cannot be told from the others". */
const char *coll_fit_why_text(enum coll_fit_why w);

/**
 * Check one run against @start's capabilities. Returns 0, or -EINVAL / -EDOM with @err saying
 * which field is wrong (@err->field is the bare field name: "collective", "algorithm",
 * "servers", "devices", "bytes", "measured_us"; -EDOM when the algorithm cannot run at that
 * size with these capabilities).
 */
int coll_run_check(const struct coll_run *run, const struct coll_params *start,
                   struct coll_error *err);

/**
 * Whether @nruns runs are within what one calibration takes (COLL_FIT_MAX_FLOWS), before
 * anything is priced: 0, or -E2BIG with @err (field "runs") saying how much they are.
 */
int coll_fit_work(const struct coll_run *runs, uint32_t nruns, struct coll_error *err);

/**
 * Fit @req's terms of @start to @nruns runs (each checked with coll_run_check()). @residuals,
 * when not NULL, gets each run's relative residual under the fit. Returns 0; -EINVAL (bad
 * arguments, no run, or a run coll_run_check() refuses: @err->field "runs", the reason naming
 * the run and its field); -E2BIG (more than COLL_FIT_MAX_FLOWS or COLL_FIT_MAX_PIECES); -EDOM (no
 * fit prices the runs to finite errors, or an all-to-all run with @start's sync "pairwise");
 * -ENOMEM. @err may be NULL. The relay mode is chosen only when some run relays (more than one
 * device per server, an algorithm that forwards). The sync mode is @start's.
 */
int coll_fit(const struct coll_run *runs, uint32_t nruns, const struct coll_params *start,
             const struct coll_fit_request *req, struct coll_fit_result *out, double *residuals,
             struct coll_error *err);

#endif
