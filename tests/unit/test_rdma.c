/*
 * The RDMA inventory model: verbs attribute codes to JSON (speed and width to
 * Gb/s, MTU enums to bytes, GIDs and GUIDs, port state names), the strict
 * JSON parser and its errors, the event script, the recorded source on a real
 * event_base, the verbs source on this host, and the agent's configuration.
 */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>
#include <event2/event.h>

#include "agent.h"
#include "rdma.h"

static void test_speed_width(void **state)
{
	(void)state;
	static const struct {
		unsigned code;
		const char *name;
		double gbps;
	} speeds[] = {
		{ 1, "SDR", 2.5 },    { 2, "DDR", 5.0 },     { 4, "QDR", 10.0 },
		{ 8, "FDR10", 10.0 }, { 16, "FDR", 14.0 },   { 32, "EDR", 25.0 },
		{ 64, "HDR", 50.0 },  { 128, "NDR", 100.0 }, { 256, "XDR", 200.0 },
		{ 0, "unknown", 0 },  { 3, "unknown", 0 },   { 512, "unknown", 0 },
	};
	for (size_t i = 0; i < sizeof(speeds) / sizeof(speeds[0]); i++) {
		assert_string_equal(rdma_speed_name(speeds[i].code), speeds[i].name);
		assert_true(rdma_speed_lane_gbps(speeds[i].code) == speeds[i].gbps);
	}
	static const struct {
		unsigned code;
		const char *name;
		unsigned lanes;
	} widths[] = {
		{ 1, "1x", 1 },  { 2, "4x", 4 },      { 4, "8x", 8 },      { 8, "12x", 12 },
		{ 16, "2x", 2 }, { 0, "unknown", 0 }, { 3, "unknown", 0 },
	};
	for (size_t i = 0; i < sizeof(widths) / sizeof(widths[0]); i++) {
		assert_string_equal(rdma_width_name(widths[i].code), widths[i].name);
		assert_int_equal(rdma_width_lanes(widths[i].code), widths[i].lanes);
	}
	/* Link rates as ibv_devinfo's figures multiply out. */
	assert_true(rdma_rate_gbps(32, 2) == 100.0);  /* 4x EDR */
	assert_true(rdma_rate_gbps(64, 2) == 200.0);  /* 4x HDR */
	assert_true(rdma_rate_gbps(128, 2) == 400.0); /* 4x NDR */
	assert_true(rdma_rate_gbps(64, 16) == 100.0); /* 2x HDR */
	assert_true(rdma_rate_gbps(1, 1) == 2.5);     /* 1x SDR */
	assert_true(rdma_rate_gbps(4, 8) == 120.0);   /* 12x QDR */
	assert_true(rdma_rate_gbps(0, 2) == 0 && rdma_rate_gbps(32, 0) == 0);
}

static void test_mtu_states(void **state)
{
	(void)state;
	static const unsigned bytes[] = { 0, 256, 512, 1024, 2048, 4096, 0 };
	for (unsigned code = 0; code < 7; code++)
		assert_int_equal(rdma_mtu_bytes(code), bytes[code]);
	static const char *const ports[] = { "nop",    "down",         "init",   "armed",
		                             "active", "active_defer", "unknown" };
	for (unsigned s = 0; s < 7; s++)
		assert_string_equal(rdma_port_state_name(s), ports[s]);
	assert_string_equal(rdma_port_state_name(RDMA_CODE_UNKNOWN), "unknown");
	static const char *const phys[] = { "nop",      "sleep",   "polling",        "disabled",
		                            "training", "link_up", "error_recovery", "phy_test",
		                            "unknown" };
	for (unsigned s = 0; s < 9; s++)
		assert_string_equal(rdma_phys_state_name(s), phys[s]);
	assert_string_equal(rdma_link_layer_name(0), "unspecified");
	assert_string_equal(rdma_link_layer_name(1), "infiniband");
	assert_string_equal(rdma_link_layer_name(2), "ethernet");
	assert_string_equal(rdma_link_layer_name(3), "unknown");
}

