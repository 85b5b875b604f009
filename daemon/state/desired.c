/* The pre-update hook (cable and membership rows) is compiled into Debian's SQLite. */
#define SQLITE_ENABLE_PREUPDATE_HOOK 1

#include "desired.h"

#include <errno.h>
#include <sqlite3.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "log.h"
#include "store_sql.h"

/* A fabric's name, shared by the former entries it left behind. */
struct name {
	size_t refs;
	char s[65];
};

/* A cross-connect no longer desired, and whose it was. */
struct former {
	struct plan_xc xc;
	struct name *fabric;
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
	struct counts per_fabric; /* its entries by fabric: a stage skips units it leaves alone */
	struct plan_xc *xc;       /* sorted */
	int64_t *fabric;
	size_t n;
	struct former *former; /* sorted by xc */
	size_t nformer;
	int64_t *owner; /* fabric owning each port, by port; nowner entries */
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

enum stage_kind { STAGE_CIRCUITS, STAGE_MEMBERS, STAGE_DROP };

/* One staging call of the open transaction. */
struct stage {
	enum stage_kind kind;
	int64_t fabric;
	char name[65];
	struct desired_circuit *v; /* STAGE_CIRCUITS */
	size_t n;
	struct members m; /* STAGE_MEMBERS */
};

struct desired {
	struct store *s;
	struct unit_set *units;
	size_t nunits;
	struct stage *stages;
	size_t nstages;
	long expected; /* circuit row changes the stages account for */
	long touched;  /* circuit row changes seen since the last transaction ended */
	bool broken;   /* a stage was lost: the commit must reload */
	bool outside;  /* circuits changed outside a transaction: reload at the next chance */
	bool stale;    /* the last reload failed: not to be trusted until one succeeds */
	int64_t data_version; /* PRAGMA data_version at the last check (other processes' commits) */
	uint64_t reloads;

	/* Port owners: members by fabric id (sorted), each server's fabric by server id. */
	struct members *fabrics;
	size_t nfabrics;
	int64_t *server_fabric;
	size_t nserver_fabric;
	long fs_expected;    /* fabric_server row changes the stages account for */
	long fs_touched;     /* fabric_server row changes seen in the open transaction */
	bool owners_broken;  /* a member's cable changed, or a stage was lost */
	bool owners_outside; /* the same outside a transaction: reload at the next chance */
	bool owners_stale;   /* the last owner reload failed */

