/*
 * The netconf driver: an OCS unit whose controller speaks NETCONF over SSH,
 * its cross-connects a YANG list of pairs (netconf_msg.h has the models).
 *
 * Two things libnetconf2 does block: making a session (libssh's handshake,
 * the <hello>, loading the unit's modules: several round trips, and the whole
 * connect timeout on a unit that does not answer), and reading a reply (once
 * its first bytes came, up to 20 s for each further byte). Each runs on a
 * short-lived thread of its own, which hands its result to the loop over a
 * pipe: a connection attempt (struct job) and the reply to the RPC in flight
 * (struct rx). Everything else runs on the loop: one RPC at a time, sent
 * without waiting, the session lent to the reader until its reply is back.
 *
 * A batch is one <edit-config> of the running datastore (removals, then
 * additions) with error-option rollback-on-error where the server has it; on
 * a server without :writable-running it locks :candidate, edits it, commits
 * (or discards) and unlocks.
 * Read-back is a <get-config> filtered to the model's container.
 *
 * Fencing (ocs_open_params.master_generation set): the leader holds the
 * running datastore's <lock>. An instance's first claim ends the holder's
 * session with <kill-session> (the deposed leader's) and takes the lock;
 * an instance that held the lock and finds it taken after a reconnect was
 * deposed, and reports "fenced:" without retrying (docs/ha.md).
 */
#include "netconf_msg.h"
#include "ocs_driver.h"

#include <errno.h>
#include <event2/event.h>
#include <fcntl.h>
#include <libssh/libssh.h>
#include <libyang/libyang.h>
#include <nc_client.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#define NCD_BACKOFF_MIN_MS  200u
#define NCD_BACKOFF_MAX_MS  5000u
#define NCD_CONNECT_TIMEOUT 10     /* seconds, for libssh's connect and each handshake step */
#define NCD_REPLY_MS        30000u /* a reply later than this ends the session */
#define NCD_KEEPALIVE_MS    5000u  /* an idle session is probed this often */
#define NCD_HOLD_MS         20u    /* may_send said no: ask again after this */

#define CAP_WRITABLE_RUNNING "urn:ietf:params:netconf:capability:writable-running:1.0"
#define CAP_CANDIDATE        "urn:ietf:params:netconf:capability:candidate:1.0"
#define CAP_ROLLBACK         "urn:ietf:params:netconf:capability:rollback-on-error:1.0"

/* ---- libnetconf2 and libyang messages ------------------------------------ */

/* The last error either library printed on this thread, for our own messages. */
static _Thread_local char lib_error[200];

static void nc_print(const struct nc_session *s, NC_VERB_LEVEL level, const char *msg)
{
	(void)s;
	if (level == NC_VERB_ERROR)
		snprintf(lib_error, sizeof(lib_error), "%s", msg);
}

static void ly_log_print(LY_LOG_LEVEL level, const char *msg, const char *path)
{
	(void)path;
	if (level == LY_LLERR)
		snprintf(lib_error, sizeof(lib_error), "%s", msg);
}

static pthread_once_t lib_once = PTHREAD_ONCE_INIT;

static void lib_init(void)
{
	nc_client_init();
	nc_verbosity(NC_VERB_ERROR);
	nc_set_print_clb_session(nc_print);
	ly_set_log_clb(ly_log_print, 0);
}

/* ---- blocking work on a thread of its own -------------------------------- */

/*
 * One piece of blocking work (a connection attempt, a reply), run on a
 * short-lived detached thread and handed back to the loop over a pipe. It is
 * held by the thread and by the loop (refs): the thread runs it, writes a
 * byte to the pipe, and lets go; the loop lets go once it took the result
 * (in its done callback) or when it gives up first. The last to let go
 * calls release, which frees what the work holds and the work itself. Only
 * the loop touches ev, and frees it before it lets go.
 */
struct work {
	_Atomic int refs;
	int pipe[2];                     /* the thread writes a byte to [1] when done */
	struct event *ev;                /* the loop's read event on pipe[0] */
	void (*run)(struct work *w);     /* on the thread */
	void (*release)(struct work *w); /* by the last to let go */
};

static void work_unref(struct work *w)
{
	if (atomic_fetch_sub(&w->refs, 1) != 1)
		return;
	close(w->pipe[0]);
	close(w->pipe[1]);
	w->release(w);
}

/* The loop lets go of w. */
static void work_leave(struct work *w)
{
	if (w->ev)
		event_free(w->ev);
	w->ev = NULL;
	work_unref(w);
}

static void *work_thread(void *arg)
{
	struct work *w = arg;
	w->run(w);
	/* the pipe is open while the thread holds w, whether the loop still listens or not */
	char c = 1;
	while (write(w->pipe[1], &c, 1) < 0 && errno == EINTR)
		;
	work_unref(w);
	return NULL;
}

/*
 * Starts w (run and release set, the rest zero) on its thread; done(arg) is
 * called on the loop when it ends. 0, or -1 with w released.
 */