static void test_gid_guid(void **state)
{
	(void)state;
	static const uint8_t raw[16] = { 0xfe, 0x80, 0,    0,    0,    0,    0,    0,
		                         0x00, 0x02, 0xc9, 0x03, 0x00, 0xf1, 0x23, 0x45 };
	char s[RDMA_GID_STRLEN];
	uint8_t back[16];
	rdma_gid_format(raw, s);
	assert_string_equal(s, "fe80:0000:0000:0000:0002:c903:00f1:2345");
	assert_int_equal(rdma_gid_parse(s, back), 0);
	assert_memory_equal(raw, back, 16);
	assert_int_equal(rdma_gid_parse("FE80:0000:0000:0000:0002:C903:00F1:2345", back), 0);
	assert_memory_equal(raw, back, 16);
	/* A RoCE v2 GID of an IPv4 address. */
	static const uint8_t v4[16] = { 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff, 10, 0, 0, 1 };
	rdma_gid_format(v4, s);
	assert_string_equal(s, "0000:0000:0000:0000:0000:ffff:0a00:0001");
	static const char *const bad[] = {
		"",
		"fe80::2:c903:f1:2345",
		"fe80:0000:0000:0000:0002:c903:00f1:234",
		"fe80:0000:0000:0000:0002:c903:00f1:23455",
		"fe80-0000:0000:0000:0002:c903:00f1:2345",
		"fe80:0000:0000:0000:0002:c903:00f1:234g",
		"fe80:0000:0000:0000:0002:c903:00f1:2345:",
	};
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
		assert_int_equal(rdma_gid_parse(bad[i], back), -EINVAL);
	assert_false(rdma_gid_is_zero(raw));
	static const uint8_t zero[16] = { 0 };
	assert_true(rdma_gid_is_zero(zero));

	char g[RDMA_GUID_STRLEN];
	uint64_t guid;
	rdma_guid_format(0x0002c90300f12345ull, g);
	assert_string_equal(g, "0002:c903:00f1:2345");
	assert_int_equal(rdma_guid_parse(g, &guid), 0);
	assert_true(guid == 0x0002c90300f12345ull);
	assert_int_equal(rdma_guid_parse("0002:c903:00f1", &guid), -EINVAL);
	assert_int_equal(rdma_guid_parse("0002:c903:00f1:234x", &guid), -EINVAL);
}

static const char inventory_text[] =
    "{\"rdma\": true, \"reason\": null, \"devices\": ["
    " {\"name\": \"mlx5_0\", \"pci\": \"0000:3b:00.0\", \"fw_ver\": \"20.31.1014\","
    "  \"node_guid\": \"0c42:a103:0065:7a1e\", \"vendor_id\": 713, \"vendor_part_id\": 4123,"
    "  \"phys_port_cnt\": 1, \"fatal\": false, \"error\": null, \"ports\": ["
    "   {\"port\": 1, \"state\": \"active\", \"phys_state\": \"link_up\", \"mtu\": 4096,"
    "    \"speed\": \"HDR\", \"lane_gbps\": 50, \"width\": \"4x\", \"rate_gbps\": 200,"
    "    \"link_layer\": \"infiniband\", \"gids\": ["
    "     {\"index\": 0, \"gid\": \"fe80:0000:0000:0000:0c42:a103:0065:7a1e\"}]}]},"
    " {\"name\": \"mlx5_1\", \"fw_ver\": \"\", \"node_guid\": \"0c42:a103:0065:7a1f\","
    "  \"vendor_id\": 713, \"vendor_part_id\": 4123, \"ports\": ["
    "   {\"port\": 1, \"state\": \"down\", \"phys_state\": \"polling\", \"mtu\": 1024,"
    "    \"speed\": \"SDR\", \"width\": \"1x\", \"link_layer\": \"ethernet\"},"
    "   {\"port\": 2, \"state\": \"unknown\", \"phys_state\": \"unknown\", \"mtu\": 0,"
    "    \"speed\": \"unknown\", \"width\": \"unknown\", \"link_layer\": \"unknown\"}]}]}";

