/* The pre-update hook (cable and membership rows) is compiled into Debian's SQLite. */
#define SQLITE_ENABLE_PREUPDATE_HOOK 1

#include "desired.h"

#include <errno.h>
#include <sqlite3.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/metrics.h"
#include "log.h"
#include "store_changes.h"
#include "store_sql.h"

/* A fabric's name, shared by the former entries it left behind. */
struct name {
	size_t refs;
	char s[65];
};

/* A cross-connect no longer desired, whose it was, and since when. */
struct former {
	struct plan_xc xc;
	struct name *fabric;
	int64_t since; /* the store's applied revision as it began (desired_now()) */
};

/* How many circuits a fabric has (in the whole mirror, or on one unit). */
struct fabric_count {
	int64_t fabric;
	size_t n;
};

/* A sorted array of counts by fabric; unknown once a count could not be kept (memory). */
struct counts {
	struct fabric_count *v;
	size_t n;
	bool unknown;
};

struct unit_set {
	int64_t ocs_id;
	struct plan_xc *xc; /* sorted */
	int64_t *fabric;
	size_t n;
	struct former *former; /* sorted by xc */
	size_t nformer;
	uint64_t former_version; /* changes whenever former does */
	int64_t *owner;          /* fabric owning each port, by port; nowner entries */
	size_t nowner;
};

/* A fabric's members as the mirror knows them: the servers and their cabled ports. */
struct members {
	int64_t fabric;
	int64_t *servers;
	size_t nservers;
	struct desired_port *ports;
	size_t nports;
};

/* A circuit row inserted (added) or deleted in the open transaction. */
struct row_change {
	int64_t ocs_id;
	struct plan_xc xc;
	int64_t fabric;
	bool added;
	size_t seq; /* its place in the transaction: later changes win */
};

/* A membership row inserted or deleted in the open transaction. */
struct member_change {
	int64_t fabric;
	int64_t server;
	bool added;
};

/* A fabric row deleted in the open transaction: whose its leaving circuits were. */
struct gone_fabric {
	int64_t id;
	char name[65];
};

/* Where the columns the mirror reads sit in their tables' rows (PRAGMA table_info). */
struct columns {
	int circuit_fabric, circuit_ocs, circuit_a, circuit_b;
	int member_fabric, member_server;
	int cable_server;
	int fabric_name;
};

struct desired {
	struct store *s;
	struct columns col;
	struct unit_set *units;
	size_t nunits;
	/* The circuit rows the open transaction changed, in order. */
	struct row_change *rows;
	size_t nrows, caprows;
	bool broken;  /* a change could not be kept (memory): the commit must reload */
	bool outside; /* circuits changed outside a transaction: reload at the next chance */
	bool stale;   /* the last reload failed: not to be trusted until one succeeds */
	int64_t data_version; /* PRAGMA data_version at the last check (other processes' commits) */
	uint64_t reloads;
	uint64_t owner_reloads;

	/* Port owners: members by fabric id (sorted), each server's fabric by server id. */
	struct members *fabrics;
	size_t nfabrics;
	int64_t *server_fabric;
	size_t nserver_fabric;
	struct member_change *members; /* membership rows the open transaction changed */
	size_t nmembers, capmembers;
	struct gone_fabric *gone; /* fabric rows the open transaction deleted */
	size_t ngone, capgone;
	bool owners_broken;  /* a member's cable changed, or a change could not be kept */
	bool owners_outside; /* the same outside a transaction: reload at the next chance */
	bool owners_stale;   /* the last owner reload failed */

	/* Fabric rows changed in the open transaction, and outside one. */
	int64_t *touched_fabrics;
	size_t ntouched_fabrics, captouched;
	bool fabrics_outside;
	bool ocs_touched;    /* the ocs table changed in the open transaction */
	int64_t *units_gone; /* ocs rows the open transaction deleted */
	size_t nunits_gone, capunits_gone;
	uint64_t units_version;

	/* Circuits per fabric, kept with every change the listeners hear. */
	struct counts counts;

	struct desired_hooks hooks;
	bool changed; /* the listeners heard of a change the changed hook has not told yet */
};

static void name_put(struct name *n)
{
	if (n && --n->refs == 0)
		free(n);
}

static void formers_put(struct former *v, size_t n)
{
	for (size_t i = 0; i < n; i++)
		name_put(v[i].fabric);
}

#define FORMERS_HELP                                                                               \
	"Former entries the desired-state mirror keeps: cross-connects no longer desired that "    \
	"no read-back has found gone since."

/*
 * The revision a former entry begins at: the store's applied revision (of the
 * change being committed, or the reload's). Unknown (the store failed) is
 * the latest, so that no read-back said to come after it can make it go.
 */
static int64_t desired_now(struct desired *d)
{
	int64_t r = store_applied_revision(d->s);
	return r < 0 ? INT64_MAX : r;
}

/* u->nformer becomes n, and the gauge follows. */
static void formers_count(struct unit_set *u, size_t n)
{
	if (n != u->nformer)
		metrics_gauge_add("ofcd_desired_former_entries", FORMERS_HELP,
		                  (double)n - (double)u->nformer);
	u->nformer = n;
}

static void members_free(struct members *m)
{
	free(m->servers);
	free(m->ports);
	memset(m, 0, sizeof(*m));
}

static struct unit_set *unit_find(const struct desired *d, int64_t ocs_id)
{
	for (size_t i = 0; i < d->nunits; i++)
		if (d->units[i].ocs_id == ocs_id)
			return &d->units[i];
	return NULL;
}

static struct unit_set *unit_get(struct desired *d, int64_t ocs_id)
{
	struct unit_set *u = unit_find(d, ocs_id);
	if (u)
		return u;
	u = realloc(d->units, (d->nunits + 1) * sizeof(*u));
	if (!u)
		return NULL;
	d->units = u;
	u = &d->units[d->nunits++];
	memset(u, 0, sizeof(*u));
	u->ocs_id = ocs_id;
	return u;
}

static bool is_desired(const struct unit_set *u, const struct plan_xc *xc)
{
	return u->n && bsearch(xc, u->xc, u->n, sizeof(*u->xc), plan_xc_cmp);
}

/* Drops the unit's former entries drop(f, arg) says go. */
static void formers_drop(struct unit_set *u, bool (*drop)(const struct former *f, void *arg),
                         void *arg)
{
	size_t k = 0;
	for (size_t i = 0; i < u->nformer; i++) {
		if (drop(&u->former[i], arg))
			name_put(u->former[i].fabric);
		else
			u->former[k++] = u->former[i];
	}
	if (k != u->nformer)
		u->former_version++;
	formers_count(u, k);
}

static bool desired_again(const struct former *f, void *arg)
{
	return is_desired(arg, &f->xc);
}

/* Drops former entries that are desired again. */
static void formers_drop_desired(struct unit_set *u)
{
	formers_drop(u, desired_again, u);
}

struct row {
	int64_t ocs_id;
	struct plan_xc xc;
	int64_t fabric;
};

static int row_cmp(const void *x, const void *y)
{
	const struct row *a = x, *b = y;
	if (a->ocs_id != b->ocs_id)
		return a->ocs_id < b->ocs_id ? -1 : 1;
	return plan_xc_cmp(&a->xc, &b->xc);
}