static int work_start(struct work *w, struct event_base *base, event_callback_fn done, void *arg)
{
	pthread_t t;
	pthread_attr_t attr;
	atomic_init(&w->refs, 1); /* the loop's */
	if (pipe2(w->pipe, O_CLOEXEC) < 0) {
		w->release(w);
		return -1;
	}
	w->ev = event_new(base, w->pipe[0], EV_READ, done, arg);
	if (!w->ev || event_add(w->ev, NULL) < 0) {
		work_leave(w);
		return -1;
	}
	atomic_fetch_add(&w->refs, 1); /* the thread's */
	pthread_attr_init(&attr);
	pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
	int rc = pthread_create(&t, &attr, work_thread, w);
	pthread_attr_destroy(&attr);
	if (rc != 0) {
		atomic_fetch_sub(&w->refs, 1);
		work_leave(w);
		return -1;
	}
	return 0;
}

/* ---- the connect thread -------------------------------------------------- */

/* Where a unit is and how to log in: the configuration's, copied at open(). */
struct target {
	struct ncm_endpoint ep;
	char key[512];         /* private key file */
	char known_hosts[512]; /* known-hosts file */
	char yang_dir[512];    /* where libnetconf2 looks for modules first ("": none) */
};

/* One connection attempt. */
struct job {
	struct work w; /* first: a struct work * is a struct job * */
	struct target t;
	struct nc_session *session; /* result, owned by the job until taken */
	int fd;                     /* its socket */
	char err[1400];             /* why there is no session */
};

static void job_release(struct work *w)
{
	struct job *j = (struct job *)w;
	if (j->session)
		nc_session_free(j->session, NULL);
	free(j);
}

static const char *known_host_error(enum ssh_known_hosts_e st)
{
	switch (st) {
	case SSH_KNOWN_HOSTS_CHANGED:
		return "the unit's host key differs from the one in";
	case SSH_KNOWN_HOSTS_OTHER:
		return "the unit offers a host key of another type than the one in";
	case SSH_KNOWN_HOSTS_UNKNOWN:
		return "the unit's host key is not in";
	case SSH_KNOWN_HOSTS_NOT_FOUND:
		return "cannot read the known-hosts file";
	default:
		return "cannot check the host key against";
	}
}

/* Makes the SSH session: connected, host key checked, authenticated. */
static ssh_session ssh_open(struct job *j)
{
	const struct target *t = &j->t;
	ssh_session ss = ssh_new();
	unsigned port = t->ep.port;
	long timeout = NCD_CONNECT_TIMEOUT;
	int no = 0;
	ssh_key key = NULL;
	if (!ss) {
		snprintf(j->err, sizeof(j->err), "netconf: out of memory");
		return NULL;
	}
	ssh_options_set(ss, SSH_OPTIONS_HOST, t->ep.host);
	ssh_options_set(ss, SSH_OPTIONS_PORT, &port);
	ssh_options_set(ss, SSH_OPTIONS_USER, t->ep.user);
	ssh_options_set(ss, SSH_OPTIONS_TIMEOUT, &timeout);
	/* only the configured file decides which host keys are trusted */
	ssh_options_set(ss, SSH_OPTIONS_PROCESS_CONFIG, &no);
	ssh_options_set(ss, SSH_OPTIONS_KNOWNHOSTS, t->known_hosts);
	ssh_options_set(ss, SSH_OPTIONS_GLOBAL_KNOWNHOSTS, "/dev/null");
	if (ssh_connect(ss) != SSH_OK) {
		snprintf(j->err, sizeof(j->err), "unreachable: %s:%u: %s", t->ep.host, t->ep.port,
		         ssh_get_error(ss));
		goto fail;
	}
	enum ssh_known_hosts_e st = ssh_session_is_known_server(ss);
	if (st != SSH_KNOWN_HOSTS_OK) {
		snprintf(j->err, sizeof(j->err), "hostkey: %s %s", known_host_error(st),
		         t->known_hosts);
		goto fail;
	}
	if (ssh_pki_import_privkey_file(t->key, NULL, NULL, NULL, &key) != SSH_OK) {
		snprintf(j->err, sizeof(j->err), "auth: cannot read the private key %s", t->key);
		goto fail;
	}
	int rc = ssh_userauth_publickey(ss, NULL, key);
	ssh_key_free(key);
	if (rc != SSH_AUTH_SUCCESS) {
		snprintf(j->err, sizeof(j->err), "auth: the unit refused key %s for user %s%s%s",
		         t->key, t->ep.user, rc == SSH_AUTH_ERROR ? ": " : "",
		         rc == SSH_AUTH_ERROR ? ssh_get_error(ss) : "");
		goto fail;
	}
	return ss;
fail:
	ssh_disconnect(ss);
	ssh_free(ss);
	return NULL;
}

static void job_run(struct work *w)
{
	struct job *j = (struct job *)w;
	const struct target *t = &j->t;
	ssh_session ss = ssh_open(j);
	if (!ss)
		return;
	if (t->yang_dir[0])
		nc_client_set_schema_searchpath(t->yang_dir);
	lib_error[0] = '\0';
	j->session = nc_connect_libssh(ss, NULL); /* owns ss from here, also on failure */
	if (j->session) {
		j->fd = ssh_get_fd(ss);
		ssh_set_blocking(ss, 0);
	} else {
		snprintf(j->err, sizeof(j->err), "netconf: no NETCONF session on %s:%u%s%s",
		         t->ep.host, t->ep.port, lib_error[0] ? ": " : "", lib_error);
	}
}

