/*
 * The RDMA inventory model: verbs attribute codes to names, Gb/s and bytes,
 * GID and GUID text, and the strict JSON conversion shared by the agent (its
 * reports, the recorded source's file) and the controller (the inventory a
 * PUT carries).
 */
#include "rdma.h"

#include "jsonin.h"

#include <ctype.h>
#include <errno.h>
#include <infiniband/verbs.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define ARRAY_SIZE(a) (sizeof(a) / sizeof((a)[0]))

/*
 * active_speed is one bit per generation. The rates are the per-lane figures
 * ibv_devinfo prints (FDR10 and QDR both say 10 Gb/s), so a report can be
 * checked against `ibv_devinfo -v` by eye.
 */
static const struct {
	unsigned code;
	const char *name;
	double lane_gbps;
} speeds[] = {
	{ 1, "SDR", 2.5 },    { 2, "DDR", 5.0 },     { 4, "QDR", 10.0 },
	{ 8, "FDR10", 10.0 }, { 16, "FDR", 14.0 },   { 32, "EDR", 25.0 },
	{ 64, "HDR", 50.0 },  { 128, "NDR", 100.0 }, { 256, "XDR", 200.0 },
};

static const struct {
	unsigned code;
	const char *name;
	unsigned lanes;
} widths[] = {
	{ 1, "1x", 1 }, { 2, "4x", 4 }, { 4, "8x", 8 }, { 8, "12x", 12 }, { 16, "2x", 2 },
};

static const char *const port_states[] = {
	[IBV_PORT_NOP] = "nop",       [IBV_PORT_DOWN] = "down",
	[IBV_PORT_INIT] = "init",     [IBV_PORT_ARMED] = "armed",
	[IBV_PORT_ACTIVE] = "active", [IBV_PORT_ACTIVE_DEFER] = "active_defer",
};

/* IBTA physical port states, as ibv_devinfo names them, in JSON style. */
static const char *const phys_states[] = {
	"nop", "sleep", "polling", "disabled", "training", "link_up", "error_recovery", "phy_test",
};

static const char *const link_layers[] = {
	[IBV_LINK_LAYER_UNSPECIFIED] = "unspecified",
	[IBV_LINK_LAYER_INFINIBAND] = "infiniband",
	[IBV_LINK_LAYER_ETHERNET] = "ethernet",
};

double rdma_speed_lane_gbps(unsigned code)
{
	for (size_t i = 0; i < ARRAY_SIZE(speeds); i++)
		if (speeds[i].code == code)
			return speeds[i].lane_gbps;
	return 0;
}

const char *rdma_speed_name(unsigned code)
{
	for (size_t i = 0; i < ARRAY_SIZE(speeds); i++)
		if (speeds[i].code == code)
			return speeds[i].name;
	return "unknown";
}

unsigned rdma_width_lanes(unsigned code)
{
	for (size_t i = 0; i < ARRAY_SIZE(widths); i++)
		if (widths[i].code == code)
			return widths[i].lanes;
	return 0;
}

const char *rdma_width_name(unsigned code)
{
	for (size_t i = 0; i < ARRAY_SIZE(widths); i++)
		if (widths[i].code == code)
			return widths[i].name;
	return "unknown";
}

double rdma_rate_gbps(unsigned speed, unsigned width)
{
	return rdma_width_lanes(width) * rdma_speed_lane_gbps(speed);
}

unsigned rdma_mtu_bytes(unsigned code)
{
	if (code < IBV_MTU_256 || code > IBV_MTU_4096)
		return 0;
	return 128u << code;
}

static const char *table_name(const char *const *names, size_t n, unsigned code)
{
	return code < n && names[code] ? names[code] : "unknown";
}

const char *rdma_port_state_name(unsigned state)
{
	return table_name(port_states, ARRAY_SIZE(port_states), state);
}

const char *rdma_phys_state_name(unsigned phys_state)
{
	return table_name(phys_states, ARRAY_SIZE(phys_states), phys_state);
}

const char *rdma_link_layer_name(unsigned link_layer)
{
	return table_name(link_layers, ARRAY_SIZE(link_layers), link_layer);
}

