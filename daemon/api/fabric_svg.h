/*
 * A fabric drawn as a standalone SVG picture (GET /v1/fabrics/{name}/picture.svg),
 * the same picture the web console draws on its canvas (console/picture.js).
 * A full mesh: servers around a circle in plan order from the top, clockwise;
 * circuits as straight lines coloured by OCS unit. A HyperX or torus of 2 to 4
 * dimensions: servers on their grid (dimension 0 across, 1 down, 2 and 3 as
 * panels), a group of lines per dimension in its colour (a HyperX line one bus,
 * a torus ring its segments and an arc closing it). Either way missing pairs
 * dashed red, servers with failed devices red, and a legend (for a grid, the
 * shape and the dimensions). Pure: works on JSON views only, no store. Any
 * thread.
 */
#ifndef OFCD_FABRIC_SVG_H
#define OFCD_FABRIC_SVG_H

#include <jansson.h>
#include <stddef.h>

/**
 * Renders fabric, the view of topo_fabric_json() ("name", "state",
 * "revision", "servers", "links", "missing"; "topology", "shape", "diameter"
 * and "degree" for a grid), with failed, an object mapping
 * a server's name to the array of its failed device indexes (servers with
 * none may be left out; NULL for none at all). Returns the picture as
 * malloc'd text the caller frees, its length in *len; NULL when out of memory.
 */
char *fabric_svg_render(const json_t *fabric, const json_t *failed, size_t *len);

#endif
