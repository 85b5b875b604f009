/*
 * Planner unit tests: the spec's test vectors (document 000, FIG. 10-12),
 * property tests over M = 1..65 and P in {1, 2, 4, 8}, cabled planning on a
 * plane-per-ocs cabling, least-disruption re-plans on failure and recovery, and
 * the verifiers' rejection of broken plans.
 */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "plan.h"

static const uint32_t test_ps[] = { 1, 2, 4, 8 };
static const uint32_t test_ks[] = { 1, 2, 4 };

#define ARRAY_LEN(a) (sizeof(a) / sizeof((a)[0]))

/* A fabric's servers with plane-per-ocs cabling: slot k on OCS k mod K. */
struct cluster {
	uint32_t m;
	struct plan_server *srv;
	struct plan_port *ports;
};

static void cluster_init(struct cluster *cl, uint32_t m, uint32_t n, uint32_t p, uint32_t k)
{
	uint32_t slots = n * p;
	uint32_t *next = calloc(k, sizeof(*next));

	assert_non_null(next);
	cl->m = m;
	cl->srv = calloc(m, sizeof(*cl->srv));
	cl->ports = calloc((size_t)m * slots + 1, sizeof(*cl->ports));
	assert_non_null(cl->srv);
	assert_non_null(cl->ports);
	/* OCS ports handed out in server order, numbered from 1 as on real units */
	for (uint32_t i = 0; i < m; i++) {
		struct plan_port *ports = cl->ports + (size_t)i * slots;

		for (uint32_t s = 0; s < slots; s++) {
			ports[s].ocs = (int32_t)(s % k);
			ports[s].ocs_port = ++next[s % k];
			ports[s].healthy = true;
		}
		cl->srv[i] =
		    (struct plan_server){ .devices = n, .ports_per_device = p, .ports = ports };
	}
	free(next);
}

static void cluster_free(struct cluster *cl)
{
	free(cl->srv);
	free(cl->ports);
}

static struct plan_port *cluster_port(struct cluster *cl, uint32_t server, uint32_t slot)
{
	return (struct plan_port *)&cl->srv[server].ports[slot];
}

static void set_device(struct cluster *cl, uint32_t server, uint32_t device, bool healthy)
{
	uint32_t p = cl->srv[server].ports_per_device;

	for (uint32_t port = 0; port < p; port++)
		cluster_port(cl, server, device * p + port)->healthy = healthy;
}

static void assert_verified(const struct cluster *cl, const struct plan_fabric *pl)
{
	char why[256];
	int ret = plan_verify(cl->srv, cl->m, pl, why, sizeof(why));

	if (ret)
		fail_msg("plan_verify: %d: %s", ret, why);
	assert_string_equal(why, "");
}

static void assert_rejected(const struct cluster *cl, const struct plan_fabric *pl,
                            const char *reason)
{
	char why[256] = "";

	assert_int_equal(plan_verify(cl->srv, cl->m, pl, why, sizeof(why)), -EINVAL);
	if (!strstr(why, reason))
		fail_msg("expected \"%s\" in \"%s\"", reason, why);
}

static bool end_eq(const struct plan_end *x, const struct plan_end *y)
{
	return x->server == y->server && x->device == y->device && x->port == y->port &&
	       x->ocs == y->ocs && x->ocs_port == y->ocs_port;
}

static bool circuit_eq(const struct plan_circuit *x, const struct plan_circuit *y)
{
	return x->plane == y->plane && end_eq(&x->a, &y->a) && end_eq(&x->b, &y->b);
}

static bool end_on(const struct plan_end *e, uint32_t server, uint32_t device)
{
	return e->server == server && e->device == device;
}

/* Circuit of each pair, indexed a * m + b; caller frees. */
static const struct plan_circuit **by_pair(const struct plan_fabric *pl)
{
	const struct plan_circuit **idx =
	    calloc((size_t)pl->servers * pl->servers + 1, sizeof(*idx));

	assert_non_null(idx);
	for (size_t i = 0; i < pl->ncircuits; i++) {
		const struct plan_circuit *c = &pl->circuits[i];

		idx[(size_t)c->a.server * pl->servers + c->b.server] = c;
	}
	return idx;
}

/* Every circuit of old that does not touch (server, device) is in new, unchanged. */
static void assert_kept_except(const struct plan_fabric *old, const struct plan_fabric *new,
                               uint32_t server, uint32_t device)
{
	const struct plan_circuit **idx = by_pair(new);

	for (size_t i = 0; i < old->ncircuits; i++) {
		const struct plan_circuit *c = &old->circuits[i];
		const struct plan_circuit *n =
		    idx[(size_t)c->a.server * new->servers + c->b.server];

		if (end_on(&c->a, server, device) || end_on(&c->b, server, device))
			continue;
		if (!n || !circuit_eq(c, n))
			fail_msg("circuit %u-%u (plane %u) moved", c->a.server, c->b.server,
			         c->plane);
	}
	free(idx);
}

