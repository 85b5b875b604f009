/*
 * The planner's selection and schedules on a HyperX or torus fabric, as JSON, for the fidelity
 * test of fabric shapes (tests/fidelity/fidelity_shapes.py) while the daemon serves full meshes
 * only. The schedule is printed in the format of GET /v1/fabrics/{name}/schedule (servers named
 * s0, s1, ...; one device per server, every circuit ending on device 0), the selection in that
 * of POST /v1/collective/select (its candidates).
 *
 *   shape_schedule select COLLECTIVE BYTES TOPOLOGY K0xK1x...
 *   shape_schedule schedule COLLECTIVE ALGORITHM BYTES TOPOLOGY K0xK1x...
 *
 * TOPOLOGY is full-mesh, hyperx or torus; with full-mesh the dimensions give only the number of
 * servers. Default parameters (coll_params_default()), one device per server. Exit 0 and the
 * JSON on stdout, or 1 and a reason on stderr.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "coll.h"

static int parse_shape(const char *topo, const char *dims, struct coll_params *p, uint32_t *servers)
{
	const char *s = dims;
	uint32_t m = 1;

	if (coll_topology_from_name(topo, &p->shape.topology) < 0)
		return -EINVAL;
	p->shape.dims = 0;
	while (*s) {
		char *end;
		unsigned long k = strtoul(s, &end, 10);

		if (end == s || !k || k > COLL_MAX_SERVERS || p->shape.dims == COLL_MAX_DIMS)
			return -EINVAL;
		p->shape.k[p->shape.dims++] = (uint32_t)k;
		m *= (uint32_t)k;
		if (m > COLL_MAX_SERVERS)
			return -EINVAL;
		s = *end == 'x' ? end + 1 : end;
		if (*end && *end != 'x')
			return -EINVAL;
	}
	*servers = m;
	return p->shape.dims ? 0 : -EINVAL;
}

/* A C string as a JSON string (the reasons are ASCII without control characters). */
static void json_str(const char *s)
{
	putchar('"');
	for (; *s; s++) {
		if (*s == '"' || *s == '\\')
			putchar('\\');
		putchar(*s);
	}
	putchar('"');
}

static int do_select(enum coll_collective c, uint64_t bytes, uint32_t M,
                     const struct coll_params *p)
{
	struct coll_selection sel;
	struct coll_error err = { 0 };
	int rc = coll_select(c, bytes, M, 1, p, &sel, &err);

	if (rc && rc != -ENOENT) {
		fprintf(stderr, "shape_schedule: %s\n", err.reason);
		return 1;
	}
	printf("{\"collective\": \"%s\", \"bytes\": %" PRIu64 ", \"servers\": %u, \"algorithm\": ",
	       coll_collective_name(c), bytes, M);
	if (sel.chosen >= 0)
		json_str(sel.candidates[sel.chosen].name);
	else
		printf("null");
	printf(", \"params\": {\"alpha_us\": %.17g, \"link_gbps\": %.17g, \"intra_alpha_us\": "
	       "%.17g, \"intra_gbps\": %.17g, \"gamma_ns_per_byte\": %.17g}, \"candidates\": [",
	       p->alpha_us, p->link_gbps, p->intra_alpha_us, p->intra_gbps, p->gamma_ns_per_byte);
	for (uint32_t i = 0; i < sel.ncandidates; i++) {
		const struct coll_candidate *cd = &sel.candidates[i];

		printf("%s{\"algorithm\": ", i ? ", " : "");
		json_str(cd->name);
		printf(", \"eligible\": %s, \"scheduled\": %s, \"reason\": ",
		       cd->eligible ? "true" : "false", cd->scheduled ? "true" : "false");
		json_str(cd->reason);
		if (cd->eligible)
			printf(", \"rounds\": %u, \"predicted_us\": %.17g, \"circuits\": %u}",
			       cd->rounds, cd->predicted_us, cd->circuits);
		else
			printf(", \"rounds\": null, \"predicted_us\": null, \"circuits\": null}");
	}
	printf("]}\n");
	return 0;
}

