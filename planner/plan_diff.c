#include "plan_diff.h"

#include <errno.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

int plan_xc_cmp(const void *x, const void *y)
{
	const struct plan_xc *p = x, *q = y;
	if (p->a != q->a)
		return p->a < q->a ? -1 : 1;
	if (p->b != q->b)
		return p->b < q->b ? -1 : 1;
	return 0;
}

size_t plan_xc_sort_unique(struct plan_xc *v, size_t n)
{
	bool in_order = true;
	for (size_t i = 1; i < n && in_order; i++)
		in_order = plan_xc_cmp(&v[i - 1], &v[i]) < 0;
	if (in_order)
		return n;
	qsort(v, n, sizeof(*v), plan_xc_cmp);
	size_t k = 0;
	for (size_t i = 0; i < n; i++)
		if (k == 0 || plan_xc_cmp(&v[k - 1], &v[i]) != 0)
			v[k++] = v[i];
	return k;
}

static int sorted(const struct plan_xc *v, size_t n)
{
	for (size_t i = 0; i < n; i++) {
		if (v[i].a >= v[i].b)
			return 0;
		if (i && plan_xc_cmp(&v[i - 1], &v[i]) >= 0)
			return 0;
	}
	return 1;
}

void plan_batch_free(struct plan_batch *b)
{
	free(b->del);
	free(b->add);
	memset(b, 0, sizeof(*b));
}

int plan_diff(const struct plan_xc *desired, size_t ndesired, const struct plan_xc *actual,
              size_t nactual, size_t max_ops, struct plan_batch *out)
{
	memset(out, 0, sizeof(*out));
	if (!sorted(desired, ndesired) || !sorted(actual, nactual))
		return -EINVAL;
	out->del = malloc((nactual ? nactual : 1) * sizeof(*out->del));
	out->add = malloc((ndesired ? ndesired : 1) * sizeof(*out->add));
	if (!out->del || !out->add) {
		plan_batch_free(out);
		return -ENOMEM;
	}
	/* One merge of the two sorted lists gives both differences. */
	size_t i = 0, j = 0;
	while (i < ndesired || j < nactual) {
		int c = i == ndesired  ? 1
		        : j == nactual ? -1
		                       : plan_xc_cmp(&desired[i], &actual[j]);
		if (c < 0)
			out->add[out->nadd++] = desired[i++];
		else if (c > 0)
			out->del[out->ndel++] = actual[j++];
		else
			i++, j++;
	}
	if (max_ops == 0 || out->ndel + out->nadd <= max_ops)
		return 0;
	if (out->ndel >= max_ops) {
		out->deferred = out->ndel - max_ops + out->nadd;
		out->ndel = max_ops;
		out->nadd = 0;
	} else {
		out->deferred = out->ndel + out->nadd - max_ops;
		out->nadd = max_ops - out->ndel;
	}
	return 0;
}