static size_t npairs(uint32_t m)
{
	return (size_t)m * (m - 1) / 2;
}

/* ---- single values ------------------------------------------------------- */

static void test_vectors(void **state)
{
	(void)state;
	/* FIG. 10 and FIG. 11 */
	assert_int_equal(plan_formula1_dst(7, 0, 0), 0);
	assert_int_equal(plan_formula1_dst(8, 7, 0), 1);
	/* FIG. 12 */
	assert_int_equal(plan_formula3_dst(8, 7, 0), 4);
	assert_int_equal(plan_formula3_dst(8, 7, 1), 1);
	assert_int_equal(plan_formula3_dst(8, 0, 0), 1);
	assert_int_equal(plan_formula3_dst(8, 0, 1), 2);

	assert_int_equal(plan_planes(1, PLAN_FORMULA_AUTO), 0);
	assert_int_equal(plan_planes(2, PLAN_FORMULA_AUTO), 1);
	assert_int_equal(plan_planes(7, PLAN_FORMULA_AUTO), 7);
	assert_int_equal(plan_planes(8, PLAN_FORMULA_AUTO), 7);
	assert_int_equal(plan_planes(8, PLAN_FORMULA_3), 7);
	assert_int_equal(plan_planes(8, PLAN_FORMULA_1), 8);

	assert_int_equal(plan_min_devices(1, 1, PLAN_FORMULA_AUTO), 0);
	assert_int_equal(plan_min_devices(7, 1, PLAN_FORMULA_AUTO), 7);
	assert_int_equal(plan_min_devices(8, 1, PLAN_FORMULA_AUTO), 7);
	assert_int_equal(plan_min_devices(8, 1, PLAN_FORMULA_1), 8);
	assert_int_equal(plan_min_devices(65, 8, PLAN_FORMULA_AUTO), 9);
	assert_int_equal(plan_min_devices(64, 8, PLAN_FORMULA_AUTO), 8);
	assert_int_equal(plan_min_devices(257, 32, PLAN_FORMULA_AUTO), 9);
	assert_int_equal(plan_min_devices(8, 0, PLAN_FORMULA_AUTO), UINT32_MAX);

	assert_int_equal(plan_formula_resolve(7, PLAN_FORMULA_AUTO), 1);
	assert_int_equal(plan_formula_resolve(8, PLAN_FORMULA_AUTO), 3);
	assert_int_equal(plan_formula_resolve(8, PLAN_FORMULA_1), 1);
	assert_int_equal(plan_formula_resolve(8, PLAN_FORMULA_3), 3);
	assert_int_equal(plan_formula_resolve(7, PLAN_FORMULA_3), -EINVAL);
	assert_int_equal(plan_formula_resolve(8, (enum plan_formula)2), -EINVAL);
}

/* ---- abstract policy ----------------------------------------------------- */

static void test_policy_m8(void **state)
{
	/* plane 0 of FIG. 12: 0-1, 2-6, 3-5, 4-7 */
	static const uint32_t plane0[4][2] = { { 0, 1 }, { 2, 6 }, { 3, 5 }, { 4, 7 } };
	struct plan_policy pol;
	char why[128];

	(void)state;
	assert_int_equal(plan_policy_compute(8, 7, 1, PLAN_FORMULA_AUTO, &pol), 0);
	assert_int_equal(pol.formula, 3);
	assert_int_equal(pol.planes, 7);
	assert_int_equal(pol.min_devices, 7);
	assert_int_equal(pol.nlinks, 28);
	for (int i = 0; i < 4; i++) {
		assert_int_equal(pol.links[i].plane, 0);
		assert_int_equal(pol.links[i].a.server, plane0[i][0]);
		assert_int_equal(pol.links[i].b.server, plane0[i][1]);
		assert_int_equal(pol.links[i].a.device, 0);
		assert_int_equal(pol.links[i].b.port, 0);
	}
	for (size_t i = 1; i < pol.nlinks; i++) {
		const struct plan_link *x = &pol.links[i - 1], *y = &pol.links[i];

		assert_true(x->plane < y->plane ||
		            (x->plane == y->plane && x->a.server < y->a.server));
	}
	assert_int_equal(plan_policy_verify(&pol, why, sizeof(why)), 0);
	plan_policy_free(&pol);
	assert_null(pol.links);
	plan_policy_free(&pol);
	plan_policy_free(NULL);

	/* Formula 1 for even M: M planes, so 8 devices */
	assert_int_equal(plan_policy_compute(8, 7, 1, PLAN_FORMULA_1, &pol), -EDOM);
	assert_int_equal(plan_policy_compute(8, 8, 1, PLAN_FORMULA_1, &pol), 0);
	assert_int_equal(pol.planes, 8);
	assert_int_equal(pol.nlinks, 28);
	assert_int_equal(plan_policy_verify(&pol, why, sizeof(why)), 0);
	plan_policy_free(&pol);
}