static void test_json_round_trip(void **state)
{
	(void)state;
	struct rdma_inventory inv, copy;
	char field[192], err[256];
	json_t *j = json_loads(inventory_text, 0, NULL);
	assert_non_null(j);
	assert_int_equal(
	    rdma_inventory_from_json(j, 0, &inv, NULL, field, sizeof(field), err, sizeof(err)), 0);
	json_decref(j);
	assert_true(inv.rdma);
	assert_int_equal(inv.ndevices, 2);
	const struct rdma_device *d = rdma_inventory_device(&inv, "mlx5_0");
	assert_non_null(d);
	assert_string_equal(d->pci, "0000:3b:00.0");
	assert_true(d->node_guid == 0x0c42a10300657a1eull);
	assert_int_equal(d->ports[0].mtu, 5);
	assert_int_equal(d->ports[0].speed, 64);
	assert_int_equal(d->ports[0].width, 2);
	assert_int_equal(d->ports[0].ngids, 1);
	assert_int_equal(d->ports[0].index, -1);
	assert_true(rdma_port_is_up(d, &d->ports[0]));
	d = rdma_inventory_device(&inv, "mlx5_1");
	assert_int_equal(d->phys_port_cnt, 2); /* defaults to the ports listed */
	assert_false(rdma_port_is_up(d, &d->ports[0]));
	assert_int_equal(d->ports[1].state, RDMA_CODE_UNKNOWN);
	assert_null(rdma_device_port(d, 3));

	/* Output, parsed again, gives the same output: derived rates are recomputed. */
	assert_int_equal(rdma_inventory_copy(&copy, &inv), 0);
	json_t *out = rdma_inventory_to_json(&copy, 0);
	struct rdma_inventory again;
	assert_int_equal(
	    rdma_inventory_from_json(out, 0, &again, NULL, field, sizeof(field), err, sizeof(err)),
	    0);
	json_t *out2 = rdma_inventory_to_json(&again, 0);
	assert_true(json_equal(out, out2));
	json_t *p0 = json_array_get(
	    json_object_get(json_array_get(json_object_get(out, "devices"), 0), "ports"), 0);
	assert_true(json_real_value(json_object_get(p0, "rate_gbps")) == 200.0);
	assert_string_equal(json_string_value(json_object_get(p0, "state")), "active");
	assert_string_equal(json_string_value(json_object_get(
	                        json_array_get(json_object_get(p0, "gids"), 0), "gid")),
	                    "fe80:0000:0000:0000:0c42:a103:0065:7a1e");
	json_decref(out);
	json_decref(out2);
	rdma_inventory_free(&again);

	/* The report form carries the device index and the heartbeat interval. */
	copy.devices[0].ports[0].index = 3;
	out = rdma_inventory_to_json(&copy, RDMA_JSON_REPORT);
	json_object_set_new(out, "interval", json_integer(7));
	unsigned interval = 0;
	assert_int_equal(rdma_inventory_from_json(out, RDMA_JSON_REPORT, &again, &interval, field,
	                                          sizeof(field), err, sizeof(err)),
	                 0);
	assert_int_equal(interval, 7);
	assert_int_equal(again.devices[0].ports[0].index, 3);
	assert_int_equal(again.devices[1].ports[0].index, -1);
	rdma_inventory_free(&again);
	/* ... which the recorded form refuses. */
	assert_int_equal(
	    rdma_inventory_from_json(out, 0, &again, NULL, field, sizeof(field), err, sizeof(err)),
	    -EINVAL);
	assert_string_equal(field, "interval");
	json_decref(out);
	rdma_inventory_free(&copy);
	rdma_inventory_free(&inv);
}

/* Replaces the first occurrence of from in the sample inventory by to. */
static json_t *variant(const char *from, const char *to)
{
	char buf[4096];
	const char *at = strstr(inventory_text, from);
	assert_non_null(at);
	snprintf(buf, sizeof(buf), "%.*s%s%s", (int)(at - inventory_text), inventory_text, to,
	         at + strlen(from));
	json_t *j = json_loads(buf, 0, NULL);
	if (!j)
		fail_msg("variant %s -> %s is not JSON", from, to);
	return j;
}

