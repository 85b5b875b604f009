/*
 * The cost model fitted to the cluster (issue 30): POST /v1/cost/calibrate takes measured
 * runs, as JSON or as nccl-tests' result lines, fits the model's hardware terms to them
 * (coll_fit.h) and stores the result as a named parameter set (domain/cost_set.h); one set
 * is active and every selection prices with it. docs/cost-model.md, "Calibration".
 */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "api_handlers.h"
#include "auth_rules.h"
#include "coll.h"
#include "coll_fit.h"
#include "decimal.h"
#include "domain/cost_run.h"
#include "domain/cost_set.h"
#include "domain/fabric_view.h"
#include "domain/topo.h"

/*
 * Runs one calibration takes: the fit holds the loop about 0.3 s per thousand, and all-to-all
 * runs priced round by round are bounded apart (coll_fit_work()).
 */
#define CALIBRATE_MAX_RUNS 4000u
#define MAX_BYTES          (1ull << 50) /* as POST /v1/collective/select */
#define MIN_US             1e-6         /* a measured time: a picosecond ... */
#define MAX_US             1e12         /* ... to eleven days */

/* Where a run came from, for its errors: a member of runs, a line of nccl-tests, a stored run. */
struct run_src {
	enum { SRC_RUNS, SRC_NCCL, SRC_COLLECTED } kind;
	int64_t at; /* its index in runs, its line, its id */
};

/* A run's collective and algorithm from obj, under prefix. 0 or -EINVAL (replied). */
static int read_kind(struct api_req *req, json_t *obj, const char *prefix, struct coll_run *r)
{
	const char *alg;
	char f[96];
	int c;

	if (api_get_enum(req, obj, prefix, "collective", true, api_collective_names, &c) < 0 ||
	    api_get_string(req, obj, prefix, "algorithm", true, 64, &alg) < 0)
		return -EINVAL;
	coll_collective_from_name(api_collective_names[c], &r->collective);
	if (coll_algorithm_from_name(alg, &r->algorithm) < 0) {
		api_error(req, OFCD_E_INVALID_FIELD, api_field(f, sizeof(f), prefix, "algorithm"),
		          "unknown algorithm \"%.64s\"", alg);
		return -EINVAL;
	}
	return 0;
}

static int read_size(struct api_req *req, json_t *obj, const char *prefix, struct coll_run *r)
{
	uint64_t servers, devices;

	if (api_get_uint(req, obj, prefix, "servers", true, 2, COLL_MAX_SERVERS, &servers) < 0 ||
	    api_get_uint(req, obj, prefix, "devices", true, 1, COLL_MAX_DEVICES, &devices) < 0)
		return -EINVAL;
	r->servers = (uint32_t)servers;
	r->devices = (uint32_t)devices;
	return 0;
}

/*
 * The run can be priced with the start parameters, or a 422 on field prefix.FIELD whose
 * message starts with where the run came from (its member or its nccl-tests line).
 */
static int check_run(struct api_req *req, const struct coll_run *r, const char *prefix,
                     const char *where, const struct coll_params *start)
{
	struct coll_error err = { 0 };
	char f[96];

	if (coll_run_check(r, start, &err) == 0)
		return 0;
	api_error(req, OFCD_E_UNPROCESSABLE, api_field(f, sizeof(f), prefix, err.field), "%s: %s",
	          where, err.reason);
	return -EINVAL;
}

static int read_runs(struct api_req *req, json_t *a, struct coll_run *runs, struct run_src *src,
                     uint32_t *n)
{
	static const char *const members[] = { "collective", "algorithm",   "servers", "devices",
		                               "bytes",      "measured_us", NULL };
	size_t i;
	json_t *o;

	json_array_foreach(a, i, o)
	{
		struct coll_run *r = &runs[*n];
		char prefix[32];

		snprintf(prefix, sizeof(prefix), "runs[%zu]", i);
		if (!json_is_object(o)) {
			api_error(req, OFCD_E_INVALID_FIELD, prefix, "%s must be an object",
			          prefix);
			return -EINVAL;
		}
		if (api_check_members(req, o, prefix, members) < 0 ||
		    read_kind(req, o, prefix, r) < 0 || read_size(req, o, prefix, r) < 0 ||
		    api_get_uint(req, o, prefix, "bytes", true, 1, MAX_BYTES, &r->bytes) < 0 ||
		    api_get_double(req, o, prefix, "measured_us", true, MIN_US, MAX_US,
		                   &r->measured_us) < 0)
			return -EINVAL;
		src[(*n)++] = (struct run_src){ SRC_RUNS, (int64_t)i };
	}
	return 0;
}

/* The longest line of nccl_tests.text read: nccl-tests' own are under 200 bytes. */
#define NCCL_LINE_MAX 512

