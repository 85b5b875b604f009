#include "cluster.h"

#include <errno.h>
#include <event2/event.h>
#include <jansson.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "etcd.h"
#include "log.h"
#include "monotonic.h"

/* Where a member stands in its own cycle. */
enum phase {
	PH_GRANT,    /* needs a lease (none, or the last one was lost) */
	PH_GRANTING, /* lease grant in flight */
	PH_CAMPAIGN, /* holds a lease, must run the create txn */
	PH_VOTING,   /* create txn in flight */
	PH_SETTLED,  /* leader, or follower watching the key */
	PH_RESIGNED, /* cluster_resign(): inert */
};

struct cluster {
	struct event_base *base;
	struct etcd_client *etcd;
	char name[65];
	char advertise[256];
	char key[160]; /* PREFIX/leader */
	unsigned ttl_s;
	cluster_role_fn fn;
	void *arg;

	enum phase phase;
	enum cluster_role role;
	int64_t lease;
	bool renewing;              /* keepalive in flight */
	struct timespec renew_sent; /* when the one in flight (or the grant) was sent */
	/*
	 * A second keepalive, to the next endpoint, while the first goes
	 * unanswered for a sixth of the TTL: a member that hangs (rather than
	 * refuses) holds a call for the whole call timeout, longer than the
	 * lease has left.
	 */
	bool hedging;                 /* the second one is in flight */
	struct timespec hedge_sent;   /* when it was sent */
	struct event *hedge;          /* sends it */
	struct event *deadline;       /* two thirds of a TTL after last_renewed */
	struct timespec last_renewed; /* send time of the last renewal etcd confirmed */
	char leader_name[65];
	char leader_advertise[256];
	int64_t generation;
	int64_t revision;
	/* cluster_confirm()'s caller, while its read is out (confirm_done NULL: none). */
	void (*confirm_done)(void *arg, int rc);
	void *confirm_arg;
	struct etcd_client *confirm_via;
	uint64_t confirm_round;            /* the confirmation out, or the last one */
	unsigned confirm_out;              /* its reads not answered yet */
	struct confirm_try *confirm_tries; /* every read not answered yet, any round */
	struct event *confirm_hedge;       /* sends the read again elsewhere */
	struct etcd_watch *watch;
	/* The revision of the last deletion of the key the watch told (0 once the watch ended):
	 * a vote that read a key created before it read a key that is gone. */
	int64_t deleted_at;
	struct event *tick;
	struct timespec hold_until; /* cluster_step_down(): no campaign before this */
	/*
	 * The generation it stepped down from (cluster_step_down()): should its
	 * key outlive the step-down, it is deleted again, never led under again.
	 */
	int64_t abandoned;
	bool abandoning;             /* that delete is in flight */
	void (*resigned)(void *arg); /* cluster_resign()'s done */
	void *resigned_arg;
};

/*
 * A read of cluster_confirm()'s: the first, or the same read sent to the next
 * endpoint after CONFIRM_HEDGE_MS without an answer (a member that hangs
 * holds a call for the whole call timeout, and the reads behind it). The
 * first answer of a round counts; a late one of an earlier round is dropped,
 * since it may have been read before the readers of this round came.
 */
struct confirm_try {
	struct cluster *c;
	uint64_t round;
	struct confirm_try *next;
};

#define CONFIRM_HEDGE_MS 1000

static void seen(struct cluster *c, int64_t revision)
{
	if (revision > c->revision)
		c->revision = revision;
}

static void set_role(struct cluster *c, enum cluster_role role)
{
	if (c->role == role)
		return;
	c->role = role;
	log_info("cluster", "%s is now %s (generation %lld)", c->name,
	         role == CLUSTER_LEADER ? "the leader" : "a follower", (long long)c->generation);
	c->fn(role, c->arg);
}

static void forget_leader(struct cluster *c)
{
	c->leader_name[0] = c->leader_advertise[0] = '\0';
	c->generation = 0;
}