static void test_json_errors(void **state)
{
	(void)state;
	static const struct {
		const char *from, *to;
		const char *field, *err;
	} cases[] = {
		{ "\"rdma\": true", "\"rdma\": \"yes\"", "rdma", "rdma must be true or false" },
		{ "\"rdma\": true", "\"rdma\": true, \"extra\": 1", "extra",
		  "unknown field extra" },
		{ "\"rdma\": true, \"reason\": null", "\"rdma\": false, \"reason\": null", "reason",
		  "reason is required" },
		{ "\"rdma\": true, \"reason\": null", "\"rdma\": false, \"reason\": \"none\"",
		  "devices", "devices must be empty when rdma is false" },
		{ "\"name\": \"mlx5_0\"", "\"name\": \"mlx5 0\"", "devices[0].name",
		  "devices[0].name must be characters" },
		{ "\"name\": \"mlx5_1\"", "\"name\": \"mlx5_0\"", "devices[1].name",
		  "devices[1].name: device mlx5_0 is listed twice" },
		{ "\"node_guid\": \"0c42:a103:0065:7a1e\"", "\"node_guid\": \"0c42a10300657a1e\"",
		  "devices[0].node_guid", "devices[0].node_guid must be 4 groups" },
		{ "\"vendor_id\": 713", "\"vendor_id\": -1", "devices[0].vendor_id",
		  "devices[0].vendor_id must be an integer from 0 to 4294967295" },
		{ "\"fw_ver\": \"20.31.1014\",", "", "devices[0].fw_ver",
		  "devices[0].fw_ver is required" },
		{ "\"port\": 1,", "\"port\": 0,", "devices[0].ports[0].port",
		  "devices[0].ports[0].port must be an integer from 1 to 255" },
		{ "\"port\": 2,", "\"port\": 1,", "devices[1].ports[1].port",
		  "devices[1].ports[1].port: port 1 is listed twice" },
		{ "\"state\": \"active\"", "\"state\": \"up\"", "devices[0].ports[0].state",
		  "devices[0].ports[0].state must be one of: nop, down, init, armed, active, "
		  "active_defer, unknown" },
		{ "\"mtu\": 4096", "\"mtu\": 1500", "devices[0].ports[0].mtu",
		  "devices[0].ports[0].mtu must be 256, 512, 1024, 2048, 4096 or 0" },
		{ "\"speed\": \"HDR\"", "\"speed\": 50", "devices[0].ports[0].speed",
		  "devices[0].ports[0].speed must be a string" },
		{ "\"width\": \"4x\"", "\"width\": \"3x\"", "devices[0].ports[0].width",
		  "devices[0].ports[0].width must be one of" },
		{ "\"rate_gbps\": 200", "\"rate_gbps\": \"200\"", "devices[0].ports[0].rate_gbps",
		  "devices[0].ports[0].rate_gbps must be a number" },
		{ "\"gid\": \"fe80:0000:0000:0000:0c42:a103:0065:7a1e\"", "\"gid\": \"fe80::1\"",
		  "devices[0].ports[0].gids[0].gid", "devices[0].ports[0].gids[0].gid must be 8" },
		{ "{\"index\": 0, \"gid\"", "{\"index\": 0, \"type\": 1, \"gid\"",
		  "devices[0].ports[0].gids[0].type", "unknown field" },
		{ "\"state\": \"active\"", "\"state\": \"active\", \"index\": 0",
		  "devices[0].ports[0].index", "unknown field devices[0].ports[0].index" },
	};
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		struct rdma_inventory inv;
		char field[192], err[256];
		json_t *j = variant(cases[i].from, cases[i].to);
		int rc = rdma_inventory_from_json(j, 0, &inv, NULL, field, sizeof(field), err,
		                                  sizeof(err));
		json_decref(j);
		if (rc != -EINVAL || strcmp(field, cases[i].field) != 0 ||
		    strncmp(err, cases[i].err, strlen(cases[i].err)) != 0)
			fail_msg(
			    "case %zu: rc %d, field \"%s\", message \"%s\"; want \"%s\", \"%s\"", i,
			    rc, field, err, cases[i].field, cases[i].err);
		assert_int_equal(inv.ndevices, 0);
	}

	/* Bounds: devices, ports and GIDs. */
	struct rdma_inventory inv;
	char field[192], err[256];
	json_t *j = json_pack("{s:b, s:[]}", "rdma", 1, "devices");
	for (int i = 0; i <= RDMA_MAX_DEVICES; i++)
		json_array_append_new(json_object_get(j, "devices"), json_object());
	assert_int_equal(
	    rdma_inventory_from_json(j, 0, &inv, NULL, field, sizeof(field), err, sizeof(err)),
	    -EINVAL);
	assert_string_equal(field, "devices");
	json_decref(j);
	j = variant("\"gids\": [", "\"gids\": [");
	json_t *gids = json_object_get(
	    json_array_get(
	        json_object_get(json_array_get(json_object_get(j, "devices"), 0), "ports"), 0),
	    "gids");
	for (int i = 1; i <= RDMA_MAX_GIDS; i++)
		json_array_append_new(gids, json_pack("{s:i, s:s}", "index", i, "gid",
		                                      "fe80:0000:0000:0000:0000:0000:0000:0001"));
	assert_int_equal(
	    rdma_inventory_from_json(j, 0, &inv, NULL, field, sizeof(field), err, sizeof(err)),
	    -EINVAL);
	assert_string_equal(field, "devices[0].ports[0].gids");
	assert_string_equal(err, "devices[0].ports[0].gids has 65 entries, at most 64 are allowed");
	json_decref(j);
	j = json_loads("[]", 0, NULL);
	assert_int_equal(
	    rdma_inventory_from_json(j, 0, &inv, NULL, field, sizeof(field), err, sizeof(err)),
	    -EINVAL);
	json_decref(j);
}

static void load_sample(struct rdma_inventory *inv)
{
	char field[192], err[256];
	json_t *j = json_loads(inventory_text, 0, NULL);
	assert_int_equal(
	    rdma_inventory_from_json(j, 0, inv, NULL, field, sizeof(field), err, sizeof(err)), 0);
	json_decref(j);
}