/* ---- the reply reader ---------------------------------------------------- */

/*
 * The reply to the RPC in flight, read on a thread of its own: libnetconf2
 * reads a message whole once its first bytes came, waiting up to 20 s for
 * each further byte and 300 s in all, and a unit that stalls mid-reply must
 * not hold the loop. The loop hands the session and the RPC over for the
 * call and takes them back with the reply (rx_cb); held by the thread and by
 * the loop like a job. A loop that lets go first (the session dropped, the
 * unit closed) shuts the socket, which ends the read at once, and leaves the
 * session and the RPC to the reader (own), freed by the last to let go.
 */
struct rx {
	struct work w;         /* first: a struct work * is a struct rx * */
	struct nc_session *s;  /* the unit's, lent for the call; the reader's once own */
	struct nc_rpc *rpc;    /* likewise */
	uint64_t msgid;        /* of the RPC */
	bool own;              /* set by the loop before it lets go */
	NC_MSG_TYPE t;         /* what the read ended with */
	struct lyd_node *envp; /* the reply's envelope, until the loop takes it */
	struct lyd_node *op;   /* its data, likewise */
	char err[200];         /* libnetconf2's last error on the reader's thread */
};

static void rx_release(struct work *w)
{
	struct rx *x = (struct rx *)w;
	/* the trees first: they live in the session's libyang context */
	lyd_free_all(x->envp);
	lyd_free_all(x->op);
	if (x->own) {
		nc_session_free(x->s, NULL);
		nc_rpc_free(x->rpc);
	}
	free(x);
}

static void rx_run(struct work *w)
{
	struct rx *x = (struct rx *)w;
	lib_error[0] = '\0';
	do {
		lyd_free_all(x->envp);
		lyd_free_all(x->op);
		x->envp = x->op = NULL;
		x->t = nc_recv_reply(x->s, x->rpc, x->msgid, NCD_REPLY_MS, &x->envp, &x->op);
	} while (x->t == NC_MSG_NOTIF);
	snprintf(x->err, sizeof(x->err), "%s", lib_error);
}

/* ---- the unit ------------------------------------------------------------ */

enum unit_state {
	U_IDLE,       /* waiting to connect (backoff) */
	U_CONNECTING, /* the thread is making the session */
	U_CLAIMING,   /* fencing: locking the running datastore */
	U_UP,         /* ready for apply() and read() */
	U_FENCED,     /* another leader took the unit: nothing more is tried */
};

/* What the RPC in flight is for. */
enum rpc_kind {
	RPC_NONE,
	RPC_LOCK,    /* fencing claim */
	RPC_KILL,    /* fencing: ending the holder's session */
	RPC_EDIT,    /* apply(): the batch */
	RPC_CLOCK,   /* apply() on :candidate: its lock, taken first */
	RPC_COMMIT,  /* apply() on :candidate: its commit */
	RPC_DISCARD, /* apply() on :candidate refused: back to running */
	RPC_CUNLOCK, /* apply() on :candidate: its lock, given back last */
	RPC_READ,    /* read() */
	RPC_PROBE,   /* keep-alive */
};

struct unit {
	struct event_base *base;
	struct ocs_events ev;
	char name[64];
	uint32_t ports;
	uint64_t generation;
	bool (*may_send)(void *arg);
	void *may_send_arg;
	struct ncm_model model;
	struct target target; /* copied into each attempt's job */

	enum unit_state state;
	struct job *job; /* the attempt in flight (U_CONNECTING) */
	struct nc_session *s;
	bool use_candidate;  /* no :writable-running: edit :candidate and commit */
	bool rollback;       /* the server has :rollback-on-error */
	uint32_t lock_sid;   /* the session of ours that last took the lock (0: none yet) */
	struct event *rd;    /* the SSH socket is readable */
	struct event *retry; /* backoff before the next attempt */
	struct event *timer; /* the reply's deadline, or the keep-alive */
	struct event *held;  /* may_send said no */
	uint32_t backoff_ms;

	enum rpc_kind rpc_kind;
	struct nc_rpc *rpc; /* the RPC in flight (rx set), or waiting to go (rx NULL) */
	uint64_t msgid;
	uint32_t kill_sid; /* RPC_KILL: whose session */
	struct rx *rx;     /* the reply being read (the RPC in flight), NULL when none */
	int fd;            /* the session's socket, kept apart from libssh's state */
	/* an operation's RPC that waits for the keep-alive probe in flight to be answered */
	struct nc_rpc *next_rpc;
	enum rpc_kind next_kind;

	/* the operation in flight */
	ocs_apply_cb apply_cb;
	ocs_read_cb read_cb;
	void *op_arg;
	char op_err[400];    /* apply refused: the server's words, kept across discard */
	struct nc_rpc *edit; /* :candidate: the batch's edit-config, sent once the lock is taken */

	struct ocs_xc *reversed; /* circuits held as ingress b, egress a, from the last read */
	size_t nreversed;

	unsigned depth;
	bool closed;
	char err[1400];
};

static struct unit *to_unit(struct ocs_handle *h)
{
	return (struct unit *)h;
}

static void arm_ms(struct event *ev, uint32_t ms)
{
	struct timeval tv = { ms / 1000, (ms % 1000) * 1000 };
	evtimer_add(ev, &tv);
}