/* Stops whatever this member did as leader or follower; it campaigns again. */
static void restart(struct cluster *c, enum phase phase, const char *why)
{
	if (c->role == CLUSTER_LEADER)
		log_warn("cluster", "stepping down: %s", why);
	etcd_watch_free(c->watch);
	c->watch = NULL;
	c->deleted_at = 0;
	forget_leader(c);
	c->phase = phase;
	set_role(c, CLUSTER_FOLLOWER);
}

static void learn_holder(struct cluster *c, const struct etcd_kv *kv)
{
	json_t *v = json_loadb((const char *)kv->value, kv->value_len, 0, NULL);
	const char *name = json_string_value(json_object_get(v, "name"));
	const char *adv = json_string_value(json_object_get(v, "advertise"));
	snprintf(c->leader_name, sizeof(c->leader_name), "%s", name ? name : "");
	snprintf(c->leader_advertise, sizeof(c->leader_advertise), "%s", adv ? adv : "");
	c->generation = kv->create_revision;
	json_decref(v);
}

static void step(struct cluster *c);
static bool renewal_overdue(struct cluster *c);

static void on_watch(int rc, const struct etcd_result *res, void *arg)
{
	struct cluster *c = arg;
	if (rc < 0 || res->canceled) {
		/* Lost sight of the key (etcd may also cancel a watch, e.g. past a compaction):
		 * read it again through the campaign txn. */
		etcd_watch_free(c->watch);
		c->watch = NULL;
		/* What it told is known to the next watch's start: etcd may even have gone back. */
		c->deleted_at = 0;
		if (c->phase == PH_SETTLED)
			c->phase = PH_CAMPAIGN;
		step(c);
		return;
	}
	seen(c, res->revision);
	for (size_t i = 0; i < res->nkvs; i++)
		if (res->kvs[i].deleted && res->kvs[i].mod_revision > c->deleted_at)
			c->deleted_at = res->kvs[i].mod_revision;
	for (size_t i = 0; i < res->nkvs; i++)
		if (res->kvs[i].deleted && c->role == CLUSTER_LEADER) {
			/* A member woken past its lease's end says so first: its key expired. */
			if (!renewal_overdue(c))
				restart(c, PH_CAMPAIGN, "the leader key was deleted");
		} else if (res->kvs[i].deleted && c->phase == PH_SETTLED) {
			forget_leader(c);
			c->phase = PH_CAMPAIGN;
		}
	step(c);
}

static void on_revoked(int rc, const struct etcd_result *res, void *arg)
{
	struct cluster *c = arg;
	(void)rc;
	(void)res;
	if (c->resigned)
		c->resigned(c->resigned_arg);
}

static void revoke(struct cluster *c)
{
	if ((c->lease == 0 || etcd_call(c->etcd, "/v3/lease/revoke", etcd_req_lease_id(c->lease),
	                                on_revoked, c) < 0) &&
	    c->resigned)
		c->resigned(c->resigned_arg);
}

static void on_key_deleted(int rc, const struct etcd_result *res, void *arg)
{
	(void)rc;
	(void)res;
	revoke(arg);
}

void cluster_resign(struct cluster *c, void (*done)(void *arg), void *arg)
{
	bool leading = c->role == CLUSTER_LEADER;
	int64_t generation = c->generation;
	c->resigned = done;
	c->resigned_arg = arg;
	event_del(c->tick);
	event_del(c->deadline);
	event_del(c->hedge);
	etcd_watch_free(c->watch);
	c->watch = NULL;
	c->phase = PH_RESIGNED;
	forget_leader(c);
	if (leading)
		log_info("cluster", "%s resigns the leadership", c->name);
	set_role(c, CLUSTER_FOLLOWER);
	/* Guarded: the key goes only if it is still the one this member created. */
	if (!leading ||
	    etcd_call(c->etcd, "/v3/kv/txn", etcd_req_delete_guarded(c->key, generation),
	              on_key_deleted, c) < 0)
		revoke(c);
}

static void on_abandoned(int rc, const struct etcd_result *res, void *arg)
{
	struct cluster *c = arg;
	(void)res;
	c->abandoning = false;
	/* Gone, or the next campaign finds it again and tries once more. */
	if (rc == 0 && c->phase == PH_CAMPAIGN)
		step(c);
}

