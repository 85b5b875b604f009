/*
 * The real RDMA source: libibverbs.
 *
 * Every device stays open while it is listed, so that its async fd (made
 * non-blocking) can be one libevent read event on the caller's loop: port
 * errors, ports becoming active and fatal device errors arrive as events, not
 * by polling. A query lists the devices again (hot-plugged ones are opened,
 * vanished ones closed) and reads every attribute fresh from the kernel.
 *
 * A device that reported IBV_EVENT_DEVICE_FATAL is closed and shown as fatal;
 * it is reopened by a query no sooner than VERBS_REOPEN_S later, once the
 * driver has had time to reset it.
 */
#include "rdma.h"

#include <endian.h>
#include <errno.h>
#include <event2/event.h>
#include <fcntl.h>
#include <infiniband/verbs.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "log.h"

#define VERBS_REOPEN_S     5
#define VERBS_EVENTS_BURST 16 /* events read per wakeup; the rest come on the next one */

struct verbs_source;

/* One listed device. */
struct verbs_dev {
	struct verbs_source *vs;
	char name[RDMA_NAME_MAX];
	char pci[RDMA_PCI_MAX];
	struct ibv_context *ctx; /* NULL when it could not be opened or died */
	struct event *ev;        /* ctx->async_fd readable */
	bool fatal;
	struct timespec fatal_at;
	char error[RDMA_REASON_MAX]; /* why ctx is NULL, when not fatal */
	bool listed;                 /* seen by the current query */
	struct verbs_dev *next;
};

struct verbs_source {
	struct rdma_source src;
	struct event_base *base; /* NULL: no events */
	rdma_event_fn cb;
	void *arg;
	struct verbs_dev *devs;
};

static void dev_close(struct verbs_dev *vd)
{
	if (vd->ev)
		event_free(vd->ev);
	vd->ev = NULL;
	if (vd->ctx)
		ibv_close_device(vd->ctx);
	vd->ctx = NULL;
}

static void on_async(evutil_socket_t fd, short what, void *arg)
{
	struct verbs_dev *vd = arg;
	struct verbs_source *vs = vd->vs;
	struct {
		unsigned port;
		enum rdma_event_kind kind;
	} got[VERBS_EVENTS_BURST];
	size_t n = 0;
	bool fatal = false;
	char name[RDMA_NAME_MAX];
	struct ibv_async_event ev;
	(void)fd;
	(void)what;

	memcpy(name, vd->name, sizeof(name));
	while (n < VERBS_EVENTS_BURST && ibv_get_async_event(vd->ctx, &ev) == 0) {
		switch (ev.event_type) {
		case IBV_EVENT_PORT_ERR:
		case IBV_EVENT_PORT_ACTIVE:
			got[n].port = (unsigned)ev.element.port_num;
			got[n++].kind = ev.event_type == IBV_EVENT_PORT_ERR ? RDMA_EV_PORT_ERR
			                                                    : RDMA_EV_PORT_ACTIVE;
			break;
		case IBV_EVENT_DEVICE_FATAL:
			got[n].port = 0;
			got[n++].kind = RDMA_EV_DEVICE_FATAL;
			fatal = true;
			break;
		default:
			log_debug("rdma", "%s: async event %s", name,
			          ibv_event_type_str(ev.event_type));
			break;
		}
		ibv_ack_async_event(&ev);
	}
	if (fatal) {
		log_error("rdma",
		          "%s: fatal device error; closed, reopened after %d s at the "
		          "earliest",
		          name, VERBS_REOPEN_S);
		dev_close(vd);
		vd->fatal = true;
		clock_gettime(CLOCK_MONOTONIC, &vd->fatal_at);
	}
	/* The callback may query, which may free vd: only local copies from here on. */
	for (size_t i = 0; i < n; i++) {
		log_info("rdma", "%s port %u: %s", name, got[i].port, rdma_event_name(got[i].kind));
		if (vs->cb)
			vs->cb(vs->arg, name, got[i].port, got[i].kind);
	}
}

/* The PCI address is the name of the device's parent in sysfs, when it is a PCI function. */
static void read_pci(const struct ibv_device *dev, char *out, size_t len)
{
	char path[PATH_MAX], target[PATH_MAX];
	out[0] = '\0';
	snprintf(path, sizeof(path), "%s/device", dev->ibdev_path);
	ssize_t n = readlink(path, target, sizeof(target) - 1);
	if (n <= 0)
		return;
	target[n] = '\0';
	const char *base = strrchr(target, '/');
	base = base ? base + 1 : target;
	if (strchr(base, ':') && strchr(base, '.') && strlen(base) < len)
		snprintf(out, len, "%s", base);
}

