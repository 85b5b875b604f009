#include "fabric_svg.h"

#include <math.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/*
 * Layout and colours; console/picture.js uses the same numbers so that the
 * console and the SVG show one picture.
 */
#define LEGEND_W        230.0
#define HEADER_H        56.0
#define LABELS_MAX      64   /* above this many servers, names would overlap */
#define LINES_MAX       2048 /* above this many circuits, one path per unit (no titles) */
#define COLOUR_FAIL     "#d62728"
#define GRID_LABELS_MAX 256 /* a grid names its servers up to this many */
#define GRID_DIMS_MAX   4

/* Tableau-like colours without red, which marks failures. */
static const char *const palette[] = { "#4e79a7", "#f28e2b", "#59a14f", "#b07aa1", "#76b7b2",
	                               "#edc948", "#9c755f", "#ff9da7", "#17becf", "#bab0ac" };
#define PALETTE_N (sizeof(palette) / sizeof(palette[0]))
/* A grid's dimensions 0 to 3 (console/picture.js DIM_COLOURS). */
static const char *const dim_colour[GRID_DIMS_MAX] = { "#4e79a7", "#f28e2b", "#59a14f", "#b07aa1" };

struct layout {
	size_t n;             /* servers */
	double radius;        /* of the circle the servers sit on */
	double margin;        /* around it, room for labels */
	double cx, cy;        /* centre */
	double node;          /* radius of a server's dot */
	double stroke;        /* width of a circuit's line */
	double opacity;       /* of a circuit's line */
	double width, height; /* of the whole picture */
};

static void layout_make(struct layout *l, size_t n, size_t units)
{
	l->n = n;
	l->radius = fmax(180.0, 0.8 * (double)n);
	l->margin = n <= LABELS_MAX ? 90.0 : 30.0;
	l->cx = l->radius + l->margin;
	l->cy = HEADER_H + l->radius + l->margin;
	l->node = n <= LABELS_MAX ? 6.0 : fmax(1.5, fmin(6.0, M_PI * l->radius / (double)n * 0.7));
	l->stroke = n <= 32 ? 2.0 : n <= 128 ? 1.0 : 0.5;
	l->opacity = n <= 32 ? 0.9 : n <= 128 ? 0.7 : n <= 256 ? 0.4 : 0.15;
	l->width = 2 * (l->radius + l->margin) + LEGEND_W;
	l->height = fmax(HEADER_H + 2 * (l->radius + l->margin),
	                 HEADER_H + 60.0 + 22.0 * (double)(units + 3));
}

/* Position of server i: from the top, clockwise. */
static void layout_at(const struct layout *l, size_t i, double grow, double *x, double *y)
{
	double a = -M_PI / 2 + 2 * M_PI * (double)i / (double)(l->n ? l->n : 1);
	*x = l->cx + (l->radius + grow) * cos(a);
	*y = l->cy + (l->radius + grow) * sin(a);
}

/* Writes s with the XML special characters escaped. */
static void put_text(FILE *f, const char *s)
{
	for (; s && *s; s++) {
		switch (*s) {
		case '&':
			fputs("&amp;", f);
			break;
		case '<':
			fputs("&lt;", f);
			break;
		case '>':
			fputs("&gt;", f);
			break;
		case '"':
			fputs("&quot;", f);
			break;
		default:
			fputc(*s, f);
		}
	}
}

static const char *str(const json_t *o, const char *key)
{
	const char *s = json_string_value(json_object_get(o, key));
	return s ? s : "";
}

static long long num(const json_t *o, const char *key)
{
	return (long long)json_integer_value(json_object_get(o, key));
}

/* Index of a server name in the fabric (through the map built from "servers"), or -1. */
static long long index_of(json_t *map, const char *name)
{
	json_t *v = json_object_get(map, name);
	return v ? (long long)json_integer_value(v) : -1;
}

