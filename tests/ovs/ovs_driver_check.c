/*
 * ovs_driver_check: the openflow driver against a real Open vSwitch.
 *
 * tests/ovs/run.sh starts ovsdb-server and ovs-vswitchd in a temp dir, makes
 * the bridges (netdev datapath, fail_mode=secure, OpenFlow13 only) and runs
 * this program with their names; the OVS_RUNDIR it exports lets ovs-ofctl find
 * them. Every step prints "ok - ..." or "not ok - ..." and the first failure
 * exits 1; run.sh then stops what it started.
 *
 *   --ptcp-bridge BR --ptcp-port P  ofcd listens on 127.0.0.1:P, BR connects to it
 *   --tcp-bridge BR --tcp-port P    BR listens on 127.0.0.1:P, ofcd connects
 *   --bench-bridge BR --bench-port P  BR listens; ofcd pushes 2016 circuits into it
 *   --ofctl-bridge BR               ovs-ofctl --bundle pushes the same flows into it
 *   --fence-bridge BR --fence-port P  BR listens; several ofcd connect to it (fencing)
 *   --veth-peer DEV                 the peer (down) of the veth that is port 5 of the
 *                                   ptcp bridge; setting it up brings the link up
 *   --vswitchd SCRIPT               "SCRIPT stop|kill|start" freezes, kills, restarts
 *                                   ovs-vswitchd
 *   --workdir DIR                   where to write the flow file for ovs-ofctl;
 *                                   ovs-vswitchd.log is there too
 *
 * The scenario: connect in both directions; apply, read back, compare with
 * dump-flows; delete; a flow deleted by hand shows as partial; flows added by
 * hand show as foreign and are never touched; a batch the switch refuses fails
 * with the decoded error; PORT_STATUS reaches port_state; an apply in flight
 * when ovs-vswitchd dies completes once with -ENOTCONN before DOWN; both
 * connections come back after a restart; fencing by master generation (see
 * scenario_fence); then the push timing against
 * `ovs-ofctl --bundle add-flows` (target: ofcd <= 1.25x).
 */
#include <errno.h>
#include <signal.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <event2/event.h>

#include "ocs_driver.h"

#define OFCD_COOKIE_TAG  0x0fcd000000000000ull
#define OFCD_COOKIE_MASK 0xffff000000000000ull
#define BENCH_CIRCUITS   2016
#define BENCH_ROUNDS     3
#define TARGET_RATIO     1.25
#define MAX_FLOWS        8192

struct opts {
	const char *ptcp_bridge;
	const char *ptcp_port;
	const char *tcp_bridge;
	const char *tcp_port;
	const char *bench_bridge;
	const char *bench_port;
	const char *ofctl_bridge;
	const char *fence_bridge;
	const char *fence_port;
	const char *veth_peer;
	const char *vswitchd;
	const char *workdir;
};

/* One driver instance and what it reported. */
struct unit {
	const char *bridge;
	struct ocs_handle *h;
	enum ocs_conn_state state;
	unsigned ups;
	unsigned downs;
	char down_err[256];
	char log[64]; /* 'A' apply done, 'R' read done, 'D' down, 'U' up, in order */
	size_t nlog;
	int port_up[16]; /* last port_state per port: -1 none yet, 0 down, 1 up */
};

/* The outcome of one apply or read, copied out of the callback. */
struct result {
	struct unit *u;
	bool done;
	int status;
	char err[256];
	struct ocs_xc *xcs;
	size_t nxcs;
	struct ocs_flow *partial;
	size_t npartial;
	struct ocs_flow *foreign;
	size_t nforeign;
};

/* A flow as ovs-ofctl dump-flows prints it. */
struct dumped {
	uint64_t cookie;
	unsigned priority;
	uint32_t in_port;
	uint32_t out_port;
};

static struct event_base *base;
static const struct ocs_driver_ops *drv;
static unsigned nchecks;

static void fail(const char *fmt, ...)
{
	va_list ap;

	printf("not ok %u - ", ++nchecks);
	va_start(ap, fmt);
	vprintf(fmt, ap);
	va_end(ap);
	printf("\n");
	exit(1);
}

static void ok(const char *fmt, ...)
{
	va_list ap;

	printf("ok %u - ", ++nchecks);
	va_start(ap, fmt);
	vprintf(fmt, ap);
	va_end(ap);
	printf("\n");
	fflush(stdout);
}

static double now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec * 1e3 + ts.tv_nsec / 1e6;
}

/* Runs a shell command; any failure ends the check. */
static void sh(const char *fmt, ...)
{
	char cmd[1024];
	va_list ap;
	int r;

	va_start(ap, fmt);
	vsnprintf(cmd, sizeof(cmd), fmt, ap);
	va_end(ap);
	fflush(stdout);
	r = system(cmd);
	if (r != 0)
		fail("command failed (%d): %s", r, cmd);
}