static void test_policy_infeasible(void **state)
{
	struct plan_policy pol;

	(void)state;
	assert_int_equal(plan_policy_compute(8, 6, 1, PLAN_FORMULA_AUTO, &pol), -EDOM);
	assert_int_equal(pol.servers, 8);
	assert_int_equal(pol.devices, 6);
	assert_int_equal(pol.min_devices, 7);
	assert_int_equal(pol.planes, 7);
	assert_null(pol.links);
	assert_int_equal(pol.nlinks, 0);
	plan_policy_free(&pol);

	assert_int_equal(plan_policy_compute(0, 1, 1, PLAN_FORMULA_AUTO, &pol), -EINVAL);
	assert_int_equal(plan_policy_compute(513, 1024, 1, PLAN_FORMULA_AUTO, &pol), -EINVAL);
	assert_int_equal(plan_policy_compute(8, 0, 1, PLAN_FORMULA_AUTO, &pol), -EINVAL);
	assert_int_equal(plan_policy_compute(8, 1025, 1, PLAN_FORMULA_AUTO, &pol), -EINVAL);
	assert_int_equal(plan_policy_compute(8, 7, 0, PLAN_FORMULA_AUTO, &pol), -EINVAL);
	assert_int_equal(plan_policy_compute(8, 7, 1025, PLAN_FORMULA_AUTO, &pol), -EINVAL);
	assert_int_equal(plan_policy_compute(7, 7, 1, PLAN_FORMULA_3, &pol), -EINVAL);
	assert_int_equal(plan_policy_compute(7, 7, 1, (enum plan_formula)2, &pol), -EINVAL);
	assert_int_equal(plan_policy_compute(7, 7, 1, PLAN_FORMULA_AUTO, NULL), -EINVAL);

	/* n == N is feasible; the largest M works */
	assert_int_equal(plan_policy_compute(512, 511, 1, PLAN_FORMULA_AUTO, &pol), 0);
	assert_int_equal(pol.nlinks, 130816);
	assert_int_equal(plan_policy_verify(&pol, NULL, 0), 0);
	plan_policy_free(&pol);
}

static void check_policy(uint32_t m, uint32_t p, enum plan_formula f)
{
	struct plan_policy pol;
	uint32_t n = plan_min_devices(m, p, f);
	int formula = plan_formula_resolve(m, f);
	char why[256];
	int ret;

	ret = plan_policy_compute(m, n ? n : 1, p, f, &pol);
	assert_int_equal(ret, 0);
	ret = plan_policy_verify(&pol, why, sizeof(why));
	if (ret)
		fail_msg("M=%u P=%u formula %d: %s", m, p, formula, why);
	assert_int_equal(pol.nlinks, npairs(m));
	assert_int_equal(pol.min_devices, n);
	plan_policy_free(&pol);

	if (n >= 1) {
		/*
		 * One device fewer: (n-1)P planes of at most floor(M/2) circuits fall
		 * short. Only auto is optimal; Formula 1 wastes a plane on even M.
		 */
		if (f == PLAN_FORMULA_AUTO)
			assert_true((uint64_t)(n - 1) * p * (m / 2) < npairs(m));
		if (n >= 2) {
			assert_int_equal(plan_policy_compute(m, n - 1, p, f, &pol), -EDOM);
			assert_int_equal(pol.min_devices, n);
		}
	}

	/* each plane is an involution: s -> t implies t -> s */
	for (uint32_t d = 0; d < plan_planes(m, f); d++) {
		for (uint32_t s = 0; s < m; s++) {
			uint32_t t, back;

			if (formula == 3) {
				t = plan_formula3_dst(m, s, d);
				back = plan_formula3_dst(m, t, d);
				assert_int_not_equal(t, s);
			} else {
				t = plan_formula1_dst(m, s, d);
				back = plan_formula1_dst(m, t, d);
			}
			assert_true(t < m);
			assert_int_equal(back, s);
		}
	}
}

static void test_policy_properties(void **state)
{
	(void)state;
	for (uint32_t m = 1; m <= 65; m++) {
		for (size_t i = 0; i < ARRAY_LEN(test_ps); i++) {
			check_policy(m, test_ps[i], PLAN_FORMULA_AUTO);
			if (m % 2 == 0)
				check_policy(m, test_ps[i], PLAN_FORMULA_1);
		}
	}
}

