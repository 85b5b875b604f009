// A fabric drawn on a canvas: the picture of GET v1/fabrics/{name}/picture.svg
// (daemon/fabric_svg.c uses the same layout and colours). Servers sit around a
// circle in plan order from the top, clockwise; circuits are lines coloured by
// OCS unit; missing pairs are dashed red lines; servers with failed devices are
// red. A canvas keeps a 512-server fabric (130,816 circuits) one DOM node.

/** Colours of the OCS units, by unit name order; red is kept for failures. */
export const PALETTE = ['#4e79a7', '#f28e2b', '#59a14f', '#b07aa1', '#76b7b2',
  '#edc948', '#9c755f', '#ff9da7', '#17becf', '#bab0ac'];
export const FAIL = '#d62728';
const LABELS_MAX = 64;

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
  };
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
    this.geo = layout(fabric.servers.length);
    this.units = unitsOf(fabric);
    this.colour = new Map(this.units.map((u) => [u.name, u.colour]));
    this.index = new Map(fabric.servers.map((s, i) => [s, i]));
    this.points = fabric.servers.map((_, i) => this.at(i, 0));
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

  // Layout units to CSS pixels: the square fits the canvas, centred.
  fit() {
    const w = this.canvas.clientWidth;
    const h = this.canvas.clientHeight;
    const scale = Math.min(w, h) / this.geo.size;
    return { scale, ox: (w - this.geo.size * scale) / 2, oy: (h - this.geo.size * scale) / 2 };
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
    ctx.clearRect(0, 0, this.geo.size, this.geo.size);
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

  // A click selects the server under it, else the nearest circuit within a few
  // pixels: one pass over the links, fast enough for 130k of them.
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
      if (d <= Math.max(this.geo.node, reach) && d < bestD) {
        best = { server: name };
        bestD = d;
      }
    });
    if (!best) {
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