static struct plan_xc xc_of(uint32_t a, uint32_t b)
{
	return (struct plan_xc){ a < b ? a : b, a < b ? b : a };
}

static size_t count_lower(const struct counts *c, int64_t fabric)
{
	size_t lo = 0, hi = c->n;
	while (lo < hi) {
		size_t mid = (lo + hi) / 2;
		if (c->v[mid].fabric < fabric)
			lo = mid + 1;
		else
			hi = mid;
	}
	return lo;
}

static size_t count_of(const struct counts *c, int64_t fabric)
{
	size_t i = count_lower(c, fabric);
	return i < c->n && c->v[i].fabric == fabric ? c->v[i].n : 0;
}

/*
 * A fabric's count moves by delta (a fabric that gets none is dropped). Out of
 * memory the counts are marked unknown until the next reload rebuilds them:
 * a unit's are then not used to skip it, and a wrong total only makes a
 * commit reload.
 */
static void count_add(struct counts *c, int64_t fabric, long delta)
{
	size_t i = count_lower(c, fabric);
	if (i == c->n || c->v[i].fabric != fabric) {
		struct fabric_count *t = realloc(c->v, (c->n + 1) * sizeof(*t));
		if (!t) {
			c->unknown = true;
			return;
		}
		c->v = t;
		memmove(t + i + 1, t + i, (c->n - i) * sizeof(*t));
		t[i] = (struct fabric_count){ fabric, 0 };
		c->n++;
	}
	c->v[i].n += (size_t)delta;
	if (c->v[i].n == 0) {
		memmove(c->v + i, c->v + i + 1, (c->n - i - 1) * sizeof(*c->v));
		c->n--;
	}
}

static void note_owner(struct desired *d, int64_t ocs_id, uint32_t port, int64_t before,
                       int64_t after)
{
	d->changed = true;
	desired_owner_hook_call(&d->hooks.owner, ocs_id, port, before, after);
}

static void note_fabric(struct desired *d, int64_t fabric_id)
{
	d->changed = true;
	desired_fabric_hook_call(&d->hooks.fabric, fabric_id);
}

/* One word per commit (or refresh) that changed anything: what a reconciler pass follows. */
static void tell_changed(struct desired *d)
{
	if (!d->changed)
		return;
	d->changed = false;
	desired_changed_hook_call(&d->hooks.changed, d);
}

static void notify_circuit(struct desired *d, int64_t ocs_id, struct plan_xc xc, int64_t fabric,
                           bool added)
{
	count_add(&d->counts, fabric, added ? 1 : -1);
	d->changed = true;
	desired_circuit_hook_call(&d->hooks.circuit, ocs_id, xc, fabric, added);
}

/*
 * Tells the listener how a unit's entries changed from old to new (both
 * sorted by xc): one merge. An entry whose fabric changed leaves and comes.
 */
static void notify_diff(struct desired *d, int64_t ocs_id, const struct plan_xc *oxc,
                        const int64_t *ofab, size_t on, const struct plan_xc *nxc,
                        const int64_t *nfab, size_t nn)
{
	size_t i = 0, j = 0;
	while (i < on || j < nn) {
		int c = i == on ? 1 : j == nn ? -1 : plan_xc_cmp(&oxc[i], &nxc[j]);
		if (c == 0 && ofab[i] == nfab[j]) {
			i++, j++;
			continue;
		}
		if (c <= 0) {
			notify_circuit(d, ocs_id, oxc[i], ofab[i], false);
			i++;
		}
		if (c >= 0) {
			notify_circuit(d, ocs_id, nxc[j], nfab[j], true);
			j++;
		}
	}
}

/*
 * Reads the whole circuit table, all or nothing: on any failure the mirror is
 * left as it was and marked stale (the reconciler sends nothing while it is).
 * Former entries are kept; the listener hears what differs.
 */
#define RELOADS_HELP                                                                               \
	"Times the desired-state mirror read a whole table again instead of following the "        \
	"rows a commit changed (writes outside a transaction, another process, memory)."

/*
 * The circuits a reload finds gone (a snapshot copied over the store,
 * another process's writes) become former entries since revision since, as
 * a commit's do: the unit may still hold them. old (on entries, sorted) is
 * what u held before.
 */
static void formers_from_reload(struct desired *d, struct unit_set *u, const struct plan_xc *old,
                                const int64_t *fabric, size_t on, int64_t since);

static int load_circuits(struct desired *d)
{
	int64_t since = desired_now(d);
	sqlite3_stmt *st = store_stmt(d->s, "SELECT ocs_id, a_ocs_port, b_ocs_port, fabric_id "
	                                    "FROM circuit");
	struct row *rows = NULL;
	struct plan_xc **xc = NULL;
	int64_t **fab = NULL;
	size_t n = 0, cap = 0, nu = 0;
	int rc = st ? 0 : -EIO, step = SQLITE_DONE;
	while (rc == 0 && (step = sqlite3_step(st)) == SQLITE_ROW) {
		if (n == cap) {
			cap = cap ? cap * 2 : 1024;
			struct row *t = realloc(rows, cap * sizeof(*rows));
			if (!t) {
				rc = -ENOMEM;
				break;
			}
			rows = t;
		}
		rows[n++] = (struct row){ sqlite3_column_int64(st, 0),
			                  xc_of((uint32_t)sqlite3_column_int64(st, 1),
			                        (uint32_t)sqlite3_column_int64(st, 2)),
			                  sqlite3_column_int64(st, 3) };
	}
	if (st)
		sqlite3_reset(st);
	if (rc == 0 && step != SQLITE_DONE)
		rc = -EIO;
	if (rc == 0 && n)
		qsort(rows, n, sizeof(*rows), row_cmp);
	/* Every unit with rows exists (an empty one is harmless), then the new arrays. */
	for (size_t i = 0; rc == 0 && i < n; i++)
		if ((i == 0 || rows[i].ocs_id != rows[i - 1].ocs_id) &&
		    !unit_get(d, rows[i].ocs_id))
			rc = -ENOMEM;
	if (rc == 0) {
		nu = d->nunits;
		xc = calloc(nu + 1, sizeof(*xc));
		fab = calloc(nu + 1, sizeof(*fab));
		if (!xc || !fab)
			rc = -ENOMEM;
	}
	size_t *first = rc == 0 ? calloc(nu + 1, sizeof(*first)) : NULL,
	       *count = rc == 0 ? calloc(nu + 1, sizeof(*count)) : NULL;
	if (rc == 0 && (!first || !count))
		rc = -ENOMEM;
	for (size_t i = 0; rc == 0 && i < n;) {
		size_t j = i, k = 0;
		while (j < n && rows[j].ocs_id == rows[i].ocs_id)
			j++;
		while (d->units[k].ocs_id != rows[i].ocs_id) /* made above */
			k++;
		first[k] = i;
		count[k] = j - i;
		i = j;
	}
	for (size_t k = 0; rc == 0 && k < nu; k++) {
		xc[k] = malloc((count[k] ? count[k] : 1) * sizeof(**xc));
		fab[k] = malloc((count[k] ? count[k] : 1) * sizeof(**fab));
		if (!xc[k] || !fab[k])
			rc = -ENOMEM;
	}
	if (rc == 0) {
		for (size_t k = 0; k < nu; k++) {
			struct unit_set *u = &d->units[k];
			for (size_t i = 0; i < count[k]; i++) {
				xc[k][i] = rows[first[k] + i].xc;
				fab[k][i] = rows[first[k] + i].fabric;
			}
			struct plan_xc *oxc = u->xc;
			int64_t *ofab = u->fabric;
			size_t on = u->n;
			u->xc = xc[k];
			u->fabric = fab[k];
			u->n = count[k];
			formers_drop_desired(u);
			formers_from_reload(d, u, oxc, ofab, on, since);
			notify_diff(d, u->ocs_id, oxc, ofab, on, u->xc, u->fabric, u->n);
			free(oxc);
			free(ofab);
		}
		d->stale = false;
	} else {
		for (size_t k = 0; xc && fab && k < nu; k++) {
			free(xc[k]);
			free(fab[k]);
		}
		d->stale = true;
		log_error("store",
		          "cannot load the desired cross-connects (%s): nothing is sent to OCS "
		          "units until they are",
		          strerror(-rc));
	}
	free(first);
	free(count);
	free(xc);
	free(fab);
	free(rows);
	return rc;
}