/*
 * Frees the session. Unless polite, its socket is shut first: libnetconf2
 * would send <close-session> and wait up to 200 ms for the answer, which a
 * broken session does not give and a fenced leader must not send.
 */
static void end_session(struct unit *u, bool abrupt)
{
	if (abrupt)
		shutdown(u->fd, SHUT_RDWR);
	nc_session_free(u->s, NULL);
	u->s = NULL;
}

static void rx_abandon(struct unit *u);

static void unit_free(struct unit *u)
{
	if (u->job)
		work_leave(&u->job->w);
	if (u->rx)
		rx_abandon(u);
	if (u->rd)
		event_free(u->rd);
	if (u->s)
		end_session(u, u->may_send && !u->may_send(u->may_send_arg));
	if (u->rpc)
		nc_rpc_free(u->rpc);
	if (u->next_rpc)
		nc_rpc_free(u->next_rpc);
	if (u->edit)
		nc_rpc_free(u->edit);
	if (u->retry)
		event_free(u->retry);
	if (u->timer)
		event_free(u->timer);
	if (u->held)
		event_free(u->held);
	free(u->reversed);
	free(u);
}

static void enter(struct unit *u)
{
	u->depth++;
}

static void leave(struct unit *u)
{
	if (--u->depth == 0 && u->closed)
		unit_free(u);
}

static void report(struct unit *u, enum ocs_conn_state st, const char *err)
{
	if (!u->closed && u->ev.conn_state)
		u->ev.conn_state(u->ev.arg, st, err);
}

static void clear_rpc(struct unit *u)
{
	if (u->rpc)
		nc_rpc_free(u->rpc);
	u->rpc = NULL;
	u->rpc_kind = RPC_NONE;
	evtimer_del(u->held);
}

/* Completes apply() or read() in flight; the caller holds enter(). */
static void finish_op(struct unit *u, int status, const char *err, const struct ocs_readback *rb)
{
	ocs_apply_cb acb = u->apply_cb;
	ocs_read_cb rcb = u->read_cb;
	void *arg = u->op_arg;
	u->apply_cb = NULL;
	u->read_cb = NULL;
	u->op_arg = NULL;
	if (acb)
		acb(arg, status, err);
	else if (rcb)
		rcb(arg, status, err, status ? NULL : rb);
}

static void idle_timer(struct unit *u)
{
	arm_ms(u->timer, NCD_KEEPALIVE_MS);
}

/* The next connection attempt after the backoff, which doubles up to its cap. */
static void retry_later(struct unit *u)
{
	u->state = U_IDLE;
	arm_ms(u->retry, u->backoff_ms);
	u->backoff_ms =
	    u->backoff_ms * 2 > NCD_BACKOFF_MAX_MS ? NCD_BACKOFF_MAX_MS : u->backoff_ms * 2;
}

/*
 * Ends the session: fails the operation in flight, reports DOWN and, unless
 * fenced, schedules the next attempt. The caller holds enter().
 */
static void drop(struct unit *u, const char *reason, bool fenced)
{
	char msg[sizeof(u->err) + 32];
	snprintf(u->err, sizeof(u->err), "%s", reason);
	if (u->rd) {
		event_free(u->rd);
		u->rd = NULL;
	}
	if (u->rx)
		rx_abandon(u);
	if (u->s)
		end_session(u, true);
	clear_rpc(u);
	if (u->next_rpc)
		nc_rpc_free(u->next_rpc);
	u->next_rpc = NULL;
	if (u->edit)
		nc_rpc_free(u->edit);
	u->edit = NULL;
	evtimer_del(u->timer);
	if (fenced)
		u->state = U_FENCED;
	else
		retry_later(u);
	snprintf(msg, sizeof(msg), "connection lost: %s", u->err);
	finish_op(u, fenced ? -EPERM : -ENOTCONN, msg, NULL);
	report(u, OCS_CONN_DOWN, u->err);
}

static void try_send(struct unit *u);
static int rx_start(struct unit *u);

/* Starts an RPC (rpc owned by u from here); the caller holds enter(). */
static void send_rpc(struct unit *u, enum rpc_kind kind, struct nc_rpc *rpc)
{
	if (!rpc) {
		drop(u, "netconf: out of memory", false);
		return;
	}
	clear_rpc(u);
	u->rpc = rpc;
	u->rpc_kind = kind;
	try_send(u);
}

static void try_send(struct unit *u)
{
	if (u->may_send && !u->may_send(u->may_send_arg)) {
		arm_ms(u->held, NCD_HOLD_MS);
		return;
	}
	lib_error[0] = '\0';
	NC_MSG_TYPE t = nc_send_rpc(u->s, u->rpc, 1000, &u->msgid);
	if (t != NC_MSG_RPC) {
		char why[sizeof(lib_error) + 40];
		snprintf(why, sizeof(why), "closed: cannot send%s%s", lib_error[0] ? ": " : "",
		         lib_error);
		drop(u, why, false);
		return;
	}
	if (rx_start(u) < 0) {
		drop(u, "netconf: cannot start reading the reply", false);
		return;
	}
	arm_ms(u->timer, NCD_REPLY_MS);
}

static void held_cb(evutil_socket_t fd, short what, void *arg)
{
	struct unit *u = arg;
	(void)fd;
	(void)what;
	enter(u);
	if (u->rpc && !u->rx && u->s)
		try_send(u);
	leave(u);
}