static void test_policy_verify_rejects(void **state)
{
	struct plan_policy pol;
	struct plan_link save;
	char why[256];

	(void)state;
	assert_int_equal(plan_policy_compute(8, 7, 1, PLAN_FORMULA_AUTO, &pol), 0);

	pol.nlinks--;
	assert_int_equal(plan_policy_verify(&pol, why, sizeof(why)), -EINVAL);
	assert_non_null(strstr(why, "not joined"));
	pol.nlinks++;

	save = pol.links[5];
	pol.links[5] = pol.links[4];
	assert_int_equal(plan_policy_verify(&pol, why, sizeof(why)), -EINVAL);
	assert_non_null(strstr(why, "two links"));
	pol.links[5] = save;

	pol.links[5].b.device = 3;
	assert_int_equal(plan_policy_verify(&pol, why, sizeof(why)), -EINVAL);
	assert_non_null(strstr(why, "must use device"));
	pol.links[5] = save;

	pol.links[5].plane = 7;
	assert_int_equal(plan_policy_verify(&pol, why, sizeof(why)), -EINVAL);
	assert_non_null(strstr(why, "plane 7"));
	pol.links[5] = save;

	pol.links[5].a = save.b;
	pol.links[5].b = save.a;
	assert_int_equal(plan_policy_verify(&pol, why, sizeof(why)), -EINVAL);
	assert_non_null(strstr(why, "not a pair"));
	pol.links[5] = save;

	pol.links[5].b.server = 8;
	assert_int_equal(plan_policy_verify(&pol, why, sizeof(why)), -EINVAL);
	pol.links[5] = save;

	pol.devices = 6;
	assert_int_equal(plan_policy_verify(&pol, why, sizeof(why)), -EINVAL);
	assert_non_null(strstr(why, "beyond"));
	pol.devices = 7;

	pol.planes = 8;
	assert_int_equal(plan_policy_verify(&pol, why, sizeof(why)), -EINVAL);
	pol.planes = 7;

	assert_int_equal(plan_policy_verify(&pol, why, sizeof(why)), 0);
	assert_int_equal(plan_policy_verify(NULL, why, sizeof(why)), -EINVAL);
	plan_policy_free(&pol);
}

/* ---- cabled fabric ------------------------------------------------------- */

static void test_fabric_m8(void **state)
{
	struct cluster cl;
	struct plan_fabric pl;
	struct plan_policy pol;

	(void)state;
	cluster_init(&cl, 8, 8, 1, 2);
	assert_int_equal(plan_fabric_compute(cl.srv, cl.m, &pl), 0);
	assert_verified(&cl, &pl);
	assert_int_equal(pl.ncircuits, 28);
	assert_int_equal(pl.nmissing, 0);
	assert_null(pl.missing);
	assert_int_equal(pl.min_devices, 7);
	assert_int_equal(pl.planes, 7);
	assert_int_equal(pl.devices, 8);
	assert_int_equal(pl.formula, 3);

	/* the cabled plan is the policy, with the cabling of each port */
	assert_int_equal(plan_policy_compute(8, 8, 1, PLAN_FORMULA_AUTO, &pol), 0);
	assert_int_equal(pol.nlinks, pl.ncircuits);
	for (size_t i = 0; i < pl.ncircuits; i++) {
		const struct plan_circuit *c = &pl.circuits[i];

		assert_int_equal(c->plane, pol.links[i].plane);
		assert_int_equal(c->a.server, pol.links[i].a.server);
		assert_int_equal(c->b.server, pol.links[i].b.server);
		assert_int_equal(c->a.device, c->plane);
		assert_int_equal(c->b.device, c->plane);
		assert_int_equal(c->a.ocs, (int32_t)(c->plane % 2));
		/* OCS ports handed out in server order: slot k of server i is port i*4 + k/2 + 1 */
		assert_int_equal(c->a.ocs_port, c->a.server * 4 + c->plane / 2 + 1);
	}
	plan_policy_free(&pol);
	plan_fabric_free(&pl);
	assert_null(pl.circuits);
	plan_fabric_free(&pl);
	plan_fabric_free(NULL);
	cluster_free(&cl);
}

static void test_fabric_infeasible(void **state)
{
	struct cluster cl;
	struct plan_fabric pl;

	(void)state;
	cluster_init(&cl, 8, 6, 1, 1);
	assert_int_equal(plan_fabric_compute(cl.srv, cl.m, &pl), -EDOM);
	assert_int_equal(pl.min_devices, 7);
	assert_int_equal(pl.devices, 6);
	assert_int_equal(pl.servers, 8);
	assert_null(pl.circuits);
	assert_null(pl.missing);
	plan_fabric_free(&pl);

	/* one short server is enough to make it infeasible */
	cl.srv[5].devices = 7;
	cl.srv[3].devices = 5;
	assert_int_equal(plan_fabric_compute(cl.srv, cl.m, &pl), -EDOM);
	assert_int_equal(pl.devices, 5);
	plan_fabric_free(&pl);

	assert_int_equal(plan_fabric_compute(cl.srv, 0, &pl), -EINVAL);
	assert_int_equal(plan_fabric_compute(NULL, 8, &pl), -EINVAL);
	assert_int_equal(plan_fabric_compute(cl.srv, 8, NULL), -EINVAL);
	cl.srv[2].ports_per_device = 0;
	assert_int_equal(plan_fabric_compute(cl.srv, cl.m, &pl), -EINVAL);
	cluster_free(&cl);

	/* a single server needs nothing */
	cluster_init(&cl, 1, 0, 1, 1);
	assert_int_equal(plan_fabric_compute(cl.srv, cl.m, &pl), 0);
	assert_int_equal(pl.ncircuits, 0);
	assert_int_equal(pl.min_devices, 0);
	assert_verified(&cl, &pl);
	plan_fabric_free(&pl);
	cluster_free(&cl);
}

