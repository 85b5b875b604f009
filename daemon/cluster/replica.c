#include "replica.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "etcd.h"
#include "log.h"
#include "log_part.h"
#include "state/store_changes.h"

/*
 * Entries per page of the first read of the log: a page of parts of large
 * changes (1.1 MB each, base64 in JSON) stays under 100 MB.
 */
#define LOG_PAGE 64u

struct replica {
	struct etcd_client *etcd;
	struct store *s;
	char log_prefix[160]; /* PREFIX/log/ */
	char floor_key[160];  /* PREFIX/log_floor: the log was trimmed up to this revision */
	int64_t from;         /* the revision the store held when the replica started */
	char from_key[224];   /* the log key the store recorded with it, "" when none */
	int64_t read_rev;     /* the revision every page of the first read is read at */
	int64_t applied;
	bool follow;
	bool check; /* the log must hold the change at from */
	bool diverged;
	bool reading; /* a page of the first read of the log is in flight */
	bool freed;   /* replica_free() came during it: on_range frees */
	struct replica_cbs cbs;
	struct etcd_watch *watch;
	struct log_part_buf parts; /* a large change whose parts are still coming */
};

static void warn_dropped(uint32_t count, uint32_t got, const char *why)
{
	log_warn("replica",
	         "a change in %u parts stops after %u (%s): its leader never finished it, "
	         "it is dropped",
	         count, got, why);
}

/*
 * The changeset entry kv completes (*data, *len; borrowed): 1, or 0 when it is
 * a part of a change with more parts to come, or -ENOMEM.
 */
static int whole_change(struct replica *r, const struct etcd_kv *kv, const void **data, size_t *len)
{
	uint32_t index, count;
	const void *slice;
	size_t n;
	if (!log_part_parse(kv->value, kv->value_len, &index, &count, &slice, &n)) {
		if (r->parts.next)
			warn_dropped(r->parts.count, r->parts.next, "an entry of its own follows");
		log_part_reset(&r->parts);
		*data = kv->value;
		*len = kv->value_len;
		return 1;
	}
	uint32_t had = r->parts.count, got = r->parts.next;
	int rc = log_part_add(&r->parts, index, count, slice, n);
	if (got && (index == 0 || rc == -EPROTO))
		warn_dropped(had, got,
		             index == 0 ? "another change starts"
		                        : "a part of another change follows");
	if (rc == -EPROTO)
		return 0; /* the rest of a change whose start this member never saw */
	if (rc <= 0)
		return rc;
	*data = r->parts.data;
	*len = r->parts.len;
	return 1;
}

/*
 * Applies entries in order, skipping what was applied already. Returns 0,
 * -EPROTO (diverged), -ESTALE (trimmed past this store), or -ENOMEM, -EIO or
 * -EBUSY (the store failed for now: read again from the last change applied).
 */
static int apply(struct replica *r, const struct etcd_kv *kvs, size_t n)
{
	/*
	 * The store may be further than this replica: a leader that stepped down
	 * applies its last append when etcd confirms it.
	 */
	int64_t have = store_applied_revision(r->s);
	if (have > r->applied)
		r->applied = have;
	for (size_t i = 0; i < n && !r->diverged; i++) {
		if (!kvs[i].deleted && strcmp(kvs[i].key, r->floor_key) == 0 &&
		    strtoll((const char *)kvs[i].value, NULL, 10) > r->applied) {
			log_warn("replica", "the log now starts after revision %lld, this store's",
			         (long long)r->applied);
			return -ESTALE;
		}
		/* A trim deletes entries: this replica has them already. */
		if (kvs[i].deleted ||
		    strncmp(kvs[i].key, r->log_prefix, strlen(r->log_prefix)) != 0)
			continue;
		if (kvs[i].mod_revision <= r->applied) {
			/*
			 * The store holds it already (a leader that stepped down applied its
			 * own change): so it does the change its parts belong to.
			 */
			log_part_reset(&r->parts);
			continue;
		}
		const void *data;
		size_t len;
		int rc = whole_change(r, &kvs[i], &data, &len);
		if (rc == 0)
			continue;
		if (rc > 0) {
			rc = r->cbs.apply(r->cbs.arg, kvs[i].mod_revision, kvs[i].key, data, len);
			log_part_reset(&r->parts);
		}
		/* The store failing for now (locked by another process, disk full): read again. */
		if (rc == -ENOMEM || rc == -EIO || rc == -EBUSY) {
			log_warn("replica",
			         "cannot apply log entry %s (revision %lld) now: %s; trying again",
			         kvs[i].key, (long long)kvs[i].mod_revision, strerror(-rc));
			return rc;
		}
		if (rc < 0) {
			log_error("replica",
			          "cannot apply log entry %s (revision %lld): %s; following "
			          "stops until a snapshot resync",
			          kvs[i].key, (long long)kvs[i].mod_revision,
			          rc == -EPROTO ? "it conflicts with this store" : strerror(-rc));
			r->diverged = true;
			return -EPROTO;
		}
		r->applied = kvs[i].mod_revision;
		if (r->cbs.applied)
			r->cbs.applied(r->cbs.arg, r->applied);
	}
	return 0;
}

