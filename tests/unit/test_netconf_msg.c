/*
 * The netconf driver's messages (netconf_msg.h) without a server: endpoints,
 * models, the edit-config of a batch, and the reading of replies as netconfd
 * sends them (the texts below were captured from netconfd 2.13), parsed as
 * libnetconf2 parses a reply (lyd_parse_op, LYD_TYPE_REPLY_NETCONF, with
 * ietf-netconf from the modules Debian's netconfd package installs).
 * tests/fuzz/seeds.py takes the reply texts as the fuzzer's seeds.
 */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>
#include <libyang/libyang.h>

#include "netconf_msg.h"

#define REPLY_DATA                                                                                 \
	"<rpc-reply xmlns=\"urn:ietf:params:xml:ns:netconf:base:1.0\" message-id=\"3\">"           \
	"<data><cross-connects xmlns=\"urn:ofcd:yang:optical-switch\">"                            \
	"<pair><ingress>1</ingress><egress>2</egress></pair>"                                      \
	"<pair><ingress>9</ingress><egress>4</egress></pair>"                                      \
	"<pair><ingress>5</ingress></pair>"                                                        \
	"</cross-connects>"                                                                        \
	"<cross-connects xmlns=\"http://www.polatis.com/yang/optical-switch\">"                    \
	"<pair><ingress>6</ingress><egress>7</egress></pair></cross-connects>"                     \
	"</data></rpc-reply>"

#define REPLY_ERROR                                                                                \
	"<rpc-reply xmlns=\"urn:ietf:params:xml:ns:netconf:base:1.0\" message-id=\"25\">"          \
	"<rpc-error><error-type>application</error-type><error-tag>operation-failed</error-tag>"   \
	"<error-severity>error</error-severity><error-app-tag>data-not-unique</error-app-tag>"     \
	"<error-path>/oxc:cross-connects/oxc:pair[oxc:ingress='1']</error-path>"                   \
	"<error-message xml:lang=\"en\">unique-stmt test failed</error-message>"                   \
	"</rpc-error></rpc-reply>"

#define REPLY_LOCK_DENIED                                                                          \
	"<rpc-reply xmlns=\"urn:ietf:params:xml:ns:netconf:base:1.0\" message-id=\"2\">"           \
	"<rpc-error><error-type>protocol</error-type><error-tag>lock-denied</error-tag>"           \
	"<error-severity>error</error-severity>"                                                   \
	"<error-message xml:lang=\"en\">lock denied</error-message>"                               \
	"<error-info><session-id>7</session-id></error-info></rpc-error></rpc-reply>"

#define REPLY_OK                                                                                   \
	"<rpc-reply xmlns=\"urn:ietf:params:xml:ns:netconf:base:1.0\" message-id=\"4\"><ok/>"      \
	"</rpc-reply>"

#define REPLY_BAD_PORT                                                                             \
	"<rpc-reply xmlns=\"urn:ietf:params:xml:ns:netconf:base:1.0\" message-id=\"5\">"           \
	"<data><cross-connects xmlns=\"urn:ofcd:yang:optical-switch\">"                            \
	"<pair><ingress>1</ingress><egress>99</egress></pair>"                                     \
	"</cross-connects></data></rpc-reply>"

#define NETCONF_MODULES "/usr/share/yuma/modules/ietf"

/* A reply as libnetconf2 hands it over: its envelope, and the operation it answers. */
struct reply {
	struct lyd_node *envp;
	struct lyd_node *op;
};

#define REPLY_NOT_A_PORT                                                                           \
	"<rpc-reply xmlns=\"urn:ietf:params:xml:ns:netconf:base:1.0\" message-id=\"6\">"           \
	"<data><cross-connects xmlns=\"urn:ofcd:yang:optical-switch\">"                            \
	"<pair><ingress>1</ingress><egress>x</egress></pair>"                                      \
	"</cross-connects></data></rpc-reply>"

#define REPLY_ONE_WAY                                                                              \
	"<rpc-reply xmlns=\"urn:ietf:params:xml:ns:netconf:base:1.0\" message-id=\"7\">"           \
	"<data><cross-connects xmlns=\"urn:ofcd:yang:optical-switch\">"                            \
	"<pair><ingress>1</ingress><egress>10</egress></pair>"                                     \
	"<pair><ingress>2</ingress><egress>9</egress></pair>"                                      \
	"<pair><ingress>3</ingress><egress>12</egress></pair>"                                     \
	"<pair><ingress>5</ingress><egress>7</egress></pair>"                                      \
	"</cross-connects></data></rpc-reply>"

