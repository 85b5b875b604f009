/*
 * The netconf driver's messages: endpoint, models, edit-config text and the
 * reading of reply trees. See netconf_msg.h.
 */
#include "netconf_msg.h"

#include <errno.h>
#include <libyang/libyang.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define NC_BASE_NS "urn:ietf:params:xml:ns:netconf:base:1.0"

/* ---- endpoint ------------------------------------------------------------ */

/* s[0..n) is 1 or more letters, digits and characters of extra. */
static bool word_of(const char *s, size_t n, const char *extra)
{
	for (size_t i = 0; i < n; i++) {
		char c = s[i];
		if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
		      (c && strchr(extra, c))))
			return false;
	}
	return n > 0;
}

/* s[0..n) as a decimal number of 1..max; false for anything else. */
static bool decimal(const char *s, size_t n, uint64_t max, uint64_t *out)
{
	uint64_t v = 0;
	if (n == 0 || n > 20)
		return false;
	for (size_t i = 0; i < n; i++) {
		if (s[i] < '0' || s[i] > '9' || v > max)
			return false;
		v = v * 10 + (uint64_t)(s[i] - '0');
	}
	if (v < 1 || v > max)
		return false;
	*out = v;
	return true;
}

int ncm_parse_endpoint(const char *endpoint, struct ncm_endpoint *out, char *err, size_t errlen)
{
	static const char scheme[] = "netconf://";
	const char *p, *at, *host, *host_end, *port;
	memset(out, 0, sizeof(*out));
	out->port = 830;
	if (!endpoint || strncmp(endpoint, scheme, sizeof(scheme) - 1) != 0) {
		snprintf(err, errlen, "netconf: endpoint must be netconf://user@host[:port]");
		return -EINVAL;
	}
	p = endpoint + sizeof(scheme) - 1;
	at = strchr(p, '@');
	if (!at || !word_of(p, (size_t)(at - p), "_-.") || (size_t)(at - p) >= sizeof(out->user)) {
		snprintf(err, errlen, "netconf: endpoint needs a user name (netconf://user@host)");
		return -EINVAL;
	}
	memcpy(out->user, p, (size_t)(at - p));
	host = at + 1;
	if (*host == '[') {
		host++;
		host_end = strchr(host, ']');
		if (!host_end) {
			snprintf(err, errlen, "netconf: endpoint's IPv6 host lacks its ']'");
			return -EINVAL;
		}
		port = host_end[1] == ':' ? host_end + 2 : NULL;
		if (!port && host_end[1]) {
			snprintf(err, errlen, "netconf: endpoint has text after its host");
			return -EINVAL;
		}
	} else {
		host_end = strchr(host, ':');
		port = host_end ? host_end + 1 : NULL;
		if (!host_end)
			host_end = host + strlen(host);
	}
	if (!word_of(host, (size_t)(host_end - host), "-.:%") ||
	    (size_t)(host_end - host) >= sizeof(out->host)) {
		snprintf(err, errlen, "netconf: endpoint's host is empty or not a host name");
		return -EINVAL;
	}
	memcpy(out->host, host, (size_t)(host_end - host));
	if (port) {
		uint64_t v;
		if (!decimal(port, strlen(port), 65535, &v)) {
			snprintf(err, errlen, "netconf: endpoint's port must be 1..65535");
			return -EINVAL;
		}
		out->port = (uint16_t)v;
	}
	return 0;
}

/* ---- models -------------------------------------------------------------- */

/*
 * ofcd's own module (ocs_drivers/yang/ofcd-optical-switch.yang) and the
 * Polatis optical-switch module, which ONOS's Polatis driver edits with the
 * same shape: cross-connects/pair keyed by ingress, one egress.
 */
static const struct ncm_model builtin[] = {
	{ "ofcd", "urn:ofcd:yang:optical-switch", "cross-connects", "pair", "ingress", "egress",
	  false },
	{ "polatis", "http://www.polatis.com/yang/optical-switch", "cross-connects", "pair",
	  "ingress", "egress", true },
};

