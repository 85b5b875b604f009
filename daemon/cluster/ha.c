#include "ha.h"

#include <errno.h>
#include <event2/event.h>
#include <event2/buffer.h>
#include <event2/http.h>
#include <event2/keyvalq_struct.h>
#include <inttypes.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "apply.h"
#include "cluster.h"
#include "etcd.h"
#include "base/events.h"
#include "log.h"
#include "log_bundle.h"
#include "log_part.h"
#include "base/metrics.h"
#include "replica.h"
#include "state/store_changes.h"
#include "url.h"
#include "monotonic.h"

/*
 * etcd's default --max-request-bytes is 1.5 MiB; an entry travels base64
 * encoded (4/3) inside a JSON txn. A larger change goes in parts
 * (log_part.h), up to HA_MAX_CHANGE: an 8,192-server topology is about 25 MB,
 * and every entry stays in etcd until trimmed.
 */
#define HA_MAX_ENTRY  (1100u * 1024u)
#define HA_MAX_CHANGE (64u * 1024u * 1024u)

/*
 * An append unanswered this long is sent again to the next etcd member: one
 * that hangs (a stalled disk, a frozen process: connections open, no answer)
 * would otherwise hold every write for the whole call timeout (10 s). Far
 * above an append's ordinary latency, even a 1 MiB part's.
 */
#define HA_HEDGE_APPEND_MS 1000

#define HEDGES_HELP                                                                                \
	"Appends sent again to the next etcd member because the first got no answer in time."

/* An entry this leader put in the log, for trimming it later. */
struct logged {
	char *key;
	int64_t revision;
};

/*
 * The member's whole HA state, one of these and nothing else (docs/ha.md
 * draws it): enter() alone changes it, and checks what each state means.
 */
enum member_state {
	MEMBER_FOLLOWING,   /* follows the log; writes go to the leader; drives nothing */
	MEMBER_RESYNCING,   /* copies the leader's store: its own cannot follow the log */
	MEMBER_CATCHING_UP, /* elected: applies the rest of the log before it leads */
	MEMBER_LEADING,     /* takes writes, appends them, drives the units */
	MEMBER_LEFT,        /* resigned for a graceful stop: neither leads nor follows */
	MEMBER_STATES
};

static const char *const MEMBER_STATE_NAMES[MEMBER_STATES] = { "following", "resyncing",
	                                                       "catching_up", "leading", "left" };

/* What an entry of the log carries. */
enum append_kind {
	APPEND_WRITE,  /* a client's write, whole (the fabric states waiting may ride along) */
	APPEND_PART,   /* a part of a client's write too large for one entry */
	APPEND_STATES, /* the reconciler's fabric states, alone */
	APPEND_KINDS
};

static const char *const APPEND_KIND_NAMES[APPEND_KINDS] = { "write", "part", "states" };

/*
 * One try of the head entry, sent to etcd (the call's argument). Tries of one
 * send run side by side (the first and its hedge): the first answer counts,
 * and ends every try sent before it (tries_from), whose answers come for
 * nothing.
 */
struct append_try {
	struct ha *h;
	uint64_t seq;
	struct append_try *next, *prev; /* the tries in flight, to free at the end */
};

/* An entry for the log, in order: the first is in etcd's hands. */
struct append {
	char key[224];
	int64_t generation; /* the leadership it was made under, and must still be */
	const void *data;   /* the entry's value: the whole change, or a part of it */
	size_t len;
	void *owned; /* data, when it is a part's frame (owned) */
	/* The change (a bundle, owned), on the entry that completes it: what is applied here. */
	void *change;
	size_t change_len;
	enum append_kind kind;
	bool more;       /* a part of a change whose later parts follow it (done is on the last) */
	bool sent;       /* sent at least once: a retry sends the very same entry */
	bool unanswered; /* a try got no answer: it may be in the log */
	bool hedged;     /* a send of it was tried twice at once: the other may be in */
	int64_t floor_rev;          /* the log floor's mod revision its latest try required */
	struct timespec first_sent; /* CLOCK_MONOTONIC */
	ha_append_done done;
	void *done_arg;
	struct append *next;
};

struct ha {
	struct ha_deps d;
	struct cluster *cluster;
	/* Its store is a copy of the leader's that has applied no entry since: on_snapshot(). */
	bool copied;
	/* ha_confirm()'s caller, while its confirmation is out. */
	void (*confirm_done)(void *arg, int rc);
	void *confirm_arg;
	/*
	 * Its own client for the log, members, trims and the confirmations of
	 * consistent reads: the election's lease renewals never wait behind a
	 * large append, a catch-up read or a read etcd holds on the same
	 * connection.
	 */
	struct etcd_client *etcd;
	char name[65];
	char advertise[256];
	char prefix[128];
	char leader_key[160];
	char members_prefix[160];
	unsigned ttl_s;

	enum member_state state;
	uint64_t transitions[MEMBER_STATES][MEMBER_STATES]; /* by from and to */
	uint64_t violations;                                /* invariants found broken */
	int64_t generation; /* of this member's leadership, while it leads */
	uint64_t seq;       /* entries appended under generation */
	struct replica *replica;
	struct event *retry; /* restarts following or catching up */
	unsigned retry_ms;   /* its last wait (retry_later()); 0 after a success */
	/* A candidate's reads of the log failing in a row since (candidate_gives_up()). */
	bool catch_up_failing;
	struct timespec catch_up_failing_since; /* CLOCK_MONOTONIC */
	struct append *pending; /* entries for the log, oldest first: the head is in flight */
	struct append *pending_tail;
	bool sending; /* the head was sent (or waits to be sent again) and has no answer yet */
	struct event *retry_append;
	struct event *hedge_append; /* sends the head again elsewhere (HA_HEDGE_APPEND_MS) */
	struct append_try *tries;   /* in flight */
	uint64_t try_seq;           /* the last try's */
	uint64_t tries_from;        /* answers of tries before this one are not waited for */
	unsigned inflight;          /* tries of the head's last send still unanswered */
	unsigned riders_refused; /* entries carrying them etcd refused in a row (riders_back()) */
	void *states; /* fabric-state changes waiting to go to the log, merged into one */
	size_t states_len;
	json_t *events; /* the events published while leading, waiting to go with them */
	struct events_sub *shipping; /* the leader's own bus, for them */
	struct event *states_timer;

	struct logged *logged; /* this leadership's entries in the log, oldest first */
	size_t nlogged, logged_cap;
	size_t trimming;         /* entries the trim txn in flight removes; 0: none */
	int64_t trim_generation; /* the leadership that sent it */
	char floor_key[160];     /* PREFIX/log_floor */
	int64_t floor_rev;       /* its mod revision as last seen (0: none): appends require it */
	unsigned log_keep;
	char token[256];

	struct evhttp_connection *snap_conn; /* the snapshot's, while resyncing */
	bool snap_answered;                  /* on_snapshot() ran for the request last made */

	struct event *tick; /* publishes this member, reads the others */
	bool publishing;    /* a put or range of the members is in flight */
	json_t *members;    /* the others as last read: array of objects */
	uint64_t role_changes;
	uint64_t appended[APPEND_KINDS]; /* entries this member sent to the log, by kind */
	uint64_t states_along;           /* times the fabric states rode along with a write */
	struct hook role_hook;           /* ha_role listeners */
	struct hook applied_hook;        /* apply_done listeners: every change applied */
	void (*resigned)(void *arg);
	void *resigned_arg;
};

static const char *state_role(const struct ha *h)
{
	return h->state == MEMBER_LEADING       ? "leader"
	       : h->state == MEMBER_CATCHING_UP ? "candidate"
	                                        : "follower";
}

static int64_t applied_revision(struct ha *h)
{
	int64_t rev = store_applied_revision(h->d.store);
	return rev < 0 ? 0 : rev;
}

static void publish_role(struct ha *h)
{
	const char *leader = cluster_leader_name(h->cluster);
	events_publish(h->d.events, EVENTS_CLUSTER_ROLE,
	               json_pack("{s:s, s:s, s:s?, s:I}", "self", h->name, "role", state_role(h),
	                         "leader", leader[0] ? leader : NULL, "generation",
	                         (json_int_t)cluster_generation(h->cluster)));
}

/* ---- the state machine ------------------------------------------------------ */