/* Fail device 2 of server 3 with a spare (N = 8) and without (N = 7), then recover. */
static void check_m8_failure(uint32_t n, uint32_t k)
{
	struct plan_fabric pl, failed, back;
	const struct plan_circuit **idx;
	const struct plan_circuit *c;
	struct cluster cl;

	cluster_init(&cl, 8, n, 1, k);
	assert_int_equal(plan_fabric_compute(cl.srv, cl.m, &pl), 0);
	assert_verified(&cl, &pl);

	set_device(&cl, 3, 2, false);
	assert_int_equal(plan_fabric_replan(cl.srv, cl.m, &pl, &failed), 0);
	assert_verified(&cl, &failed);
	assert_kept_except(&pl, &failed, 3, 2);
	/* Formula 3, plane 2: server 3 joins server 0 */
	idx = by_pair(&failed);
	c = idx[0 * 8 + 3];
	if (n == 8) {
		assert_int_equal(failed.ncircuits, 28);
		assert_int_equal(failed.nmissing, 0);
		/* server 0's lowest free slot sharing an OCS with server 3's spare */
		assert_non_null(c);
		assert_int_equal(c->a.device, k == 1 ? 2 : 7);
		assert_int_equal(c->plane, c->a.device);
		assert_int_equal(c->b.device, 7);
	} else {
		assert_int_equal(failed.ncircuits, 27);
		assert_int_equal(failed.nmissing, 1);
		assert_int_equal(failed.missing[0].a, 0);
		assert_int_equal(failed.missing[0].b, 3);
		assert_null(c);
	}
	free(idx);

	/* recovery: nothing that works moves, the missing pair comes back on plane 2 */
	set_device(&cl, 3, 2, true);
	assert_int_equal(plan_fabric_replan(cl.srv, cl.m, &failed, &back), 0);
	assert_verified(&cl, &back);
	assert_kept_except(&failed, &back, UINT32_MAX, UINT32_MAX);
	assert_int_equal(back.ncircuits, 28);
	assert_int_equal(back.nmissing, 0);
	if (n == 7) {
		for (size_t i = 0; i < pl.ncircuits; i++)
			assert_true(circuit_eq(&pl.circuits[i], &back.circuits[i]));
	}
	plan_fabric_free(&pl);
	plan_fabric_free(&failed);
	plan_fabric_free(&back);
	cluster_free(&cl);
}

static void test_fabric_m8_failure(void **state)
{
	(void)state;
	for (size_t i = 0; i < ARRAY_LEN(test_ks); i++) {
		check_m8_failure(8, test_ks[i]);
		check_m8_failure(7, test_ks[i]);
	}
}

/* Plan, fail device `dev` of server `s`, recover; check each step. */
static void check_fabric(uint32_t m, uint32_t p, uint32_t k, uint32_t n, bool spare)
{
	struct plan_fabric pl, failed, back;
	struct cluster cl;
	uint32_t s = m / 2, dev = 0;

	cluster_init(&cl, m, n, p, k);
	assert_int_equal(plan_fabric_compute(cl.srv, m, &pl), 0);
	assert_verified(&cl, &pl);
	assert_int_equal(pl.ncircuits, npairs(m));
	assert_int_equal(pl.nmissing, 0);
	for (size_t i = 0; i < pl.ncircuits; i++)
		assert_true(pl.circuits[i].plane < pl.planes);
	if (m < 2 || !n) {
		plan_fabric_free(&pl);
		cluster_free(&cl);
		return;
	}

	set_device(&cl, s, dev, false);
	assert_int_equal(plan_fabric_replan(cl.srv, m, &pl, &failed), 0);
	assert_verified(&cl, &failed);
	assert_kept_except(&pl, &failed, s, dev);
	if (spare) {
		assert_int_equal(failed.nmissing, 0);
		assert_int_equal(failed.ncircuits, npairs(m));
	}

	set_device(&cl, s, dev, true);
	assert_int_equal(plan_fabric_replan(cl.srv, m, &failed, &back), 0);
	assert_verified(&cl, &back);
	assert_kept_except(&failed, &back, UINT32_MAX, UINT32_MAX);
	assert_int_equal(back.nmissing, 0);

	plan_fabric_free(&pl);
	plan_fabric_free(&failed);
	plan_fabric_free(&back);
	cluster_free(&cl);
}