static void note(struct unit *u, char what)
{
	if (u->nlog < sizeof(u->log) - 1) {
		u->log[u->nlog++] = what;
		u->log[u->nlog] = '\0';
	}
}

static void on_conn(void *arg, enum ocs_conn_state state, const char *err)
{
	struct unit *u = arg;

	u->state = state;
	if (state == OCS_CONN_UP) {
		u->ups++;
		note(u, 'U');
	} else if (state == OCS_CONN_DOWN) {
		u->downs++;
		snprintf(u->down_err, sizeof(u->down_err), "%s", err ? err : "(none)");
		note(u, 'D');
	}
}

static void on_port(void *arg, uint32_t port, bool up)
{
	struct unit *u = arg;

	if (port < sizeof(u->port_up) / sizeof(u->port_up[0]))
		u->port_up[port] = up;
}

static void on_apply(void *arg, int status, const char *err)
{
	struct result *res = arg;

	if (res->done)
		fail("%s: apply completed twice", res->u->bridge);
	res->done = true;
	res->status = status;
	snprintf(res->err, sizeof(res->err), "%s", err ? err : "");
	note(res->u, 'A');
}

static void *dup_array(const void *src, size_t n, size_t size)
{
	void *p = malloc(n * size + 1);

	if (!p)
		fail("out of memory");
	if (n)
		memcpy(p, src, n * size);
	return p;
}

static void on_read(void *arg, int status, const char *err, const struct ocs_readback *rb)
{
	struct result *res = arg;

	if (res->done)
		fail("%s: read completed twice", res->u->bridge);
	res->done = true;
	res->status = status;
	snprintf(res->err, sizeof(res->err), "%s", err ? err : "");
	if (rb) {
		res->xcs = dup_array(rb->xcs, rb->nxcs, sizeof(*rb->xcs));
		res->nxcs = rb->nxcs;
		res->partial = dup_array(rb->partial, rb->npartial, sizeof(*rb->partial));
		res->npartial = rb->npartial;
		res->foreign = dup_array(rb->foreign, rb->nforeign, sizeof(*rb->foreign));
		res->nforeign = rb->nforeign;
	}
	note(res->u, 'R');
}

static void result_reset(struct result *res, struct unit *u)
{
	free(res->xcs);
	free(res->partial);
	free(res->foreign);
	memset(res, 0, sizeof(*res));
	res->u = u;
}

/* Runs the loop until *flag is set or ms have passed; returns the flag. */
static bool run_until(const bool *flag, int ms)
{
	double end = now_ms() + ms;

	while (!*flag && now_ms() < end) {
		struct timeval tv = { 0, 10000 };

		event_base_loopexit(base, &tv);
		event_base_dispatch(base);
	}
	return *flag;
}

static void run_for(int ms)
{
	bool never = false;

	run_until(&never, ms);
}

static void wait_up(struct unit *u, int ms)
{
	double end = now_ms() + ms;

	while (u->state != OCS_CONN_UP && now_ms() < end)
		run_for(10);
	if (u->state != OCS_CONN_UP)
		fail("%s: connection not up after %d ms (last error: %s)", u->bridge, ms,
		     u->down_err[0] ? u->down_err : "none");
}

static void wait_down(struct unit *u, unsigned downs)
{
	double end = now_ms() + 5000;

	while (u->downs == downs && now_ms() < end)
		run_for(10);
	if (u->downs == downs)
		fail("%s: no DOWN event", u->bridge);
}

static void open_unit_gen(struct unit *u, const char *bridge, const char *endpoint, uint32_t ports,
                          uint64_t generation)
{
	struct ocs_open_params p = { .name = bridge,
		                     .endpoint = endpoint,
		                     .ports = ports,
		                     .master_generation = generation };
	struct ocs_events ev = { .conn_state = on_conn, .port_state = on_port, .arg = u };
	char err[256];
	int r;

	memset(u, 0, sizeof(*u));
	memset(u->port_up, 0xff, sizeof(u->port_up));
	u->bridge = bridge;
	r = drv->open(base, &p, &ev, &u->h, err, sizeof(err));
	if (r < 0)
		fail("%s: open %s: %s", bridge, endpoint, err);
}

static void open_unit(struct unit *u, const char *bridge, const char *endpoint, uint32_t ports)
{
	open_unit_gen(u, bridge, endpoint, ports, 0);
}

static int apply(struct unit *u, struct result *res, const struct ocs_xc *del, size_t ndel,
                 const struct ocs_xc *add, size_t nadd)
{
	struct ocs_batch b = { .del = del, .ndel = ndel, .add = add, .nadd = nadd };
	int r;

	result_reset(res, u);
	r = drv->apply(u->h, &b, on_apply, res);
	if (r < 0)
		fail("%s: apply refused: %s", u->bridge, strerror(-r));
	if (res->done)
		fail("%s: apply completed inside apply()", u->bridge);
	if (!run_until(&res->done, 30000))
		fail("%s: apply did not complete in 30 s", u->bridge);
	return res->status;
}