/* What the state the member is in means; a breach is logged and counted (each one a bug). */
static void check_state(struct ha *h)
{
	bool driving = h->d.driving && h->d.driving(h->d.arg);
	const char *bad = NULL;
	switch (h->state) {
	case MEMBER_LEADING:
		bad = h->replica                                   ? "a leader runs no replica"
		      : cluster_role(h->cluster) != CLUSTER_LEADER ? "a leader holds the leader key"
		      : h->generation != cluster_generation(h->cluster)
		          ? "a leader's generation is its "
		            "lease's"
		      : !driving ? "a leader drives the units"
		                 : NULL;
		break;
	case MEMBER_CATCHING_UP:
		bad = driving         ? "a candidate drives no unit"
		      : h->generation ? "a candidate has no generation yet"
		      : cluster_role(h->cluster) != CLUSTER_LEADER
		          ? "a candidate holds the leader key"
		          : NULL;
		break;
	case MEMBER_RESYNCING:
		bad = driving      ? "a member copying a snapshot drives no unit"
		      : h->replica ? "a member copying a snapshot runs no replica"
		                   : NULL;
		break;
	case MEMBER_FOLLOWING:
	case MEMBER_LEFT:
	default:
		bad = driving                     ? "a follower drives no unit"
		      : h->generation             ? "a follower has no generation"
		      : h->pending && !h->sending ? "a follower sends nothing to the log"
		                                  : NULL;
		break;
	}
	if (!bad)
		return;
	h->violations++;
	log_error("cluster", "%s is %s but an invariant is broken: %s", h->name,
	          MEMBER_STATE_NAMES[h->state], bad);
}

static void leave_leading(struct ha *h);
static void on_shipped(void *arg, const struct events_msg *msg);

/*
 * The one transition function: from the state the member is in to to, for
 * why. It logs and counts the transition, stops or starts the driving of the
 * units when leading ends or begins (the role hook), tells clients when the
 * role changes, and checks the state it ends in.
 */
static void enter(struct ha *h, enum member_state to, const char *why)
{
	enum member_state from = h->state;
	if (from == to)
		return;
	const char *role = state_role(h);
	h->state = to;
	h->transitions[from][to]++;
	log_info("cluster", "%s: %s -> %s (%s)", h->name, MEMBER_STATE_NAMES[from],
	         MEMBER_STATE_NAMES[to], why);
	if (from == MEMBER_LEADING)
		leave_leading(h);
	if (strcmp(role, state_role(h)) != 0) {
		h->role_changes++;
		publish_role(h);
	}
	if (to == MEMBER_CATCHING_UP)
		h->catch_up_failing = false;
	if (to == MEMBER_LEADING) {
		/* Its events' ids are its leadership's, which its followers publish them under. */
		char instance[EVENTS_INSTANCE_MAX];
		snprintf(instance, sizeof(instance), "g%" PRId64, h->generation);
		events_set_instance(h->d.events, instance);
		h->shipping = events_subscribe(
		    h->d.events, EVENTS_PUBLIC & ~EVENTS_BIT(EVENTS_CLUSTER_ROLE), on_shipped, h);
		ha_role_hook_call(&h->role_hook, HA_NOW_LEADING, h->generation);
	}
	/* A listener may have moved it on already (a reconciler that cannot start). */
	check_state(h);
}

/* ---- the log --------------------------------------------------------------- */

static void start_replica(struct ha *h);

static void on_retry(evutil_socket_t fd, short what, void *arg)
{
	(void)fd;
	(void)what;
	start_replica(arg);
}

/*
 * Waits before following (or catching up) again: 200 ms, twice that after
 * each failure in a row, at most RETRY_MAX_MS, so that a store or an etcd
 * that fails for long (a full disk) is not asked five times a second.
 */
#define RETRY_MAX_MS 2000

static void retry_later(struct ha *h)
{
	h->retry_ms = h->retry_ms ? 2 * h->retry_ms : 200;
	if (h->retry_ms > RETRY_MAX_MS)
		h->retry_ms = RETRY_MAX_MS;
	struct timeval tv = { h->retry_ms / 1000, (suseconds_t)(h->retry_ms % 1000) * 1000 };
	evtimer_add(h->retry, &tv);
}

static void resync(struct ha *h, int why);

/*
 * A candidate holds the leader key while it reads the rest of the log. One
 * whose reads keep failing for now (its disk full, its store held by another
 * process) would leave the cluster without a leader for as long: after a
 * lease TTL of failures in a row, another member may lead.
 */
static bool candidate_gives_up(struct ha *h)
{
	if (!h->catch_up_failing) {
		h->catch_up_failing = true;
		clock_gettime(CLOCK_MONOTONIC, &h->catch_up_failing_since);
		return false;
	}
	if (mono_since(&h->catch_up_failing_since) < h->ttl_s)
		return false;
	ha_hand_over(h, "it could not read the rest of the log for a lease TTL");
	return true;
}

static void on_caught_up(void *arg, int rc)
{
	struct ha *h = arg;
	if (rc == -ESTALE || rc == -EPROTO || rc == -EXDEV || rc == -ENOENT) {
		replica_free(h->replica);
		h->replica = NULL;
		if (h->state == MEMBER_CATCHING_UP) {
			/* Its store cannot become the log's: a member whose can should lead. */
			ha_hand_over(h, rc == -EXDEV ? "etcd's revision is behind its store"
			                : rc == -ENOENT
			                    ? "the log lacks the change its store applied last"
			                    : "it cannot catch up with the log");
			return;
		}
		resync(h, rc);
		return;
	}
	if (rc < 0) {
		log_warn("cluster", "cannot read the replication log: %s", strerror(-rc));
		replica_free(h->replica);
		h->replica = NULL;
		if (h->state != MEMBER_CATCHING_UP || !candidate_gives_up(h))
			retry_later(h);
		return;
	}
	h->retry_ms = 0;
	h->catch_up_failing = false;
	if (h->state != MEMBER_CATCHING_UP)
		return; /* a follower goes on following */
	replica_free(h->replica);
	h->replica = NULL;
	h->generation = cluster_generation(h->cluster);
	h->seq = 0; /* a member never leads twice under one generation (cluster.h) */
	char why[96];
	snprintf(why, sizeof(why), "caught up at revision %" PRId64 ", generation %" PRId64,
	         applied_revision(h), h->generation);
	enter(h, MEMBER_LEADING, why);
}

static void on_stopped(void *arg, int rc)
{
	struct ha *h = arg;
	replica_free(h->replica);
	h->replica = NULL;
	if (rc == -EPROTO || rc == -ESTALE)
		resync(h, rc);
	else
		retry_later(h);
}

/* The replica's changes go the one way every change goes (apply.h). */
static int on_replica_apply(void *arg, int64_t revision, const char *key, const void *change,
                            size_t len)
{
	struct ha *h = arg;
	int rc = apply_change(h->d.store, revision, key, change, len, false, &h->applied_hook);
	if (rc == 0) {
		h->retry_ms = 0;
		h->catch_up_failing = false; /* a long catch-up that goes on is no failure */
		h->copied = false;           /* its last change is now one the log holds */
	}
	return rc;
}

/* Follows the log (a follower) or reads the rest of it (just elected). */
static void start_replica(struct ha *h)
{
	if (h->replica || (h->state != MEMBER_FOLLOWING && h->state != MEMBER_CATCHING_UP))
		return;
	struct replica_cbs cbs = { .apply = on_replica_apply,
		                   .caught_up = on_caught_up,
		                   .stopped = on_stopped,
		                   .arg = h };
	if (replica_start(h->etcd, h->d.store, h->prefix, applied_revision(h), !h->copied,
	                  h->state == MEMBER_FOLLOWING, &cbs, &h->replica) < 0)
		retry_later(h);
}

static void send_append(struct ha *h);
static void append_over(struct ha *h, int rc, int64_t revision);
static void on_append(int rc, const struct etcd_result *res, void *arg);

static void try_free(struct append_try *t)
{
	if (t->prev)
		t->prev->next = t->next;
	else
		t->h->tries = t->next;
	if (t->next)
		t->next->prev = t->prev;
	free(t);
}