static void go_up(struct unit *u)
{
	u->state = U_UP;
	u->backoff_ms = NCD_BACKOFF_MIN_MS;
	idle_timer(u);
	report(u, OCS_CONN_UP, NULL);
}

static void claim(struct unit *u)
{
	u->state = U_CLAIMING;
	u->kill_sid = 0;
	send_rpc(u, RPC_LOCK, nc_rpc_lock(NC_DATASTORE_RUNNING));
}

/*
 * What a reply says, read out of its trees before anything is done about it:
 * the trees live in the session's libyang context, which ends with the
 * session, and acting on a reply may end the session (a refusal, a send that
 * fails).
 */
struct reply {
	bool ok;         /* <ok/> */
	bool refused;    /* an rpc-error */
	char error[260]; /* its tag and message */
	bool has_holder; /* lock-denied named the session that holds the lock */
	uint32_t holder; /* that session */
	int read_rc;     /* RPC_READ: 0, or why its data could not be read */
	char read_err[200];
	struct ncm_pairs pairs; /* RPC_READ: what the unit holds (owned) */
};

static void reply_read(const struct unit *u, const struct lyd_node *envp, const struct lyd_node *op,
                       struct reply *r)
{
	memset(r, 0, sizeof(*r));
	r->ok = ncm_reply_ok(envp);
	r->refused = ncm_reply_error(envp, r->error, sizeof(r->error));
	r->has_holder = ncm_lock_holder(envp, &r->holder) == 0;
	if (u->rpc_kind == RPC_READ && !r->refused)
		r->read_rc = ncm_read_pairs(op, &u->model, u->ports, &r->pairs, r->read_err,
		                            sizeof(r->read_err));
}

/* The reply to the fencing lock; the caller holds enter(). */
static void on_lock(struct unit *u, const struct reply *rp)
{
	uint32_t holder = rp->holder;
	char why[300];
	if (rp->ok) {
		u->lock_sid = nc_session_get_id(u->s);
		clear_rpc(u); /* before UP: the reconciler starts its read at once */
		go_up(u);
		return;
	}
	bool has_holder = rp->has_holder;
	/* a first claim, or our own session that held the lock before a reconnect, ends it */
	if (has_holder && (!u->lock_sid || holder == u->lock_sid) && holder != u->kill_sid) {
		u->kill_sid = holder;
		send_rpc(u, RPC_KILL, nc_rpc_kill(holder));
		return;
	}
	if (has_holder)
		snprintf(why, sizeof(why),
		         "fenced: session %u of another controller holds the unit's lock", holder);
	else {
		snprintf(why, sizeof(why), "fenced: the unit refused the lock: %.200s",
		         rp->refused ? rp->error : "no answer");
	}
	drop(u, why, true);
}

static void read_done(struct unit *u, struct reply *rp)
{
	struct ncm_pairs p = rp->pairs;
	memset(&rp->pairs, 0, sizeof(rp->pairs));
	if (rp->read_rc < 0) {
		clear_rpc(u);
		idle_timer(u);
		finish_op(u, rp->read_rc, rp->read_err, NULL);
		return;
	}
	free(u->reversed);
	u->reversed = p.reversed;
	u->nreversed = p.nreversed;
	p.reversed = NULL;
	struct ocs_readback rb = { .xcs = p.xcs,
		                   .nxcs = p.nxcs,
		                   .partial = p.partial,
		                   .npartial = p.npartial,
		                   .foreign = p.foreign,
		                   .nforeign = p.nforeign };
	clear_rpc(u);
	idle_timer(u);
	finish_op(u, 0, NULL, &rb);
	ncm_pairs_free(&p);
}