static struct reply parse(struct ly_ctx *ctx, const char *xml)
{
	struct reply r = { 0 };
	struct ly_in *in = NULL;
	const struct lys_module *nc = ly_ctx_get_module_implemented(ctx, "ietf-netconf");
	assert_int_equal(lyd_new_inner(NULL, nc, "get-config", 0, &r.op), LY_SUCCESS);
	assert_int_equal(ly_in_new_memory(xml, &in), LY_SUCCESS);
	assert_int_equal(
	    lyd_parse_op(ctx, r.op, in, LYD_XML, LYD_TYPE_REPLY_NETCONF, &r.envp, NULL),
	    LY_SUCCESS);
	ly_in_free(in, 0);
	return r;
}

static void reply_free(struct reply *r)
{
	lyd_free_all(r->envp);
	lyd_free_all(r->op);
}

static int setup(void **state)
{
	struct ly_ctx *ctx;
	ly_log_options(0);
	if (ly_ctx_new(NETCONF_MODULES, 0, &ctx) != LY_SUCCESS)
		return -1;
	if (!ly_ctx_load_module(ctx, "ietf-netconf", NULL, NULL)) {
		fprintf(stderr, "no ietf-netconf in %s (packaging/deps.sh installs netconfd)\n",
		        NETCONF_MODULES);
		ly_ctx_destroy(ctx);
		return -1;
	}
	*state = ctx;
	return 0;
}

static int teardown(void **state)
{
	ly_ctx_destroy(*state);
	return 0;
}

static void test_endpoints(void **state)
{
	struct ncm_endpoint ep;
	char err[200];
	static const char *const bad[] = {
		"",
		"tcp:127.0.0.1:830",
		"netconf://127.0.0.1:830",
		"netconf://@h",
		"netconf://user@",
		"netconf://user@h:0",
		"netconf://user@h:65536",
		"netconf://user@h:8x",
		"netconf://user@[::1",
		"netconf://user@[::1]x",
		"netconf://us er@h",
		"netconf://user@h/x",
	};
	(void)state;
	assert_int_equal(
	    ncm_parse_endpoint("netconf://admin@ocs1.example:2022", &ep, err, sizeof(err)), 0);
	assert_string_equal(ep.user, "admin");
	assert_string_equal(ep.host, "ocs1.example");
	assert_int_equal(ep.port, 2022);
	assert_int_equal(ncm_parse_endpoint("netconf://root@10.0.0.1", &ep, err, sizeof(err)), 0);
	assert_int_equal(ep.port, 830);
	assert_int_equal(ncm_parse_endpoint("netconf://ofcd@[fe80::1]:830", &ep, err, sizeof(err)),
	                 0);
	assert_string_equal(ep.host, "fe80::1");
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		err[0] = '\0';
		assert_int_equal(ncm_parse_endpoint(bad[i], &ep, err, sizeof(err)), -EINVAL);
		assert_non_null(strstr(err, "netconf:"));
	}
}

static void test_models(void **state)
{
	struct ncm_model m;
	char err[200];
	(void)state;
	assert_int_equal(ncm_model_parse("polatis", &m, err, sizeof(err)), 0);
	assert_string_equal(m.ns, "http://www.polatis.com/yang/optical-switch");
	assert_string_equal(m.list, "pair");
	assert_int_equal(ncm_model_parse(" urn:x:oxc  xconnects xc in out ", &m, err, sizeof(err)),
	                 0);
	assert_string_equal(m.ns, "urn:x:oxc");
	assert_string_equal(m.container, "xconnects");
	assert_string_equal(m.list, "xc");
	assert_string_equal(m.ingress, "in");
	assert_string_equal(m.egress, "out");
	assert_false(m.one_way);
	assert_int_equal(
	    ncm_model_parse("urn:x:oxc xconnects xc in out one-way", &m, err, sizeof(err)), 0);
	assert_true(m.one_way);
	assert_int_equal(ncm_model_parse("urn:x a b c d two-way", &m, err, sizeof(err)), -EINVAL);
	assert_int_equal(ncm_model_parse("nope", &m, err, sizeof(err)), -EINVAL);
	assert_non_null(strstr(err, "ofcd, polatis"));
	assert_int_equal(ncm_model_parse("urn:x a b c", &m, err, sizeof(err)), -EINVAL);
	assert_int_equal(ncm_model_parse("urn:x a b c d e", &m, err, sizeof(err)), -EINVAL);
	assert_int_equal(ncm_model_parse("urn:\"x a b c d", &m, err, sizeof(err)), -EINVAL);
	assert_int_equal(ncm_model_parse("urn:x a<b b c d", &m, err, sizeof(err)), -EINVAL);
	assert_int_equal(ncm_model_parse("urn:x 1a b c d", &m, err, sizeof(err)), -EINVAL);
}