static void stop(struct replica *r, int rc)
{
	etcd_watch_free(r->watch);
	r->watch = NULL;
	if (r->cbs.stopped)
		r->cbs.stopped(r->cbs.arg, rc);
}

/*
 * What a failed etcd call or watch means to the member: etcd's client says
 * -EPROTO of an answer it could not read (a gateway's error chunk), which
 * is not this replica's -EPROTO (a change that conflicts with the store):
 * the log is read again, no snapshot copied.
 */
static int transient(int rc)
{
	return rc == -EPROTO || rc == -ESTALE || rc == -EXDEV || rc == -ENOENT ? -EIO : rc;
}

static void on_event(int rc, const struct etcd_result *res, void *arg)
{
	struct replica *r = arg;
	if (rc == 0 && res->compact_revision > 0) {
		/* History goes, never a key's last version: read again from the store's revision.
		 */
		log_warn("replica", "the log was compacted past revision %lld; reading it again",
		         (long long)r->applied);
		stop(r, -EAGAIN);
		return;
	}
	if (rc < 0 || res->canceled) {
		log_warn("replica", "the log watch ended at revision %lld", (long long)r->applied);
		stop(r, rc < 0 ? transient(rc) : -EHOSTUNREACH);
		return;
	}
	rc = apply(r, res->kvs, res->nkvs);
	if (rc < 0)
		stop(r, rc);
}

static void on_range(int rc, const struct etcd_result *res, void *arg);

/* Asks for the page of the log after after_key (NULL: the first). Returns 0 or -ENOMEM. */
static int read_page(struct replica *r, const char *after_key)
{
	int rc = etcd_call(r->etcd, "/v3/kv/txn",
	                   etcd_req_log_read(r->floor_key, r->log_prefix, after_key, r->from,
	                                     r->read_rev, LOG_PAGE),
	                   on_range, r);
	r->reading = rc == 0;
	return rc;
}

/* The last entry of the log in a page's kvs, or NULL. */
static const char *last_entry(const struct replica *r, const struct etcd_result *res)
{
	for (size_t i = res->nkvs; i > 0; i--)
		if (strncmp(res->kvs[i - 1].key, r->log_prefix, strlen(r->log_prefix)) == 0)
			return res->kvs[i - 1].key;
	return NULL;
}

/*
 * Whether the first page holds the entry the store applied last (at r->from,
 * under r->from_key when the store recorded it: an etcd restored from a backup
 * numbers its revisions again, and another entry may stand at the same one):
 * entries sort in append order, and the page starts at that revision.
 */
static bool holds_last_applied(const struct replica *r, const struct etcd_result *res)
{
	for (size_t i = 0; i < res->nkvs; i++)
		if (res->kvs[i].mod_revision == r->from &&
		    strncmp(res->kvs[i].key, r->log_prefix, strlen(r->log_prefix)) == 0)
			return !r->from_key[0] || strcmp(res->kvs[i].key, r->from_key) == 0;
	return false;
}

