#include "cfgtab.h"

#include <errno.h>
#include <ini.h>
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "auth_rules.h"

static const char *const type_names[] = {
	[CFGTAB_BOOL] = "bool",     [CFGTAB_UINT] = "uint", [CFGTAB_DOUBLE] = "double",
	[CFGTAB_STRING] = "string", [CFGTAB_NAME] = "name", [CFGTAB_ENUM] = "enum",
};

static int uint_value(const char *value, unsigned long long min, unsigned long long max,
                      const char *what, unsigned long long *out, char *err, size_t errlen)
{
	char *end;
	errno = 0;
	if (value[0] < '0' || value[0] > '9')
		goto bad;
	unsigned long long v = strtoull(value, &end, 10);
	if (errno || *end != '\0' || v < min || v > max)
		goto bad;
	*out = v;
	return 0;
bad:
	snprintf(err, errlen, "expected %s from %llu to %llu, got \"%s\"", what, min, max, value);
	return -EINVAL;
}

int cfgtab_uint(const char *value, unsigned long long min, unsigned long long max,
                unsigned long long *out, char *err, size_t errlen)
{
	return uint_value(value, min, max, "a whole number", out, err, errlen);
}

/* Stores v into an integer field of the row's width; the row's bounds make it fit. */
static int store_int(const struct cfgtab_key *k, void *p, unsigned long long v, char *err,
                     size_t errlen)
{
	switch (k->size) {
	case 1:
		*(uint8_t *)p = (uint8_t)v;
		return 0;
	case 2:
		*(uint16_t *)p = (uint16_t)v;
		return 0;
	case 4:
		*(uint32_t *)p = (uint32_t)v;
		return 0;
	case 8:
		*(uint64_t *)p = (uint64_t)v;
		return 0;
	}
	snprintf(err, errlen, "the table gives this key a field of %zu bytes", k->size);
	return -EINVAL;
}

static int parse_bool(const char *value, bool *out, char *err, size_t errlen)
{
	if (strcmp(value, "true") == 0 || strcmp(value, "yes") == 0 || strcmp(value, "1") == 0)
		*out = true;
	else if (strcmp(value, "false") == 0 || strcmp(value, "no") == 0 || strcmp(value, "0") == 0)
		*out = false;
	else {
		snprintf(err, errlen, "expected true or false, got \"%s\"", value);
		return -EINVAL;
	}
	return 0;
}

static int parse_double(const struct cfgtab_key *k, const char *value, double *out, char *err,
                        size_t errlen)
{
	char *end;
	errno = 0;
	double v = strtod(value, &end);
	if (value[0] == '\0' || *end != '\0' || errno || !isfinite(v) || v < k->dmin ||
	    v > k->dmax) {
		snprintf(err, errlen, "expected %s from %g to %g, got \"%s\"",
		         k->what ? k->what : "a number", k->dmin, k->dmax, value);
		return -EINVAL;
	}
	*out = v;
	return 0;
}

static int parse_enum(const struct cfgtab_key *k, void *p, const char *value, char *err,
                      size_t errlen)
{
	size_t n = 0, used;
	for (; k->choices[n].name; n++)
		if (strcmp(k->choices[n].name, value) == 0)
			return store_int(k, p, (unsigned long long)k->choices[n].value, err,
			                 errlen);
	used = (size_t)snprintf(err, errlen, "expected");
	for (size_t i = 0; i < n && used < errlen; i++)
		used += (size_t)snprintf(err + used, errlen - used, "%s%s",
		                         i == 0      ? " "
		                         : i + 1 < n ? ", "
		                                     : " or ",
		                         k->choices[i].name);
	if (used < errlen)
		snprintf(err + used, errlen - used, ", got \"%s\"", value);
	return -EINVAL;
}

/* Strings are copied into a zeroed field, so equal strings are equal bytes. */
static void store_string(const struct cfgtab_key *k, void *p, const char *value)
{
	memset(p, 0, k->size);
	memcpy(p, value, strlen(value));
}