/* Deletes the leader key of the generation it stepped down from, if it is still that one. */
static void abandon(struct cluster *c)
{
	if (c->abandoning)
		return;
	c->abandoning =
	    etcd_call(c->etcd, "/v3/kv/txn", etcd_req_delete_guarded(c->key, c->abandoned),
	              on_abandoned, c) == 0;
}

void cluster_step_down(struct cluster *c, unsigned hold_s)
{
	if (c->role != CLUSTER_LEADER)
		return;
	/* Woken past its lease's end: that is why, and its key goes with the lease. */
	if (renewal_overdue(c)) {
		step(c);
		return;
	}
	c->abandoned = c->generation;
	clock_gettime(CLOCK_MONOTONIC, &c->hold_until);
	c->hold_until.tv_sec += hold_s;
	restart(c, PH_CAMPAIGN, "it cannot lead");
	abandon(c);
}

static void on_vote(int rc, const struct etcd_result *res, void *arg)
{
	struct cluster *c = arg;
	if (c->phase != PH_VOTING)
		return;
	if (rc < 0) {
		c->phase = PH_CAMPAIGN; /* the next tick tries again */
		return;
	}
	seen(c, res->revision);
	if (!res->succeeded && res->nkvs == 0) {
		/* The key vanished between compare and read: campaign again. */
		c->phase = PH_CAMPAIGN;
		step(c);
		return;
	}
	/* The put created the key at the txn's revision; else it is an earlier one's. */
	bool ours = res->succeeded || res->kvs[0].lease == c->lease;
	int64_t generation = res->succeeded ? res->revision : res->kvs[0].create_revision;
	if (generation < c->deleted_at) {
		/*
		 * The watch told of the key's deletion before this answer came (the
		 * vote went to a slower etcd member): whoever it names leads no more.
		 */
		c->phase = PH_CAMPAIGN;
		step(c);
		return;
	}
	if (ours && generation == c->abandoned && c->role != CLUSTER_LEADER) {
		/*
		 * The key it stepped down from outlived the step-down (etcd did not
		 * take its delete) and lives on with the lease. Leading under it
		 * again would let an append of that leadership, still on its way,
		 * land after this one caught up with the log: only a new key's
		 * generation fences those out.
		 */
		log_warn("cluster",
		         "%s still holds the leader key of generation %lld it stepped "
		         "down from: deleting it before it campaigns again",
		         c->name, (long long)generation);
		c->phase = PH_CAMPAIGN;
		abandon(c);
		return;
	}
	if (c->role == CLUSTER_LEADER && (!ours || generation != c->generation)) {
		/* The key it led under went while it did not watch: that leadership is over. */
		restart(c, PH_CAMPAIGN, "the leader key was deleted");
		if (ours) {
			step(c); /* its new key: leads again under a new generation */
			return;
		}
	}
	if (ours) {
		/* Its own (an earlier try of this txn may have got through before failing over). */
		snprintf(c->leader_name, sizeof(c->leader_name), "%s", c->name);
		snprintf(c->leader_advertise, sizeof(c->leader_advertise), "%s", c->advertise);
		c->generation = generation;
	} else {
		learn_holder(c, &res->kvs[0]);
	}
	c->phase = PH_SETTLED;
	/*
	 * Leader and follower alike watch the key from the txn's revision on, so
	 * that no change of it slips between: a leader whose key is deleted
	 * (etcdctl del, to move the leadership) must stop leading at once.
	 */
	if (!c->watch && etcd_watch(c->etcd, etcd_req_watch(c->key, false, res->revision + 1),
	                            on_watch, c, &c->watch) < 0)
		c->phase = PH_CAMPAIGN;
	if (ours)
		set_role(c, CLUSTER_LEADER);
}

/*
 * etcd counts the TTL from when it handled the last renewal, which was after
 * we sent it: two thirds of the TTL after that send, a third is left for the
 * daemon to stop before another member can win. Checked by a timer set for
 * that moment, not only on the renewal ticks, which may come a period late.
 */
static bool holds_lease(const struct cluster *c)
{
	return c->phase != PH_GRANT && c->phase != PH_GRANTING && c->lease != 0;
}