/* Code of a name in a table, RDMA_CODE_UNKNOWN for "unknown"; -EINVAL when neither. */
static int table_code(const char *const *names, size_t n, const char *s)
{
	for (size_t i = 0; i < n; i++)
		if (names[i] && strcmp(names[i], s) == 0)
			return (int)i;
	return strcmp(s, "unknown") == 0 ? RDMA_CODE_UNKNOWN : -EINVAL;
}

void rdma_gid_format(const uint8_t raw[16], char out[RDMA_GID_STRLEN])
{
	char *p = out;
	for (int i = 0; i < 16; i += 2)
		p += sprintf(p, "%s%02x%02x", i ? ":" : "", raw[i], raw[i + 1]);
}

static int hex_value(int c)
{
	if (c >= '0' && c <= '9')
		return c - '0';
	c = tolower(c);
	if (c >= 'a' && c <= 'f')
		return c - 'a' + 10;
	return -1;
}

/* Parses groups of 4 hex digits joined by ':' into 2 * groups bytes. */
static int parse_groups(const char *s, unsigned groups, uint8_t *out)
{
	if (strlen(s) != groups * 5 - 1)
		return -EINVAL;
	for (unsigned g = 0; g < groups; g++) {
		const char *q = s + g * 5;
		int v[4];
		for (int k = 0; k < 4; k++)
			if ((v[k] = hex_value((unsigned char)q[k])) < 0)
				return -EINVAL;
		if (g + 1 < groups && q[4] != ':')
			return -EINVAL;
		out[2 * g] = (uint8_t)(v[0] << 4 | v[1]);
		out[2 * g + 1] = (uint8_t)(v[2] << 4 | v[3]);
	}
	return 0;
}

int rdma_gid_parse(const char *s, uint8_t raw[16])
{
	return parse_groups(s, 8, raw);
}

bool rdma_gid_is_zero(const uint8_t raw[16])
{
	uint8_t any = 0;
	for (int i = 0; i < 16; i++)
		any |= raw[i];
	return any == 0;
}

void rdma_guid_format(uint64_t guid, char out[RDMA_GUID_STRLEN])
{
	snprintf(out, RDMA_GUID_STRLEN, "%04x:%04x:%04x:%04x", (unsigned)(guid >> 48) & 0xffff,
	         (unsigned)(guid >> 32) & 0xffff, (unsigned)(guid >> 16) & 0xffff,
	         (unsigned)guid & 0xffff);
}

int rdma_guid_parse(const char *s, uint64_t *guid)
{
	uint8_t b[8];
	if (parse_groups(s, 4, b) < 0)
		return -EINVAL;
	*guid = 0;
	for (int i = 0; i < 8; i++)
		*guid = *guid << 8 | b[i];
	return 0;
}

bool rdma_port_is_up(const struct rdma_device *dev, const struct rdma_port *port)
{
	return !dev->fatal && !dev->error[0] && port->state == IBV_PORT_ACTIVE;
}

/* ---- the model ----------------------------------------------------------- */

static void port_free(struct rdma_port *p)
{
	free(p->gids);
	p->gids = NULL;
	p->ngids = 0;
}

static void device_free(struct rdma_device *d)
{
	for (size_t i = 0; i < d->nports; i++)
		port_free(&d->ports[i]);
	free(d->ports);
	d->ports = NULL;
	d->nports = 0;
}

void rdma_inventory_free(struct rdma_inventory *inv)
{
	for (size_t i = 0; i < inv->ndevices; i++)
		device_free(&inv->devices[i]);
	free(inv->devices);
	memset(inv, 0, sizeof(*inv));
}