static void read_back(struct unit *u, struct result *res)
{
	int r;

	result_reset(res, u);
	r = drv->read(u->h, on_read, res);
	if (r < 0)
		fail("%s: read refused: %s", u->bridge, strerror(-r));
	if (!run_until(&res->done, 30000))
		fail("%s: read did not complete in 30 s", u->bridge);
	if (res->status != 0)
		fail("%s: read failed: %d %s", u->bridge, res->status, res->err);
}

static void expect_readback(struct unit *u, const struct ocs_xc *xcs, size_t nxcs,
                            const struct ocs_flow *partial, size_t npartial,
                            const struct ocs_flow *foreign, size_t nforeign, const char *what)
{
	struct result res = { 0 };
	size_t i;

	read_back(u, &res);
	if (res.nxcs != nxcs || res.npartial != npartial || res.nforeign != nforeign)
		fail("%s: %s: read back %zu circuits, %zu partial, %zu foreign; want %zu, %zu, %zu",
		     u->bridge, what, res.nxcs, res.npartial, res.nforeign, nxcs, npartial,
		     nforeign);
	for (i = 0; i < nxcs; i++) {
		if (res.xcs[i].a != xcs[i].a || res.xcs[i].b != xcs[i].b)
			fail("%s: %s: circuit %zu is %u-%u, want %u-%u", u->bridge, what, i,
			     res.xcs[i].a, res.xcs[i].b, xcs[i].a, xcs[i].b);
	}
	for (i = 0; i < npartial; i++) {
		if (res.partial[i].in_port != partial[i].in_port ||
		    res.partial[i].out_port != partial[i].out_port)
			fail("%s: %s: partial %zu is %u->%u, want %u->%u", u->bridge, what, i,
			     res.partial[i].in_port, res.partial[i].out_port, partial[i].in_port,
			     partial[i].out_port);
	}
	for (i = 0; i < nforeign; i++) {
		if (res.foreign[i].in_port != foreign[i].in_port ||
		    res.foreign[i].out_port != foreign[i].out_port)
			fail("%s: %s: foreign %zu is %u->%u, want %u->%u", u->bridge, what, i,
			     res.foreign[i].in_port, res.foreign[i].out_port, foreign[i].in_port,
			     foreign[i].out_port);
	}
	result_reset(&res, NULL);
	ok("%s: %s: read back %zu circuits, %zu partial, %zu foreign", u->bridge, what, nxcs,
	   npartial, nforeign);
}

/* Reads `ovs-ofctl dump-flows` of a bridge; returns the number of flows. */
static size_t dump_flows(const char *bridge, struct dumped *out, size_t max)
{
	char cmd[256], line[512];
	size_t n = 0;
	FILE *f;
	const char *p;

	snprintf(cmd, sizeof(cmd), "ovs-ofctl -O OpenFlow13 --no-names --no-stats dump-flows %s",
	         bridge);
	f = popen(cmd, "r");
	if (!f)
		fail("popen %s: %s", cmd, strerror(errno));
	while (fgets(line, sizeof(line), f)) {
		struct dumped d = { 0 };

		if (strstr(line, "OFPST_FLOW reply"))
			continue;
		if (n == max)
			fail("%s: more than %zu flows", bridge, max);
		p = strstr(line, "cookie=");
		if (p)
			d.cookie = strtoull(p + 7, NULL, 16);
		p = strstr(line, "priority=");
		d.priority = p ? (unsigned)strtoul(p + 9, NULL, 10) : 32768;
		p = strstr(line, "in_port=");
		if (p)
			d.in_port = (uint32_t)strtoul(p + 8, NULL, 10);
		p = strstr(line, "actions=output:");
		if (p)
			d.out_port = (uint32_t)strtoul(p + 15, NULL, 10);
		out[n++] = d;
	}
	if (pclose(f) != 0)
		fail("%s failed", cmd);
	return n;
}

/* Checks that dump-flows shows exactly the two flows of each circuit, plus nforeign others. */
static void expect_dump(const char *bridge, const struct ocs_xc *xcs, size_t nxcs, size_t nforeign)
{
	static struct dumped d[MAX_FLOWS];
	size_t n = dump_flows(bridge, d, MAX_FLOWS);
	size_t i, j, ours = 0, found = 0;

	for (i = 0; i < n; i++) {
		if ((d[i].cookie & OFCD_COOKIE_MASK) != OFCD_COOKIE_TAG)
			continue;
		ours++;
		for (j = 0; j < nxcs; j++) {
			uint64_t cookie = OFCD_COOKIE_TAG | (uint64_t)xcs[j].a << 24 | xcs[j].b;

			if (d[i].cookie == cookie && d[i].priority == 1000 &&
			    ((d[i].in_port == xcs[j].a && d[i].out_port == xcs[j].b) ||
			     (d[i].in_port == xcs[j].b && d[i].out_port == xcs[j].a))) {
				found++;
				break;
			}
		}
	}
	if (ours != 2 * nxcs || found != 2 * nxcs || n - ours != nforeign)
		fail("%s: dump-flows shows %zu ofcd flows (%zu expected ones) and %zu others; "
		     "want %zu and %zu",
		     bridge, ours, found, n - ours, 2 * nxcs, nforeign);
	ok("%s: dump-flows shows exactly the %zu flows of %zu circuits and %zu foreign", bridge,
	   2 * nxcs, nxcs, nforeign);
}