/* The first index in v[lo..hi) whose entry is not below key (v sorted). */
static size_t lower(const struct plan_xc *v, size_t lo, size_t hi, const struct plan_xc *key)
{
	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;
		if (plan_xc_cmp(&v[mid], key) < 0)
			lo = mid + 1;
		else
			hi = mid;
	}
	return lo;
}

/* What one cross-connect of a unit went from and to in a commit (fabric ids, 0: none). */
struct net_change {
	struct plan_xc xc;
	int64_t before, after;
};

/*
 * The former entries left (sorted by xc, one reference each to their name)
 * merged into u's; the leaving ones win over an older former entry of the
 * same cross-connect.
 */
static int formers_merge(struct unit_set *u, struct former *left, size_t n)
{
	struct former *merged = malloc((u->nformer + n + 1) * sizeof(*merged));
	if (!merged) {
		/* The leaving ones stay unnamed. */
		formers_put(left, n);
		return -ENOMEM;
	}
	size_t i = 0, j = 0, o = 0;
	while (i < u->nformer || j < n) {
		int c = i == u->nformer ? 1
		        : j == n        ? -1
		                        : plan_xc_cmp(&u->former[i].xc, &left[j].xc);
		if (c == 0)
			name_put(u->former[i++].fabric);
		else if (c < 0)
			merged[o++] = u->former[i++];
		else
			merged[o++] = left[j++];
	}
	free(u->former);
	u->former = merged;
	formers_count(u, o);
	u->former_version++;
	formers_drop_desired(u);
	return 0;
}

/* The last fabric whose name unit_apply() looked up, and the name (one reference of its own). */
struct name_cache {
	int64_t fabric;
	struct name *nm;
};

/*
 * The name of fabric, a new reference (or NULL, out of memory): from its row
 * deleted in this commit, else as stored (a re-plan).
 */
static struct name *name_of(const struct desired *d, int64_t fabric, struct name_cache *c)
{
	if (!c->nm || c->fabric != fabric) {
		struct name *nm = calloc(1, sizeof(*nm));
		if (!nm)
			return NULL;
		nm->refs = 1;
		for (size_t i = 0; i < d->ngone && !nm->s[0]; i++)
			if (d->gone[i].id == fabric)
				snprintf(nm->s, sizeof(nm->s), "%s", d->gone[i].name);
		sqlite3_stmt *st = nm->s[0] ? NULL
		                            : store_stmt(d->s, "SELECT name FROM fabric "
		                                               "WHERE id = ?");
		if (st) {
			sqlite3_bind_int64(st, 1, fabric);
			if (sqlite3_step(st) == SQLITE_ROW)
				snprintf(nm->s, sizeof(nm->s), "%s", sqlite3_column_text(st, 0));
			sqlite3_reset(st);
		}
		name_put(c->nm);
		c->nm = nm;
		c->fabric = fabric;
	}
	c->nm->refs++;
	return c->nm;
}

/* Copies u's entries [from, to) to xc and fab; returns how many. */
static size_t copy_run(struct plan_xc *xc, int64_t *fab, const struct unit_set *u, size_t from,
                       size_t to)
{
	if (to > from) {
		memcpy(xc, u->xc + from, (to - from) * sizeof(*xc));
		memcpy(fab, u->fabric + from, (to - from) * sizeof(*fab));
	}
	return to - from;
}

/*
 * Applies v[0..n) (sorted by xc) to u: one merge of u's sorted entries with
 * the changes, the unchanged entries copied in runs (a unit of thousands of
 * circuits costs a memory copy, not a walk, when a few change). Entries that
 * leave become former entries named after their fabric. -EPROTO when u does
 * not hold an entry a change removes (the mirror is not the table's: the
 * caller reloads), or -ENOMEM.
 */
static int unit_apply(struct desired *d, struct unit_set *u, const struct net_change *v, size_t n)
{
	size_t nadd = 0, ndel = 0;
	for (size_t i = 0; i < n; i++) {
		nadd += v[i].after != 0;
		ndel += v[i].before != 0;
	}
	if (ndel > u->n)
		return -EPROTO;
	size_t cap = u->n - ndel + nadd;
	struct plan_xc *xc = malloc((cap ? cap : 1) * sizeof(*xc));
	int64_t *fab = malloc((cap ? cap : 1) * sizeof(*fab));
	struct former *left = malloc((ndel + 1) * sizeof(*left));
	if (!xc || !fab || !left) {
		free(xc);
		free(fab);
		free(left);
		return -ENOMEM;
	}
	size_t p = 0, k = 0, nleft = 0;
	for (size_t i = 0; i < n; i++) {
		size_t at = lower(u->xc, p, u->n, &v[i].xc);
		k += copy_run(xc + k, fab + k, u, p, at);
		p = at;
		if (v[i].before) {
			if (p == u->n || plan_xc_cmp(&u->xc[p], &v[i].xc) != 0 ||
			    u->fabric[p] != v[i].before) {
				free(xc);
				free(fab);
				free(left);
				return -EPROTO;
			}
			p++;
		}
		if (v[i].after) {
			xc[k] = v[i].xc;
			fab[k++] = v[i].after;
		}
	}
	k += copy_run(xc + k, fab + k, u, p, u->n);
	free(u->xc);
	free(u->fabric);
	u->xc = xc;
	u->fabric = fab;
	u->n = k;

	/* Whose the leaving entries were, then what the listeners hear, in xc order. */
	struct name_cache cache = { 0, NULL };
	int64_t since = ndel ? desired_now(d) : 0;
	for (size_t i = 0; i < n; i++) {
		if (!v[i].before)
			continue;
		struct name *nm = name_of(d, v[i].before, &cache);
		if (nm)
			left[nleft++] = (struct former){ v[i].xc, nm, since };
	}
	name_put(cache.nm);
	formers_merge(u, left, nleft);
	free(left);
	for (size_t i = 0; i < n; i++) {
		if (v[i].before)
			notify_circuit(d, u->ocs_id, v[i].xc, v[i].before, false);
		if (v[i].after)
			notify_circuit(d, u->ocs_id, v[i].xc, v[i].after, true);
	}
	return 0;
}