static void test_edit_config(void **state)
{
	struct ncm_model m;
	char err[200];
	const struct ocs_xc del[] = { { 1, 2 }, { 4, 9 } }, add[] = { { 3, 5 } };
	const struct ocs_xc reversed[] = { { 4, 9 } };
	struct ocs_batch b = { .del = del, .ndel = 2, .add = add, .nadd = 1 };
	(void)state;
	assert_int_equal(ncm_model_parse("ofcd", &m, err, sizeof(err)), 0);
	char *xml = ncm_edit_config(&m, 16, &b, reversed, 1);
	assert_non_null(xml);
	assert_string_equal(xml,
	                    "<cross-connects xmlns=\"urn:ofcd:yang:optical-switch\" "
	                    "xmlns:nc=\"urn:ietf:params:xml:ns:netconf:base:1.0\">"
	                    "<pair nc:operation=\"remove\"><ingress>1</ingress></pair>"
	                    /* held as ingress 9, egress 4: removed by the key it is held under */
	                    "<pair nc:operation=\"remove\"><ingress>9</ingress></pair>"
	                    "<pair><ingress>3</ingress><egress>5</egress></pair></cross-connects>");
	free(xml);
	/* one way: a circuit is a pair each way, the egress side numbered after the ingress side */
	assert_int_equal(ncm_model_parse("polatis", &m, err, sizeof(err)), 0);
	assert_true(m.one_way);
	b.ndel = 1;
	xml = ncm_edit_config(&m, 16, &b, NULL, 0);
	assert_string_equal(
	    xml, "<cross-connects xmlns=\"http://www.polatis.com/yang/optical-switch\" "
	         "xmlns:nc=\"urn:ietf:params:xml:ns:netconf:base:1.0\">"
	         "<pair nc:operation=\"remove\"><ingress>1</ingress></pair>"
	         "<pair nc:operation=\"remove\"><ingress>2</ingress></pair>"
	         "<pair><ingress>3</ingress><egress>21</egress></pair>"
	         "<pair><ingress>5</ingress><egress>19</egress></pair></cross-connects>");
	free(xml);
	/* A pair without an egress, or from a port to itself: removed by its one port. */
	const struct ocs_xc odd[] = { { 0, 7 }, { 4, 4 } };
	struct ocs_batch ob = { .del = odd, .ndel = 2 };
	xml = ncm_edit_config(&m, 16, &ob, NULL, 0);
	assert_string_equal(
	    xml, "<cross-connects xmlns=\"http://www.polatis.com/yang/optical-switch\" "
	         "xmlns:nc=\"urn:ietf:params:xml:ns:netconf:base:1.0\">"
	         "<pair nc:operation=\"remove\"><ingress>7</ingress></pair>"
	         "<pair nc:operation=\"remove\"><ingress>4</ingress></pair></cross-connects>");
	free(xml);
	assert_int_equal(ncm_model_parse("ofcd", &m, err, sizeof(err)), 0);
	char *filter = ncm_read_filter(&m);
	assert_string_equal(filter, "<cross-connects xmlns=\"urn:ofcd:yang:optical-switch\"/>");
	free(filter);
	filter = ncm_probe_filter(&m);
	assert_string_equal(filter, "<cross-connects xmlns=\"urn:ofcd:yang:optical-switch\">"
	                            "<pair><ingress>0</ingress></pair></cross-connects>");
	free(filter);
}