static void wait_port(struct unit *u, uint32_t port, int up)
{
	double end = now_ms() + 5000;

	while (u->port_up[port] != up && now_ms() < end)
		run_for(10);
	if (u->port_up[port] != up)
		fail("%s: no port_state(%u, %s)", u->bridge, port, up ? "up" : "down");
	ok("%s: PORT_STATUS reported port %u %s", u->bridge, port, up ? "up" : "down");
}

static void scenario_ptcp(const struct opts *o, struct unit *u)
{
	static const struct ocs_xc three[] = { { 1, 2 }, { 3, 4 }, { 5, 8 } };
	static const struct ocs_xc del34[] = { { 3, 4 } };
	static const struct ocs_xc two[] = { { 1, 2 }, { 5, 8 } };
	static const struct ocs_flow half85[] = { { 8, 5 } };
	static const struct ocs_flow foreign[] = { { 0, 0 }, { 6, 7 } };
	static const struct ocs_xc refused[] = { { 3, 4 }, { 6, 65300 } };
	static const struct ocs_xc after_refused[] = { { 1, 2 }, { 3, 4 } };
	static const struct ocs_xc all[] = { { 1, 2 }, { 3, 4 }, { 5, 8 } };
	struct result res = { 0 };
	char endpoint[64];

	snprintf(endpoint, sizeof(endpoint), "ptcp:%s:127.0.0.1", o->ptcp_port);
	/* 65535 ports, so that a port OVS refuses (65300) passes ofcd's own range check */
	open_unit(u, o->ptcp_bridge, endpoint, 65535);
	wait_up(u, 15000);
	ok("%s: ovs-vswitchd connected to ofcd on %s", u->bridge, endpoint);

	expect_readback(u, NULL, 0, NULL, 0, NULL, 0, "fresh bridge");
	if (apply(u, &res, NULL, 0, three, 3) != 0)
		fail("%s: apply 3 circuits: %d %s", u->bridge, res.status, res.err);
	ok("%s: applied 3 circuits (BARRIER_REPLY)", u->bridge);
	expect_readback(u, three, 3, NULL, 0, NULL, 0, "after apply");
	expect_dump(u->bridge, three, 3, 0);

	if (apply(u, &res, del34, 1, NULL, 0) != 0)
		fail("%s: delete 3-4: %d %s", u->bridge, res.status, res.err);
	expect_readback(u, two, 2, NULL, 0, NULL, 0, "after deleting 3-4");
	expect_dump(u->bridge, two, 2, 0);

	sh("ovs-ofctl -O OpenFlow13 del-flows %s in_port=5", u->bridge);
	expect_readback(u, two, 1, half85, 1, NULL, 0, "after del-flows in_port=5 by hand");

	sh("ovs-ofctl -O OpenFlow13 add-flow %s priority=500,in_port=6,actions=output:7",
	   u->bridge);
	sh("ovs-ofctl -O OpenFlow13 add-flow %s priority=0,actions=drop", u->bridge);
	expect_readback(u, two, 1, half85, 1, foreign, 2, "after add-flow by hand");

	if (apply(u, &res, NULL, 0, refused, 2) != -EIO)
		fail("%s: a batch with output:65300 should fail with -EIO, got %d %s", u->bridge,
		     res.status, res.err);
	if (!strstr(res.err, "6-65300") || !strstr(res.err, "OFPET_"))
		fail("%s: refused batch: unexpected message \"%s\"", u->bridge, res.err);
	ok("%s: batch refused by the switch: %s", u->bridge, res.err);
	/* OVS refuses both halves of 6-65300; 3-4, before them in the batch, stays */
	expect_readback(u, after_refused, 2, half85, 1, foreign, 2, "after the refused batch");

	sh("ovs-ofctl -O OpenFlow13 mod-port %s 2 up", u->bridge);
	wait_port(u, 2, 1);
	sh("ovs-ofctl -O OpenFlow13 mod-port %s 2 down", u->bridge);
	wait_port(u, 2, 0);
	sh("ip link set %s up", o->veth_peer);
	wait_port(u, 5, 1);

	/* deleting 5-8 removes the 8->5 half left of it */
	if (apply(u, &res, all, 3, NULL, 0) != 0)
		fail("%s: delete all: %d %s", u->bridge, res.status, res.err);
	expect_readback(u, NULL, 0, NULL, 0, foreign, 2, "after deleting every circuit");
	expect_dump(u->bridge, NULL, 0, 2);

	if (apply(u, &res, NULL, 0, all, 3) != 0)
		fail("%s: re-apply: %d %s", u->bridge, res.status, res.err);
	expect_readback(u, all, 3, NULL, 0, foreign, 2, "re-applied before the restart");
	result_reset(&res, NULL);
}