static void formers_from_reload(struct desired *d, struct unit_set *u, const struct plan_xc *old,
                                const int64_t *fabric, size_t on, int64_t since)
{
	struct former *left = on ? malloc(on * sizeof(*left)) : NULL;
	if (!left)
		return;
	struct name_cache cache = { 0, NULL };
	size_t nleft = 0, j = 0;
	for (size_t i = 0; i < on; i++) {
		j = lower(u->xc, j, u->n, &old[i]);
		if (j < u->n && plan_xc_cmp(&u->xc[j], &old[i]) == 0)
			continue;
		struct name *nm = name_of(d, fabric[i], &cache);
		if (nm)
			left[nleft++] = (struct former){ old[i], nm, since };
	}
	name_put(cache.nm);
	if (nleft)
		formers_merge(u, left, nleft);
	free(left);
}

static int change_cmp(const void *x, const void *y)
{
	const struct row_change *a = x, *b = y;
	if (a->ocs_id != b->ocs_id)
		return a->ocs_id < b->ocs_id ? -1 : 1;
	int c = plan_xc_cmp(&a->xc, &b->xc);
	if (c)
		return c;
	return a->seq < b->seq ? -1 : a->seq > b->seq;
}

/*
 * Applies the circuit rows the committed transaction changed, unit by unit:
 * what each cross-connect went from (its first change) and to (its last),
 * nothing for one that came back as it was. Returns 0, or -EPROTO / -ENOMEM
 * (then the caller reloads).
 */
static int apply_rows(struct desired *d)
{
	if (!d->nrows)
		return 0;
	qsort(d->rows, d->nrows, sizeof(*d->rows), change_cmp);
	struct net_change *v = malloc(d->nrows * sizeof(*v));
	if (!v)
		return -ENOMEM;
	int rc = 0;
	for (size_t i = 0; rc == 0 && i < d->nrows;) {
		int64_t ocs = d->rows[i].ocs_id;
		size_t n = 0;
		while (i < d->nrows && d->rows[i].ocs_id == ocs) {
			size_t j = i;
			while (j + 1 < d->nrows && d->rows[j + 1].ocs_id == ocs &&
			       plan_xc_cmp(&d->rows[j + 1].xc, &d->rows[i].xc) == 0)
				j++;
			int64_t before = d->rows[i].added ? 0 : d->rows[i].fabric;
			int64_t after = d->rows[j].added ? d->rows[j].fabric : 0;
			if (before != after)
				v[n++] = (struct net_change){ d->rows[i].xc, before, after };
			i = j + 1;
		}
		struct unit_set *u = n ? unit_get(d, ocs) : NULL;
		if (n)
			rc = u ? unit_apply(d, u, v, n) : -ENOMEM;
	}
	free(v);
	return rc;
}

/* ---- port owners ---------------------------------------------------------- */

static struct members *members_find(const struct desired *d, int64_t fabric)
{
	size_t lo = 0, hi = d->nfabrics;
	while (lo < hi) {
		size_t mid = (lo + hi) / 2;
		if (d->fabrics[mid].fabric < fabric)
			lo = mid + 1;
		else
			hi = mid;
	}
	return lo < d->nfabrics && d->fabrics[lo].fabric == fabric ? &d->fabrics[lo] : NULL;
}

/* Grows an owner (or server) array to hold index i; 0 or -ENOMEM. */
static int grow(int64_t **v, size_t *n, size_t i)
{
	if (i < *n)
		return 0;
	size_t cap = *n ? *n : 64;
	while (cap <= i)
		cap *= 2;
	int64_t *t = realloc(*v, cap * sizeof(*t));
	if (!t)
		return -ENOMEM;
	memset(t + *n, 0, (cap - *n) * sizeof(*t));
	*v = t;
	*n = cap;
	return 0;
}

static int set_owner(struct desired *d, const struct desired_port *p, int64_t fabric)
{
	struct unit_set *u = unit_get(d, p->ocs_id);
	if (!u || grow(&u->owner, &u->nowner, p->port) < 0)
		return -ENOMEM;
	int64_t before = u->owner[p->port];
	if (before == fabric)
		return 0;
	u->owner[p->port] = fabric;
	note_owner(d, p->ocs_id, p->port, before, fabric);
	return 0;
}

static int set_server(struct desired *d, int64_t server, int64_t fabric)
{
	if (server < 0 || grow(&d->server_fabric, &d->nserver_fabric, (size_t)server) < 0)
		return -ENOMEM;
	d->server_fabric[server] = fabric;
	return 0;
}

/* Forgets fabric's members: its ports return to no fabric. */
static int members_drop(struct desired *d, int64_t fabric)
{
	struct members *m = members_find(d, fabric);
	int rc = 0;
	if (!m)
		return 0;
	for (size_t i = 0; i < m->nports; i++) {
		struct unit_set *u = unit_find(d, m->ports[i].ocs_id);
		if (u && m->ports[i].port < u->nowner && u->owner[m->ports[i].port] == fabric)
			rc |= set_owner(d, &m->ports[i], 0);
	}
	for (size_t i = 0; i < m->nservers; i++)
		if (m->servers[i] >= 0 && (size_t)m->servers[i] < d->nserver_fabric &&
		    d->server_fabric[m->servers[i]] == fabric)
			d->server_fabric[m->servers[i]] = 0;
	members_free(m);
	size_t at = (size_t)(m - d->fabrics);
	memmove(m, m + 1, (d->nfabrics - at - 1) * sizeof(*m));
	d->nfabrics--;
	return rc ? -ENOMEM : 0;
}

/* Takes over the arrays of m (moved, not copied) as fabric's members. */
static int members_add(struct desired *d, struct members *m)
{
	int rc = members_drop(d, m->fabric);
	struct members *t = realloc(d->fabrics, (d->nfabrics + 1) * sizeof(*t));
	if (!t)
		return -ENOMEM;
	d->fabrics = t;
	size_t at = d->nfabrics;
	while (at > 0 && t[at - 1].fabric > m->fabric)
		at--;
	memmove(t + at + 1, t + at, (d->nfabrics - at) * sizeof(*t));
	t[at] = *m;
	d->nfabrics++;
	memset(m, 0, sizeof(*m));
	for (size_t i = 0; rc == 0 && i < t[at].nservers; i++)
		rc = set_server(d, t[at].servers[i], t[at].fabric);
	for (size_t i = 0; rc == 0 && i < t[at].nports; i++)
		rc = set_owner(d, &t[at].ports[i], t[at].fabric);
	return rc;
}

static int push(void **v, size_t *n, size_t *cap, size_t size, const void *item)
{
	if (*n == *cap) {
		size_t c = *cap ? *cap * 2 : 16;
		void *t = realloc(*v, c * size);
		if (!t)
			return -ENOMEM;
		*v = t;
		*cap = c;
	}
	memcpy((char *)*v + *n * size, item, size);
	(*n)++;
	return 0;
}

/*
 * Reads every fabric's members and their cabled ports from the store, all or
 * nothing, and tells the listener the owners that differ.
 */
