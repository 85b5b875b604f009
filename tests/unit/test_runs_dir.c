/*
 * The agent's runs directory (agent/runs_dir.c) on a real temporary directory: which names
 * are the agent's, the listing's order, the request bodies (a .json file as it is, a .nccl
 * file escaped byte for byte, what is rejected without a request), moves into done/ and
 * rejected/, and the .error files.
 */
#include <errno.h>
#include <fcntl.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cmocka.h>
#include <jansson.h>

#include "runs_dir.h"

struct fixture {
	char path[64];
	int fd;
};

static void put_file(int dirfd, const char *name, const void *data, size_t len)
{
	int fd = openat(dirfd, name, O_WRONLY | O_CREAT | O_TRUNC, 0644);
	assert_true(fd >= 0);
	assert_int_equal(write(fd, data, len), (ssize_t)len);
	close(fd);
}

static void set_mtime(int dirfd, const char *name, time_t sec, long nsec)
{
	struct timespec t[2] = { { sec, nsec }, { sec, nsec } };
	assert_int_equal(utimensat(dirfd, name, t, AT_SYMLINK_NOFOLLOW), 0);
}

static char *get_file(int dirfd, const char *name)
{
	static char buf[4096];
	int fd = openat(dirfd, name, O_RDONLY);
	if (fd < 0)
		return NULL;
	ssize_t n = read(fd, buf, sizeof(buf) - 1);
	close(fd);
	assert_true(n >= 0);
	buf[n] = '\0';
	return buf;
}

static int setup(void **state)
{
	struct fixture *f = calloc(1, sizeof(*f));
	char err[256];
	snprintf(f->path, sizeof(f->path), "/tmp/ofcd-runs-XXXXXX");
	assert_non_null(mkdtemp(f->path));
	f->fd = runs_dir_open(f->path, err, sizeof(err));
	assert_true(f->fd >= 0);
	*state = f;
	return 0;
}

static int teardown(void **state)
{
	struct fixture *f = *state;
	char cmd[128];
	close(f->fd);
	snprintf(cmd, sizeof(cmd), "rm -rf '%s'", f->path);
	assert_int_equal(system(cmd), 0);
	free(f);
	return 0;
}

static void test_wanted(void **state)
{
	(void)state;
	static const char *const yes[] = { "a.json", "a.nccl", "job-17.step-2.nccl", "x..json" };
	static const char *const no[] = { ".a.json", ".json", "a.json.tmp", "a.JSON",
		                          "a.txt",   "json",  "a.nccl~",    "nccl",
		                          "",        ".nccl", "a.jsonx",    "a.json/x" };
	for (size_t i = 0; i < sizeof(yes) / sizeof(yes[0]); i++)
		assert_true(runs_dir_wanted(yes[i]));
	for (size_t i = 0; i < sizeof(no) / sizeof(no[0]); i++)
		if (runs_dir_wanted(no[i]))
			fail_msg("\"%s\" is not a runs file", no[i]);
}

static void test_open(void **state)
{
	struct fixture *f = *state;
	char err[256], sub[128];
	struct stat st;
	/* The fixture's open made both; a second open takes them as they are. */
	assert_int_equal(fstatat(f->fd, "done", &st, 0), 0);
	assert_true(S_ISDIR(st.st_mode));
	assert_int_equal(fstatat(f->fd, "rejected", &st, 0), 0);
	int fd = runs_dir_open(f->path, err, sizeof(err));
	assert_true(fd >= 0);
	close(fd);

	snprintf(sub, sizeof(sub), "%s/missing", f->path);
	assert_int_equal(runs_dir_open(sub, err, sizeof(err)), -ENOENT);
	assert_non_null(strstr(err, "missing: "));

	/* done is a file: refused, naming it. */
	assert_int_equal(mkdirat(f->fd, "other", 0755), 0);
	snprintf(sub, sizeof(sub), "%s/other", f->path);
	int other = open(sub, O_RDONLY | O_DIRECTORY);
	put_file(other, "done", "x", 1);
	assert_int_equal(runs_dir_open(sub, err, sizeof(err)), -ENOTDIR);
	assert_non_null(strstr(err, "cannot use done/ in it: Not a directory"));
	/* done a link (to a directory elsewhere): refused too. */
	assert_int_equal(unlinkat(other, "done", 0), 0);
	assert_int_equal(symlinkat("/tmp", other, "done"), 0);
	assert_int_equal(runs_dir_open(sub, err, sizeof(err)), -ENOTDIR);
	close(other);
}