int rdma_inventory_copy(struct rdma_inventory *dst, const struct rdma_inventory *src)
{
	*dst = *src;
	dst->devices = NULL;
	dst->ndevices = 0;
	if (!src->ndevices)
		return 0;
	dst->devices = calloc(src->ndevices, sizeof(*dst->devices));
	if (!dst->devices)
		goto fail;
	for (size_t i = 0; i < src->ndevices; i++) {
		const struct rdma_device *sd = &src->devices[i];
		struct rdma_device *dd = &dst->devices[i];
		*dd = *sd;
		dd->ports = NULL;
		dd->nports = 0;
		dst->ndevices = i + 1;
		if (!sd->nports)
			continue;
		dd->ports = calloc(sd->nports, sizeof(*dd->ports));
		if (!dd->ports)
			goto fail;
		for (size_t k = 0; k < sd->nports; k++) {
			dd->ports[k] = sd->ports[k];
			dd->ports[k].gids = NULL;
			dd->ports[k].ngids = 0;
			dd->nports = k + 1;
			if (!sd->ports[k].ngids)
				continue;
			dd->ports[k].gids = malloc(sd->ports[k].ngids * sizeof(struct rdma_gid));
			if (!dd->ports[k].gids)
				goto fail;
			memcpy(dd->ports[k].gids, sd->ports[k].gids,
			       sd->ports[k].ngids * sizeof(struct rdma_gid));
			dd->ports[k].ngids = sd->ports[k].ngids;
		}
	}
	return 0;
fail:
	rdma_inventory_free(dst);
	return -ENOMEM;
}

struct rdma_device *rdma_inventory_device(const struct rdma_inventory *inv, const char *name)
{
	for (size_t i = 0; i < inv->ndevices; i++)
		if (strcmp(inv->devices[i].name, name) == 0)
			return &inv->devices[i];
	return NULL;
}

struct rdma_port *rdma_device_port(const struct rdma_device *dev, unsigned num)
{
	for (size_t i = 0; i < dev->nports; i++)
		if (dev->ports[i].num == num)
			return &dev->ports[i];
	return NULL;
}

/* ---- to JSON ------------------------------------------------------------- */

static json_t *str_or_null(const char *s)
{
	return s[0] ? json_string(s) : json_null();
}

static json_t *port_json(const struct rdma_port *p, unsigned flags)
{
	json_t *gids = json_array();
	for (size_t i = 0; i < p->ngids; i++) {
		char g[RDMA_GID_STRLEN];
		rdma_gid_format(p->gids[i].raw, g);
		json_array_append_new(
		    gids, json_pack("{s:i, s:s}", "index", (int)p->gids[i].index, "gid", g));
	}
	json_t *o = json_pack(
	    "{s:i, s:s, s:s, s:i, s:s, s:f, s:s, s:f, s:s, s:o}", "port", (int)p->num, "state",
	    rdma_port_state_name(p->state), "phys_state", rdma_phys_state_name(p->phys_state),
	    "mtu", (int)rdma_mtu_bytes(p->mtu), "speed", rdma_speed_name(p->speed), "lane_gbps",
	    rdma_speed_lane_gbps(p->speed), "width", rdma_width_name(p->width), "rate_gbps",
	    rdma_rate_gbps(p->speed, p->width), "link_layer", rdma_link_layer_name(p->link_layer),
	    "gids", gids);
	if (o && (flags & RDMA_JSON_REPORT) && p->index >= 0)
		json_object_set_new(o, "index", json_integer(p->index));
	return o;
}

static json_t *device_json(const struct rdma_device *d, unsigned flags)
{
	char guid[RDMA_GUID_STRLEN];
	json_t *ports = json_array();
	for (size_t i = 0; i < d->nports; i++)
		json_array_append_new(ports, port_json(&d->ports[i], flags));
	rdma_guid_format(d->node_guid, guid);
	return json_pack("{s:s, s:o, s:s, s:s, s:I, s:I, s:i, s:b, s:o, s:o}", "name", d->name,
	                 "pci", str_or_null(d->pci), "fw_ver", d->fw_ver, "node_guid", guid,
	                 "vendor_id", (json_int_t)d->vendor_id, "vendor_part_id",
	                 (json_int_t)d->vendor_part_id, "phys_port_cnt", (int)d->phys_port_cnt,
	                 "fatal", d->fatal, "error", str_or_null(d->error), "ports", ports);
}

json_t *rdma_inventory_to_json(const struct rdma_inventory *inv, unsigned flags)
{
	json_t *devices = json_array();
	for (size_t i = 0; i < inv->ndevices; i++)
		json_array_append_new(devices, device_json(&inv->devices[i], flags));
	return json_pack("{s:b, s:o, s:o}", "rdma", inv->rdma, "reason",
	                 inv->rdma ? json_null() : json_string(inv->reason), "devices", devices);
}