static void header(FILE *f, const struct layout *l, const json_t *fabric, size_t nlinks,
                   size_t nmissing, size_t nfailed)
{
	const char *state = str(fabric, "state");
	bool bad = strcmp(state, "failed") == 0 || strcmp(state, "degraded") == 0;
	fprintf(f,
	        "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"%.0f\" height=\"%.0f\" "
	        "viewBox=\"0 0 %.0f %.0f\" font-family=\"DejaVu Sans, Helvetica, Arial, "
	        "sans-serif\" font-size=\"12\">\n",
	        l->width, l->height, l->width, l->height);
	fputs("<title>fabric ", f);
	put_text(f, str(fabric, "name"));
	fputs("</title>\n", f);
	fprintf(f, "<rect width=\"100%%\" height=\"100%%\" fill=\"#ffffff\"/>\n");
	fputs("<text x=\"16\" y=\"24\" font-size=\"18\" font-weight=\"bold\">fabric ", f);
	put_text(f, str(fabric, "name"));
	fprintf(f,
	        "</text>\n<text x=\"16\" y=\"44\" font-size=\"13\" fill=\"#333\">"
	        "<tspan fill=\"%s\" font-weight=\"bold\">",
	        bad ? COLOUR_FAIL : "#333");
	put_text(f, state);
	fprintf(f,
	        "</tspan> · revision %lld · %zu servers · %zu circuits · %zu missing · "
	        "%zu with failed devices</text>\n",
	        num(fabric, "revision"), l->n, nlinks, nmissing, nfailed);
}

static void legend(FILE *f, const struct layout *l, json_t *units)
{
	double x = l->width - LEGEND_W + 10, y = HEADER_H + 30;
	const char *name;
	json_t *v;
	fprintf(f,
	        "<g id=\"legend\">\n<text x=\"%.0f\" y=\"%.0f\" font-weight=\"bold\">"
	        "OCS units</text>\n",
	        x, y);
	json_object_foreach(units, name, v)
	{
		y += 22;
		size_t c = (size_t)json_integer_value(json_array_get(v, 0));
		fprintf(f,
		        "<line x1=\"%.0f\" y1=\"%.0f\" x2=\"%.0f\" y2=\"%.0f\" stroke=\"%s\" "
		        "stroke-width=\"4\"/><text x=\"%.0f\" y=\"%.0f\">",
		        x, y - 4, x + 24, y - 4, palette[c % PALETTE_N], x + 32, y);
		put_text(f, name);
		fprintf(f, " (%lld circuits)</text>\n",
		        (long long)json_integer_value(json_array_get(v, 1)));
	}
	y += 30;
	fprintf(f,
	        "<line x1=\"%.0f\" y1=\"%.0f\" x2=\"%.0f\" y2=\"%.0f\" stroke=\"%s\" "
	        "stroke-width=\"2\" stroke-dasharray=\"5 4\"/><text x=\"%.0f\" y=\"%.0f\">"
	        "missing pair</text>\n",
	        x, y - 4, x + 24, y - 4, COLOUR_FAIL, x + 32, y);
	y += 22;
	fprintf(f,
	        "<circle cx=\"%.0f\" cy=\"%.0f\" r=\"6\" fill=\"%s\"/><text x=\"%.0f\" "
	        "y=\"%.0f\">server with failed devices</text>\n</g>\n",
	        x + 12, y - 4, COLOUR_FAIL, x + 32, y);
}

static void circuit_title(FILE *f, const char *ocs, const json_t *a, const json_t *b)
{
	fputs("<title>", f);
	put_text(f, ocs);
	fputs(": ", f);
	put_text(f, str(a, "server"));
	fprintf(f, " device %lld port %lld (OCS port %lld) — ", num(a, "device"), num(a, "port"),
	        num(a, "ocs_port"));
	put_text(f, str(b, "server"));
	fprintf(f, " device %lld port %lld (OCS port %lld)</title>", num(b, "device"),
	        num(b, "port"), num(b, "ocs_port"));
}