static void dev_open(struct verbs_dev *vd, struct ibv_device *dev)
{
	struct verbs_source *vs = vd->vs;
	vd->error[0] = '\0';
	vd->ctx = ibv_open_device(dev);
	if (!vd->ctx) {
		snprintf(vd->error, sizeof(vd->error), "ibv_open_device failed: %s",
		         strerror(errno));
		log_warn("rdma", "%s: %s", vd->name, vd->error);
		return;
	}
	vd->fatal = false;
	if (!vs->base)
		return;
	int fd = vd->ctx->async_fd;
	int fl = fcntl(fd, F_GETFL);
	vd->ev = event_new(vs->base, fd, EV_READ | EV_PERSIST, on_async, vd);
	if (fl < 0 || fcntl(fd, F_SETFL, fl | O_NONBLOCK) < 0 || !vd->ev ||
	    event_add(vd->ev, NULL) < 0) {
		/* Without events the heartbeat's query still notices state changes. */
		log_warn("rdma",
		         "%s: cannot watch the async event fd; port changes are seen at the "
		         "next heartbeat only",
		         vd->name);
		if (vd->ev)
			event_free(vd->ev);
		vd->ev = NULL;
	}
}

static struct verbs_dev *dev_find(struct verbs_source *vs, const char *name)
{
	for (struct verbs_dev *vd = vs->devs; vd; vd = vd->next)
		if (strcmp(vd->name, name) == 0)
			return vd;
	return NULL;
}

static void drop_unlisted(struct verbs_source *vs)
{
	struct verbs_dev **pp = &vs->devs;
	while (*pp) {
		struct verbs_dev *vd = *pp;
		if (vd->listed) {
			pp = &vd->next;
			continue;
		}
		log_info("rdma", "%s: no longer listed", vd->name);
		*pp = vd->next;
		dev_close(vd);
		free(vd);
	}
}

/* Opens what is newly listed (or due for a reopen) and closes what is gone. */
static int sync_devices(struct verbs_source *vs, struct rdma_inventory *out)
{
	int n = 0;
	struct timespec now;

	errno = 0;
	struct ibv_device **list = ibv_get_device_list(&n);
	if (!list) {
		int e = errno;
		snprintf(out->reason, sizeof(out->reason), "ibv_get_device_list failed: %s%s",
		         strerror(e),
		         e == ENOSYS ? " (the kernel offers no RDMA verbs: no ib_uverbs module or "
		                       "no RDMA driver loaded)"
		                     : "");
		n = 0;
	} else if (n == 0) {
		snprintf(out->reason, sizeof(out->reason),
		         "no RDMA device found (ibv_get_device_list returned 0 devices)");
	}
	out->rdma = n > 0;
	clock_gettime(CLOCK_MONOTONIC, &now);
	for (struct verbs_dev *vd = vs->devs; vd; vd = vd->next)
		vd->listed = false;
	for (int i = 0; i < n; i++) {
		const char *name = ibv_get_device_name(list[i]);
		struct verbs_dev *vd = dev_find(vs, name);
		if (!vd) {
			vd = calloc(1, sizeof(*vd));
			if (!vd) {
				ibv_free_device_list(list);
				return -ENOMEM;
			}
			vd->vs = vs;
			snprintf(vd->name, sizeof(vd->name), "%s", name);
			read_pci(list[i], vd->pci, sizeof(vd->pci));
			vd->next = vs->devs;
			vs->devs = vd;
			log_info("rdma", "%s: found%s%s", vd->name, vd->pci[0] ? " at " : "",
			         vd->pci);
		}
		vd->listed = true;
		if (!vd->ctx && (!vd->fatal || now.tv_sec - vd->fatal_at.tv_sec >= VERBS_REOPEN_S))
			dev_open(vd, list[i]);
	}
	if (list)
		ibv_free_device_list(list);
	drop_unlisted(vs);
	return 0;
}

static int query_port(struct ibv_context *ctx, uint8_t num, struct rdma_port *p)
{
	struct ibv_port_attr pa;
	p->num = num;
	p->index = -1;
	p->state = p->phys_state = p->link_layer = RDMA_CODE_UNKNOWN;
	if (ibv_query_port(ctx, num, &pa) != 0)
		return 0; /* reported as unknown, so never taken for up */
	p->state = (uint8_t)pa.state;
	p->phys_state = pa.phys_state;
	p->mtu = (uint8_t)pa.active_mtu;
	p->speed = pa.active_speed;
	p->width = pa.active_width;
	p->link_layer = pa.link_layer;
	if (pa.gid_tbl_len <= 0)
		return 0;
	p->gids = calloc(RDMA_MAX_GIDS, sizeof(*p->gids));
	if (!p->gids)
		return -ENOMEM;
	for (int i = 0; i < pa.gid_tbl_len && p->ngids < RDMA_MAX_GIDS; i++) {
		union ibv_gid gid;
		if (ibv_query_gid(ctx, num, i, &gid) != 0 || rdma_gid_is_zero(gid.raw))
			continue;
		p->gids[p->ngids].index = (uint16_t)i;
		memcpy(p->gids[p->ngids++].raw, gid.raw, 16);
	}
	return 0;
}