/*
 * Line number line (from 0) of nccl_tests.text at *s into buf (NCCL_LINE_MAX), *s moved past
 * it. 0, or -EINVAL (replied) for a line too long to be nccl-tests' or ofcd's.
 */
static int next_line(struct api_req *req, const char **s, char *buf, uint32_t line)
{
	const char *end = strchr(*s, '\n');
	size_t len = end ? (size_t)(end - *s) : strlen(*s);

	if (len >= NCCL_LINE_MAX) {
		api_error(req, OFCD_E_INVALID_FIELD, "nccl_tests.text",
		          "line %u has %zu bytes, more than a line of nccl-tests (at most %u)",
		          line + 1, len, NCCL_LINE_MAX - 1);
		return -EINVAL;
	}
	memcpy(buf, *s, len);
	buf[len] = '\0';
	*s += len + (end != NULL);
	return 0;
}

/*
 * The columns of nccl-tests' results, from its header line "#  size  count  type  redop  root
 * time  algbw  busbw  #wrong  time ...": the first "time" is the out-of-place one, the second
 * the in-place one, and each "#wrong" (a count of results its check found wrong; -1 where an
 * older release prints "error", a float's rounding error instead). Releases differ in the
 * columns before it (root came in 2.x), so they are counted, not assumed; without a header,
 * those of 2.x.
 */
static void nccl_columns(char **col, int ncol, int time[2], int wrong[2])
{
	int seen = 0;

	for (int i = 1; i < ncol; i++) /* the '#' is not a column: i - 1 */
		if (!strcmp(col[i], "time") && seen < 2)
			time[seen++] = i - 1;
		else if (seen && (!strcmp(col[i], "#wrong") || !strcmp(col[i], "error")))
			wrong[seen - 1] = strcmp(col[i], "error") ? i - 1 : -1;
}

/*
 * nccl-tests' result lines (size count type redop root time algbw busbw #wrong, out of place
 * then in place). The size is the buffer in the sense of coll.h (allreduce and broadcast: each
 * rank's; allgather: the gathered result; alltoall: each rank's send buffer). *line gets each
 * run's line number, for its errors.
 */
static int read_nccl_tests(struct api_req *req, json_t *o, struct coll_run *runs,
                           struct run_src *src, uint32_t *n)
{
	static const char *const members[] = { "text",    "collective", "algorithm", "servers",
		                               "devices", "in_place",   NULL };
	const char *p = "nccl_tests", *text;
	struct coll_run proto = { 0 };
	bool in_place = false;
	uint32_t line = 0, found = 0;
	int tcol[2] = { 5, 9 }, wcol[2] = { 8, 12 };

	if (!json_is_object(o)) {
		api_error(req, OFCD_E_INVALID_FIELD, p, "nccl_tests must be an object");
		return -EINVAL;
	}
	if (api_check_members(req, o, p, members) < 0 ||
	    api_get_string(req, o, p, "text", true, 16u << 20, &text) < 0 ||
	    read_kind(req, o, p, &proto) < 0 || read_size(req, o, p, &proto) < 0 ||
	    api_get_bool(req, o, p, "in_place", false, &in_place) < 0)
		return -EINVAL;
	for (const char *s = text; *s; line++) {
		char buf[NCCL_LINE_MAX], *tok, *save, *col[16];
		int ncol = 0;

		if (next_line(req, &s, buf, line) < 0)
			return -EINVAL;
		for (tok = strtok_r(buf, " \t\r", &save); tok && ncol < 16;
		     tok = strtok_r(NULL, " \t\r", &save))
			col[ncol++] = tok;
		if (ncol > 2 && !strcmp(col[0], "#") && !strcmp(col[1], "size"))
			nccl_columns(col, ncol, tcol, wcol);
		/* Comments and the summary start with '#'; a result with a digit. */
		if (ncol < 2 || col[0][0] < '0' || col[0][0] > '9')
			continue;
		uint64_t size = 0;
		int t = tcol[in_place];
		double us = t < ncol && decimal_plain(col[t]) ? strtod(col[t], NULL) : NAN;

		if (!decimal_u64(col[0], MAX_BYTES, &size) || !(us >= MIN_US && us <= MAX_US) ||
		    !size) {
			api_error(
			    req, OFCD_E_INVALID_FIELD, "nccl_tests.text",
			    "line %u is not a result line of nccl-tests (size count type redop "
			    "root time algbw busbw #wrong ..., a size of 1..2^50 bytes and a time "
			    "of %g..%g us)",
			    line + 1, MIN_US, MAX_US);
			return -EINVAL;
		}
		/* nccl-tests' own check found wrong results: not a run to learn from. */
		int w = wcol[in_place];
		if (w >= 0 && w < ncol && strcmp(col[w], "0") != 0 && strcmp(col[w], "N/A") != 0) {
			api_error(req, OFCD_E_INVALID_FIELD, "nccl_tests.text",
			          "line %u: nccl-tests counted %s wrong results in this run",
			          line + 1, col[w]);
			return -EINVAL;
		}
		if (*n >= CALIBRATE_MAX_RUNS) {
			api_error(req, OFCD_E_INVALID_FIELD, "nccl_tests.text",
			          "more than %u runs in one request", CALIBRATE_MAX_RUNS);
			return -EINVAL;
		}
		runs[*n] = proto;
		runs[*n].bytes = size;
		runs[*n].measured_us = us;
		src[(*n)++] = (struct run_src){ SRC_NCCL, line + 1 };
		found++;
	}
	if (!found) {
		api_error(req, OFCD_E_INVALID_FIELD, "nccl_tests.text",
		          "no result line of nccl-tests in the text");
		return -EINVAL;
	}
	return 0;
}

