// A fabric drawn on a canvas: the picture of GET v1/fabrics/{name}/picture.svg
// (daemon/fabric_svg.c uses the same layout and colours). A full mesh: servers
// sit around a circle in plan order from the top, clockwise; circuits are lines
// coloured by OCS unit. A HyperX or torus of 2 or more dimensions: servers sit
// on their grid (dimension 0 across, dimension 1 down, further dimensions as
// panels side by side), and each dimension's lines have their colour: a HyperX
// line (a full mesh of k servers) is one bus through them, a torus ring its
// segments and an arc closing it. Either way missing pairs are dashed red
// lines or arcs and servers with failed devices are red. A canvas keeps a
// 512-server fabric (130,816 circuits) one DOM node.

/** Colours of the OCS units, by unit name order; red is kept for failures. */
export const PALETTE = ['#4e79a7', '#f28e2b', '#59a14f', '#b07aa1', '#76b7b2',
  '#edc948', '#9c755f', '#ff9da7', '#17becf', '#bab0ac'];
export const FAIL = '#d62728';
/** Colours of a grid's dimensions 0 to 3. */
export const DIM_COLOURS = ['#4e79a7', '#f28e2b', '#59a14f', '#b07aa1'];
const LABELS_MAX = 64;
const GRID_LABELS_MAX = 256;

/** The picture's geometry for n servers (the numbers of fabric_svg.c). */
export function layout(n) {
  const radius = Math.max(180, 0.8 * n);
  const margin = n <= LABELS_MAX ? 90 : 30;
  return {
    n,
    radius,
    margin,
    size: 2 * (radius + margin),
    node: n <= LABELS_MAX ? 6 : Math.max(1.5, Math.min(6, (Math.PI * radius) / n * 0.7)),
    stroke: n <= 32 ? 2 : n <= 128 ? 1 : 0.5,
    opacity: n <= 32 ? 0.9 : n <= 128 ? 0.7 : n <= 256 ? 0.4 : 0.15,
    w: 2 * (radius + margin),
    h: 2 * (radius + margin),
  };
}

/** Whether fabric is drawn on its grid: a HyperX or torus of 2 dimensions or more. */
export function isGrid(fabric) {
  return (fabric.topology === 'hyperx' || fabric.topology === 'torus') &&
    Array.isArray(fabric.shape) && fabric.shape.length >= 2;
}

/** The coordinates of position pos on shape (dimension 0 fastest). */
export function coordsOf(shape, pos) {
  return shape.map((k) => {
    const c = pos % k;
    pos = Math.floor(pos / k);
    return c;
  });
}

/** The dimension along which positions a and b differ, or -1 (none, or several). */
export function dimOf(shape, a, b) {
  let d = -1;
  for (let i = 0; i < shape.length; i++) {
    if (a % shape[i] !== b % shape[i]) {
      if (d >= 0) return -1;
      d = i;
    }
    a = Math.floor(a / shape[i]);
    b = Math.floor(b / shape[i]);
  }
  return d;
}

/**
 * The picture's geometry for a grid (the numbers of fabric_svg.c): step between
 * neighbours, a panel per place on dimensions 2 and 3 (dimension 2 across,
 * dimension 3 down; a long dimension 2 of a 3-D grid wraps).
 */
export function gridLayout(shape) {
  const n = shape.reduce((a, b) => a * b, 1);
  const step = n <= GRID_LABELS_MAX ? 56 : n <= 1024 ? 28 : 14;
  const pad = 0.75 * step;
  const gap = 0.5 * step;
  const title = shape.length > 2 ? 18 : 0;
  const panels = shape.slice(2).reduce((a, b) => a * b, 1);
  const cols = shape.length === 4 ? shape[2]
    : shape.length === 3 ? (shape[2] <= 4 ? shape[2] : Math.ceil(Math.sqrt(shape[2]))) : 1;
  const rows = Math.ceil(panels / cols);
  const boxW = (shape[0] - 1) * step + 2 * pad;
  const boxH = (shape[1] - 1) * step + 2 * pad + title;
  const margin = 20;
  return {
    n, shape, step, pad, gap, title, panels, cols, rows, boxW, boxH, margin,
    w: 2 * margin + cols * boxW + (cols - 1) * gap,
    h: 2 * margin + rows * boxH + (rows - 1) * gap,
    node: Math.max(1.5, Math.min(6, 0.12 * step)),
    labels: n <= GRID_LABELS_MAX,
    stroke: n <= 256 ? 2.5 : n <= 1024 ? 1.5 : 0.75,
  };
}