static void scenario_tcp(const struct opts *o, struct unit *u)
{
	static const struct ocs_xc xcs[] = { { 1, 2 }, { 3, 4 } };
	struct result res = { 0 };
	char endpoint[64];

	snprintf(endpoint, sizeof(endpoint), "tcp:127.0.0.1:%s", o->tcp_port);
	open_unit(u, o->tcp_bridge, endpoint, 8);
	wait_up(u, 15000);
	ok("%s: ofcd connected to ovs-vswitchd at %s", u->bridge, endpoint);
	expect_readback(u, NULL, 0, NULL, 0, NULL, 0, "fresh bridge");
	if (apply(u, &res, NULL, 0, xcs, 2) != 0)
		fail("%s: apply: %d %s", u->bridge, res.status, res.err);
	expect_readback(u, xcs, 2, NULL, 0, NULL, 0, "after apply");
	expect_dump(u->bridge, xcs, 2, 0);
	result_reset(&res, NULL);
}

static void scenario_restart(const struct opts *o, struct unit *p, struct unit *t)
{
	static const struct ocs_xc xc67[] = { { 6, 7 } };
	static const struct ocs_xc all[] = { { 1, 2 }, { 3, 4 }, { 5, 8 } };
	static const struct ocs_xc xcs_t[] = { { 1, 2 }, { 3, 4 } };
	struct ocs_batch b = { .add = xc67, .nadd = 1 };
	struct result res = { 0 };
	unsigned pdowns = p->downs, tdowns = t->downs;
	int r;

	/* frozen, the switch cannot answer: the apply is in flight when it dies */
	sh("%s stop", o->vswitchd);
	result_reset(&res, p);
	p->nlog = 0;
	r = drv->apply(p->h, &b, on_apply, &res);
	if (r < 0)
		fail("%s: apply refused: %s", p->bridge, strerror(-r));
	run_for(200);
	if (res.done)
		fail("%s: apply completed while ovs-vswitchd was stopped", p->bridge);
	sh("%s kill", o->vswitchd);
	if (!run_until(&res.done, 5000))
		fail("%s: in-flight apply did not complete after ovs-vswitchd died", p->bridge);
	run_for(100);
	if (res.status != -ENOTCONN || strcmp(p->log, "AD") != 0)
		fail("%s: in-flight apply: status %d, events \"%s\"; want -ENOTCONN then DOWN",
		     p->bridge, res.status, p->log);
	ok("%s: in-flight apply completed once with -ENOTCONN (%s), then DOWN (%s)", p->bridge,
	   res.err, p->down_err);
	wait_down(t, tdowns);
	if (p->downs != pdowns + 1)
		fail("%s: %u DOWN events, want 1", p->bridge, p->downs - pdowns);
	ok("%s: DOWN reported (%s)", t->bridge, t->down_err);

	sh("%s start", o->vswitchd);
	wait_up(p, 20000);
	ok("%s: ovs-vswitchd connected again after its restart", p->bridge);
	wait_up(t, 20000);
	ok("%s: ofcd reconnected after the restart", t->bridge);
	/* ovs-vswitchd does not keep flows across a restart: ofcd sees an empty table */
	expect_readback(p, NULL, 0, NULL, 0, NULL, 0, "after the restart");
	if (apply(p, &res, NULL, 0, all, 3) != 0)
		fail("%s: re-apply after restart: %d %s", p->bridge, res.status, res.err);
	expect_readback(p, all, 3, NULL, 0, NULL, 0, "re-applied after the restart");
	expect_dump(p->bridge, all, 3, 0);
	if (apply(t, &res, NULL, 0, xcs_t, 2) != 0)
		fail("%s: re-apply after restart: %d %s", t->bridge, res.status, res.err);
	expect_readback(t, xcs_t, 2, NULL, 0, NULL, 0, "re-applied after the restart");
	result_reset(&res, NULL);
}

/*
 * How many flow-mods of a SLAVE ovs-vswitchd refused on bridge, by its log
 * ("BR<->tcp:...: sending OFPBRC_IS_SECONDARY error reply to OFPT_FLOW_MOD
 * message"; OFPBRC_IS_SLAVE before OVS 2.16). The log is rate-limited to 10
 * such lines a minute, well above what this check provokes.
 */