/*
 * Every run within what one calibration takes, then each one priced with the start's
 * capabilities: a 422 names the first that cannot be, by its member, nccl-tests line or id.
 */
static int check_runs(struct api_req *req, const struct coll_run *runs, const struct run_src *src,
                      uint32_t n, const struct coll_params *start)
{
	struct coll_error err = { 0 };

	if (coll_fit_work(runs, n, &err) < 0) {
		api_error(req, OFCD_E_UNPROCESSABLE, "runs", "%s", err.reason);
		return -EINVAL;
	}
	for (uint32_t i = 0; i < n; i++) {
		const char *prefix = src[i].kind == SRC_NCCL        ? "nccl_tests"
		                     : src[i].kind == SRC_COLLECTED ? "collected"
		                                                    : NULL;
		char where[48];

		snprintf(where, sizeof(where),
		         src[i].kind == SRC_NCCL        ? "nccl_tests line %lld"
		         : src[i].kind == SRC_COLLECTED ? "collected run %lld"
		                                        : "runs[%lld]",
		         (long long)src[i].at);
		if (check_run(req, &runs[i], prefix ? prefix : where, where, start) < 0)
			return -EINVAL;
	}
	return 0;
}

/*
 * "fabric": the facts of the hardware the runs were measured on, from a stored fabric: the
 * most circuits one of its devices ends (what its host link is shared by) into *ports, 0 when
 * no fabric is named, or when it is not stored and @gone_ok (runs sent after their job's
 * fabric went keep its name alone). 0 or -EINVAL (replied).
 */
static int read_fabric(struct api_req *req, json_t *body, bool gone_ok, const char **name,
                       uint32_t *ports)
{
	struct fabric_view f;

	*name = NULL;
	*ports = 0;
	if (api_get_name(req, body, NULL, "fabric", false, name) < 0)
		return -EINVAL;
	if (!*name || (gone_ok && !topo_fabric_id(req->env->store, *name)))
		return 0;
	if (api_fabric_view_named(req, *name, &f) < 0)
		return -EINVAL;
	*ports = f.most_per_device ? f.most_per_device : 1;
	fabric_view_free(&f);
	return 0;
}

/*
 * The line "# ofcd: fabric=NAME collective=C algorithm=A servers=S devices=D in_place=B" in
 * nccl_tests.text says what the output does not: its values fill the members of nccl_tests
 * (and the body's "fabric") that the request leaves out, typed by their key. At most one such
 * line, each key once. 0 or -EINVAL (replied).
 */
