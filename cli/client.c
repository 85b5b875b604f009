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

/* How long the members' survey waits for the others once one has answered. */
#define SURVEY_GRACE_MS 100L

/* The most redirects one request follows. */
#define MAX_REDIRECTS 5

/* The pause after a round of members that took nothing: doubled each round up to the most. */
#define RESEND_FIRST_MS 100L
#define RESEND_MAX_MS   1000L

/* What the survey learnt of a member who did not answer it, while another did. */
enum word {
	WORD_NONE,    /* nothing: it answered, or no member did */
	WORD_FAILED,  /* refused, timed out or answered other than 200: passed over */
	WORD_PENDING, /* no answer yet when the survey ended: probed, even last of a round */
};

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
	bool told;        /* the note that requests are being sent again was printed */
	bool surveyed;    /* the members were asked together, before the first request */
	char *word;       /* per member: what the survey said (enum word), for one round */
	char **answered;  /* origins whose health probe answered since the client last moved on */
	size_t nanswered; /* entries in answered */
	CURLcode cc;      /* how the last transfer ended */
	bool exposed;     /* it sent a request that no redirect answered: a daemon may have it */
	char errbuf[CURL_ERROR_SIZE]; /* libcurl's words for it */
};

/* Where a response goes: collected into a reply, or streamed to a callback when 200. */
struct sink {
	struct client *c;
	CURL *curl; /* the handle the transfer runs on */
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
	if (!(c->members = calloc(n, sizeof(*c->members))) || !(c->word = calloc(n, 1)))
		return false;
	for (const char *p = list;; p++) {
		p += strspn(p, " \t");
		size_t len = strcspn(p, ",");
		while (len > 0 && strchr(" \t/", p[len - 1]))
			len--;
		/* libcurl's own default, written out: origins compare as libcurl connects. */
		bool bare = !memmem(p, len, "://", 3);
		if (asprintf(&c->members[c->nmembers], "%s%.*s", bare ? "http://" : "", (int)len,
		             p) < 0)
			return false;
		c->nmembers++;
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
	d->surveyed = true;
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
	free(c->word);
	for (size_t i = 0; i < c->nanswered; i++)
		free(c->answered[i]);
	free(c->answered);
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
	curl_easy_getinfo(k->curl, CURLINFO_RESPONSE_CODE, &status);
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
		/* A redirect that keeps the method: the host that had the request did nothing with
		 * it. */
		const char *code = memchr(data, ' ', n);
		if (code && code + 4 < data + n &&
		    (strncmp(code + 1, "307", 3) == 0 || strncmp(code + 1, "308", 3) == 0))
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

/*
 * The options every request shares, on the handle e (reset before) for url; the token
 * goes only when token is true. Redirects are not followed: send_to_member() does.
 */
static struct curl_slist *setup(struct client *c, CURL *e, const char *url, bool token,
                                const struct client_req *q, struct sink *k)
{
	struct curl_slist *h = NULL;
	curl_easy_setopt(e, CURLOPT_URL, url); /* libcurl copies it */
	curl_easy_setopt(e, CURLOPT_PROTOCOLS_STR, "http,https");
	if (token && c->token) {
		curl_easy_setopt(e, CURLOPT_HTTPAUTH, CURLAUTH_BEARER);
		curl_easy_setopt(e, CURLOPT_XOAUTH2_BEARER, c->token);
	}
	if (c->cacert)
		curl_easy_setopt(e, CURLOPT_CAINFO, c->cacert);
	if (c->insecure) {
		curl_easy_setopt(e, CURLOPT_SSL_VERIFYPEER, 0L);
		curl_easy_setopt(e, CURLOPT_SSL_VERIFYHOST, 0L);
	}
	curl_easy_setopt(e, CURLOPT_USERAGENT, "ofcctl/" OFCD_VERSION);
	curl_easy_setopt(e, CURLOPT_CONNECTTIMEOUT_MS, CONNECT_TIMEOUT_MS);
	curl_easy_setopt(e, CURLOPT_NOSIGNAL, 1L);
	curl_easy_setopt(e, CURLOPT_WRITEFUNCTION, on_data);
	curl_easy_setopt(e, CURLOPT_WRITEDATA, k);
	curl_easy_setopt(e, CURLOPT_HEADERFUNCTION, on_header);
	curl_easy_setopt(e, CURLOPT_HEADERDATA, k);
	curl_easy_setopt(e, CURLOPT_DEBUGFUNCTION, on_debug);
	curl_easy_setopt(e, CURLOPT_DEBUGDATA, k);
	curl_easy_setopt(e, CURLOPT_VERBOSE, 1L); /* for on_debug only: it prints nothing */
	if (k->stop) {
		curl_easy_setopt(e, CURLOPT_XFERINFOFUNCTION, on_progress);
		curl_easy_setopt(e, CURLOPT_XFERINFODATA, k);
		curl_easy_setopt(e, CURLOPT_NOPROGRESS, 0L);
	}
	if (q->timeout_ms)
		curl_easy_setopt(e, CURLOPT_TIMEOUT_MS, q->timeout_ms);

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
	curl_easy_setopt(e, CURLOPT_HTTPHEADER, h);
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

/*
 * Sends q to url and waits for the reply, with the token only when token is true. A
 * write goes through a handle of its own, with no connection kept from before: libcurl
 * sends a request again by itself when a kept connection drops it, and a write may
 * have been applied.
 */
static int send_url(struct client *c, const struct client_req *q, const char *url, bool token,
                    struct client_reply *r, char *err, size_t errlen)
{
	const char *method = q->method ? q->method : "GET";
	struct sink k = { .c = c, .r = r, .fn = q->fn, .arg = q->arg, .stop = q->stop };
	bool write = strcmp(method, "GET") != 0;
	if (c->curl != c->reads)
		curl_easy_cleanup(c->curl);
	c->curl = write ? curl_easy_init() : c->reads;
	struct curl_slist *h = NULL;
	if (c->curl) {
		curl_easy_reset(c->curl);
		k.curl = c->curl;
		h = setup(c, c->curl, url, token, q, &k);
		curl_easy_setopt(c->curl, CURLOPT_ERRORBUFFER, c->errbuf);
		c->errbuf[0] = '\0';
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
	int rc = perform(c, &k, err, errlen);
	curl_slist_free_all(h);
	return rc;
}

/* base followed by path, malloc'd; NULL when out of memory. */
static char *join(const char *base, const char *path)
{
	char *url = NULL;
	return asprintf(&url, "%s%s", base, path) < 0 ? NULL : url;
}

/*
 * scheme://host:port of an http or https url into out (len bytes); false when it has none
 * or it does not fit: whoever asks then treats the url as another host's.
 */
static bool origin_of(const char *url, char *out, size_t len)
{
	size_t scheme = !url                                   ? 0
	                : strncasecmp(url, "http://", 7) == 0  ? 7
	                : strncasecmp(url, "https://", 8) == 0 ? 8
	                                                       : 0;
	if (!scheme)
		return false;
	size_t n = scheme + strcspn(url + scheme, "/?#");
	if (n >= len)
		return false;
	memcpy(out, url, n);
	out[n] = '\0';
	return true;
}

static bool answered(const struct client *c, const char *origin)
{
	for (size_t i = 0; i < c->nanswered; i++)
		if (strcmp(c->answered[i], origin) == 0)
			return true;
	return false;
}

/* Notes that the daemon at url answered its probe; forgetting it only costs a probe. */
static void note_answered(struct client *c, const char *url)
{
	char origin[512], **a;
	if (!origin_of(url, origin, sizeof(origin)) || answered(c, origin) ||
	    !(a = realloc(c->answered, (c->nanswered + 1) * sizeof(*a))))
		return;
	c->answered = a;
	if ((a[c->nanswered] = strdup(origin)))
		c->nanswered++;
}

static void forget_answered(struct client *c)
{
	for (size_t i = 0; i < c->nanswered; i++)
		free(c->answered[i]);
	c->nanswered = 0;
}

/*
 * Whether the daemon at base (a URL without the /v1 path) answers: asked once, of
 * /v1/health with a short timeout (or until *stop), unless it answered since the client
 * last moved on. A daemon that is frozen (a paused machine, a stopped process) takes
 * connections and answers nothing: a request sent there would wait out its whole
 * timeout, and a write's outcome would then be unknown. 0 when it answered, -EIO with
 * the reason in err when not, -EINTR when *stop ended the wait.
 */
static int answers(struct client *c, const char *base, const volatile sig_atomic_t *stop, char *err,
                   size_t errlen)
{
	char origin[512];
	if (stop && *stop) {
		snprintf(err, errlen, "stopped");
		return -EINTR;
	}
	if (origin_of(base, origin, sizeof(origin)) && answered(c, origin))
		return 0;
	struct client_req q = { .path = "/v1/health",
		                .timeout_ms = PROBE_TIMEOUT_MS,
		                .stop = stop };
	struct client_reply r = { 0 };
	char *url = join(base, q.path);
	int rc = url ? send_url(c, &q, url, false, &r, err, errlen) : -EIO;
	bool ok = rc == 0 && r.status == 200;
	if (ok)
		note_answered(c, base);
	else if (rc == 0)
		snprintf(err, errlen, "its health probe answered %ld", r.status);
	else if (!url)
		snprintf(err, errlen, "out of memory");
	else if (rc == -EINTR)
		snprintf(err, errlen, "stopped");
	free(url);
	client_reply_free(&r);
	return ok ? 0 : rc == -EINTR ? rc : -EIO;
}

/*
 * The member whose advertise URL is origin in the cluster of the member given that c
 * was sent to (c->at), malloc'd, or NULL: a redirect there is to a member of the
 * cluster the client was given, by the member given.
 */
static char *cluster_member(struct client *c, const char *origin, const volatile sig_atomic_t *stop)
{
	struct client_reply r = { 0 };
	struct client_req q = { .path = "/v1/cluster",
		                .timeout_ms = PROBE_TIMEOUT_MS,
		                .stop = stop };
	char err[256], adv[512];
	char *found = NULL, *url = join(c->members[c->at], q.path);
	if (url && send_url(c, &q, url, true, &r, err, sizeof(err)) == 0 && r.status == 200) {
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
	free(url);
	return found;
}

/*
 * Where later requests may go straight, with the token, when a redirect leads to the
 * daemon at base (on origin): a member given, or one the given member's cluster names
 * (its leader); malloc'd, or NULL when the token may not go there.
 */
static char *trusted_base(struct client *c, const char *base, const char *origin,
                          const volatile sig_atomic_t *stop)
{
	for (size_t i = 0; i < c->nmembers; i++)
		if (strcmp(c->members[i], base) == 0)
			return strdup(base);
	return c->token ? cluster_member(c, origin, stop) : NULL;
}

/* Whether a reply of status to q is followed: any redirect of a GET, else those that keep the
 * method. */
static bool follows(const struct client_req *q, long status)
{
	bool get = !q->method || strcmp(q->method, "GET") == 0;
	return status == 307 || status == 308 ||
	       (get && (status == 301 || status == 302 || status == 303));
}

/*
 * Sends q to c->base and follows its redirects (a follower points at its leader). The
 * token goes to the host and port it was given for, and on to a daemon a redirect leads
 * to only when trusted_base() names it, which later requests then go to (c->base; c->at
 * stays the member given that was asked). A daemon on another host or port that a
 * redirect leads to is probed first (answers()): a frozen leader then costs the probe's
 * timeout, with nothing sent, where the request would have waited there for its whole
 * timeout. -EINTR when *q->stop ended the probe.
 */
static int send_to_member(struct client *c, const struct client_req *q, struct client_reply *r,
                          char *err, size_t errlen)
{
	char *url = join(c->base, q->path);
	bool token = true;
	int rc = -EIO;
	c->cc = CURLE_OUT_OF_MEMORY;
	snprintf(err, errlen, "out of memory");
	for (int legs = 0; url; legs++) {
		rc = send_url(c, q, url, token, r, err, errlen);
		const char *next = NULL;
		char here[512] = "", there[512];
		if (rc == 0 && follows(q, r->status) && legs < MAX_REDIRECTS)
			curl_easy_getinfo(c->curl, CURLINFO_REDIRECT_URL, &next);
		if (!origin_of(next, there, sizeof(there)))
			break;
		char *to = strdup(next);
		if (!to) {
			client_reply_free(r);
			c->cc = CURLE_OUT_OF_MEMORY;
			snprintf(err, errlen, "out of memory");
			rc = -EIO;
			break;
		}
		if (!origin_of(url, here, sizeof(here)) || strcmp(here, there) != 0) {
			/* The daemon's own prefix: the path asked for, taken off where it went. */
			size_t n = strlen(to), p = strlen(q->path);
			char *base = strndup(
			    to, n >= p && strcmp(to + n - p, q->path) == 0 ? n - p : strlen(there));
			char *trusted = base ? trusted_base(c, base, there, q->stop) : NULL;
			token = trusted != NULL;
			char why[256] = "out of memory";
			int probe = base ? answers(c, base, q->stop, why, sizeof(why)) : -EIO;
			free(base);
			if (probe == 0 && trusted) {
				free(c->base);
				c->base = trusted;
			} else {
				free(trusted);
			}
			if (probe < 0) {
				snprintf(err, errlen, "%s, where %s redirected: %s", there, here,
				         why);
				client_reply_free(r);
				c->cc = CURLE_COULDNT_CONNECT;
				c->exposed = false;
				rc = probe;
				free(to);
				break;
			}
		}
		client_reply_free(r);
		free(url);
		url = to;
	}
	free(url);
	return rc;
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
 * c->base to the next member given: the one after the member it was taken from (a
 * leader not given that a redirect took c to counts as the member that redirected).
 * False when out of memory.
 */
static bool next_member(struct client *c)
{
	size_t at = (c->at + 1) % c->nmembers;
	char *base = strdup(c->members[at]);
	if (!base)
		return false;
	free(c->base);
	c->base = base;
	c->at = at;
	forget_answered(c);
	return true;
}

/* One member's health probe in a survey. */
struct probe {
	CURL *e;
	struct curl_slist *h;
	struct sink k;
	struct client_reply r;
	bool done; /* its transfer ended */
	bool ok;   /* it answered 200 */
};

/* Runs the survey's probes until all ended, one answered SURVEY_GRACE_MS ago, or *stop. */
static void run_probes(CURLM *m, struct probe *p, size_t n, const volatile sig_atomic_t *stop)
{
	double answered_at = 0;
	int running = 1;
	while (running && !(stop && *stop) &&
	       !(answered_at && now_s() - answered_at >= SURVEY_GRACE_MS / 1e3)) {
		curl_multi_perform(m, &running);
		int left;
		for (CURLMsg *msg; (msg = curl_multi_info_read(m, &left));) {
			for (size_t i = 0; msg->msg == CURLMSG_DONE && i < n; i++) {
				if (p[i].e != msg->easy_handle)
					continue;
				curl_easy_getinfo(p[i].e, CURLINFO_RESPONSE_CODE, &p[i].r.status);
				p[i].done = true;
				p[i].ok = msg->data.result == CURLE_OK && p[i].r.status == 200;
				if (p[i].ok && !answered_at)
					answered_at = now_s();
			}
		}
		if (running)
			curl_multi_poll(m, NULL, 0, 20, NULL);
	}
}

/*
 * Asks every member GET /v1/health at once, before a run's first request, and starts
 * at the first given that answered: a member down or frozen then costs nothing, where
 * asking in turn cost each call its connect or probe timeout. When one answered, the
 * first round of that request passes over those whose probe failed, and probes those
 * it had no answer from yet (by SURVEY_GRACE_MS later) again before sending them
 * anything; when none answered, the members are asked in turn as before, and so they
 * are out of memory.
 */
static void survey(struct client *c, const volatile sig_atomic_t *stop)
{
	size_t n = c->nmembers;
	CURLM *m = curl_multi_init();
	struct probe *p = calloc(n, sizeof(*p));
	struct client_req q = { .path = "/v1/health", .timeout_ms = PROBE_TIMEOUT_MS };
	bool ready = m && p;
	for (size_t i = 0; ready && i < n; i++) {
		char *url = join(c->members[i], q.path);
		p[i].e = curl_easy_init();
		p[i].k = (struct sink){ .c = c, .curl = p[i].e, .r = &p[i].r };
		ready = url && p[i].e && (p[i].h = setup(c, p[i].e, url, false, &q, &p[i].k)) &&
		        curl_multi_add_handle(m, p[i].e) == CURLM_OK;
		free(url);
	}
	if (ready)
		run_probes(m, p, n, stop);
	size_t first = n;
	for (size_t i = 0; ready && i < n; i++) {
		if (p[i].ok && first == n)
			first = i;
	}
	for (size_t i = 0; p && i < n; i++) {
		if (first < n && p[i].ok)
			note_answered(c, c->members[i]);
		c->word[i] = first == n || p[i].ok ? WORD_NONE
		             : p[i].done           ? WORD_FAILED
		                                   : WORD_PENDING;
		if (p[i].e) {
			curl_multi_remove_handle(m, p[i].e);
			curl_easy_cleanup(p[i].e);
		}
		curl_slist_free_all(p[i].h);
		client_reply_free(&p[i].r);
	}
	free(p);
	curl_multi_cleanup(m);
	char *base = first < n ? strdup(c->members[first]) : NULL;
	if (base) {
		free(c->base);
		c->base = base;
		c->at = first;
	}
}

/*
 * Whether the member at base may be sent a request (0; -EIO with the reason in err when
 * not, -EINTR when *stop ended its probe): with one member, always; with several, not
 * when its survey probe failed, this first round; else when it answers its probe, or
 * unprobed when it is the last of a round (slow members all are better than none) and
 * the survey did not end waiting for it.
 */
static int member_answers(struct client *c, bool last, const volatile sig_atomic_t *stop, char *err,
                          size_t errlen)
{
	if (c->nmembers < 2)
		return 0;
	enum word w = strcmp(c->base, c->members[c->at]) == 0 ? c->word[c->at] : WORD_NONE;
	if (w == WORD_FAILED) {
		snprintf(err, errlen, "its health probe failed when the members were asked");
		return -EIO;
	}
	return last && w == WORD_NONE ? 0 : answers(c, c->base, stop, err, errlen);
}

int client_send(struct client *c, const struct client_req *q, struct client_reply *r, char *err,
                size_t errlen)
{
	/* The survey's word holds for the first request's first round only. */
	if (!c->surveyed && c->nmembers > 1)
		survey(c, q->stop);
	else
		memset(c->word, WORD_NONE, c->nmembers);
	c->surveyed = true;
	if (q->stop && *q->stop) {
		snprintf(err, errlen, "stopped");
		return -EINTR;
	}
	double deadline = now_s() + c->retry_s;
	long pause = RESEND_FIRST_MS;
	struct client_reply refused = { 0 }; /* the last refusal a member answered */
	int rc;
	for (size_t tried = 1;; tried++) {
		const char *why = "unreachable";
		bool round_done = tried % c->nmembers == 0;
		rc = member_answers(c, round_done, q->stop, err, errlen);
		if (rc == 0) {
			rc = send_to_member(c, q, r, err, errlen);
			why = resendable(c, q, rc, r);
		} else if (rc == -EINTR) {
			why = "";
		}
		if (round_done)
			memset(c->word, WORD_NONE, c->nmembers);
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