static void circuits(FILE *f, const struct layout *l, json_t *map, const json_t *links,
                     json_t *units)
{
	size_t nlinks = json_array_size(links);
	const char *unit;
	json_t *v;
	fprintf(f, "<g id=\"circuits\" stroke-width=\"%.1f\" stroke-opacity=\"%.2f\">\n", l->stroke,
	        l->opacity);
	/* Unit by unit: one colour per group; a large fabric gets one path per unit. */
	json_object_foreach(units, unit, v)
	{
		const char *colour = palette[json_integer_value(json_array_get(v, 0)) % PALETTE_N];
		bool path = nlinks > LINES_MAX;
		fprintf(f, "<g stroke=\"%s\">", colour);
		if (path)
			fputs("<path fill=\"none\" d=\"", f);
		for (size_t i = 0; i < nlinks; i++) {
			const json_t *lk = json_array_get(links, i);
			const json_t *a = json_object_get(lk, "a"), *b = json_object_get(lk, "b");
			long long ia = index_of(map, str(a, "server")),
			          ib = index_of(map, str(b, "server"));
			if (strcmp(str(a, "ocs"), unit) != 0 || ia < 0 || ib < 0)
				continue;
			double x1, y1, x2, y2;
			layout_at(l, (size_t)ia, 0, &x1, &y1);
			layout_at(l, (size_t)ib, 0, &x2, &y2);
			if (path) {
				fprintf(f, "M%.1f %.1fL%.1f %.1f", x1, y1, x2, y2);
				continue;
			}
			fprintf(f, "\n<line x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\">", x1,
			        y1, x2, y2);
			circuit_title(f, unit, a, b);
			fputs("</line>", f);
		}
		fputs(path ? "\"/></g>\n" : "</g>\n", f);
	}
	fputs("</g>\n", f);
}

static void missing_pairs(FILE *f, const struct layout *l, json_t *map, const json_t *missing)
{
	size_t i;
	json_t *p;
	fprintf(f,
	        "<g id=\"missing\" stroke=\"%s\" stroke-width=\"%.1f\" stroke-dasharray=\"5 4\">\n",
	        COLOUR_FAIL, fmax(l->stroke, 1.5));
	json_array_foreach(missing, i, p)
	{
		const char *sa = json_string_value(json_array_get(p, 0));
		const char *sb = json_string_value(json_array_get(p, 1));
		long long ia = index_of(map, sa ? sa : ""), ib = index_of(map, sb ? sb : "");
		if (ia < 0 || ib < 0)
			continue;
		double x1, y1, x2, y2;
		layout_at(l, (size_t)ia, 0, &x1, &y1);
		layout_at(l, (size_t)ib, 0, &x2, &y2);
		fprintf(f, "<line x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\"><title>missing: ",
		        x1, y1, x2, y2);
		put_text(f, sa);
		fputs(" — ", f);
		put_text(f, sb);
		fputs("</title></line>\n", f);
	}
	fputs("</g>\n", f);
}

/* A server's dot, up to its title's name: red when nf of its devices failed. */
static void dot_open(FILE *f, double x, double y, double r, const char *name, size_t nf)
{
	fprintf(f, "<circle cx=\"%.1f\" cy=\"%.1f\" r=\"%.1f\" fill=\"%s\"%s><title>", x, y, r,
	        nf ? COLOUR_FAIL : "#333333", nf ? " stroke=\"#7f0000\" stroke-width=\"2\"" : "");
	put_text(f, name);
}

/* The rest of the dot's title: its failed devices (devs, an array of indexes), if any. */
static void dot_close(FILE *f, const json_t *devs)
{
	size_t nf = json_array_size(devs);
	if (nf) {
		fputs(": failed device", f);
		fputs(nf > 1 ? "s" : "", f);
		for (size_t k = 0; k < nf; k++)
			fprintf(f, "%s %lld", k ? "," : "",
			        (long long)json_integer_value(json_array_get(devs, k)));
	}
	fputs("</title></circle>\n", f);
}

static void servers(FILE *f, const struct layout *l, const json_t *names, const json_t *failed)
{
	size_t i;
	json_t *s;
	fputs("<g id=\"servers\">\n", f);
	json_array_foreach(names, i, s)
	{
		const char *name = json_string_value(s);
		const json_t *devs = failed ? json_object_get(failed, name ? name : "") : NULL;
		size_t nf = json_array_size(devs);
		double x, y, lx, ly;
		layout_at(l, i, 0, &x, &y);
		dot_open(f, x, y, l->node, name, nf);
		dot_close(f, devs);
		if (l->n > LABELS_MAX)
			continue;
		layout_at(l, i, l->node + 8, &lx, &ly);
		double dx = lx - l->cx;
		const char *anchor = dx > 0.2 * l->radius    ? "start"
		                     : dx < -0.2 * l->radius ? "end"
		                                             : "middle";
		fprintf(f,
		        "<text x=\"%.1f\" y=\"%.1f\" text-anchor=\"%s\" "
		        "dominant-baseline=\"middle\"%s>",
		        lx, ly, anchor, nf ? " fill=\"" COLOUR_FAIL "\" font-weight=\"bold\"" : "");
		put_text(f, name);
		fputs("</text>\n", f);
	}
	fputs("</g>\n", f);
}