static void test_fabric_properties(void **state)
{
	(void)state;
	for (uint32_t m = 1; m <= 65; m++) {
		for (size_t i = 0; i < ARRAY_LEN(test_ps); i++) {
			uint32_t p = test_ps[i];
			uint32_t n = plan_min_devices(m, p, PLAN_FORMULA_AUTO);

			for (size_t j = 0; j < ARRAY_LEN(test_ks); j++) {
				check_fabric(m, p, test_ks[j], n, false);
				check_fabric(m, p, test_ks[j], n + 1, true);
			}
		}
	}
}

/* Every port of server 1 on OCS 1, the others on OCS 0, except server 1's last. */
static void test_fabric_relocation(void **state)
{
	struct plan_fabric pl;
	struct cluster cl;
	const struct plan_circuit *c;

	(void)state;
	cluster_init(&cl, 4, 4, 1, 1);
	for (uint32_t slot = 0; slot < 3; slot++) {
		cluster_port(&cl, 1, slot)->ocs = 1;
		cluster_port(&cl, 1, slot)->ocs_port = 100 + slot;
	}
	assert_int_equal(plan_fabric_compute(cl.srv, cl.m, &pl), 0);
	assert_verified(&cl, &pl);
	/* only one pair of server 1 fits on its last port; which one is deterministic */
	assert_int_equal(pl.ncircuits, 4);
	assert_int_equal(pl.nmissing, 2);
	assert_int_equal(pl.missing[0].a, 1);
	assert_int_equal(pl.missing[0].b, 2);
	assert_int_equal(pl.missing[1].a, 1);
	assert_int_equal(pl.missing[1].b, 3);
	/* pair 0-1 (plane 0) lands on server 0's lowest free slot, 0, and server 1's slot 3 */
	c = &pl.circuits[0];
	assert_int_equal(c->plane, 0);
	assert_int_equal(c->a.server, 0);
	assert_int_equal(c->a.device, 0);
	assert_int_equal(c->b.server, 1);
	assert_int_equal(c->b.device, 3);
	plan_fabric_free(&pl);

	/* a port not cabled or not healthy is never used */
	cluster_port(&cl, 1, 3)->ocs = -1;
	assert_int_equal(plan_fabric_compute(cl.srv, cl.m, &pl), 0);
	assert_verified(&cl, &pl);
	assert_int_equal(pl.nmissing, 3);
	plan_fabric_free(&pl);
	cluster_free(&cl);
}

/* Servers with more devices or ports than the fabric's minimum. */
static void test_fabric_mixed_servers(void **state)
{
	struct plan_fabric pl, failed;
	struct cluster cl, big;

	(void)state;
	cluster_init(&cl, 6, 5, 1, 2);
	cluster_init(&big, 6, 5, 2, 2);
	for (uint32_t i = 0; i < big.m; i++)
		for (uint32_t s = 0; s < 10; s++)
			cluster_port(&big, i, s)->ocs_port += 1000;
	cl.srv[2] = big.srv[2];
	cl.srv[4] = big.srv[4];
	/* planes use device k port 0: slot 2k on the wide servers, all on OCS 0 */
	assert_int_equal(plan_fabric_compute(cl.srv, cl.m, &pl), 0);
	assert_int_equal(pl.devices, 5);
	assert_int_equal(pl.ports_per_device, 1);
	assert_int_equal(pl.min_devices, 5);
	assert_verified(&cl, &pl);
	assert_int_equal(pl.nmissing, 0);

	set_device(&cl, 0, 0, false);
	assert_int_equal(plan_fabric_replan(cl.srv, cl.m, &pl, &failed), 0);
	assert_verified(&cl, &failed);
	assert_kept_except(&pl, &failed, 0, 0);
	plan_fabric_free(&pl);
	plan_fabric_free(&failed);

	cl.srv[3].devices = 4;
	assert_int_equal(plan_fabric_compute(cl.srv, cl.m, &pl), -EDOM);
	assert_int_equal(pl.devices, 4);
	cluster_free(&big);
	cluster_free(&cl);
}

/* Sparse OCS numbering exercises the verifier's hash set rather than its bitmap. */
static void test_fabric_sparse_ocs(void **state)
{
	struct plan_fabric pl;
	struct cluster cl;

	(void)state;
	cluster_init(&cl, 9, 9, 1, 3);
	for (uint32_t i = 0; i < cl.m; i++) {
		for (uint32_t s = 0; s < 9; s++) {
			struct plan_port *p = cluster_port(&cl, i, s);

			p->ocs = p->ocs * 1000000 + 7;
			p->ocs_port += 3000000000u;
		}
	}
	assert_int_equal(plan_fabric_compute(cl.srv, cl.m, &pl), 0);
	assert_verified(&cl, &pl);
	assert_int_equal(pl.nmissing, 0);
	/* two device ports cabled to one OCS port (those of links 5-6 and 4-7 of plane 2) */
	*cluster_port(&cl, 5, 2) = *cluster_port(&cl, 7, 2);
	plan_fabric_free(&pl);
	assert_int_equal(plan_fabric_compute(cl.srv, cl.m, &pl), 0);
	assert_rejected(&cl, &pl, "is used twice");
	plan_fabric_free(&pl);
	cluster_free(&cl);
}

