/*
 * Collective schedules: generation plus checking, and the selector, timed on the planner
 * alone. Prints "name: value unit" lines.
 */
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#include "coll.h"

/* Run each case for at least this long; report the mean. */
#define MIN_NS 300000000.0

static double now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec * 1e9 + ts.tv_nsec;
}

static void gen_check(enum coll_algorithm a, uint32_t servers, uint64_t bytes)
{
	struct coll_schedule s;
	struct coll_error err = { 0 };

	if (coll_generate(COLL_ALLREDUCE, a, servers, 1, bytes, NULL, &s, &err) ||
	    coll_check(&s, &err)) {
		fprintf(stderr, "bench_coll: %s on %u servers: %s\n", coll_algorithm_name(a),
		        servers, err.reason);
		exit(1);
	}
	coll_schedule_free(&s);
}

static void bench_gen_check(const char *name, enum coll_algorithm a, uint32_t servers)
{
	double t0, t;
	unsigned long n = 0;

	gen_check(a, servers, 64ull << 20);
	t0 = now_ns();
	do {
		gen_check(a, servers, 64ull << 20);
		n++;
		t = now_ns() - t0;
	} while (t < MIN_NS);
	printf("%s: %.1f us\n", name, t / n / 1e3);
}

static void bench_select(const char *name, enum coll_collective c, uint32_t servers,
                         uint32_t devices, enum coll_sync sync)
{
	struct coll_selection sel;
	struct coll_params p;
	double t0, t;
	unsigned long n = 0;

	coll_params_default(&p);
	p.offload = true;
	p.aggregating_switch = true;
	p.sync = sync;
	t0 = now_ns();
	do {
		if (coll_select(c, 64ull << 20, servers, devices, &p, &sel, NULL)) {
			fprintf(stderr, "bench_coll: %s: selection failed\n", name);
			exit(1);
		}
		n++;
		t = now_ns() - t0;
	} while (t < MIN_NS);
	printf("%s: %.3f us\n", name, t / n / 1e3);
}

int main(void)
{
	bench_gen_check("coll_allreduce_ring_64_generate_check", COLL_ALG_RING, 64);
	bench_gen_check("coll_allreduce_cube400_8_generate_check", COLL_ALG_CUBE_400, 8);
	bench_gen_check("coll_allreduce_full_mesh_direct_64_generate_check",
	                COLL_ALG_FULL_MESH_DIRECT, 64);
	bench_select("coll_select_allreduce_64", COLL_ALLREDUCE, 64, 63, COLL_SYNC_BARRIER);
	bench_select("coll_select_alltoall_8x8", COLL_ALLTOALL, 8, 8, COLL_SYNC_BARRIER);
	bench_select("coll_select_alltoall_16x16", COLL_ALLTOALL, 16, 16, COLL_SYNC_BARRIER);
	bench_select("coll_select_alltoall_64x63", COLL_ALLTOALL, 64, 63, COLL_SYNC_BARRIER);
	/* Without the barrier: both algorithms replayed (8x8), plane-relayed only (16x16). */
	bench_select("coll_select_alltoall_8x8_pairwise", COLL_ALLTOALL, 8, 8, COLL_SYNC_PAIRWISE);
	bench_select("coll_select_alltoall_8x8_dataflow", COLL_ALLTOALL, 8, 8, COLL_SYNC_DATAFLOW);
	bench_select("coll_select_alltoall_16x16_pairwise", COLL_ALLTOALL, 16, 16,
	             COLL_SYNC_PAIRWISE);
	return 0;
}
