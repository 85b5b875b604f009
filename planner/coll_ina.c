/*
 * In-network aggregation (document 004): the window rule and a simulator of the protocol in
 * which the switch's aggregate of message i is the acknowledgement that releases i + W.
 */
#include "coll_internal.h"

#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

int coll_ina_check_window(uint32_t window, uint32_t switch_buffer, struct coll_error *err)
{
	if (!window) {
		coll_err_set(err, "window", "window must be at least 1 message");
		return -EINVAL;
	}
	if (!switch_buffer) {
		coll_err_set(err, "switch_buffer", "switch_buffer must be at least 1 message");
		return -EINVAL;
	}
	if (window > switch_buffer) {
		/* Otherwise a stalled message would be overwritten in the switch's buffer. */
		coll_err_set(err, "window",
		             "window W=%u exceeds switch_buffer B=%u (W must be <= B)", window,
		             switch_buffer);
		return -ENOBUFS;
	}
	return 0;
}

struct sim {
	uint32_t *next;  /* [N] next message each sender will send */
	uint32_t *count; /* [K] contributions the switch holds */
	double *acc;     /* [K] running aggregate */
	uint8_t *done;   /* [K] aggregate returned */
};

static void sim_free(struct sim *m)
{
	free(m->next);
	free(m->count);
	free(m->acc);
	free(m->done);
}

static void combine(enum coll_reduce_op op, double *acc, uint32_t have, double v)
{
	if (!have) {
		*acc = v;
		return;
	}
	switch (op) {
	case COLL_RED_MIN:
		*acc = fmin(*acc, v);
		break;
	case COLL_RED_MAX:
		*acc = fmax(*acc, v);
		break;
	default:
		*acc += v;
		break;
	}
}

static int sim_args(const struct coll_ina_sim *in, const struct coll_ina_result *res,
                    struct coll_error *err)
{
	if (!in || !res || !res->aggregates || !in->values) {
		coll_err_set(err, NULL, "simulator input or output arrays missing");
		return -EINVAL;
	}
	if (!in->senders || !in->messages) {
		coll_err_set(err, in->senders ? "messages" : "senders",
		             "need at least one sender and one message");
		return -EINVAL;
	}
	if ((uint64_t)in->senders * in->messages > SIZE_MAX / sizeof(double)) {
		coll_err_set(err, NULL, "%u senders x %u messages is too large", in->senders,
		             in->messages);
		return -EINVAL;
	}
	if ((unsigned)in->op > COLL_RED_MAX) {
		coll_err_set(err, "op", "unknown reduction %d", (int)in->op);
		return -EINVAL;
	}
	return coll_ina_check_window(in->window, in->switch_buffer, err);
}

int coll_ina_simulate(const struct coll_ina_sim *in, struct coll_ina_result *res,
                      struct coll_error *err)
{
	struct sim m = { 0 };
	uint32_t N, K, base = 0, inbuf = 0;
	int rc = sim_args(in, res, err);

	if (rc)
		return rc;
	N = in->senders;
	K = in->messages;
	m.next = calloc(N, sizeof(*m.next));
	m.count = calloc(K, sizeof(*m.count));
	m.acc = calloc(K, sizeof(*m.acc));
	m.done = calloc(K, sizeof(*m.done));
	if (!m.next || !m.count || !m.acc || !m.done) {
		sim_free(&m);
		coll_err_set(err, NULL, "out of memory");
		return -ENOMEM;
	}
	res->completed = res->steps = res->peak_buffer = res->max_outstanding = 0;
	for (uint32_t i = 0; i < K; i++)
		res->aggregates[i] = NAN;
	/*
	 * Every member receives the same aggregates at the same time, so all windows share one
	 * base: the lowest message not yet aggregated.
	 */
	for (;;) {
		int moved = 0;

		for (uint32_t s = 0; s < N; s++) {
			while (m.next[s] < K && m.next[s] - base < in->window) {
				uint32_t i = m.next[s]++;

				moved = 1;
				if (in->lost && in->lost[(size_t)s * K + i])
					continue;
				if (!m.count[i] && ++inbuf > res->peak_buffer)
					res->peak_buffer = inbuf;
				combine(in->op, &m.acc[i], m.count[i]++,
				        in->values[(size_t)s * K + i]);
			}
			if (m.next[s] - base > res->max_outstanding)
				res->max_outstanding = m.next[s] - base;
		}
		for (uint32_t i = base; i < K && i - base < in->window; i++) {
			if (m.done[i] || m.count[i] < N)
				continue;
			m.done[i] = 1;
			inbuf--;
			res->completed++;
			res->aggregates[i] = in->op == COLL_RED_MEAN ? m.acc[i] / N : m.acc[i];
			moved = 1;
		}
		while (base < K && m.done[base])
			base++;
		if (!moved)
			break;
		res->steps++;
	}
	res->stalled = res->completed < K;
	if (res->sent)
		memcpy(res->sent, m.next, N * sizeof(*m.next));
	sim_free(&m);
	return 0;
}