/*
 * A HyperX or torus of 2 to 4 dimensions is drawn on its grid (console/picture.js
 * gridLayout, gridAt, gridSegments use the same numbers): dimension 0 across,
 * dimension 1 down, a panel per place on dimensions 2 and 3 (dimension 2 across,
 * dimension 3 down; a long dimension 2 of a 3-D grid wraps into rows).
 */
struct grid {
	size_t n, dims, k[GRID_DIMS_MAX];
	bool torus;
	double step, pad, gap, title, margin, box_w, box_h, node, stroke;
	size_t panels, cols, rows;
	double top;           /* under the header */
	double width, height; /* of the drawing, without the legend */
};

/* Fills g when fabric is a grid of n servers; false for a full mesh or a ring. */
static bool grid_make(struct grid *g, const json_t *fabric, size_t n)
{
	const char *topo = json_string_value(json_object_get(fabric, "topology"));
	const json_t *shape = json_object_get(fabric, "shape");
	size_t dims = json_array_size(shape), prod = 1;
	if (!topo || (strcmp(topo, "hyperx") != 0 && strcmp(topo, "torus") != 0) || dims < 2 ||
	    dims > GRID_DIMS_MAX)
		return false;
	memset(g, 0, sizeof(*g));
	for (size_t d = 0; d < dims; d++) {
		json_int_t k = json_integer_value(json_array_get(shape, d));
		if (k < 1 || (size_t)k > n)
			return false;
		g->k[d] = (size_t)k;
		prod *= (size_t)k;
	}
	if (prod != n)
		return false;
	g->n = n;
	g->dims = dims;
	g->torus = strcmp(topo, "torus") == 0;
	g->step = n <= GRID_LABELS_MAX ? 56.0 : n <= 1024 ? 28.0 : 14.0;
	g->pad = 0.75 * g->step;
	g->gap = 0.5 * g->step;
	g->title = dims > 2 ? 18.0 : 0.0;
	g->panels = n / (g->k[0] * g->k[1]);
	g->cols = dims == 4   ? g->k[2]
	          : dims == 3 ? (g->k[2] <= 4 ? g->k[2] : (size_t)ceil(sqrt((double)g->k[2])))
	                      : 1;
	g->rows = (g->panels + g->cols - 1) / g->cols;
	g->box_w = (double)(g->k[0] - 1) * g->step + 2 * g->pad;
	g->box_h = (double)(g->k[1] - 1) * g->step + 2 * g->pad + g->title;
	g->margin = 20.0;
	g->width = 2 * g->margin + (double)g->cols * g->box_w + (double)(g->cols - 1) * g->gap;
	g->height = 2 * g->margin + (double)g->rows * g->box_h + (double)(g->rows - 1) * g->gap;
	g->node = fmax(1.5, fmin(6.0, 0.12 * g->step));
	g->stroke = n <= 256 ? 2.5 : n <= 1024 ? 1.5 : 0.75;
	g->top = HEADER_H;
	return true;
}

static void grid_at(const struct grid *g, size_t pos, double *x, double *y)
{
	size_t k0 = g->k[0], k1 = g->k[1], p = pos / (k0 * k1);
	*x = g->margin + (double)(p % g->cols) * (g->box_w + g->gap) + g->pad +
	     (double)(pos % k0) * g->step;
	*y = g->top + g->margin + (double)(p / g->cols) * (g->box_h + g->gap) + g->title + g->pad +
	     (double)((pos / k0) % k1) * g->step;
}

/* The dimension along which positions a and b differ, or -1 (none or several). */
static int grid_dim(const struct grid *g, size_t a, size_t b)
{
	int d = -1;
	for (size_t i = 0; i < g->dims; i++) {
		if (a % g->k[i] != b % g->k[i]) {
			if (d >= 0)
				return -1;
			d = (int)i;
		}
		a /= g->k[i];
		b /= g->k[i];
	}
	return d;
}

/* Writes the coordinates of pos as "(c0, c1, ...)". */
static void put_coords(FILE *f, const struct grid *g, size_t pos)
{
	for (size_t d = 0; d < g->dims; d++) {
		fprintf(f, "%s%zu", d ? ", " : "(", pos % g->k[d]);
		pos /= g->k[d];
	}
	fputc(')', f);
}