static void on_range(int rc, const struct etcd_result *res, void *arg)
{
	struct replica *r = arg;
	r->reading = false;
	if (r->freed) {
		log_part_reset(&r->parts);
		free(r);
		return;
	}
	int64_t floor = 0;
	for (size_t i = 0; rc == 0 && i < res->nkvs; i++)
		if (strcmp(res->kvs[i].key, r->floor_key) == 0)
			floor = strtoll((const char *)res->kvs[i].value, NULL, 10);
	if (rc < 0) {
		log_warn("replica", "cannot read the log: %s", strerror(-rc));
		rc = transient(rc);
	} else if (res->revision < r->applied) {
		/*
		 * Its entries would get revisions this store counts as applied:
		 * followers would skip them and a leader would acknowledge them
		 * unapplied.
		 */
		log_error("replica",
		          "etcd's revision %lld is behind this store's %lld: etcd lost changes "
		          "this store has (restored from a backup, or replaced); this member "
		          "neither follows nor leads this log (docs/ha.md, \"etcd restored\")",
		          (long long)res->revision, (long long)r->applied);
		rc = -EXDEV;
	} else if (floor > r->applied) {
		log_warn(
		    "replica",
		    "the log was trimmed up to revision %lld, past this store's %lld: it needs "
		    "a snapshot",
		    (long long)floor, (long long)r->applied);
		rc = -ESTALE;
	} else if (r->check && !r->read_rev && r->from > floor && !holds_last_applied(r, res)) {
		/*
		 * Entries after it would be applied on top of changes no other store
		 * has, or without those it lacks: a divergence no conflict need show.
		 */
		log_error("replica",
		          "the log lacks the change this store applied last (revision %lld): this "
		          "store is not the log's (etcd restored or replaced, the log deleted, "
		          "another prefix); this member does not apply this log on top of it "
		          "(docs/ha.md, \"etcd restored\")",
		          (long long)r->from);
		rc = -ENOENT;
	} else {
		/* The pages after the first are read as the log stood at the first. */
		if (!r->read_rev)
			r->read_rev = res->revision;
		rc = apply(r, res->kvs, res->nkvs);
		const char *last = last_entry(r, res);
		if (rc == 0 && res->more && last) {
			rc = read_page(r, last);
			if (rc == 0)
				return; /* caught up once the last page is in */
		}
		/*
		 * From the revision the read saw, so that no append slips between; the
		 * prefix without its slash covers the floor too.
		 */
		char watched[160];
		snprintf(watched, sizeof(watched), "%.*s", (int)strlen(r->log_prefix) - 1,
		         r->log_prefix);
		if (rc == 0 && r->follow &&
		    etcd_watch(r->etcd, etcd_req_watch(watched, true, r->read_rev + 1), on_event, r,
		               &r->watch) < 0)
			rc = -ENOMEM;
	}
	if (r->cbs.caught_up)
		r->cbs.caught_up(r->cbs.arg, rc);
}

int replica_start(struct etcd_client *etcd, struct store *s, const char *prefix,
                  int64_t from_revision, bool check, bool follow, const struct replica_cbs *cbs,
                  struct replica **out)
{
	struct replica *r = calloc(1, sizeof(*r));
	if (!r)
		return -ENOMEM;
	r->etcd = etcd;
	r->s = s;
	r->applied = from_revision;
	r->check = check;
	r->follow = follow;
	if (cbs)
		r->cbs = *cbs;
	snprintf(r->log_prefix, sizeof(r->log_prefix), "%s/log/", prefix);
	snprintf(r->floor_key, sizeof(r->floor_key), "%s/log_floor", prefix);
	r->from = from_revision;
	if (check)
		store_applied_key(s, r->from_key, sizeof(r->from_key));
	*out = r;
	int rc = read_page(r, NULL);
	if (rc < 0) {
		*out = NULL;
		free(r);
		return rc;
	}
	return 0;
}

int64_t replica_applied(const struct replica *r)
{
	return r->applied;
}

bool replica_diverged(const struct replica *r)
{
	return r->diverged;
}

void replica_free(struct replica *r)
{
	if (!r)
		return;
	etcd_watch_free(r->watch);
	r->watch = NULL;
	if (r->reading) {
		r->freed = true; /* its reply frees it */
	} else {
		log_part_reset(&r->parts);
		free(r);
	}
}