static unsigned slave_refusals(const struct opts *o, const char *bridge)
{
	char cmd[512];
	unsigned n = 0;
	FILE *f;

	snprintf(cmd, sizeof(cmd),
	         "grep -E -c '%s<->.*(IS_SECONDARY|IS_SLAVE) error reply to OFPT_FLOW_MOD' "
	         "%s/ovs-vswitchd.log",
	         bridge, o->workdir);
	f = popen(cmd, "r");
	if (!f || fscanf(f, "%u", &n) != 1)
		fail("%s: cannot count refusals in ovs-vswitchd.log", bridge);
	pclose(f);
	return n;
}

/* Waits up to ms for a DOWN event after the first `downs` whose error contains want. */
static void wait_down_with(struct unit *u, unsigned downs, const char *want, int ms)
{
	double end = now_ms() + ms;

	while (!(u->downs > downs && strstr(u->down_err, want)) && now_ms() < end)
		run_for(10);
	if (!(u->downs > downs && strstr(u->down_err, want)))
		fail("%s: no DOWN with \"%s\" in %d ms (%u DOWN, last error: %s)", u->bridge, want,
		     ms, u->downs - downs, u->down_err[0] ? u->down_err : "none");
}

/*
 * Fencing at the switch, on one bridge that listens for several controllers:
 * a driver without a generation works as before on a bridge nobody claimed;
 * A (generation 5) becomes master and applies; B (generation 6) becomes
 * master, which demotes A; A's next batch fails with -EPERM "fenced:" and the
 * bridge keeps none of it (dump-flows, not just the status); A's reconnection
 * with 5 and a newcomer with 4 are refused as stale, never UP; B's changes
 * land. B runs on an event_base of its own, turned alone while B comes up, so
 * that A has not yet read the switch's ROLE_STATUS when it sends its batch:
 * the switch itself must refuse those flow-mods (as a SLAVE's), which its log
 * shows.
 */
static void scenario_fence(const struct opts *o)
{
	static const struct ocs_xc xc12[] = { { 1, 2 } };
	static const struct ocs_xc a_add[] = { { 1, 2 }, { 3, 4 } };
	static const struct ocs_xc a_late_add[] = { { 7, 8 } };
	static const struct ocs_xc b_del[] = { { 3, 4 } };
	static const struct ocs_xc b_add[] = { { 5, 6 } };
	static const struct ocs_xc after_b[] = { { 1, 2 }, { 5, 6 } };
	struct event_base *main_base = base, *base_b = event_base_new();
	struct ocs_batch late = { .del = xc12, .ndel = 1, .add = a_late_add, .nadd = 1 };
	struct unit z, a, b, c;
	struct result res = { 0 };
	char endpoint[64];
	unsigned downs, refused;
	int r;

	if (!base_b)
		fail("no event base");
	snprintf(endpoint, sizeof(endpoint), "tcp:127.0.0.1:%s", o->fence_port);

	/* generation 0: no role request, exactly as a single daemon always worked */
	open_unit(&z, o->fence_bridge, endpoint, 8);
	wait_up(&z, 15000);
	if (apply(&z, &res, NULL, 0, xc12, 1) != 0)
		fail("%s: generation 0: apply: %d %s", z.bridge, res.status, res.err);
	expect_dump(z.bridge, xc12, 1, 0);
	if (apply(&z, &res, xc12, 1, NULL, 0) != 0)
		fail("%s: generation 0: delete: %d %s", z.bridge, res.status, res.err);
	expect_dump(z.bridge, NULL, 0, 0);
	drv->close(z.h);
	ok("%s: generation 0 (no role request) applies on a bridge without a master", z.bridge);

	open_unit_gen(&a, o->fence_bridge, endpoint, 8, 5);
	wait_up(&a, 15000);
	ok("%s: A is UP as master with generation 5", a.bridge);
	if (apply(&a, &res, NULL, 0, a_add, 2) != 0)
		fail("%s: A (generation 5): apply: %d %s", a.bridge, res.status, res.err);
	expect_dump(a.bridge, a_add, 2, 0);

	base = base_b;
	open_unit_gen(&b, o->fence_bridge, endpoint, 8, 6);
	wait_up(&b, 15000);
	base = main_base;
	ok("%s: B is UP as master with generation 6", b.bridge);

	/* A has not run since: it still believes it is master */
	if (a.state != OCS_CONN_UP)
		fail("%s: A went down before it could try (%s)", a.bridge, a.down_err);
	downs = a.downs;
	refused = slave_refusals(o, a.bridge);
	result_reset(&res, &a);
	r = drv->apply(a.h, &late, on_apply, &res);
	if (r < 0)
		fail("%s: A: apply refused at once: %s", a.bridge, strerror(-r));
	if (!run_until(&res.done, 10000))
		fail("%s: A: apply did not complete", a.bridge);
	if (res.status != -EPERM || strncmp(res.err, "fenced: ", 8) != 0)
		fail("%s: A (generation 5) after B: apply ended %d \"%s\"; want -EPERM, fenced",
		     a.bridge, res.status, res.err);
	ok("%s: A's batch after B became master failed: %s", a.bridge, res.err);
	/*
	 * The batch did reach the switch: libevent ran A's write before its read
	 * of the ROLE_STATUS waiting since B's promotion, so the switch itself had
	 * to refuse A's flow-mods. Were this to change, the check would prove only
	 * the driver's side: fail rather than pass on less.
	 */
	refused = slave_refusals(o, a.bridge) - refused;
	if (!refused)
		fail("%s: ovs-vswitchd logged no refusal of A's flow-mods", a.bridge);
	ok("%s: ovs-vswitchd refused %u of A's flow-mods as a SLAVE's (its log)", a.bridge,
	   refused);
	wait_down_with(&a, downs, "fenced: ", 5000);
	ok("%s: A reported DOWN: %s", a.bridge, a.down_err);
	/* the switch kept none of A's late batch: 1-2 still there, no 7-8 */
	expect_dump(a.bridge, a_add, 2, 0);

	/* A retries with its backoff and the switch refuses generation 5 now */
	downs = a.downs;
	wait_down_with(&a, downs, "fenced: the switch holds a newer master generation than 5",
	               5000);
	ok("%s: A's reconnection refused: %s", a.bridge, a.down_err);

	open_unit_gen(&c, o->fence_bridge, endpoint, 8, 4);
	wait_down_with(&c, 0, "fenced: the switch holds a newer master generation than 4", 5000);
	if (c.ups || a.state == OCS_CONN_UP || strchr(a.log + 1, 'U'))
		fail("%s: a stale instance came UP (A \"%s\", C %u UP)", c.bridge, a.log, c.ups);
	ok("%s: C with generation 4 refused at connect: %s", c.bridge, c.down_err);
	drv->close(c.h);
	drv->close(a.h);

	base = base_b;
	if (b.state != OCS_CONN_UP || b.downs)
		fail("%s: B lost its connection (%s)", b.bridge, b.down_err);
	if (apply(&b, &res, b_del, 1, b_add, 1) != 0)
		fail("%s: B (generation 6): apply: %d %s", b.bridge, res.status, res.err);
	expect_readback(&b, after_b, 2, NULL, 0, NULL, 0, "B's changes after A was fenced");
	base = main_base;
	expect_dump(b.bridge, after_b, 2, 0);
	drv->close(b.h);
	result_reset(&res, NULL);
	event_base_free(base_b);
}