/* ---- from JSON ----------------------------------------------------------- */

/*
 * "prefix[i]". Paths are bounded by the nesting (devices[N].ports[N].gids[N]),
 * so they fit; a cut one would still name the right place.
 */
static const char *findex(char *buf, size_t len, const char *prefix, size_t i)
{
	if (snprintf(buf, len, "%s[%zu]", prefix, i) >= (int)len)
		buf[len - 1] = '\0';
	return buf;
}

/*
 * An integer in [min, max]. The inventory's message names the range whatever
 * the bad value, as it always has, where jsonin_uint() would also cite it.
 */
static int get_uint(struct jsonin_err *e, json_t *obj, const char *prefix, const char *key,
                    bool required, uint64_t min, uint64_t max, uint64_t *out)
{
	json_t *v;
	int rc = jsonin_member(e, obj, prefix, key, required, &v);
	if (rc)
		return rc;
	if (jsonin_uint(e, obj, prefix, key, true, min, max, out) < 0)
		return jsonin_fail(e, e->field, "%s must be an integer from %llu to %llu", e->field,
		                   (unsigned long long)min, (unsigned long long)max);
	return 0;
}

/* A string of minlen (0 or 1) to size - 1 bytes, copied into out. */
static int get_string(struct jsonin_err *e, json_t *obj, const char *prefix, const char *key,
                      bool required, size_t minlen, char *out, size_t size)
{
	const char *s;
	int rc = jsonin_string(e, obj, prefix, key, required, minlen, size - 1, &s);
	if (rc == 0)
		memcpy(out, s, strlen(s) + 1);
	return rc;
}

/* A derived number: must be a number when present, its value is recomputed. */
static int check_number(struct jsonin_err *e, json_t *obj, const char *prefix, const char *key)
{
	char f[JSONIN_FIELD_MAX];
	json_t *v = json_object_get(obj, key);
	if (!v || json_is_number(v))
		return 0;
	jsonin_field(f, sizeof(f), prefix, key);
	return jsonin_fail(e, f, "%s must be a number (it is derived)", f);
}

/* A name from a table (or "unknown"); *out gets its code. */
static int get_named(struct jsonin_err *e, json_t *obj, const char *prefix, const char *key,
                     const char *const *names, size_t n, uint8_t *out)
{
	char f[JSONIN_FIELD_MAX], s[32];
	int rc = get_string(e, obj, prefix, key, true, 1, s, sizeof(s));
	if (rc < 0)
		return rc;
	int code = table_code(names, n, s);
	if (code >= 0) {
		*out = (uint8_t)code;
		return 0;
	}
	char list[256] = "";
	for (size_t i = 0; i < n; i++) {
		size_t l = strlen(list);
		if (names[i])
			snprintf(list + l, sizeof(list) - l, "%s, ", names[i]);
	}
	jsonin_field(f, sizeof(f), prefix, key);
	return jsonin_fail(e, f, "%s must be one of: %sunknown", f, list);
}

static int valid_device_name(const char *s)
{
	for (const char *p = s; *p; p++)
		if (!isalnum((unsigned char)*p) && !strchr("._-", *p))
			return 0;
	return s[0] != '\0';
}