/** Layout coordinates of position pos on a grid. */
export function gridAt(g, pos) {
  const [k0, k1] = g.shape;
  const p = Math.floor(pos / (k0 * k1));
  const col = p % g.cols;
  const row = Math.floor(p / g.cols);
  return {
    x: g.margin + col * (g.boxW + g.gap) + g.pad + (pos % k0) * g.step,
    y: g.margin + row * (g.boxH + g.gap) + g.title + g.pad + (Math.floor(pos / k0) % k1) * g.step,
  };
}

/**
 * What a grid's picture draws, from the pairs of positions joined by a circuit
 * (a Set of a * n + b, a < b): per dimension, a list of {a, b, bow} where bow is
 * 0 for a straight line and otherwise how far (in steps) the arc from a to b
 * leans off it (positive: down or right). A HyperX line with a circuit is one
 * bus from its first server to its last (across panels: arcs from one to the
 * next); a torus ring, each present segment and an arc closing the ring.
 */
export function gridSegments(shape, torus, joined) {
  const n = shape.reduce((a, b) => a * b, 1);
  const has = (a, b) => joined.has(Math.min(a, b) * n + Math.max(a, b));
  let stride = 1;
  return shape.map((k, d) => {
    const out = [];
    const across = d >= 2; // between panels
    for (let base = 0; base < n; base++) {
      if (Math.floor(base / stride) % k !== 0) continue;
      const m = (j) => base + j * stride;
      if (!torus) {
        let any = false;
        for (let i = 0; i < k && !any; i++) for (let j = i + 1; j < k && !any; j++) any = has(m(i), m(j));
        if (!any) continue;
        if (across) for (let j = 0; j + 1 < k; j++) out.push({ a: m(j), b: m(j + 1), bow: 0.3 });
        else out.push({ a: m(0), b: m(k - 1), bow: 0 });
        continue;
      }
      for (let j = 0; j + 1 < k; j++) if (has(m(j), m(j + 1))) out.push({ a: m(j), b: m(j + 1), bow: across ? 0.3 : 0 });
      if (k > 2 && has(m(0), m(k - 1))) out.push({ a: m(0), b: m(k - 1), bow: -0.4, wrap: true });
    }
    stride *= k;
    return out;
  });
}

/**
 * The control point of an arc from a to b leaning off by bow (in layout units):
 * along the normal that points down (right, for a vertical a-b).
 */
export function arcControl(a, b, bow) {
  const dx = b.x - a.x;
  const dy = b.y - a.y;
  const len = Math.hypot(dx, dy) || 1;
  let nx = -dy / len;
  let ny = dx / len;
  if (ny < 0 || (ny === 0 && nx < 0)) {
    nx = -nx;
    ny = -ny;
  }
  return { x: (a.x + b.x) / 2 + 2 * bow * nx, y: (a.y + b.y) / 2 + 2 * bow * ny };
}

/** How far a missing pair's dashed arc leans: more for a longer one, so nested ones part. */
export function missingBow(g, a, b) {
  return Math.min(0.45 * g.step, 0.15 * g.step + 0.08 * Math.hypot(b.x - a.x, b.y - a.y));
}

/** The OCS units of a fabric's circuits, by name, with their colour and circuit count. */
export function unitsOf(fabric) {
  const counts = new Map();
  for (const l of fabric.links) counts.set(l.a.ocs, (counts.get(l.a.ocs) || 0) + 1);
  return [...counts.keys()].sort().map((name, i) => ({
    name, colour: PALETTE[i % PALETTE.length], circuits: counts.get(name),
  }));
}

export class FabricPicture {
  /** canvas: the element to draw on; onSelect({link} | {server} | null) on a click. */
  constructor(canvas, onSelect) {
    this.canvas = canvas;
    this.onSelect = onSelect;
    this.fabric = null;
    this.failed = {};
    this.selected = null;
    canvas.addEventListener('click', (e) => this.click(e));
    new ResizeObserver(() => this.draw()).observe(canvas);
  }