/* Reads one value of row k (key as written) into cfg. */
static int parse_value(const struct cfgtab_key *k, void *cfg, const char *key, const char *value,
                       char *err, size_t errlen)
{
	void *p = (char *)cfg + k->offset;
	unsigned long long u;

	switch (k->type) {
	case CFGTAB_BOOL:
		return parse_bool(value, p, err, errlen);
	case CFGTAB_UINT:
		if (uint_value(value, k->min, k->max, k->what ? k->what : "a whole number", &u, err,
		               errlen) < 0)
			return -EINVAL;
		return store_int(k, p, u, err, errlen);
	case CFGTAB_DOUBLE:
		return parse_double(k, value, p, err, errlen);
	case CFGTAB_STRING:
		if (value[0] == '\0' || strlen(value) >= k->size) {
			snprintf(err, errlen, "expected %s of 1 to %zu characters",
			         k->what ? k->what : "a string", k->size - 1);
			return -EINVAL;
		}
		store_string(k, p, value);
		return 0;
	case CFGTAB_NAME:
		if (!auth_valid_name(value) || strlen(value) >= k->size) {
			snprintf(err, errlen, "expected %s of 1 to %d characters of [A-Za-z0-9._-]",
			         k->what ? k->what : "a name", AUTH_NAME_MAX);
			return -EINVAL;
		}
		store_string(k, p, value);
		return 0;
	case CFGTAB_ENUM:
		return parse_enum(k, p, value, err, errlen);
	case CFGTAB_CUSTOM:
		return k->parse(cfg, key, value, err, errlen);
	}
	snprintf(err, errlen, "the table gives this key an unknown type");
	return -EINVAL;
}

int cfgtab_defaults(const struct cfgtab *t, void *cfg, char *err, size_t errlen)
{
	char why[400];
	for (size_t i = 0; i < t->nkeys; i++) {
		const struct cfgtab_key *k = &t->keys[i];
		if (k->def && parse_value(k, cfg, k->key, k->def, why, sizeof(why)) < 0) {
			snprintf(err, errlen, "built-in default of [%s] %s: %s", k->section, k->key,
			         why);
			return -EINVAL;
		}
	}
	return 0;
}

/* Length of the part of a row's key that a file's key must match: "token." of "token.NAME". */
static size_t key_prefix(const struct cfgtab_key *k, bool *family)
{
	const char *dot = strchr(k->key, '.');
	*family = dot != NULL;
	return dot ? (size_t)(dot - k->key) + 1 : strlen(k->key);
}

static const struct cfgtab_key *find_key(const struct cfgtab *t, const char *section,
                                         const char *name, bool *known_sect)
{
	*known_sect = false;
	for (size_t i = 0; i < t->nkeys; i++) {
		const struct cfgtab_key *k = &t->keys[i];
		bool family;
		if (strcmp(k->section, section) != 0)
			continue;
		*known_sect = true;
		size_t n = key_prefix(k, &family);
		if (family ? strncmp(k->key, name, n) == 0 : strcmp(k->key, name) == 0)
			return k;
	}
	return NULL;
}

/*
 * One load. libinih reports the line of its first error, which may be a
 * syntax error before the first key the handler refused: the reader counts
 * lines so the handler's message gets its own line.
 */
struct load {
	const struct cfgtab *t;
	void *cfg;
	bool seen[CFGTAB_MAX_KEYS]; /* rows the file set */
	char err[512];              /* first error, without file and line */
	int err_line;               /* line of that error */
	int line;                   /* line being read */
	FILE *f;                    /* the file, or NULL when reading text */
	const char *text;           /* the rest of the text */
	bool at_line_start;
};

static int handler(void *user, const char *section, const char *name, const char *value)
{
	struct load *l = user;
	bool known_sect, family;
	const struct cfgtab_key *k = find_key(l->t, section, name, &known_sect);
	char why[400] = "";

	if (l->err[0])
		return 0;      /* keep only the first error */
	l->err_line = l->line; /* meaningful only once err is set below */
	if (!known_sect) {
		snprintf(l->err, sizeof(l->err), "[%s] %s: unknown section", section, name);
		return 0;
	}
	if (!k) {
		snprintf(l->err, sizeof(l->err), "[%s] %s: unknown key", section, name);
		return 0;
	}
	size_t idx = (size_t)(k - l->t->keys);
	key_prefix(k, &family);
	if (!family && l->seen[idx]) {
		snprintf(l->err, sizeof(l->err), "[%s] %s: key given twice", section, name);
		return 0;
	}
	l->seen[idx] = true;
	if (parse_value(k, l->cfg, name, value, why, sizeof(why)) < 0) {
		snprintf(l->err, sizeof(l->err), "[%s] %s: %s", section, name, why);
		return 0;
	}
	return 1;
}

static char *read_line(char *str, int num, void *stream)
{
	struct load *l = stream;
	char *res = NULL;
	if (num < 2)
		return NULL;
	if (l->f) {
		res = fgets(str, num, l->f);
	} else if (*l->text) {
		int n = 0;
		while (n < num - 1 && l->text[n] && (n == 0 || l->text[n - 1] != '\n'))
			n++;
		memcpy(str, l->text, (size_t)n);
		str[n] = '\0';
		l->text += n;
		res = str;
	}
	if (!res)
		return NULL;
	if (l->at_line_start)
		l->line++;
	size_t len = strlen(res);
	l->at_line_start = len && res[len - 1] == '\n';
	return res;
}