static int nccl_header(struct api_req *req, json_t *body)
{
	static const char *const keys[] = { "fabric",  "collective", "algorithm", "servers",
		                            "devices", "in_place",   NULL };
	json_t *nt = json_object_get(body, "nccl_tests");
	const char *text = json_string_value(json_object_get(nt, "text"));
	uint32_t line = 0, first = 0;

	for (const char *s = text; s && *s; line++) {
		char buf[NCCL_LINE_MAX], *tok, *save;
		unsigned seen = 0;

		if (next_line(req, &s, buf, line) < 0)
			return -EINVAL;
		tok = strtok_r(buf, " \t\r", &save);
		if (!tok || strcmp(tok, "#") || !(tok = strtok_r(NULL, " \t\r", &save)) ||
		    strcmp(tok, "ofcd:"))
			continue;
		if (first) {
			api_error(
			    req, OFCD_E_INVALID_FIELD, "nccl_tests.text",
			    "line %u: a second \"# ofcd:\" line (line %u was the first); send "
			    "each test's output on its own",
			    line + 1, first);
			return -EINVAL;
		}
		first = line + 1;
		while ((tok = strtok_r(NULL, " \t\r", &save))) {
			char *eq = strchr(tok, '=');
			unsigned k = 0;

			if (eq)
				*eq = '\0';
			while (keys[k] && strcmp(keys[k], tok))
				k++;
			if (!eq || !keys[k] || (seen & (1u << k))) {
				api_error(
				    req, OFCD_E_INVALID_FIELD, "nccl_tests.text",
				    "line %u: \"%.32s\" is not KEY=VALUE of fabric, collective, "
				    "algorithm, servers, devices, in_place, each once",
				    line + 1, tok);
				return -EINVAL;
			}
			seen |= 1u << k;
			const char *v = eq + 1, *key = keys[k];
			json_t *into = k ? nt : body, *value;
			if (!strcmp(key, "servers") || !strcmp(key, "devices")) {
				uint64_t x;
				/* Not a number: the member's own check names it. */
				value = decimal_u64(v, UINT32_MAX, &x) ? json_integer((json_int_t)x)
				                                       : json_string(v);
			} else if (!strcmp(key, "in_place") &&
			           (!strcmp(v, "true") || !strcmp(v, "false"))) {
				value = json_boolean(v[0] == 't');
			} else {
				value = json_string(v);
			}
			if (!json_object_get(into, key))
				json_object_set_new(into, key, value);
			else
				json_decref(value);
		}
	}
	return 0;
}

/*
 * The measured runs of the body, "runs" and "nccl_tests", appended to runs[*n..] (room for
 * CALIBRATE_MAX_RUNS) with where each came from. 0 or -EINVAL (replied).
 */
static int read_measured(struct api_req *req, json_t *body, struct coll_run *runs,
                         struct run_src *src, uint32_t *n)
{
	json_t *a = json_object_get(body, "runs"), *nt = json_object_get(body, "nccl_tests");

	if (a && (!json_is_array(a) || json_array_size(a) > CALIBRATE_MAX_RUNS)) {
		api_error(req, OFCD_E_INVALID_FIELD, "runs",
		          "runs must be an array of at most %u runs", CALIBRATE_MAX_RUNS);
		return -EINVAL;
	}
	if ((a && read_runs(req, a, runs, src, n) < 0) ||
	    (nt && read_nccl_tests(req, nt, runs, src, n) < 0))
		return -EINVAL;
	return 0;
}

/*
 * "fit": the terms to fit (default: all but the per-algorithm launches); "relay" (or
 * "params.relay") fixes the relay mode. Runs after "params" is read into *start.
 */
static int read_request(struct api_req *req, json_t *body, struct coll_fit_request *fr,
                        struct coll_params *start)
{
	json_t *fit = json_object_get(body, "fit"), *v;
	size_t i;
	int relay;

	coll_fit_request_default(fr);
	if (fit) {
		if (!json_is_array(fit) || !json_array_size(fit)) {
			api_error(req, OFCD_E_INVALID_FIELD, "fit",
			          "fit must be a non-empty array of term names");
			return -EINVAL;
		}
		memset(fr->fit, 0, sizeof(fr->fit));
		fr->fit_relay = false;
		json_array_foreach(fit, i, v)
		{
			enum coll_fit_term t;
			const char *name = json_string_value(v);

			if (name && !strcmp(name, "relay")) {
				fr->fit_relay = true;
				continue;
			}
			if (coll_fit_term_from_name(name, &t) < 0) {
				api_error(
				    req, OFCD_E_INVALID_FIELD, "fit",
				    "fit[%zu] is not a term of the model (alpha_us, launch_us, "
				    "launch_us.<algorithm>, overhead_us, ..., relay)",
				    i);
				return -EINVAL;
			}
			fr->fit[t] = true;
		}
	}
	if (api_get_enum(req, body, NULL, "relay", false, api_relay_names, &relay) < 0)
		return -EINVAL;
	if (json_object_get(body, "relay"))
		start->relay = (enum coll_relay)relay;
	/* A relay mode given, at the top or among the known facts, is not fitted. */
	if (json_object_get(body, "relay") ||
	    json_object_get(json_object_get(body, "params"), "relay"))
		fr->fit_relay = false;
	return 0;
}