  /** Shows fabric (the JSON of GET v1/fabrics/{name}) with failed = {server: [devices]}. */
  set(fabric, failed) {
    // A redraw of the panel around it hands the same data again: nothing to do.
    if (fabric === this.fabric && JSON.stringify(failed || {}) === JSON.stringify(this.failed)) return;
    const same = this.fabric && this.fabric.name === fabric.name &&
      this.fabric.revision === fabric.revision;
    this.fabric = fabric;
    this.failed = failed || {};
    this.grid = isGrid(fabric);
    this.geo = this.grid ? gridLayout(fabric.shape) : layout(fabric.servers.length);
    this.units = unitsOf(fabric);
    this.colour = new Map(this.units.map((u) => [u.name, u.colour]));
    this.index = new Map(fabric.servers.map((s, i) => [s, i]));
    this.points = fabric.servers.map((_, i) => (this.grid ? gridAt(this.geo, i) : this.at(i, 0)));
    if (this.grid) {
      const n = fabric.servers.length;
      const joined = new Set();
      for (const l of fabric.links) {
        const a = this.index.get(l.a.server);
        const b = this.index.get(l.b.server);
        if (a !== undefined && b !== undefined) joined.add(Math.min(a, b) * n + Math.max(a, b));
      }
      this.segments = gridSegments(fabric.shape, fabric.topology === 'torus', joined);
    } else {
      this.segments = null;
    }
    if (!same) this.selected = null;
    this.draw();
  }

  // Layout coordinates (a square of geo.size) of server i, pushed out by grow.
  at(i, grow) {
    const g = this.geo;
    const a = -Math.PI / 2 + (2 * Math.PI * i) / Math.max(g.n, 1);
    const c = g.radius + g.margin;
    return { x: c + (g.radius + grow) * Math.cos(a), y: c + (g.radius + grow) * Math.sin(a) };
  }

  // Layout units to CSS pixels: the picture fits the canvas, centred.
  fit() {
    const w = this.canvas.clientWidth;
    const h = this.canvas.clientHeight;
    // A small grid is drawn at most 1.6 times its size.
    const scale = Math.min(w / this.geo.w, h / this.geo.h, this.grid ? 1.6 : Infinity);
    return { scale, ox: (w - this.geo.w * scale) / 2, oy: (h - this.geo.h * scale) / 2 };
  }

  draw() {
    const cv = this.canvas;
    if (!this.fabric || !cv.isConnected) return;
    const dpr = window.devicePixelRatio || 1;
    const w = cv.clientWidth;
    const h = cv.clientHeight;
    if (!w || !h) return;
    cv.width = Math.round(w * dpr);
    cv.height = Math.round(h * dpr);
    const ctx = cv.getContext('2d');
    const { scale, ox, oy } = this.fit();
    ctx.setTransform(dpr * scale, 0, 0, dpr * scale, dpr * ox, dpr * oy);
    ctx.clearRect(0, 0, this.geo.w, this.geo.h);
    if (this.grid) {
      this.drawGrid(ctx);
      return;
    }
    const g = this.geo;
    const f = this.fabric;
    const p = this.points;

    // One path per unit: a single stroke() for thousands of lines.
    ctx.lineWidth = g.stroke;
    ctx.globalAlpha = g.opacity;
    for (const u of this.units) {
      ctx.beginPath();
      for (const l of f.links) {
        if (l.a.ocs !== u.name) continue;
        const a = p[this.index.get(l.a.server)];
        const b = p[this.index.get(l.b.server)];
        if (!a || !b) continue;
        ctx.moveTo(a.x, a.y);
        ctx.lineTo(b.x, b.y);
      }
      ctx.strokeStyle = u.colour;
      ctx.stroke();
    }
    ctx.globalAlpha = 1;

    ctx.setLineDash([5, 4]);
    ctx.strokeStyle = FAIL;
    ctx.lineWidth = Math.max(g.stroke, 1.5);
    ctx.beginPath();
    for (const [sa, sb] of f.missing) {
      const a = p[this.index.get(sa)];
      const b = p[this.index.get(sb)];
      if (!a || !b) continue;
      ctx.moveTo(a.x, a.y);
      ctx.lineTo(b.x, b.y);
    }
    ctx.stroke();
    ctx.setLineDash([]);

    const sel = this.selected;
    if (sel && sel.link) {
      const a = p[this.index.get(sel.link.a.server)];
      const b = p[this.index.get(sel.link.b.server)];
      ctx.lineWidth = Math.max(3, g.stroke * 3) / Math.max(scale, 0.2);
      ctx.strokeStyle = '#111';
      ctx.beginPath();
      ctx.moveTo(a.x, a.y);
      ctx.lineTo(b.x, b.y);
      ctx.stroke();
      ctx.lineWidth = Math.max(1.5, g.stroke * 1.5) / Math.max(scale, 0.2);
      ctx.strokeStyle = this.colour.get(sel.link.a.ocs);
      ctx.stroke();
    }

    ctx.font = '12px "DejaVu Sans", Helvetica, Arial, sans-serif';
    ctx.textBaseline = 'middle';
    f.servers.forEach((name, i) => {
      const bad = (this.failed[name] || []).length > 0;
      const chosen = sel && sel.server === name;
      ctx.beginPath();
      ctx.arc(p[i].x, p[i].y, g.node * (chosen ? 1.6 : 1), 0, 2 * Math.PI);
      ctx.fillStyle = bad ? FAIL : '#333';
      ctx.fill();
      if (bad || chosen) {
        ctx.lineWidth = 2;
        ctx.strokeStyle = chosen ? '#111' : '#7f0000';
        ctx.stroke();
      }
      if (g.n > LABELS_MAX) return;
      const t = this.at(i, g.node + 8);
      const dx = t.x - (g.radius + g.margin);
      ctx.textAlign = dx > 0.2 * g.radius ? 'left' : dx < -0.2 * g.radius ? 'right' : 'center';
      ctx.fillStyle = bad ? FAIL : '#222';
      ctx.font = `${bad ? 'bold ' : ''}12px "DejaVu Sans", Helvetica, Arial, sans-serif`;
      ctx.fillText(name, t.x, t.y);
    });
  }