static int load_owners(struct desired *d)
{
	sqlite3_stmt *st = store_stmt(d->s, "SELECT fs.fabric_id, fs.server_id, c.ocs_id, "
	                                    "c.ocs_port FROM fabric_server fs LEFT JOIN cable c "
	                                    "ON c.server_id = fs.server_id "
	                                    "ORDER BY fs.fabric_id, fs.server_id");
	struct members *v = NULL, cur = { 0 };
	size_t n = 0, cap = 0, scap = 0, pcap = 0;
	int rc = st ? 0 : -EIO, step = SQLITE_DONE;
	int64_t last_server = -1;
	while (rc == 0 && (step = sqlite3_step(st)) == SQLITE_ROW) {
		int64_t fabric = sqlite3_column_int64(st, 0), server = sqlite3_column_int64(st, 1);
		if (cur.fabric != fabric) {
			if (cur.fabric && (rc = push((void **)&v, &n, &cap, sizeof(cur), &cur)) < 0)
				break;
			memset(&cur, 0, sizeof(cur));
			cur.fabric = fabric;
			scap = pcap = 0;
			last_server = -1;
		}
		if (server != last_server)
			rc = push((void **)&cur.servers, &cur.nservers, &scap, sizeof(server),
			          &server);
		last_server = server;
		if (rc == 0 && sqlite3_column_type(st, 2) != SQLITE_NULL) {
			struct desired_port p = { sqlite3_column_int64(st, 2),
				                  (uint32_t)sqlite3_column_int64(st, 3) };
			rc = push((void **)&cur.ports, &cur.nports, &pcap, sizeof(p), &p);
		}
	}
	if (st)
		sqlite3_reset(st);
	if (rc == 0 && step != SQLITE_DONE)
		rc = -EIO;
	if (rc == 0 && cur.fabric)
		rc = push((void **)&v, &n, &cap, sizeof(cur), &cur);
	else
		members_free(&cur);
	if (rc < 0) {
		for (size_t i = 0; i < n; i++)
			members_free(&v[i]);
		free(v);
		d->owners_stale = true;
		log_error("store",
		          "cannot load which fabric owns each OCS port (%s): nothing is sent to "
		          "OCS units until it is",
		          strerror(-rc));
		return rc;
	}
	/*
	 * The old owners are stashed as -owner - 1 while the new ones are set:
	 * the listener hears only the ports whose owner differs.
	 */
	for (size_t k = 0; k < d->nunits; k++)
		for (size_t p = 0; p < d->units[k].nowner; p++)
			d->units[k].owner[p] = -d->units[k].owner[p] - 1;
	for (size_t i = 0; i < d->nfabrics; i++)
		members_free(&d->fabrics[i]);
	free(d->fabrics);
	d->fabrics = v;
	d->nfabrics = n;
	if (d->server_fabric)
		memset(d->server_fabric, 0, d->nserver_fabric * sizeof(*d->server_fabric));
	for (size_t i = 0; rc == 0 && i < n; i++) {
		for (size_t j = 0; rc == 0 && j < v[i].nservers; j++)
			rc = set_server(d, v[i].servers[j], v[i].fabric);
		for (size_t j = 0; rc == 0 && j < v[i].nports; j++) {
			struct unit_set *u = unit_get(d, v[i].ports[j].ocs_id);
			uint32_t p = v[i].ports[j].port;
			if (!u || grow(&u->owner, &u->nowner, p) < 0) {
				rc = -ENOMEM;
				break;
			}
			int64_t before = u->owner[p] < 0 ? -u->owner[p] - 1 : 0;
			u->owner[p] = v[i].fabric;
			if (before != v[i].fabric)
				note_owner(d, u->ocs_id, p, before, v[i].fabric);
		}
	}
	/* Ports still holding a stashed owner lost it. */
	for (size_t k = 0; k < d->nunits; k++) {
		struct unit_set *u = &d->units[k];
		for (size_t p = 0; p < u->nowner; p++) {
			if (u->owner[p] >= 0)
				continue;
			int64_t before = -u->owner[p] - 1;
			u->owner[p] = 0;
			if (before)
				note_owner(d, u->ocs_id, (uint32_t)p, before, 0);
		}
	}
	d->owners_stale = rc < 0;
	return rc;
}

/* Forgets the unit's former entries. */
static void forget_formers(struct desired *d, int64_t ocs_id)
{
	struct unit_set *u = unit_find(d, ocs_id);
	if (!u)
		return;
	formers_put(u->former, u->nformer);
	formers_count(u, 0);
	u->former_version++;
}

static bool unit_exists(struct desired *d, int64_t ocs_id)
{
	sqlite3_stmt *st = store_stmt(d->s, "SELECT 1 FROM ocs WHERE id = ?");
	if (!st)
		return true; /* unknown: its former entries stay */
	sqlite3_bind_int64(st, 1, ocs_id);
	bool found = sqlite3_step(st) != SQLITE_DONE;
	sqlite3_reset(st);
	return found;
}

/*
 * A unit gone from the topology leaves no former entries: its ports join no
 * server any more, and a unit added later may get its id. One deleted and
 * added again under its id (a rename) keeps them: it may be the same unit.
 */
static void forget_gone_unit(struct desired *d, int64_t ocs_id)
{
	if (!unit_exists(d, ocs_id))
		forget_formers(d, ocs_id);
}

/* Reads the circuits again: what the mirror could not follow. */
static int reload(struct desired *d)
{
	d->reloads++;
	metrics_counter_add("ofcd_desired_reloads_total", RELOADS_HELP, "what=\"circuits\"", 1);
	int rc = load_circuits(d);
	/* Units a snapshot or another process took away, whose deletes no hook heard. */
	for (size_t i = 0; rc == 0 && i < d->nunits; i++)
		if (d->units[i].nformer)
			forget_gone_unit(d, d->units[i].ocs_id);
	return rc;
}

/* Reads the port owners again. */
static int reload_owners(struct desired *d)
{
	d->owner_reloads++;
	metrics_counter_add("ofcd_desired_reloads_total", RELOADS_HELP, "what=\"owners\"", 1);
	return load_owners(d);
}

/* True when the server is in a fabric, or joins one in the open transaction. */
static bool is_member(const struct desired *d, int64_t server)
{
	if (server >= 0 && (size_t)server < d->nserver_fabric && d->server_fabric[server])
		return true;
	for (size_t i = 0; i < d->nmembers; i++)
		if (d->members[i].added && d->members[i].server == server)
			return true;
	return false;
}

/* ---- transactions ---------------------------------------------------------- */

static void changes_clear(struct desired *d)
{
	d->nrows = 0;
	d->nmembers = 0;
	d->ngone = 0;
	d->broken = false;
	d->owners_broken = false;
	d->ntouched_fabrics = 0;
	d->ocs_touched = false;
	d->nunits_gone = 0;
}

static int id_cmp(const void *x, const void *y)
{
	int64_t a = *(const int64_t *)x, b = *(const int64_t *)y;
	return a < b ? -1 : a > b;
}

/* Tells the listeners about every fabric row touched (each once), and forgets them. */
static void notify_fabrics(struct desired *d)
{
	int64_t *v = d->touched_fabrics;
	size_t n = d->ntouched_fabrics;
	if (n)
		qsort(v, n, sizeof(*v), id_cmp);
	for (size_t i = 0; i < n; i++)
		if (i == 0 || v[i] != v[i - 1])
			note_fabric(d, v[i]);
	d->ntouched_fabrics = 0;
}