/* Sends the head entry a (again), to the current etcd member or the next one. Returns 0 or < 0. */
static int send_try(struct ha *h, struct append *a, bool elsewhere)
{
	struct append_try *t = calloc(1, sizeof(*t));
	if (!t)
		return -ENOMEM;
	*t = (struct append_try){ .h = h, .seq = ++h->try_seq, .next = h->tries };
	if (h->tries)
		h->tries->prev = t;
	h->tries = t;
	char *body = etcd_req_append(h->leader_key, a->generation, a->key, a->data, a->len,
	                             h->floor_key, a->floor_rev);
	int rc = elsewhere ? etcd_call_elsewhere(h->etcd, "/v3/kv/txn", body, on_append, t)
	                   : etcd_call(h->etcd, "/v3/kv/txn", body, on_append, t);
	if (rc < 0)
		try_free(t);
	else
		h->inflight++;
	return rc;
}

static void on_hedge_append(evutil_socket_t fd, short what, void *arg)
{
	struct ha *h = arg;
	(void)fd;
	(void)what;
	struct append *a = h->pending;
	/* One endpoint: the same member, behind the first try on its connection. */
	if (!h->sending || !a || etcd_endpoints(h->etcd) < 2)
		return;
	const char *first = etcd_endpoint(h->etcd);
	if (send_try(h, a, true) < 0)
		return; /* the first try's timeout still ends it */
	/* The first try may still land: a failed compare that finds the entry is this one. */
	a->hedged = true;
	metrics_counter_add("ofcd_cluster_append_hedges_total", HEDGES_HELP, NULL, 1);
	log_warn("cluster",
	         "appending %s: no answer from %s in %d ms; sent again to the next etcd member",
	         a->key, first, HA_HEDGE_APPEND_MS);
}

static void on_retry_append(evutil_socket_t fd, short what, void *arg)
{
	(void)fd;
	(void)what;
	send_append(arg);
}

static void note_logged(struct ha *h, const char *key, int64_t revision)
{
	if (h->nlogged == h->logged_cap) {
		size_t cap = h->logged_cap ? 2 * h->logged_cap : 64;
		struct logged *l = realloc(h->logged, cap * sizeof(*l));
		if (!l)
			return; /* not trimmed for now: the next entries try again */
		h->logged = l;
		h->logged_cap = cap;
	}
	char *k = strdup(key);
	if (k)
		h->logged[h->nlogged++] = (struct logged){ k, revision };
}

static void forget_logged(struct ha *h, size_t n)
{
	if (n == 0)
		return;
	for (size_t i = 0; i < n; i++)
		free(h->logged[i].key);
	memmove(h->logged, h->logged + n, (h->nlogged - n) * sizeof(*h->logged));
	h->nlogged -= n;
}

static void append_free(struct append *a)
{
	free(a->owned);
	free(a->change);
	free(a);
}

static struct append *pop(struct ha *h)
{
	struct append *a = h->pending;
	h->pending = a->next;
	if (!h->pending)
		h->pending_tail = NULL;
	return a;
}

/*
 * A change this member appended is in the log: while it leads it applies it
 * as every member does (apply.h), in log order since one change is in
 * etcd's hands at a time. One that stepped down meanwhile leaves it to its
 * replica, which applies the log in order (-EREMOTE). A change it cannot
 * apply means its store is not the log's: another member should lead.
 */
static int apply_own(struct ha *h, struct append *a, int64_t revision)
{
	if (h->state != MEMBER_LEADING || a->generation != h->generation)
		return -EREMOTE;
	struct timespec t0;
	clock_gettime(CLOCK_MONOTONIC, &t0);
	int rc = apply_change(h->d.store, revision, a->key, a->change, a->change_len, true,
	                      &h->applied_hook);
	if (rc == 0) {
		metrics_observe_write_stage("apply", mono_since(&t0));
		h->copied = false; /* its last change is now its own entry, in the log */
		return 0;
	}
	ha_hand_over(h, rc == -EXDEV ? "etcd's revision is behind its store"
	                             : "it could not apply a change it appended");
	return rc == -EXDEV ? -EXDEV : -EPROTO;
}

/*
 * Fabric states are the followers' view only (a new leader derives them
 * again): they go to the log merged, at most every STATES_DELAY_MS, behind
 * the writes that came meanwhile rather than ahead of them, with the events
 * the leader published meanwhile. A follower may show a state, and publish
 * an event, a little late.
 */
#define STATES_DELAY_MS 20

static void riders_wait(struct ha *h);

/* Events kept for the log at most while etcd refuses them: the oldest go first. */
#define EVENTS_KEPT_MAX 4096

/* The longest a refused entry's states and events wait before they go again. */
#define RIDERS_BACKOFF_MAX_MS 2000

/*
 * Adds a fabric-states changeset behind those waiting for the log, merged
 * into one. False when it could not (out of memory, a malformed one): best
 * effort, the next states carry the news.
 */
static bool states_add(struct ha *h, const void *changeset, size_t len)
{
	void *next = NULL;
	size_t next_len = len;
	if (!h->states) {
		next = malloc(len ? len : 1);
		if (!next)
			return false;
		memcpy(next, changeset, len);
	} else if (store_changes_combine(h->states, h->states_len, changeset, len, &next,
	                                 &next_len) < 0) {
		return false;
	}
	free(h->states);
	h->states = next; /* NULL: the later ones undid the earlier */
	h->states_len = next ? next_len : 0;
	return true;
}

/* Adds the states and events of change (a bundle) behind those waiting. Whether any. */
static bool riders_add(struct ha *h, const void *change, size_t change_len)
{
	struct log_changeset v[LOG_BUNDLE_MAX];
	int n = log_bundle_parse(change, change_len, v, LOG_BUNDLE_MAX);
	bool added = false;
	for (int i = 0; i < n; i++) {
		if (v[i].kind == LOG_STATES) {
			added |= states_add(h, v[i].data, v[i].len);
		} else if (v[i].kind == LOG_EVENTS) {
			json_t *events = json_loadb(v[i].data, v[i].len, 0, NULL);
			added |= json_is_array(events) && json_array_extend(h->events, events) == 0;
			json_decref(events);
		}
	}
	return added;
}

/*
 * etcd refused, for sure, a change that carried fabric states and events
 * (of its own, or riding along with a write): they were taken from those
 * waiting, so they go again, or the followers never hear of them. Entries
 * of their own queued behind it since come back too, so that what came
 * later never goes first. Later each time etcd refuses again.
 */
static void riders_back(struct ha *h, const struct append *a)
{
	json_t *events = json_array();
	if (h->state != MEMBER_LEADING || a->generation != h->generation || !a->change || !events) {
		json_decref(events);
		return;
	}
	/* Those waiting came last: set aside, and added behind the refused and the queued. */
	void *newer = h->states;
	size_t newer_len = h->states_len;
	json_t *newer_events = h->events;
	h->states = NULL;
	h->states_len = 0;
	h->events = events;
	bool back = riders_add(h, a->change, a->change_len);
	struct append *prev = NULL, *next;
	for (struct append *q = h->pending; q; q = next) {
		next = q->next;
		if (q->kind != APPEND_STATES || q->sent) {
			prev = q;
			continue;
		}
		if (prev)
			prev->next = next;
		else
			h->pending = next;
		if (h->pending_tail == q)
			h->pending_tail = prev;
		back |= riders_add(h, q->change, q->change_len);
		append_free(q);
	}
	if (newer)
		states_add(h, newer, newer_len);
	free(newer);
	json_array_extend(h->events, newer_events);
	json_decref(newer_events);
	size_t over = json_array_size(h->events);
	if (over > EVENTS_KEPT_MAX) {
		json_t *kept = json_array();
		for (size_t i = over - EVENTS_KEPT_MAX; kept && i < over; i++)
			json_array_append(kept, json_array_get(h->events, i));
		if (kept) {
			log_warn("cluster",
			         "%zu events etcd did not take are dropped: followers miss them",
			         over - EVENTS_KEPT_MAX);
			json_decref(h->events);
			h->events = kept;
		}
	}
	if (!back)
		return;
	h->riders_refused++;
	unsigned ms = STATES_DELAY_MS << (h->riders_refused < 8 ? h->riders_refused : 8);
	if (ms > RIDERS_BACKOFF_MAX_MS)
		ms = RIDERS_BACKOFF_MAX_MS;
	struct timeval tv = { ms / 1000, (suseconds_t)(ms % 1000) * 1000 };
	evtimer_add(h->states_timer, &tv);
}

