#include "fabric_svg.h"

#include <math.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/*
 * Layout and colours; console/picture.js uses the same numbers so that the
 * console and the SVG show one picture.
 */
#define LEGEND_W    230.0
#define HEADER_H    56.0
#define LABELS_MAX  64   /* above this many servers, names would overlap */
#define LINES_MAX   2048 /* above this many circuits, one path per unit (no titles) */
#define COLOUR_FAIL "#d62728"

/* Tableau-like colours without red, which marks failures. */
static const char *const palette[] = { "#4e79a7", "#f28e2b", "#59a14f", "#b07aa1", "#76b7b2",
	                               "#edc948", "#9c755f", "#ff9da7", "#17becf", "#bab0ac" };
#define PALETTE_N (sizeof(palette) / sizeof(palette[0]))

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
		fprintf(f, "<circle cx=\"%.1f\" cy=\"%.1f\" r=\"%.1f\" fill=\"%s\"%s><title>", x, y,
		        l->node, nf ? COLOUR_FAIL : "#333333",
		        nf ? " stroke=\"#7f0000\" stroke-width=\"2\"" : "");
		put_text(f, name);
		if (nf) {
			fputs(": failed device", f);
			fputs(nf > 1 ? "s" : "", f);
			for (size_t k = 0; k < nf; k++)
				fprintf(f, "%s %lld", k ? "," : "",
				        (long long)json_integer_value(json_array_get(devs, k)));
		}
		fputs("</title></circle>\n", f);
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
	f = open_memstream(&text, len);
	if (!f)
		goto out;
	header(f, &l, fabric, json_array_size(links), json_array_size(missing), nfailed);
	circuits(f, &l, map, links, units);
	missing_pairs(f, &l, map, missing);
	servers(f, &l, names, failed);
	legend(f, &l, units);
	fputs("</svg>\n", f);
out:
	if (f && fclose(f) != 0) {
		free(text);
		text = NULL;
	}
	json_decref(map);
	json_decref(units);
	return text;
}
