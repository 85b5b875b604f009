/* cluster status|members|snapshot save: this daemon's place in its cluster, and its store. */
#include <errno.h>
#include <fcntl.h>
#include <libgen.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cmd.h"
#include "table.h"

static int show_status(const json_t *reply)
{
	static const char *const keys[] = { "self",          "role",     "leader",
		                            "generation",    "revision", "applied_revision",
		                            "etcd_reachable" };
	char buf[512];
	for (size_t i = 0; i < sizeof(keys) / sizeof(keys[0]); i++)
		table_kv(keys[i], "%s",
		         table_text(json_object_get(reply, keys[i]), buf, sizeof(buf)));
	table_kv("members", "%zu", json_array_size(json_object_get(reply, "members")));
	return CMD_OK;
}

int cmd_cluster_status(struct cmd_ctx *c)
{
	return cmd_get_show(c, "/v1/cluster", show_status, NULL);
}

int cmd_cluster_members(struct cmd_ctx *c)
{
	static const char *const head[] = { "NAME", "ROLE", "APPLIED_REVISION", "ADVERTISE" };
	static const char *const keys[] = { "name", "role", "applied_revision", "advertise" };
	struct client_reply r = { 0 };
	int rc = cmd_call(c, "GET", "/v1/cluster", NULL, 0, &r);
	json_t *members = json_object_get(r.json, "members");
	json_t *doc =
	    rc == CMD_OK ? json_pack("{s:O}", "members", members ? members : json_null()) : NULL;
	if (rc == CMD_OK && !cmd_print_doc(c, doc))
		rc = cmd_print_rows(members, head, keys, 4);
	json_decref(doc);
	client_reply_free(&r);
	return rc;
}

/* The download in progress: the temporary file and how much went into it. */
struct download {
	int fd;
	size_t bytes;
	int err; /* errno of a failed write */
};

static int on_chunk(const char *data, size_t n, void *arg)
{
	struct download *d = arg;
	while (n) {
		ssize_t w = write(d->fd, data, n);
		if (w < 0 && errno == EINTR)
			continue;
		if (w < 0) {
			d->err = errno;
			return -1;
		}
		data += w;
		n -= (size_t)w;
		d->bytes += (size_t)w;
	}
	return 0;
}

/* What a snapshot starts with: anything else (a proxy's page) is not kept. */
static bool is_sqlite(int fd)
{
	static const char magic[16] = "SQLite format 3";
	char head[16];
	return pread(fd, head, sizeof(head), 0) == (ssize_t)sizeof(head) &&
	       memcmp(head, magic, sizeof(head)) == 0;
}

/* Makes the rename itself durable: the directory entry is on disk too. */
static void sync_dir(const char *file)
{
	char *copy = strdup(file);
	int fd = copy ? open(dirname(copy), O_RDONLY | O_DIRECTORY | O_CLOEXEC) : -1;
	if (fd >= 0) {
		fsync(fd);
		close(fd);
	}
	free(copy);
}

/*
 * Written to FILE.tmp, synced and renamed over FILE: FILE is never a partial
 * snapshot, whatever interrupts the download. Mode 0600: the store holds the
 * audit trail and the tokens' names.
 */
int cmd_cluster_snapshot_save(struct cmd_ctx *c)
{
	const char *file = c->args.argv[0];
	struct client_reply r = { 0 };
	struct download d = { .fd = -1 };
	char *tmp = NULL;
	if (asprintf(&tmp, "%s.tmp", file) < 0)
		return cmd_fail(CMD_UNREACHABLE, "out of memory");
	d.fd = open(tmp, O_RDWR | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
	if (d.fd < 0) {
		int rc = cmd_usage("%s: %s", tmp, strerror(errno));
		free(tmp);
		return rc;
	}
	struct client_req q = { .path = "/v1/cluster/snapshot",
		                .accept = "application/vnd.sqlite3, application/json",
		                .fn = on_chunk,
		                .arg = &d };
	char err[512] = "";
	int rc = client_send(c->client, &q, &r, err, sizeof(err));
	if (rc == -ECANCELED)
		rc = cmd_fail(CMD_USAGE, "%s: %s", tmp, strerror(d.err));
	else if ((rc = cmd_report(c, rc, err, &r)) == CMD_OK && r.status != 200)
		rc = cmd_fail(CMD_UNREACHABLE, "%ld: the daemon sent no snapshot", r.status);
	if (rc == CMD_OK && !is_sqlite(d.fd))
		rc = cmd_fail(CMD_UNREACHABLE, "what came back is not an SQLite file");
	if (rc == CMD_OK && fsync(d.fd) < 0)
		rc = cmd_fail(CMD_USAGE, "%s: %s", tmp, strerror(errno));
	if (close(d.fd) < 0 && rc == CMD_OK)
		rc = cmd_fail(CMD_USAGE, "%s: %s", tmp, strerror(errno));
	if (rc == CMD_OK && rename(tmp, file) < 0)
		rc = cmd_fail(CMD_USAGE, "%s: %s", file, strerror(errno));
	if (rc != CMD_OK) {
		unlink(tmp);
	} else {
		sync_dir(file);
		json_t *doc = json_pack("{s:s, s:I}", "file", file, "bytes", (json_int_t)d.bytes);
		if (!cmd_print_doc(c, doc))
			printf("snapshot saved to %s (%zu bytes)\n", file, d.bytes);
		json_decref(doc);
	}
	free(tmp);
	client_reply_free(&r);
	return rc;
}