/*
 * A line or an arc from position a to b, as an element; the arc leans off the
 * line by bow layout units along the normal that points down (right, for a
 * vertical line): console/picture.js arcControl.
 */
static void grid_stroke(FILE *f, const struct grid *g, size_t a, size_t b, double bow,
                        const char *extra)
{
	double x1, y1, x2, y2;
	grid_at(g, a, &x1, &y1);
	grid_at(g, b, &x2, &y2);
	if (bow == 0) {
		fprintf(f, "<line x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\"%s>", x1, y1, x2,
		        y2, extra);
		return;
	}
	double dx = x2 - x1, dy = y2 - y1, len = hypot(dx, dy);
	double nx = len > 0 ? -dy / len : 0, ny = len > 0 ? dx / len : 0;
	if (ny < 0 || (ny == 0 && nx < 0)) {
		nx = -nx;
		ny = -ny;
	}
	fprintf(f, "<path d=\"M%.1f %.1fQ%.1f %.1f %.1f %.1f\"%s>", x1, y1,
	        (x1 + x2) / 2 + 2 * bow * nx, (y1 + y2) / 2 + 2 * bow * ny, x2, y2, extra);
}

static int cmp_u64(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
	return x < y ? -1 : x > y;
}

struct joined {
	uint64_t *pairs; /* a * n + b, a < b, sorted */
	size_t npairs;
	size_t *count; /* circuits per line: [d * n + first position of the line] */
	size_t per_dim[GRID_DIMS_MAX];
};

static bool has_pair(const struct grid *g, const struct joined *j, size_t a, size_t b)
{
	uint64_t key = (uint64_t)(a < b ? a : b) * g->n + (a < b ? b : a);
	return bsearch(&key, j->pairs, j->npairs, sizeof(key), cmp_u64) != NULL;
}

/* The circuits of links as pairs of positions, and counted per line. */
static bool joined_make(struct joined *j, const struct grid *g, json_t *map, const json_t *links)
{
	size_t i, stride[GRID_DIMS_MAX];
	json_t *lk;
	memset(j, 0, sizeof(*j));
	j->pairs = calloc(json_array_size(links) + 1, sizeof(*j->pairs));
	j->count = calloc(g->dims * g->n + 1, sizeof(*j->count));
	if (!j->pairs || !j->count)
		return false;
	stride[0] = 1;
	for (size_t d = 1; d < g->dims; d++)
		stride[d] = stride[d - 1] * g->k[d - 1];
	json_array_foreach(links, i, lk)
	{
		long long a = index_of(map, str(json_object_get(lk, "a"), "server"));
		long long b = index_of(map, str(json_object_get(lk, "b"), "server"));
		if (a < 0 || b < 0 || a == b)
			continue;
		size_t lo = (size_t)(a < b ? a : b), hi = (size_t)(a < b ? b : a);
		j->pairs[j->npairs++] = (uint64_t)lo * g->n + hi;
		int d = grid_dim(g, lo, hi);
		if (d < 0)
			continue;
		size_t first = lo - (lo / stride[d] % g->k[d]) * stride[d];
		j->count[(size_t)d * g->n + first]++;
		j->per_dim[d]++;
	}
	qsort(j->pairs, j->npairs, sizeof(*j->pairs), cmp_u64);
	return true;
}

/* A title naming a line's servers, first to last. */
static void line_title(FILE *f, const json_t *names, size_t d, size_t first, size_t last,
                       size_t circuits)
{
	fprintf(f, "<title>dimension %zu: ", d);
	put_text(f, json_string_value(json_array_get(names, first)));
	fputs(" … ", f);
	put_text(f, json_string_value(json_array_get(names, last)));
	fprintf(f, ", %zu circuit%s</title>", circuits, circuits == 1 ? "" : "s");
}

static void pair_title(FILE *f, const char *what, const json_t *names, size_t a, size_t b)
{
	fprintf(f, "<title>%s", what);
	put_text(f, json_string_value(json_array_get(names, a)));
	fputs(" — ", f);
	put_text(f, json_string_value(json_array_get(names, b)));
	fputs("</title>", f);
}

/*
 * Each dimension's lines in its colour, a group per dimension: a HyperX line
 * with a circuit is one bus from its first server to its last (across panels,
 * an arc from each to the next); a torus ring, each segment that has its
 * circuit and an arc closing the ring. console/picture.js gridSegments.
 */