static int parse_gids(struct jsonin_err *e, json_t *arr, const char *prefix, struct rdma_port *p)
{
	static const char *const members[] = { "index", "gid", NULL };
	char f[JSONIN_FIELD_MAX], pf[JSONIN_FIELD_MAX], s[RDMA_GID_STRLEN + 1];
	size_t i;
	json_t *g;
	int rc;

	jsonin_field(f, sizeof(f), prefix, "gids");
	if (!json_is_array(arr))
		return jsonin_fail(e, f, "%s must be an array", f);
	if (json_array_size(arr) > RDMA_MAX_GIDS)
		return jsonin_fail(e, f, "%s has %zu entries, at most %d are allowed", f,
		                   json_array_size(arr), RDMA_MAX_GIDS);
	p->gids = calloc(json_array_size(arr) ? json_array_size(arr) : 1, sizeof(*p->gids));
	if (!p->gids)
		return jsonin_fail(e, f, "out of memory");
	json_array_foreach(arr, i, g)
	{
		uint64_t index = 0;
		findex(pf, sizeof(pf), f, i);
		if (!json_is_object(g))
			return jsonin_fail(e, pf, "%s must be an object", pf);
		if ((rc = jsonin_check_members(e, g, pf, members)) < 0 ||
		    (rc = get_uint(e, g, pf, "index", true, 0, 65535, &index)) < 0 ||
		    (rc = get_string(e, g, pf, "gid", true, 1, s, sizeof(s))) < 0)
			return rc;
		struct rdma_gid *gid = &p->gids[i];
		gid->index = (uint16_t)index;
		if (rdma_gid_parse(s, gid->raw) < 0)
			return jsonin_fail(e, jsonin_field(f, sizeof(f), pf, "gid"),
			                   "%s must be 8 groups of 4 hex digits joined by ':'", f);
		for (size_t k = 0; k < i; k++)
			if (p->gids[k].index == gid->index)
				return jsonin_fail(e, jsonin_field(f, sizeof(f), pf, "index"),
				                   "%s: GID index %u is listed twice", f,
				                   gid->index);
		p->ngids = i + 1;
	}
	return 0;
}

static int parse_port(struct jsonin_err *e, json_t *o, const char *prefix, unsigned flags,
                      struct rdma_port *p)
{
	static const char *const members[] = {
		"port",  "state",     "phys_state", "mtu",  "speed", "lane_gbps",
		"width", "rate_gbps", "link_layer", "gids", "index", NULL,
	};
	char f[JSONIN_FIELD_MAX], s[32];
	uint64_t v = 0;
	int rc;

	p->index = -1;
	if (!json_is_object(o))
		return jsonin_fail(e, prefix, "%s must be an object", prefix);
	if (!(flags & RDMA_JSON_REPORT) && json_object_get(o, "index"))
		return jsonin_fail(e, jsonin_field(f, sizeof(f), prefix, "index"),
		                   "unknown field %s (device indices come from the agent's map)",
		                   f);
	if ((rc = jsonin_check_members(e, o, prefix, members)) < 0 ||
	    (rc = get_uint(e, o, prefix, "port", true, 1, RDMA_MAX_PORTS, &v)) < 0)
		return rc;
	p->num = (uint8_t)v;
	if ((rc = get_named(e, o, prefix, "state", port_states, ARRAY_SIZE(port_states),
	                    &p->state)) < 0 ||
	    (rc = get_named(e, o, prefix, "phys_state", phys_states, ARRAY_SIZE(phys_states),
	                    &p->phys_state)) < 0 ||
	    (rc = get_named(e, o, prefix, "link_layer", link_layers, ARRAY_SIZE(link_layers),
	                    &p->link_layer)) < 0)
		return rc;

	if ((rc = get_uint(e, o, prefix, "mtu", true, 0, 4096, &v)) < 0)
		return rc;
	p->mtu = 0;
	for (unsigned code = IBV_MTU_256; code <= IBV_MTU_4096; code++)
		if (rdma_mtu_bytes(code) == v)
			p->mtu = (uint8_t)code;
	if (!p->mtu && v != 0)
		return jsonin_fail(e, jsonin_field(f, sizeof(f), prefix, "mtu"),
		                   "%s must be 256, 512, 1024, 2048, 4096 or 0 (unknown)", f);

	if ((rc = get_string(e, o, prefix, "speed", true, 1, s, sizeof(s))) < 0)
		return rc;
	p->speed = 0;
	for (size_t i = 0; i < ARRAY_SIZE(speeds); i++)
		if (strcmp(speeds[i].name, s) == 0)
			p->speed = (uint16_t)speeds[i].code;
	if (!p->speed && strcmp(s, "unknown") != 0)
		return jsonin_fail(
		    e, jsonin_field(f, sizeof(f), prefix, "speed"),
		    "%s must be one of: SDR, DDR, QDR, FDR10, FDR, EDR, HDR, NDR, XDR, "
		    "unknown",
		    f);

