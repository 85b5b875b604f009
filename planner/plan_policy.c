/*
 * Abstract full-interconnect policy: Formulas 1 and 3 of document 000 and the
 * link list of POST /v1/plan. Pure and reentrant.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "plan.h"
#include "plan_internal.h"

int plan_formula_resolve(uint32_t m, enum plan_formula f)
{
	switch (f) {
	case PLAN_FORMULA_AUTO:
		return m % 2 ? 1 : 3;
	case PLAN_FORMULA_1:
		return 1;
	case PLAN_FORMULA_3:
		return m % 2 ? -EINVAL : 3;
	}
	return -EINVAL;
}

uint32_t plan_planes(uint32_t m, enum plan_formula f)
{
	if (m <= 1)
		return 0;
	if (m % 2 || f == PLAN_FORMULA_1)
		return m;
	return m - 1;
}

uint32_t plan_min_devices(uint32_t m, uint32_t p, enum plan_formula f)
{
	uint32_t r = plan_planes(m, f);

	if (!p)
		return UINT32_MAX;
	return r / p + (r % p != 0);
}

uint32_t plan_formula1_dst(uint32_t m, uint32_t s, uint32_t d)
{
	return (uint32_t)(((uint64_t)d % m + m - s) % m);
}

uint32_t plan_formula3_dst(uint32_t m, uint32_t s, uint32_t d)
{
	uint32_t n = m - 1;
	uint32_t t;

	if (s == n)
		return d % 2 ? (d + 1) / 2 : ((d + m) / 2) % n;
	t = (d + 1 + n - s) % n;
	return t == s ? n : t;
}

uint32_t plan_dst(uint32_t m, int formula, uint32_t s, uint32_t d)
{
	return formula == 3 ? plan_formula3_dst(m, s, d) : plan_formula1_dst(m, s, d);
}

int plan_policy_compute(uint32_t m, uint32_t n, uint32_t p, enum plan_formula f,
                        struct plan_policy *out)
{
	struct plan_link *links = NULL;
	size_t npairs, i = 0;
	int formula;

	if (!out || m < 1 || m > PLAN_MAX_SERVERS || n < 1 || n > PLAN_MAX_DEVICES || p < 1 ||
	    p > PLAN_MAX_PORTS)
		return -EINVAL;
	formula = plan_formula_resolve(m, f);
	if (formula < 0)
		return formula;

	memset(out, 0, sizeof(*out));
	out->servers = m;
	out->devices = n;
	out->ports_per_device = p;
	out->formula = formula;
	out->planes = plan_planes(m, (enum plan_formula)formula);
	out->min_devices = plan_min_devices(m, p, (enum plan_formula)formula);
	if (out->min_devices > n)
		return -EDOM;

	npairs = (size_t)m * (m - 1) / 2;
	if (npairs) {
		links = malloc(npairs * sizeof(*links));
		if (!links)
			return -ENOMEM;
	}
	for (uint32_t k = 0; k < out->planes; k++) {
		uint32_t dev = k / p, port = k % p;

		for (uint32_t s = 0; s < m; s++) {
			uint32_t t = plan_dst(m, formula, s, k);

			/* each link is seen from both ends: emit it from the lower one */
			if (t <= s || i == npairs)
				continue;
			links[i++] = (struct plan_link){
				.plane = k,
				.a = { .server = s, .device = dev, .port = port },
				.b = { .server = t, .device = dev, .port = port },
			};
		}
	}
	out->links = links;
	out->nlinks = i;
	return 0;
}

void plan_policy_free(struct plan_policy *pol)
{
	if (!pol)
		return;
	free(pol->links);
	memset(pol, 0, sizeof(*pol));
}
