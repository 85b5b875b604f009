#include "etcd_proto.h"

#include <errno.h>
#include <inttypes.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const char b64_alphabet[] =
    "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";

char *etcd_b64_encode(const void *data, size_t len)
{
	const unsigned char *in = data;
	char *out = malloc((len + 2) / 3 * 4 + 1);
	char *o = out;
	if (!out)
		return NULL;
	for (size_t i = 0; i < len; i += 3) {
		unsigned v = (unsigned)in[i] << 16;
		if (i + 1 < len)
			v |= (unsigned)in[i + 1] << 8;
		if (i + 2 < len)
			v |= in[i + 2];
		*o++ = b64_alphabet[(v >> 18) & 63];
		*o++ = b64_alphabet[(v >> 12) & 63];
		*o++ = i + 1 < len ? b64_alphabet[(v >> 6) & 63] : '=';
		*o++ = i + 2 < len ? b64_alphabet[v & 63] : '=';
	}
	*o = '\0';
	return out;
}

/* Every log entry a follower applies is decoded: no search of the alphabet per character. */
static int b64_value(char c)
{
	if (c >= 'A' && c <= 'Z')
		return c - 'A';
	if (c >= 'a' && c <= 'z')
		return c - 'a' + 26;
	if (c >= '0' && c <= '9')
		return c - '0' + 52;
	return c == '+' ? 62 : c == '/' ? 63 : -1;
}

int etcd_b64_decode(const char *text, unsigned char **out, size_t *len)
{
	size_t n = strlen(text);
	if (n % 4 != 0)
		return -EINVAL;
	unsigned char *buf = malloc(n / 4 * 3 + 1);
	size_t k = 0;
	if (!buf)
		return -ENOMEM;
	for (size_t i = 0; i < n; i += 4) {
		int v[4];
		bool last = i + 4 == n;
		for (int j = 0; j < 4; j++)
			v[j] = b64_value(text[i + (size_t)j]);
		/* '=' only at the end: one or two of them. */
		int pad = last && text[i + 3] == '=' ? (text[i + 2] == '=' ? 2 : 1) : 0;
		if (v[0] < 0 || v[1] < 0 || (pad < 2 && v[2] < 0) || (pad < 1 && v[3] < 0)) {
			free(buf);
			return -EINVAL;
		}
		unsigned w = (unsigned)v[0] << 18 | (unsigned)v[1] << 12 |
		             (pad < 2 ? (unsigned)v[2] << 6 : 0) | (pad < 1 ? (unsigned)v[3] : 0);
		buf[k++] = (unsigned char)(w >> 16);
		if (pad < 2)
			buf[k++] = (unsigned char)(w >> 8);
		if (pad < 1)
			buf[k++] = (unsigned char)w;
	}
	buf[k] = '\0';
	*out = buf;
	*len = k;
	return 0;
}

/* 64-bit numbers go out as strings, as the gateway's own replies write them. */
static json_t *int64_str(int64_t v)
{
	char buf[24];
	snprintf(buf, sizeof(buf), "%" PRId64, v);
	return json_string(buf);
}

static json_t *b64_json(const void *data, size_t len)
{
	char *s = etcd_b64_encode(data, len);
	json_t *j = s ? json_string(s) : NULL;
	free(s);
	return j;
}

/* Takes the reference of obj; NULL when anything ran out of memory. */
static char *dump(json_t *obj)
{
	char *s = obj ? json_dumps(obj, JSON_COMPACT) : NULL;
	json_decref(obj);
	return s;
}

/* The range_end that makes a range cover every key starting with key. */
static json_t *prefix_end(const char *key)
{
	size_t n = strlen(key);
	unsigned char *end = malloc(n + 1);
	json_t *j;
	if (!end)
		return NULL;
	memcpy(end, key, n);
	while (n > 0 && end[n - 1] == 0xff)
		n--;
	if (n == 0) {
		/* Every byte 0xff (or no key): "\0" means "to the end of the keyspace". */
		end[0] = 0;
		n = 1;
	} else {
		end[n - 1]++;
	}
	j = b64_json(end, n);
	free(end);
	return j;
}