static void grid_circuits(FILE *f, const struct grid *g, const struct joined *j,
                          const json_t *names)
{
	size_t stride = 1;
	bool titles = g->n <= LINES_MAX;
	fprintf(f, "<g id=\"circuits\" fill=\"none\" stroke-width=\"%.2f\">\n", g->stroke);
	for (size_t d = 0; d < g->dims; d++) {
		size_t k = g->k[d];
		bool across = d >= 2;
		fprintf(f, "<g id=\"dim%zu\" stroke=\"%s\" stroke-opacity=\"%s\">", d,
		        dim_colour[d], across ? "0.45" : "0.9");
		for (size_t base = 0; base < g->n; base++) {
			if (base / stride % k != 0)
				continue;
			size_t last = base + (k - 1) * stride;
			if (!g->torus) {
				size_t c = j->count[d * g->n + base];
				if (!c)
					continue;
				for (size_t m = 0; m + 1 < k; m++) {
					if (!across && m > 0)
						break;
					size_t a = base + m * stride,
					       b = across ? a + stride : last;
					fputc('\n', f);
					grid_stroke(f, g, a, b, across ? 0.3 * g->step : 0, "");
					if (titles)
						line_title(f, names, d, base, last, c);
					fputs(across ? "</path>" : "</line>", f);
				}
				continue;
			}
			for (size_t m = 0; m + 1 < k; m++) {
				size_t a = base + m * stride, b = a + stride;
				if (!has_pair(g, j, a, b))
					continue;
				fputc('\n', f);
				grid_stroke(f, g, a, b, across ? 0.3 * g->step : 0, "");
				if (titles)
					pair_title(f, "", names, a, b);
				fputs(across ? "</path>" : "</line>", f);
			}
			if (k > 2 && has_pair(g, j, base, last)) {
				fputc('\n', f);
				grid_stroke(f, g, base, last, -0.4 * g->step, " class=\"wrap\"");
				if (titles)
					pair_title(f, "wrap-around: ", names, base, last);
				fputs("</path>", f);
			}
		}
		fputs("</g>\n", f);
		stride *= k;
	}
	fputs("</g>\n", f);
}

static void grid_missing(FILE *f, const struct grid *g, json_t *map, const json_t *missing,
                         const json_t *names)
{
	size_t i;
	json_t *p;
	fprintf(f,
	        "<g id=\"missing\" fill=\"none\" stroke=\"%s\" stroke-width=\"%.1f\" "
	        "stroke-dasharray=\"5 4\">\n",
	        COLOUR_FAIL, fmax(0.8 * g->stroke, 1.5));
	json_array_foreach(missing, i, p)
	{
		const char *sa = json_string_value(json_array_get(p, 0));
		const char *sb = json_string_value(json_array_get(p, 1));
		long long ia = index_of(map, sa ? sa : ""), ib = index_of(map, sb ? sb : "");
		if (ia < 0 || ib < 0 || ia == ib)
			continue;
		size_t a = (size_t)(ia < ib ? ia : ib), b = (size_t)(ia < ib ? ib : ia);
		double x1, y1, x2, y2;
		grid_at(g, a, &x1, &y1);
		grid_at(g, b, &x2, &y2);
		double bow = fmin(0.45 * g->step, 0.15 * g->step + 0.08 * hypot(x2 - x1, y2 - y1));
		grid_stroke(f, g, a, b, bow, "");
		pair_title(f, "missing: ", names, a, b);
		fputs("</path>\n", f);
	}
	fputs("</g>\n", f);
}

/* Panels: a box and the coordinates it holds on dimensions 2 and 3. */
static void grid_panels(FILE *f, const struct grid *g)
{
	if (g->panels <= 1)
		return;
	fputs("<g id=\"panels\">\n", f);
	for (size_t q = 0; q < g->panels; q++) {
		double x = g->margin + (double)(q % g->cols) * (g->box_w + g->gap);
		double y = g->top + g->margin + (double)(q / g->cols) * (g->box_h + g->gap);
		fprintf(f,
		        "<rect x=\"%.1f\" y=\"%.1f\" width=\"%.1f\" height=\"%.1f\" "
		        "fill=\"#f6f7f9\"/><text x=\"%.1f\" y=\"%.1f\" fill=\"#66707a\">"
		        "(·, ·",
		        x, y, g->box_w, g->box_h, x + 4, y + 14);
		size_t rest = q;
		for (size_t d = 2; d < g->dims; d++) {
			fprintf(f, ", %zu", rest % g->k[d]);
			rest /= g->k[d];
		}
		fputs(")</text>\n", f);
	}
	fputs("</g>\n", f);
}

