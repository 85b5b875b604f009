/*
 * The reconciler's own records: one operation per batch (with its pairs and
 * the fabrics it touches, through a journal written once per loop iteration
 * or so), the copy of every unit's read-back and the ports whose link is
 * down, written by the domain's operations.h and readback.h. All in short
 * relaxed transactions of their own: a restart recomputes them anyway.
 */
#include <errno.h>
#include <event2/event.h>
#include <stdlib.h>
#include <string.h>

#include "base/events.h"
#include "domain/operations.h"
#include "domain/readback.h"
#include "log.h"
#include "reconcile_store.h"
#include "state/store.h"

/*
 * A list of cross-connects as JSON text ("[[1,2],[3,4]]"), printed directly:
 * an operation records every batch, and a jansson tree per pair costs more
 * than the batch.
 */
static char *put_u32(char *p, uint32_t v)
{
	char digits[10];
	int n = 0;
	do
		digits[n++] = (char)('0' + v % 10);
	while ((v /= 10) != 0);
	while (n)
		*p++ = digits[--n];
	return p;
}

static char *xcs_text(const struct plan_xc *v, size_t n)
{
	char *buf = malloc(n * 24 + 3), *p = buf;
	if (!buf)
		return NULL;
	*p++ = '[';
	for (size_t i = 0; i < n; i++) {
		if (i)
			*p++ = ',';
		*p++ = '[';
		p = put_u32(p, v[i].a);
		*p++ = ',';
		p = put_u32(p, v[i].b);
		*p++ = ']';
	}
	*p++ = ']';
	*p = '\0';
	return buf;
}

void reconcile_store_interrupted(struct reconciler *r)
{
	operations_interrupt_running(r->d.store);
}

/* ---- operations ---------------------------------------------------------- */

/*
 * A batch's operation as the journal holds it until it is written: its row to
 * insert (started), its outcome to store and publish (finished), or both.
 */
struct reconcile_journal_entry {
	int64_t id;
	char ocs[65];
	const char *trigger; /* static string */
	size_t nadd, ndel;
	char *adds, *dels; /* JSON text of the pairs, for a started one */
	json_t *names;     /* the fabrics' names, for the rows of a started one (a reference) */
	json_t *fabrics;   /* the same, for the event of a finished one (owned) */
	bool started, finished;
	int status;
	char *err; /* malloc'd, for a failed one */
};

/*
 * A few milliseconds: a batch that ends by then is written once, with its end,
 * and a state update in between takes the journal into its own transaction.
 */
#define JOURNAL_DELAY_US 10000

static void journal_schedule(struct reconciler *r)
{
	struct timeval soon = { 0, JOURNAL_DELAY_US };
	if (!evtimer_pending(r->ev_journal, NULL))
		evtimer_add(r->ev_journal, &soon);
}

static struct reconcile_journal_entry *journal_push(struct reconciler *r, int64_t id)
{
	if (r->njournal == r->capjournal) {
		size_t cap = r->capjournal ? 2 * r->capjournal : 64;
		struct reconcile_journal_entry *t = realloc(r->journal, cap * sizeof(*t));
		if (!t)
			return NULL;
		r->journal = t;
		r->capjournal = cap;
	}
	struct reconcile_journal_entry *e = &r->journal[r->njournal++];
	memset(e, 0, sizeof(*e));
	e->id = id;
	journal_schedule(r);
	return e;
}

int64_t reconcile_op_start(struct reconciler *r, struct unit *u, const struct plan_batch *b)
{
	struct reconcile_journal_entry *e = journal_push(r, r->next_op_id);
	char *adds = xcs_text(b->add, b->nadd), *dels = xcs_text(b->del, b->ndel);
	if (!e || !adds || !dels) {
		if (e)
			r->njournal--;
		free(adds);
		free(dels);
		log_error("reconcile", "%s: out of memory: the batch is sent unrecorded", u->name);
		return 0;
	}
	snprintf(e->ocs, sizeof(e->ocs), "%s", u->name);
	e->trigger = u->trigger;
	e->nadd = b->nadd;
	e->ndel = b->ndel;
	e->adds = adds;
	e->dels = dels;
	e->names = json_incref(u->op_fabrics);
	e->started = true;
	return r->next_op_id++;
}