static bool xml_name(const char *s)
{
	return !((*s >= '0' && *s <= '9') || *s == '-' || *s == '.') &&
	       word_of(s, strlen(s), "_-.");
}

/* A namespace goes into an attribute: nothing that XML would read otherwise. */
static bool xml_attr_safe(const char *s)
{
	if (!*s)
		return false;
	for (; *s; s++) {
		if (*s == '<' || *s == '>' || *s == '&' || *s == '"' || *s == '\'' ||
		    (unsigned char)*s <= 0x20)
			return false;
	}
	return true;
}

int ncm_model_parse(const char *value, struct ncm_model *out, char *err, size_t errlen)
{
	for (size_t i = 0; i < sizeof(builtin) / sizeof(builtin[0]); i++) {
		if (strcmp(builtin[i].name, value) == 0) {
			*out = builtin[i];
			return 0;
		}
	}
	struct {
		char *field;
		size_t size;
	} names[] = {
		{ out->ns, sizeof(out->ns) },         { out->container, sizeof(out->container) },
		{ out->list, sizeof(out->list) },     { out->ingress, sizeof(out->ingress) },
		{ out->egress, sizeof(out->egress) },
	};
	const char *p = value;
	memset(out, 0, sizeof(*out));
	snprintf(out->name, sizeof(out->name), "custom");
	for (size_t i = 0; i < sizeof(names) / sizeof(names[0]); i++) {
		while (*p == ' ')
			p++;
		size_t n = strcspn(p, " ");
		if (!n || n >= names[i].size)
			goto bad;
		memcpy(names[i].field, p, n);
		names[i].field[n] = '\0';
		if (i == 0 ? !xml_attr_safe(names[i].field) : !xml_name(names[i].field))
			goto bad;
		p += n;
	}
	while (*p == ' ')
		p++;
	if (strncmp(p, "one-way", 7) == 0 && (p[7] == ' ' || !p[7])) {
		out->one_way = true;
		p += 7;
		while (*p == ' ')
			p++;
	}
	if (!*p)
		return 0;
bad:
	snprintf(err, errlen,
	         "a model is one of %s, or \"NAMESPACE CONTAINER LIST INGRESS EGRESS [one-way]\" "
	         "(a URI and four XML names)",
	         "ofcd, polatis");
	return -EINVAL;
}

/* ---- what is sent -------------------------------------------------------- */

/* A growing string; on allocation failure it stays failed and says so at the end. */
struct sbuf {
	char *s;
	size_t len;
	size_t cap;
	bool failed;
};