  // A grid: panels, each dimension's lines in its colour, missing pairs as
  // dashed red arcs, the selected server's circuits as arcs to each peer.
  drawGrid(ctx) {
    const g = this.geo;
    const f = this.fabric;
    const p = this.points;
    const stroke = (a, b, bow) => {
      ctx.moveTo(a.x, a.y);
      if (!bow) {
        ctx.lineTo(b.x, b.y);
        return;
      }
      const c = arcControl(a, b, bow);
      ctx.quadraticCurveTo(c.x, c.y, b.x, b.y);
    };

    if (g.panels > 1) {
      ctx.font = '12px "DejaVu Sans", Helvetica, Arial, sans-serif';
      ctx.textAlign = 'left';
      ctx.textBaseline = 'top';
      for (let q = 0; q < g.panels; q++) {
        const x = g.margin + (q % g.cols) * (g.boxW + g.gap);
        const y = g.margin + Math.floor(q / g.cols) * (g.boxH + g.gap);
        ctx.fillStyle = '#f6f7f9';
        ctx.fillRect(x, y, g.boxW, g.boxH);
        ctx.fillStyle = '#66707a';
        const rest = coordsOf(g.shape.slice(2), q);
        ctx.fillText(`(·, ·, ${rest.join(', ')})`, x + 4, y + 3);
      }
    }

    ctx.lineWidth = g.stroke;
    this.segments.forEach((list, d) => {
      ctx.globalAlpha = d >= 2 ? 0.45 : 0.9;
      ctx.strokeStyle = DIM_COLOURS[d % DIM_COLOURS.length];
      ctx.beginPath();
      for (const s of list) stroke(p[s.a], p[s.b], s.bow * g.step);
      ctx.stroke();
    });
    ctx.globalAlpha = 1;

    ctx.setLineDash([5, 4]);
    ctx.strokeStyle = FAIL;
    ctx.lineWidth = Math.max(g.stroke * 0.8, 1.5);
    ctx.beginPath();
    for (const [sa, sb] of f.missing) {
      const ia = this.index.get(sa);
      const ib = this.index.get(sb);
      if (ia === undefined || ib === undefined) continue;
      const [a, b] = ia < ib ? [p[ia], p[ib]] : [p[ib], p[ia]];
      stroke(a, b, missingBow(g, a, b));
    }
    ctx.stroke();
    ctx.setLineDash([]);

    const sel = this.selected;
    if (sel && sel.server) {
      const me = this.index.get(sel.server);
      ctx.lineWidth = Math.max(3, g.stroke * 1.6);
      for (const l of f.links) {
        if (l.a.server !== sel.server && l.b.server !== sel.server) continue;
        const other = this.index.get(l.a.server === sel.server ? l.b.server : l.a.server);
        const d = dimOf(g.shape, me, other);
        const [a, b] = me < other ? [p[me], p[other]] : [p[other], p[me]];
        ctx.strokeStyle = d < 0 ? '#111' : DIM_COLOURS[d % DIM_COLOURS.length];
        ctx.beginPath();
        stroke(a, b, 0.22 * g.step);
        ctx.stroke();
      }
    }

    ctx.textAlign = 'center';
    ctx.textBaseline = 'top';
    f.servers.forEach((name, i) => {
      const bad = (this.failed[name] || []).length > 0;
      const chosen = sel && sel.server === name;
      ctx.beginPath();
      ctx.arc(p[i].x, p[i].y, g.node * (chosen ? 1.6 : 1), 0, 2 * Math.PI);
      ctx.fillStyle = bad ? FAIL : '#333';
      ctx.fill();
      if (bad || chosen) {
        ctx.lineWidth = 2;
        ctx.strokeStyle = chosen ? '#111' : '#7f0000';
        ctx.stroke();
      }
      if (!g.labels) return;
      // On a white halo: a dashed arc may pass under a name.
      ctx.font = `${bad ? 'bold ' : ''}11px "DejaVu Sans", Helvetica, Arial, sans-serif`;
      ctx.lineWidth = 3;
      ctx.strokeStyle = '#fff';
      ctx.strokeText(name, p[i].x, p[i].y + g.node + 3);
      ctx.fillStyle = bad ? FAIL : '#222';
      ctx.fillText(name, p[i].x, p[i].y + g.node + 3);
    });
  }