static int cmp_double(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;

	return x < y ? -1 : x > y;
}

static double median(double *v, size_t n)
{
	qsort(v, n, sizeof(*v), cmp_double);
	return v[n / 2];
}

static void scenario_bench(const struct opts *o)
{
	static struct ocs_xc xcs[BENCH_CIRCUITS];
	double ofcd_ms[BENCH_ROUNDS], read_ms[BENCH_ROUNDS], del_ms[BENCH_ROUNDS];
	double ofctl_ms[BENCH_ROUNDS];
	struct result res = { 0 };
	struct unit u;
	char endpoint[64], path[512];
	double t0, ofcd, ofctl;
	FILE *f;
	int i;

	for (i = 0; i < BENCH_CIRCUITS; i++) {
		xcs[i].a = 2 * (uint32_t)i + 1;
		xcs[i].b = 2 * (uint32_t)i + 2;
	}
	snprintf(path, sizeof(path), "%s/bench-flows.txt", o->workdir);
	f = fopen(path, "w");
	if (!f)
		fail("%s: %s", path, strerror(errno));
	for (i = 0; i < BENCH_CIRCUITS; i++) {
		unsigned long long cookie = OFCD_COOKIE_TAG | (uint64_t)xcs[i].a << 24 | xcs[i].b;

		fprintf(f, "table=0,priority=1000,cookie=0x%llx,in_port=%u,actions=output:%u\n",
		        cookie, xcs[i].a, xcs[i].b);
		fprintf(f, "table=0,priority=1000,cookie=0x%llx,in_port=%u,actions=output:%u\n",
		        cookie, xcs[i].b, xcs[i].a);
	}
	fclose(f);

	snprintf(endpoint, sizeof(endpoint), "tcp:127.0.0.1:%s", o->bench_port);
	open_unit(&u, o->bench_bridge, endpoint, 2 * BENCH_CIRCUITS);
	wait_up(&u, 15000);
	for (i = 0; i < BENCH_ROUNDS; i++) {
		t0 = now_ms();
		if (apply(&u, &res, NULL, 0, xcs, BENCH_CIRCUITS) != 0)
			fail("%s: push: %d %s", u.bridge, res.status, res.err);
		ofcd_ms[i] = now_ms() - t0;
		t0 = now_ms();
		read_back(&u, &res);
		read_ms[i] = now_ms() - t0;
		if (res.nxcs != BENCH_CIRCUITS || res.npartial || res.nforeign)
			fail("%s: read back %zu circuits after the push", u.bridge, res.nxcs);
		if (i == 0)
			expect_dump(u.bridge, xcs, BENCH_CIRCUITS, 0);
		t0 = now_ms();
		if (apply(&u, &res, xcs, BENCH_CIRCUITS, NULL, 0) != 0)
			fail("%s: delete: %d %s", u.bridge, res.status, res.err);
		del_ms[i] = now_ms() - t0;
	}
	drv->close(u.h);

	for (i = 0; i < BENCH_ROUNDS; i++) {
		if (i)
			sh("ovs-ofctl -O OpenFlow13 del-flows %s", o->ofctl_bridge);
		t0 = now_ms();
		sh("ovs-ofctl -O OpenFlow13 --bundle add-flows %s %s", o->ofctl_bridge, path);
		ofctl_ms[i] = now_ms() - t0;
		if (i == 0)
			expect_dump(o->ofctl_bridge, xcs, BENCH_CIRCUITS, 0);
	}
	ofcd = median(ofcd_ms, BENCH_ROUNDS);
	ofctl = median(ofctl_ms, BENCH_ROUNDS);
	printf("# push of %d circuits (%d flows), median of %d rounds:\n", BENCH_CIRCUITS,
	       2 * BENCH_CIRCUITS, BENCH_ROUNDS);
	printf("#   ofcd openflow driver (apply to BARRIER_REPLY): %8.1f ms\n", ofcd);
	printf("#   ovs-ofctl --bundle add-flows (whole command):  %8.1f ms\n", ofctl);
	printf("#   ratio ofcd / ovs-ofctl: %.2f (target <= %.2f)\n", ofcd / ofctl, TARGET_RATIO);
	printf("#   ofcd read-back of %d flows: %.1f ms; delete of all: %.1f ms\n",
	       2 * BENCH_CIRCUITS, median(read_ms, BENCH_ROUNDS), median(del_ms, BENCH_ROUNDS));
	if (ofcd / ofctl > TARGET_RATIO)
		fail("push time ratio %.2f over the target %.2f", ofcd / ofctl, TARGET_RATIO);
	ok("push time within %.2fx of ovs-ofctl --bundle add-flows", TARGET_RATIO);
	result_reset(&res, NULL);
}

