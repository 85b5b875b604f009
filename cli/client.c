#include "client.h"

#include <curl/curl.h>
#include <jansson.h>
#include <errno.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "version.h"

/* Connecting is quick on any network ofcd runs on; a refused or dead host is reported fast. */
#define CONNECT_TIMEOUT_MS 5000L

struct client {
	CURL *curl;
	char *base;   /* the URL without a trailing '/' */
	char *token;  /* bearer secret, or NULL */
	char *cacert; /* CA file, or NULL for the system's */
	bool insecure;
	char errbuf[CURL_ERROR_SIZE];
};

/* Where a response goes: collected into a reply, or streamed to a callback when 200. */
struct sink {
	struct client *c;
	struct client_reply *r;
	client_chunk_fn fn; /* NULL: collect everything */
	void *arg;
	const volatile sig_atomic_t *stop;
	bool cancelled;
	bool too_big;
};

struct client *client_new(const char *url, const char *token, const struct client_tls *tls,
                          char *err, size_t errlen)
{
	static bool global_done;
	struct client *c = calloc(1, sizeof(*c));
	if (!c)
		goto nomem;
	if (!global_done && curl_global_init(CURL_GLOBAL_DEFAULT) != CURLE_OK) {
		snprintf(err, errlen, "libcurl failed to initialise");
		free(c);
		return NULL;
	}
	global_done = true;
	c->curl = curl_easy_init();
	c->base = strdup(url);
	c->token = token ? strdup(token) : NULL;
	bool cacert = tls && tls->cacert && tls->cacert[0];
	c->cacert = cacert ? strdup(tls->cacert) : NULL;
	c->insecure = tls && tls->insecure;
	if (!c->curl || !c->base || (token && !c->token) || (cacert && !c->cacert)) {
		client_free(c);
		goto nomem;
	}
	size_t len = strlen(c->base);
	while (len > 0 && c->base[len - 1] == '/')
		c->base[--len] = '\0';
	return c;
nomem:
	snprintf(err, errlen, "out of memory");
	return NULL;
}

struct client *client_clone(const struct client *c, char *err, size_t errlen)
{
	struct client_tls tls = { .cacert = c->cacert, .insecure = c->insecure };
	return client_new(c->base, c->token, &tls, err, errlen);
}

void client_free(struct client *c)
{
	if (!c)
		return;
	if (c->curl)
		curl_easy_cleanup(c->curl);
	free(c->base);
	free(c->cacert);
	if (c->token) {
		/* The secret does not outlive its use in this process's memory. */
		explicit_bzero(c->token, strlen(c->token));
		free(c->token);
	}
	free(c);
}

char *client_escape(struct client *c, const char *s)
{
	char *e = curl_easy_escape(c->curl, s, 0);
	char *copy = e ? strdup(e) : NULL;
	curl_free(e);
	return copy;
}

void client_reply_free(struct client_reply *r)
{
	free(r->body);
	json_decref(r->json);
	memset(r, 0, sizeof(*r));
}

static bool collect(struct client_reply *r, const char *data, size_t n)
{
	if (r->len + n > CLIENT_MAX_BODY)
		return false;
	char *b = realloc(r->body, r->len + n + 1);
	if (!b)
		return false;
	memcpy(b + r->len, data, n);
	r->body = b;
	r->len += n;
	r->body[r->len] = '\0';
	return true;
}

static size_t on_data(char *data, size_t size, size_t nmemb, void *user)
{
	struct sink *k = user;
	size_t n = size * nmemb;
	long status = 0;
	curl_easy_getinfo(k->c->curl, CURLINFO_RESPONSE_CODE, &status);
	if (k->fn && status == 200) {
		if (k->fn(data, n, k->arg)) {
			k->cancelled = true;
			return CURL_WRITEFUNC_ERROR;
		}
		return n;
	}
	if (!collect(k->r, data, n)) {
		k->too_big = true;
		return CURL_WRITEFUNC_ERROR;
	}
	return n;
}

/* Keeps the ETag of the last response: a redirect's own headers come first. */
static size_t on_header(char *data, size_t size, size_t nmemb, void *user)
{
	struct sink *k = user;
	size_t n = size * nmemb;
	if (n >= 5 && strncmp(data, "HTTP/", 5) == 0)
		k->r->etag[0] = '\0';
	else if (n > 5 && strncasecmp(data, "etag:", 5) == 0) {
		const char *v = data + 5, *end = data + n;
		while (v < end && (*v == ' ' || *v == '\t'))
			v++;
		while (end > v && strchr(" \t\r\n", end[-1]))
			end--;
		snprintf(k->r->etag, sizeof(k->r->etag), "%.*s", (int)(end - v), v);
	}
	return n;
}

