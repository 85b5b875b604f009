#include "metrics.h"

#include <dirent.h>
#include <errno.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <unistd.h>

#include "version.h"
#include "log.h"
#include "monotonic.h"

/* Latency buckets (seconds), shared by request and commit histograms. */
static const double bucket_le[] = { 0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025,
	                            0.05,   0.1,     0.25,   0.5,   1,      2.5,   5,    10 };
#define NBUCKETS (sizeof(bucket_le) / sizeof(bucket_le[0]))

struct histogram {
	uint64_t counts[NBUCKETS]; /* non-cumulative; rendered cumulative */
	uint64_t count;
	double sum;
};

struct request_stat {
	const char *route;
	char method[8];
	unsigned status;
	uint64_t count;
};

struct route_latency {
	const char *route;
	struct histogram h;
};

struct counter {
	const char *name;
	const char *help;
	char label[128];
	double value;
	bool gauge; /* metrics_gauge_add(): may go down */
};

struct collector {
	metrics_collect_fn fn;
	void *arg;
};

struct metrics_out {
	FILE *f;
};

#define MAX_REQUEST_STATS 512
#define MAX_ROUTES        128
#define MAX_COUNTERS      128
#define MAX_COLLECTORS    8
#define MAX_LOOP_KINDS    16
#define MAX_WRITE_STAGES  4
#define STALL_S           0.1 /* a callback this long is logged */

/* A histogram of one label value (a static string). */
struct named_histogram {
	const char *name;
	struct histogram h;
};

static struct {
	struct request_stat req[MAX_REQUEST_STATS];
	size_t nreq;
	struct route_latency lat[MAX_ROUTES];
	size_t nlat;
	struct histogram commit;
	long connections;
	struct counter counters[MAX_COUNTERS];
	size_t ncounters;
	struct collector collectors[MAX_COLLECTORS];
	size_t ncollectors;
	struct named_histogram loop[MAX_LOOP_KINDS];
	size_t nloop;
	struct named_histogram write_stages[MAX_WRITE_STAGES];
	size_t nwrite_stages;
	unsigned loop_depth;
} m;

static void observe(struct histogram *h, double v)
{
	for (size_t i = 0; i < NBUCKETS; i++) {
		if (v <= bucket_le[i]) {
			h->counts[i]++;
			break;
		}
	}
	h->count++;
	h->sum += v;
}

void metrics_request(const char *route, const char *method, unsigned status, double seconds)
{
	struct request_stat *r = NULL;
	for (size_t i = 0; i < m.nreq; i++) {
		if (m.req[i].route == route && m.req[i].status == status &&
		    strcmp(m.req[i].method, method) == 0) {
			r = &m.req[i];
			break;
		}
	}
	if (!r && m.nreq < MAX_REQUEST_STATS) {
		r = &m.req[m.nreq++];
		r->route = route;
		snprintf(r->method, sizeof(r->method), "%s", method);
		r->status = status;
	}
	if (r)
		r->count++;
	if (seconds < 0)
		return;

	struct route_latency *l = NULL;
	for (size_t i = 0; i < m.nlat; i++)
		if (m.lat[i].route == route)
			l = &m.lat[i];
	if (!l && m.nlat < MAX_ROUTES) {
		l = &m.lat[m.nlat++];
		l->route = route;
	}
	if (l)
		observe(&l->h, seconds);
}

void metrics_observe_commit(double seconds)
{
	observe(&m.commit, seconds);
}

/* Observes v in the histogram of v[0..*n) named name, added if there is room. */
static void observe_named(struct named_histogram *v, size_t *n, size_t max, const char *name,
                          double seconds)
{
	struct named_histogram *k = NULL;
	for (size_t i = 0; i < *n && !k; i++)
		if (strcmp(v[i].name, name) == 0) /* a literal may have a copy per file */
			k = &v[i];
	if (!k && *n < max) {
		k = &v[(*n)++];
		k->name = name;
	}
	if (k)
		observe(&k->h, seconds);
}

void metrics_observe_write_stage(const char *stage, double seconds)
{
	observe_named(m.write_stages, &m.nwrite_stages, MAX_WRITE_STAGES, stage, seconds);
}