static bool renewal_overdue(struct cluster *c)
{
	double late = mono_since(&c->last_renewed) - c->ttl_s * 2.0 / 3.0;
	if (!holds_lease(c) || c->phase == PH_RESIGNED || late < 0)
		return false;
	/* When, on the wall clock, it stopped driving units: what a switch's log can be read
	 * against. */
	struct timespec wall;
	clock_gettime(CLOCK_REALTIME, &wall);
	double deadline = (double)wall.tv_sec + (double)wall.tv_nsec / 1e9 - late;
	char why[128];
	snprintf(
	    why, sizeof(why),
	    "the lease could not be renewed in time (its deadline passed at %.3f, %.0f ms ago)",
	    deadline, late * 1e3);
	c->lease = 0;
	restart(c, PH_GRANT, why);
	return true;
}

static void arm_deadline(struct cluster *c)
{
	double left = c->ttl_s * 2.0 / 3.0 - mono_since(&c->last_renewed);
	if (left < 0)
		left = 0;
	struct timeval tv = { .tv_sec = (time_t)left,
		              .tv_usec = (suseconds_t)((left - (double)(time_t)left) * 1e6) };
	evtimer_add(c->deadline, &tv);
}

static void on_deadline(evutil_socket_t fd, short what, void *arg)
{
	struct cluster *c = arg;
	(void)fd;
	(void)what;
	if (renewal_overdue(c))
		step(c);
}

static void on_grant(int rc, const struct etcd_result *res, void *arg)
{
	struct cluster *c = arg;
	if (c->phase != PH_GRANTING)
		return;
	if (rc < 0 || res->lease_id == 0) {
		c->phase = PH_GRANT;
		return;
	}
	seen(c, res->revision);
	c->lease = res->lease_id;
	c->last_renewed = c->renew_sent; /* the grant's send time */
	arm_deadline(c);
	c->phase = PH_CAMPAIGN;
	step(c);
}

/* A keepalive sent at sent was answered: the lease lives from then on, or is gone. */
static void renewed(struct cluster *c, int rc, const struct etcd_result *res,
                    const struct timespec *sent)
{
	if (rc < 0 || res->lease_id != c->lease || c->phase == PH_RESIGNED)
		return; /* the deadline check decides */
	seen(c, res->revision);
	if (res->ttl <= 0) {
		c->lease = 0;
		restart(c, PH_GRANT, "the lease expired");
		step(c);
		return;
	}
	/* Answers may come out of order: the later send is the later renewal. */
	if (mono_diff(&c->last_renewed, sent) > 0)
		c->last_renewed = *sent;
	arm_deadline(c);
}

static void on_renew(int rc, const struct etcd_result *res, void *arg)
{
	struct cluster *c = arg;
	c->renewing = false;
	evtimer_del(c->hedge);
	renewed(c, rc, res, &c->renew_sent);
}

static void on_renew_hedged(int rc, const struct etcd_result *res, void *arg)
{
	struct cluster *c = arg;
	c->hedging = false;
	renewed(c, rc, res, &c->hedge_sent);
}

/* The keepalive in flight is slow to answer: another one goes to the next endpoint. */
static void send_hedge(struct cluster *c)
{
	if (c->hedging || !holds_lease(c) || c->phase == PH_RESIGNED)
		return;
	c->hedging = true;
	clock_gettime(CLOCK_MONOTONIC, &c->hedge_sent);
	if (etcd_call_elsewhere(c->etcd, "/v3/lease/keepalive", etcd_req_lease_id(c->lease),
	                        on_renew_hedged, c) < 0)
		c->hedging = false;
}

static void on_hedge(evutil_socket_t fd, short what, void *arg)
{
	struct cluster *c = arg;
	(void)fd;
	(void)what;
	if (c->renewing)
		send_hedge(c);
}