static int on_progress(void *user, curl_off_t dltotal, curl_off_t dlnow, curl_off_t ultotal,
                       curl_off_t ulnow)
{
	const struct sink *k = user;
	(void)dltotal;
	(void)dlnow;
	(void)ultotal;
	(void)ulnow;
	return k->stop && *k->stop;
}

/* Appends "name: value" to the header list *h; false when out of memory. */
static bool add_header(struct curl_slist **h, const char *name, const char *value)
{
	char *line = NULL;
	if (asprintf(&line, "%s: %s", name, value) < 0)
		return false;
	struct curl_slist *t = curl_slist_append(*h, line);
	free(line);
	if (t)
		*h = t;
	return t != NULL;
}

/* The options every request shares; the handle was reset before. */
static struct curl_slist *setup(struct client *c, const struct client_req *q, struct sink *k)
{
	struct curl_slist *h = NULL;
	char *url = malloc(strlen(c->base) + strlen(q->path) + 1);
	if (!url)
		return NULL;
	strcpy(url, c->base);
	strcat(url, q->path);
	curl_easy_setopt(c->curl, CURLOPT_URL, url); /* libcurl copies it */
	free(url);
	curl_easy_setopt(c->curl, CURLOPT_PROTOCOLS_STR, "http,https");
	curl_easy_setopt(c->curl, CURLOPT_REDIR_PROTOCOLS_STR, "http,https");
	/*
	 * A 307 keeps the method and body. The token goes with libcurl's own
	 * bearer auth rather than a raw header: libcurl then sends it to the
	 * original host and port only (UNRESTRICTED_AUTH stays off).
	 */
	curl_easy_setopt(c->curl, CURLOPT_FOLLOWLOCATION, 1L);
	curl_easy_setopt(c->curl, CURLOPT_MAXREDIRS, 5L);
	curl_easy_setopt(c->curl, CURLOPT_UNRESTRICTED_AUTH, 0L);
	if (c->token) {
		curl_easy_setopt(c->curl, CURLOPT_HTTPAUTH, CURLAUTH_BEARER);
		curl_easy_setopt(c->curl, CURLOPT_XOAUTH2_BEARER, c->token);
	}
	if (c->cacert)
		curl_easy_setopt(c->curl, CURLOPT_CAINFO, c->cacert);
	if (c->insecure) {
		curl_easy_setopt(c->curl, CURLOPT_SSL_VERIFYPEER, 0L);
		curl_easy_setopt(c->curl, CURLOPT_SSL_VERIFYHOST, 0L);
	}
	curl_easy_setopt(c->curl, CURLOPT_USERAGENT, "ofcctl/" OFCD_VERSION);
	curl_easy_setopt(c->curl, CURLOPT_CONNECTTIMEOUT_MS, CONNECT_TIMEOUT_MS);
	curl_easy_setopt(c->curl, CURLOPT_NOSIGNAL, 1L);
	curl_easy_setopt(c->curl, CURLOPT_ERRORBUFFER, c->errbuf);
	curl_easy_setopt(c->curl, CURLOPT_WRITEFUNCTION, on_data);
	curl_easy_setopt(c->curl, CURLOPT_WRITEDATA, k);
	curl_easy_setopt(c->curl, CURLOPT_HEADERFUNCTION, on_header);
	curl_easy_setopt(c->curl, CURLOPT_HEADERDATA, k);
	if (k->stop) {
		curl_easy_setopt(c->curl, CURLOPT_XFERINFOFUNCTION, on_progress);
		curl_easy_setopt(c->curl, CURLOPT_XFERINFODATA, k);
		curl_easy_setopt(c->curl, CURLOPT_NOPROGRESS, 0L);
	}
	c->errbuf[0] = '\0';

	/* "Expect:" empty: no 100-continue round trip before a large topology. */
	h = curl_slist_append(NULL, "Expect:");
	bool ok = h && add_header(&h, "Accept", q->accept ? q->accept : "application/json") &&
	          (!q->body || add_header(&h, "Content-Type", "application/json")) &&
	          (!q->if_match || add_header(&h, "If-Match", q->if_match)) &&
	          (!q->last_event_id || add_header(&h, "Last-Event-ID", q->last_event_id));
	if (!ok) {
		curl_slist_free_all(h);
		return NULL;
	}
	curl_easy_setopt(c->curl, CURLOPT_HTTPHEADER, h);
	return h;
}