static json_t *fit_json(const struct coll_fit_result *res, const struct coll_fit_request *fr,
                        const struct coll_run *runs, const double *resid, uint32_t n)
{
	json_t *terms = json_object(), *undetermined = json_array(), *rows = json_array();

	for (unsigned t = 0; t < COLL_FIT__COUNT; t++) {
		const char *name = coll_fit_term_name((enum coll_fit_term)t);

		if (res->why[t] == COLL_FIT_NOT_ASKED)
			continue;
		json_object_set_new(terms, name, json_string(coll_fit_why_text(res->why[t])));
		if (res->why[t] != COLL_FIT_DETERMINED)
			json_array_append_new(undetermined, json_string(name));
	}
	if (fr->fit_relay && !res->relay_determined)
		json_array_append_new(undetermined, json_string("relay"));
	for (uint32_t i = 0; i < n; i++)
		json_array_append_new(
		    rows, json_pack("{s:s, s:s, s:I, s:I, s:I, s:f, s:f, s:f}", "collective",
		                    coll_collective_name(runs[i].collective), "algorithm",
		                    coll_algorithm_name(runs[i].algorithm), "servers",
		                    (json_int_t)runs[i].servers, "devices",
		                    (json_int_t)runs[i].devices, "bytes", (json_int_t)runs[i].bytes,
		                    "measured_us", runs[i].measured_us, "predicted_us",
		                    runs[i].measured_us * (1 + resid[i]), "residual", resid[i]));
	return json_pack("{s:I, s:f, s:f, s:I, s:I, s:f, s:I, s:s, s:b, s:o, s:o, s:o}", "runs",
	                 (json_int_t)n, "rms", res->rms, "max_abs", res->max_abs, "within_5",
	                 (json_int_t)res->within_5, "within_10", (json_int_t)res->within_10,
	                 "start_rms", res->start_rms, "iterations", (json_int_t)res->iterations,
	                 "relay", coll_relay_name(res->params.relay), "relay_determined",
	                 res->relay_determined, "terms", terms, "undetermined", undetermined,
	                 "residuals", rows);
}

/* The runs the request's "collected" selects, or none. A query or members of an object. */
static int read_filter(struct api_req *req, json_t *o, const char *prefix,
                       struct cost_run_filter *f)
{
	static const char *const members[] = { "fabric", "collector", "since", "before", NULL };
	uint64_t since = 0, before = 0;

	memset(f, 0, sizeof(*f));
	if (!o) {
		if (api_query_uint(req, "since", 0, INT64_MAX, 0, &since) < 0 ||
		    api_query_uint(req, "before", 1, INT64_MAX, 0, &before) < 0)
			return -EINVAL;
		f->fabric = api_query(req, "fabric");
		f->collector = api_query(req, "collector");
		const char *bad = f->fabric && !auth_valid_name(f->fabric)         ? "fabric"
		                  : f->collector && !auth_valid_name(f->collector) ? "collector"
		                                                                   : NULL;
		if (bad) {
			api_error(req, OFCD_E_INVALID_FIELD, bad,
			          "%s must be a name: 1 to 64 characters of A-Z a-z 0-9 . _ -",
			          bad);
			return -EINVAL;
		}
	} else if (json_is_object(o)) {
		if (api_check_members(req, o, prefix, members) < 0 ||
		    api_get_name(req, o, prefix, "fabric", false, &f->fabric) < 0 ||
		    api_get_name(req, o, prefix, "collector", false, &f->collector) < 0 ||
		    api_get_uint(req, o, prefix, "since", false, 0, INT64_MAX, &since) < 0 ||
		    api_get_uint(req, o, prefix, "before", false, 1, INT64_MAX, &before) < 0)
			return -EINVAL;
	} else if (!json_is_true(o)) {
		api_error(
		    req, OFCD_E_INVALID_FIELD, prefix,
		    "%s must be true (every collected run) or an object of fabric, collector, "
		    "since, before",
		    prefix);
		return -EINVAL;
	}
	f->since = (int64_t)since;
	f->before = (int64_t)before;
	return 0;
}

/*
 * "collected": the stored runs it selects, appended to runs[*n..]; their ports per device
 * into *ports (as cost_run_load()). A new object for the provenance into *prov, NULL when
 * nothing is asked. 0 or -EINVAL (replied).
 */
static int read_collected(struct api_req *req, json_t *body, struct coll_run *runs,
                          struct run_src *src, uint32_t *n, uint32_t *ports, json_t **prov)
{
	json_t *o = json_object_get(body, "collected"), *who;
	struct cost_run_filter f;
	int64_t lo, hi, got;

