/*
 * Prices of the HyperX and torus algorithms: each dimension's phase in closed form, summed.
 * They equal coll_schedule_cost() of the generated schedules when the chunks divide evenly.
 * Derivations: docs/cost-model.md, "Collectives over HyperX and torus fabrics".
 */
#include "coll_internal.h"

/* Per-byte times in µs: 1 Gbit/s moves 125 bytes per µs. */
struct shape_rates {
	double a, b, g;
};

/*
 * HyperX: dimension i works on n_i = n / (k_0 ... k_{i-1}) bytes (allreduce, broadcast) or
 * gathers blocks of n / M grown to n k_0 ... k_{i-1} / M (allgather). One round per phase,
 * every line peer at once: alpha plus the one message per circuit.
 */
static void price_hyperx(enum coll_collective c, const struct coll_grid *g,
                         const struct shape_rates *r, double n, struct coll_estimate *e)
{
	double data = n, grown = n / g->M, before = 1;

	for (uint32_t i = 0; i < g->dims; i++) {
		double k = g->k[i], msg = data / k;

		if (g->k[i] < 2)
			continue;
		switch (c) {
		case COLL_ALLGATHER:
			e->rounds += 1;
			e->predicted_us += r->a + grown * r->b;
			e->inter_messages += (uint64_t)g->M * (g->k[i] - 1);
			grown *= k;
			break;
		case COLL_ALLTOALL: /* n is what a server sends; M / k blocks cross per peer */
			e->rounds += 1;
			e->predicted_us += r->a + n / k * r->b;
			e->inter_messages += (uint64_t)g->M * (g->k[i] - 1);
			break;
		default:
			/* Reduce-scatter (or scatter) and its allgather, each alpha + msg beta. */
			e->rounds += 2;
			e->predicted_us += 2 * (r->a + msg * r->b);
			if (c == COLL_ALLREDUCE) {
				e->predicted_us += (k - 1) * msg * r->g;
				e->inter_messages += 2ull * g->M * (g->k[i] - 1);
			} else {
				/* Only the servers holding the root's data scatter. */
				e->inter_messages += ((uint64_t)before + g->M) * (g->k[i] - 1);
			}
			data = msg;
			break;
		}
		before *= k;
	}
}

/*
 * Torus: each dimension's rings, both ways when k >= 3 (half the data each), one way over
 * the single circuit when k = 2. A ring step moves one group of a phase's data per direction.
 */
static void price_torus(enum coll_collective c, const struct coll_grid *g,
                        const struct shape_rates *r, double n, struct coll_estimate *e)
{
	double data = n, grown = n / g->M;
	uint64_t before = 1;

	for (uint32_t i = 0; i < g->dims; i++) {
		double k = g->k[i], ways = g->k[i] >= 3 ? 2 : 1;
		uint32_t steps = g->k[i] - 1;

		if (g->k[i] < 2)
			continue;
		switch (c) {
		case COLL_ALLGATHER:
			e->rounds += steps;
			e->predicted_us += steps * (r->a + grown / ways * r->b);
			e->inter_messages += (uint64_t)steps * g->M * (uint64_t)ways;
			grown *= k;
			break;
		case COLL_ALLTOALL: {
			/* Step t carries cw - t + 1 groups of n / k the longer way round. */
			double cw = coll_torus_cw(g->k[i]);

			e->rounds += coll_torus_cw(g->k[i]);
			e->predicted_us += cw * r->a + cw * (cw + 1) / 2 * (n / k) * r->b;
			e->inter_messages += (uint64_t)g->M * steps;
			break;
		}
		default:
			/*
			 * Allreduce: reduce-scatter and allgather rings. Broadcast: the
			 * same rounds and sizes, a pipelined scatter from the @before
			 * rings that hold the root's data instead of the reduce-scatter.
			 */
			e->rounds += 2 * steps;
			e->predicted_us += 2 * steps * (r->a + data / k / ways * r->b);
			if (c == COLL_ALLREDUCE) {
				e->predicted_us += steps * (data / k) * r->g;
				e->inter_messages += 2ull * steps * g->M * (uint64_t)ways;
			} else {
				e->inter_messages +=
				    ((uint64_t)steps * g->M + before * g->k[i] * steps / 2) *
				    (uint64_t)ways;
			}
			data /= k;
			break;
		}
		before *= g->k[i];
	}
}

void coll_price_shape(enum coll_collective c, enum coll_algorithm a, const struct coll_params *p,
                      double n, uint32_t servers, uint32_t devices, struct coll_estimate *e)
{
	struct shape_rates r = {
		.a = p->alpha_us,
		.b = coll_beta(p),
		.g = p->gamma_ns_per_byte / 1000.0,
	};
	struct coll_grid g;

	coll_grid_of(&p->shape, servers, &g);
	/* All-to-all: a server carries its devices' buffers (docs/cost-model.md). */
	if (c == COLL_ALLTOALL)
		n *= devices;
	if (a == COLL_ALG_HYPERX_DIM || a == COLL_ALG_HYPERX_A2A)
		price_hyperx(c, &g, &r, n, e);
	else
		price_torus(c, &g, &r, n, e);
	e->circuits = coll_shape_degree(&p->shape, servers);
}