/* Runs the prepared transfer and turns its outcome into 0 / -EIO / -ECANCELED / -EINTR. */
static int perform(struct client *c, struct sink *k, char *err, size_t errlen)
{
	struct client_reply *r = k->r;
	CURLcode cc = curl_easy_perform(c->curl);
	curl_easy_getinfo(c->curl, CURLINFO_RESPONSE_CODE, &r->status);
	if (!r->body && !collect(r, "", 0))
		cc = cc == CURLE_OK ? CURLE_OUT_OF_MEMORY : cc;
	if (k->cancelled)
		return -ECANCELED;
	if (cc == CURLE_ABORTED_BY_CALLBACK && k->stop && *k->stop)
		return -EINTR;
	if (k->too_big) {
		snprintf(err, errlen, "the reply is over %u bytes or memory ran out",
		         CLIENT_MAX_BODY);
		return -EIO;
	}
	if (cc != CURLE_OK) {
		snprintf(err, errlen, "%s", c->errbuf[0] ? c->errbuf : curl_easy_strerror(cc));
		return -EIO;
	}
	r->json = json_loadb(r->body, r->len, 0, NULL);
	return 0;
}

static int send_once(struct client *c, const struct client_req *q, struct client_reply *r,
                     char *err, size_t errlen);

/* scheme://host:port of url into out (len bytes); false when it has none. */
static bool origin_of(const char *url, char *out, size_t len)
{
	const char *host = url ? strstr(url, "://") : NULL;
	if (!host)
		return false;
	size_t n = strcspn(host + 3, "/?#") + (size_t)(host + 3 - url);
	if (n >= len)
		return false;
	memcpy(out, url, n);
	out[n] = '\0';
	return true;
}

/*
 * The member of the cluster at base whose advertise URL is origin, malloc'd, or NULL:
 * a redirect there is to a member the client was given, through the one it was given.
 */
static char *cluster_member(struct client *c, const char *origin)
{
	struct client_reply r = { 0 };
	struct client_req q = { .path = "/v1/cluster", .timeout_ms = 10000 };
	char err[256], adv[512];
	char *found = NULL;
	if (send_once(c, &q, &r, err, sizeof(err)) == 0 && r.status == 200) {
		/* The leader first: the members' list may not show it yet. */
		const char *a = json_string_value(json_object_get(r.json, "leader_advertise"));
		if (origin_of(a, adv, sizeof(adv)) && strcmp(adv, origin) == 0)
			found = strdup(adv);
		size_t i;
		json_t *m;
		json_array_foreach(json_object_get(r.json, "members"), i, m)
		{
			a = json_string_value(json_object_get(m, "advertise"));
			if (!found && origin_of(a, adv, sizeof(adv)) && strcmp(adv, origin) == 0)
				found = strdup(adv);
		}
	}
	client_reply_free(&r);
	return found;
}

int client_send(struct client *c, const struct client_req *q, struct client_reply *r, char *err,
                size_t errlen)
{
	int rc = send_once(c, q, r, err, errlen);
	long redirects = 0;
	const char *last = NULL;
	char origin[512];
	curl_easy_getinfo(c->curl, CURLINFO_REDIRECT_COUNT, &redirects);
	curl_easy_getinfo(c->curl, CURLINFO_EFFECTIVE_URL, &last);
	/*
	 * libcurl sends the token to the host it was given only, so a write that a follower
	 * redirects reaches the leader without it (401). A leader the given member names in
	 * its cluster is sent the request again, with the token, and so is every later one.
	 */
	if (rc != 0 || r->status != 401 || !c->token || redirects == 0 ||
	    !origin_of(last, origin, sizeof(origin)))
		return rc;
	char *member = cluster_member(c, origin);
	if (!member)
		return rc;
	free(c->base);
	c->base = member;
	client_reply_free(r);
	return send_once(c, q, r, err, errlen);
}

static int send_once(struct client *c, const struct client_req *q, struct client_reply *r,
                     char *err, size_t errlen)
{
	const char *method = q->method ? q->method : "GET";
	struct sink k = { .c = c, .r = r, .fn = q->fn, .arg = q->arg, .stop = q->stop };
	curl_easy_reset(c->curl);
	struct curl_slist *h = setup(c, q, &k);
	if (!h) {
		snprintf(err, errlen, "out of memory");
		return -EIO;
	}
	/* POST is what a body implies; anything else but GET is named. */
	if (strcmp(method, "GET") == 0)
		curl_easy_setopt(c->curl, CURLOPT_HTTPGET, 1L);
	else if (strcmp(method, "POST") != 0 || !q->body)
		curl_easy_setopt(c->curl, CURLOPT_CUSTOMREQUEST, method);
	if (q->body) {
		curl_easy_setopt(c->curl, CURLOPT_POSTFIELDS, q->body);
		curl_easy_setopt(c->curl, CURLOPT_POSTFIELDSIZE_LARGE, (curl_off_t)strlen(q->body));
	}
	curl_easy_setopt(c->curl, CURLOPT_TIMEOUT_MS, q->timeout_ms);
	int rc = perform(c, &k, err, errlen);
	curl_slist_free_all(h);
	return rc;
}