  /** CSS pixel position, relative to the canvas, of a point a third along link i. */
  pointOnLink(i) {
    const l = this.fabric.links[i];
    const a = this.points[this.index.get(l.a.server)];
    const b = this.points[this.index.get(l.b.server)];
    const { scale, ox, oy } = this.fit();
    return { x: ox + (a.x + (b.x - a.x) / 3) * scale, y: oy + (a.y + (b.y - a.y) / 3) * scale };
  }

  /** CSS pixel position, relative to the canvas, of server name. */
  pointOfServer(name) {
    const q = this.points[this.index.get(name)];
    const { scale, ox, oy } = this.fit();
    return { x: ox + q.x * scale, y: oy + q.y * scale };
  }

  // A click selects the server under it, else (full mesh) the nearest circuit
  // within a few pixels: one pass over the links, fast enough for 130k of them.
  click(e) {
    if (!this.fabric) return;
    const r = this.canvas.getBoundingClientRect();
    const { scale, ox, oy } = this.fit();
    const x = (e.clientX - r.left - ox) / scale;
    const y = (e.clientY - r.top - oy) / scale;
    const reach = 6 / scale;
    let best = null;
    let bestD = Infinity;
    this.fabric.servers.forEach((name, i) => {
      const d = Math.hypot(this.points[i].x - x, this.points[i].y - y);
      if (d <= Math.max(this.geo.node, reach, this.grid ? 0.3 * this.geo.step : 0) && d < bestD) {
        best = { server: name };
        bestD = d;
      }
    });
    // A grid draws lines, not circuits: a click there selects a server only.
    if (!best && !this.grid) {
      for (const l of this.fabric.links) {
        const a = this.points[this.index.get(l.a.server)];
        const b = this.points[this.index.get(l.b.server)];
        const d = segmentDistance(x, y, a, b);
        if (d <= reach && d < bestD) {
          best = { link: l };
          bestD = d;
        }
      }
    }
    this.selected = best;
    this.draw();
    this.onSelect(best);
  }
}

function segmentDistance(x, y, a, b) {
  const dx = b.x - a.x;
  const dy = b.y - a.y;
  const len = dx * dx + dy * dy;
  const t = len ? Math.max(0, Math.min(1, ((x - a.x) * dx + (y - a.y) * dy) / len)) : 0;
  return Math.hypot(a.x + t * dx - x, a.y + t * dy - y);
}
