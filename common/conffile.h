/*
 * Strict INI files (libinih), shared by the daemon's and the agent's
 * configuration: one table of {section, key, parser}; an unknown section or
 * key, a key given twice or a bad value stops loading with a message naming
 * "FILE:LINE: [section] key: reason". Loop thread only (not reentrant per load).
 */
#ifndef OFCD_CONFFILE_H
#define OFCD_CONFFILE_H

#include <stdbool.h>
#include <stddef.h>

/** Parses value into cfg; on failure writes the reason into err and returns -EINVAL. */
typedef int (*conffile_parse_fn)(void *cfg, const char *key, const char *value, char *err,
                                 size_t errlen);

/** One key of a table. A key ending in '.' is a prefix: "token." matches token.NAME. */
struct conffile_key {
	const char *section;     /**< section name */
	const char *key;         /**< key name or prefix */
	conffile_parse_fn parse; /**< its parser */
};

#define CONFFILE_MAX_KEYS 64

/** One load of one file; set keys, nkeys and cfg, zero the rest. */
struct conffile {
	const struct conffile_key *keys; /**< the table (static) */
	size_t nkeys;                    /**< entries in keys, at most CONFFILE_MAX_KEYS */
	void *cfg;                       /**< passed to every parser */
	bool seen[CONFFILE_MAX_KEYS];    /**< which table entries the file used */
	char err[512];                   /**< first error, without file and line */
	int err_line;                    /**< line of that error */
	int line;                        /**< line being read (set by the reader) */
};

/**
 * Reads the file at path, or the text when text is not NULL (name is used in
 * messages either way), calling the table's parsers. Returns 0, or -ENOENT /
 * -ENOMEM / -EINVAL with "NAME:LINE: [section] key: reason" in err.
 */
int conffile_load(struct conffile *c, const char *path, const char *text, const char *name,
                  char *err, size_t errlen);

/** True when the file set a key whose parser is fn. */
bool conffile_seen(const struct conffile *c, conffile_parse_fn fn);

/** A whole number in [min, max]; -EINVAL with a reason otherwise. */
int conffile_uint(const char *value, unsigned long long min, unsigned long long max,
                  unsigned long long *out, char *err, size_t errlen);

/** true/yes/1 or false/no/0; -EINVAL with a reason otherwise. */
int conffile_bool(const char *value, bool *out, char *err, size_t errlen);

#endif