	if ((rc = get_string(e, o, prefix, "width", true, 1, s, sizeof(s))) < 0)
		return rc;
	p->width = 0;
	for (size_t i = 0; i < ARRAY_SIZE(widths); i++)
		if (strcmp(widths[i].name, s) == 0)
			p->width = (uint8_t)widths[i].code;
	if (!p->width && strcmp(s, "unknown") != 0)
		return jsonin_fail(e, jsonin_field(f, sizeof(f), prefix, "width"),
		                   "%s must be one of: 1x, 2x, 4x, 8x, 12x, unknown", f);

	if ((rc = check_number(e, o, prefix, "lane_gbps")) < 0 ||
	    (rc = check_number(e, o, prefix, "rate_gbps")) < 0)
		return rc;
	if (flags & RDMA_JSON_REPORT) {
		if ((rc = get_uint(e, o, prefix, "index", false, 0, RDMA_MAX_DEVICES - 1, &v)) < 0)
			return rc;
		if (json_is_integer(json_object_get(o, "index")))
			p->index = (int32_t)v;
	}
	json_t *gids = json_object_get(o, "gids");
	if (gids && !json_is_null(gids))
		return parse_gids(e, gids, prefix, p);
	return 0;
}

static int parse_device(struct jsonin_err *e, json_t *o, const char *prefix, unsigned flags,
                        struct rdma_device *d)
{
	static const char *const members[] = {
		"name",          "pci",   "fw_ver", "node_guid", "vendor_id", "vendor_part_id",
		"phys_port_cnt", "fatal", "error",  "ports",     NULL,
	};
	char f[JSONIN_FIELD_MAX], pf[JSONIN_FIELD_MAX], guid[RDMA_GUID_STRLEN + 1];
	uint64_t v = 0;
	size_t i;
	json_t *p;
	int rc;

	if (!json_is_object(o))
		return jsonin_fail(e, prefix, "%s must be an object", prefix);
	if ((rc = jsonin_check_members(e, o, prefix, members)) < 0 ||
	    (rc = get_string(e, o, prefix, "name", true, 1, d->name, sizeof(d->name))) < 0)
		return rc;
	if (!valid_device_name(d->name))
		return jsonin_fail(e, jsonin_field(f, sizeof(f), prefix, "name"),
		                   "%s must be characters of [A-Za-z0-9._-]", f);
	if ((rc = get_string(e, o, prefix, "pci", false, 1, d->pci, sizeof(d->pci))) < 0 ||
	    (rc = get_string(e, o, prefix, "fw_ver", true, 0, d->fw_ver, sizeof(d->fw_ver))) < 0 ||
	    (rc = get_string(e, o, prefix, "node_guid", true, 1, guid, sizeof(guid))) < 0)
		return rc;
	if (rdma_guid_parse(guid, &d->node_guid) < 0)
		return jsonin_fail(e, jsonin_field(f, sizeof(f), prefix, "node_guid"),
		                   "%s must be 4 groups of 4 hex digits joined by ':'", f);
	if ((rc = get_uint(e, o, prefix, "vendor_id", true, 0, UINT32_MAX, &v)) < 0)
		return rc;
	d->vendor_id = (uint32_t)v;
	if ((rc = get_uint(e, o, prefix, "vendor_part_id", true, 0, UINT32_MAX, &v)) < 0)
		return rc;
	d->vendor_part_id = (uint32_t)v;
	if ((rc = jsonin_bool(e, o, prefix, "fatal", false, &d->fatal)) < 0 ||
	    (rc = get_string(e, o, prefix, "error", false, 1, d->error, sizeof(d->error))) < 0)
		return rc;

	json_t *ports;
	if ((rc = jsonin_member(e, o, prefix, "ports", true, &ports)) < 0)
		return rc;
	jsonin_field(f, sizeof(f), prefix, "ports");
	if (!json_is_array(ports) || json_array_size(ports) > RDMA_MAX_PORTS)
		return jsonin_fail(e, f, "%s must be an array of at most %d ports", f,
		                   RDMA_MAX_PORTS);
	d->ports = calloc(json_array_size(ports) ? json_array_size(ports) : 1, sizeof(*d->ports));
	if (!d->ports)
		return jsonin_fail(e, f, "out of memory");
	json_array_foreach(ports, i, p)
	{
		findex(pf, sizeof(pf), f, i);
		rc = parse_port(e, p, pf, flags, &d->ports[i]);
		d->nports = i + 1;
		if (rc < 0)
			return rc;
		for (size_t k = 0; k < i; k++)
			if (d->ports[k].num == d->ports[i].num)
				return jsonin_fail(e, jsonin_field(f, sizeof(f), pf, "port"),
				                   "%s: port %u is listed twice", f,
				                   d->ports[i].num);
	}
	v = d->nports;
	if ((rc = get_uint(e, o, prefix, "phys_port_cnt", false, 0, RDMA_MAX_PORTS, &v)) < 0)
		return rc;
	d->phys_port_cnt = (uint8_t)v;
	return 0;
}

