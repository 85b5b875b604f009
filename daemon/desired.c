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

struct unit_set {
	int64_t ocs_id;
	struct plan_xc *xc; /* sorted */
	int64_t *fabric;
	size_t n;
	struct former *former; /* sorted by xc */
	size_t nformer;
};

/* One desired_stage_fabric() of the open transaction. */
struct stage {
	int64_t fabric;
	char name[65];
	struct desired_circuit *v;
	size_t n;
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

/*
 * Reads the whole circuit table, all or nothing: on any failure the mirror is
 * left as it was and marked stale (the reconciler sends nothing while it is).
 * Former entries are kept.
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
			free(u->xc);
			free(u->fabric);
			u->xc = xc[k];
			u->fabric = fab[k];
			u->n = count[k];
			formers_drop_desired(u);
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

/*
 * Replaces the unit's entries of fabric by group[0..ng) (sorted rows of this
 * unit); the entries that leave become former entries named name.
 */
static int unit_replace(struct unit_set *u, int64_t fabric, const char *name,
                        const struct row *group, size_t ng)
{
	size_t nleft = 0;
	for (size_t i = 0; i < u->n; i++)
		nleft += u->fabric[i] == fabric;
	if (!nleft && !ng)
		return 0;
	size_t n = u->n - nleft + ng;
	struct plan_xc *xc = malloc((n ? n : 1) * sizeof(*xc));
	int64_t *fab = malloc((n ? n : 1) * sizeof(*fab));
	struct former *former = malloc((u->nformer + nleft + 1) * sizeof(*former));
	struct name *nm = nleft ? calloc(1, sizeof(*nm)) : NULL;
	if (!xc || !fab || !former || (nleft && !nm)) {
		free(xc);
		free(fab);
		free(former);
		free(nm);
		return -ENOMEM;
	}
	if (nm) {
		nm->refs = 1; /* ours until the end: formers_drop_desired() may drop the others */
		snprintf(nm->s, sizeof(nm->s), "%s", name);
	}

	/* Merge the kept entries with the group; collect the leaving ones (sorted). */
	size_t k = 0, g = 0, f = 0, o = 0;
	struct former *left = former + u->nformer; /* scratch after the old formers */
	for (size_t i = 0; i < u->n; i++) {
		if (u->fabric[i] == fabric) {
			left[f++] = (struct former){ u->xc[i], nm };
			continue;
		}
		while (g < ng && plan_xc_cmp(&group[g].xc, &u->xc[i]) < 0) {
			xc[k] = group[g].xc;
			fab[k++] = fabric;
			g++;
		}
		xc[k] = u->xc[i];
		fab[k++] = u->fabric[i];
	}
	for (; g < ng; g++) {
		xc[k] = group[g].xc;
		fab[k++] = fabric;
	}
	free(u->xc);
	free(u->fabric);
	u->xc = xc;
	u->fabric = fab;
	u->n = k;

	/* Former entries: the old ones merged with the leaving ones (which win). */
	struct former *merged = malloc((u->nformer + f + 1) * sizeof(*merged));
	if (!merged) {
		/* Keep the old former entries; the leaving ones stay unnamed. */
		free(former);
		name_put(nm);
		return 0;
	}
	if (u->nformer)
		memcpy(former, u->former, u->nformer * sizeof(*former));
	size_t i = 0, j = 0;
	while (i < u->nformer || j < f) {
		int c = i == u->nformer ? 1 : j == f ? -1 : plan_xc_cmp(&former[i].xc, &left[j].xc);
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
	return 0;
}

static int apply_stage(struct desired *d, const struct stage *st)
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
		rc = unit_replace(u, st->fabric, st->name, rows + lo, j - lo);
	}
	free(rows);
	return rc;
}

static void stages_clear(struct desired *d)
{
	for (size_t i = 0; i < d->nstages; i++)
		free(d->stages[i].v);
	free(d->stages);
	d->stages = NULL;
	d->nstages = 0;
	d->expected = 0;
	d->touched = 0;
	d->broken = false;
}

static void on_txn_end(void *arg, bool committed)
{
	struct desired *d = arg;
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
			rc = apply_stage(d, &d->stages[i]);
		if (rc < 0 && reload(d) == 0)
			d->outside = false;
	}
	stages_clear(d);
}

static void on_update(void *arg, int op, const char *db, const char *table, sqlite3_int64 rowid)
{
	struct desired *d = arg;
	(void)op;
	(void)rowid;
	if (strcmp(table, "circuit") != 0 || strcmp(db, "main") != 0)
		return;
	d->touched++;
	/* No transaction will end for it, and a rollback must not forget it. */
	if (sqlite3_get_autocommit(store_db(d->s)))
		d->outside = true;
}

/* Circuit rows fabric has in the open transaction, as far as the stages know. */
static size_t rows_now(const struct desired *d, int64_t fabric)
{
	for (size_t i = d->nstages; i-- > 0;)
		if (d->stages[i].fabric == fabric)
			return d->stages[i].n;
	size_t n = 0;
	for (size_t i = 0; i < d->nunits; i++)
		for (size_t k = 0; k < d->units[i].n; k++)
			n += d->units[i].fabric[k] == fabric;
	return n;
}

int desired_stage_fabric(struct desired *d, int64_t fabric_id, const struct desired_circuit *v,
                         size_t n)
{
	struct stage *t = realloc(d->stages, (d->nstages + 1) * sizeof(*t));
	struct desired_circuit *copy = malloc((n ? n : 1) * sizeof(*copy));
	if (t)
		d->stages = t;
	if (!t || !copy) {
		free(copy);
		d->broken = true;
		return -ENOMEM;
	}
	struct stage *st = &d->stages[d->nstages];
	memset(st, 0, sizeof(*st));
	st->fabric = fabric_id;
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
	d->expected += (long)(rows_now(d, fabric_id) + n);
	d->nstages++;
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
	if (!d->stale && !d->outside && v == d->data_version)
		return;
	if (v != d->data_version)
		log_info("store", "the store was changed by another process: reloading the "
		                  "desired cross-connects");
	if (reload(d) == 0) {
		d->outside = false;
		d->data_version = v;
	}
}

bool desired_usable(const struct desired *d)
{
	return !d->stale;
}

int desired_open(struct store *s, struct desired **out)
{
	struct desired *d = calloc(1, sizeof(*d));
	if (!d)
		return -ENOMEM;
	d->s = s;
	d->data_version = data_version(d);
	int rc = reload(d);
	if (rc < 0) {
		desired_free(d);
		return rc;
	}
	d->reloads = 0;
	store_on_txn_end(s, on_txn_end, d);
	sqlite3_update_hook(store_db(s), on_update, d);
	*out = d;
	return 0;
}

void desired_free(struct desired *d)
{
	if (!d)
		return;
	store_on_txn_end(d->s, NULL, NULL);
	sqlite3_update_hook(store_db(d->s), NULL, NULL);
	stages_clear(d);
	for (size_t i = 0; i < d->nunits; i++) {
		free(d->units[i].xc);
		free(d->units[i].fabric);
		formers_put(d->units[i].former, d->units[i].nformer);
		free(d->units[i].former);
	}
	free(d->units);
	free(d);
}

struct desired_set desired_of(const struct desired *d, int64_t ocs_id)
{
	const struct unit_set *u = unit_find(d, ocs_id);
	if (!u || !u->n)
		return (struct desired_set){ NULL, NULL, 0 };
	return (struct desired_set){ u->xc, u->fabric, u->n };
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
