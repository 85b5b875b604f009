#include "settings.h"

#include <ctype.h>
#include <errno.h>
#include <ini.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* One file being read: where its values go and the first error met. */
struct load {
	struct settings *s;
	char err[512];
};

/* text as a retry in seconds into *out; false when it is not one. */
static bool parse_retry(const char *text, double *out)
{
	char *end;
	double v = strtod(text, &end);
	if (end == text || *end || !isfinite(v) || v < 0 || v > SETTINGS_RETRY_MAX)
		return false;
	*out = v;
	return true;
}

static int on_key(void *user, const char *section, const char *name, const char *value)
{
	struct load *l = user;
	char *dst;
	if (l->err[0])
		return 0;
	if (strcmp(section, "ofcctl") != 0) {
		snprintf(l->err, sizeof(l->err), "unknown section [%s]", section);
		return 0;
	}
	if (strcmp(name, "insecure") == 0) {
		if (strcmp(value, "true") != 0 && strcmp(value, "false") != 0) {
			snprintf(l->err, sizeof(l->err), "[ofcctl] insecure: true or false");
			return 0;
		}
		l->s->insecure = strcmp(value, "true") == 0;
		return 1;
	}
	if (strcmp(name, "retry") == 0) {
		if (!parse_retry(value, &l->s->retry_s)) {
			snprintf(l->err, sizeof(l->err), "[ofcctl] retry: seconds from 0 to %.0f",
			         SETTINGS_RETRY_MAX);
			return 0;
		}
		return 1;
	}
	if (strcmp(name, "url") == 0)
		dst = l->s->url;
	else if (strcmp(name, "token_file") == 0)
		dst = l->s->token_file;
	else if (strcmp(name, "cacert") == 0)
		dst = l->s->cacert;
	else {
		snprintf(l->err, sizeof(l->err), "[ofcctl] %s: unknown key", name);
		return 0;
	}
	if (strlen(value) >= SETTINGS_LEN) {
		snprintf(l->err, sizeof(l->err), "[ofcctl] %s: value too long", name);
		return 0;
	}
	strcpy(dst, value);
	return 1;
}

/* Reads one file over s; a file that does not exist is no error. */
static int load_file(struct settings *s, const char *path, char *err, size_t errlen)
{
	FILE *f = fopen(path, "r");
	if (!f) {
		if (errno == ENOENT || errno == ENOTDIR)
			return 0;
		snprintf(err, errlen, "%s: %s", path, strerror(errno));
		return -EINVAL;
	}
	struct load l = { .s = s };
	int line = ini_parse_file(f, on_key, &l);
	fclose(f);
	if (line == 0)
		return 0;
	snprintf(err, errlen, "%s:%d: %s", path, line,
	         l.err[0]   ? l.err
	         : line < 0 ? "out of memory"
	                    : "not an INI line");
	return -EINVAL;
}

/* Copies value into dst when it is set and not empty. */
static int take(char *dst, const char *value, const char *what, char *err, size_t errlen)
{
	if (!value || !value[0])
		return 0;
	if (strlen(value) >= SETTINGS_LEN) {
		snprintf(err, errlen, "%s is too long", what);
		return -EINVAL;
	}
	strcpy(dst, value);
	return 0;
}

int settings_resolve(struct settings *s, const struct settings_flags *flags, char *err,
                     size_t errlen)
{
	char user[SETTINGS_LEN] = "";
	const char *xdg = getenv("XDG_CONFIG_HOME"), *home = getenv("HOME");
	int rc;

	memset(s, 0, sizeof(*s));
	strcpy(s->url, SETTINGS_DEFAULT_URL);
	if (xdg && xdg[0])
		snprintf(user, sizeof(user), "%s/ofcctl.ini", xdg);
	else if (home && home[0])
		snprintf(user, sizeof(user), "%s/.config/ofcctl.ini", home);
	if ((rc = load_file(s, OFCCTL_SYSTEM_INI, err, errlen)))
		return rc;
	if (user[0] && (rc = load_file(s, user, err, errlen)))
		return rc;
	/* curl's own variables, below ofcctl's. */
	if ((rc = take(s->cacert, getenv("SSL_CERT_FILE"), "SSL_CERT_FILE", err, errlen)) ||
	    (rc = take(s->cacert, getenv("CURL_CA_BUNDLE"), "CURL_CA_BUNDLE", err, errlen)) ||
	    (rc = take(s->url, getenv("OFCCTL_URL"), "OFCCTL_URL", err, errlen)) ||
	    (rc = take(s->token_file, getenv("OFCCTL_TOKEN_FILE"), "OFCCTL_TOKEN_FILE", err,
	               errlen)) ||
	    (rc = take(s->cacert, getenv("OFCCTL_CACERT"), "OFCCTL_CACERT", err, errlen)) ||
	    (rc = take(s->url, flags->url, "--url", err, errlen)) ||
	    (rc = take(s->token_file, flags->token_file, "--token-file", err, errlen)) ||
	    (rc = take(s->cacert, flags->cacert, "--cacert", err, errlen)))
		return rc;
	const char *insecure = getenv("OFCCTL_INSECURE");
	if (insecure && insecure[0])
		s->insecure = strcmp(insecure, "0") != 0 && strcmp(insecure, "false") != 0;
	if (flags->insecure)
		s->insecure = true;
	const char *retry[][2] = { { getenv("OFCCTL_RETRY"), "OFCCTL_RETRY" },
		                   { flags->retry, "--retry" } };
	for (size_t i = 0; i < 2; i++) {
		if (retry[i][0] && retry[i][0][0] && !parse_retry(retry[i][0], &s->retry_s)) {
			snprintf(err, errlen, "%s: seconds from 0 to %.0f, got \"%s\"", retry[i][1],
			         SETTINGS_RETRY_MAX, retry[i][0]);
			return -EINVAL;
		}
	}
	for (const char *p = s->url;; p++) {
		size_t len = strcspn(p, ",");
		if (strspn(p, " \t/") >= len) {
			snprintf(err, errlen,
			         s->url[0] ? "the daemon's URL list \"%s\" has an empty member"
			                   : "the daemon's URL is empty",
			         s->url);
			return -EINVAL;
		}
		if (!(p = strchr(p, ',')))
			return 0;
	}
}

int settings_read_token(const char *path, char **token, char *err, size_t errlen)
{
	char line[4096];
	FILE *f = fopen(path, "r");
	if (!f) {
		int e = errno;
		snprintf(err, errlen, "token file %s: %s", path, strerror(e));
		return -e;
	}
	if (!fgets(line, sizeof(line), f))
		line[0] = '\0';
	fclose(f);
	char *p = line;
	while (isspace((unsigned char)*p))
		p++;
	size_t len = strlen(p);
	while (len > 0 && isspace((unsigned char)p[len - 1]))
		p[--len] = '\0';
	if (len == 0) {
		snprintf(err, errlen, "token file %s is empty", path);
		return -EINVAL;
	}
	*token = strdup(p);
	explicit_bzero(line, sizeof(line));
	if (!*token) {
		snprintf(err, errlen, "out of memory");
		return -ENOMEM;
	}
	return 0;
}