static void parse_opts(int argc, char **argv, struct opts *o)
{
	static const struct {
		const char *name;
		size_t off;
	} names[] = {
		{ "--ptcp-bridge", offsetof(struct opts, ptcp_bridge) },
		{ "--ptcp-port", offsetof(struct opts, ptcp_port) },
		{ "--tcp-bridge", offsetof(struct opts, tcp_bridge) },
		{ "--tcp-port", offsetof(struct opts, tcp_port) },
		{ "--bench-bridge", offsetof(struct opts, bench_bridge) },
		{ "--bench-port", offsetof(struct opts, bench_port) },
		{ "--ofctl-bridge", offsetof(struct opts, ofctl_bridge) },
		{ "--fence-bridge", offsetof(struct opts, fence_bridge) },
		{ "--fence-port", offsetof(struct opts, fence_port) },
		{ "--veth-peer", offsetof(struct opts, veth_peer) },
		{ "--vswitchd", offsetof(struct opts, vswitchd) },
		{ "--workdir", offsetof(struct opts, workdir) },
	};
	size_t i;
	int a;

	memset(o, 0, sizeof(*o));
	for (a = 1; a + 1 < argc; a += 2) {
		for (i = 0; i < sizeof(names) / sizeof(names[0]); i++) {
			if (strcmp(argv[a], names[i].name) == 0) {
				*(const char **)((char *)o + names[i].off) = argv[a + 1];
				break;
			}
		}
		if (i == sizeof(names) / sizeof(names[0]))
			fail("unknown option %s", argv[a]);
	}
	for (i = 0; i < sizeof(names) / sizeof(names[0]); i++) {
		if (!*(const char **)((char *)o + names[i].off))
			fail("missing %s (see the comment at the top of ovs_driver_check.c)",
			     names[i].name);
	}
}

int main(int argc, char **argv)
{
	struct opts o;
	struct unit p, t;

	setvbuf(stdout, NULL, _IOLBF, 0);
	/* a write to a socket the switch has closed must be an error, not a signal */
	signal(SIGPIPE, SIG_IGN);
	parse_opts(argc, argv, &o);
	base = event_base_new();
	drv = ocs_driver_find("openflow");
	if (!base || !drv)
		fail("no event base or no openflow driver");

	scenario_ptcp(&o, &p);
	scenario_tcp(&o, &t);
	scenario_restart(&o, &p, &t);
	drv->close(p.h);
	drv->close(t.h);
	scenario_fence(&o);
	scenario_bench(&o);
	event_base_free(base);
	printf("1..%u\n", nchecks);
	return 0;
}
