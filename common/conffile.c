#include "conffile.h"

#include <errno.h>
#include <ini.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int conffile_uint(const char *value, unsigned long long min, unsigned long long max,
                  unsigned long long *out, char *err, size_t errlen)
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
	snprintf(err, errlen, "expected a whole number from %llu to %llu, got \"%s\"", min, max,
	         value);
	return -EINVAL;
}

int conffile_bool(const char *value, bool *out, char *err, size_t errlen)
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

static const struct conffile_key *find_key(const struct conffile *c, const char *section,
                                           const char *name, bool *known_sect)
{
	*known_sect = false;
	for (size_t i = 0; i < c->nkeys; i++) {
		const struct conffile_key *k = &c->keys[i];
		if (strcmp(k->section, section) != 0)
			continue;
		*known_sect = true;
		size_t klen = strlen(k->key);
		if (k->key[klen - 1] == '.' ? strncmp(k->key, name, klen) == 0
		                            : strcmp(k->key, name) == 0)
			return k;
	}
	return NULL;
}

static int handler(void *user, const char *section, const char *name, const char *value)
{
	struct conffile *c = user;
	bool known_sect;
	const struct conffile_key *k = find_key(c, section, name, &known_sect);
	char why[400] = "";

	if (c->err[0])
		return 0;      /* keep only the first error */
	c->err_line = c->line; /* meaningful only once err is set below */
	if (!known_sect) {
		snprintf(c->err, sizeof(c->err), "[%s] %s: unknown section", section, name);
		return 0;
	}
	if (!k) {
		snprintf(c->err, sizeof(c->err), "[%s] %s: unknown key", section, name);
		return 0;
	}
	size_t idx = (size_t)(k - c->keys);
	bool prefix = k->key[strlen(k->key) - 1] == '.';
	if (!prefix && c->seen[idx]) {
		snprintf(c->err, sizeof(c->err), "[%s] %s: key given twice", section, name);
		return 0;
	}
	c->seen[idx] = true;
	if (k->parse(c->cfg, name, value, why, sizeof(why)) < 0) {
		snprintf(c->err, sizeof(c->err), "[%s] %s: %s", section, name, why);
		return 0;
	}
	return 1;
}

/*
 * libinih reports the line of its first error, which may be a syntax error
 * before the first key the handler refused: the reader counts lines so the
 * handler's message gets its own line.
 */
struct reader {
	struct conffile *c;
	FILE *f;
	const char *text;
	bool at_line_start;
};

static char *read_line(char *str, int num, void *stream)
{
	struct reader *rd = stream;
	char *res = NULL;
	if (num < 2)
		return NULL;
	if (rd->f) {
		res = fgets(str, num, rd->f);
	} else if (*rd->text) {
		int n = 0;
		while (n < num - 1 && rd->text[n] && (n == 0 || rd->text[n - 1] != '\n'))
			n++;
		memcpy(str, rd->text, (size_t)n);
		str[n] = '\0';
		rd->text += n;
		res = str;
	}
	if (!res)
		return NULL;
	if (rd->at_line_start)
		rd->c->line++;
	size_t len = strlen(res);
	rd->at_line_start = len && res[len - 1] == '\n';
	return res;
}

int conffile_load(struct conffile *c, const char *path, const char *text, const char *name,
                  char *err, size_t errlen)
{
	int rc;
	if (c->nkeys > CONFFILE_MAX_KEYS) {
		snprintf(err, errlen, "%s: too many configuration keys", name);
		return -EINVAL;
	}
	struct reader rd = { .c = c, .text = text, .at_line_start = true };
	if (!text) {
		errno = 0;
		rd.f = fopen(path, "r");
		if (!rd.f) {
			snprintf(err, errlen, "%s: cannot open: %s", name, strerror(errno));
			return -ENOENT;
		}
	}
	rc = ini_parse_stream(read_line, &rd, handler, c);
	if (rd.f)
		fclose(rd.f);
	if (rc == -2) {
		snprintf(err, errlen, "%s: out of memory", name);
		return -ENOMEM;
	}
	if (rc > 0) {
		if (c->err[0] && c->err_line == rc)
			snprintf(err, errlen, "%s:%d: %s", name, rc, c->err);
		else
			snprintf(err, errlen,
			         "%s:%d: syntax error (expected [section] or key = value)", name,
			         rc);
		return -EINVAL;
	}
	return 0;
}

bool conffile_seen(const struct conffile *c, conffile_parse_fn fn)
{
	for (size_t i = 0; i < c->nkeys; i++)
		if (c->keys[i].parse == fn && c->seen[i])
			return true;
	return false;
}