static void test_replan_bad_prev(void **state)
{
	struct plan_fabric pl, out, bad;
	struct plan_circuit *c;
	struct cluster cl;

	(void)state;
	cluster_init(&cl, 8, 8, 1, 1);
	assert_int_equal(plan_fabric_compute(cl.srv, cl.m, &pl), 0);

	assert_int_equal(plan_fabric_replan(cl.srv, 7, &pl, &out), -EINVAL);
	assert_int_equal(plan_fabric_replan(cl.srv, cl.m, NULL, &out), -EINVAL);
	c = &pl.circuits[3];
	c->b.server += 8;
	assert_int_equal(plan_fabric_replan(cl.srv, cl.m, &pl, &out), -EINVAL);
	c->b.server -= 8;

	/* a prev that lost a circuit and duplicated another is repaired, not trusted */
	bad = pl;
	bad.circuits = malloc(pl.ncircuits * sizeof(*bad.circuits));
	assert_non_null(bad.circuits);
	memcpy(bad.circuits, pl.circuits, pl.ncircuits * sizeof(*bad.circuits));
	bad.circuits[10] = bad.circuits[11];
	assert_int_equal(plan_fabric_replan(cl.srv, cl.m, &bad, &out), 0);
	assert_verified(&cl, &out);
	assert_int_equal(out.ncircuits, 28);
	plan_fabric_free(&out);

	/* ends given b first are kept on the same ports, a < b again */
	bad.circuits[10] = pl.circuits[10];
	bad.circuits[10].a = pl.circuits[10].b;
	bad.circuits[10].b = pl.circuits[10].a;
	assert_int_equal(plan_fabric_replan(cl.srv, cl.m, &bad, &out), 0);
	assert_verified(&cl, &out);
	assert_kept_except(&pl, &out, UINT32_MAX, UINT32_MAX);
	plan_fabric_free(&out);
	free(bad.circuits);
	plan_fabric_free(&pl);
	cluster_free(&cl);
}

/* A cabling change moves a circuit's OCS port: the circuit is re-laid, the rest stays. */
static void test_replan_recabled(void **state)
{
	struct plan_fabric pl, out;
	struct cluster cl;

	(void)state;
	cluster_init(&cl, 5, 6, 1, 1);
	assert_int_equal(plan_fabric_compute(cl.srv, cl.m, &pl), 0);
	cluster_port(&cl, 2, 1)->ocs_port = 999;
	assert_int_equal(plan_fabric_replan(cl.srv, cl.m, &pl, &out), 0);
	assert_verified(&cl, &out);
	assert_kept_except(&pl, &out, 2, 1);
	assert_int_equal(out.ncircuits, 10);
	plan_fabric_free(&pl);
	plan_fabric_free(&out);
	cluster_free(&cl);
}

/* ---- verifier ------------------------------------------------------------ */