/* One reply of the RPC in flight; the caller holds enter(). */
static void on_reply(struct unit *u, struct reply *rp)
{
	const char *e = rp->error;
	bool refused = rp->refused;
	switch (u->rpc_kind) {
	case RPC_LOCK:
		on_lock(u, rp);
		return;
	case RPC_KILL:
		/* whether it was ended or already gone, the lock is tried once more */
		send_rpc(u, RPC_LOCK, nc_rpc_lock(NC_DATASTORE_RUNNING));
		return;
	case RPC_CLOCK: {
		if (refused) {
			/* another session edits the candidate: this batch waits for its retry */
			snprintf(u->op_err, sizeof(u->op_err),
			         "the unit's candidate datastore is in use: %s", e);
			break;
		}
		struct nc_rpc *edit = u->edit;
		u->edit = NULL;
		send_rpc(u, RPC_EDIT, edit);
		return;
	}
	case RPC_EDIT:
		if (refused) {
			snprintf(u->op_err, sizeof(u->op_err), "refused by the unit: %s", e);
			if (u->use_candidate) {
				send_rpc(u, RPC_DISCARD, nc_rpc_discard());
				return;
			}
			break;
		}
		if (u->use_candidate) {
			send_rpc(u, RPC_COMMIT,
			         nc_rpc_commit(0, 0, NULL, NULL, NC_PARAMTYPE_CONST));
			return;
		}
		clear_rpc(u);
		idle_timer(u);
		finish_op(u, 0, NULL, NULL);
		return;
	case RPC_COMMIT:
		if (refused) {
			snprintf(u->op_err, sizeof(u->op_err), "refused by the unit: %s", e);
			send_rpc(u, RPC_DISCARD, nc_rpc_discard());
			return;
		}
		send_rpc(u, RPC_CUNLOCK, nc_rpc_unlock(NC_DATASTORE_CANDIDATE));
		return;
	case RPC_DISCARD:
		send_rpc(u, RPC_CUNLOCK, nc_rpc_unlock(NC_DATASTORE_CANDIDATE));
		return;
	case RPC_CUNLOCK:
		/* the batch's outcome was settled before; a refused unlock ends with the session */
		clear_rpc(u);
		idle_timer(u);
		finish_op(u, u->op_err[0] ? -EIO : 0, u->op_err[0] ? u->op_err : NULL, NULL);
		return;
	case RPC_READ:
		if (refused)
			break;
		read_done(u, rp);
		return;
	case RPC_PROBE:
	case RPC_NONE:
		clear_rpc(u);
		if (u->next_rpc) {
			u->rpc = u->next_rpc;
			u->rpc_kind = u->next_kind;
			u->next_rpc = NULL;
			try_send(u);
		} else {
			idle_timer(u);
		}
		return;
	}
	/* a refused lock, edit (without a candidate) or read */
	enum rpc_kind kind = u->rpc_kind;
	clear_rpc(u);
	if (u->edit)
		nc_rpc_free(u->edit);
	u->edit = NULL;
	idle_timer(u);
	if (kind == RPC_READ)
		snprintf(u->op_err, sizeof(u->op_err), "get-config refused by the unit: %s", e);
	finish_op(u, -EIO, u->op_err, NULL);
}

/* The reader's thread is done: the reply, or why there is none. */
static void rx_cb(evutil_socket_t fd, short what, void *arg)
{
	struct unit *u = arg;
	struct rx *x = u->rx;
	char why[sizeof(x->err) + 60];
	(void)fd;
	(void)what;
	enter(u);
	u->rx = NULL;
	evtimer_del(u->timer);
	NC_MSG_TYPE t = x->t;
	struct reply rp;
	if (t == NC_MSG_REPLY)
		reply_read(u, x->envp, x->op, &rp);
	snprintf(why, sizeof(why), "closed: the session ended%s%s", x->err[0] ? ": " : "", x->err);
	/* the reader is done with the trees: freed here, while their session is still there */
	lyd_free_all(x->envp);
	lyd_free_all(x->op);
	x->envp = x->op = NULL;
	work_leave(&x->w);
	if (t == NC_MSG_REPLY) {
		on_reply(u, &rp);
		ncm_pairs_free(&rp.pairs);
	} else if (t == NC_MSG_WOULDBLOCK) {
		drop(u, "closed: the unit did not answer within 30 s", false);
	} else {
		drop(u, why, false);
	}
	if (!u->closed && u->rd && !u->rx)
		event_add(u->rd, NULL); /* idle again: the loop watches the socket */
	leave(u);
}

/* Hands the session and the RPC just sent to a reader; 0 or -1. */
static int rx_start(struct unit *u)
{
	struct rx *x = calloc(1, sizeof(*x));
	if (!x)
		return -1;
	x->w.run = rx_run;
	x->w.release = rx_release;
	x->s = u->s;
	x->rpc = u->rpc;
	x->msgid = u->msgid;
	if (work_start(&x->w, u->base, rx_cb, u) < 0)
		return -1;
	u->rx = x;
	if (u->rd)
		event_del(u->rd); /* the reader has the socket */
	return 0;
}

/*
 * Lets go of the reader before its reply: the socket is shut, so its read
 * ends at once, and the session and the RPC become its own.
 */
static void rx_abandon(struct unit *u)
{
	struct rx *x = u->rx;
	u->rx = NULL;
	shutdown(u->fd, SHUT_RDWR);
	x->own = true;
	u->s = NULL;
	u->rpc = NULL;
	work_leave(&x->w);
}

/* A <get-config> of running with filter (taken), or NULL when out of memory. */
static struct nc_rpc *get_config(char *filter)
{
	struct nc_rpc *rpc = filter ? nc_rpc_getconfig(NC_DATASTORE_RUNNING, filter, NC_WD_UNKNOWN,
	                                               NC_PARAMTYPE_FREE)
	                            : NULL;
	if (!rpc)
		free(filter);
	return rpc;
}

/*
 * A probe of an idle session (the socket said something, or it has been
 * quiet): a get-config that selects nothing, cheap whatever the unit holds.
 */
static void probe(struct unit *u)
{
	send_rpc(u, RPC_PROBE, get_config(ncm_probe_filter(&u->model)));
}

static void rd_cb(evutil_socket_t fd, short what, void *arg)
{
	struct unit *u = arg;
	(void)fd;
	(void)what;
	enter(u);
	if (u->rx)
		event_del(u->rd); /* the reader has the socket */
	else if (u->state == U_UP && !u->rpc && !u->apply_cb && !u->read_cb)
		probe(u); /* unasked bytes: most often the end of the session */
	/*
	 * What is held back (may_send said no) cannot read the socket: stop
	 * watching it, or a readable socket would wake the loop without end;
	 * try_send watches it again once it sends.
	 */
	if (!u->closed && u->rd && u->rpc && !u->rx)
		event_del(u->rd);
	leave(u);
}