static void touch_fabric(struct desired *d, int64_t fabric)
{
	/* Out of memory: every fabric is re-read instead. */
	if (push((void **)&d->touched_fabrics, &d->ntouched_fabrics, &d->captouched, sizeof(fabric),
	         &fabric) < 0)
		d->fabrics_outside = true;
}

static int member_cmp(const void *x, const void *y)
{
	const struct member_change *a = x, *b = y;
	return a->fabric < b->fabric ? -1 : a->fabric > b->fabric;
}

/* A new fabric's members: the OCS ports its servers are cabled to, as stored. */
static int members_load(struct desired *d, struct members *m)
{
	sqlite3_stmt *st =
	    store_stmt(d->s, "SELECT ocs_id, ocs_port FROM cable WHERE server_id = ?");
	if (!st)
		return -EIO;
	size_t cap = 0;
	int rc = 0;
	for (size_t i = 0; rc == 0 && i < m->nservers; i++) {
		sqlite3_bind_int64(st, 1, m->servers[i]);
		while (rc == 0 && sqlite3_step(st) == SQLITE_ROW) {
			struct desired_port p = { sqlite3_column_int64(st, 0),
				                  (uint32_t)sqlite3_column_int64(st, 1) };
			rc = push((void **)&m->ports, &m->nports, &cap, sizeof(p), &p);
		}
		sqlite3_reset(st);
	}
	return rc;
}

/*
 * Adds more's servers and ports (read by members_load()) to the known
 * fabric's: a fabric stored a few members per transaction (fabric.h, struct
 * fabric_build) costs what each part adds.
 */
static int members_extend(struct desired *d, struct members *known, const struct members *more)
{
	int64_t *sv = realloc(known->servers, (known->nservers + more->nservers) * sizeof(*sv));
	if (!sv)
		return -ENOMEM;
	known->servers = sv;
	struct desired_port *pt =
	    realloc(known->ports, (known->nports + more->nports + 1) * sizeof(*pt));
	if (!pt)
		return -ENOMEM;
	known->ports = pt;
	if (more->nservers)
		memcpy(sv + known->nservers, more->servers, more->nservers * sizeof(*sv));
	if (more->nports)
		memcpy(pt + known->nports, more->ports, more->nports * sizeof(*pt));
	known->nservers += more->nservers;
	known->nports += more->nports;
	int rc = 0;
	for (size_t i = 0; rc == 0 && i < more->nservers; i++)
		rc = set_server(d, more->servers[i], known->fabric);
	for (size_t i = 0; rc == 0 && i < more->nports; i++)
		rc = set_owner(d, &more->ports[i], known->fabric);
	return rc;
}

/*
 * Applies the membership rows the committed transaction changed: a fabric
 * whose rows all went leaves (its ports return to no fabric), one whose rows
 * all came joins or grows (its new servers' cabled ports are read). Anything
 * else (a fabric's members changed in place) returns -EAGAIN: the caller
 * reloads.
 */
static int apply_members(struct desired *d)
{
	if (!d->nmembers)
		return 0;
	qsort(d->members, d->nmembers, sizeof(*d->members), member_cmp);
	int rc = 0;
	for (size_t i = 0; rc == 0 && i < d->nmembers;) {
		size_t j = i, added = 0;
		while (j < d->nmembers && d->members[j].fabric == d->members[i].fabric)
			added += d->members[j++].added;
		int64_t fabric = d->members[i].fabric;
		const struct members *known = members_find(d, fabric);
		if (added == 0 && known && known->nservers == j - i) {
			rc = members_drop(d, fabric);
		} else if (added == j - i) {
			struct members m = { .fabric = fabric };
			m.servers = malloc((j - i) * sizeof(*m.servers));
			if (!m.servers)
				rc = -ENOMEM;
			for (size_t k = i; rc == 0 && k < j; k++)
				m.servers[m.nservers++] = d->members[k].server;
			if (rc == 0)
				rc = members_load(d, &m);
			if (rc == 0)
				rc = known ? members_extend(d, members_find(d, fabric), &m)
				           : members_add(d, &m);
			members_free(&m);
		} else {
			rc = -EAGAIN;
		}
		i = j;
	}
	return rc;
}

static void on_txn_end(void *arg, struct store *s, bool committed)
{
	struct desired *d = arg;
	(void)s;
	if (!committed) {
		changes_clear(d);
		return;
	}
	if (d->nrows || d->outside || d->stale || d->broken) {
		int rc = d->outside || d->stale || d->broken ? -EAGAIN : apply_rows(d);
		if (rc < 0) {
			log_debug("store", "the desired cross-connects are reloaded (%s)",
			          rc == -EPROTO ? "a change did not fit the mirror"
			          : d->outside  ? "circuits changed outside a transaction"
			                        : "a change could not be kept");
			if (reload(d) == 0)
				d->outside = false;
		}
	}
	if (d->nmembers || d->owners_broken || d->owners_outside || d->owners_stale) {
		int rc = d->owners_broken || d->owners_outside || d->owners_stale
		             ? -EAGAIN
		             : apply_members(d);
		if (rc < 0) {
			log_debug("store", "fabric members or their cables changed as the mirror "
			                   "cannot follow: reloading the port owners");
			if (reload_owners(d) == 0)
				d->owners_outside = false;
		}
	}
	notify_fabrics(d);
	/* On every member alike, as the log deletes it. */
	for (size_t i = 0; i < d->nunits_gone; i++)
		forget_gone_unit(d, d->units_gone[i]);
	if (d->ocs_touched) {
		d->units_version++;
		d->changed = true;
	}
	changes_clear(d);
	tell_changed(d);
}

static void on_update(void *arg, int op, const char *db, const char *table, sqlite3_int64 rowid)
{
	struct desired *d = arg;
	if (strcmp(db, "main") != 0)
		return;
	bool outside = sqlite3_get_autocommit(store_db(d->s));
	if (strcmp(table, "fabric") == 0) {
		/* The listeners may read the store: told at commit, or at the next refresh. */
		if (outside)
			d->fabrics_outside = true;
		else
			touch_fabric(d, rowid);
		return;
	}
	if (strcmp(table, "ocs") == 0) {
		if (outside) {
			d->units_version++;
			d->changed = true;
		} else {
			d->ocs_touched = true;
			/* Out of memory: its former entries stay, which holds its ports longer. */
			if (op == SQLITE_DELETE)
				push((void **)&d->units_gone, &d->nunits_gone, &d->capunits_gone,
				     sizeof(rowid), &rowid);
		}
	}
}

/* Keeps one changed circuit row of the open transaction (from its old or new values). */
static void keep_row(struct desired *d, sqlite3 *db, bool added)
{
	sqlite3_value *f, *o, *a, *b;
	int (*get)(sqlite3 *, int, sqlite3_value **) =
	    added ? sqlite3_preupdate_new : sqlite3_preupdate_old;
	if (get(db, d->col.circuit_fabric, &f) != SQLITE_OK ||
	    get(db, d->col.circuit_ocs, &o) != SQLITE_OK ||
	    get(db, d->col.circuit_a, &a) != SQLITE_OK ||
	    get(db, d->col.circuit_b, &b) != SQLITE_OK) {
		d->broken = true;
		return;
	}
	struct row_change c = { .ocs_id = sqlite3_value_int64(o),
		                .xc = xc_of((uint32_t)sqlite3_value_int64(a),
		                            (uint32_t)sqlite3_value_int64(b)),
		                .fabric = sqlite3_value_int64(f),
		                .added = added,
		                .seq = d->nrows };
	if (push((void **)&d->rows, &d->nrows, &d->caprows, sizeof(c), &c) < 0)
		d->broken = true;
}