void metrics_connections(int delta)
{
	m.connections += delta;
}

static void value_add(const char *name, const char *help, const char *label, double v, bool gauge)
{
	const char *lab = label ? label : "";
	for (size_t i = 0; i < m.ncounters; i++) {
		if (strcmp(m.counters[i].name, name) == 0 &&
		    strcmp(m.counters[i].label, lab) == 0) {
			m.counters[i].value += v;
			return;
		}
	}
	if (m.ncounters == MAX_COUNTERS)
		return;
	struct counter *c = &m.counters[m.ncounters++];
	c->name = name;
	c->help = help;
	snprintf(c->label, sizeof(c->label), "%s", lab);
	c->value = v;
	c->gauge = gauge;
}

void metrics_counter_add(const char *name, const char *help, const char *label, double v)
{
	value_add(name, help, label, v, false);
}

void metrics_gauge_add(const char *name, const char *help, double v)
{
	value_add(name, help, NULL, v, true);
}

int metrics_collector_add(metrics_collect_fn fn, void *arg)
{
	if (m.ncollectors == MAX_COLLECTORS)
		return -ENOSPC;
	m.collectors[m.ncollectors++] = (struct collector){ fn, arg };
	return 0;
}

void metrics_collector_remove(metrics_collect_fn fn, void *arg)
{
	for (size_t i = 0; i < m.ncollectors; i++) {
		if (m.collectors[i].fn == fn && m.collectors[i].arg == arg) {
			m.collectors[i] = m.collectors[--m.ncollectors];
			return;
		}
	}
}

void metrics_family(struct metrics_out *out, const char *name, const char *type, const char *help)
{
	fprintf(out->f, "# HELP %s %s\n# TYPE %s %s\n", name, help, name, type);
}

void metrics_sample(struct metrics_out *out, const char *name, const char *labels, double v)
{
	/* 15 significant digits: exact for counts, without a double's last-digit noise. */
	if (labels && labels[0])
		fprintf(out->f, "%s{%s} %.15g\n", name, labels, v);
	else
		fprintf(out->f, "%s %.15g\n", name, v);
}

struct metrics_loop metrics_loop_enter(const char *where)
{
	struct metrics_loop l = { .where = where, .outer = m.loop_depth++ == 0 };
	clock_gettime(CLOCK_MONOTONIC, &l.t0);
	return l;
}

void metrics_loop_leave(struct metrics_loop l)
{
	m.loop_depth--;
	if (!l.outer)
		return;
	double s = mono_since(&l.t0);
	observe_named(m.loop, &m.nloop, MAX_LOOP_KINDS, l.where, s);
	if (s > STALL_S)
		log_warn("daemon",
		         "the loop was busy %.0f ms in one %s callback: everything else "
		         "waited",
		         s * 1e3, l.where);
}

void metrics_reset(void)
{
	/* Collectors belong to live modules, which remove them themselves. */
	struct collector keep[MAX_COLLECTORS];
	size_t n = m.ncollectors;
	memcpy(keep, m.collectors, sizeof(keep));
	memset(&m, 0, sizeof(m));
	memcpy(m.collectors, keep, sizeof(keep));
	m.ncollectors = n;
}

static void render_histogram(FILE *f, const char *name, const char *label,
                             const struct histogram *h)
{
	uint64_t cum = 0;
	const char *sep = label[0] ? "," : "";
	for (size_t i = 0; i < NBUCKETS; i++) {
		cum += h->counts[i];
		fprintf(f, "%s_bucket{%s%sle=\"%g\"} %llu\n", name, label, sep, bucket_le[i],
		        (unsigned long long)cum);
	}
	fprintf(f, "%s_bucket{%s%sle=\"+Inf\"} %llu\n", name, label, sep,
	        (unsigned long long)h->count);
	const char *open = label[0] ? "{" : "", *close = label[0] ? "}" : "";
	fprintf(f, "%s_sum%s%s%s %.9f\n", name, open, label, close, h->sum);
	fprintf(f, "%s_count%s%s%s %llu\n", name, open, label, close, (unsigned long long)h->count);
}