static void append_over(struct ha *h, int rc, int64_t revision)
{
	struct append *a = pop(h);
	if (rc == 0) {
		h->riders_refused = 0;
		note_logged(h, a->key, revision);
		metrics_observe_write_stage("log", mono_since(&a->first_sent));
	}
	while (rc < 0 && a->more) {
		/*
		 * Its later parts are never sent, so the change is not in the log
		 * (followers drop a change whose parts stop): the last part answers.
		 */
		append_free(a);
		a = pop(h);
		rc = -ESTALE;
	}
	if (rc == -EIO || rc == -ESTALE)
		riders_back(h, a); /* not in the log, and never will be */
	/* apply_own may hand over: until then the entries behind this one count as queued. */
	if (rc == 0 && !a->more)
		rc = apply_own(h, a, revision);
	h->sending = false;
	if (a->done)
		a->done(a->done_arg, rc, revision);
	append_free(a);
	if (h->pending && !h->sending) /* done() may have queued and sent one already */
		send_append(h);
}

static void on_append(int rc, const struct etcd_result *res, void *arg)
{
	struct append_try *t = arg;
	struct ha *h = t->h;
	bool late = t->seq < h->tries_from;
	try_free(t);
	if (late)
		return; /* another try of its send was answered first */
	/*
	 * The client sent it on to another member: an earlier try may be in.
	 * Noted whatever the answer, the one kept waiting for the other try too.
	 */
	if (res && res->resent)
		h->pending->unanswered = true;
	if (--h->inflight > 0 && rc == -EIO) {
		/*
		 * One member refused it (too many requests...) while the other try
		 * is still out, and may land: only its answer can say.
		 */
		log_warn("cluster",
		         "appending %s: etcd refused one try (%s); waiting for the other",
		         h->pending->key, res->error);
		return;
	}
	h->tries_from = h->try_seq + 1;
	h->inflight = 0;
	evtimer_del(h->hedge_append);
	struct append *a = h->pending;
	/* Made under the leadership this member holds now, not an earlier one. */
	bool current = h->state == MEMBER_LEADING && a->generation == h->generation;
	if (rc == -EIO && a->unanswered) {
		/*
		 * etcd refused this try (too large, out of space...), but an earlier
		 * one may be in, or land later. A leader that went on would apply the
		 * next change to a store that may lack this one; and whatever it
		 * appended next could come before it in the log, though after it in
		 * key order: members that read the log from before both would apply
		 * this one and then skip the next as applied. So even an entry of
		 * fabric states, or a part, ends the leadership: the log decides,
		 * through the replica of a member that no longer leads, and the new
		 * leader key keeps the late try out.
		 */
		log_warn("cluster", "appending %s: etcd refused it (%s): its outcome is unknown",
		         a->key, res->error);
		if (current)
			ha_hand_over(h, "the outcome of a change it appended is unknown");
		append_over(h, -ETIMEDOUT, 0);
		return;
	}
	if (rc == -EIO) {
		/* Refused, and no earlier try went unanswered: the entry is not in the log. */
		log_warn("cluster", "appending %s: etcd refused it (%s)", a->key, res->error);
		append_over(h, -EIO, 0);
		return;
	}
	if (rc < 0 && !current) {
		/* No answer, and no longer the leadership it was made under: nobody can say now. */
		log_warn("cluster",
		         "appending %s: %s after its leadership ended: its outcome is unknown",
		         a->key, res && res->error[0] ? res->error : strerror(-rc));
		append_over(h, -ETIMEDOUT, 0);
		return;
	}
	if (rc < 0) {
		/*
		 * No answer: the entry may or may not be in the log. Only the same txn,
		 * sent again until etcd answers, can tell (it never appends twice).
		 */
		log_warn("cluster", "appending %s: %s; trying again", a->key,
		         res && res->error[0] ? res->error : strerror(-rc));
		a->unanswered = true;
		struct timeval tv = { 0, 100 * 1000 };
		evtimer_add(h->retry_append, &tv);
		return;
	}
	if (res->succeeded) {
		append_over(h, 0, res->revision);
		return;
	}
	const struct etcd_kv *guard = NULL, *entry = NULL, *floor = NULL;
	for (size_t i = 0; i < res->nkvs; i++) {
		const struct etcd_kv *kv = &res->kvs[i];
		if (strcmp(kv->key, h->leader_key) == 0)
			guard = kv;
		else if (strcmp(kv->key, a->key) == 0)
			entry = kv;
		else if (strcmp(kv->key, h->floor_key) == 0)
			floor = kv;
	}
	if (entry && (a->unanswered || a->hedged)) {
		append_over(h, 0, entry->mod_revision); /* an earlier try, or the other, got in */
		return;
	}
	if (entry) {
		/*
		 * Never sent before, yet there: written under this leadership's key
		 * by someone else (no member leads twice under one generation). This
		 * one is not in.
		 */
		log_error("cluster", "appending %s: the log holds another entry under its key",
		          a->key);
		if (current)
			ha_hand_over(h, "its log keys are taken");
		append_over(h, -ESTALE, 0);
		return;
	}
	const char *trimmed = floor ? strchr((const char *)floor->value, ' ') : NULL;
	if (trimmed && strcmp(trimmed + 1, a->key) >= 0) {
		/* A later leader trimmed the log past it: in or not, nobody can say. */
		if (current)
			ha_hand_over(h, "a later leader trimmed the log");
		append_over(h, -ETIMEDOUT, 0);
		return;
	}
	int64_t floor_rev = floor ? floor->mod_revision : 0;
	if (guard && guard->create_revision == a->generation && floor_rev != a->floor_rev) {
		/*
		 * Only the floor moved since this try was sent (a trim, or a
		 * leadership's first append): the entry is not in. A try lands only
		 * while the floor has the revision it requires, and the floor moves
		 * only forward, so no earlier try (each required this floor or an
		 * older one) can get in later either. Under the floor as it is now
		 * the entry can go in while this member leads. What the member
		 * requires never goes back (answers of several members can come out
		 * of order), unless the floor is older than this try required: it
		 * was rewritten by hand.
		 */
		if (floor_rev > h->floor_rev || floor_rev < a->floor_rev)
			h->floor_rev = floor_rev;
		if (current)
			send_append(h);
		else
			append_over(h, -ESTALE, 0);
		return;
	}
	/* The leader key is no longer ours: the entry is not in, and never will be. */
	log_warn("cluster", "%s no longer holds the leadership it appended under", h->name);
	/*
	 * Whoever removed the key, this member must stop driving units at once;
	 * unless the change was an earlier leadership's and this one is sound.
	 */
	if (current)
		ha_hand_over(h, "the leader key is no longer its own");
	append_over(h, -ESTALE, 0);
}

/* Events kept for the log beyond this go in an entry of their own at once. */
#define EVENTS_MAX_BYTES (256u * 1024u)

/* The internal event that carries former entries a read-back found gone, and its size. */
#define FORMERS_GONE      "formers_gone"
#define FORMERS_PER_EVENT 8192

/* Sends what rides along within STATES_DELAY_MS, unless a write takes it first. */
static void riders_wait(struct ha *h)
{
	if (!evtimer_pending(h->states_timer, NULL)) {
		struct timeval tv = { 0, STATES_DELAY_MS * 1000 };
		evtimer_add(h->states_timer, &tv);
	}
}

/*
 * What waits to ride along, as changesets v (at most two): the fabric states
 * and the events, whose JSON text goes to *events (malloc'd, the caller's).
 */
static size_t riders(struct ha *h, struct log_changeset *v, char **events)
{
	size_t n = 0;
	if (h->states)
		v[n++] = (struct log_changeset){ LOG_STATES, h->states, h->states_len };
	*events = json_array_size(h->events) ? json_dumps(h->events, JSON_COMPACT) : NULL;
	if (*events)
		v[n++] = (struct log_changeset){ LOG_EVENTS, *events, strlen(*events) };
	return n;
}

/* What rode along is on its way: forgotten here. */
static void riders_gone(struct ha *h)
{
	free(h->states);
	h->states = NULL;
	json_array_clear(h->events);
	evtimer_del(h->states_timer);
}