/* Keeps one changed membership row of the open transaction. */
static void keep_member(struct desired *d, sqlite3 *db, bool added)
{
	sqlite3_value *f, *sv;
	int (*get)(sqlite3 *, int, sqlite3_value **) =
	    added ? sqlite3_preupdate_new : sqlite3_preupdate_old;
	if (get(db, d->col.member_fabric, &f) != SQLITE_OK ||
	    get(db, d->col.member_server, &sv) != SQLITE_OK) {
		d->owners_broken = true;
		return;
	}
	struct member_change c = { sqlite3_value_int64(f), sqlite3_value_int64(sv), added };
	if (push((void **)&d->members, &d->nmembers, &d->capmembers, sizeof(c), &c) < 0)
		d->owners_broken = true;
}

/*
 * Every row about to change, whoever changes it (a handler, a replica
 * applying the leader's changeset): circuit and membership rows are kept
 * for the commit to apply; a cable of a server in a fabric changing (rare:
 * a topology change on a member's port) moves an owner, so the owners are
 * reloaded. A row changed outside any transaction is not kept: the next
 * commit or refresh reloads instead.
 */
static void on_preupdate(void *arg, sqlite3 *db, int op, const char *zdb, const char *table,
                         sqlite3_int64 key1, sqlite3_int64 key2)
{
	struct desired *d = arg;
	(void)key2;
	if (strcmp(zdb, "main") != 0)
		return;
	bool outside = sqlite3_get_autocommit(db);
	if (strcmp(table, "circuit") == 0) {
		if (outside) {
			d->outside = true;
			return;
		}
		if (op != SQLITE_INSERT)
			keep_row(d, db, false);
		if (op != SQLITE_DELETE)
			keep_row(d, db, true);
		return;
	}
	if (strcmp(table, "fabric") == 0) {
		/* Its name, for the circuits its deletion takes with it. */
		sqlite3_value *v;
		struct gone_fabric g = { .id = key1 };
		if (op == SQLITE_DELETE && !outside &&
		    sqlite3_preupdate_old(db, d->col.fabric_name, &v) == SQLITE_OK) {
			snprintf(g.name, sizeof(g.name), "%s", (const char *)sqlite3_value_text(v));
			push((void **)&d->gone, &d->ngone, &d->capgone, sizeof(g), &g);
		}
		return;
	}
	if (strcmp(table, "fabric_server") == 0) {
		if (outside) {
			d->owners_outside = true;
			return;
		}
		if (op != SQLITE_INSERT)
			keep_member(d, db, false);
		if (op != SQLITE_DELETE)
			keep_member(d, db, true);
		return;
	}
	if (strcmp(table, "cable") != 0)
		return;
	sqlite3_value *v;
	bool member = false;
	if (op != SQLITE_INSERT && sqlite3_preupdate_old(db, d->col.cable_server, &v) == SQLITE_OK)
		member |= is_member(d, sqlite3_value_int64(v));
	if (op != SQLITE_DELETE && sqlite3_preupdate_new(db, d->col.cable_server, &v) == SQLITE_OK)
		member |= is_member(d, sqlite3_value_int64(v));
	if (member && outside)
		d->owners_outside = true;
	else if (member)
		d->owners_broken = true;
}

/* The position of column name in table's rows, or -1. */
static int column_of(struct store *s, const char *table, const char *name)
{
	char sql[128];
	sqlite3_stmt *st = NULL;
	int at = -1;
	snprintf(sql, sizeof(sql), "SELECT cid FROM pragma_table_info('%s') WHERE name = '%s'",
	         table, name);
	if (sqlite3_prepare_v2(store_db(s), sql, -1, &st, NULL) == SQLITE_OK &&
	    sqlite3_step(st) == SQLITE_ROW)
		at = sqlite3_column_int(st, 0);
	sqlite3_finalize(st);
	return at;
}

static int find_columns(struct desired *d)
{
	struct columns *c = &d->col;
	c->circuit_fabric = column_of(d->s, "circuit", "fabric_id");
	c->circuit_ocs = column_of(d->s, "circuit", "ocs_id");
	c->circuit_a = column_of(d->s, "circuit", "a_ocs_port");
	c->circuit_b = column_of(d->s, "circuit", "b_ocs_port");
	c->member_fabric = column_of(d->s, "fabric_server", "fabric_id");
	c->member_server = column_of(d->s, "fabric_server", "server_id");
	c->cable_server = column_of(d->s, "cable", "server_id");
	c->fabric_name = column_of(d->s, "fabric", "name");
	const int *v = &c->circuit_fabric;
	for (size_t i = 0; i < sizeof(*c) / sizeof(int); i++)
		if (v[i] < 0)
			return -EIO;
	return 0;
}

static int64_t data_version(struct desired *d)
{
	sqlite3_stmt *st = store_stmt(d->s, "PRAGMA data_version");
	int64_t v = -1;
	if (st && sqlite3_step(st) == SQLITE_ROW)
		v = sqlite3_column_int64(st, 0);
	if (st)
		sqlite3_reset(st);
	return v;
}

void desired_refresh(struct desired *d)
{
	int64_t v = data_version(d);
	bool other = v != d->data_version;
	if (other) {
		log_info("store", "the store was changed by another process: reloading the "
		                  "desired cross-connects");
		d->units_version++;
		d->changed = true;
		d->fabrics_outside = true;
	}
	if ((d->stale || d->outside || other) && reload(d) == 0) {
		d->outside = false;
		d->data_version = v;
	}
	if ((d->owners_stale || d->owners_outside || other) && reload_owners(d) == 0)
		d->owners_outside = false;
	if (d->fabrics_outside) {
		d->fabrics_outside = false;
		note_fabric(d, 0);
	}
	tell_changed(d);
}

void desired_resync(struct desired *d)
{
	d->outside = true;
	d->owners_outside = true;
}

bool desired_usable(const struct desired *d)
{
	return !d->stale && !d->owners_stale;
}

int desired_open(struct store *s, struct desired **out)
{
	struct desired *d = calloc(1, sizeof(*d));
	if (!d)
		return -ENOMEM;
	d->s = s;
	d->data_version = data_version(d);
	int rc = find_columns(d);
	if (rc == 0)
		rc = load_circuits(d);
	if (rc == 0)
		rc = load_owners(d);
	if (rc < 0) {
		desired_free(d);
		return rc;
	}
	d->changed = false;
	/* Every counter shows from 0. */
	metrics_counter_add("ofcd_desired_reloads_total", RELOADS_HELP, "what=\"circuits\"", 0);
	metrics_counter_add("ofcd_desired_reloads_total", RELOADS_HELP, "what=\"owners\"", 0);
	metrics_gauge_add("ofcd_desired_former_entries", FORMERS_HELP, 0);
	if (store_txn_end_hook_add(store_txn_end_hook(s), on_txn_end, d) < 0 ||
	    store_update_hook_add(store_update_hook(s), on_update, d) < 0 ||
	    store_preupdate_hook_add(store_preupdate_hook(s), on_preupdate, d) < 0) {
		desired_free(d);
		return -ENOMEM;
	}
	*out = d;
	return 0;
}

