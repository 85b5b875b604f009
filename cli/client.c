#include "client.h"

#include <curl/curl.h>
#include <jansson.h>
#include <errno.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>

#include "version.h"

/* Connecting is quick on any network ofcd runs on; a refused or dead host is reported fast. */
#define CONNECT_TIMEOUT_MS 5000L

/* How long a member of several may take to answer its health probe before the next is tried. */
#define PROBE_TIMEOUT_MS 2000L

/* The pause after a round of members that took nothing: doubled each round up to the most. */
#define RESEND_FIRST_MS 100L
#define RESEND_MAX_MS   1000L

struct client {
	CURL *curl;      /* the handle of the request under way or last sent */
	CURL *reads;     /* the handle reads go through, its connections kept */
	char *base;      /* where requests go now, without a trailing '/' */
	char **members;  /* the URLs given, in order, each without a trailing '/' */
	size_t nmembers; /* at least one */
	size_t at;       /* the member base was taken from */
	double retry_s;  /* how long a request no member took is sent again */
	char *token;     /* bearer secret, or NULL */
	char *cacert;    /* CA file, or NULL for the system's */
	bool insecure;
	bool told;    /* the note that requests are being sent again was printed */
	bool probed;  /* the member at base answered a health probe */
	CURLcode cc;  /* how the last transfer ended */
	bool exposed; /* it sent a request that no redirect answered: a daemon may have it */
	char errbuf[CURL_ERROR_SIZE]; /* libcurl's words for it */
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
	bool exposed; /* request headers went out since the last redirect came back */
};

/* The comma-separated URLs of list into c->members, trimmed; false when out of memory. */
static bool split_members(struct client *c, const char *list)
{
	size_t n = 1;
	for (const char *p = list; *p; p++)
		n += *p == ',';
	if (!(c->members = calloc(n, sizeof(*c->members))))
		return false;
	for (const char *p = list;; p++) {
		p += strspn(p, " \t");
		size_t len = strcspn(p, ",");
		while (len > 0 && strchr(" \t/", p[len - 1]))
			len--;
		if (!(c->members[c->nmembers++] = strndup(p, len)))
			return false;
		if (!(p = strchr(p, ',')))
			return true;
	}
}

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
	if (!split_members(c, url)) {
		client_free(c);
		goto nomem;
	}
	c->curl = c->reads = curl_easy_init();
	c->base = strdup(c->members[0]);
	c->token = token ? strdup(token) : NULL;
	bool cacert = tls && tls->cacert && tls->cacert[0];
	c->cacert = cacert ? strdup(tls->cacert) : NULL;
	c->insecure = tls && tls->insecure;
	if (!c->curl || !c->base || (token && !c->token) || (cacert && !c->cacert)) {
		client_free(c);
		goto nomem;
	}
	return c;
nomem:
	snprintf(err, errlen, "out of memory");
	return NULL;
}

void client_set_retry(struct client *c, double seconds)
{
	c->retry_s = seconds;
}

struct client *client_clone(const struct client *c, char *err, size_t errlen)
{
	size_t len = 0;
	for (size_t i = 0; i < c->nmembers; i++)
		len += strlen(c->members[i]) + 1;
	char *list = malloc(len), *base = strdup(c->base);
	struct client *d = NULL;
	if (list && base) {
		list[0] = '\0';
		for (size_t i = 0; i < c->nmembers; i++)
			strcat(strcat(list, i ? "," : ""), c->members[i]);
		struct client_tls tls = { .cacert = c->cacert, .insecure = c->insecure };
		d = client_new(list, c->token, &tls, err, errlen);
	} else {
		snprintf(err, errlen, "out of memory");
	}
	free(list);
	if (!d) {
		free(base);
		return NULL;
	}
	/* Where c found a member answering. */
	free(d->base);
	d->base = base;
	d->at = c->at;
	d->retry_s = c->retry_s;
	d->told = c->told;
	d->probed = c->probed;
	return d;
}