static json_t *range_obj(const char *key, bool prefix)
{
	json_t *o = json_object();
	if (o && json_object_set_new(o, "key", b64_json(key, strlen(key))) == 0 &&
	    (!prefix || json_object_set_new(o, "range_end", prefix_end(key)) == 0))
		return o;
	json_decref(o);
	return NULL;
}

char *etcd_req_range(const char *key, bool prefix, int64_t min_mod_revision)
{
	json_t *o = range_obj(key, prefix);
	if (o && min_mod_revision > 0 &&
	    json_object_set_new(o, "min_mod_revision", int64_str(min_mod_revision)) < 0) {
		json_decref(o);
		return NULL;
	}
	return dump(o);
}

static json_t *compare_create(const char *key, int64_t rev)
{
	/* result EQUAL is the enum's zero; written out all the same for readers. */
	return json_pack("{s:o, s:s, s:s, s:o}", "key", b64_json(key, strlen(key)), "target",
	                 "CREATE", "result", "EQUAL", "create_revision", int64_str(rev));
}

static json_t *compare_mod(const char *key, int64_t rev)
{
	return json_pack("{s:o, s:s, s:s, s:o}", "key", b64_json(key, strlen(key)), "target", "MOD",
	                 "result", "EQUAL", "mod_revision", int64_str(rev));
}

static json_t *put_obj(const char *key, const void *value, size_t len, int64_t lease)
{
	json_t *o = json_pack("{s:o, s:o}", "key", b64_json(key, strlen(key)), "value",
	                      b64_json(value, len));
	if (o && lease && json_object_set_new(o, "lease", int64_str(lease)) < 0) {
		json_decref(o);
		return NULL;
	}
	return o;
}

static char *txn(json_t *compare, json_t *success, json_t *failure)
{
	return dump(json_pack("{s:[o], s:[o], s:[o]}", "compare", compare, "success", success,
	                      "failure", failure));
}

char *etcd_req_create(const char *key, const void *value, size_t len, int64_t lease)
{
	return txn(compare_create(key, 0),
	           json_pack("{s:o}", "request_put", put_obj(key, value, len, lease)),
	           json_pack("{s:o}", "request_range", range_obj(key, false)));
}

char *etcd_req_append(const char *guard_key, int64_t guard_rev, const char *key, const void *value,
                      size_t len, const char *floor_key, int64_t floor_rev)
{
	return dump(json_pack("{s:[o,o,o], s:[{s:o}], s:[{s:o},{s:o},{s:o}]}", "compare",
	                      compare_create(guard_key, guard_rev), compare_create(key, 0),
	                      compare_mod(floor_key, floor_rev), "success", "request_put",
	                      put_obj(key, value, len, 0), "failure", "request_range",
	                      range_obj(guard_key, false), "request_range", range_obj(key, false),
	                      "request_range", range_obj(floor_key, false)));
}

/* Sets o[name] = v (an int64 as etcd's JSON writes it) when v > 0; false when out of memory. */
static bool set_positive(json_t *o, const char *name, int64_t v)
{
	return v <= 0 || json_object_set_new(o, name, int64_str(v)) == 0;
}

char *etcd_req_log_read(const char *floor_key, const char *log_prefix, const char *after_key,
                        int64_t min_mod_revision, int64_t revision, unsigned limit)
{
	json_t *log = range_obj(log_prefix, true);
	json_t *floor = range_obj(floor_key, false);
	/* The first key after after_key is after_key and a NUL byte. */
	if (log && after_key &&
	    json_object_set_new(log, "key", b64_json(after_key, strlen(after_key) + 1)) < 0) {
		json_decref(log);
		log = NULL;
	}
	if (log &&
	    (!set_positive(log, "min_mod_revision", min_mod_revision) ||
	     !set_positive(log, "revision", revision) || !set_positive(log, "limit", limit))) {
		json_decref(log);
		log = NULL;
	}
	if (floor && !set_positive(floor, "revision", revision)) {
		json_decref(floor);
		floor = NULL;
	}
	return dump(json_pack("{s:[], s:[{s:o},{s:o}]}", "compare", "success", "request_range",
	                      floor, "request_range", log));
}