void desired_free(struct desired *d)
{
	if (!d)
		return;
	store_txn_end_hook_del(store_txn_end_hook(d->s), on_txn_end, d);
	store_update_hook_del(store_update_hook(d->s), on_update, d);
	store_preupdate_hook_del(store_preupdate_hook(d->s), on_preupdate, d);
	hook_clear(&d->hooks.circuit);
	hook_clear(&d->hooks.owner);
	hook_clear(&d->hooks.fabric);
	hook_clear(&d->hooks.changed);
	free(d->rows);
	free(d->members);
	free(d->gone);
	for (size_t i = 0; i < d->nunits; i++) {
		free(d->units[i].xc);
		free(d->units[i].fabric);
		formers_put(d->units[i].former, d->units[i].nformer);
		formers_count(&d->units[i], 0);
		free(d->units[i].former);
		free(d->units[i].owner);
	}
	free(d->units);
	for (size_t i = 0; i < d->nfabrics; i++)
		members_free(&d->fabrics[i]);
	free(d->fabrics);
	free(d->server_fabric);
	free(d->touched_fabrics);
	free(d->units_gone);
	free(d->counts.v);
	free(d);
}

struct desired_hooks *desired_hooks(struct desired *d)
{
	return &d->hooks;
}

struct desired_set desired_of(const struct desired *d, int64_t ocs_id)
{
	const struct unit_set *u = unit_find(d, ocs_id);
	if (!u || !u->n)
		return (struct desired_set){ NULL, NULL, 0 };
	return (struct desired_set){ u->xc, u->fabric, u->n };
}

const int64_t *desired_owners(const struct desired *d, int64_t ocs_id, size_t *n)
{
	const struct unit_set *u = unit_find(d, ocs_id);
	*n = u ? u->nowner : 0;
	return u ? u->owner : NULL;
}

size_t desired_fabric_circuits(const struct desired *d, int64_t fabric_id)
{
	return count_of(&d->counts, fabric_id);
}

uint64_t desired_units_version(const struct desired *d)
{
	return d->units_version;
}

static int former_cmp(const void *x, const void *y)
{
	return plan_xc_cmp(&((const struct former *)x)->xc, &((const struct former *)y)->xc);
}

const char *desired_former_owner(const struct desired *d, int64_t ocs_id, uint32_t a, uint32_t b)
{
	const struct unit_set *u = unit_find(d, ocs_id);
	struct former key = { .xc = xc_of(a, b) };
	const struct former *f =
	    u && u->nformer ? bsearch(&key, u->former, u->nformer, sizeof(key), former_cmp) : NULL;
	return f && f->fabric->s[0] ? f->fabric->s : NULL;
}

bool desired_former_at(const struct desired *d, int64_t ocs_id, uint32_t port, uint32_t *peer,
                       const char **fabric)
{
	const struct unit_set *u = unit_find(d, ocs_id);
	/* Asked only of a unit not opened yet (desired_former_peers() for one opened). */
	for (size_t i = 0; u && i < u->nformer; i++) {
		const struct former *f = &u->former[i];
		if (f->xc.a != port && f->xc.b != port)
			continue;
		*peer = f->xc.a == port ? f->xc.b : f->xc.a;
		*fabric = f->fabric->s[0] ? f->fabric->s : NULL;
		return true;
	}
	return false;
}

bool desired_has_former(const struct desired *d, int64_t ocs_id)
{
	const struct unit_set *u = unit_find(d, ocs_id);
	return u && u->nformer;
}

uint64_t desired_former_version(const struct desired *d, int64_t ocs_id)
{
	const struct unit_set *u = unit_find(d, ocs_id);
	return u ? u->former_version : 0;
}

void desired_former_peers(const struct desired *d, int64_t ocs_id, uint32_t *peer, uint32_t ports)
{
	const struct unit_set *u = unit_find(d, ocs_id);
	memset(peer, 0, ((size_t)ports + 1) * sizeof(*peer));
	for (size_t i = 0; u && i < u->nformer; i++) {
		const struct plan_xc *xc = &u->former[i].xc;
		if (xc->b <= ports) {
			peer[xc->a] = xc->b;
			peer[xc->b] = xc->a;
		}
	}
}

bool desired_former_left(const struct desired *d, const char *fabric, desired_held_fn held,
                         void *arg)
{
	for (size_t i = 0; i < d->nunits; i++) {
		const struct unit_set *u = &d->units[i];
		for (size_t k = 0; k < u->nformer; k++) {
			const char *owner = u->former[k].fabric->s;
			/* One whose name could not be learnt may be the fabric's. */
			if ((!owner[0] || strcmp(owner, fabric) == 0) &&
			    held(arg, u->ocs_id, u->former[k].xc.a, u->former[k].xc.b))
				return true;
		}
	}
	return false;
}

/* What a read-back left: the pairs held, and those forgotten that it tells of. */
struct read_left {
	const struct plan_xc *held;
	size_t n;
	int64_t upto;
	struct plan_xc *gone; /* NULL: not told */
	size_t ngone;
};

static bool not_held(const struct former *f, void *arg)
{
	struct read_left *r = arg;
	if (r->n && bsearch(&f->xc, r->held, r->n, sizeof(*r->held), plan_xc_cmp))
		return false;
	if (r->gone && f->since <= r->upto)
		r->gone[r->ngone++] = f->xc;
	return true;
}

size_t desired_prune(struct desired *d, int64_t ocs_id, const struct plan_xc *held, size_t n,
                     int64_t upto, struct plan_xc **gone)
{
	struct unit_set *u = unit_find(d, ocs_id);
	if (gone)
		*gone = NULL;
	if (!u || !u->nformer)
		return 0;
	struct read_left r = { held, n, upto, gone ? malloc(u->nformer * sizeof(*r.gone)) : NULL,
		               0 };
	formers_drop(u, not_held, &r);
	if (r.ngone)
		*gone = r.gone;
	else
		free(r.gone);
	return r.ngone;
}

/* Former entries the leader said gone, up to the revision its read was sent at. */
struct said_gone {
	const struct plan_xc *gone;
	size_t n;
	int64_t upto;
};

static bool is_said_gone(const struct former *f, void *arg)
{
	const struct said_gone *g = arg;
	return f->since <= g->upto && bsearch(&f->xc, g->gone, g->n, sizeof(*g->gone), plan_xc_cmp);
}

void desired_formers_gone(struct desired *d, int64_t ocs_id, int64_t upto,
                          const struct plan_xc *gone, size_t n)
{
	struct unit_set *u = unit_find(d, ocs_id);
	struct said_gone g = { gone, n, upto };
	if (u && n)
		formers_drop(u, is_said_gone, &g);
}

uint64_t desired_reloads(const struct desired *d)
{
	return d->reloads;
}

uint64_t desired_owner_reloads(const struct desired *d)
{
	return d->owner_reloads;
}