static int query_device(struct verbs_dev *vd, struct rdma_device *d)
{
	struct ibv_device_attr attr;
	snprintf(d->name, sizeof(d->name), "%s", vd->name);
	snprintf(d->pci, sizeof(d->pci), "%s", vd->pci);
	d->fatal = vd->fatal;
	if (!vd->ctx) {
		snprintf(d->error, sizeof(d->error), "%s",
		         vd->fatal ? "fatal device error (IBV_EVENT_DEVICE_FATAL)" : vd->error);
		return 0;
	}
	if (ibv_query_device(vd->ctx, &attr) != 0) {
		snprintf(d->error, sizeof(d->error), "ibv_query_device failed: %s",
		         strerror(errno));
		return 0;
	}
	snprintf(d->fw_ver, sizeof(d->fw_ver), "%s", attr.fw_ver);
	d->node_guid = be64toh(attr.node_guid);
	d->vendor_id = attr.vendor_id;
	d->vendor_part_id = attr.vendor_part_id;
	d->phys_port_cnt = attr.phys_port_cnt;
	if (!attr.phys_port_cnt)
		return 0;
	d->ports = calloc(attr.phys_port_cnt, sizeof(*d->ports));
	if (!d->ports)
		return -ENOMEM;
	for (unsigned p = 1; p <= attr.phys_port_cnt; p++) {
		int rc = query_port(vd->ctx, (uint8_t)p, &d->ports[d->nports]);
		d->nports++;
		if (rc < 0)
			return rc;
	}
	return 0;
}

static int cmp_device(const void *a, const void *b)
{
	return strcmp(((const struct rdma_device *)a)->name, ((const struct rdma_device *)b)->name);
}

static int verbs_query(struct rdma_source *src, struct rdma_inventory *out)
{
	struct verbs_source *vs = (struct verbs_source *)src;
	size_t n = 0;
	int rc;

	memset(out, 0, sizeof(*out));
	rc = sync_devices(vs, out);
	if (rc < 0)
		return rc;
	for (struct verbs_dev *vd = vs->devs; vd; vd = vd->next)
		n++;
	if (!n)
		return 0;
	out->devices = calloc(n, sizeof(*out->devices));
	if (!out->devices)
		return -ENOMEM;
	for (struct verbs_dev *vd = vs->devs; vd; vd = vd->next) {
		rc = query_device(vd, &out->devices[out->ndevices++]);
		if (rc < 0) {
			rdma_inventory_free(out);
			return rc;
		}
	}
	/* Listing order is sysfs order; name order keeps reports comparable. */
	qsort(out->devices, out->ndevices, sizeof(*out->devices), cmp_device);
	return 0;
}

static int verbs_open(struct event_base *base, const struct rdma_source_conf *conf,
                      rdma_event_fn cb, void *arg, struct rdma_source **out, char *err,
                      size_t errlen)
{
	(void)conf;
	struct verbs_source *vs = calloc(1, sizeof(*vs));
	if (!vs) {
		snprintf(err, errlen, "out of memory");
		return -ENOMEM;
	}
	vs->src.ops = &rdma_verbs_source;
	vs->base = base;
	vs->cb = cb;
	vs->arg = arg;
	*out = &vs->src;
	return 0;
}

static void verbs_close(struct rdma_source *src)
{
	struct verbs_source *vs = (struct verbs_source *)src;
	if (!vs)
		return;
	while (vs->devs) {
		struct verbs_dev *vd = vs->devs;
		vs->devs = vd->next;
		dev_close(vd);
		free(vd);
	}
	free(vs);
}

const struct rdma_source_ops rdma_verbs_source = {
	.name = "verbs",
	.open = verbs_open,
	.query = verbs_query,
	.close = verbs_close,
};

int rdma_verbs_read(struct rdma_inventory *out)
{
	struct rdma_source *src;
	char err[128];
	int rc = verbs_open(NULL, NULL, NULL, NULL, &src, err, sizeof(err));
	if (rc < 0)
		return rc;
	rc = verbs_query(src, out);
	verbs_close(src);
	return rc;
}