/* Virtual and resident size, bytes, from /proc/self/statm (0 when unreadable). */
static void memory_bytes(long *virt, long *rss)
{
	long pages = 0, res = 0;
	FILE *f = fopen("/proc/self/statm", "r");
	*virt = *rss = 0;
	if (!f)
		return;
	if (fscanf(f, "%ld %ld", &pages, &res) == 2) {
		*virt = pages * sysconf(_SC_PAGESIZE);
		*rss = res * sysconf(_SC_PAGESIZE);
	}
	fclose(f);
}

static long open_fds(void)
{
	DIR *d = opendir("/proc/self/fd");
	long n = 0;
	if (!d)
		return 0;
	while (readdir(d))
		n++;
	closedir(d);
	return n > 3 ? n - 3 : 0; /* ".", ".." and the directory's own descriptor */
}

/*
 * Start time, seconds since the epoch: the boot time (/proc/stat btime) plus
 * the process's start in clock ticks after boot (field 22 of /proc/self/stat),
 * as the Prometheus client libraries compute it. 0 when unreadable.
 */
static double start_time(void)
{
	char line[256], stat[1024];
	double btime = 0;
	unsigned long long ticks = 0;
	FILE *f = fopen("/proc/stat", "r");
	if (!f)
		return 0;
	while (fgets(line, sizeof(line), f))
		if (sscanf(line, "btime %lf", &btime) == 1)
			break;
	fclose(f);
	f = fopen("/proc/self/stat", "r");
	if (!f)
		return 0;
	size_t n = fread(stat, 1, sizeof(stat) - 1, f);
	fclose(f);
	stat[n] = '\0';
	/* The command name (field 2) may hold spaces: count fields after its ')'. */
	const char *p = strrchr(stat, ')');
	for (int field = 2; p && field < 22; field++)
		p = strchr(p + 1, ' ');
	if (!p || sscanf(p + 1, "%llu", &ticks) != 1)
		return 0;
	return btime + (double)ticks / (double)sysconf(_SC_CLK_TCK);
}

/* The standard process_* metrics every Prometheus client exports (sizes in bytes, read once). */
static void render_process(struct metrics_out *out, long virt, long rss)
{
	struct rusage ru;
	struct rlimit rl;
	double cpu = 0;
	if (getrusage(RUSAGE_SELF, &ru) == 0)
		cpu = (double)ru.ru_utime.tv_sec + (double)ru.ru_utime.tv_usec / 1e6 +
		      (double)ru.ru_stime.tv_sec + (double)ru.ru_stime.tv_usec / 1e6;
	metrics_family(out, "process_cpu_seconds_total", "counter",
	               "Total user and system CPU time spent in seconds.");
	metrics_sample(out, "process_cpu_seconds_total", "", cpu);
	metrics_family(out, "process_resident_memory_bytes", "gauge",
	               "Resident memory size in bytes.");
	metrics_sample(out, "process_resident_memory_bytes", "", (double)rss);
	metrics_family(out, "process_virtual_memory_bytes", "gauge",
	               "Virtual memory size in bytes.");
	metrics_sample(out, "process_virtual_memory_bytes", "", (double)virt);
	metrics_family(out, "process_open_fds", "gauge", "Number of open file descriptors.");
	metrics_sample(out, "process_open_fds", "", (double)open_fds());
	metrics_family(out, "process_max_fds", "gauge", "Maximum number of open file descriptors.");
	metrics_sample(out, "process_max_fds", "",
	               getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur != RLIM_INFINITY
	                   ? (double)rl.rlim_cur
	                   : 0);
	metrics_family(out, "process_start_time_seconds", "gauge",
	               "Start time of the process since unix epoch in seconds.");
	metrics_sample(out, "process_start_time_seconds", "", start_time());
}