static void print_schedule(const struct coll_schedule *s, double us,
                           const struct coll_schedule_stats *st)
{
	int per_device = s->collective == COLL_ALLTOALL;

	printf("{\"collective\": \"%s\", \"algorithm\": \"%s\", \"bytes\": %" PRIu64
	       ", \"servers\": [",
	       coll_collective_name(s->collective),
	       coll_algorithm_name((enum coll_algorithm)s->algorithm), s->bytes);
	for (uint32_t i = 0; i < s->servers; i++)
		printf("%s\"s%u\"", i ? ", " : "", i);
	printf("], \"devices\": %u, \"predicted_us\": %.17g, \"stats\": {\"rounds\": %u, "
	       "\"transfers\": %u, \"inter_messages\": %" PRIu64 ", \"intra_messages\": %" PRIu64
	       ", \"max_degree\": %u, \"max_circuit_load\": %u, \"bytes_sent\": %" PRIu64
	       "}, \"check\": {\"valid\": true}, \"chunks\": [",
	       s->devices, us, st->rounds, st->transfers, st->inter_messages, st->intra_messages,
	       st->max_degree, st->max_circuit_load, st->bytes_sent);
	for (uint32_t i = 0; i < s->nchunks; i++) {
		const struct coll_chunk *ch = &s->chunks[i];

		printf("%s{\"origin\": ", i ? ", " : "");
		ch->origin == COLL_EVERY ? printf("null") : printf("\"s%u\"", ch->origin);
		printf(", \"dest\": ");
		ch->dest == COLL_EVERY ? printf("null") : printf("\"s%u\"", ch->dest);
		printf(", \"bytes\": %" PRIu64 "}", ch->bytes);
	}
	printf("], \"rounds\": [");
	for (uint32_t r = 0; r < s->nrounds; r++) {
		printf("%s{\"round\": %u, \"transfers\": [", r ? ", " : "", r);
		for (uint32_t i = 0; i < s->rounds[r].count; i++) {
			const struct coll_transfer *t = coll_round_transfer(s, r, i);
			const uint32_t *refs = coll_transfer_chunks(s, t);

			printf("%s{\"src\": \"s%u\", \"dst\": \"s%u\", \"op\": \"%s\", \"bytes\": "
			       "%" PRIu64 ", \"chunks\": [",
			       i ? ", " : "", t->src, t->dst,
			       t->op == COLL_OP_REDUCE ? "reduce" : "copy", t->bytes);
			for (uint32_t k = 0; k < t->nchunks; k++)
				printf("%s%u", k ? ", " : "", refs[k]);
			/* One device per server: every circuit ends on device 0 of both. */
			printf(
			    "], \"circuit\": {\"ocs\": \"none\", \"plane\": 0, \"src_device\": 0, "
			    "\"src_port\": 0, \"src_ocs_port\": 0, \"dst_device\": 0, "
			    "\"dst_port\": 0, \"dst_ocs_port\": 0}");
			if (per_device)
				printf(", \"src_device\": 0, \"dst_device\": 0");
			printf("}");
		}
		printf("]}");
	}
	printf("]}\n");
}

static int do_schedule(enum coll_collective c, enum coll_algorithm a, uint64_t bytes, uint32_t M,
                       const struct coll_params *p)
{
	struct coll_schedule s;
	struct coll_schedule_stats st;
	struct coll_error err = { 0 };
	double us;
	int rc = coll_generate(c, a, M, 1, bytes, p, &s, &err);

	if (!rc && (rc = coll_check(&s, &err)) < 0)
		fprintf(stderr, "shape_schedule: the checker refuses the schedule: ");
	if (rc) {
		fprintf(stderr, "shape_schedule: %s\n", err.reason);
		coll_schedule_free(&s);
		return 1;
	}
	if (coll_schedule_stats(&s, &st) || coll_schedule_cost(&s, p, &us)) {
		fprintf(stderr, "shape_schedule: cannot measure the schedule\n");
		coll_schedule_free(&s);
		return 1;
	}
	print_schedule(&s, us, &st);
	coll_schedule_free(&s);
	return 0;
}

static int usage(void)
{
	fprintf(stderr, "usage: shape_schedule select COLLECTIVE BYTES TOPOLOGY K0xK1x...\n"
	                "       shape_schedule schedule COLLECTIVE ALGORITHM BYTES TOPOLOGY "
	                "K0xK1x...\n");
	return 1;
}

int main(int argc, char **argv)
{
	struct coll_params p;
	enum coll_collective c;
	enum coll_algorithm a = COLL_ALG_RING;
	int sched = argc == 7 && !strcmp(argv[1], "schedule");
	uint32_t M;
	char *end;
	uint64_t bytes;

	if (!sched && !(argc == 6 && !strcmp(argv[1], "select")))
		return usage();
	coll_params_default(&p);
	if (coll_collective_from_name(argv[2], &c) < 0 ||
	    (sched && coll_algorithm_from_name(argv[3], &a) < 0))
		return usage();
	bytes = strtoull(argv[3 + sched], &end, 10);
	if (*end || parse_shape(argv[4 + sched], argv[5 + sched], &p, &M) < 0)
		return usage();
	if (p.shape.topology == COLL_TOPO_FULL_MESH)
		memset(&p.shape, 0, sizeof(p.shape));
	return sched ? do_schedule(c, a, bytes, M, &p) : do_select(c, bytes, M, &p);
}