int rdma_inventory_from_json(json_t *j, unsigned flags, struct rdma_inventory *inv,
                             unsigned *interval, char *field, size_t fieldlen, char *err,
                             size_t errlen)
{
	static const char *const members[] = { "rdma", "reason", "devices", NULL };
	static const char *const report_members[] = { "rdma", "reason", "devices", "interval",
		                                      NULL };
	struct jsonin_err e;
	char f[64];
	uint64_t v = 10;
	size_t i;
	json_t *d;
	int rc;

	memset(inv, 0, sizeof(*inv));
	field[0] = '\0';
	err[0] = '\0';
	if (!json_is_object(j)) {
		rc = jsonin_fail(&e, "", "the inventory must be a JSON object");
		goto fail;
	}
	if ((rc = jsonin_check_members(&e, j, NULL,
	                               flags & RDMA_JSON_REPORT ? report_members : members)) < 0 ||
	    (rc = jsonin_bool(&e, j, NULL, "rdma", true, &inv->rdma)) < 0 ||
	    (rc = get_string(&e, j, NULL, "reason", !inv->rdma, 1, inv->reason,
	                     sizeof(inv->reason))) < 0)
		goto fail;
	if (flags & RDMA_JSON_REPORT) {
		if ((rc = get_uint(&e, j, NULL, "interval", false, 1, 86400, &v)) < 0)
			goto fail;
		if (interval)
			*interval = (unsigned)v;
	}
	json_t *devices;
	if ((rc = jsonin_member(&e, j, NULL, "devices", true, &devices)) < 0)
		goto fail;
	if (!json_is_array(devices) || json_array_size(devices) > RDMA_MAX_DEVICES) {
		rc = jsonin_fail(&e, "devices", "devices must be an array of at most %d devices",
		                 RDMA_MAX_DEVICES);
		goto fail;
	}
	if (!inv->rdma && json_array_size(devices)) {
		rc = jsonin_fail(&e, "devices", "devices must be empty when rdma is false");
		goto fail;
	}
	if (inv->rdma)
		inv->reason[0] = '\0';
	inv->devices =
	    calloc(json_array_size(devices) ? json_array_size(devices) : 1, sizeof(*inv->devices));
	if (!inv->devices) {
		rc = jsonin_fail(&e, "devices", "out of memory");
		goto fail;
	}
	json_array_foreach(devices, i, d)
	{
		findex(f, sizeof(f), "devices", i);
		rc = parse_device(&e, d, f, flags, &inv->devices[i]);
		inv->ndevices = i + 1;
		if (rc < 0)
			goto fail;
		for (size_t k = 0; k < i; k++) {
			if (strcmp(inv->devices[k].name, inv->devices[i].name) == 0) {
				char nf[80];
				rc = jsonin_fail(&e, jsonin_field(nf, sizeof(nf), f, "name"),
				                 "%s: device %s is listed twice", nf,
				                 inv->devices[i].name);
				goto fail;
			}
		}
	}
	return 0;
fail:
	snprintf(field, fieldlen, "%s", e.field);
	snprintf(err, errlen, "%s", e.msg);
	rdma_inventory_free(inv);
	return rc;
}

const char *rdma_event_name(enum rdma_event_kind kind)
{
	switch (kind) {
	case RDMA_EV_PORT_ERR:
		return "port_err";
	case RDMA_EV_PORT_ACTIVE:
		return "port_active";
	case RDMA_EV_DEVICE_FATAL:
		return "device_fatal";
	}
	return "?";
}