/*
 * Every event the leader publishes, but a member's own (its role), goes to
 * the log with the states, under the id the leader gave it: every member
 * publishes it under that id (on_applied()), so that a client can resume a
 * stream of one member on another.
 */
static void on_shipped(void *arg, const struct events_msg *msg)
{
	struct ha *h = arg;
	if (!msg->id || h->state != MEMBER_LEADING)
		return;
	json_t *e = json_pack("{s:s, s:s, s:I, s:O}", "kind", msg->name, "instance", msg->instance,
	                      "id", (json_int_t)msg->id, "data", msg->data);
	if (e)
		json_array_append_new(h->events, e);
	riders_wait(h);
	/* A burst (a unit's flapping ports) goes at once rather than piling up. */
	char *text = json_array_size(h->events) > 256 ? json_dumps(h->events, JSON_COMPACT) : NULL;
	if (text && strlen(text) > EVENTS_MAX_BYTES)
		event_active(h->states_timer, 0, 0);
	free(text);
}

void ha_ship_formers_gone(struct ha *h, int64_t ocs_id, int64_t upto,
                          const struct ha_port_pair *gone, size_t n)
{
	if (h->state != MEMBER_LEADING || !n)
		return;
	for (size_t at = 0; at < n; at += FORMERS_PER_EVENT) {
		json_t *pairs = json_array();
		for (size_t i = at; pairs && i < n && i < at + FORMERS_PER_EVENT; i++) {
			if (json_array_append_new(pairs, json_integer(gone[i].a)) < 0 ||
			    json_array_append_new(pairs, json_integer(gone[i].b)) < 0) {
				json_decref(pairs);
				pairs = NULL;
			}
		}
		json_t *e =
		    pairs ? json_pack("{s:s, s:I, s:I, s:o}", "kind", FORMERS_GONE, "ocs",
		                      (json_int_t)ocs_id, "upto", (json_int_t)upto, "pairs", pairs)
		          : NULL;
		if (!e || json_array_append_new(h->events, e) < 0)
			break; /* the followers keep them */
	}
	riders_wait(h);
	/* Large ones (a large fabric deleted) go at once, in parts if need be. */
	if (n > FORMERS_PER_EVENT / 2)
		event_active(h->states_timer, 0, 0);
}

/* The leader's word that a read-back found these former entries gone (see above). */
static void formers_gone(struct ha *h, const json_t *e)
{
	json_int_t ocs = json_integer_value(json_object_get(e, "ocs"));
	const json_t *upto = json_object_get(e, "upto");
	const json_t *pairs = json_object_get(e, "pairs");
	size_t n = json_array_size(pairs) / 2;
	struct ha_port_pair *gone = n && json_is_integer(upto) ? malloc(n * sizeof(*gone)) : NULL;
	if (!gone || !h->d.formers_gone) {
		free(gone);
		return;
	}
	for (size_t i = 0; i < n; i++)
		gone[i] = (struct ha_port_pair){
			(uint32_t)json_integer_value(json_array_get(pairs, 2 * i)),
			(uint32_t)json_integer_value(json_array_get(pairs, 2 * i + 1)),
		};
	/* Sorted by the leader; a bsearch() over an unsorted list would miss some, harmlessly. */
	h->d.formers_gone(h->d.arg, ocs, json_integer_value(upto), gone, n);
	free(gone);
}

/* A follower publishes the events of the leader's changes it applies, under their ids. */
static void on_applied(void *arg, int64_t revision, const struct log_changeset *v, size_t n,
                       bool own)
{
	struct ha *h = arg;
	(void)revision;
	for (size_t i = 0; i < n && !own; i++) {
		if (v[i].kind != LOG_EVENTS)
			continue;
		json_t *all = json_loadb(v[i].data, v[i].len, 0, NULL);
		size_t k;
		json_t *e;
		json_array_foreach(all, k, e)
		{
			const char *name = json_string_value(json_object_get(e, "kind"));
			if (name && strcmp(name, FORMERS_GONE) == 0) {
				formers_gone(h, e);
				continue;
			}
			enum events_kind kind = name ? events_kind_of(name) : EVENTS_KIND_COUNT;
			const char *instance = json_string_value(json_object_get(e, "instance"));
			json_int_t id = json_integer_value(json_object_get(e, "id"));
			json_t *data = json_object_get(e, "data");
			if (kind == EVENTS_KIND_COUNT || !(EVENTS_BIT(kind) & EVENTS_PUBLIC) ||
			    !instance || id <= 0 || !json_is_object(data))
				continue;
			events_publish_as(h->d.events, kind, instance, (unsigned long long)id,
			                  json_incref(data));
		}
		json_decref(all);
	}
}

/*
 * A client's write takes the fabric states waiting for the log along, ahead
 * of its own changeset in the same change (they were committed here first):
 * one Raft round for both, and no round of their own for the next write to
 * queue behind. Two changesets applied in turn, never merged into one: a
 * merge drops an insert that follows an update of the same key. Only at the
 * first send: a retry must send the very same entry.
 */
static void take_states_along(struct ha *h, struct append *a)
{
	struct log_changeset v[LOG_BUNDLE_MAX];
	char *events = NULL;
	if (a->kind != APPEND_WRITE || a->sent || h->state != MEMBER_LEADING ||
	    a->generation != h->generation)
		return;
	size_t n = riders(h, v, &events);
	size_t len = a->len;
	for (size_t i = 0; i < n; i++)
		len += v[i].len;
	if (!n || len > HA_MAX_ENTRY ||
	    log_bundle_parse(a->change, a->change_len, v + n, LOG_BUNDLE_MAX - n) != 1) {
		free(events);
		return;
	}
	void *all = log_bundle_make(v, n + 1, &len);
	free(events);
	if (!all)
		return;
	free(a->change);
	a->change = all;
	a->change_len = len;
	a->data = all;
	a->len = len;
	riders_gone(h);
	h->states_along++;
}

static void send_append(struct ha *h)
{
	struct append *a = h->pending;
	if (!a->sent && (h->state != MEMBER_LEADING || a->generation != h->generation)) {
		/*
		 * Its leadership ended before it was sent: it is not in the log and
		 * never will be (its changeset is relative to a store the log may
		 * have moved past).
		 */
		append_over(h, -ESTALE, 0);
		return;
	}
	if (!a->sent) {
		take_states_along(h, a);
		h->appended[a->kind]++;
		a->sent = true;
		clock_gettime(CLOCK_MONOTONIC, &a->first_sent);
	}
	h->sending = true;
	a->floor_rev = h->floor_rev;
	if (send_try(h, a, false) < 0) {
		struct timeval tv = { 0, 100 * 1000 };
		evtimer_add(h->retry_append, &tv);
		return;
	}
	struct timeval hedge = { HA_HEDGE_APPEND_MS / 1000, (HA_HEDGE_APPEND_MS % 1000) * 1000 };
	evtimer_add(h->hedge_append, &hedge);
}

/* Queues the entries first..last (linked) for the log, in order. */
static void enqueue(struct ha *h, struct append *first, struct append *last)
{
	for (struct append *a = first; a; a = a->next) {
		/* Keys sort in append order: a later leadership has a larger generation. */
		snprintf(a->key, sizeof(a->key), "%s/log/%016" PRIx64 "-%016" PRIx64, h->prefix,
		         (uint64_t)h->generation, ++h->seq);
		a->generation = h->generation;
	}
	if (h->pending_tail)
		h->pending_tail->next = first;
	else
		h->pending = first;
	h->pending_tail = last;
	if (!h->sending)
		send_append(h);
}

static void free_appends(struct append *a)
{
	while (a) {
		struct append *next = a->next;
		append_free(a);
		a = next;
	}
}

/* The parts of a change too large for one entry, linked, or NULL when out of memory. */
static struct append *split(const unsigned char *data, size_t len, struct append **last)
{
	const size_t slice = HA_MAX_ENTRY - LOG_PART_HEADER;
	uint32_t count = (uint32_t)((len + slice - 1) / slice);
	struct append *first = NULL, **tail = &first;
	for (uint32_t i = 0; i < count; i++) {
		size_t n = i + 1 < count ? slice : len - (size_t)i * slice;
		struct append *a = calloc(1, sizeof(*a));
		void *e = a ? log_part_make(i, count, data + (size_t)i * slice, n) : NULL;
		if (!e) {
			free(a);
			free_appends(first);
			return NULL;
		}
		a->owned = e;
		a->data = e;
		a->len = LOG_PART_HEADER + n;
		a->kind = APPEND_PART;
		a->more = i + 1 < count;
		*last = *tail = a;
		tail = &a->next;
	}
	return first;
}