char *etcd_req_trim(const char *guard_key, int64_t guard_rev, const char *log_prefix,
                    const char *last_key, const char *floor_key, int64_t floor_rev,
                    const char *floor_value)
{
	/* Up to and with last_key: the range ends at the first key after it, itself and a NUL. */
	json_t *del = json_pack("{s:o, s:o}", "key", b64_json(log_prefix, strlen(log_prefix)),
	                        "range_end", b64_json(last_key, strlen(last_key) + 1));
	return dump(json_pack("{s:[o,o], s:[{s:o},{s:o}], s:[{s:o}]}", "compare",
	                      compare_create(guard_key, guard_rev),
	                      compare_mod(floor_key, floor_rev), "success", "request_delete_range",
	                      del, "request_put",
	                      put_obj(floor_key, floor_value, strlen(floor_value), 0), "failure",
	                      "request_range", range_obj(floor_key, false)));
}

char *etcd_req_put(const char *key, const void *value, size_t len, int64_t lease)
{
	return dump(put_obj(key, value, len, lease));
}

char *etcd_req_delete_guarded(const char *key, int64_t rev)
{
	return txn(compare_create(key, rev),
	           json_pack("{s:o}", "request_delete_range", range_obj(key, false)),
	           json_pack("{s:o}", "request_range", range_obj(key, false)));
}

char *etcd_req_lease_grant(unsigned ttl_s)
{
	return dump(json_pack("{s:o}", "TTL", int64_str(ttl_s)));
}

char *etcd_req_lease_id(int64_t id)
{
	return dump(json_pack("{s:o}", "ID", int64_str(id)));
}

char *etcd_req_watch(const char *key, bool prefix, int64_t start_revision)
{
	json_t *o = range_obj(key, prefix);
	if (o && start_revision > 0 &&
	    json_object_set_new(o, "start_revision", int64_str(start_revision)) < 0) {
		json_decref(o);
		o = NULL;
	}
	return dump(o ? json_pack("{s:o}", "create_request", o) : NULL);
}

/* A 64-bit member: absent is 0 (the gateway omits zeroes); a string or an integer. */
static int get_int64(const json_t *obj, const char *name, int64_t *out)
{
	const json_t *v = json_object_get(obj, name);
	*out = 0;
	if (!v)
		return 0;
	if (json_is_integer(v)) {
		*out = json_integer_value(v);
		return 0;
	}
	const char *s = json_string_value(v);
	char *end;
	if (!s || !*s)
		return -EPROTO;
	errno = 0;
	long long n = strtoll(s, &end, 10);
	if (errno || *end)
		return -EPROTO;
	*out = n;
	return 0;
}

static int get_bool(const json_t *obj, const char *name, bool *out)
{
	const json_t *v = json_object_get(obj, name);
	if (v && !json_is_boolean(v))
		return -EPROTO;
	*out = v && json_is_true(v);
	return 0;
}

static int get_b64(const json_t *obj, const char *name, unsigned char **out, size_t *len)
{
	const json_t *v = json_object_get(obj, name);
	if (!v) {
		/* An empty value is left out like any zero. */
		*out = calloc(1, 1);
		*len = 0;
		return *out ? 0 : -ENOMEM;
	}
	if (!json_is_string(v))
		return -EPROTO;
	int rc = etcd_b64_decode(json_string_value(v), out, len);
	return rc == -EINVAL ? -EPROTO : rc;
}

static int add_kv(struct etcd_result *out, const json_t *kv, bool deleted)
{
	struct etcd_kv *v = realloc(out->kvs, (out->nkvs + 1) * sizeof(*v));
	size_t keylen;
	int rc;
	if (!json_is_object(kv))
		return -EPROTO;
	if (!v)
		return -ENOMEM;
	out->kvs = v;
	v = &out->kvs[out->nkvs];
	memset(v, 0, sizeof(*v));
	v->deleted = deleted;
	rc = get_b64(kv, "key", (unsigned char **)&v->key, &keylen);
	if (rc == 0)
		out->nkvs++;
	if (rc == 0)
		rc = get_b64(kv, "value", &v->value, &v->value_len);
	if (rc == 0)
		rc = get_int64(kv, "create_revision", &v->create_revision);
	if (rc == 0)
		rc = get_int64(kv, "mod_revision", &v->mod_revision);
	if (rc == 0)
		rc = get_int64(kv, "lease", &v->lease);
	return rc;
}