static void sb_add(struct sbuf *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

static void sb_add(struct sbuf *b, const char *fmt, ...)
{
	va_list ap;
	if (b->failed)
		return;
	for (;;) {
		size_t room = b->cap - b->len;
		va_start(ap, fmt);
		int n = vsnprintf(b->s ? b->s + b->len : NULL, b->s ? room : 0, fmt, ap);
		va_end(ap);
		if (n < 0) {
			b->failed = true;
			return;
		}
		if (b->s && (size_t)n < room) {
			b->len += (size_t)n;
			return;
		}
		size_t cap = b->cap ? b->cap : 4096;
		while (cap - b->len <= (size_t)n)
			cap *= 2;
		char *s = realloc(b->s, cap);
		if (!s) {
			b->failed = true;
			return;
		}
		b->s = s;
		b->cap = cap;
	}
}

static char *sb_done(struct sbuf *b)
{
	if (b->failed || !b->s) {
		free(b->s);
		return NULL;
	}
	return b->s;
}

char *ncm_read_filter(const struct ncm_model *m)
{
	struct sbuf b = { 0 };
	sb_add(&b, "<%s xmlns=\"%s\"/>", m->container, m->ns);
	return sb_done(&b);
}

char *ncm_probe_filter(const struct ncm_model *m)
{
	struct sbuf b = { 0 };
	sb_add(&b, "<%s xmlns=\"%s\"><%s><%s>0</%s></%s></%s>", m->container, m->ns, m->list,
	       m->ingress, m->ingress, m->list, m->container);
	return sb_done(&b);
}

static int xc_cmp(const void *x, const void *y)
{
	const struct ocs_xc *a = x, *b = y;
	if (a->a != b->a)
		return a->a < b->a ? -1 : 1;
	return a->b < b->b ? -1 : a->b > b->b;
}

static void add_remove(struct sbuf *b, const struct ncm_model *m, uint32_t ingress)
{
	sb_add(b, "<%s nc:operation=\"remove\"><%s>%u</%s></%s>", m->list, m->ingress, ingress,
	       m->ingress, m->list);
}

static void add_pair(struct sbuf *b, const struct ncm_model *m, uint32_t ingress, uint64_t egress)
{
	sb_add(b, "<%s><%s>%u</%s><%s>%llu</%s></%s>", m->list, m->ingress, ingress, m->ingress,
	       m->egress, (unsigned long long)egress, m->egress, m->list);
}

char *ncm_edit_config(const struct ncm_model *m, uint32_t ports, const struct ocs_batch *batch,
                      const struct ocs_xc *held_reversed, size_t nreversed)
{
	struct sbuf b = { 0 };
	sb_add(&b, "<%s xmlns=\"%s\" xmlns:nc=\"" NC_BASE_NS "\">", m->container, m->ns);
	for (size_t i = 0; i < batch->ndel; i++) {
		const struct ocs_xc *x = &batch->del[i];
		if (x->a == 0 || x->a == x->b) {
			/* A pair without an egress, or from a port to itself: one port's. */
			add_remove(&b, m, x->b);
			continue;
		}
		if (m->one_way) {
			add_remove(&b, m, x->a);
			add_remove(&b, m, x->b);
			continue;
		}
		bool reversed =
		    nreversed && bsearch(x, held_reversed, nreversed, sizeof(*x), xc_cmp) != NULL;
		add_remove(&b, m, reversed ? x->b : x->a);
	}
	for (size_t i = 0; i < batch->nadd; i++) {
		const struct ocs_xc *x = &batch->add[i];
		if (m->one_way) {
			add_pair(&b, m, x->a, (uint64_t)x->b + ports);
			add_pair(&b, m, x->b, (uint64_t)x->a + ports);
		} else {
			add_pair(&b, m, x->a, x->b);
		}
	}
	sb_add(&b, "</%s>", m->container);
	return sb_done(&b);
}

/* ---- what comes back ----------------------------------------------------- */

static const char *node_ns(const struct lyd_node *n)
{
	if (n->schema)
		return n->schema->module->ns;
	const struct lyd_node_opaq *o = (const struct lyd_node_opaq *)n;
	return o->format == LY_VALUE_XML ? o->name.module_ns : NULL;
}

static bool is_node(const struct lyd_node *n, const char *name, const char *ns)
{
	const char *nns = node_ns(n);
	return strcmp(LYD_NAME(n), name) == 0 && nns && strcmp(nns, ns) == 0;
}

static const struct lyd_node *child_named(const struct lyd_node *parent, const char *name,
                                          const char *ns)
{
	for (const struct lyd_node *c = lyd_child(parent); c; c = c->next) {
		if (is_node(c, name, ns))
			return c;
	}
	return NULL;
}

/* A port number as a leaf's text: decimal, 1..2^32-1, nothing else. */
static bool port_value(const struct lyd_node *leaf, uint32_t *out)
{
	const char *s = leaf ? lyd_get_value(leaf) : NULL;
	uint64_t v;
	if (!s || !decimal(s, strlen(s), UINT32_MAX, &v))
		return false;
	*out = (uint32_t)v;
	return true;
}

void ncm_pairs_free(struct ncm_pairs *p)
{
	free(p->xcs);
	free(p->reversed);
	free(p->partial);
	free(p->foreign);
	memset(p, 0, sizeof(*p));
}

static int grow(void *pv, size_t n, size_t *cap, size_t size)
{
	void **p = pv;
	if (n < *cap)
		return 0;
	size_t c = *cap ? *cap * 2 : 64;
	void *q = realloc(*p, c * size);
	if (!q)
		return -ENOMEM;
	*p = q;
	*cap = c;
	return 0;
}

/* The growing arrays of a read, and their capacities. */
struct reading {
	struct ncm_pairs *out;
	size_t cap_xcs, cap_reversed, cap_partial, cap_foreign;
	struct ocs_flow *halves; /* one-way: pairs within the unit, as ofcd's ports */
	size_t nhalves, cap_halves;
};

static int push_flow(struct ocs_flow **v, size_t *n, size_t *cap, uint32_t in, uint32_t out)
{
	if (grow(v, *n, cap, sizeof(**v)) < 0)
		return -ENOMEM;
	(*v)[(*n)++] = (struct ocs_flow){ in, out };
	return 0;
}

static int push_xc(struct ocs_xc **v, size_t *n, size_t *cap, uint32_t a, uint32_t b)
{
	if (grow(v, *n, cap, sizeof(**v)) < 0)
		return -ENOMEM;
	(*v)[(*n)++] = (struct ocs_xc){ a, b };
	return 0;
}

/* One pair, ingress in and egress eg (0: none), of a unit of ports ports. */
static int read_pair(struct reading *r, const struct ncm_model *m, uint32_t ports, uint32_t in,
                     uint32_t eg)
{
	struct ncm_pairs *o = r->out;
	if (m->one_way) {
		if (in > ports || (eg && (eg <= ports || eg - ports > ports)))
			return push_flow(&o->foreign, &o->nforeign, &r->cap_foreign, in, eg);
		if (!eg || eg - ports == in)
			return push_flow(&o->partial, &o->npartial, &r->cap_partial, in,
			                 eg ? in : 0);
		return push_flow(&r->halves, &r->nhalves, &r->cap_halves, in, eg - ports);
	}
	if (in > ports || eg > ports)
		return push_flow(&o->foreign, &o->nforeign, &r->cap_foreign, in, eg);
	if (!eg || eg == in)
		return push_flow(&o->partial, &o->npartial, &r->cap_partial, in, eg);
	uint32_t a = in < eg ? in : eg, b = in < eg ? eg : in;
	if (push_xc(&o->xcs, &o->nxcs, &r->cap_xcs, a, b) < 0)
		return -ENOMEM;
	return in > eg ? push_xc(&o->reversed, &o->nreversed, &r->cap_reversed, a, b) : 0;
}

/* Adds the pairs of one cross-connects container. */
static int read_container(const struct lyd_node *cc, const struct ncm_model *m, uint32_t ports,
                          struct reading *r, char *err, size_t errlen)
{
	for (const struct lyd_node *e = lyd_child(cc); e; e = e->next) {
		if (!is_node(e, m->list, m->ns))
			continue;
		uint32_t in, eg = 0;
		const struct lyd_node *egress = child_named(e, m->egress, m->ns);
		if (!port_value(child_named(e, m->ingress, m->ns), &in) ||
		    (egress && !port_value(egress, &eg))) {
			snprintf(err, errlen, "netconf: a %s without a port number as its %s or %s",
			         m->list, m->ingress, m->egress);
			return -EPROTO;
		}
		if (read_pair(r, m, ports, in, eg) < 0)
			return -ENOMEM;
	}
	return 0;
}

static int flow_cmp(const void *x, const void *y)
{
	const struct ocs_flow *a = x, *b = y;
	if (a->in_port != b->in_port)
		return a->in_port < b->in_port ? -1 : 1;
	return a->out_port < b->out_port ? -1 : a->out_port > b->out_port;
}

/* One-way: a circuit where both ways are held, the rest partial. */
static int pair_halves(struct reading *r)
{
	struct ncm_pairs *o = r->out;
	if (r->nhalves)
		qsort(r->halves, r->nhalves, sizeof(*r->halves), flow_cmp);
	for (size_t i = 0; i < r->nhalves; i++) {
		const struct ocs_flow *h = &r->halves[i];
		struct ocs_flow back = { h->out_port, h->in_port };
		bool both = bsearch(&back, r->halves, r->nhalves, sizeof(back), flow_cmp) != NULL;
		int rc = 0;
		if (!both)
			rc = push_flow(&o->partial, &o->npartial, &r->cap_partial, h->in_port,
			               h->out_port);
		else if (h->in_port < h->out_port)
			rc = push_xc(&o->xcs, &o->nxcs, &r->cap_xcs, h->in_port, h->out_port);
		if (rc < 0)
			return rc;
	}
	return 0;
}

int ncm_read_pairs(const struct lyd_node *op, const struct ncm_model *m, uint32_t ports,
                   struct ncm_pairs *out, char *err, size_t errlen)
{
	struct reading r = { .out = out };
	int rc = 0;
	memset(out, 0, sizeof(*out));
	const struct lyd_node *data = op ? child_named(op, "data", NC_BASE_NS) : NULL;
	if (!data) {
		/* a server that holds nothing may send no <data> at all */
		return 0;
	}
	/* <data> is anyxml in ietf-netconf (libnetconf2's replies), a plain node without it */
	const struct lyd_node *first = lyd_child(data);
	if (data->schema && (data->schema->nodetype & LYD_NODE_ANY)) {
		const struct lyd_node_any *any = (const struct lyd_node_any *)data;
		if (any->value_type != LYD_ANYDATA_DATATREE) {
			snprintf(err, errlen, "netconf: get-config data came as text, not a tree");
			return -EPROTO;
		}
		first = any->value.tree;
	}
	for (const struct lyd_node *n = first; n && !rc; n = n->next) {
		if (is_node(n, m->container, m->ns))
			rc = read_container(n, m, ports, &r, err, errlen);
	}
	if (rc == 0)
		rc = pair_halves(&r);
	free(r.halves);
	if (rc < 0) {
		if (rc == -ENOMEM)
			snprintf(err, errlen, "netconf: out of memory");
		ncm_pairs_free(out);
		return rc;
	}
	if (out->nreversed)
		qsort(out->reversed, out->nreversed, sizeof(*out->reversed), xc_cmp);
	return 0;
}

static const char *leaf_text(const struct lyd_node *parent, const char *name)
{
	const struct lyd_node *n = child_named(parent, name, NC_BASE_NS);
	const char *v = n ? lyd_get_value(n) : NULL;
	return v ? v : "";
}

static const struct lyd_node *reply_child(const struct lyd_node *envp, const char *name)
{
	if (!envp || !is_node(envp, "rpc-reply", NC_BASE_NS))
		return NULL;
	return child_named(envp, name, NC_BASE_NS);
}

bool ncm_reply_error(const struct lyd_node *envp, char *buf, size_t len)
{
	const struct lyd_node *e = reply_child(envp, "rpc-error");
	if (!e)
		return false;
	const char *tag = leaf_text(e, "error-tag"), *msg = leaf_text(e, "error-message");
	const char *path = leaf_text(e, "error-path");
	snprintf(buf, len, "%s: %s%s%s%s", *tag ? tag : "error",
	         *msg ? msg : "(the server gave no message)", *path ? " (at " : "", path,
	         *path ? ")" : "");
	return true;
}

bool ncm_reply_ok(const struct lyd_node *envp)
{
	return reply_child(envp, "ok") != NULL;
}

int ncm_lock_holder(const struct lyd_node *envp, uint32_t *sid)
{
	const struct lyd_node *e = reply_child(envp, "rpc-error");
	const struct lyd_node *info = e ? child_named(e, "error-info", NC_BASE_NS) : NULL;
	const char *v = info ? leaf_text(info, "session-id") : "";
	uint64_t n;
	if (!decimal(v, strlen(v), UINT32_MAX, &n))
		return -ENOENT;
	*sid = (uint32_t)n;
	return 0;
}