/*
 * Queues changesets v[0..n) for the log as one change, in one entry or in
 * parts; done (or NULL) hears the outcome. They are copied. Returns 0,
 * -EFBIG, -ESTALE (not leading) or -ENOMEM.
 */
static int append_bundle(struct ha *h, const struct log_changeset *v, size_t n, ha_append_done done,
                         void *done_arg)
{
	size_t len = 0;
	for (size_t i = 0; i < n; i++)
		len += v[i].len;
	if (len > HA_MAX_CHANGE)
		return -EFBIG;
	if (h->state != MEMBER_LEADING)
		return -ESTALE;
	size_t change_len;
	void *change = log_bundle_make(v, n, &change_len);
	if (!change)
		return -ENOMEM;
	struct append *first, *last;
	if (change_len > HA_MAX_ENTRY) {
		first = split(change, change_len, &last);
	} else {
		first = last = calloc(1, sizeof(*first));
		if (first) {
			first->kind = done ? APPEND_WRITE : APPEND_STATES;
			first->data = change;
			first->len = change_len;
		}
	}
	if (!first) {
		free(change);
		return -ENOMEM;
	}
	last->change = change;
	last->change_len = change_len;
	last->done = done;
	last->done_arg = done_arg;
	enqueue(h, first, last);
	return 0;
}

int ha_append(struct ha *h, const void *data, size_t len, ha_append_done done, void *done_arg)
{
	struct log_changeset one = { LOG_WRITE, data, len };
	return append_bundle(h, &one, 1, done, done_arg);
}

static void on_states_timer(evutil_socket_t fd, short what, void *arg)
{
	struct ha *h = arg;
	(void)fd;
	(void)what;
	struct log_changeset v[LOG_BUNDLE_MAX];
	char *events = NULL;
	size_t n = riders(h, v, &events);
	if (n)
		append_bundle(h, v, n, NULL, NULL); /* best effort: the next carry what follows */
	free(events);
	riders_gone(h);
}

void ha_replicate_states(struct ha *h, const void *changeset, size_t len)
{
	if (h->state == MEMBER_LEADING && states_add(h, changeset, len))
		riders_wait(h);
}

int ha_gate(struct ha *h, char *leader, size_t len)
{
	if (!cluster_in_touch(h->cluster))
		return -EHOSTUNREACH;
	if (h->state == MEMBER_LEADING)
		return 0;
	if (h->state == MEMBER_CATCHING_UP)
		return -EINPROGRESS;
	const char *adv = cluster_leader_advertise(h->cluster);
	if (h->state == MEMBER_LEFT || !adv[0] ||
	    strcmp(cluster_leader_name(h->cluster), h->name) == 0)
		return -EAGAIN;
	snprintf(leader, len, "%s", adv);
	return -EREMOTE;
}

/* What ending a leadership takes: the units are no longer driven, its bookkeeping goes. */
static void leave_leading(struct ha *h)
{
	ha_role_hook_call(&h->role_hook, HA_NOW_FOLLOWING, 0);
	events_unsubscribe(h->d.events, h->shipping);
	h->shipping = NULL;
	json_array_clear(h->events);
	forget_logged(h, h->nlogged); /* a later leadership trims its own */
	h->trimming = 0;
	free(h->states);
	h->states = NULL;
	evtimer_del(h->states_timer);
	h->riders_refused = 0;
	h->generation = 0;
}

void ha_hand_over(struct ha *h, const char *why)
{
	log_warn("cluster", "%s hands the leadership over: %s", h->name, why);
	cluster_step_down(h->cluster, 3 * h->ttl_s); /* the role callback follows */
}

/* ---- snapshots ------------------------------------------------------------- */

static void on_snapshot(struct evhttp_request *req, void *arg)
{
	struct ha *h = arg;
	h->snap_answered = true;
	int status = req ? evhttp_request_get_response_code(req) : 0;
	struct evbuffer *body = req ? evhttp_request_get_input_buffer(req) : NULL;
	size_t len = body ? evbuffer_get_length(body) : 0;
	int rc = -EIO;
	if (status == 200 && len > 0) {
		const void *data = evbuffer_pullup(body, -1);
		rc = data ? store_restore(h->d.store, data, len) : -ENOMEM;
	} else {
		log_warn("cluster", "the leader answered %d to the snapshot request", status);
	}
	if (rc < 0) {
		enter(h, MEMBER_FOLLOWING, "the snapshot could not be had; trying again");
		struct timeval tv = { 1, 0 };
		evtimer_add(h->retry, &tv); /* start_replica finds the log still too short */
		return;
	}
	ha_role_hook_call(&h->role_hook, HA_RESYNCED, 0);
	/*
	 * A caught-up leader's copy (?consistent) is the log's, though the log may lack
	 * its last change too (deleted under a running leader that has not appended
	 * since): copied again, it would be the same. Until it applies an entry of its
	 * own, it is not asked.
	 */
	h->copied = true;
	char why[96];
	snprintf(why, sizeof(why), "restored a snapshot of %zu bytes at revision %" PRId64, len,
	         applied_revision(h));
	enter(h, MEMBER_FOLLOWING, why);
	start_replica(h);
}

/*
 * Copies the leader's store as a follower whose own cannot follow the log (trimmed
 * past it, lacking its last change, or with changes that do not apply), then follows
 * from its revision: why is the replica's error (replica.h) that says so.
 */
static void resync(struct ha *h, int why)
{
	const char *leader = cluster_leader_advertise(h->cluster);
	char host[128], hosthdr[160];
	uint16_t port;
	bool tls;
	bool known = leader[0] && strcmp(cluster_leader_name(h->cluster), h->name) != 0 &&
	             url_split(leader, strlen(leader), &tls, host, sizeof(host), &port) == 0;
	struct evhttp_request *req = NULL;
	if (h->snap_conn)
		evhttp_connection_free(h->snap_conn);
	h->snap_conn = known ? evhttp_connection_base_new(h->d.base, NULL, host, port) : NULL;
	if (h->snap_conn) {
		evhttp_connection_set_timeout(h->snap_conn, 60);
		req = evhttp_request_new(on_snapshot, h);
	}
	if (req) {
		struct evkeyvalq *hdr = evhttp_request_get_output_headers(req);
		char auth[300];
		snprintf(hosthdr, sizeof(hosthdr), strchr(host, ':') ? "[%s]:%u" : "%s:%u", host,
		         (unsigned)port);
		evhttp_add_header(hdr, "Host", hosthdr);
		if (h->token[0]) {
			snprintf(auth, sizeof(auth), "Bearer %s", h->token);
			evhttp_add_header(hdr, "Authorization", auth);
		}
	}
	h->snap_answered = false;
	if (!req || evhttp_make_request(h->snap_conn, req, EVHTTP_REQ_GET,
	                                "/v1/cluster/snapshot?consistent=true") < 0) {
		/* No leader known yet (or no memory): try again soon. */
		struct timeval tv = { 1, 0 };
		if (h->snap_conn)
			evhttp_connection_free(h->snap_conn);
		h->snap_conn = NULL;
		evtimer_add(h->retry, &tv);
		return;
	}
	/* libevent answers a connection that fails at once from inside the call. */
	if (h->snap_answered)
		return;
	const char *reason = why == -EPROTO   ? "a change of the log conflicts with its store at"
	                     : why == -EXDEV  ? "etcd's revision is behind its store's"
	                     : why == -ENOENT ? "the log lacks the change its store applied at"
	                                      : "the log does not reach back to its";
	char text[128];
	snprintf(text, sizeof(text), "%s revision %" PRId64, reason, applied_revision(h));
	enter(h, MEMBER_RESYNCING, text);
}

/* ---- role ---------------------------------------------------------------- */

/* A copy of the leader's store under way is dropped: this member's role changed. */
static void drop_snapshot(struct ha *h)
{
	if (h->snap_conn)
		evhttp_connection_free(h->snap_conn);
	h->snap_conn = NULL;
}