void client_free(struct client *c)
{
	if (!c)
		return;
	if (c->curl && c->curl != c->reads)
		curl_easy_cleanup(c->curl);
	if (c->reads)
		curl_easy_cleanup(c->reads);
	free(c->base);
	for (size_t i = 0; i < c->nmembers; i++)
		free(c->members[i]);
	free(c->members);
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
	if (n >= 5 && strncmp(data, "HTTP/", 5) == 0) {
		k->r->etag[0] = '\0';
		/* A redirect: the host that had the request did nothing with it. */
		const char *code = memchr(data, ' ', n);
		if (code && code + 1 < data + n && code[1] == '3')
			k->exposed = false;
	} else if (n > 5 && strncasecmp(data, "etag:", 5) == 0) {
		const char *v = data + 5, *end = data + n;
		while (v < end && (*v == ' ' || *v == '\t'))
			v++;
		while (end > v && strchr(" \t\r\n", end[-1]))
			end--;
		snprintf(k->r->etag, sizeof(k->r->etag), "%.*s", (int)(end - v), v);
	}
	return n;
}

/* Notes each request that goes out, the one libcurl may send again by itself included. */
static int on_debug(CURL *curl, curl_infotype type, char *data, size_t size, void *user)
{
	struct sink *k = user;
	(void)curl;
	(void)data;
	(void)size;
	if (type == CURLINFO_HEADER_OUT)
		k->exposed = true;
	return 0;
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
	curl_easy_setopt(c->curl, CURLOPT_DEBUGFUNCTION, on_debug);
	curl_easy_setopt(c->curl, CURLOPT_DEBUGDATA, k);
	curl_easy_setopt(c->curl, CURLOPT_VERBOSE, 1L); /* for on_debug only: it prints nothing */
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
	c->cc = cc;
	c->exposed = k->exposed;
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

/* Sends q to c->base, following redirects, and to the leader with the token after a 401. */
static int send_to_member(struct client *c, const struct client_req *q, struct client_reply *r,
                          char *err, size_t errlen)
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

/*
 * Why q, which ended in rc and r, may go to another member or again: "" when not. Only
 * what changed nothing qualifies: a write that reached no daemon (no connection, or only
 * a redirect's host had it), ofcd's 503s that refuse a change (no leader, no etcd quorum,
 * draining, full), and a read that failed before any of a stream was handed on.
 */
static const char *resendable(const struct client *c, const struct client_req *q, int rc,
                              const struct client_reply *r)
{
	static const char *const refusals[] = { "not_leader", "store_unavailable", "shutting_down",
		                                "overloaded" };
	if (rc == -EIO) {
		CURLcode cc = c->cc;
		bool read = !q->method || strcmp(q->method, "GET") == 0;
		bool unconnected = cc == CURLE_COULDNT_CONNECT ||
		                   cc == CURLE_COULDNT_RESOLVE_HOST ||
		                   cc == CURLE_OPERATION_TIMEDOUT;
		bool cut = cc == CURLE_GOT_NOTHING || cc == CURLE_RECV_ERROR ||
		           cc == CURLE_SEND_ERROR || cc == CURLE_PARTIAL_FILE;
		if (read)
			return (unconnected || cut) && (!q->fn || r->status == 0) ? "unreachable"
			                                                          : "";
		return unconnected && !c->exposed ? "unreachable" : "";
	}
	const char *code =
	    json_string_value(json_object_get(json_object_get(r->json, "error"), "code"));
	for (size_t i = 0; rc == 0 && r->status == 503 && code && i < 4; i++)
		if (strcmp(code, refusals[i]) == 0)
			return refusals[i];
	return "";
}

static double now_s(void)
{
	struct timespec t;
	clock_gettime(CLOCK_MONOTONIC, &t);
	return (double)t.tv_sec + t.tv_nsec / 1e9;
}

/* Sleeps ms milliseconds, or less when *stop becomes non-zero; false when it did. */
static bool pause_unless_stopped(long ms, const volatile sig_atomic_t *stop)
{
	for (; ms > 0 && !(stop && *stop); ms -= 100) {
		struct timespec t = { 0, (ms < 100 ? ms : 100) * 1000000L };
		nanosleep(&t, NULL);
	}
	return !(stop && *stop);
}

/*
 * c->base to the next member given: the one after the member it was taken from, or that
 * member when a 401 took c to its leader. False when out of memory.
 */
static bool next_member(struct client *c)
{
	size_t at = strcmp(c->base, c->members[c->at]) == 0 ? (c->at + 1) % c->nmembers : c->at;
	char *base = strdup(c->members[at]);
	if (!base)
		return false;
	free(c->base);
	c->base = base;
	c->at = at;
	c->probed = false;
	return true;
}

/*
 * Whether the member at base answers, when several are given: asked once, of
 * /v1/health with a short timeout (or until *stop), before the first request
 * goes there. A member that is frozen (a paused machine, a stopped process)
 * takes connections and answers nothing: a request sent there would wait out
 * its whole timeout, and a write's outcome would then be unknown. False with
 * the reason in err.
 */
static bool member_answers(struct client *c, const volatile sig_atomic_t *stop, char *err,
                           size_t errlen)
{
	if (c->nmembers < 2 || c->probed)
		return true;
	struct client_req q = { .path = "/v1/health",
		                .timeout_ms = PROBE_TIMEOUT_MS,
		                .stop = stop };
	struct client_reply r = { 0 };
	int rc = send_once(c, &q, &r, err, errlen);
	c->probed = rc == 0 && r.status == 200;
	if (rc == 0 && !c->probed)
		snprintf(err, errlen, "its health probe answered %ld", r.status);
	client_reply_free(&r);
	return c->probed;
}

int client_send(struct client *c, const struct client_req *q, struct client_reply *r, char *err,
                size_t errlen)
{
	double deadline = now_s() + c->retry_s;
	long pause = RESEND_FIRST_MS;
	struct client_reply refused = { 0 }; /* the last refusal a member answered */
	int rc;
	for (size_t tried = 1;; tried++) {
		const char *why = "";
		bool round_done = tried % c->nmembers == 0;
		/* The last of a round goes unprobed: slow members all are better than none. */
		if (round_done || member_answers(c, q->stop, err, errlen)) {
			rc = send_to_member(c, q, r, err, errlen);
			why = resendable(c, q, rc, r);
		} else {
			rc = -EIO;
			why = "unreachable";
		}
		if (!why[0]) {
			client_reply_free(&refused);
			return rc;
		}
		double left = deadline - now_s();
		if (round_done && !c->told && left > 0) {
			fprintf(stderr,
			        "ofcctl: no member took the request (%s: %s%s); trying again "
			        "for up to %.1f s\n",
			        c->base, rc ? "" : "503 ", rc ? err : why, left);
			c->told = true;
		}
		if (rc == 0) {
			client_reply_free(&refused);
			refused = *r;
			memset(r, 0, sizeof(*r));
		}
		/* Past the first round, the time given ends it. */
		if ((round_done || tried > c->nmembers) && left <= 0)
			break;
		if (!next_member(c))
			break;
		if (round_done && !pause_unless_stopped(
		                      left * 1000 < pause ? (long)(left * 1000) : pause, q->stop)) {
			client_reply_free(&refused);
			client_reply_free(r);
			snprintf(err, errlen, "stopped");
			return -EINTR;
		}
		if (round_done)
			pause = pause * 2 > RESEND_MAX_MS ? RESEND_MAX_MS : pause * 2;
		client_reply_free(r);
	}
	/* What a member said beats a member that could not be reached. */
	if (refused.status) {
		client_reply_free(r);
		*r = refused;
		return 0;
	}
	return rc;
}

static int send_once(struct client *c, const struct client_req *q, struct client_reply *r,
                     char *err, size_t errlen)
{
	const char *method = q->method ? q->method : "GET";
	struct sink k = { .c = c, .r = r, .fn = q->fn, .arg = q->arg, .stop = q->stop };
	/*
	 * A write goes through a handle of its own, with no connection kept from
	 * before: libcurl sends a request again by itself when a kept connection
	 * drops it, and a write may have been applied.
	 */
	bool write = strcmp(method, "GET") != 0;
	if (c->curl != c->reads)
		curl_easy_cleanup(c->curl);
	c->curl = write ? curl_easy_init() : c->reads;
	struct curl_slist *h = NULL;
	if (c->curl) {
		curl_easy_reset(c->curl);
		h = setup(c, q, &k);
		/* Nor one kept between the legs of a redirect to the same host. */
		if (write)
			curl_easy_setopt(c->curl, CURLOPT_FORBID_REUSE, 1L);
	} else {
		c->curl = c->reads;
	}
	if (!h) {
		c->cc = CURLE_OUT_OF_MEMORY;
		snprintf(err, errlen, "out of memory");
		return -EIO;
	}
	/* POST is what a body implies; anything else but GET is named. */
	if (!write)
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