void reconcile_op_finish(struct reconciler *r, struct unit *u, int status, const char *err)
{
	if (!u->op_id)
		return;
	metrics_counter_add("ofcd_reconcile_batches_total", RECONCILE_HELP_BATCHES,
	                    status == 0 ? "result=\"succeeded\"" : "result=\"failed\"", 1);
	/* Its start is usually still in the journal: one row written, with its end. */
	struct reconcile_journal_entry *e = NULL;
	for (size_t i = r->njournal; i-- > 0 && !e;)
		if (r->journal[i].id == u->op_id)
			e = &r->journal[i];
	if (!e && !(e = journal_push(r, u->op_id))) {
		log_error("reconcile", "%s: out of memory: operation %lld left running", u->name,
		          (long long)u->op_id);
		json_decref(u->op_fabrics);
	} else {
		if (!e->started)
			snprintf(e->ocs, sizeof(e->ocs), "%s", u->name);
		e->finished = true;
		e->status = status;
		e->err = status ? strdup(err ? err : strerror(-status)) : NULL;
		e->fabrics = u->op_fabrics ? u->op_fabrics : json_array();
	}
	u->op_fabrics = NULL;
	u->op_id = 0;
}

static const char *status_name(int status)
{
	/* -ESHUTDOWN: the daemon stopped cleanly with the batch in flight. */
	return status == 0 ? "succeeded" : status == -ESHUTDOWN ? "interrupted" : "failed";
}

static int journal_write(struct store *s, const struct reconcile_journal_entry *e)
{
	const char *status = e->finished ? status_name(e->status) : "running";
	if (!e->started)
		return operations_end(s, e->id, status, e->err);
	struct operations_row op = { .id = e->id,
		                     .ocs = e->ocs,
		                     .trigger = e->trigger,
		                     .nadd = e->nadd,
		                     .ndel = e->ndel,
		                     .adds = e->adds,
		                     .dels = e->dels,
		                     .status = status,
		                     .error = e->err,
		                     .ended = e->finished,
		                     .fabrics = e->names };
	return operations_insert(s, &op);
}

/* Operations kept: the history GET /v1/operations reads. */
#define HISTORY_KEEP 10000

/* Operations the history loses per loop turn at most: a carve's are 256 pairs each. */
#define HISTORY_PRUNE_TURN 256

/* The read-back copy and the history's pruning, a second from now, once for all. */
static void flush_soon(struct reconciler *r)
{
	if (r->ev_flush && !evtimer_pending(r->ev_flush, NULL)) {
		struct timeval sec = { 1, 0 };
		evtimer_add(r->ev_flush, &sec);
	}
}

/*
 * Keeps the history bounded, off the path of a change: a second after operations were
 * journaled, the oldest go in bulk, a turn's worth at a time. False while more are left
 * this turn.
 */
static bool prune_some(struct reconciler *r)
{
	struct store *s = r->d.store;
	int64_t gone = -EIO;

	if (!r->prune_due)
		return true;
	/* Tried again after the next operations, not at once: the store may stay unwell. */
	if (store_begin_relaxed(s) < 0)
		return true;
	gone = operations_prune(s, r->next_op_id - 1, HISTORY_KEEP, HISTORY_PRUNE_TURN);
	if (gone < 0 || store_commit(s) < 0) {
		store_rollback(s);
		return true;
	}
	r->prune_due = gone == HISTORY_PRUNE_TURN;
	return !r->prune_due;
}

int reconcile_journal_write(struct reconciler *r)
{
	struct store *s = r->d.store;
	int rc = 0;
	for (size_t i = 0; rc == 0 && i < r->njournal; i++)
		rc = journal_write(s, &r->journal[i]);
	if (r->njournal && rc == 0) {
		r->prune_due = true;
		flush_soon(r);
	}
	return rc;
}

bool reconcile_journal_ended(const struct reconciler *r)
{
	for (size_t i = 0; i < r->njournal; i++)
		if (r->journal[i].finished)
			return true;
	return false;
}

void reconcile_journal_done(struct reconciler *r)
{
	/* Published whether stored or not: whoever waits for a batch must hear it end. */
	for (size_t i = 0; i < r->njournal; i++) {
		struct reconcile_journal_entry *e = &r->journal[i];
		if (e->finished) {
			json_t *ev =
			    json_pack("{s:I, s:s, s:s, s:O}", "id", (json_int_t)e->id, "ocs",
			              e->ocs, "status", e->status == 0 ? "succeeded" : "failed",
			              "fabrics", e->fabrics);
			if (e->status)
				json_object_set_new(ev, "error", json_string(e->err));
			events_publish(r->d.events, EVENTS_OPERATION, ev);
		}
		free(e->adds);
		free(e->dels);
		free(e->err);
		json_decref(e->fabrics);
		json_decref(e->names);
	}
	r->njournal = 0;
	if (r->ev_journal)
		evtimer_del(r->ev_journal);
}

void reconcile_journal_flush(struct reconciler *r)
{
	struct store *s = r->d.store;
	if (!r->njournal)
		return;
	int rc = store_begin_relaxed(s);
	if (rc == 0)
		rc = reconcile_journal_write(r);
	if (rc == 0)
		rc = store_commit(s);
	if (rc < 0)
		store_rollback(s);
	reconcile_journal_done(r);
}