static void timer_cb(evutil_socket_t fd, short what, void *arg)
{
	struct unit *u = arg;
	(void)fd;
	(void)what;
	enter(u);
	if (u->rx)
		drop(u, "closed: the unit did not answer within 30 s", false);
	else if (u->state == U_UP && !u->rpc)
		probe(u);
	leave(u);
}

/* The thread finished: take its session or its error. */
static void job_cb(evutil_socket_t fd, short what, void *arg)
{
	struct unit *u = arg;
	struct job *j = u->job;
	(void)fd;
	(void)what;
	enter(u);
	u->job = NULL;
	if (!j->session) {
		snprintf(u->err, sizeof(u->err), "%s", j->err);
		work_leave(&j->w);
		retry_later(u);
		report(u, OCS_CONN_DOWN, u->err);
		goto out;
	}
	u->s = j->session;
	u->fd = j->fd;
	j->session = NULL;
	work_leave(&j->w);
	u->use_candidate =
	    !nc_session_cpblt(u->s, CAP_WRITABLE_RUNNING) && nc_session_cpblt(u->s, CAP_CANDIDATE);
	u->rollback = nc_session_cpblt(u->s, CAP_ROLLBACK) != NULL;
	u->rd = event_new(u->base, u->fd, EV_READ | EV_PERSIST, rd_cb, u);
	if (!u->rd || event_add(u->rd, NULL) < 0) {
		drop(u, "netconf: out of memory", false);
		goto out;
	}
	if (u->generation)
		claim(u);
	else
		go_up(u);
out:
	leave(u);
}

static void retry_cb(evutil_socket_t fd, short what, void *arg)
{
	struct unit *u = arg;
	(void)fd;
	(void)what;
	enter(u);
	if (u->state != U_IDLE)
		goto out;
	struct job *j = calloc(1, sizeof(*j));
	if (j) {
		j->w.run = job_run;
		j->w.release = job_release;
		j->t = u->target;
	}
	if (!j || work_start(&j->w, u->base, job_cb, u) < 0) {
		snprintf(u->err, sizeof(u->err), "netconf: cannot start a connection attempt");
		arm_ms(u->retry, NCD_BACKOFF_MAX_MS);
		report(u, OCS_CONN_DOWN, u->err);
		goto out;
	}
	u->job = j;
	u->state = U_CONNECTING;
	report(u, OCS_CONN_CONNECTING, NULL);
out:
	leave(u);
}

/* ---- the operations ------------------------------------------------------ */

static int nd_check_endpoint(const char *endpoint, char *err, size_t errlen)
{
	struct ncm_endpoint ep;
	return ncm_parse_endpoint(endpoint, &ep, err, errlen);
}

static const char *setting(const struct ocs_open_params *p, const char *key)
{
	return p->setting ? p->setting(p->setting_arg, key) : NULL;
}

static int copy_setting(const struct ocs_open_params *p, const char *key, char *dst, size_t n,
                        bool required, char *err, size_t errlen)
{
	const char *v = setting(p, key);
	if (!v || !*v) {
		if (!required)
			return 0;
		snprintf(err, errlen, "netconf: no [netconf] %s for unit %s (nor %s.%s)", key,
		         p->name, key, p->name);
		return -EINVAL;
	}
	if (strlen(v) >= n) {
		snprintf(err, errlen, "netconf: [netconf] %s is too long", key);
		return -EINVAL;
	}
	snprintf(dst, n, "%s", v);
	return 0;
}

/* The unit's model: [netconf] model, "ofcd" when unset. */
static int load_model(const struct ocs_open_params *p, struct ncm_model *m, char *err,
                      size_t errlen)
{
	const char *v = setting(p, "model");
	char why[200];
	if (ncm_model_parse(v && *v ? v : "ofcd", m, why, sizeof(why)) < 0) {
		snprintf(err, errlen, "netconf: [netconf] model: %s", why);
		return -EINVAL;
	}
	return 0;
}

static int nd_open(struct event_base *base, const struct ocs_open_params *params,
                   const struct ocs_events *ev, struct ocs_handle **out, char *err, size_t errlen)
{
	struct unit *u = calloc(1, sizeof(*u));
	int r;
	if (!u) {
		snprintf(err, errlen, "netconf: out of memory");
		return -ENOMEM;
	}
	pthread_once(&lib_once, lib_init);
	r = ncm_parse_endpoint(params->endpoint, &u->target.ep, err, errlen);
	if (r == 0)
		r = copy_setting(params, "key", u->target.key, sizeof(u->target.key), true, err,
		                 errlen);
	if (r == 0)
		r = copy_setting(params, "known_hosts", u->target.known_hosts,
		                 sizeof(u->target.known_hosts), true, err, errlen);
	if (r == 0)
		r = copy_setting(params, "yang_dir", u->target.yang_dir, sizeof(u->target.yang_dir),
		                 false, err, errlen);
	if (r == 0)
		r = load_model(params, &u->model, err, errlen);
	if (r == 0 && params->ports < 1) {
		snprintf(err, errlen, "netconf: a unit needs at least one port");
		r = -EINVAL;
	}
	if (r < 0) {
		free(u);
		return r;
	}
	u->base = base;
	if (ev)
		u->ev = *ev;
	snprintf(u->name, sizeof(u->name), "%s", params->name ? params->name : "");
	u->ports = params->ports;
	u->generation = params->master_generation;
	u->may_send = params->may_send;
	u->may_send_arg = params->may_send_arg;
	u->backoff_ms = NCD_BACKOFF_MIN_MS;
	u->retry = evtimer_new(base, retry_cb, u);
	u->timer = evtimer_new(base, timer_cb, u);
	u->held = evtimer_new(base, held_cb, u);
	if (!u->retry || !u->timer || !u->held) {
		unit_free(u);
		snprintf(err, errlen, "netconf: out of memory");
		return -ENOMEM;
	}
	/* the first attempt starts on the loop, so that CONNECTING is not reported here */
	arm_ms(u->retry, 0);
	*out = (struct ocs_handle *)u;
	return 0;
}

