#include "client.h"

#include <curl/curl.h>
#include <errno.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

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

/* The options every request shares; the handle was reset before. */
static struct curl_slist *setup(struct client *c, const char *path, struct sink *k,
                                const char *accept, bool has_body)
{
	struct curl_slist *h = NULL, *t;
	char *url = malloc(strlen(c->base) + strlen(path) + 1);
	if (!url)
		return NULL;
	strcpy(url, c->base);
	strcat(url, path);
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
	c->errbuf[0] = '\0';

	/* No "Expect: 100-continue" round trip before a large topology. */
	t = curl_slist_append(h, "Expect:");
	if (t)
		h = t;
	t = t ? curl_slist_append(h, accept) : NULL;
	if (t)
		h = t;
	if (t && has_body)
		t = curl_slist_append(h, "Content-Type: application/json");
	if (!t) {
		curl_slist_free_all(h);
		return NULL;
	}
	curl_easy_setopt(c->curl, CURLOPT_HTTPHEADER, h);
	return h;
}

/* Runs the prepared transfer and turns its outcome into 0 / -EIO / -ECANCELED. */
static int perform(struct client *c, struct sink *k, char *err, size_t errlen)
{
	struct client_reply *r = k->r;
	CURLcode cc = curl_easy_perform(c->curl);
	curl_easy_getinfo(c->curl, CURLINFO_RESPONSE_CODE, &r->status);
	if (!r->body && !collect(r, "", 0))
		cc = cc == CURLE_OK ? CURLE_OUT_OF_MEMORY : cc;
	if (k->cancelled)
		return -ECANCELED;
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

int client_request(struct client *c, const char *method, const char *path, const char *body,
                   long timeout_ms, struct client_reply *r, char *err, size_t errlen)
{
	struct sink k = { .c = c, .r = r };
	curl_easy_reset(c->curl);
	struct curl_slist *h = setup(c, path, &k, "Accept: application/json", body != NULL);
	if (!h) {
		snprintf(err, errlen, "out of memory");
		return -EIO;
	}
	/* POST is what a body implies; anything else but GET is named. */
	if (strcmp(method, "GET") == 0)
		curl_easy_setopt(c->curl, CURLOPT_HTTPGET, 1L);
	else if (strcmp(method, "POST") != 0 || !body)
		curl_easy_setopt(c->curl, CURLOPT_CUSTOMREQUEST, method);
	if (body) {
		curl_easy_setopt(c->curl, CURLOPT_POSTFIELDS, body);
		curl_easy_setopt(c->curl, CURLOPT_POSTFIELDSIZE_LARGE, (curl_off_t)strlen(body));
	}
	curl_easy_setopt(c->curl, CURLOPT_TIMEOUT_MS, timeout_ms);
	int rc = perform(c, &k, err, errlen);
	curl_slist_free_all(h);
	return rc;
}

int client_stream(struct client *c, const char *path, client_chunk_fn fn, void *arg,
                  struct client_reply *r, char *err, size_t errlen)
{
	struct sink k = { .c = c, .r = r, .fn = fn, .arg = arg };
	curl_easy_reset(c->curl);
	struct curl_slist *h = setup(c, path, &k, "Accept: text/event-stream", false);
	if (!h) {
		snprintf(err, errlen, "out of memory");
		return -EIO;
	}
	curl_easy_setopt(c->curl, CURLOPT_HTTPGET, 1L);
	int rc = perform(c, &k, err, errlen);
	curl_slist_free_all(h);
	return rc;
}