static void test_script(void **state)
{
	(void)state;
	struct rdma_inventory inv;
	struct rdma_script_event *ev;
	size_t n;
	char err[256];

	load_sample(&inv);
	assert_int_equal(rdma_script_parse("# a comment\n\n100 mlx5_0 1 port_err\n"
	                                   "100 mlx5_1 2 port_active # same time\n"
	                                   "  2500\tmlx5_0 0 device_fatal\n",
	                                   "s.txt", &inv, &ev, &n, err, sizeof(err)),
	                 0);
	assert_int_equal(n, 3);
	assert_int_equal(ev[0].at_ms, 100);
	assert_string_equal(ev[0].device, "mlx5_0");
	assert_int_equal(ev[0].kind, RDMA_EV_PORT_ERR);
	assert_int_equal(ev[1].port, 2);
	assert_int_equal(ev[2].kind, RDMA_EV_DEVICE_FATAL);
	assert_int_equal(ev[2].at_ms, 2500);

	struct rdma_device *d0 = rdma_inventory_device(&inv, "mlx5_0");
	assert_int_equal(rdma_script_apply(&inv, &ev[0]), 0);
	assert_false(rdma_port_is_up(d0, &d0->ports[0]));
	assert_string_equal(rdma_phys_state_name(d0->ports[0].phys_state), "polling");
	assert_int_equal(rdma_script_apply(&inv, &ev[1]), 0);
	assert_string_equal(rdma_port_state_name(inv.devices[1].ports[1].state), "active");
	struct rdma_script_event up = ev[0];
	up.kind = RDMA_EV_PORT_ACTIVE;
	assert_int_equal(rdma_script_apply(&inv, &up), 0);
	assert_true(rdma_port_is_up(d0, &d0->ports[0]));
	assert_int_equal(rdma_script_apply(&inv, &ev[2]), 0);
	assert_true(d0->fatal);
	assert_false(rdma_port_is_up(d0, &d0->ports[0]));
	free(ev);

	static const struct {
		const char *text, *err;
	} bad[] = {
		{ "100 mlx5_0 1\n", "s.txt:1: expected DELAY_MS DEVICE PORT EVENT" },
		{ "\n100 mlx5_0 1 port_err extra\n",
		  "s.txt:2: expected DELAY_MS DEVICE PORT EVENT" },
		{ "-5 mlx5_0 1 port_err\n", "s.txt:1: DELAY_MS must be milliseconds" },
		{ "1s mlx5_0 1 port_err\n", "s.txt:1: DELAY_MS must be milliseconds" },
		{ "200 mlx5_0 1 port_err\n100 mlx5_0 1 port_active\n",
		  "s.txt:2: DELAY_MS 100 is before the previous line's 200" },
		{ "100 mlx5_9 1 port_err\n",
		  "s.txt:1: no device mlx5_9 in the recorded inventory" },
		{ "100 mlx5_0 2 port_err\n", "s.txt:1: device mlx5_0 has no port 2" },
		{ "100 mlx5_0 x port_err\n", "s.txt:1: PORT must be a number" },
		{ "100 mlx5_0 1 port_down\n", "s.txt:1: EVENT must be port_err, port_active or "
		                              "device_fatal, not \"port_down\"" },
	};
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		int rc = rdma_script_parse(bad[i].text, "s.txt", &inv, &ev, &n, err, sizeof(err));
		if (rc != -EINVAL || strncmp(err, bad[i].err, strlen(bad[i].err)) != 0)
			fail_msg("case %zu: rc %d, \"%s\", want \"%s\"", i, rc, err, bad[i].err);
		assert_null(ev);
	}
	rdma_inventory_free(&inv);
}

struct seen {
	char log[256];
	struct event_base *base;
	const struct rdma_source_ops *ops;
	struct rdma_source *src;
	int events;
	bool up_after_err; /* what a query inside the callback saw */
};

static void on_event(void *arg, const char *device, unsigned port, enum rdma_event_kind kind)
{
	struct seen *s = arg;
	struct rdma_inventory inv;
	size_t l = strlen(s->log);
	snprintf(s->log + l, sizeof(s->log) - l, "%s:%u:%s;", device, port, rdma_event_name(kind));
	assert_int_equal(s->ops->query(s->src, &inv), 0);
	const struct rdma_device *d = rdma_inventory_device(&inv, device);
	if (kind == RDMA_EV_PORT_ERR)
		s->up_after_err = rdma_port_is_up(d, rdma_device_port(d, port));
	rdma_inventory_free(&inv);
	if (++s->events == 3)
		event_base_loopbreak(s->base);
}

