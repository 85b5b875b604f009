/*
 * Configuration tables. Each program describes every key of its INI file in
 * one table of typed rows (as OpenSM's opt_tbl[] and Redis's config table
 * do): where the value goes in the program's configuration struct, its type
 * and bounds, its default, whether a reload applies it at once, one line of
 * documentation. This engine reads a file against such a table (libinih, in
 * the strict style: an unknown section or key, a key given twice or a bad
 * value stops loading with "FILE:LINE: [section] key: reason"), fills in the
 * defaults, applies the live keys of a reloaded file, and prints the table as
 * the configuration reference (docs/operations.md carries that output).
 *
 * Loop thread only: nothing here is reentrant while a load runs.
 */
#ifndef OFCD_CFGTAB_H
#define OFCD_CFGTAB_H

#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>

/**
 * Parses value into cfg (the program's configuration struct) for a CUSTOM
 * row; key is the key as written (e.g. "token.ops"). On a bad value writes the
 * reason into err and returns -EINVAL.
 */
typedef int (*cfgtab_parse_fn)(void *cfg, const char *key, const char *value, char *err,
                               size_t errlen);

/** How a row's value is read and stored. */
enum cfgtab_type {
	CFGTAB_BOOL,   /**< bool: true, yes, 1 or false, no, 0 */
	CFGTAB_UINT,   /**< unsigned integer field (1, 2, 4 or 8 bytes) in [min, max] */
	CFGTAB_DOUBLE, /**< double, finite, in [dmin, dmax] */
	CFGTAB_STRING, /**< char[size]: 1 to size - 1 bytes */
	CFGTAB_NAME,   /**< char[size]: a name, 1..64 characters of [A-Za-z0-9._-] */
	CFGTAB_ENUM,   /**< integer field (1, 2, 4 or 8 bytes) set to the value of a choice */
	CFGTAB_CUSTOM, /**< parse() reads the value */
};

/** One word an ENUM row accepts, and what it stores. */
struct cfgtab_choice {
	const char *name; /**< the word; NULL ends a list */
	int value;        /**< stored into the field */
};

/** Row flag: a reload (SIGHUP) applies the key at once; without it, a restart does. */
#define CFGTAB_LIVE 1u

/** The field a row stores into: offset and size of member in type. */
#define CFGTAB_FIELD(type, member)                                                                 \
	.offset = offsetof(type, member), .size = sizeof(((type *)0)->member)

/** Consecutive members first..last of type, for a CUSTOM row that sets several. */
#define CFGTAB_SPAN(type, first, last)                                                             \
	.offset = offsetof(type, first),                                                           \
	.size = offsetof(type, last) + sizeof(((type *)0)->last) - offsetof(type, first)

/** A macro's value as a default: CFGTAB_STR(COST_DEFAULT_INTER_GBPS) is "400.0". */
#define CFGTAB_STR(x)  CFGTAB_STR_(x)
#define CFGTAB_STR_(x) #x

/** One key. Tables are static and const; members a type does not use stay zero. */
struct cfgtab_key {
	const char *section; /**< section name */
	/**
	 * Key name, or "prefix.PLACEHOLDER" for a family of keys: "token.NAME"
	 * matches every key that starts with "token." (and may appear many times).
	 */
	const char *key;
	enum cfgtab_type type;               /**< how the value is read */
	size_t offset;                       /**< field offset in the configuration struct */
	size_t size;                         /**< field size (CFGTAB_FIELD, CFGTAB_SPAN) */
	unsigned long long min, max;         /**< UINT bounds */
	double dmin, dmax;                   /**< DOUBLE bounds */
	const struct cfgtab_choice *choices; /**< ENUM words */
	cfgtab_parse_fn parse;               /**< CUSTOM parser */
	/**
	 * How messages name the expected value: "seconds", "a file path"
	 * (NULL: "a whole number", "a number", "a string", "a name"). For a
	 * CUSTOM row, the syntax the reference shows as its type ("HOST:PORT").
	 */
	const char *what;
	const char *def; /**< default, as written in a file; NULL: none (zero) */
	unsigned flags;  /**< CFGTAB_LIVE */
	const char *doc; /**< one line for the reference (markdown, no '|') */
};

/** A program's table. */
struct cfgtab {
	const struct cfgtab_key *keys; /**< rows, in reference order */
	size_t nkeys;                  /**< number of rows, at most CFGTAB_MAX_KEYS */
};

#define CFGTAB_MAX_KEYS 64

/**
 * Sets every row that has a default to it, as if a file said so; leaves the
 * other fields alone (the caller zeroes cfg first). Returns 0, or -EINVAL with
 * "built-in default of [section] key: reason" in err (a broken table).
 */
int cfgtab_defaults(const struct cfgtab *t, void *cfg, char *err, size_t errlen);

/**
 * Reads the file at path, or text when it is not NULL (name is used in
 * messages either way), into cfg over what it holds. Returns 0, or -ENOENT /
 * -ENOMEM / -EINVAL with "NAME:LINE: [section] key: reason" (or "NAME:LINE:
 * syntax error ...") in err; cfg is then partly loaded.
 */
int cfgtab_load(const struct cfgtab *t, void *cfg, const char *path, const char *text,
                const char *name, char *err, size_t errlen);

/**
 * Applies a reloaded configuration: swaps the field of every live row between
 * running and next, so running gets the new values and next holds the old
 * ones, to be released with next (owned memory, such as tokens, moves with
 * its field).
 */
void cfgtab_swap_live(const struct cfgtab *t, void *running, void *next);

/**
 * Writes "[http] listen, [store] path" into out: the rows that are not live
 * and whose field differs between a and b. Strings compare as strings, other
 * fields byte by byte. Returns how many rows differ.
 */
size_t cfgtab_changed_fixed(const struct cfgtab *t, const void *a, const void *b, char *out,
                            size_t len);

/**
 * Prints the reference: a markdown table with one line per row (section, key,
 * type, default, range, on SIGHUP, meaning).
 */
void cfgtab_doc(const struct cfgtab *t, FILE *f);

/** A whole number in [min, max]; -EINVAL with a reason otherwise. For CUSTOM parsers. */
int cfgtab_uint(const char *value, unsigned long long min, unsigned long long max,
                unsigned long long *out, char *err, size_t errlen);

#endif