void reconcile_journal_cb(evutil_socket_t fd, short what, void *arg)
{
	struct metrics_loop l = metrics_loop_enter("reconcile");
	(void)fd;
	(void)what;
	struct reconcile_work t0 = reconcile_work_start();
	reconcile_journal_flush(arg);
	reconcile_work_end(t0);
	metrics_loop_leave(l);
}

int64_t reconcile_store_next_op(struct reconciler *r)
{
	return operations_next_id(r->d.store);
}

/* ---- the read-back copy -------------------------------------------------- */

/*
 * The read-back state is written to the store for operators and tools; a
 * restart reads every unit back and trusts the stored copy only for the server
 * reservation until then (reconcile_store_last_known()), so it is written at
 * most once a second for all units together, off the reconfiguration path.
 */
void reconcile_actual_changed(struct reconciler *r, struct unit *u)
{
	if (u->actual_dirty)
		return;
	u->actual_dirty = true;
	flush_soon(r);
}

static void flushed_copy(struct unit *u)
{
	struct plan_xc *c = malloc((u->nactual ? u->nactual : 1) * sizeof(*c));
	if (!c) {
		/* Written in full next time. */
		free(u->flushed);
		u->flushed = NULL;
		u->nflushed = 0;
		return;
	}
	if (u->nactual)
		memcpy(c, u->actual, u->nactual * sizeof(*c));
	free(u->flushed);
	u->flushed = c;
	u->nflushed = u->nactual;
}

/* Writes the changed read-backs, a unit at a time, until limit_us pass; true when all are. */
static bool flush_some(struct reconciler *r, double limit_us)
{
	struct store *s = r->d.store;
	struct timespec t0;
	bool any = false;
	for (struct unit *u = r->units; u; u = u->next)
		any |= u->actual_dirty;
	if (!any)
		return true;
	if (store_begin_relaxed(s) < 0)
		return false;
	clock_gettime(CLOCK_MONOTONIC, &t0);
	int rc = 0;
	struct unit *u;
	for (u = r->units; u && rc == 0 && mono_since(&t0) * 1e6 < limit_us; u = u->next) {
		if (!u->actual_dirty)
			continue;
		if (!u->flushed)
			rc = readback_clear(s, u->id);
		if (rc == 0)
			rc = readback_write(s, u->id, u->flushed, u->nflushed, u->actual,
			                    u->nactual);
		u->actual_dirty = rc < 0;
		if (rc == 0)
			flushed_copy(u);
	}
	if (rc == 0 && store_commit(s) == 0) {
		for (; u; u = u->next)
			if (u->actual_dirty)
				return false;
		return true;
	}
	/* Written in full again next time (the rollback undid them). */
	store_rollback(s);
	for (struct unit *v = r->units; v != u; v = v->next) {
		v->actual_dirty = true;
		free(v->flushed);
		v->flushed = NULL;
		v->nflushed = 0;
	}
	return false;
}

void reconcile_flush_actual(struct reconciler *r)
{
	/* At the end: everything, however long it takes. */
	for (int tries = 0; tries < 3 && !flush_some(r, 1e12); tries++)
		;
}

void reconcile_flush_cb(evutil_socket_t fd, short what, void *arg)
{
	struct reconciler *r = arg;
	struct metrics_loop l = metrics_loop_enter("reconcile");
	(void)fd;
	(void)what;
	struct reconcile_work t0 = reconcile_work_start();
	bool pruned = prune_some(r);
	if (!flush_some(r, RECONCILE_SLICE_US) || !pruned) {
		/* The rest on the next iteration, after whatever else is ready. */
		struct timeval now = { 0, 0 };
		evtimer_add(r->ev_flush, &now);
	}
	reconcile_work_end(t0);
	metrics_loop_leave(l);
}

/*
 * What the unit held when it was last read back, as stored (by a previous run,
 * up to a second behind). Only the server reservation trusts it, and only
 * until the first read-back: a unit unreachable after a restart may still
 * hold a deleted fabric's circuits.
 */
int reconcile_store_last_known(struct reconciler *r, struct unit *u, struct plan_xc **held,
                               size_t *n)
{
	return readback_load(r->d.store, u->id, u->ports, held, n);
}

void reconcile_store_flushed(struct unit *u)
{
	flushed_copy(u);
}

/* ---- port link states ---------------------------------------------------- */

void reconcile_store_port_state(struct reconciler *r, struct unit *u, uint32_t port, bool up)
{
	readback_port_link(r->d.store, u->id, port, up);
	log_info("reconcile", "%s: port %u link %s", u->name, port, up ? "up" : "down");
	events_publish(r->d.events, EVENTS_PORT_STATE,
	               json_pack("{s:s, s:I, s:s}", "ocs", u->name, "port", (json_int_t)port,
	                         "link", up ? "up" : "down"));
}

json_t *reconcile_store_ports_down(struct reconciler *r, int64_t ocs_id)
{
	return readback_ports_down(r->d.store, ocs_id);
}