/* Starts what the phase calls for, if nothing is in flight. */
static void step(struct cluster *c)
{
	char *body;
	json_t *v;
	switch (c->phase) {
	case PH_GRANT:
		c->phase = PH_GRANTING;
		clock_gettime(CLOCK_MONOTONIC, &c->renew_sent);
		if (etcd_call(c->etcd, "/v3/lease/grant", etcd_req_lease_grant(c->ttl_s), on_grant,
		              c) < 0)
			c->phase = PH_GRANT;
		break;
	case PH_CAMPAIGN:
		if (mono_since(&c->hold_until) < 0)
			break; /* stepped down: the next tick campaigns again */
		v = json_pack("{s:s, s:s}", "name", c->name, "advertise", c->advertise);
		body = v ? json_dumps(v, JSON_COMPACT) : NULL;
		json_decref(v);
		if (!body)
			break;
		c->phase = PH_VOTING;
		if (etcd_call(c->etcd, "/v3/kv/txn",
		              etcd_req_create(c->key, body, strlen(body), c->lease), on_vote,
		              c) < 0)
			c->phase = PH_CAMPAIGN;
		free(body);
		break;
	case PH_GRANTING:
	case PH_VOTING:
	case PH_SETTLED:
	case PH_RESIGNED:
		break;
	}
}

static void on_tick(evutil_socket_t fd, short what, void *arg)
{
	struct cluster *c = arg;
	(void)fd;
	(void)what;
	if (!renewal_overdue(c) && holds_lease(c) && c->renewing) {
		send_hedge(c); /* the last one is still unanswered a period later */
	} else if (!renewal_overdue(c) && holds_lease(c)) {
		c->renewing = true;
		clock_gettime(CLOCK_MONOTONIC, &c->renew_sent);
		if (etcd_call(c->etcd, "/v3/lease/keepalive", etcd_req_lease_id(c->lease), on_renew,
		              c) < 0) {
			c->renewing = false;
		} else {
			double sixth = c->ttl_s / 6.0;
			struct timeval tv = { .tv_sec = (time_t)sixth,
				              .tv_usec =
				                  (suseconds_t)((sixth - (time_t)sixth) * 1e6) };
			evtimer_add(c->hedge, &tv);
		}
	}
	step(c);
}

static void on_confirm(int rc, const struct etcd_result *res, void *arg)
{
	struct confirm_try *t = arg;
	struct cluster *c = t->c;
	bool current = t->round == c->confirm_round && c->confirm_done;
	for (struct confirm_try **p = &c->confirm_tries; *p; p = &(*p)->next)
		if (*p == t) {
			*p = t->next;
			break;
		}
	free(t);
	if (!current)
		return;
	c->confirm_out--;
	if (rc < 0 && c->confirm_out > 0)
		return; /* the other read may yet answer */
	void (*done)(void *arg, int rc) = c->confirm_done;
	c->confirm_done = NULL;
	evtimer_del(c->confirm_hedge);
	if (rc < 0)
		rc = -EHOSTUNREACH;
	else if (c->role != CLUSTER_LEADER || res->nkvs != 1 ||
	         res->kvs[0].create_revision != c->generation)
		rc = -ESTALE;
	done(c->confirm_arg, rc);
}

static int send_confirm(struct cluster *c, bool elsewhere)
{
	struct confirm_try *t = calloc(1, sizeof(*t));
	char *body = t ? etcd_req_range(c->key, false, 0) : NULL;
	if (!body) {
		free(t);
		return -ENOMEM;
	}
	*t = (struct confirm_try){ .c = c, .round = c->confirm_round };
	int rc = elsewhere
	             ? etcd_call_elsewhere(c->confirm_via, "/v3/kv/range", body, on_confirm, t)
	             : etcd_call(c->confirm_via, "/v3/kv/range", body, on_confirm, t);
	if (rc < 0) {
		free(t);
		return rc;
	}
	t->next = c->confirm_tries;
	c->confirm_tries = t;
	c->confirm_out++;
	return 0;
}

static void on_confirm_hedge(evutil_socket_t fd, short what, void *arg)
{
	struct cluster *c = arg;
	(void)fd;
	(void)what;
	if (!c->confirm_done || c->confirm_out != 1 || etcd_endpoints(c->confirm_via) < 2)
		return;
	const char *first = etcd_endpoint(c->confirm_via);
	if (send_confirm(c, true) == 0)
		log_warn("cluster",
		         "confirming the leadership: no answer from %s in %d ms; asked the next "
		         "etcd member too",
		         first, CONFIRM_HEDGE_MS);
}

