/*
 * Traffic profiles: the price of a job's collectives on each candidate fabric shape, so that
 * the planner can choose a shape and say why. Derivations: docs/cost-model.md, "Collectives
 * over HyperX and torus fabrics".
 */
#include "coll_internal.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>

static const char *const traffic_names[COLL_TRAFFIC__COUNT] = {
	[COLL_TRAFFIC_ALLREDUCE] = "allreduce",
	[COLL_TRAFFIC_ALLTOALL] = "alltoall",
	[COLL_TRAFFIC_MIXED] = "mixed",
};

const char *coll_traffic_name(enum coll_traffic t)
{
	return (unsigned)t < COLL_TRAFFIC__COUNT ? traffic_names[t] : NULL;
}

int coll_traffic_from_name(const char *name, enum coll_traffic *t)
{
	int i = coll_name_index(traffic_names, COLL_TRAFFIC__COUNT, name);

	if (i < 0)
		return i;
	*t = (enum coll_traffic)i;
	return 0;
}

/* The best algorithm for @c on the shape of @p: 0, -ENOENT (reason in @out) or an error. */
static int best_of(enum coll_collective c, uint32_t servers, uint32_t devices,
                   const struct coll_params *p, enum coll_algorithm *alg, double *us,
                   struct coll_shape_price *out, struct coll_error *err)
{
	struct coll_selection sel;
	struct coll_error why = { 0 };
	int rc = coll_select(c, COLL_PROFILE_BYTES, servers, devices, p, &sel, &why);

	if (rc == -ENOENT) {
		snprintf(out->reason, sizeof(out->reason), "no %s algorithm fits: %.150s",
		         coll_collective_name(c), why.reason);
		return rc;
	}
	if (rc) {
		if (err)
			*err = why;
		return rc;
	}
	*alg = sel.candidates[sel.chosen].algorithm;
	*us = sel.candidates[sel.chosen].predicted_us;
	return 0;
}

int coll_profile_shapes(enum coll_traffic t, const struct coll_shape *shapes, uint32_t nshapes,
                        uint32_t servers, uint32_t devices, const struct coll_params *p,
                        struct coll_shape_price *out, int *best, struct coll_error *err)
{
	struct coll_params q;
	int rc, chosen = -1;

	if (best)
		*best = -1;
	if ((unsigned)t >= COLL_TRAFFIC__COUNT || !shapes || !out || !nshapes) {
		coll_err_set(err, (unsigned)t >= COLL_TRAFFIC__COUNT ? "traffic" : NULL,
		             "a traffic profile and at least one shape are needed");
		return -EINVAL;
	}
	if (p)
		q = *p;
	else
		coll_params_default(&q);
	for (uint32_t i = 0; i < nshapes; i++) {
		struct coll_shape_price *o = &out[i];

		memset(o, 0, sizeof(*o));
		o->allreduce = o->alltoall = COLL_ALGORITHM__COUNT;
		q.shape = shapes[i];
		rc = coll_shape_validate(&q.shape, servers, err);
		if (rc)
			return rc;
		rc = 0;
		if (t != COLL_TRAFFIC_ALLTOALL)
			rc = best_of(COLL_ALLREDUCE, servers, devices, &q, &o->allreduce,
			             &o->allreduce_us, o, err);
		if (!rc && t != COLL_TRAFFIC_ALLREDUCE)
			rc = best_of(COLL_ALLTOALL, servers, devices, &q, &o->alltoall,
			             &o->alltoall_us, o, err);
		if (rc == -ENOENT)
			continue;
		if (rc)
			return rc;
		o->eligible = true;
		o->predicted_us = o->allreduce_us + o->alltoall_us;
		if (chosen < 0 || o->predicted_us < out[chosen].predicted_us)
			chosen = (int)i;
	}
	if (best)
		*best = chosen;
	if (chosen < 0) {
		coll_err_set(err, NULL, "no shape has an algorithm for every collective of %s",
		             traffic_names[t]);
		return -ENOENT;
	}
	return 0;
}