static void on_role(enum cluster_role role, void *arg)
{
	struct ha *h = arg;
	if (h->state == MEMBER_LEFT)
		return;
	replica_free(h->replica);
	h->replica = NULL;
	drop_snapshot(h);
	/* A new role starts afresh: an elected member waits on no follower's streak. */
	h->retry_ms = 0;
	enter(h, role == CLUSTER_LEADER ? MEMBER_CATCHING_UP : MEMBER_FOLLOWING,
	      role == CLUSTER_LEADER ? "elected" : "another member leads, or none is known");
	start_replica(h);
}

/* ---- members --------------------------------------------------------------- */

static void on_members(int rc, const struct etcd_result *res, void *arg)
{
	struct ha *h = arg;
	h->publishing = false;
	if (rc < 0)
		return;
	json_t *all = json_array();
	for (size_t i = 0; all && i < res->nkvs; i++) {
		json_t *m =
		    json_loadb((const char *)res->kvs[i].value, res->kvs[i].value_len, 0, NULL);
		if (json_is_object(m))
			json_array_append(all, m);
		json_decref(m);
	}
	json_decref(h->members);
	h->members = all;
}

static void on_published(int rc, const struct etcd_result *res, void *arg)
{
	struct ha *h = arg;
	(void)res;
	if (rc < 0 || etcd_call(h->etcd, "/v3/kv/range", etcd_req_range(h->members_prefix, true, 0),
	                        on_members, h) < 0)
		h->publishing = false;
}

static void on_trimmed(int rc, const struct etcd_result *res, void *arg)
{
	struct ha *h = arg;
	size_t n = h->trimming;
	if (h->trim_generation != h->generation)
		return; /* an earlier leadership's: this one keeps its own count */
	h->trimming = 0;
	if (rc == 0 && res->succeeded)
		h->floor_rev = res->revision; /* the floor's put is the txn's one revision */
	/* Refused: the floor moved meanwhile (an earlier try of this trim got in). */
	for (size_t i = 0; rc == 0 && !res->succeeded && i < res->nkvs; i++)
		if (strcmp(res->kvs[i].key, h->floor_key) == 0 &&
		    res->kvs[i].mod_revision > h->floor_rev)
			h->floor_rev = res->kvs[i].mod_revision;
	if (rc == 0 && res->succeeded && h->state == MEMBER_LEADING && n <= h->nlogged)
		forget_logged(h, n);
}

/* The log held for members behind grows to this many times log_keep, no more. */
#define LOG_HELD_MAX 4u

/*
 * The log keeps the last log_keep entries: a member further behind copies a
 * snapshot. A leader trims what it appended itself once half as many again
 * piled up, and leaves PREFIX/log_floor = the newest revision gone; never
 * past its own store, nor past another member that is up, unless that one
 * holds up LOG_HELD_MAX times log_keep.
 */
static void trim(struct ha *h)
{
	if (h->state != MEMBER_LEADING || h->trimming ||
	    h->nlogged <= h->log_keep + h->log_keep / 2)
		return;
	size_t n = h->nlogged - h->log_keep;
	/*
	 * Never past this store: the parts of a change still on its way are in the
	 * log before the change is in any store, and a floor above every store
	 * would leave nobody able to follow (nor to take over).
	 */
	int64_t reach = store_applied_revision(h->d.store);
	/*
	 * Nor past any other member that is up (its key alive): should this one
	 * die, any of them must be able to lead, and a store the log no longer
	 * reaches cannot (it copies a leader's snapshot, and there may be no
	 * leader). Their progress is as they published it, two ticks ago at most.
	 * One that stays behind holds at most LOG_HELD_MAX times log_keep: past
	 * that, what exceeds it goes, and the one behind copies a snapshot.
	 */
	int64_t behind = INT64_MAX;
	size_t i;
	json_t *m;
	json_array_foreach(h->members, i, m)
	{
		const char *name = json_string_value(json_object_get(m, "name"));
		json_int_t rev = json_integer_value(json_object_get(m, "applied_revision"));
		if (name && strcmp(name, h->name) != 0 && rev < behind)
			behind = rev;
	}
	size_t held = LOG_HELD_MAX * (size_t)h->log_keep;
	if (behind < reach) {
		if (h->nlogged <= held + h->log_keep / 2)
			reach = behind;
		else
			n = h->nlogged - held;
	}
	while (n > 0 && h->logged[n - 1].revision > reach)
		n--;
	if (n == 0)
		return;
	bool past = h->logged[n - 1].revision > behind;
	const struct logged *last = &h->logged[n - 1];
	char floor[256], prefix[160];
	/* The revision for replicas, the key for an append that lost its answer meanwhile. */
	snprintf(floor, sizeof(floor), "%" PRId64 " %s", last->revision, last->key);
	snprintf(prefix, sizeof(prefix), "%s/log/", h->prefix);
	if (etcd_call(h->etcd, "/v3/kv/txn",
	              etcd_req_trim(h->leader_key, h->generation, prefix, last->key, h->floor_key,
	                            h->floor_rev, floor),
	              on_trimmed, h) == 0) {
		h->trimming = n;
		h->trim_generation = h->generation;
		if (past)
			log_warn(
			    "cluster",
			    "trimming the log past a member stuck at revision %lld (this "
			    "leadership's entries past %u times log_keep): it copies a snapshot; "
			    "should this member fail first, it cannot lead",
			    (long long)behind, LOG_HELD_MAX);
	}
}

static void on_tick(evutil_socket_t fd, short what, void *arg)
{
	struct ha *h = arg;
	(void)fd;
	(void)what;
	trim(h);
	int64_t lease = cluster_lease(h->cluster);
	if (h->publishing || lease == 0)
		return;
	json_t *me =
	    json_pack("{s:s, s:s, s:s, s:I}", "name", h->name, "advertise", h->advertise, "role",
	              state_role(h), "applied_revision", (json_int_t)applied_revision(h));
	char *text = me ? json_dumps(me, JSON_COMPACT) : NULL;
	json_decref(me);
	if (!text)
		return;
	char key[224];
	snprintf(key, sizeof(key), "%s%s", h->members_prefix, h->name);
	h->publishing =
	    etcd_call(h->etcd, "/v3/kv/put", etcd_req_put(key, text, strlen(text), lease),
	              on_published, h) == 0;
	free(text);
}

/* ---- status ---------------------------------------------------------------- */

json_t *ha_status_json(struct ha *h)
{
	json_t *members = json_array();
	size_t i;
	json_t *m;
	json_array_foreach(h->members, i, m)
	{
		const char *name = json_string_value(json_object_get(m, "name"));
		if (name && strcmp(name, h->name) == 0)
			continue; /* this member's own entry is given live below */
		json_array_append(members, m);
	}
	json_array_append_new(members,
	                      json_pack("{s:s, s:s, s:s, s:I}", "name", h->name, "advertise",
	                                h->advertise, "role", state_role(h), "applied_revision",
	                                (json_int_t)applied_revision(h)));
	const char *leader = cluster_leader_name(h->cluster);
	const char *adv = cluster_leader_advertise(h->cluster);
	return json_pack("{s:s, s:s, s:s?, s:s?, s:I, s:o, s:I, s:I, s:b}", "self", h->name, "role",
	                 state_role(h), "leader", leader[0] ? leader : NULL, "leader_advertise",
	                 leader[0] && adv[0] ? adv : NULL, "generation",
	                 (json_int_t)cluster_generation(h->cluster), "members", members, "revision",
	                 (json_int_t)cluster_revision(h->cluster), "applied_revision",
	                 (json_int_t)applied_revision(h), "etcd_reachable",
	                 cluster_in_touch(h->cluster));
}