	*prov = NULL;
	*ports = 0;
	if (!o || json_is_false(o))
		return 0;
	if (read_filter(req, o, "collected", &f) < 0)
		return -EINVAL;
	got = cost_run_count(req->env->store, &f);
	if (got > CALIBRATE_MAX_RUNS - *n) {
		api_error(req, OFCD_E_UNPROCESSABLE, "collected",
		          "%lld collected runs match and the request has %u: more than %u runs in "
		          "one calibration; narrow collected (fabric, collector, since, before)",
		          (long long)got, *n, CALIBRATE_MAX_RUNS);
		return -EINVAL;
	}
	int64_t *ids = calloc(CALIBRATE_MAX_RUNS, sizeof(*ids));
	got = ids ? cost_run_load(req->env->store, &f, runs + *n, ids, CALIBRATE_MAX_RUNS - *n, &lo,
	                          &hi, ports, &who)
	          : -EIO;
	for (int64_t i = 0; i < got; i++)
		src[*n + i] = (struct run_src){ SRC_COLLECTED, ids[i] };
	free(ids);
	if (got < 0) {
		api_error(req, OFCD_E_STORE, NULL, "cannot read the collected runs");
		return -EINVAL;
	}
	if (!got) {
		json_decref(who);
		api_error(req, OFCD_E_UNPROCESSABLE, "collected", "no collected run matches");
		return -EINVAL;
	}
	*n += (uint32_t)got;
	*prov = json_pack("{s:I, s:I, s:I, s:o}", "runs", (json_int_t)got, "first_id",
	                  (json_int_t)lo, "last_id", (json_int_t)hi, "from", who);
	return 0;
}

/* A calibration: what its fit reads, handed to the compute worker, and what it made. */
struct calibration {
	char name[65];
	bool activate;
	struct coll_params start;
	struct coll_fit_request fr;
	struct coll_run *runs;
	double *resid;
	uint32_t n;
	json_t *provenance;   /* made on the loop */
	json_t *params, *fit; /* made by the fit, on the worker */
};

static void calibration_free(void *arg)
{
	struct calibration *c = arg;
	json_decref(c->provenance);
	json_decref(c->params);
	json_decref(c->fit);
	free(c->runs);
	free(c->resid);
	free(c);
}

/* The fit over up to 4,000 runs: 130-800 ms, off the loop. */
static void calibration_fit(void *arg, struct api_req *out)
{
	struct calibration *c = arg;
	struct coll_fit_result res;
	struct coll_error err = { 0 };
	int rc = coll_fit(c->runs, c->n, &c->start, &c->fr, &res, c->resid, &err);
	if (rc) {
		api_error(out, rc == -ENOMEM ? OFCD_E_INTERNAL : OFCD_E_UNPROCESSABLE, err.field,
		          "%s", err.reason);
		return;
	}
	c->params = cost_set_params_json(&res.params);
	c->fit = fit_json(&res, &c->fr, c->runs, c->resid, c->n);
}

/* Stores a fitted set: the handler's second run (api_compute_first()). */
static void calibration_store(struct api_req *req, const struct calibration *c)
{
	struct ofcd_error e = { 0 };
	if (cost_set_add(req->env->store, c->name, c->params, c->fit, c->provenance, c->activate,
	                 &e) < 0) {
		api_fail(req, &e);
		return;
	}
	api_reply(req, 201, cost_set_json(req->env->store, c->name, true));
	api_set_location(req, "/v1/cost/params/%s", c->name);
}