static void test_scan_order(void **state)
{
	struct fixture *f = *state;
	struct runs_file *files;
	size_t n;

	assert_int_equal(runs_dir_scan(f->fd, &files, &n), 0);
	assert_int_equal(n, 0);
	free(files);
	put_file(f->fd, "c.json", "{}", 2);
	put_file(f->fd, "b.nccl", "x", 1);
	put_file(f->fd, "a.json", "{}", 2);
	put_file(f->fd, "d.json", "{}", 2);
	set_mtime(f->fd, "c.json", 1000, 0);
	set_mtime(f->fd, "b.nccl", 2000, 5);
	set_mtime(f->fd, "a.json", 2000, 5); /* same time as b: by name */
	set_mtime(f->fd, "d.json", 2000, 1);
	/* Not the agent's: dot names, other endings, directories, links, FIFOs. */
	put_file(f->fd, ".e.json", "{}", 2);
	put_file(f->fd, "f.json.tmp", "{}", 2);
	put_file(f->fd, "g.txt", "{}", 2);
	assert_int_equal(mkdirat(f->fd, "h.json", 0755), 0);
	assert_int_equal(symlinkat("a.json", f->fd, "i.json"), 0);
	assert_int_equal(mkfifoat(f->fd, "j.nccl", 0644), 0);
	put_file(f->fd, "done/k.json", "{}", 2); /* not recursive */

	assert_int_equal(runs_dir_scan(f->fd, &files, &n), 0);
	assert_int_equal(n, 4);
	assert_string_equal(files[0].name, "c.json");
	assert_string_equal(files[1].name, "d.json");
	assert_string_equal(files[2].name, "a.json");
	assert_string_equal(files[3].name, "b.nccl");
	assert_int_equal(files[0].mtime.tv_sec, 1000);
	assert_int_equal(files[3].round, 0);
	assert_false(files[3].held);
	free(files);
	/* A second listing from the same descriptor sees the same (no offset left at the end). */
	assert_int_equal(runs_dir_scan(f->fd, &files, &n), 0);
	assert_int_equal(n, 4);
	free(files);

	/* A FIFO that a writer named like a runs file is skipped, without blocking. */
	struct runs_file fifo = { .name = "j.nccl" };
	char *body, why[160];
	size_t len;
	assert_int_equal(runs_dir_body(f->fd, &fifo, &body, &len, why, sizeof(why)), -ENOENT);
	struct runs_file link = { .name = "i.json" };
	assert_int_equal(runs_dir_body(f->fd, &link, &body, &len, why, sizeof(why)), -ENOENT);
	struct runs_file gone = { .name = "gone.json" };
	assert_int_equal(runs_dir_body(f->fd, &gone, &body, &len, why, sizeof(why)), -ENOENT);
}

static void test_json_body(void **state)
{
	struct fixture *f = *state;
	static const char text[] = "{\"runs\": [],\n \"x\": \"\0\"}";
	struct runs_file r = { .name = "a.json" };
	char *body, why[160];
	size_t len;
	struct stat st;

	put_file(f->fd, "a.json", text, sizeof(text) - 1);
	assert_int_equal(runs_dir_body(f->fd, &r, &body, &len, why, sizeof(why)), 0);
	/* As it is, every byte, even one the controller will refuse. */
	assert_int_equal(len, sizeof(text) - 1);
	assert_memory_equal(body, text, len);
	free(body);
	assert_int_equal(fstatat(f->fd, "a.json", &st, 0), 0);
	assert_true(r.ino == st.st_ino && r.dev == st.st_dev);

	put_file(f->fd, "e.json", "", 0);
	struct runs_file e = { .name = "e.json" };
	assert_int_equal(runs_dir_body(f->fd, &e, &body, &len, why, sizeof(why)), 0);
	assert_int_equal(len, 0);
	free(body);
}