char *metrics_render(size_t *len)
{
	char *buf = NULL;
	FILE *f = open_memstream(&buf, len);
	char label[192];
	if (!f)
		return NULL;

	fputs("# HELP ofcd_http_requests_total HTTP requests by route, method and status.\n"
	      "# TYPE ofcd_http_requests_total counter\n",
	      f);
	for (size_t i = 0; i < m.nreq; i++)
		fprintf(f,
		        "ofcd_http_requests_total{route=\"%s\",method=\"%s\",status=\"%u\"} %llu\n",
		        m.req[i].route, m.req[i].method, m.req[i].status,
		        (unsigned long long)m.req[i].count);

	fputs("# HELP ofcd_http_request_duration_seconds HTTP request latency by route.\n"
	      "# TYPE ofcd_http_request_duration_seconds histogram\n",
	      f);
	for (size_t i = 0; i < m.nlat; i++) {
		snprintf(label, sizeof(label), "route=\"%s\"", m.lat[i].route);
		render_histogram(f, "ofcd_http_request_duration_seconds", label, &m.lat[i].h);
	}

	fputs("# HELP ofcd_store_commit_duration_seconds Latency of store transaction commits.\n"
	      "# TYPE ofcd_store_commit_duration_seconds histogram\n",
	      f);
	render_histogram(f, "ofcd_store_commit_duration_seconds", "", &m.commit);

	long virt, rss;
	memory_bytes(&virt, &rss);
	fputs("# HELP ofcd_loop_busy_seconds Time each callback of the event loop ran (whatever "
	      "else was ready waited meanwhile), by kind of callback.\n"
	      "# TYPE ofcd_loop_busy_seconds histogram\n",
	      f);
	for (size_t i = 0; i < m.nloop; i++) {
		snprintf(label, sizeof(label), "callback=\"%s\"", m.loop[i].name);
		render_histogram(f, "ofcd_loop_busy_seconds", label, &m.loop[i].h);
	}

	if (m.nwrite_stages)
		fputs(
		    "# HELP ofcd_cluster_write_stage_seconds Where a write the leader replicates "
		    "spends its time: its handler and changeset, the log's round trip through etcd "
		    "for each entry, applying the change here.\n"
		    "# TYPE ofcd_cluster_write_stage_seconds histogram\n",
		    f);
	for (size_t i = 0; i < m.nwrite_stages; i++) {
		snprintf(label, sizeof(label), "stage=\"%s\"", m.write_stages[i].name);
		render_histogram(f, "ofcd_cluster_write_stage_seconds", label,
		                 &m.write_stages[i].h);
	}

	fprintf(f,
	        "# HELP ofcd_http_open_connections HTTP connections open now.\n"
	        "# TYPE ofcd_http_open_connections gauge\n"
	        "ofcd_http_open_connections %ld\n"
	        "# HELP ofcd_resident_memory_bytes Resident set size of the daemon (the same as "
	        "process_resident_memory_bytes).\n"
	        "# TYPE ofcd_resident_memory_bytes gauge\n"
	        "ofcd_resident_memory_bytes %ld\n"
	        "# HELP ofcd_build_info The version of ofcd that runs (always 1).\n"
	        "# TYPE ofcd_build_info gauge\n"
	        "ofcd_build_info{version=\"%s\"} 1\n",
	        m.connections, rss, OFCD_VERSION);
	struct metrics_out out = { f };
	render_process(&out, virt, rss);

	/* A family's samples must be contiguous: print each name once, with all its labels. */
	for (size_t i = 0; i < m.ncounters; i++) {
		bool seen = false;
		for (size_t j = 0; j < i && !seen; j++)
			seen = strcmp(m.counters[j].name, m.counters[i].name) == 0;
		if (seen)
			continue;
		fprintf(f, "# HELP %s %s\n# TYPE %s %s\n", m.counters[i].name, m.counters[i].help,
		        m.counters[i].name, m.counters[i].gauge ? "gauge" : "counter");
		for (size_t k = i; k < m.ncounters; k++) {
			const struct counter *c = &m.counters[k];
			if (strcmp(c->name, m.counters[i].name) != 0)
				continue;
			if (c->label[0])
				fprintf(f, "%s{%s} %.17g\n", c->name, c->label, c->value);
			else
				fprintf(f, "%s %.17g\n", c->name, c->value);
		}
	}
	for (size_t i = 0; i < m.ncollectors; i++)
		m.collectors[i].fn(m.collectors[i].arg, &out);
	if (fclose(f) != 0) {
		free(buf);
		return NULL;
	}
	return buf;
}