static void test_read_pairs(void **state)
{
	struct ncm_model m;
	struct ncm_pairs p;
	char err[200];
	struct reply t = parse(*state, REPLY_DATA);
	assert_int_equal(ncm_model_parse("ofcd", &m, err, sizeof(err)), 0);
	assert_int_equal(ncm_read_pairs(t.op, &m, 16, &p, err, sizeof(err)), 0);
	/* the other vendor's container is not ours */
	assert_int_equal(p.nxcs, 2);
	assert_int_equal(p.xcs[0].a, 1);
	assert_int_equal(p.xcs[0].b, 2);
	assert_int_equal(p.xcs[1].a, 4);
	assert_int_equal(p.xcs[1].b, 9);
	assert_int_equal(p.nreversed, 1);
	assert_int_equal(p.reversed[0].a, 4);
	assert_int_equal(p.npartial, 1);
	assert_int_equal(p.partial[0].in_port, 5);
	assert_int_equal(p.partial[0].out_port, 0);
	ncm_pairs_free(&p);
	assert_false(ncm_reply_ok(t.envp));
	assert_false(ncm_reply_error(t.envp, err, sizeof(err)));
	reply_free(&t);

	assert_int_equal(ncm_model_parse("polatis", &m, err, sizeof(err)), 0);
	t = parse(*state, REPLY_DATA);
	assert_int_equal(ncm_read_pairs(t.op, &m, 16, &p, err, sizeof(err)), 0);
	/* its container alone; one way, egress 7 is on the ingress side: not ofcd's */
	assert_int_equal(p.nxcs, 0);
	assert_int_equal(p.nforeign, 1);
	assert_int_equal(p.foreign[0].in_port, 6);
	ncm_pairs_free(&p);
	reply_free(&t);

	assert_int_equal(ncm_model_parse("ofcd", &m, err, sizeof(err)), 0);
	/* a port beyond the unit's is foreign: reported, never removed */
	t = parse(*state, REPLY_BAD_PORT);
	assert_int_equal(ncm_read_pairs(t.op, &m, 16, &p, err, sizeof(err)), 0);
	assert_int_equal(p.nxcs, 0);
	assert_int_equal(p.nforeign, 1);
	assert_int_equal(p.foreign[0].in_port, 1);
	assert_int_equal(p.foreign[0].out_port, 99);
	ncm_pairs_free(&p);
	reply_free(&t);

	/* a port that is no number makes the reply unreadable */
	t = parse(*state, REPLY_NOT_A_PORT);
	assert_int_equal(ncm_read_pairs(t.op, &m, 16, &p, err, sizeof(err)), -EPROTO);
	assert_non_null(strstr(err, "port number"));
	assert_null(p.xcs);
	reply_free(&t);

	/* one way, a unit of 8 ports: 1<->2 both ways, 3->4 alone, 5->7 beyond the egress side */
	assert_int_equal(ncm_model_parse("urn:ofcd:yang:optical-switch cross-connects pair "
	                                 "ingress egress one-way",
	                                 &m, err, sizeof(err)),
	                 0);
	t = parse(*state, REPLY_ONE_WAY);
	assert_int_equal(ncm_read_pairs(t.op, &m, 8, &p, err, sizeof(err)), 0);
	assert_int_equal(p.nxcs, 1);
	assert_int_equal(p.xcs[0].a, 1);
	assert_int_equal(p.xcs[0].b, 2);
	assert_int_equal(p.npartial, 1);
	assert_int_equal(p.partial[0].in_port, 3);
	assert_int_equal(p.partial[0].out_port, 4);
	assert_int_equal(p.nforeign, 1);
	assert_int_equal(p.foreign[0].in_port, 5);
	assert_int_equal(p.foreign[0].out_port, 7);
	ncm_pairs_free(&p);
	reply_free(&t);
	assert_int_equal(ncm_model_parse("ofcd", &m, err, sizeof(err)), 0);

	/* a reply with no <data> holds nothing */
	t = parse(*state, REPLY_OK);
	assert_int_equal(ncm_read_pairs(t.op, &m, 16, &p, err, sizeof(err)), 0);
	assert_int_equal(p.nxcs, 0);
	reply_free(&t);
}

static void test_replies(void **state)
{
	char text[300];
	uint32_t sid = 0;
	struct reply t = parse(*state, REPLY_ERROR);
	assert_true(ncm_reply_error(t.envp, text, sizeof(text)));
	assert_string_equal(text, "operation-failed: unique-stmt test failed (at "
	                          "/oxc:cross-connects/oxc:pair[oxc:ingress='1'])");
	assert_int_equal(ncm_lock_holder(t.envp, &sid), -ENOENT);
	assert_false(ncm_reply_ok(t.envp));
	reply_free(&t);

	t = parse(*state, REPLY_LOCK_DENIED);
	assert_true(ncm_reply_error(t.envp, text, sizeof(text)));
	assert_string_equal(text, "lock-denied: lock denied");
	assert_int_equal(ncm_lock_holder(t.envp, &sid), 0);
	assert_int_equal(sid, 7);
	reply_free(&t);

	t = parse(*state, REPLY_OK);
	assert_true(ncm_reply_ok(t.envp));
	assert_false(ncm_reply_error(t.envp, text, sizeof(text)));
	reply_free(&t);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_endpoints),   cmocka_unit_test(test_models),
		cmocka_unit_test(test_edit_config), cmocka_unit_test(test_read_pairs),
		cmocka_unit_test(test_replies),
	};
	return cmocka_run_group_tests(tests, setup, teardown);
}