static void test_nccl_body(void **state)
{
	struct fixture *f = *state;
	/* Every byte from 0x00 to 0x7f, then UTF-8 of 2, 3 and 4 bytes. */
	char text[128 + 16];
	size_t n = 0;
	for (int c = 0; c < 128; c++)
		text[n++] = (char)c;
	memcpy(text + n, "\xc3\xa9\xe2\x82\xac\xf0\x9f\x98\x80", 9);
	n += 9;
	put_file(f->fd, "a.nccl", text, n);
	struct runs_file r = { .name = "a.nccl" };
	char *body, why[160];
	size_t len;
	assert_int_equal(runs_dir_body(f->fd, &r, &body, &len, why, sizeof(why)), 0);
	assert_int_equal(strlen(body), len);
	json_error_t je;
	json_t *j = json_loadb(body, len, JSON_ALLOW_NUL, &je);
	if (!j)
		fail_msg("not JSON: %s: %s", je.text, body);
	assert_int_equal(json_object_size(j), 1);
	json_t *nt = json_object_get(j, "nccl_tests");
	assert_int_equal(json_object_size(nt), 1);
	json_t *t = json_object_get(nt, "text");
	assert_int_equal(json_string_length(t), n);
	assert_memory_equal(json_string_value(t), text, n);
	json_decref(j);
	/* No raw control character in the body: each one escaped. */
	for (size_t i = 0; i < len; i++)
		assert_true((unsigned char)body[i] >= 0x20);
	free(body);

	/* Not UTF-8: rejected without a request, saying where. */
	static const struct {
		const char *bytes;
		size_t len, at;
	} bad[] = {
		{ "ok\xff", 3, 2 },           /* never in UTF-8 */
		{ "\xc0\x80", 2, 0 },         /* overlong NUL */
		{ "a\xed\xa0\x80", 4, 1 },    /* a surrogate */
		{ "ab\xe2\x82", 4, 2 },       /* cut at the end */
		{ "\xf4\x90\x80\x80", 4, 0 }, /* past U+10FFFF */
		{ "x\x80y", 3, 1 },           /* a lone continuation byte */
		{ "\xe2\x28\xa1", 3, 0 },     /* a bad continuation */
	};
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		char want[64];
		put_file(f->fd, "b.nccl", bad[i].bytes, bad[i].len);
		struct runs_file b = { .name = "b.nccl" };
		int rc = runs_dir_body(f->fd, &b, &body, &len, why, sizeof(why));
		snprintf(want, sizeof(want), "not UTF-8 text (byte %zu)", bad[i].at);
		if (rc != -EILSEQ || strcmp(why, want) != 0)
			fail_msg("case %zu: rc %d, \"%s\", want \"%s\"", i, rc, why, want);
		assert_null(body);
	}
}

static void test_size_limit(void **state)
{
	struct fixture *f = *state;
	char *body, why[160];
	size_t len;
	int fd = openat(f->fd, "big.json", O_WRONLY | O_CREAT, 0644);
	assert_true(fd >= 0);
	assert_int_equal(ftruncate(fd, RUNS_FILE_MAX), 0);
	struct runs_file r = { .name = "big.json" };
	assert_int_equal(runs_dir_body(f->fd, &r, &body, &len, why, sizeof(why)), 0);
	assert_int_equal(len, RUNS_FILE_MAX);
	free(body);
	assert_int_equal(ftruncate(fd, RUNS_FILE_MAX + 1), 0);
	close(fd);
	assert_int_equal(runs_dir_body(f->fd, &r, &body, &len, why, sizeof(why)), -EFBIG);
	assert_string_equal(why, "16777217 bytes, larger than 16777216");
	assert_null(body);
}