static void nd_close(struct ocs_handle *h)
{
	struct unit *u = to_unit(h);
	if (!u)
		return;
	u->closed = true;
	evtimer_del(u->retry);
	evtimer_del(u->timer);
	evtimer_del(u->held);
	if (u->rd)
		event_del(u->rd);
	if (!u->depth)
		unit_free(u);
}

static int start_op(struct unit *u)
{
	if (u->closed)
		return -EINVAL;
	if (u->state != U_UP || !u->s)
		return -ENOTCONN;
	if (u->apply_cb || u->read_cb)
		return -EBUSY;
	return 0;
}

/*
 * Whether a batch's cross-connects are a unit's. A removal may name one port
 * (ocs_driver.h): a pair read back without its egress or joining a port to
 * itself is removed by its ingress.
 */
static int check_xcs(const struct unit *u, const struct ocs_xc *xcs, size_t n, bool removals)
{
	for (size_t i = 0; i < n; i++) {
		bool one_port = removals && (xcs[i].a == 0 || xcs[i].a == xcs[i].b);
		if (xcs[i].b < 1 || xcs[i].b > u->ports ||
		    (!one_port && (xcs[i].a < 1 || xcs[i].a >= xcs[i].b)))
			return -EINVAL;
	}
	return 0;
}

/*
 * Starts the operation's RPC from the loop (held_cb), never inside the
 * caller's call; after the keep-alive probe's reply when one is in flight.
 */
static void start_deferred(struct unit *u, enum rpc_kind kind, struct nc_rpc *rpc)
{
	if (u->rx) {
		u->next_rpc = rpc;
		u->next_kind = kind;
		return;
	}
	clear_rpc(u);
	u->rpc = rpc;
	u->rpc_kind = kind;
	arm_ms(u->held, 0);
}

static int nd_apply(struct ocs_handle *h, const struct ocs_batch *batch, ocs_apply_cb cb, void *arg)
{
	struct unit *u = to_unit(h);
	int r = start_op(u);
	if (r < 0)
		return r;
	if (check_xcs(u, batch->del, batch->ndel, true) < 0 ||
	    check_xcs(u, batch->add, batch->nadd, false) < 0)
		return -EINVAL;
	char *xml = ncm_edit_config(&u->model, u->ports, batch, u->reversed, u->nreversed);
	if (!xml)
		return -ENOMEM;
	struct nc_rpc *rpc =
	    nc_rpc_edit(u->use_candidate ? NC_DATASTORE_CANDIDATE : NC_DATASTORE_RUNNING,
	                NC_RPC_EDIT_DFLTOP_MERGE, NC_RPC_EDIT_TESTOPT_UNKNOWN,
	                u->rollback ? NC_RPC_EDIT_ERROPT_ROLLBACK : NC_RPC_EDIT_ERROPT_UNKNOWN, xml,
	                NC_PARAMTYPE_FREE);
	if (!rpc) {
		free(xml);
		return -ENOMEM;
	}
	u->apply_cb = cb;
	u->op_arg = arg;
	u->op_err[0] = '\0';
	if (!u->use_candidate) {
		start_deferred(u, RPC_EDIT, rpc);
		return 0;
	}
	/* lock, edit, commit (or discard), unlock: no other session's edit mixes in */
	struct nc_rpc *lock = nc_rpc_lock(NC_DATASTORE_CANDIDATE);
	if (!lock) {
		nc_rpc_free(rpc);
		u->apply_cb = NULL;
		u->op_arg = NULL;
		return -ENOMEM;
	}
	u->edit = rpc;
	start_deferred(u, RPC_CLOCK, lock);
	return 0;
}

static int nd_read(struct ocs_handle *h, ocs_read_cb cb, void *arg)
{
	struct unit *u = to_unit(h);
	int r = start_op(u);
	if (r < 0)
		return r;
	struct nc_rpc *rpc = get_config(ncm_read_filter(&u->model));
	if (!rpc)
		return -ENOMEM;
	u->read_cb = cb;
	u->op_arg = arg;
	start_deferred(u, RPC_READ, rpc);
	return 0;
}

const struct ocs_driver_ops ocs_netconf_driver = {
	.name = "netconf",
	.check_endpoint = nd_check_endpoint,
	.open = nd_open,
	.close = nd_close,
	.apply = nd_apply,
	.read = nd_read,
	.inject = NULL,
};
