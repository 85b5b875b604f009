#include "hostlist.h"

#include <ctype.h>
#include <errno.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/*
 * Eighteen digits, as Slurm's own node numbers may have (n[0001234567-...]), keep every
 * number, and a range's count, inside 64 bits.
 */
#define MAX_DIGITS 18

/* One number of a bracket group, printed zero-padded to width digits. */
struct num {
	unsigned long long value;
	int width;
};

/* One bracket group, expanded: its numbers in order. */
struct group {
	struct num *nums;
	size_t n;
};

static int fail(char *err, size_t errlen, int rc, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));

static int fail(char *err, size_t errlen, int rc, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(err, errlen, fmt, ap);
	va_end(ap);
	return rc;
}

static int push(struct hostlist *hl, char *name)
{
	if (hl->n == hl->cap) {
		size_t cap = hl->cap ? hl->cap * 2 : 16;
		char **names = realloc(hl->names, cap * sizeof(*names));
		if (!names) {
			free(name);
			return -ENOMEM;
		}
		hl->names = names;
		hl->cap = cap;
	}
	hl->names[hl->n++] = name;
	return 0;
}

/* Reads the digits at *p into a number; 0 or -EINVAL when there are none or too many. */
static int read_number(const char **p, const char *end, unsigned long long *value, int *width)
{
	const char *s = *p;
	while (*p < end && isdigit((unsigned char)**p))
		(*p)++;
	*width = (int)(*p - s);
	if (*width == 0 || *width > MAX_DIGITS)
		return -EINVAL;
	*value = strtoull(s, NULL, 10);
	return 0;
}

static int bad_range(const char *s, const char *end, char *err, size_t errlen)
{
	return fail(err, errlen, -EINVAL,
	            "bad range in \"[%.*s]\": expected numbers or ranges like 0-4, separated by "
	            "commas",
	            (int)(end - s), s);
}

/*
 * Expands the inside of one bracket group, [s, end), appending to g. Every
 * number of a range takes the width of its low end, as Slurm prints them.
 */
static int expand_group(const char *s, const char *end, struct group *g, size_t limit, char *err,
                        size_t errlen)
{
	const char *p = s;
	for (;;) {
		unsigned long long lo, hi;
		int width, hiwidth;
		const char *item = p;
		if (read_number(&p, end, &lo, &width))
			return bad_range(s, end, err, errlen);
		hi = lo;
		if (p < end && *p == '-') {
			p++;
			if (read_number(&p, end, &hi, &hiwidth))
				return bad_range(s, end, err, errlen);
			if (hi < lo)
				return fail(err, errlen, -EINVAL, "reversed range \"%.*s\"",
				            (int)(p - item), item);
		}
		if (p < end && *p != ',')
			return bad_range(s, end, err, errlen);
		if (g->n + (hi - lo + 1) > limit)
			return fail(err, errlen, -E2BIG, "the list has more than %d names",
			            HOSTLIST_MAX);
		struct num *nums = realloc(g->nums, (g->n + (hi - lo + 1)) * sizeof(*nums));
		if (!nums)
			return -ENOMEM;
		g->nums = nums;
		for (unsigned long long v = lo; v <= hi; v++)
			g->nums[g->n++] = (struct num){ v, width };
		if (p == end)
			return 0;
		p++; /* the comma */
	}
}

/*
 * Expands one item [s, end) (no comma outside brackets): literal text and
 * bracket groups, multiplied out leftmost slowest.
 */
static int expand_item(struct hostlist *hl, const char *s, const char *end, char *err,
                       size_t errlen)
{
	struct group groups[16];
	size_t ngroups = 0, total = 1;
	int rc = 0;

	memset(groups, 0, sizeof(groups));
	for (const char *p = s; p < end; p++) {
		if (*p != '[')
			continue;
		const char *close = memchr(p, ']', (size_t)(end - p));
		if (ngroups == sizeof(groups) / sizeof(groups[0])) {
			rc = fail(err, errlen, -EINVAL, "more than 16 bracket groups in one name");
			goto out;
		}
		rc =
		    expand_group(p + 1, close, &groups[ngroups], HOSTLIST_MAX - hl->n, err, errlen);
		if (rc)
			goto out;
		total *= groups[ngroups++].n;
		if (total > HOSTLIST_MAX - hl->n) {
			rc = fail(err, errlen, -E2BIG, "the list has more than %d names",
			          HOSTLIST_MAX);
			goto out;
		}
		p = close;
	}

	/* An odometer over the groups, the last one turning fastest. */
	size_t idx[16] = { 0 };
	for (size_t k = 0; k < total; k++) {
		char buf[512];
		size_t len = 0, g = 0;
		for (const char *p = s; p < end; p++) {
			int w;
			if (*p == '[') {
				const struct num *nm = &groups[g].nums[idx[g]];
				w = snprintf(buf + len, sizeof(buf) - len, "%0*llu", nm->width,
				             nm->value);
				g++;
				p = memchr(p, ']', (size_t)(end - p));
			} else {
				w = snprintf(buf + len, sizeof(buf) - len, "%c", *p);
			}
			if (w < 0 || (size_t)w >= sizeof(buf) - len) {
				rc = fail(err, errlen, -EINVAL, "name longer than %zu characters",
				          sizeof(buf) - 1);
				goto out;
			}
			len += (size_t)w;
		}
		char *name = strdup(buf);
		if (!name || push(hl, name)) {
			rc = -ENOMEM;
			goto out;
		}
		for (size_t j = ngroups; j-- > 0;) {
			if (++idx[j] < groups[j].n)
				break;
			idx[j] = 0;
		}
	}
out:
	/* All of them: a group that failed half-way holds numbers too. */
	for (size_t j = 0; j < sizeof(groups) / sizeof(groups[0]); j++)
		free(groups[j].nums);
	return rc;
}