void api_cost_calibrate(struct api_req *req)
{
	static const char *const members[] = { "name",     "runs",       "nccl_tests", "collected",
		                               "fabric",   "fit",        "relay",      "params",
		                               "activate", "provenance", NULL };
	const struct calibration *done = api_computed(req);
	if (done) {
		calibration_store(req, done);
		return;
	}
	json_t *body = api_body_object(req), *collected = NULL;
	struct calibration *c = NULL;
	struct run_src *src = NULL;
	const char *name, *fabric;
	bool activate = false, window_given;
	uint32_t n = 0, given = 0, ports, collected_ports;

	if (api_offload_full(req) || !body || api_check_members(req, body, NULL, members) < 0 ||
	    api_get_name(req, body, NULL, "name", true, &name) < 0 ||
	    api_get_bool(req, body, NULL, "activate", false, &activate) < 0 ||
	    nccl_header(req, body) < 0)
		return;
	if (!(c = calloc(1, sizeof(*c)))) {
		api_error(req, OFCD_E_INTERNAL, NULL, "out of memory");
		return;
	}
	snprintf(c->name, sizeof(c->name), "%s", name);
	c->activate = activate;
	/* The fit starts from what the cluster prices with now, and the body's known facts. */
	api_cost_params(req, &c->start);
	if (read_fabric(req, body, false, &fabric, &ports) < 0)
		goto fail;
	if (ports)
		c->start.ports_per_device = ports;
	if (api_coll_params_read(req, body, &c->start, &window_given) < 0 ||
	    read_request(req, body, &c->fr, &c->start) < 0)
		goto fail;
	c->runs = calloc(CALIBRATE_MAX_RUNS, sizeof(*c->runs));
	c->resid = calloc(CALIBRATE_MAX_RUNS, sizeof(*c->resid));
	src = calloc(CALIBRATE_MAX_RUNS, sizeof(*src));
	if (!c->runs || !c->resid || !src) {
		api_error(req, OFCD_E_INTERNAL, NULL, "out of memory");
		goto fail;
	}
	if (read_measured(req, body, c->runs, src, &n) < 0)
		goto fail;
	given = n;
	if (read_collected(req, body, c->runs, src, &n, &collected_ports, &collected) < 0)
		goto fail;
	if (!n) {
		api_error(req, OFCD_E_INVALID_FIELD, "runs",
		          "runs, nccl_tests or collected is required");
		goto fail;
	}
	c->n = n;
	/* Collected runs carry their fabric's host-link fact, unless the request gives it. */
	if (collected_ports && !fabric &&
	    !json_object_get(json_object_get(body, "params"), "ports_per_device")) {
		if (collected_ports == UINT32_MAX) {
			api_error(
			    req, OFCD_E_UNPROCESSABLE, "collected",
			    "the collected runs were measured on fabrics whose devices end "
			    "different numbers of circuits; narrow collected by fabric, or give "
			    "params.ports_per_device");
			goto fail;
		}
		c->start.ports_per_device = collected_ports;
	}
	/* A name that is taken is refused before the fit, not after (and after it again). */
	json_t *taken = cost_set_json(req->env->store, name, false);
	if (taken) {
		json_decref(taken);
		api_error(req, OFCD_E_CONFLICT, "name",
		          "a parameter set %s exists; choose another name or delete it first",
		          name);
		goto fail;
	}
	if (check_runs(req, c->runs, src, n, &c->start) < 0)
		goto fail;
	bool has_runs = json_object_get(body, "runs"),
	     has_nccl = json_object_get(body, "nccl_tests");
	char source[48];
	snprintf(source, sizeof(source), "%s%s%s%s%s", has_runs ? "runs" : "",
	         has_runs && has_nccl ? "+" : "", has_nccl ? "nccl-tests" : "",
	         given && collected ? "+" : "", collected ? "collected" : "");
	/* The facts the terms were fitted over: an efficiency means nothing without its rate. */
	json_t *facts = json_pack("{s:f, s:f, s:I}", "link_gbps", c->start.link_gbps, "intra_gbps",
	                          c->start.intra_gbps, "ports_per_device",
	                          (json_int_t)c->start.ports_per_device);
	/* A copy of the note: the body is the loop's, and freed with the request. */
	c->provenance =
	    json_pack("{s:s, s:I, s:o, s:o*, s:s*, s:o*}", "source", source, "runs", (json_int_t)n,
	              "facts", facts, "note", json_deep_copy(json_object_get(body, "provenance")),
	              "fabric", fabric, "collected", collected);
	collected = NULL;
	free(src);
	api_compute_first(req, calibration_fit, calibration_free, c);
	return;
fail:
	json_decref(collected);
	free(src);
	calibration_free(c);
}

/* The reply to a post of runs. */
static json_t *runs_added(struct api_req *req, uint32_t n, int64_t first, int64_t last,
                          uint32_t dropped, bool repeated)
{
	return json_pack("{s:I, s:I, s:I, s:I, s:I, s:b}", "added", (json_int_t)n, "first_id",
	                 (json_int_t)first, "last_id", (json_int_t)last, "dropped",
	                 (json_int_t)dropped, "total",
	                 (json_int_t)cost_run_count(req->env->store, NULL), "repeated", repeated);
}

void api_server_runs_post(struct api_req *req)
{
	static const char *const members[] = { "runs", "nccl_tests", "fabric", NULL };
	json_t *body = api_body_object(req);
	struct coll_params start;
	struct coll_run *runs = NULL;
	struct run_src *src = NULL;
	struct ofcd_error e = { 0 };
	struct cost_run_origin o = { .collector = req->params[0],
		                     .batch = api_query(req, "batch") };
	uint32_t n = 0, dropped = 0;
	int64_t first, last, again;

	if (api_agent_scope(req) < 0 || api_server_param(req) <= 0 || !body)
		return;
	if (o.batch && (!o.batch[0] || strlen(o.batch) > 128)) {
		api_error(req, OFCD_E_INVALID_FIELD, "batch", "batch must be 1 to 128 characters");
		return;
	}
	/* A batch sent again (its answer was lost): taken once, answered alike. */
	again = cost_run_batch(req->env->store, &o, &first, &last);
	if (again != 0) {
		if (again < 0)
			api_error(req, OFCD_E_STORE, NULL, "cannot read the collected runs");
		else
			api_reply(req, 200, runs_added(req, 0, first, last, 0, true));
		return;
	}
	if (api_check_members(req, body, NULL, members) < 0 || nccl_header(req, body) < 0 ||
	    read_fabric(req, body, true, &o.fabric, &o.ports_per_device) < 0)
		return;
	api_cost_params(req, &start);
	if (o.ports_per_device)
		start.ports_per_device = o.ports_per_device;
	runs = calloc(CALIBRATE_MAX_RUNS, sizeof(*runs));
	src = calloc(CALIBRATE_MAX_RUNS, sizeof(*src));
	if (!runs || !src) {
		api_error(req, OFCD_E_INTERNAL, NULL, "out of memory");
		goto out;
	}
	if (read_measured(req, body, runs, src, &n) < 0)
		goto out;
	if (!n) {
		api_error(req, OFCD_E_INVALID_FIELD, "runs", "runs or nccl_tests is required");
		goto out;
	}
	/* Stored only what a calibration can price: refused now, not at the fit. */
	if (check_runs(req, runs, src, n, &start) < 0)
		goto out;
	if (cost_run_add(req->env->store, runs, n, &o, &first, &dropped, &e) < 0) {
		api_fail(req, &e);
		goto out;
	}
	api_reply(req, 201, runs_added(req, n, first, first + n - 1, dropped, false));
out:
	free(runs);
	free(src);
}

