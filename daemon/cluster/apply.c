#include "apply.h"

#include <errno.h>
#include <string.h>

#include "base/metrics.h"
#include "log.h"
#include "state/store.h"
#include "state/store_changes.h"

#define CONFLICTS_HELP                                                                             \
	"Changes of the replicated log that did not apply cleanly to this member's store (it "     \
	"copies a snapshot)."

/* Long enough for a checkpoint or a snapshot's copy to let go, short for the loop. */
#define FOLLOWER_BUSY_MS 50

void apply_metrics_init(void)
{
	metrics_counter_add("ofcd_cluster_apply_conflicts_total", CONFLICTS_HELP, NULL, 0);
}

int apply_change(struct store *s, int64_t revision, const char *key, const void *change, size_t len,
                 bool own, struct hook *done)
{
	int64_t applied = revision > 0 ? store_applied_revision(s) : 0;
	if (revision > 0 && applied >= revision) {
		if (!own)
			return 0; /* taken from the log already, by this member as a follower */
		/* Its own entry came back below the store: taken for applied, it would be lost. */
		log_error("cluster",
		          "etcd gave a change this member appended revision %lld, which its store "
		          "counts as applied (%lld): etcd went back (restored from a backup, or "
		          "replaced)",
		          (long long)revision, (long long)applied);
		return -EXDEV;
	}
	struct log_changeset v[LOG_BUNDLE_MAX];
	int n = log_bundle_parse(change, len, v, LOG_BUNDLE_MAX);
	if (n < 0) {
		log_error("cluster",
		          "the change at revision %lld is not a change ofcd wrote: it "
		          "cannot be applied",
		          (long long)revision);
		metrics_counter_add("ofcd_cluster_apply_conflicts_total", CONFLICTS_HELP, NULL, 1);
		return -EPROTO;
	}
	struct store_changeset apply[LOG_BUNDLE_MAX];
	size_t k = 0;
	for (int i = 0; i < n; i++)
		if (v[i].kind == LOG_WRITE || (!own && v[i].kind == LOG_STATES))
			apply[k++] = (struct store_changeset){ v[i].data, v[i].len };
	struct store_conflict conflict;
	/*
	 * A follower whose store another process holds tries again later (its
	 * replica backs off), its loop free meanwhile: waiting a second on every
	 * try stalled its reads and probes. The leader's own change waits as any
	 * write does: failing it would hand the leadership over.
	 */
	if (!own)
		store_busy_timeout(s, FOLLOWER_BUSY_MS);
	int rc = store_apply_changes(s, apply, k, revision, key, &conflict);
	if (!own)
		store_busy_timeout(s, STORE_BUSY_MS);
	if (rc == -EPROTO) {
		log_error("cluster",
		          "the change at revision %lld conflicts with this store (table %s: %s): "
		          "this member stops applying the log and copies a snapshot",
		          (long long)revision, conflict.table[0] ? conflict.table : "?",
		          conflict.what[0] ? conflict.what : "not a changeset");
		metrics_counter_add("ofcd_cluster_apply_conflicts_total", CONFLICTS_HELP, NULL, 1);
	}
	if (rc == 0 && done)
		apply_done_hook_call(done, revision, v, (size_t)n, own);
	return rc;
}