	/* Fabric rows changed in the open transaction, and outside one. */
	int64_t *touched_fabrics;
	size_t ntouched_fabrics, captouched;
	bool fabrics_outside;
	bool ocs_touched; /* the ocs table changed in the open transaction */
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

/* Drops former entries that are desired again. */
static void formers_drop_desired(struct unit_set *u)
{
	size_t k = 0;
	for (size_t i = 0; i < u->nformer; i++) {
		if (is_desired(u, &u->former[i].xc))
			name_put(u->former[i].fabric);
		else
			u->former[k++] = u->former[i];
	}
	u->nformer = k;
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
static int reload(struct desired *d)
{
	d->reloads++;
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
			free(u->per_fabric.v);
			u->per_fabric = (struct counts){ 0 };
			for (size_t i = 0; i < u->n; i++)
				count_add(&u->per_fabric, u->fabric[i], 1);
			formers_drop_desired(u);
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

/* The first index in v[lo..hi) whose entry is above key (v sorted). */
static size_t after(const struct plan_xc *v, size_t lo, size_t hi, const struct plan_xc *key)
{
	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;
		if (plan_xc_cmp(&v[mid], key) <= 0)
			lo = mid + 1;
		else
			hi = mid;
	}
	return lo;
}

/*
 * Replaces the unit's entries of fabric by group[0..ng) (sorted rows of this
 * unit); the entries that leave become former entries named name.
 */
static int unit_replace(struct desired *d, struct unit_set *u, int64_t fabric, const char *name,
                        const struct row *group, size_t ng)
{
	size_t nleft = count_of(&u->per_fabric, fabric);
	if (u->per_fabric.unknown)
		for (size_t i = nleft = 0; i < u->n; i++)
			nleft += u->fabric[i] == fabric;
	if (!nleft && !ng)
		return 0;
	size_t n = u->n - nleft + ng;
	struct plan_xc *xc = malloc((n ? n : 1) * sizeof(*xc));
	int64_t *fab = malloc((n ? n : 1) * sizeof(*fab));
	struct former *former = malloc((u->nformer + nleft + 1) * sizeof(*former));
	struct name *nm = nleft ? calloc(1, sizeof(*nm)) : NULL;
	/* What the listener hears: the fabric's entries before and after. */
	struct plan_xc *oldxc = malloc((nleft + ng + 1) * sizeof(*oldxc)), *newxc = oldxc + nleft;
	int64_t *fabs = malloc((nleft > ng ? nleft : ng) * sizeof(*fabs) + sizeof(*fabs));
	if (!xc || !fab || !former || (nleft && !nm) || !oldxc || !fabs) {
		free(xc);
		free(fab);
		free(former);
		free(nm);
		free(oldxc);
		free(fabs);
		return -ENOMEM;
	}
	if (nm) {
		nm->refs = 1; /* ours until the end: formers_drop_desired() may drop the others */
		snprintf(nm->s, sizeof(nm->s), "%s", name);
	}

	/*
	 * Merge the kept entries with the group, collecting the leaving ones
	 * (sorted). Kept entries are copied in runs: a unit of thousands of
	 * circuits costs a memory copy, not a walk, when a few change.
	 */
	size_t k = 0, g = 0, f = 0, o = 0, p = 0, gone = 0;
	struct former *left = former + u->nformer; /* scratch after the old formers */
	while (p < u->n || g < ng) {
		/* The next leaving entry at or after p (found once, the scan only moves on). */
		if (gone < p)
			gone = p;
		while (f < nleft && gone < u->n && u->fabric[gone] != fabric)
			gone++;
		size_t next_gone = f < nleft ? gone : u->n;
		size_t at = g < ng ? after(u->xc, p, u->n, &group[g].xc) : u->n;
		size_t stop = next_gone < at ? next_gone : at;
		if (stop > p) {
			memcpy(xc + k, u->xc + p, (stop - p) * sizeof(*xc));
			memcpy(fab + k, u->fabric + p, (stop - p) * sizeof(*fab));
			k += stop - p;
			p = stop;
		}
		if (at == stop && g < ng) {
			xc[k] = group[g++].xc;
			fab[k++] = fabric;
		} else if (next_gone == stop && p < u->n) {
			oldxc[f] = u->xc[p];
			left[f++] = (struct former){ u->xc[p++], nm };
		}
	}
	free(u->xc);
	free(u->fabric);
	u->xc = xc;
	u->fabric = fab;
	u->n = k;
	count_add(&u->per_fabric, fabric, (long)ng - (long)f);
	for (size_t i = 0; i < ng; i++)
		newxc[i] = group[i].xc;
	for (size_t i = 0; i < (nleft > ng ? nleft : ng); i++)
		fabs[i] = fabric;

	/* Former entries: the old ones merged with the leaving ones (which win). */
	struct former *merged = malloc((u->nformer + f + 1) * sizeof(*merged));
	if (!merged) {
		/* Keep the old former entries; the leaving ones stay unnamed. */
		free(former);
		name_put(nm);
	} else {
		if (u->nformer)
			memcpy(former, u->former, u->nformer * sizeof(*former));
		size_t i = 0, j = 0;
		while (i < u->nformer || j < f) {
			int c = i == u->nformer ? 1
			        : j == f        ? -1
			                        : plan_xc_cmp(&former[i].xc, &left[j].xc);
			if (c == 0)
				name_put(former[i++].fabric);
			else if (c < 0)
				merged[o++] = former[i++];
			else {
				merged[o] = left[j++];
				merged[o++].fabric->refs++;
			}
		}
		free(former);
		free(u->former);
		u->former = merged;
		u->nformer = o;
		formers_drop_desired(u);
		name_put(nm);
	}
	notify_diff(d, u->ocs_id, oldxc, fabs, nleft, newxc, fabs, ng);
	free(oldxc);
	free(fabs);
	return 0;
}

static int apply_circuits(struct desired *d, const struct stage *st)
{
	struct row *rows = malloc((st->n ? st->n : 1) * sizeof(*rows));
	if (!rows)
		return -ENOMEM;
	for (size_t i = 0; i < st->n; i++)
		rows[i] =
		    (struct row){ st->v[i].ocs_id, xc_of(st->v[i].a, st->v[i].b), st->fabric };
	if (st->n)
		qsort(rows, st->n, sizeof(*rows), row_cmp);
	int rc = 0;
	/* Units with new entries first (unit_get may move the array), then the rest. */
	for (size_t i = 0; rc == 0 && i < st->n;) {
		size_t j = i;
		while (j < st->n && rows[j].ocs_id == rows[i].ocs_id)
			j++;
		rc = unit_get(d, rows[i].ocs_id) ? 0 : -ENOMEM;
		i = j;
	}
	for (size_t k = 0; rc == 0 && k < d->nunits; k++) {
		struct unit_set *u = &d->units[k];
		size_t lo = 0, hi = st->n, j;
		while (lo < hi) { /* first row of this unit */
			size_t mid = (lo + hi) / 2;
			if (rows[mid].ocs_id < u->ocs_id)
				lo = mid + 1;
			else
				hi = mid;
		}
		for (j = lo; j < st->n && rows[j].ocs_id == u->ocs_id; j++)
			;
		rc = unit_replace(d, u, st->fabric, st->name, rows + lo, j - lo);
	}
	free(rows);
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
static int reload_owners(struct desired *d)
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

/* True when the server is in a fabric, or joins one in the open transaction. */
static bool is_member(const struct desired *d, int64_t server)
{
	if (server >= 0 && (size_t)server < d->nserver_fabric && d->server_fabric[server])
		return true;
	for (size_t i = 0; i < d->nstages; i++)
		for (size_t j = 0;
		     d->stages[i].kind == STAGE_MEMBERS && j < d->stages[i].m.nservers; j++)
			if (d->stages[i].m.servers[j] == server)
				return true;
	return false;
}

/* ---- transactions ---------------------------------------------------------- */

static void stages_clear(struct desired *d)
{
	for (size_t i = 0; i < d->nstages; i++) {
		free(d->stages[i].v);
		members_free(&d->stages[i].m);
	}
	free(d->stages);
	d->stages = NULL;
	d->nstages = 0;
	d->expected = 0;
	d->touched = 0;
	d->broken = false;
	d->fs_expected = 0;
	d->fs_touched = 0;
	d->owners_broken = false;
	d->ntouched_fabrics = 0;
	d->ocs_touched = false;
}

static int id_cmp(const void *x, const void *y)
{
	int64_t a = *(const int64_t *)x, b = *(const int64_t *)y;
	return a < b ? -1 : a > b;
}

/* Tells the listener about every fabric row touched (each once), and forgets them. */
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

static void on_txn_end(void *arg, struct store *s, bool committed)
{
	struct desired *d = arg;
	(void)s;
	if (committed && (d->nstages || d->touched || d->outside || d->stale)) {
		int rc = 0;
		if (d->broken || d->outside || d->stale || d->touched != d->expected) {
			log_debug("store",
			          "circuits changed outside a stage (%ld rows, %ld staged): "
			          "reloading the desired cross-connects",
			          d->touched, d->expected);
			rc = -EAGAIN;
		}
		for (size_t i = 0; rc == 0 && i < d->nstages; i++)
			if (d->stages[i].kind == STAGE_CIRCUITS)
				rc = apply_circuits(d, &d->stages[i]);
		if (rc < 0 && reload(d) == 0)
			d->outside = false;
	}
	if (committed) {
		int rc = 0;
		if (d->owners_broken || d->owners_outside || d->owners_stale ||
		    d->fs_touched != d->fs_expected) {
			log_debug("store",
			          "fabric members or their cables changed outside a stage: "
			          "reloading the port owners");
			rc = -EAGAIN;
		}
		for (size_t i = 0; rc == 0 && i < d->nstages; i++) {
			if (d->stages[i].kind == STAGE_MEMBERS)
				rc = members_add(d, &d->stages[i].m);
			else if (d->stages[i].kind == STAGE_DROP)
				rc = members_drop(d, d->stages[i].fabric);
		}
		if (rc < 0 && reload_owners(d) == 0)
			d->owners_outside = false;
		for (size_t i = 0; i < d->nstages; i++)
			touch_fabric(d, d->stages[i].fabric);
		notify_fabrics(d);
		if (d->ocs_touched) {
			d->units_version++;
			d->changed = true;
		}
	}
	stages_clear(d);
	tell_changed(d);
}

static void on_update(void *arg, int op, const char *db, const char *table, sqlite3_int64 rowid)
{
	struct desired *d = arg;
	(void)op;
	if (strcmp(db, "main") != 0)
		return;
	bool outside = sqlite3_get_autocommit(store_db(d->s));
	if (strcmp(table, "fabric") == 0) {
		/* The listener may read the store: told at commit, or at the next refresh. */
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
		} else
			d->ocs_touched = true;
		return;
	}
	if (strcmp(table, "circuit") != 0)
		return;
	d->touched++;
	/* No transaction will end for it, and a rollback must not forget it. */
	if (outside)
		d->outside = true;
}

/*
 * Membership rows are counted like circuit rows; a cable of a server in a
 * fabric changing (rare: a topology change on a server's unused port) moves
 * an owner, so the owners are reloaded.
 */
static void on_preupdate(void *arg, sqlite3 *db, int op, const char *zdb, const char *table,
                         sqlite3_int64 key1, sqlite3_int64 key2)
{
	struct desired *d = arg;
	(void)key1;
	(void)key2;
	if (strcmp(zdb, "main") != 0)
		return;
	bool outside = sqlite3_get_autocommit(db);
	if (strcmp(table, "fabric_server") == 0) {
		d->fs_touched++;
		if (outside)
			d->owners_outside = true;
		return;
	}
	if (strcmp(table, "cable") != 0)
		return;
	sqlite3_value *v;
	bool member = false;
	if (op != SQLITE_INSERT && sqlite3_preupdate_old(db, 0, &v) == SQLITE_OK)
		member |= is_member(d, sqlite3_value_int64(v));
	if (op != SQLITE_DELETE && sqlite3_preupdate_new(db, 0, &v) == SQLITE_OK)
		member |= is_member(d, sqlite3_value_int64(v));
	if (member && outside)
		d->owners_outside = true;
	else if (member)
		d->owners_broken = true;
}

/* Circuit rows fabric has in the open transaction, as far as the stages know. */
static size_t rows_now(const struct desired *d, int64_t fabric)
{
	for (size_t i = d->nstages; i-- > 0;)
		if (d->stages[i].kind == STAGE_CIRCUITS && d->stages[i].fabric == fabric)
			return d->stages[i].n;
	return count_of(&d->counts, fabric);
}

/* Membership rows fabric has in the open transaction, as far as the stages know. */
static size_t members_now(const struct desired *d, int64_t fabric)
{
	for (size_t i = d->nstages; i-- > 0;) {
		if (d->stages[i].fabric != fabric || d->stages[i].kind == STAGE_CIRCUITS)
			continue;
		return d->stages[i].kind == STAGE_MEMBERS ? d->stages[i].m.nservers : 0;
	}
	const struct members *m = members_find(d, fabric);
	return m ? m->nservers : 0;
}

static struct stage *stage_new(struct desired *d, enum stage_kind kind, int64_t fabric)
{
	struct stage *t = realloc(d->stages, (d->nstages + 1) * sizeof(*t));
	if (!t)
		return NULL;
	d->stages = t;
	struct stage *st = &d->stages[d->nstages++];
	memset(st, 0, sizeof(*st));
	st->kind = kind;
	st->fabric = fabric;
	return st;
}

int desired_stage_fabric(struct desired *d, int64_t fabric_id, const struct desired_circuit *v,
                         size_t n)
{
	struct desired_circuit *copy = malloc((n ? n : 1) * sizeof(*copy));
	size_t before = copy ? rows_now(d, fabric_id) : 0;
	struct stage *st = copy ? stage_new(d, STAGE_CIRCUITS, fabric_id) : NULL;
	if (!st) {
		free(copy);
		d->broken = true;
		return -ENOMEM;
	}
	st->v = copy;
	st->n = n;
	if (n)
		memcpy(copy, v, n * sizeof(*copy));
	sqlite3_stmt *q = store_stmt(d->s, "SELECT name FROM fabric WHERE id = ?");
	if (q) {
		sqlite3_bind_int64(q, 1, fabric_id);
		if (sqlite3_step(q) == SQLITE_ROW)
			snprintf(st->name, sizeof(st->name), "%s", sqlite3_column_text(q, 0));
		sqlite3_reset(q);
	}
	d->expected += (long)(before + n);
	return 0;
}

int desired_stage_members(struct desired *d, int64_t fabric_id, const int64_t *servers,
                          size_t nservers, const struct desired_port *v, size_t n)
{
	int64_t *s = malloc((nservers ? nservers : 1) * sizeof(*s));
	struct desired_port *p = malloc((n ? n : 1) * sizeof(*p));
	size_t before = members_now(d, fabric_id);
	struct stage *st = s && p ? stage_new(d, STAGE_MEMBERS, fabric_id) : NULL;
	if (!st) {
		free(s);
		free(p);
		d->owners_broken = true;
		return -ENOMEM;
	}
	if (nservers)
		memcpy(s, servers, nservers * sizeof(*s));
	if (n)
		memcpy(p, v, n * sizeof(*p));
	st->m = (struct members){ fabric_id, s, nservers, p, n };
	/* A fabric's members are inserted once; any rows it had before go first. */
	d->fs_expected += (long)(before + nservers);
	return 0;
}

int desired_stage_delete(struct desired *d, int64_t fabric_id)
{
	size_t before = members_now(d, fabric_id);
	int rc = desired_stage_fabric(d, fabric_id, NULL, 0);
	if (rc < 0 || !stage_new(d, STAGE_DROP, fabric_id)) {
		d->owners_broken = true;
		return -ENOMEM;
	}
	d->fs_expected += (long)before;
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
	int rc = reload(d);
	if (rc == 0)
		rc = reload_owners(d);
	if (rc < 0) {
		desired_free(d);
		return rc;
	}
	d->reloads = 0;
	d->changed = false;
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
	stages_clear(d);
	for (size_t i = 0; i < d->nunits; i++) {
		free(d->units[i].xc);
		free(d->units[i].fabric);
		formers_put(d->units[i].former, d->units[i].nformer);
		free(d->units[i].former);
		free(d->units[i].owner);
		free(d->units[i].per_fabric.v);
	}
	free(d->units);
	for (size_t i = 0; i < d->nfabrics; i++)
		members_free(&d->fabrics[i]);
	free(d->fabrics);
	free(d->server_fabric);
	free(d->touched_fabrics);
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
	struct former key = { xc_of(a, b), NULL };
	const struct former *f =
	    u && u->nformer ? bsearch(&key, u->former, u->nformer, sizeof(key), former_cmp) : NULL;
	return f && f->fabric->s[0] ? f->fabric->s : NULL;
}

void desired_prune(struct desired *d, int64_t ocs_id, const struct plan_xc *held, size_t n)
{
	struct unit_set *u = unit_find(d, ocs_id);
	if (!u)
		return;
	size_t k = 0;
	for (size_t i = 0; i < u->nformer; i++) {
		if (n && bsearch(&u->former[i].xc, held, n, sizeof(*held), plan_xc_cmp))
			u->former[k++] = u->former[i];
		else
			name_put(u->former[i].fabric);
	}
	u->nformer = k;
}

void desired_forget(struct desired *d, int64_t ocs_id)
{
	struct unit_set *u = unit_find(d, ocs_id);
	if (!u)
		return;
	formers_put(u->former, u->nformer);
	u->nformer = 0;
}

uint64_t desired_reloads(const struct desired *d)
{
	return d->reloads;
}