static void test_move_and_reject(void **state)
{
	struct fixture *f = *state;
	char *body, why[160];
	size_t len;
	struct runs_file r = { .name = "a.json" };

	put_file(f->fd, "a.json", "new", 3);
	put_file(f->fd, "done/a.json", "old", 3);
	assert_int_equal(runs_dir_body(f->fd, &r, &body, &len, why, sizeof(why)), 0);
	free(body);
	assert_int_equal(runs_dir_move(f->fd, &r, "done"), 0);
	assert_string_equal(get_file(f->fd, "done/a.json"), "new"); /* over the old one */
	assert_null(get_file(f->fd, "a.json"));
	assert_int_equal(runs_dir_move(f->fd, &r, "done"), -ENOENT);

	/* Renamed over while it was sent: the new file is not moved for the old one. */
	put_file(f->fd, "b.json", "first", 5);
	struct runs_file b = { .name = "b.json" };
	assert_int_equal(runs_dir_body(f->fd, &b, &body, &len, why, sizeof(why)), 0);
	free(body);
	put_file(f->fd, ".b.tmp", "second", 6);
	assert_int_equal(renameat(f->fd, ".b.tmp", f->fd, "b.json"), 0);
	assert_int_equal(runs_dir_move(f->fd, &b, "rejected"), -ESTALE);
	assert_string_equal(get_file(f->fd, "b.json"), "second");

	/* The .error: one line, line breaks flattened, replacing an older one. */
	static const char older[] = "an older reason, longer than the new one\n";
	put_file(f->fd, "rejected/b.json.error", older, sizeof(older) - 1);
	static const char reply[] = "HTTP 422 {\"error\":\n{\"field\":\"runs[0]\"}}\r\n";
	assert_int_equal(runs_dir_write_error(f->fd, &b, reply, sizeof(reply) - 1), 0);
	assert_string_equal(get_file(f->fd, "rejected/b.json.error"),
	                    "HTTP 422 {\"error\": {\"field\":\"runs[0]\"}}\n");
	assert_null(get_file(f->fd, "rejected/.agent-error.tmp"));
	assert_int_equal(runs_dir_body(f->fd, &b, &body, &len, why, sizeof(why)), 0);
	free(body);
	assert_int_equal(runs_dir_move(f->fd, &b, "rejected"), 0);
	assert_string_equal(get_file(f->fd, "rejected/b.json"), "second");

	/*
	 * done/ and rejected/ cleaned up by hand while the agent runs: made again, and the
	 * file moved (not taken for one removed meanwhile, and sent again at every scan).
	 */
	assert_int_equal(unlinkat(f->fd, "done/a.json", 0), 0);
	assert_int_equal(unlinkat(f->fd, "done", AT_REMOVEDIR), 0);
	put_file(f->fd, "c.json", "third", 5);
	struct runs_file c = { .name = "c.json" };
	assert_int_equal(runs_dir_body(f->fd, &c, &body, &len, why, sizeof(why)), 0);
	free(body);
	assert_int_equal(runs_dir_move(f->fd, &c, "done"), 0);
	assert_string_equal(get_file(f->fd, "done/c.json"), "third");
	assert_int_equal(unlinkat(f->fd, "rejected/b.json", 0), 0);
	assert_int_equal(unlinkat(f->fd, "rejected/b.json.error", 0), 0);
	assert_int_equal(unlinkat(f->fd, "rejected", AT_REMOVEDIR), 0);
	assert_int_equal(runs_dir_write_error(f->fd, &c, "why", 3), 0);
	assert_string_equal(get_file(f->fd, "rejected/c.json.error"), "why\n");
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_wanted),
		cmocka_unit_test_setup_teardown(test_open, setup, teardown),
		cmocka_unit_test_setup_teardown(test_scan_order, setup, teardown),
		cmocka_unit_test_setup_teardown(test_json_body, setup, teardown),
		cmocka_unit_test_setup_teardown(test_nccl_body, setup, teardown),
		cmocka_unit_test_setup_teardown(test_size_limit, setup, teardown),
		cmocka_unit_test_setup_teardown(test_move_and_reject, setup, teardown),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