static void collect(void *arg, struct metrics_out *out)
{
	struct ha *h = arg;
	metrics_family(out, "ofcd_cluster_leader", "gauge",
	               "1 while this member leads the cluster (takes writes, drives the units)");
	metrics_sample(out, "ofcd_cluster_leader", NULL, h->state == MEMBER_LEADING);
	metrics_family(out, "ofcd_cluster_etcd_reachable", "gauge",
	               "1 while this member's lease renewals reach an etcd quorum");
	metrics_sample(out, "ofcd_cluster_etcd_reachable", NULL, cluster_in_touch(h->cluster));
	metrics_family(out, "ofcd_cluster_applied_revision", "gauge",
	               "etcd revision of the last replicated change this member's store holds");
	metrics_sample(out, "ofcd_cluster_applied_revision", NULL, (double)applied_revision(h));
	metrics_family(out, "ofcd_cluster_state", "gauge",
	               "1 for the state this member is in (docs/ha.md), 0 for the others");
	for (int s = 0; s < MEMBER_STATES; s++) {
		char label[48];
		snprintf(label, sizeof(label), "state=\"%s\"", MEMBER_STATE_NAMES[s]);
		metrics_sample(out, "ofcd_cluster_state", label, h->state == (enum member_state)s);
	}
	metrics_family(
	    out, "ofcd_cluster_transitions_total", "counter",
	    "transitions of this member's state, by the state left and the state entered");
	for (int f = 0; f < MEMBER_STATES; f++)
		for (int t = 0; t < MEMBER_STATES; t++) {
			char label[80];
			if (!h->transitions[f][t])
				continue;
			snprintf(label, sizeof(label), "from=\"%s\",to=\"%s\"",
			         MEMBER_STATE_NAMES[f], MEMBER_STATE_NAMES[t]);
			metrics_sample(out, "ofcd_cluster_transitions_total", label,
			               (double)h->transitions[f][t]);
		}
	metrics_family(
	    out, "ofcd_cluster_invariant_violations_total", "counter",
	    "times this member found its state not meaning what it must (each one a bug)");
	metrics_sample(out, "ofcd_cluster_invariant_violations_total", NULL, (double)h->violations);
	metrics_family(out, "ofcd_cluster_role_changes_total", "counter",
	               "times this member's role changed (leader, candidate, follower)");
	metrics_sample(out, "ofcd_cluster_role_changes_total", NULL, (double)h->role_changes);
	metrics_family(out, "ofcd_cluster_log_entries_total", "counter",
	               "entries this member sent to the log while it led, by kind: a write "
	               "whole, a part of a large one, the reconciler's fabric states alone");
	for (int k = 0; k < APPEND_KINDS; k++) {
		char label[32];
		snprintf(label, sizeof(label), "kind=\"%s\"", APPEND_KIND_NAMES[k]);
		metrics_sample(out, "ofcd_cluster_log_entries_total", label,
		               (double)h->appended[k]);
	}
	metrics_family(out, "ofcd_cluster_states_along_total", "counter",
	               "times the reconciler's fabric states rode along with a write's entry "
	               "instead of taking one of their own");
	metrics_sample(out, "ofcd_cluster_states_along_total", NULL, (double)h->states_along);
}

/* ---- life ------------------------------------------------------------------- */

int ha_start(const struct ha_deps *deps, struct ha **out)
{
	const struct ofcd_config *cfg = deps->cfg;
	struct ha *h = calloc(1, sizeof(*h));
	if (!h)
		return -ENOMEM;
	h->d = *deps;
	snprintf(h->name, sizeof(h->name), "%s", cfg->cluster_name);
	snprintf(h->advertise, sizeof(h->advertise), "%s", cfg->cluster_advertise);
	snprintf(h->prefix, sizeof(h->prefix), "%s", cfg->cluster_prefix);
	snprintf(h->leader_key, sizeof(h->leader_key), "%s/leader", cfg->cluster_prefix);
	snprintf(h->members_prefix, sizeof(h->members_prefix), "%s/members/", cfg->cluster_prefix);
	h->ttl_s = cfg->cluster_lease_ttl_s;
	h->log_keep = cfg->cluster_log_keep ? cfg->cluster_log_keep : 10000;
	snprintf(h->token, sizeof(h->token), "%s", cfg->cluster_token);
	snprintf(h->floor_key, sizeof(h->floor_key), "%s/log_floor", cfg->cluster_prefix);
	h->members = json_array();
	h->retry = evtimer_new(deps->base, on_retry, h);
	h->retry_append = evtimer_new(deps->base, on_retry_append, h);
	h->hedge_append = evtimer_new(deps->base, on_hedge_append, h);
	h->states_timer = evtimer_new(deps->base, on_states_timer, h);
	h->events = json_array();
	/* A member's role is its own: the others' streams do not have it (events.h). */
	events_set_own(deps->events, EVENTS_BIT(EVENTS_CLUSTER_ROLE));
	h->tick = event_new(deps->base, -1, EV_PERSIST, on_tick, h);
	int rc = h->members && h->retry && h->retry_append && h->hedge_append && h->states_timer &&
	                 h->tick && h->events &&
	                 apply_done_hook_add(&h->applied_hook, on_applied, h) == 0
	             ? 0
	             : -ENOMEM;
	/* A large entry or a long catch-up may take a while to travel. */
	if (rc == 0)
		rc = etcd_client_new(deps->base, cfg->cluster_endpoints, cfg->cluster_nendpoints,
		                     10, &h->etcd);
	if (rc == 0)
		rc = cluster_start(deps->base, cfg, on_role, h, &h->cluster);
	if (rc == 0) {
		struct timeval period = { .tv_sec = h->ttl_s / 3,
			                  .tv_usec = (suseconds_t)(h->ttl_s % 3) * 1000000 / 3 };
		event_add(h->tick, &period);
		rc = metrics_collector_add(collect, h);
		apply_metrics_init();
		metrics_counter_add("ofcd_cluster_append_hedges_total", HEDGES_HELP, NULL, 0);
	}
	if (rc < 0) {
		ha_free(h);
		return rc;
	}
	start_replica(h);
	*out = h;
	return 0;
}

static void on_resigned(void *arg)
{
	struct ha *h = arg;
	if (h->resigned)
		h->resigned(h->resigned_arg);
}

void ha_resign(struct ha *h, void (*done)(void *arg), void *arg)
{
	h->resigned = done;
	h->resigned_arg = arg;
	event_del(h->tick);
	event_del(h->retry);
	replica_free(h->replica);
	h->replica = NULL;
	drop_snapshot(h);
	enter(h, MEMBER_LEFT, "the daemon stops");
	cluster_resign(h->cluster, on_resigned, h);
}

void ha_free(struct ha *h)
{
	if (!h)
		return;
	metrics_collector_remove(collect, h);
	replica_free(h->replica);
	while (h->pending) {
		/* The daemon is going: whoever waits hears the log did not say (it may yet). */
		struct append *a = pop(h);
		if (a->done)
			a->done(a->done_arg, -ETIMEDOUT, 0);
		append_free(a);
	}
	etcd_client_free(h->etcd); /* no etcd answer comes any more */
	while (h->tries)
		try_free(h->tries);
	cluster_free(h->cluster);
	if (h->retry)
		event_free(h->retry);
	if (h->retry_append)
		event_free(h->retry_append);
	if (h->hedge_append)
		event_free(h->hedge_append);
	if (h->states_timer)
		event_free(h->states_timer);
	free(h->states);
	events_unsubscribe(h->d.events, h->shipping);
	json_decref(h->events);
	if (h->tick)
		event_free(h->tick);
	json_decref(h->members);
	forget_logged(h, h->nlogged);
	free(h->logged);
	if (h->snap_conn)
		evhttp_connection_free(h->snap_conn);
	hook_clear(&h->role_hook);
	hook_clear(&h->applied_hook);
	free(h);
}

static void on_confirmed(void *arg, int rc)
{
	struct ha *h = arg;
	/* Led as etcd answered, but stepped down since (a lapsed lease, a hand-over). */
	if (rc == 0 && h->state != MEMBER_LEADING)
		rc = -ESTALE;
	h->confirm_done(h->confirm_arg, rc);
}

int ha_confirm(struct ha *h, void (*done)(void *arg, int rc), void *arg)
{
	if (h->state != MEMBER_LEADING)
		return -ESTALE;
	int rc = cluster_confirm(h->cluster, h->etcd, on_confirmed, h);
	if (rc == 0) {
		h->confirm_done = done;
		h->confirm_arg = arg;
	}
	return rc;
}

bool ha_may_drive(const struct ha *h)
{
	return h->state == MEMBER_LEADING && cluster_may_drive(h->cluster);
}

struct hook *ha_role_hook(struct ha *h)
{
	return &h->role_hook;
}

struct hook *ha_applied_hook(struct ha *h)
{
	return &h->applied_hook;
}