static void write_file(const char *path, const char *text)
{
	FILE *f = fopen(path, "w");
	assert_non_null(f);
	fputs(text, f);
	fclose(f);
}

static void test_recorded_source(void **state)
{
	(void)state;
	char dir[] = "/tmp/test_rdma.XXXXXX", inv_path[64], ev_path[64], err[512];
	assert_non_null(mkdtemp(dir));
	snprintf(inv_path, sizeof(inv_path), "%s/inv.json", dir);
	snprintf(ev_path, sizeof(ev_path), "%s/events.txt", dir);
	write_file(inv_path, inventory_text);
	write_file(ev_path, "10 mlx5_0 1 port_err\n30 mlx5_0 1 port_active\n30 mlx5_1 0 "
	                    "device_fatal\n");

	struct seen s = { .base = event_base_new(), .ops = rdma_source_find("recorded") };
	struct rdma_source_conf conf = { .inventory_path = inv_path, .events_path = ev_path };
	assert_non_null(s.ops);
	assert_int_equal(s.ops->open(s.base, &conf, on_event, &s, &s.src, err, sizeof(err)), 0);
	struct timeval limit = { 5, 0 };
	event_base_loopexit(s.base, &limit);
	event_base_dispatch(s.base);
	assert_string_equal(s.log, "mlx5_0:1:port_err;mlx5_0:1:port_active;mlx5_1:0:device_fatal;");
	assert_false(s.up_after_err);
	struct rdma_inventory inv;
	assert_int_equal(s.ops->query(s.src, &inv), 0);
	assert_true(rdma_inventory_device(&inv, "mlx5_1")->fatal);
	assert_true(rdma_port_is_up(&inv.devices[0], &inv.devices[0].ports[0]));
	rdma_inventory_free(&inv);
	s.ops->close(s.src);

	/* Errors name the file, and the line or member. */
	write_file(ev_path, "10 mlx5_0 7 port_err\n");
	assert_int_equal(s.ops->open(s.base, &conf, on_event, &s, &s.src, err, sizeof(err)),
	                 -EINVAL);
	assert_non_null(strstr(err, "events.txt:1: device mlx5_0 has no port 7"));
	write_file(inv_path, "{\"rdma\": true, \"devices\": [{\"name\": 5}]}");
	assert_int_equal(s.ops->open(s.base, &conf, on_event, &s, &s.src, err, sizeof(err)),
	                 -EINVAL);
	assert_non_null(strstr(err, "inv.json: devices[0].name: devices[0].name must be a string"));
	write_file(inv_path, "{\"rdma\": tru");
	assert_int_equal(s.ops->open(s.base, &conf, on_event, &s, &s.src, err, sizeof(err)),
	                 -EINVAL);
	assert_non_null(strstr(err, "inv.json:1:"));
	unlink(inv_path);
	assert_true(s.ops->open(s.base, &conf, on_event, &s, &s.src, err, sizeof(err)) < 0);
	unlink(ev_path);
	rmdir(dir);
	event_base_free(s.base);
}

/* The real source on this host: whatever it finds, the answer is consistent. */
static void test_verbs_source(void **state)
{
	(void)state;
	struct rdma_inventory inv;
	assert_int_equal(rdma_verbs_read(&inv), 0);
	if (!inv.rdma) {
		assert_int_equal(inv.ndevices, 0);
		assert_true(strlen(inv.reason) > 10);
		assert_true(strncmp(inv.reason, "no RDMA device found", 20) == 0 ||
		            strncmp(inv.reason, "ibv_get_device_list failed: ", 28) == 0);
	}
	if (access("/sys/class/infiniband", F_OK) != 0)
		assert_false(inv.rdma);
	json_t *j = rdma_inventory_to_json(&inv, 0);
	assert_true(json_is_boolean(json_object_get(j, "rdma")));
	json_decref(j);
	rdma_inventory_free(&inv);
	assert_ptr_equal(rdma_source_find("verbs"), &rdma_verbs_source);
	assert_null(rdma_source_find("sysfs"));
}