/* Checks the brackets and characters of the whole expression before expanding any of it. */
static int check_syntax(const char *expr, char *err, size_t errlen)
{
	bool open = false, empty = true;
	for (const char *p = expr;; p++) {
		if (*p == '\0' || (*p == ',' && !open)) {
			if (empty)
				return fail(err, errlen, -EINVAL,
				            "empty name at position %zu of \"%s\"",
				            (size_t)(p - expr) + 1, expr);
			if (open)
				return fail(err, errlen, -EINVAL, "unbalanced \"[\" in \"%s\"",
				            expr);
			if (*p == '\0')
				return 0;
			empty = true;
			continue;
		}
		if (isspace((unsigned char)*p))
			return fail(err, errlen, -EINVAL, "white space in \"%s\"", expr);
		if (*p == '[' && open)
			return fail(err, errlen, -EINVAL, "nested \"[\" in \"%s\"", expr);
		if (*p == ']' && !open)
			return fail(err, errlen, -EINVAL, "unbalanced \"]\" in \"%s\"", expr);
		if (*p == '[')
			open = true;
		else if (*p == ']')
			open = false;
		empty = false;
	}
}

int hostlist_expand(struct hostlist *hl, const char *expr, char *err, size_t errlen)
{
	size_t before = hl->n;
	int rc = check_syntax(expr, err, errlen);
	if (rc)
		return rc;

	const char *item = expr;
	bool open = false;
	for (const char *p = expr;; p++) {
		if (*p == '[')
			open = true;
		else if (*p == ']')
			open = false;
		if (*p != '\0' && (*p != ',' || open))
			continue;
		rc = expand_item(hl, item, p, err, errlen);
		if (rc || *p == '\0')
			break;
		item = p + 1;
	}
	if (rc == -ENOMEM)
		snprintf(err, errlen, "out of memory");
	if (rc) {
		while (hl->n > before)
			free(hl->names[--hl->n]);
	}
	return rc;
}

void hostlist_free(struct hostlist *hl)
{
	for (size_t i = 0; i < hl->n; i++)
		free(hl->names[i]);
	free(hl->names);
	memset(hl, 0, sizeof(*hl));
}

/* Splits name into a prefix length and its trailing number; false when it has none. */
static bool split_number(const char *name, size_t *plen, unsigned long long *value, int *width)
{
	size_t len = strlen(name), i = len;
	while (i > 0 && isdigit((unsigned char)name[i - 1]))
		i--;
	if (i == len || len - i > MAX_DIGITS)
		return false;
	*plen = i;
	*width = (int)(len - i);
	*value = strtoull(name + i, NULL, 10);
	return true;
}

/* Appends to a growing string; false when out of memory (the string is then freed). */
static bool append(char **s, size_t *len, size_t *cap, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));

static bool append(char **s, size_t *len, size_t *cap, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	int need = vsnprintf(NULL, 0, fmt, ap);
	va_end(ap);
	if (*len + (size_t)need + 1 > *cap) {
		size_t ncap = (*len + (size_t)need + 1) * 2;
		char *ns = realloc(*s, ncap);
		if (!ns) {
			free(*s);
			*s = NULL;
			return false;
		}
		*s = ns;
		*cap = ncap;
	}
	va_start(ap, fmt);
	vsnprintf(*s + *len, *cap - *len, fmt, ap);
	va_end(ap);
	*len += (size_t)need;
	return true;
}

char *hostlist_compress(char *const *names, size_t n)
{
	char *s = NULL;
	size_t len = 0, cap = 0;
	if (!append(&s, &len, &cap, "%s", ""))
		return NULL;
	for (size_t i = 0; i < n;) {
		size_t plen, pl2;
		unsigned long long v, v2;
		int w, w2;
		const char *sep = i ? "," : "";

		/* The run of names i..j-1 sharing a prefix and a number width. */
		size_t j = i + 1;
		if (split_number(names[i], &plen, &v, &w)) {
			while (j < n && split_number(names[j], &pl2, &v2, &w2) && pl2 == plen &&
			       w2 == w && strncmp(names[i], names[j], plen) == 0)
				j++;
		}
		if (j == i + 1) {
			if (!append(&s, &len, &cap, "%s%s", sep, names[i]))
				return NULL;
			i++;
			continue;
		}
		if (!append(&s, &len, &cap, "%s%.*s[", sep, (int)plen, names[i]))
			return NULL;
		for (size_t k = i; k < j;) {
			split_number(names[k], &plen, &v, &w);
			size_t e = k + 1;
			while (e < j && split_number(names[e], &pl2, &v2, &w2) && v2 == v + (e - k))
				e++;
			const char *comma = k > i ? "," : "";
			bool ok = e - k == 1 ? append(&s, &len, &cap, "%s%0*llu", comma, w, v)
			                     : append(&s, &len, &cap, "%s%0*llu-%0*llu", comma, w,
			                              v, w, v + (e - k - 1));
			if (!ok)
				return NULL;
			k = e;
		}
		if (!append(&s, &len, &cap, "]"))
			return NULL;
		i = j;
	}
	return s;
}