static int add_kvs(struct etcd_result *out, const json_t *kvs)
{
	size_t i;
	const json_t *kv;
	if (!kvs)
		return 0;
	if (!json_is_array(kvs))
		return -EPROTO;
	json_array_foreach(kvs, i, kv)
	{
		int rc = add_kv(out, kv, false);
		if (rc < 0)
			return rc;
	}
	return 0;
}

static int parse_events(struct etcd_result *out, const json_t *events)
{
	size_t i;
	const json_t *ev;
	if (!events)
		return 0;
	if (!json_is_array(events))
		return -EPROTO;
	json_array_foreach(events, i, ev)
	{
		const char *type = json_string_value(json_object_get(ev, "type"));
		/* PUT is the enum's zero and so usually absent. */
		bool deleted = type && strcmp(type, "DELETE") == 0;
		if (type && !deleted && strcmp(type, "PUT") != 0)
			return -EPROTO;
		int rc = add_kv(out, json_object_get(ev, "kv"), deleted);
		if (rc < 0)
			return rc;
	}
	return 0;
}

static int parse_responses(struct etcd_result *out, const json_t *responses)
{
	size_t i;
	const json_t *r;
	if (!responses)
		return 0;
	if (!json_is_array(responses))
		return -EPROTO;
	json_array_foreach(responses, i, r)
	{
		const json_t *range = json_object_get(r, "response_range");
		int rc = range ? add_kvs(out, json_object_get(range, "kvs")) : 0;
		if (range && json_is_true(json_object_get(range, "more")))
			out->more = true;
		if (rc < 0)
			return rc;
	}
	return 0;
}

static int parse_body(const json_t *root, struct etcd_result *out)
{
	const json_t *msg = json_object_get(root, "result");
	const json_t *err = json_object_get(root, "error");
	int rc;

	if (!json_is_object(root))
		return -EPROTO;
	if (err) {
		/* The gateway's message, else its error, else something to log. */
		const char *m = json_string_value(json_object_get(root, "message"));
		if (!m || !*m)
			m = json_string_value(err);
		snprintf(out->error, sizeof(out->error), "%s", m && *m ? m : "(no message)");
		return -EIO;
	}
	if (msg && !json_is_object(msg))
		return -EPROTO;
	if (!msg)
		msg = root;
	const json_t *header = json_object_get(msg, "header");
	if (!json_is_object(header))
		return -EPROTO;
	rc = get_int64(header, "revision", &out->revision);
	if (rc == 0)
		rc = get_bool(msg, "succeeded", &out->succeeded);
	if (rc == 0)
		rc = get_int64(msg, "ID", &out->lease_id);
	if (rc == 0)
		rc = get_int64(msg, "TTL", &out->ttl);
	if (rc == 0)
		rc = get_bool(msg, "created", &out->created);
	if (rc == 0)
		rc = get_bool(msg, "canceled", &out->canceled);
	if (rc == 0)
		rc = get_int64(msg, "compact_revision", &out->compact_revision);
	if (rc == 0)
		rc = add_kvs(out, json_object_get(msg, "kvs"));
	if (json_is_true(json_object_get(msg, "more")))
		out->more = true;
	if (rc == 0)
		rc = parse_responses(out, json_object_get(msg, "responses"));
	if (rc == 0)
		rc = parse_events(out, json_object_get(msg, "events"));
	return rc;
}

int etcd_parse(const char *body, size_t len, struct etcd_result *out)
{
	json_t *root = json_loadb(body, len, JSON_REJECT_DUPLICATES, NULL);
	int rc = root ? parse_body(root, out) : -EPROTO;
	json_decref(root);
	return rc;
}

void etcd_result_free(struct etcd_result *out)
{
	for (size_t i = 0; i < out->nkvs; i++) {
		free(out->kvs[i].key);
		free(out->kvs[i].value);
	}
	free(out->kvs);
	memset(out, 0, sizeof(*out));
}