int cfgtab_load(const struct cfgtab *t, void *cfg, const char *path, const char *text,
                const char *name, char *err, size_t errlen)
{
	struct load l = { .t = t, .cfg = cfg, .text = text, .at_line_start = true };
	int rc;

	if (t->nkeys > CFGTAB_MAX_KEYS) {
		snprintf(err, errlen, "%s: too many configuration keys", name);
		return -EINVAL;
	}
	if (!text) {
		errno = 0;
		l.f = fopen(path, "r");
		if (!l.f) {
			snprintf(err, errlen, "%s: cannot open: %s", name, strerror(errno));
			return -ENOENT;
		}
	}
	rc = ini_parse_stream(read_line, &l, handler, &l);
	if (l.f)
		fclose(l.f);
	if (rc == -2) {
		snprintf(err, errlen, "%s: out of memory", name);
		return -ENOMEM;
	}
	if (rc > 0) {
		if (l.err[0] && l.err_line == rc)
			snprintf(err, errlen, "%s:%d: %s", name, rc, l.err);
		else
			snprintf(err, errlen,
			         "%s:%d: syntax error (expected [section] or key = value)", name,
			         rc);
		return -EINVAL;
	}
	return 0;
}

void cfgtab_swap_live(const struct cfgtab *t, void *running, void *next)
{
	for (size_t i = 0; i < t->nkeys; i++) {
		const struct cfgtab_key *k = &t->keys[i];
		unsigned char *a = (unsigned char *)running + k->offset;
		unsigned char *b = (unsigned char *)next + k->offset;
		if (!(k->flags & CFGTAB_LIVE))
			continue;
		for (size_t n = 0; n < k->size; n++) {
			unsigned char c = a[n];
			a[n] = b[n];
			b[n] = c;
		}
	}
}

size_t cfgtab_changed_fixed(const struct cfgtab *t, const void *a, const void *b, char *out,
                            size_t len)
{
	const char *section = NULL;
	size_t n = 0, used = 0;

	if (len)
		out[0] = '\0';
	for (size_t i = 0; i < t->nkeys; i++) {
		const struct cfgtab_key *k = &t->keys[i];
		const char *pa = (const char *)a + k->offset, *pb = (const char *)b + k->offset;
		bool text = k->type == CFGTAB_STRING || k->type == CFGTAB_NAME;
		if ((k->flags & CFGTAB_LIVE) ||
		    (text ? strncmp(pa, pb, k->size) == 0 : memcmp(pa, pb, k->size) == 0))
			continue;
		bool new_section = !section || strcmp(section, k->section) != 0;
		if (used < len)
			used +=
			    (size_t)snprintf(out + used, len - used, "%s%s%s%s%s", n ? ", " : "",
			                     new_section ? "[" : "", new_section ? k->section : "",
			                     new_section ? "] " : "", k->key);
		section = k->section;
		n++;
	}
	return n;
}

/* The reference's range column. */
static void doc_range(const struct cfgtab_key *k, FILE *f)
{
	switch (k->type) {
	case CFGTAB_BOOL:
		fprintf(f, "`true`, `false`");
		break;
	case CFGTAB_UINT:
		fprintf(f, "%llu–%llu%s%s", k->min, k->max, k->what ? " " : "",
		        k->what ? k->what : "");
		break;
	case CFGTAB_DOUBLE:
		fprintf(f, "%g–%g", k->dmin, k->dmax);
		break;
	case CFGTAB_STRING:
		fprintf(f, "1–%zu bytes", k->size - 1);
		break;
	case CFGTAB_NAME:
		fprintf(f, "1–%d of `[A-Za-z0-9._-]`", AUTH_NAME_MAX);
		break;
	case CFGTAB_ENUM:
		for (size_t i = 0; k->choices[i].name; i++)
			fprintf(f, "%s`%s`", i ? ", " : "", k->choices[i].name);
		break;
	case CFGTAB_CUSTOM:
		break;
	}
}

void cfgtab_doc(const struct cfgtab *t, FILE *f)
{
	fprintf(f, "| section | key | type | default | range | on SIGHUP | meaning |\n"
	           "| --- | --- | --- | --- | --- | --- | --- |\n");
	for (size_t i = 0; i < t->nkeys; i++) {
		const struct cfgtab_key *k = &t->keys[i];
		fprintf(f, "| %s | `%s` | %s | ", k->section, k->key,
		        k->type == CFGTAB_CUSTOM ? k->what : type_names[k->type]);
		if (k->def)
			fprintf(f, "`%s` | ", k->def);
		else
			fprintf(f, "none | ");
		doc_range(k, f);
		fprintf(f, " | %s | %s |\n", k->flags & CFGTAB_LIVE ? "live" : "restart", k->doc);
	}
}
