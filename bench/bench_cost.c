/*
 * Planner-level selection rate of the cost model (issue 5): cost_select()
 * calls per second over a fixed mix of requests covering both policies, every
 * aggregation, both in-server interconnects, P2P or not, one or two servers,
 * 1 to 16 devices and 1 KiB to 4 GiB per device. Runs for about BENCH_SECONDS
 * on one thread. Target: >= 1,000,000 selections per second.
 *
 * Usage: bench_cost [seconds]
 */
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#include "cost.h"

#define BENCH_SECONDS 4.0
#define TARGET_RATE   1000000.0
#define MIX           4096 /* distinct requests, cycled */
#define BATCH         (1u << 16)

static double now(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec + ts.tv_nsec * 1e-9;
}

/* Deterministic, so that every run prices the same mix. */
static unsigned long long lcg(unsigned long long *s)
{
	*s = *s * 6364136223846793005ull + 1442695040888963407ull;
	return *s >> 33;
}

static struct cost_server server(unsigned long long *s, unsigned i)
{
	struct cost_server srv = { 0 };

	srv.intra = (i / 3) % 2 ? COST_INTRA_TWO_GROUPS : COST_INTRA_FULL_MESH;
	srv.devices = srv.intra == COST_INTRA_TWO_GROUPS ? 2 * (1 + lcg(s) % 8) : 1 + lcg(s) % 16;
	srv.circuit_device = lcg(s) % srv.devices;
	srv.p2p = lcg(s) % 2;
	return srv;
}

static void build_mix(struct cost_request *mix)
{
	unsigned long long s = 42;
	unsigned i;

	for (i = 0; i < MIX; i++) {
		struct cost_request *r = &mix[i];

		r->aggregation = (enum cost_aggregation)(i % 3);
		r->policy = (i / 6) % 2 ? COST_POLICY_PATENT : COST_POLICY_MIN_COST;
		r->bytes = (double)(1024ull << (lcg(&s) % 23));
		r->source = server(&s, i);
		r->target = server(&s, i + 1);
		r->same_server = i % 16 == 0;
		r->params = cost_params_default();
		if (i % 4 == 0)
			r->params.bridge_gbps = 100.0 * (1 + lcg(&s) % 64);
	}
}

int main(int argc, char **argv)
{
	static struct cost_request mix[MIX];
	struct cost_selection sel;
	unsigned long long n = 0, per_method[COST_METHOD_COUNT] = { 0 };
	double seconds = argc > 1 ? atof(argv[1]) : BENCH_SECONDS;
	double t0, t1, checksum = 0, rate;
	unsigned i, m;

	if (!(seconds > 0)) {
		fprintf(stderr, "usage: %s [seconds > 0]\n", argv[0]);
		return 2;
	}
	build_mix(mix);
	for (i = 0; i < MIX; i++) {
		const char *bad = NULL;

		if (cost_select(&mix[i], &sel, &bad)) {
			fprintf(stderr, "bench_cost: request %u rejected: %s\n", i, bad);
			return 1;
		}
		per_method[sel.method]++;
	}

	t0 = now();
	do {
		for (i = 0; i < BATCH; i++) {
			cost_select(&mix[i % MIX], &sel, NULL);
			checksum += sel.predicted_us;
		}
		n += BATCH;
		t1 = now();
	} while (t1 - t0 < seconds);

	rate = n / (t1 - t0);
	printf("cost_select: %.0f selections/s (target >= %.0f: %s)\n", rate, TARGET_RATE,
	       rate >= TARGET_RATE ? "met" : "NOT met");
	printf("cost_select: %llu selections in %.2f s, %.1f ns each, mix of %u requests:", n,
	       t1 - t0, 1e9 * (t1 - t0) / n, MIX);
	for (m = 0; m < COST_METHOD_COUNT; m++)
		printf(" %s %llu", cost_method_name((enum cost_method)m), per_method[m]);
	/* Printed so that the compiler cannot drop the work. */
	printf(" (checksum %.6g)\n", checksum);
	return 0;
}
