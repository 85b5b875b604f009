/*
 * Cost-model parameters (defaults, ranges, access by name) and request
 * validation. One table drives all of them so that a new parameter is added
 * in one place.
 */
#include <errno.h>
#include <stddef.h>
#include <string.h>

#include "cost.h"

#define ARRAY_SIZE(a) (sizeof(a) / sizeof((a)[0]))

struct param_desc {
	const char *name; /* key in [cost] and in a request's "params" */
	const char *path; /* the field's name in a request */
	size_t offset;
	double min;
	double max;
};

/* One parameter per line, which clang-format would pack. */
/* clang-format off */
#define PARAM(field, lo, hi) \
	{ #field, "params." #field, offsetof(struct cost_params, field), lo, hi }

static const struct param_desc params[] = {
	PARAM(inter_gbps, COST_GBPS_MIN, COST_GBPS_MAX),
	PARAM(inter_latency_us, 0, COST_DELAY_MAX),
	PARAM(intra_gbps, COST_GBPS_MIN, COST_GBPS_MAX),
	PARAM(intra_latency_us, 0, COST_DELAY_MAX),
	PARAM(bridge_gbps, COST_GBPS_MIN, COST_GBPS_MAX),
	PARAM(p2p_read_us, 0, COST_DELAY_MAX),
	PARAM(p2p_write_us, 0, COST_DELAY_MAX),
};
/* clang-format on */

_Static_assert(ARRAY_SIZE(params) == COST_PARAM_COUNT, "COST_PARAM_COUNT is stale");
_Static_assert(sizeof(struct cost_params) == COST_PARAM_COUNT * sizeof(double),
               "a cost_params field is missing from the table");

static double *field(struct cost_params *p, unsigned i)
{
	return (double *)((char *)p + params[i].offset);
}

static double cfield(const struct cost_params *p, unsigned i)
{
	return *(const double *)((const char *)p + params[i].offset);
}

static int find(const char *name)
{
	unsigned i;

	if (!name)
		return -EINVAL;
	for (i = 0; i < ARRAY_SIZE(params); i++)
		if (strcmp(params[i].name, name) == 0)
			return (int)i;
	return -EINVAL;
}

/* Index of the first field out of range, or -1. NaN fails both comparisons. */
static int first_bad(const struct cost_params *p)
{
	unsigned i;

	for (i = 0; i < ARRAY_SIZE(params); i++) {
		double v = cfield(p, i);

		if (!(v >= params[i].min && v <= params[i].max))
			return (int)i;
	}
	return -1;
}

struct cost_params cost_params_default(void)
{
	return (struct cost_params){
		.inter_gbps = COST_DEFAULT_INTER_GBPS,
		.inter_latency_us = COST_DEFAULT_INTER_LATENCY_US,
		.intra_gbps = COST_DEFAULT_INTRA_GBPS,
		.intra_latency_us = COST_DEFAULT_INTRA_LATENCY_US,
		.bridge_gbps = COST_DEFAULT_BRIDGE_GBPS,
		.p2p_read_us = COST_DEFAULT_P2P_READ_US,
		.p2p_write_us = COST_DEFAULT_P2P_WRITE_US,
	};
}

int cost_params_validate(const struct cost_params *p, const char **bad_field)
{
	int bad = first_bad(p);

	if (bad < 0)
		return 0;
	if (bad_field)
		*bad_field = params[bad].name;
	return -EINVAL;
}

const char *cost_params_name(unsigned i)
{
	return i < ARRAY_SIZE(params) ? params[i].name : NULL;
}

int cost_params_set(struct cost_params *p, const char *name, double value)
{
	int i = find(name);

	if (i < 0)
		return i;
	*field(p, (unsigned)i) = value;
	return 0;
}

int cost_params_get(const struct cost_params *p, const char *name, double *value)
{
	int i = find(name);

	if (i < 0)
		return i;
	*value = cfield(p, (unsigned)i);
	return 0;
}

/* The field names of each side, so that a bad one is reported by its path. */
struct side_fields {
	const char *devices;
	const char *intra;
	const char *circuit_device;
};

static const struct side_fields source_fields = { "source.devices", "source.intra",
	                                          "source.circuit_device" };
static const struct side_fields target_fields = { "target.devices", "target.intra",
	                                          "target.circuit_device" };

static const char *check_server(const struct cost_server *s, const struct side_fields *f)
{
	if (s->devices < 1 || s->devices > COST_MAX_DEVICES)
		return f->devices;
	if ((unsigned)s->intra > COST_INTRA_TWO_GROUPS)
		return f->intra;
	/* Two equal groups: devices 0..N/2-1 and N/2..N-1. */
	if (s->intra == COST_INTRA_TWO_GROUPS && s->devices % 2)
		return f->devices;
	if (s->circuit_device >= s->devices)
		return f->circuit_device;
	return NULL;
}

static const char *check_request(const struct cost_request *req)
{
	const char *bad;
	int i;

	if ((unsigned)req->aggregation > COST_AGG_NONE)
		return "aggregation";
	if (!(req->bytes >= 0 && req->bytes <= COST_MAX_BYTES))
		return "bytes";
	if ((unsigned)req->policy > COST_POLICY_PATENT)
		return "policy";
	bad = check_server(&req->source, &source_fields);
	if (bad)
		return bad;
	if (!req->same_server) {
		bad = check_server(&req->target, &target_fields);
		if (bad)
			return bad;
	}
	i = first_bad(&req->params);
	return i < 0 ? NULL : params[i].path;
}

int cost_request_validate(const struct cost_request *req, const char **bad_field)
{
	const char *bad = check_request(req);

	if (!bad)
		return 0;
	if (bad_field)
		*bad_field = bad;
	return -EINVAL;
}