static void grid_servers(FILE *f, const struct grid *g, const json_t *names, const json_t *failed)
{
	size_t i;
	json_t *s;
	fputs("<g id=\"servers\">\n", f);
	json_array_foreach(names, i, s)
	{
		const char *name = json_string_value(s);
		const json_t *devs = failed ? json_object_get(failed, name ? name : "") : NULL;
		size_t nf = json_array_size(devs);
		double x, y;
		grid_at(g, i, &x, &y);
		dot_open(f, x, y, g->node, name, nf);
		fputc(' ', f);
		put_coords(f, g, i);
		dot_close(f, devs);
		if (g->n > GRID_LABELS_MAX)
			continue;
		fprintf(f,
		        "<text x=\"%.1f\" y=\"%.1f\" text-anchor=\"middle\" font-size=\"11\" "
		        "stroke=\"#ffffff\" stroke-width=\"3\" paint-order=\"stroke\"%s>",
		        x, y + g->node + 12,
		        nf ? " fill=\"" COLOUR_FAIL "\" font-weight=\"bold\"" : "");
		put_text(f, name);
		fputs("</text>\n", f);
	}
	fputs("</g>\n", f);
}

/* Lines the grid legend takes (for the picture's height). */
static size_t grid_legend_rows(const struct grid *g, json_t *units)
{
	return 6 + 2 * g->dims + json_object_size(units);
}

static void grid_legend(FILE *f, const struct grid *g, const json_t *fabric, const struct joined *j,
                        json_t *units)
{
	double x = g->width + 10, y = g->top + 30;
	const char *name;
	json_t *v;
	fputs("<g id=\"legend\">\n", f);
	fprintf(f, "<text x=\"%.0f\" y=\"%.0f\" font-weight=\"bold\">%s ", x, y,
	        g->torus ? "torus" : "HyperX");
	for (size_t d = 0; d < g->dims; d++)
		fprintf(f, "%s%zu", d ? " × " : "", g->k[d]);
	fprintf(f, "</text>\n<text x=\"%.0f\" y=\"%.0f\">diameter %lld · degree %lld</text>\n", x,
	        y + 20, num(fabric, "diameter"), num(fabric, "degree"));
	y += 50;
	for (size_t d = 0; d < g->dims; d++) {
		fprintf(
		    f,
		    "<line x1=\"%.0f\" y1=\"%.0f\" x2=\"%.0f\" y2=\"%.0f\" stroke=\"%s\" "
		    "stroke-width=\"4\"/><text x=\"%.0f\" y=\"%.0f\">dimension %zu (%s)</text>\n"
		    "<text x=\"%.0f\" y=\"%.0f\" fill=\"#333\">%zu %s of %zu, %zu "
		    "circuits</text>\n",
		    x, y - 4, x + 24, y - 4, dim_colour[d], x + 32, y, d,
		    d == 0   ? "across"
		    : d == 1 ? "down"
		             : "panels",
		    x + 32, y + 16, g->n / g->k[d], g->torus ? "rings" : "lines", g->k[d],
		    j->per_dim[d]);
		y += 40;
	}
	fprintf(f, "<text x=\"%.0f\" y=\"%.0f\" fill=\"#66707a\" font-size=\"11\">%s</text>\n", x,
	        y - 6,
	        g->torus ? "a ring: segments and an arc closing it"
	                 : "a line: one bus, all its servers joined");
	y += 18;
	fprintf(f,
	        "<line x1=\"%.0f\" y1=\"%.0f\" x2=\"%.0f\" y2=\"%.0f\" stroke=\"%s\" "
	        "stroke-width=\"2\" stroke-dasharray=\"5 4\"/><text x=\"%.0f\" y=\"%.0f\">"
	        "missing pair</text>\n",
	        x, y - 4, x + 24, y - 4, COLOUR_FAIL, x + 32, y);
	y += 22;
	fprintf(f,
	        "<circle cx=\"%.0f\" cy=\"%.0f\" r=\"6\" fill=\"%s\"/><text x=\"%.0f\" "
	        "y=\"%.0f\">server with failed devices</text>\n",
	        x + 12, y - 4, COLOUR_FAIL, x + 32, y);
	y += 30;
	fprintf(f, "<text x=\"%.0f\" y=\"%.0f\" font-weight=\"bold\">OCS units</text>\n", x, y);
	json_object_foreach(units, name, v)
	{
		y += 20;
		fprintf(f, "<text x=\"%.0f\" y=\"%.0f\">", x, y);
		put_text(f, name);
		fprintf(f, " (%lld circuits)</text>\n",
		        (long long)json_integer_value(json_array_get(v, 1)));
	}
	fputs("</g>\n", f);
}