static void test_agent_config(void **state)
{
	(void)state;
	struct agent_config cfg;
	char err[512];
	assert_int_equal(agent_config_load_string("[agent]\ncontroller = http://10.0.0.1:8470/\n"
	                                          "server = srv3\ntoken = 0123456789abcdef\n"
	                                          "heartbeat = 5\ndevice.1 = mlx5_1:1\n"
	                                          "device.0 = mlx5_0:1\n[log]\nlevel = debug\n",
	                                          "a.ini", &cfg, err, sizeof(err)),
	                 0);
	assert_int_equal(cfg.ncontrollers, 1);
	assert_string_equal(cfg.controllers[0].host, "10.0.0.1");
	assert_int_equal(cfg.controllers[0].port, 8470);
	assert_string_equal(cfg.server, "srv3");
	assert_int_equal(cfg.heartbeat_s, 5);
	assert_int_equal(cfg.nmap, 2);
	assert_int_equal(cfg.map[0].index, 0); /* sorted by index */
	assert_string_equal(cfg.map[1].device, "mlx5_1");
	assert_ptr_equal(cfg.source, &rdma_verbs_source);
	assert_string_equal(cfg.runs_dir, ""); /* collection off unless asked for */
	agent_config_free(&cfg);
	assert_int_equal(agent_config_load_string("[agent]\ncontroller = http://[::1]:80\n"
	                                          "server = s\nmap = pci-order\nsource = recorded\n"
	                                          "recorded_inventory = /x.json\n",
	                                          "a.ini", &cfg, err, sizeof(err)),
	                 0);
	assert_string_equal(cfg.controllers[0].host, "::1");
	assert_int_equal(cfg.controllers[0].port, 80);
	assert_false(cfg.tls);
	assert_true(cfg.pci_order);
	assert_int_equal(cfg.heartbeat_s, AGENT_HEARTBEAT_DEFAULT);
	agent_config_free(&cfg);
	assert_int_equal(
	    agent_config_load_string("[agent]\ncontroller = https://ctl.example:8443/\n"
	                             "ca_file = /etc/ofcd/ca.pem\nserver = s\n"
	                             "map = pci-order\n",
	                             "a.ini", &cfg, err, sizeof(err)),
	    0);
	assert_true(cfg.tls);
	assert_string_equal(cfg.controllers[0].host, "ctl.example");
	assert_int_equal(cfg.controllers[0].port, 8443);
	assert_string_equal(cfg.ca_file, "/etc/ofcd/ca.pem");
	agent_config_free(&cfg);
	/* An HA cluster's members, in the order written. */
	assert_int_equal(agent_config_load_string(
	                     "[agent]\ncontroller = https://a.example:8470, https://[fd00::2]:8470,"
	                     "https://c.example:9000/\nserver = s\nmap = pci-order\n",
	                     "a.ini", &cfg, err, sizeof(err)),
	                 0);
	assert_int_equal(cfg.ncontrollers, 3);
	assert_true(cfg.tls);
	assert_string_equal(cfg.controllers[0].url, "https://a.example:8470");
	assert_string_equal(cfg.controllers[1].host, "fd00::2");
	assert_int_equal(cfg.controllers[2].port, 9000);
	agent_config_free(&cfg);
	/* runs_dir: kept without trailing slashes, "/" itself as it is. */
	static const struct {
		const char *value, *want;
	} dirs[] = {
		{ "/var/lib/ofcd/runs", "/var/lib/ofcd/runs" },
		{ "/var/lib/ofcd/runs//", "/var/lib/ofcd/runs" },
		{ "/", "/" },
		{ "///", "/" },
	};
	for (size_t i = 0; i < sizeof(dirs) / sizeof(dirs[0]); i++) {
		char text[256];
		snprintf(text, sizeof(text),
		         "[agent]\ncontroller = http://h:1\nserver = s\nmap = pci-order\n"
		         "runs_dir = %s\n",
		         dirs[i].value);
		assert_int_equal(agent_config_load_string(text, "a.ini", &cfg, err, sizeof(err)),
		                 0);
		assert_string_equal(cfg.runs_dir, dirs[i].want);
		agent_config_free(&cfg);
	}

	static const char head[] = "[agent]\ncontroller = http://h:1\nserver = s\n";
	static const struct {
		const char *text, *err;
	} bad[] = {
		{ "[agent]\nbogus = 1\n", "a.ini:2: [agent] bogus: unknown key" },
		{ "[agnet]\nserver = s\n", "a.ini:2: [agnet] server: unknown section" },
		{ "[agent]\ncontroller = ftp://h:1\n", "a.ini:2: [agent] controller: expected "
		                                       "http://HOST:PORT or https://HOST:PORT" },
		{ "[agent]\ncontroller = https://h\n", "a.ini:2: [agent] controller: expected" },
		{ "[agent]\ncontroller = http://h:1\nserver = s\nmap = pci-order\nca_file = /c\n",
		  "a.ini: [agent] ca_file needs an https:// controller" },
		{ "[agent]\ncontroller = http://h\n", "a.ini:2: [agent] controller: expected" },
		{ "[agent]\ncontroller = http://h:0\n", "a.ini:2: [agent] controller: expected" },
		{ "[agent]\nserver = a b\n", "a.ini:2: [agent] server: expected a server name" },
		{ "[agent]\nserver = a\nserver = b\n", "a.ini:3: [agent] server: key given twice" },
		{ "[agent]\ntoken = short\n", "a.ini:2: [agent] token: secret must be" },
		{ "[agent]\nheartbeat = 0\n", "a.ini:2: [agent] heartbeat: expected seconds" },
		{ "[agent]\ndevice.x = mlx5_0:1\n",
		  "a.ini:2: [agent] device.x: expected device.N" },
		{ "[agent]\ndevice.0 = mlx5_0\n", "a.ini:2: [agent] device.0: expected DEV:PORT" },
		{ "[agent]\ndevice.0 = mlx5_0:0\n",
		  "a.ini:2: [agent] device.0: expected DEV:PORT" },
		{ "[agent]\ndevice.0 = a:1\ndevice.0 = b:1\n",
		  "a.ini:3: [agent] device.0: device 0 is already mapped to a:1" },
		{ "[agent]\ndevice.0 = a:1\ndevice.1 = a:1\n",
		  "a.ini:3: [agent] device.1: a:1 is already mapped to device 0" },
		{ "[agent]\nmap = bus-order\n", "a.ini:2: [agent] map: expected pci-order" },
		{ "[agent]\nsource = sysfs\n",
		  "a.ini:2: [agent] source: expected verbs or recorded" },
		{ "[agent]\nruns_dir = runs\n",
		  "a.ini:2: [agent] runs_dir: expected an absolute directory path, got \"runs\"" },
		{ "[agent]\nruns_dir = ./runs\n",
		  "a.ini:2: [agent] runs_dir: expected an absolute" },
		{ "[agent]\nruns_dir =\n", "a.ini:2: [agent] runs_dir: expected an absolute" },
		{ "[agent]\nruns_dir = /a\nruns_dir = /b\n",
		  "a.ini:3: [agent] runs_dir: key given twice" },
		{ "[log]\nlevel = loud\n", "a.ini:2: [log] level: expected error, warn" },
		{ "[agent]\nserver = s\n", "a.ini: [agent] controller is required" },
		{ "[agent]\ncontroller = http://h:1\n", "a.ini: [agent] server is required" },
		{ "", "a.ini: [agent] controller is required" },
	};
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		int rc = agent_config_load_string(bad[i].text, "a.ini", &cfg, err, sizeof(err));
		agent_config_free(&cfg);
		if (rc == 0 || strncmp(err, bad[i].err, strlen(bad[i].err)) != 0)
			fail_msg("case %zu: rc %d, \"%s\", want \"%s\"", i, rc, err, bad[i].err);
	}
	static const struct {
		const char *tail, *err;
	} cross[] = {
		{ "", "a.ini: [agent] needs device.N = DEV:PORT lines or map = pci-order" },
		{ "map = pci-order\ndevice.0 = a:1\n",
		  "a.ini: [agent] map = pci-order and device.N" },
		{ "map = pci-order\nsource = recorded\n",
		  "a.ini: [agent] source = recorded needs" },
		{ "map = pci-order\nrecorded_events = /e\n",
		  "a.ini: [agent] recorded_inventory and recorded_events need source = recorded" },
	};
	for (size_t i = 0; i < sizeof(cross) / sizeof(cross[0]); i++) {
		char text[256];
		snprintf(text, sizeof(text), "%s%s", head, cross[i].tail);
		int rc = agent_config_load_string(text, "a.ini", &cfg, err, sizeof(err));
		agent_config_free(&cfg);
		if (rc == 0 || strncmp(err, cross[i].err, strlen(cross[i].err)) != 0)
			fail_msg("cross %zu: rc %d, \"%s\", want \"%s\"", i, rc, err, cross[i].err);
	}
	assert_int_equal(agent_config_load("/nonexistent/a.ini", &cfg, err, sizeof(err)), -ENOENT);
	agent_config_free(&cfg);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_speed_width),     cmocka_unit_test(test_mtu_states),
		cmocka_unit_test(test_gid_guid),        cmocka_unit_test(test_json_round_trip),
		cmocka_unit_test(test_json_errors),     cmocka_unit_test(test_script),
		cmocka_unit_test(test_recorded_source), cmocka_unit_test(test_verbs_source),
		cmocka_unit_test(test_agent_config),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