void api_cost_runs_get(struct api_req *req)
{
	struct cost_run_filter f;
	uint64_t limit;
	json_t *runs;
	int64_t total;

	if (read_filter(req, NULL, NULL, &f) < 0 ||
	    api_query_uint(req, "limit", 1, COST_RUN_KEEP, COST_RUN_KEEP, &limit) < 0)
		return;
	runs = cost_run_list(req->env->store, &f, (uint32_t)limit);
	total = cost_run_count(req->env->store, NULL);
	if (!runs || total < 0) {
		json_decref(runs);
		api_error(req, OFCD_E_STORE, NULL, "cannot read the collected runs");
		return;
	}
	api_reply(req, 200, json_pack("{s:o, s:I}", "runs", runs, "total", (json_int_t)total));
}

void api_cost_runs_delete(struct api_req *req)
{
	struct cost_run_filter f;
	int64_t n;

	if (read_filter(req, NULL, NULL, &f) < 0)
		return;
	n = cost_run_delete(req->env->store, &f);
	if (n < 0) {
		api_error(req, OFCD_E_STORE, NULL, "cannot delete the collected runs");
		return;
	}
	api_reply(req, 200, json_pack("{s:I}", "deleted", (json_int_t)n));
}

void api_cost_params_get(struct api_req *req)
{
	struct store *s = req->env->store;
	struct coll_params p;
	char active[128];
	json_t *fit = json_null();

	if (cost_set_active_name(s, active, sizeof(active)) < 0) {
		api_error(req, OFCD_E_STORE, NULL, "cannot read the parameter sets");
		return;
	}
	api_cost_params(req, &p);
	if (active[0]) {
		json_t *set = cost_set_json(s, active, false);
		if (set) {
			fit = json_incref(json_object_get(set, "fit"));
			json_decref(set);
		}
	}
	api_reply(req, 200,
	          json_pack("{s:s?, s:o, s:o, s:o}", "active", active[0] ? active : NULL, "params",
	                    api_coll_params_json(&p), "fit", fit, "sets", cost_set_list(s)));
}

void api_cost_set_get(struct api_req *req)
{
	json_t *o = cost_set_json(req->env->store, req->params[0], true);

	if (!o) {
		api_error(req, OFCD_E_NOT_FOUND, "name", "no parameter set %s", req->params[0]);
		return;
	}
	api_reply(req, 200, o);
}

void api_cost_set_delete(struct api_req *req)
{
	struct ofcd_error e = { 0 };

	if (cost_set_remove(req->env->store, req->params[0], &e) < 0)
		api_fail(req, &e);
	else
		api_reply(req, 200, json_pack("{s:s}", "deleted", req->params[0]));
}

void api_cost_active_put(struct api_req *req)
{
	static const char *const members[] = { "name?", NULL };
	struct ofcd_error e = { 0 };
	json_t *body = api_body_object(req);
	const char *name = NULL;

	if (!body)
		return;
	if (!json_object_get(body, "name")) {
		api_error(req, OFCD_E_INVALID_FIELD, "name",
		          "name is required: a parameter set's, or null for none");
		return;
	}
	/* A null name is removed here: no set is active then. */
	if (api_check_members(req, body, NULL, members) < 0)
		return;
	if (api_get_name(req, body, NULL, "name", false, &name) < 0)
		return;
	if (cost_set_activate(req->env->store, name, &e) < 0) {
		api_fail(req, &e);
		return;
	}
	api_reply(req, 200, json_pack("{s:s?}", "active", name));
}