int cluster_start(struct event_base *base, const struct ofcd_config *cfg, cluster_role_fn fn,
                  void *arg, struct cluster **out)
{
	struct cluster *c = calloc(1, sizeof(*c));
	int rc;
	if (!c)
		return -ENOMEM;
	c->base = base;
	c->fn = fn;
	c->arg = arg;
	c->ttl_s = cfg->cluster_lease_ttl_s;
	snprintf(c->name, sizeof(c->name), "%s", cfg->cluster_name);
	snprintf(c->advertise, sizeof(c->advertise), "%s", cfg->cluster_advertise);
	snprintf(c->key, sizeof(c->key), "%s/leader", cfg->cluster_prefix);
	/* A call that hangs longer than a renewal period is as good as lost. */
	unsigned timeout_s = c->ttl_s / 3 ? c->ttl_s / 3 : 1;
	rc = etcd_client_new(base, cfg->cluster_endpoints, cfg->cluster_nendpoints, timeout_s,
	                     &c->etcd);
	struct timeval period = { .tv_sec = c->ttl_s / 3,
		                  .tv_usec = (suseconds_t)(c->ttl_s % 3) * 1000000 / 3 };
	if (rc == 0 && !(c->tick = event_new(base, -1, EV_PERSIST, on_tick, c)))
		rc = -ENOMEM;
	if (rc == 0 && !(c->deadline = evtimer_new(base, on_deadline, c)))
		rc = -ENOMEM;
	if (rc == 0 && !(c->hedge = evtimer_new(base, on_hedge, c)))
		rc = -ENOMEM;
	if (rc == 0 && !(c->confirm_hedge = evtimer_new(base, on_confirm_hedge, c)))
		rc = -ENOMEM;
	if (rc == 0 && event_add(c->tick, &period) < 0)
		rc = -ENOMEM;
	if (rc < 0) {
		cluster_free(c);
		return rc;
	}
	c->phase = PH_GRANT;
	c->role = CLUSTER_FOLLOWER;
	step(c);
	*out = c;
	return 0;
}

int cluster_confirm(struct cluster *c, struct etcd_client *via, void (*done)(void *arg, int rc),
                    void *arg)
{
	if (c->role != CLUSTER_LEADER)
		return -ESTALE;
	if (c->confirm_done)
		return -EBUSY;
	c->confirm_via = via;
	c->confirm_round++;
	c->confirm_out = 0;
	int rc = send_confirm(c, false);
	if (rc < 0)
		return rc;
	c->confirm_done = done;
	c->confirm_arg = arg;
	struct timeval hedge = { CONFIRM_HEDGE_MS / 1000, (CONFIRM_HEDGE_MS % 1000) * 1000 };
	evtimer_add(c->confirm_hedge, &hedge);
	return 0;
}

void cluster_free(struct cluster *c)
{
	if (!c)
		return;
	if (c->tick)
		event_free(c->tick);
	if (c->deadline)
		event_free(c->deadline);
	if (c->hedge)
		event_free(c->hedge);
	if (c->confirm_hedge)
		event_free(c->confirm_hedge);
	while (c->confirm_tries) {
		struct confirm_try *t = c->confirm_tries;
		c->confirm_tries = t->next;
		free(t);
	}
	etcd_watch_free(c->watch);
	etcd_client_free(c->etcd);
	free(c);
}

enum cluster_role cluster_role(const struct cluster *c)
{
	return c->role;
}

const char *cluster_leader_name(const struct cluster *c)
{
	return c->leader_name;
}

const char *cluster_leader_advertise(const struct cluster *c)
{
	return c->leader_advertise;
}

int64_t cluster_generation(const struct cluster *c)
{
	return c->generation;
}

int64_t cluster_revision(const struct cluster *c)
{
	return c->revision;
}

bool cluster_in_touch(const struct cluster *c)
{
	return holds_lease(c) && mono_since(&c->last_renewed) < c->ttl_s * 2.0 / 3.0;
}

bool cluster_may_drive(const struct cluster *c)
{
	return c->role == CLUSTER_LEADER && cluster_in_touch(c);
}

int64_t cluster_lease(const struct cluster *c)
{
	return holds_lease(c) ? c->lease : 0;
}