static void test_verify_rejects(void **state)
{
	struct plan_fabric pl;
	struct plan_circuit save;
	struct plan_pair miss[2];
	struct cluster cl;
	char why[256];

	(void)state;
	cluster_init(&cl, 8, 8, 1, 2);
	assert_int_equal(plan_fabric_compute(cl.srv, cl.m, &pl), 0);
	assert_verified(&cl, &pl);

	/* a dropped circuit */
	save = pl.circuits[pl.ncircuits - 1];
	pl.ncircuits--;
	assert_rejected(&cl, &pl, "neither joined nor listed missing");
	/* ... which is fine once listed missing, and wrong when listed twice */
	miss[0] = (struct plan_pair){ save.a.server, save.b.server };
	miss[1] = miss[0];
	pl.missing = miss;
	pl.nmissing = 1;
	assert_verified(&cl, &pl);
	pl.nmissing = 2;
	assert_rejected(&cl, &pl, "listed twice");
	pl.ncircuits++;
	pl.nmissing = 1;
	assert_rejected(&cl, &pl, "listed missing but joined");
	miss[0] = (struct plan_pair){ save.b.server, save.a.server };
	pl.ncircuits--;
	assert_rejected(&cl, &pl, "not a pair");
	pl.ncircuits++;
	pl.missing = NULL;
	pl.nmissing = 0;
	assert_verified(&cl, &pl);

	/* a duplicated device port */
	save = pl.circuits[5];
	pl.circuits[5].a = pl.circuits[4].a;
	assert_rejected(&cl, &pl, "in two circuits");
	pl.circuits[5] = save;

	/* ends on different OCS units */
	pl.circuits[5].b.ocs = 1 - save.b.ocs;
	assert_rejected(&cl, &pl, "different OCS units");
	pl.circuits[5] = save;

	/* an end that is not where the cabling says */
	pl.circuits[5].b.ocs_port++;
	assert_rejected(&cl, &pl, "is cabled to");
	pl.circuits[5] = save;

	/* a server index out of the fabric */
	pl.circuits[5].b.server = 8;
	assert_rejected(&cl, &pl, "outside the fabric");
	pl.circuits[5] = save;

	/* a device the server does not have */
	pl.circuits[5].b.device = 8;
	assert_rejected(&cl, &pl, "has no device");
	pl.circuits[5] = save;

	/* a circuit joining a server to itself */
	pl.circuits[5].b.server = save.a.server;
	assert_rejected(&cl, &pl, "to itself");
	pl.circuits[5] = save;

	/* ends in the wrong order */
	pl.circuits[5].a = save.b;
	pl.circuits[5].b = save.a;
	assert_rejected(&cl, &pl, "not lower");
	pl.circuits[5] = save;

	/* a failed or uncabled port */
	cluster_port(&cl, save.a.server, save.a.device)->healthy = false;
	assert_rejected(&cl, &pl, "not healthy");
	cluster_port(&cl, save.a.server, save.a.device)->healthy = true;
	cluster_port(&cl, save.a.server, save.a.device)->ocs = -1;
	assert_rejected(&cl, &pl, "not cabled");
	cluster_port(&cl, save.a.server, save.a.device)->ocs = save.a.ocs;

	/* one OCS port in two circuits, through bad cabling */
	cluster_port(&cl, pl.circuits[6].a.server, pl.circuits[6].a.device)->ocs_port =
	    save.a.ocs_port;
	cluster_port(&cl, pl.circuits[6].a.server, pl.circuits[6].a.device)->ocs = save.a.ocs;
	pl.circuits[6].a.ocs_port = save.a.ocs_port;
	pl.circuits[6].a.ocs = save.a.ocs;
	pl.circuits[6].b.ocs = save.a.ocs;
	cluster_port(&cl, pl.circuits[6].b.server, pl.circuits[6].b.device)->ocs = save.a.ocs;
	assert_rejected(&cl, &pl, "is used twice");
	plan_fabric_free(&pl);
	cluster_free(&cl);

	/* the wrong fabric size, and the reason buffer is optional */
	cluster_init(&cl, 8, 8, 1, 2);
	assert_int_equal(plan_fabric_compute(cl.srv, cl.m, &pl), 0);
	assert_int_equal(plan_verify(cl.srv, 7, &pl, why, sizeof(why)), -EINVAL);
	assert_non_null(strstr(why, "plan is for 8 servers"));
	assert_int_equal(plan_verify(cl.srv, 7, &pl, NULL, 0), -EINVAL);
	assert_int_equal(plan_verify(cl.srv, 8, NULL, why, 4), -EINVAL);
	assert_int_equal(strlen(why), 3);
	plan_fabric_free(&pl);
	cluster_free(&cl);
}

/* The largest fabric: 512 servers on one port each, 130,816 circuits. */
static void test_fabric_large(void **state)
{
	struct plan_fabric pl, failed;
	struct cluster cl;

	(void)state;
	cluster_init(&cl, 512, 512, 1, 8);
	assert_int_equal(plan_fabric_compute(cl.srv, cl.m, &pl), 0);
	assert_int_equal(pl.ncircuits, 130816);
	assert_verified(&cl, &pl);
	set_device(&cl, 100, 3, false);
	assert_int_equal(plan_fabric_replan(cl.srv, cl.m, &pl, &failed), 0);
	assert_verified(&cl, &failed);
	assert_kept_except(&pl, &failed, 100, 3);
	assert_int_equal(failed.nmissing, 0);
	plan_fabric_free(&pl);
	plan_fabric_free(&failed);
	cluster_free(&cl);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_vectors),
		cmocka_unit_test(test_policy_m8),
		cmocka_unit_test(test_policy_infeasible),
		cmocka_unit_test(test_policy_properties),
		cmocka_unit_test(test_policy_verify_rejects),
		cmocka_unit_test(test_fabric_m8),
		cmocka_unit_test(test_fabric_infeasible),
		cmocka_unit_test(test_fabric_m8_failure),
		cmocka_unit_test(test_fabric_properties),
		cmocka_unit_test(test_fabric_relocation),
		cmocka_unit_test(test_fabric_mixed_servers),
		cmocka_unit_test(test_fabric_sparse_ocs),
		cmocka_unit_test(test_replan_bad_prev),
		cmocka_unit_test(test_replan_recabled),
		cmocka_unit_test(test_verify_rejects),
		cmocka_unit_test(test_fabric_large),
	};

	return cmocka_run_group_tests_name("plan", tests, NULL, NULL);
}
