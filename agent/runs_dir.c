/*
 * The runs directory's files (see runs_dir.h). Everything goes through the directory's
 * descriptor (openat, renameat), so names never have to fit a path buffer and a directory
 * renamed under the agent is still the one it opened.
 */
#include "runs_dir.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <jansson.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "utf8.h"

#define ERROR_TMP ".agent-error.tmp" /* rejected/'s .error files are written here first */

static int make_subdir(int fd, const char *path, const char *sub, char *err, size_t errlen)
{
	struct stat st;
	int rc = 0;
	if (mkdirat(fd, sub, 0755) < 0 && errno != EEXIST)
		rc = -errno;
	/* Not a link: in a directory anyone may write to, it could point anywhere. */
	else if (fstatat(fd, sub, &st, AT_SYMLINK_NOFOLLOW) < 0)
		rc = -errno;
	else if (!S_ISDIR(st.st_mode))
		rc = -ENOTDIR;
	else if (faccessat(fd, sub, W_OK | X_OK, 0) < 0)
		rc = -errno; /* files are moved into it */
	if (rc < 0)
		snprintf(err, errlen, "%s: cannot use %s/ in it: %s", path, sub, strerror(-rc));
	return rc;
}

int runs_dir_open(const char *path, char *err, size_t errlen)
{
	int fd = open(path, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (fd < 0) {
		int rc = -errno;
		snprintf(err, errlen, "%s: %s", path, strerror(errno));
		return rc;
	}
	/* Files are renamed out of it: it must be writable, not just readable. */
	if (faccessat(fd, ".", W_OK | X_OK, 0) < 0) {
		int rc = -errno;
		snprintf(err, errlen, "%s: the agent cannot move files out of it: %s", path,
		         strerror(errno));
		close(fd);
		return rc;
	}
	int rc = make_subdir(fd, path, "done", err, errlen);
	if (rc == 0)
		rc = make_subdir(fd, path, "rejected", err, errlen);
	if (rc < 0) {
		close(fd);
		return rc;
	}
	return fd;
}

static bool ends_with(const char *s, size_t n, const char *tail)
{
	size_t t = strlen(tail);
	return n > t && memcmp(s + n - t, tail, t) == 0;
}

bool runs_dir_wanted(const char *name)
{
	size_t n = strlen(name);
	return name[0] != '.' && (ends_with(name, n, ".json") || ends_with(name, n, ".nccl"));
}

static int cmp_age(const void *x, const void *y)
{
	const struct runs_file *a = x, *b = y;
	if (a->mtime.tv_sec != b->mtime.tv_sec)
		return a->mtime.tv_sec < b->mtime.tv_sec ? -1 : 1;
	if (a->mtime.tv_nsec != b->mtime.tv_nsec)
		return a->mtime.tv_nsec < b->mtime.tv_nsec ? -1 : 1;
	return strcmp(a->name, b->name);
}

static int append(struct runs_file **files, size_t *n, size_t *cap, const char *name,
                  const struct stat *st)
{
	if (*n == *cap) {
		size_t c = *cap ? *cap * 2 : 16;
		struct runs_file *v = realloc(*files, c * sizeof(*v));
		if (!v)
			return -ENOMEM;
		*files = v;
		*cap = c;
	}
	struct runs_file *f = &(*files)[(*n)++];
	memset(f, 0, sizeof(*f));
	snprintf(f->name, sizeof(f->name), "%s", name);
	f->mtime = st->st_mtim;
	f->dev = st->st_dev;
	f->ino = st->st_ino;
	return 0;
}

int runs_dir_scan(int dirfd, struct runs_file **files, size_t *n)
{
	/* A descriptor of its own: a dup would share (and leave at the end) the read offset. */
	int fd = openat(dirfd, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	DIR *d = fd >= 0 ? fdopendir(fd) : NULL;
	size_t cap = 0;
	int rc = 0;

	*files = NULL;
	*n = 0;
	if (!d) {
		rc = -errno;
		if (fd >= 0)
			close(fd);
		return rc;
	}
	struct dirent *e;
	while (rc == 0 && (errno = 0, e = readdir(d))) {
		struct stat st;
		if (!runs_dir_wanted(e->d_name))
			continue;
		/* Not followed: a symbolic link is not a regular file here. */
		if (fstatat(dirfd, e->d_name, &st, AT_SYMLINK_NOFOLLOW) < 0 || !S_ISREG(st.st_mode))
			continue;
		rc = append(files, n, &cap, e->d_name, &st);
	}
	if (rc == 0 && errno)
		rc = -errno;
	closedir(d);
	if (rc < 0) {
		free(*files);
		*files = NULL;
		*n = 0;
		return rc;
	}
	if (*n)
		qsort(*files, *n, sizeof(**files), cmp_age);
	return 0;
}

/* {"nccl_tests": {"text": TEXT}} with jansson escaping every byte JSON needs escaped. */
static int nccl_body(const char *text, size_t len, char **body, size_t *blen, char *why,
                     size_t whylen)
{
	size_t bad = utf8_bad_at(text, len);
	if (bad < len) {
		snprintf(why, whylen, "not UTF-8 text (byte %zu)", bad);
		return -EILSEQ;
	}
	json_t *j = json_pack("{s:{s:s%}}", "nccl_tests", "text", text, len);
	*body = j ? json_dumps(j, JSON_COMPACT) : NULL;
	json_decref(j);
	if (!*body) {
		snprintf(why, whylen, "out of memory");
		return -ENOMEM;
	}
	*blen = strlen(*body);
	return 0;
}

/* The whole file behind fd, at most RUNS_FILE_MAX bytes (it may grow while being read). */
static int read_all(int fd, size_t size, char **out, size_t *len, char *why, size_t whylen)
{
	size_t cap = size + 1, n = 0;
	char *buf = malloc(cap + 1);
	if (!buf) {
		snprintf(why, whylen, "out of memory");
		return -ENOMEM;
	}
	for (;;) {
		ssize_t r = read(fd, buf + n, cap - n);
		if (r < 0 && errno == EINTR)
			continue;
		if (r < 0) {
			int rc = -errno;
			snprintf(why, whylen, "cannot read it: %s", strerror(errno));
			free(buf);
			return rc;
		}
		if (r == 0)
			break;
		n += (size_t)r;
		if (n > RUNS_FILE_MAX) {
			snprintf(why, whylen, "larger than %u bytes", RUNS_FILE_MAX);
			free(buf);
			return -EFBIG;
		}
		if (n == cap) {
			char *v = realloc(buf, cap * 2 + 1);
			if (!v) {
				free(buf);
				snprintf(why, whylen, "out of memory");
				return -ENOMEM;
			}
			buf = v;
			cap *= 2;
		}
	}
	buf[n] = '\0';
	*out = buf;
	*len = n;
	return 0;
}

int runs_dir_body(int dirfd, struct runs_file *f, char **body, size_t *len, char *why,
                  size_t whylen)
{
	/* Non-blocking: a FIFO given a .json name must not stop the loop in open(). */
	int fd = openat(dirfd, f->name, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
	struct stat st;
	char *text = NULL;
	size_t n = 0;
	int rc;

	*body = NULL;
	*len = 0;
	if (fd < 0) {
		rc = errno == ENOENT || errno == ELOOP ? -ENOENT : -errno;
		snprintf(why, whylen, "cannot open it: %s", strerror(errno));
		return rc;
	}
	if (fstat(fd, &st) < 0 || !S_ISREG(st.st_mode)) {
		close(fd);
		snprintf(why, whylen, "not a regular file");
		return -ENOENT;
	}
	f->dev = st.st_dev;
	f->ino = st.st_ino;
	if ((uintmax_t)st.st_size > RUNS_FILE_MAX) {
		close(fd);
		snprintf(why, whylen, "%jd bytes, larger than %u", (intmax_t)st.st_size,
		         RUNS_FILE_MAX);
		return -EFBIG;
	}
	rc = read_all(fd, (size_t)st.st_size, &text, &n, why, whylen);
	close(fd);
	if (rc < 0)
		return rc;
	size_t namelen = strlen(f->name);
	if (!ends_with(f->name, namelen, ".nccl")) {
		*body = text; /* .json: the body as it is; the controller validates it */
		*len = n;
		return 0;
	}
	rc = nccl_body(text, n, body, len, why, whylen);
	free(text);
	return rc;
}

int runs_dir_move(int dirfd, const struct runs_file *f, const char *sub)
{
	char to[sizeof(f->name) + 16];
	struct stat st;
	if (fstatat(dirfd, f->name, &st, AT_SYMLINK_NOFOLLOW) < 0)
		return -errno;
	/* Renamed over while it was being sent: the new one has not been sent yet. */
	if (st.st_dev != f->dev || st.st_ino != f->ino)
		return -ESTALE;
	snprintf(to, sizeof(to), "%s/%s", sub, f->name);
	if (renameat(dirfd, f->name, dirfd, to) == 0)
		return 0;
	int rc = -errno;
	/* The file is there, so sub/ is not (cleaned up by hand): made again, as at the start. */
	if (rc == -ENOENT && fstatat(dirfd, f->name, &st, AT_SYMLINK_NOFOLLOW) == 0) {
		if (mkdirat(dirfd, sub, 0755) < 0 && errno != EEXIST)
			return -errno;
		rc = renameat(dirfd, f->name, dirfd, to) < 0 ? -errno : 0;
	}
	return rc;
}

static int write_line(int fd, const char *text, size_t len)
{
	while (len && (text[len - 1] == '\n' || text[len - 1] == '\r'))
		len--; /* the reply's own last line break: the file's is added */
	char *line = malloc(len + 1);
	if (!line)
		return -ENOMEM;
	for (size_t i = 0; i < len; i++)
		line[i] = text[i] == '\n' || text[i] == '\r' ? ' ' : text[i];
	line[len] = '\n';
	size_t done = 0;
	int rc = 0;
	while (done < len + 1) {
		ssize_t w = write(fd, line + done, len + 1 - done);
		if (w < 0 && errno == EINTR)
			continue;
		if (w < 0) {
			rc = -errno;
			break;
		}
		done += (size_t)w;
	}
	free(line);
	return rc;
}

int runs_dir_write_error(int dirfd, const struct runs_file *f, const char *text, size_t len)
{
	char to[sizeof(f->name) + 32];
	int n = snprintf(to, sizeof(to), "rejected/%s.error", f->name);
	if (n < 0 || (size_t)n >= sizeof(to))
		return -ENAMETOOLONG;
	/* Written aside and renamed into place: a reader never sees half of it. */
	int fd =
	    openat(dirfd, "rejected/" ERROR_TMP, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
	if (fd < 0 && errno == ENOENT && (mkdirat(dirfd, "rejected", 0755) == 0 || errno == EEXIST))
		fd = openat(dirfd, "rejected/" ERROR_TMP, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC,
		            0644); /* rejected/ was removed by hand: made again */
	if (fd < 0)
		return -errno;
	int rc = write_line(fd, text, len);
	if (close(fd) < 0 && rc == 0)
		rc = -errno;
	if (rc == 0 && renameat(dirfd, "rejected/" ERROR_TMP, dirfd, to) < 0)
		rc = -errno;
	if (rc < 0)
		unlinkat(dirfd, "rejected/" ERROR_TMP, 0);
	return rc;
}
