/*
 * The agent's runs directory ([agent] runs_dir): files of measured collective runs that jobs
 * drop there for the agent to send to the controller (POST /v1/servers/{name}/runs), and its
 * done/ and rejected/ directories the agent moves them into. The file-system half only;
 * agent.c sends them.
 *
 * A file is NAME.json, a request body as it is, or NAME.nccl, nccl-tests' output sent as
 * {"nccl_tests": {"text": ...}}; names starting with '.' and every other name are not the
 * agent's, so writers write elsewhere or under a dot name and rename into place, and a file
 * listed is a whole one.
 *
 * Loop thread only; nothing here keeps state between calls.
 */
#ifndef OFCD_RUNS_DIR_H
#define OFCD_RUNS_DIR_H

#include <stdbool.h>
#include <stddef.h>
#include <sys/types.h>
#include <time.h>

/** Files larger than this are rejected without a request. */
#define RUNS_FILE_MAX (16u << 20)

/** One file of the directory as listed, and what the agent keeps about it. */
struct runs_file {
	char name[256];        /**< its name in the directory */
	struct timespec mtime; /**< last written: the oldest go first */
	dev_t dev;             /**< device of the file read (runs_dir_body), with ino */
	ino_t ino;             /**< inode of the file read: a replacement is never moved for it */
	unsigned round;        /**< the agent's: scan round of its last failed try, 0 for none */
	double warned;         /**< the agent's: monotonic time of the last warning, 0 for none */
	bool held;             /**< the agent's: handled but not moved, never sent again */
};

/**
 * Opens the directory at path (which must exist) and creates done/ and rejected/ in it when
 * they are missing. Returns its descriptor, or -errno with "PATH: reason" in err.
 */
int runs_dir_open(const char *path, char *err, size_t errlen);

/** Whether a file of this name is one to send: NAME.json or NAME.nccl, NAME not starting with '.'.
 */
bool runs_dir_wanted(const char *name);

/**
 * Lists the regular files of the directory dirfd whose names runs_dir_wanted(), oldest mtime
 * first (ties by name), into *files (malloc'd, the caller frees; bookkeeping zero) and *n.
 * Returns 0 or -errno.
 */
int runs_dir_scan(int dirfd, struct runs_file **files, size_t *n);

/**
 * Reads f from dirfd and makes the request body of it into *body (malloc'd, the caller
 * frees) and *len; records the file read in f->dev and f->ino. Returns 0; -ENOENT when it
 * is gone or no longer a regular file; -EFBIG (larger than RUNS_FILE_MAX) or -EILSEQ (a
 * .nccl file that is not UTF-8) for a file to reject, with why; another -errno, with why,
 * when it cannot be read now.
 */
int runs_dir_body(int dirfd, struct runs_file *f, char **body, size_t *len, char *why,
                  size_t whylen);

/**
 * Renames f into the subdirectory sub ("done" or "rejected"), over a file of the same name
 * there. Returns 0, -ESTALE when the name is now another file than the one read (left
 * alone), or -errno.
 */
int runs_dir_move(int dirfd, const struct runs_file *f, const char *sub);

/**
 * Writes rejected/NAME.error for f: the len bytes of text on one line (trailing line breaks
 * dropped, others made spaces), replacing one there. Returns 0 or -errno. Written before f is
 * moved, so a file in rejected/ has its reason beside it.
 */
int runs_dir_write_error(int dirfd, const struct runs_file *f, const char *text, size_t len);

#endif