static int by_name(const void *a, const void *b)
{
	return strcmp(*(const char *const *)a, *(const char *const *)b);
}

/*
 * The units of the fabric's circuits as {name: [colour index, circuits]} in
 * name order: a unit keeps its colour whatever the order of the links.
 */
static json_t *units_of(const json_t *links)
{
	json_t *counts = json_object(), *units = json_object(), *v;
	const char **names = NULL;
	const char *key;
	size_t i, n = 0;

	if (!counts || !units)
		goto fail;
	json_array_foreach(links, i, v)
	{
		const char *ocs = str(json_object_get(v, "a"), "ocs");
		json_int_t c = json_integer_value(json_object_get(counts, ocs));
		if (json_object_set_new(counts, ocs, json_integer(c + 1)) < 0)
			goto fail;
	}
	names = calloc(json_object_size(counts) + 1, sizeof(*names));
	if (!names)
		goto fail;
	json_object_foreach(counts, key, v)
	{
		names[n++] = key;
	}
	qsort(names, n, sizeof(*names), by_name);
	for (i = 0; i < n; i++)
		if (json_object_set_new(
		        units, names[i],
		        json_pack("[I, O]", (json_int_t)i, json_object_get(counts, names[i]))) < 0)
			goto fail;
	free(names);
	json_decref(counts);
	return units;
fail:
	free(names);
	json_decref(counts);
	json_decref(units);
	return NULL;
}

char *fabric_svg_render(const json_t *fabric, const json_t *failed, size_t *len)
{
	const json_t *names = json_object_get(fabric, "servers");
	const json_t *links = json_object_get(fabric, "links");
	const json_t *missing = json_object_get(fabric, "missing");
	json_t *map = json_object();
	json_t *units = units_of(links);
	char *text = NULL;
	size_t i, nfailed = 0;
	json_t *v;
	struct layout l;
	struct grid g;
	struct joined j = { 0 };
	FILE *f = NULL;

	if (!map || !units)
		goto out;
	/* Server name -> position, for the ends of circuits and missing pairs. */
	json_array_foreach(names, i, v)
	{
		const char *name = json_string_value(v);
		if (!name)
			continue;
		if (failed && json_array_size(json_object_get(failed, name)))
			nfailed++;
		if (json_object_set_new(map, name, json_integer((json_int_t)i)) < 0)
			goto out;
	}
	layout_make(&l, json_array_size(names), json_object_size(units));
	if (grid_make(&g, fabric, l.n)) {
		if (!joined_make(&j, &g, map, links))
			goto out;
		/* The grid in the circle's place, the legend beside it; room for the header. */
		l.width = fmax(g.width + LEGEND_W, 600.0);
		l.height = fmax(HEADER_H + g.height,
		                HEADER_H + 60.0 + 22.0 * (double)grid_legend_rows(&g, units));
	}
	f = open_memstream(&text, len);
	if (!f)
		goto out;
	header(f, &l, fabric, json_array_size(links), json_array_size(missing), nfailed);
	if (j.count) {
		grid_panels(f, &g);
		grid_circuits(f, &g, &j, names);
		grid_missing(f, &g, map, missing, names);
		grid_servers(f, &g, names, failed);
		grid_legend(f, &g, fabric, &j, units);
	} else {
		circuits(f, &l, map, links, units);
		missing_pairs(f, &l, map, missing);
		servers(f, &l, names, failed);
		legend(f, &l, units);
	}
	fputs("</svg>\n", f);
out:
	if (f && fclose(f) != 0) {
		free(text);
		text = NULL;
	}
	free(j.pairs);
	free(j.count);
	json_decref(map);
	json_decref(units);
	return text;
}
