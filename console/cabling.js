// The whole cabling: every OCS unit's ports with the server device port each
// is cabled to, what circuit it carries now, its fabric, and what is wrong
// with it (port down, device failed, circuit not held or not asked for).
// A table per unit, not a drawing: a cluster of hundreds of servers on units
// of 320 ports is thousands of cables, which lines would only tangle.

import { badge, h, matcher, table } from './dom.js';

// Rows of one unit built at most: a unit of 320 ports shows whole; a larger
// one asks for the filter.
const ROWS_SHOWN = 400;
// Above this many rows in all, the units start folded (one summary line each).
const ROWS_OPEN = 2000;

// Units the user opened or folded by hand: name -> open.
const folded = new Map();

/** The ports of each unit that a cable, a circuit or a link state concerns. */
function unitPorts(state) {
  const cables = new Map(); // "unit:port" -> wiring link
  for (const l of state.wiring) cables.set(`${l.ocs}:${l.ocs_port}`, l);
  const servers = new Map(state.servers.map((s) => [s.name, s]));
  const units = [...state.ocs.values()].sort((a, b) => a.name.localeCompare(b.name));
  return units.map((u) => unitModel(u, state.xc.get(u.name), cables, servers, state.failed));
}

// The peer of each port in a list of pairs [x, y].
function peers(pairs) {
  const m = new Map();
  for (const [a, b] of pairs || []) {
    m.set(a, b);
    m.set(b, a);
  }
  return m;
}

function unitModel(u, xc, cables, servers, failed) {
  const held = peers(xc && xc.actual);
  const desired = peers(xc && xc.desired);
  const down = new Set(u.ports_down || []);
  const cable = (p) => cables.get(`${u.name}:${p}`);
  const fabricOf = (l) => (l && servers.get(l.server) ? servers.get(l.server).fabric || '' : '');
  const ports = new Set([...held.keys(), ...desired.keys(), ...down]);
  for (const l of cables.values()) if (l.ocs === u.name) ports.add(l.ocs_port);
  const rows = [...ports].sort((a, b) => a - b).map((port) => {
    const c = cable(port);
    const to = held.has(port) ? held.get(port) : desired.get(port);
    // A circuit is a fabric's when both its ends are cabled to that fabric's servers.
    const fabric = to !== undefined && fabricOf(c) && fabricOf(c) === fabricOf(cable(to)) ? fabricOf(c) : '';
    return {
      port,
      cable: c,
      held: held.get(port),
      desired: desired.get(port),
      peer: to === undefined ? null : { port: to, cable: cable(to) },
      down: down.has(port),
      failed: !!c && (failed.get(c.server) || []).includes(c.device),
      fabric,
    };
  });
  return { unit: u, xc, rows };
}

function counts(rows) {
  return {
    cabled: rows.filter((r) => r.cable).length,
    used: rows.filter((r) => r.held !== undefined).length,
    down: rows.filter((r) => r.down).length,
    failed: rows.filter((r) => r.failed).length,
  };
}

// What is true of a port, worst first; a cabled port with none of it is free.
function marks(r) {
  const m = [];
  if (r.down) m.push(badge('port down', 'down'));
  if (r.failed) m.push(badge('device failed', 'failed'));
  if (r.held !== undefined && r.held === r.desired) m.push(badge('in use', 'applied'));
  if (r.desired !== undefined && r.held !== r.desired) m.push(badge('not held yet', 'pending'));
  if (r.held !== undefined && r.held !== r.desired) m.push(badge('held, not asked for', 'degraded'));
  if (!m.length) m.push(badge(r.cable ? 'free' : 'not cabled', 'free'));
  return m;
}

function end(l) {
  return l ? `${l.server} d${l.device}p${l.port}` : 'not cabled';
}

function portRow(r, colour) {
  const bad = r.down || r.failed || r.held !== r.desired;
  return h('tr', {
    'data-port': r.port,
    'data-server': r.cable ? r.cable.server : null,
    'data-fabric': r.fabric || null,
    class: bad ? 'bad' : r.held !== undefined ? 'used' : '',
  },
  h('td', { class: 'num' }, r.port),
  h('td', {}, r.cable ? r.cable.server : h('span', { class: 'hint' }, '—')),
  h('td', { class: 'num' }, r.cable ? r.cable.device : ''),
  h('td', { class: 'num' }, r.cable ? r.cable.port : ''),
  h('td', {}, marks(r)),
  h('td', {}, r.peer ? `→ ${r.peer.port} (${end(r.peer.cable)})` : ''),
  h('td', {}, r.fabric ? [h('span', { class: 'swatch', style: { background: colour(r.fabric) } }),
    h('a', { href: `#/fabrics/${encodeURIComponent(r.fabric)}` }, r.fabric)] : ''));
}

function unitSection(m, rows, open, { colour, redraw }) {
  const u = m.unit;
  const c = counts(m.rows);
  const conn = (u.connection || { state: 'down' }).state;
  const summary = h('summary', {},
    h('a', { href: `#/ocs/${encodeURIComponent(u.name)}` }, u.name), ' ', badge(conn),
    h('span', { class: 'counts', 'data-counts': '' },
      ` ${u.ports} ports · ${c.cabled} cabled · ${c.used} in use · ${c.down} down` +
      (c.failed ? ` · ${c.failed} on failed devices` : '') +
      (rows.length < m.rows.length ? ` · ${rows.length} match the filter` : '')));
  const details = h('details', { class: 'cabling-unit', 'data-unit': u.name, open }, summary);
  // The user's fold outlives the redraws; a folded unit builds no rows.
  summary.addEventListener('click', (e) => {
    e.preventDefault();
    folded.set(u.name, !open);
    redraw();
  });
  if (open) {
    details.append(
      table(['OCS port', 'server', 'device', 'port', 'state', 'circuit to', 'fabric'],
        rows.slice(0, ROWS_SHOWN).map((r) => portRow(r, colour)), { class: 'cabling' }),
      rows.length > ROWS_SHOWN ? h('p', { class: 'hint' },
        `and ${rows.length - ROWS_SHOWN} more ports: narrow them with the filter`) : '');
  }
  return details;
}

// A server's cables, circuits and failed devices, from the units' rows.
function serverRows(state, models, match, switches, { colour }) {
  const per = new Map();
  for (const m of models) {
    for (const r of m.rows) {
      if (!r.cable) continue;
      const s = per.get(r.cable.server) || { cabled: 0, used: 0, units: new Set() };
      s.cabled++;
      if (r.held !== undefined) s.used++;
      s.units.add(m.unit.name);
      per.set(r.cable.server, s);
    }
  }
  return state.servers.map((srv) => {
    const s = per.get(srv.name) || { cabled: 0, used: 0, units: new Set() };
    const units = [...s.units].sort();
    if (!match(srv.name, srv.fabric || '', srv.switch || '', ...units)) return null;
    const bad = state.failed.get(srv.name) || [];
    return h('tr', { 'data-server': srv.name, class: bad.length ? 'bad' : '' },
      h('td', {}, srv.name),
      h('td', {}, srv.fabric ? [h('span', { class: 'swatch', style: { background: colour(srv.fabric) } }),
        h('a', { href: `#/fabrics/${encodeURIComponent(srv.fabric)}` }, srv.fabric)] : ''),
      h('td', { class: 'num' }, `${srv.devices} × ${srv.ports_per_device}`),
      h('td', { class: 'num' }, s.cabled),
      h('td', { class: 'num' }, s.used),
      h('td', {}, bad.length ? badge(`device ${bad.join(', ')} failed`, 'failed') : ''),
      h('td', {}, units.join(', ')),
      switches ? h('td', {}, srv.switch || '') : '');
  }).filter(Boolean);
}

/**
 * The cabling view of state (the console's: ocs, xc, servers, wiring,
 * failed), narrowed to the rows that match query. ui.colour(fabric) is the
 * fabric's colour in the other views, ui.redraw() draws the view again.
 */
export function cablingView(state, query, ui) {
  const match = matcher(query);
  const models = unitPorts(state);
  const total = models.reduce((n, m) => n + m.rows.length, 0);
  // Folded by the user, else open when there is little to show or the filter picked rows.
  const open = (name, shown) => (folded.has(name) ? folded.get(name)
    : shown > 0 && (total <= ROWS_OPEN || !!query));
  const all = models.map((m) => counts(m.rows));
  const sum = (k) => all.reduce((n, c) => n + c[k], 0);
  const sections = [];
  for (const m of models) {
    const rows = m.rows.filter((r) => match(m.unit.name, String(r.port), r.cable ? r.cable.server : '', r.fabric));
    if (query && !rows.length) continue;
    sections.push(unitSection(m, rows, open(m.unit.name, rows.length), ui));
  }
  // The switch column only where servers hang off switches.
  const switches = state.servers.some((s) => s.switch);
  const servers = serverRows(state, models, match, switches, ui);
  return h('div', { class: 'cabling-view' },
    h('h2', {}, `Cabling: ${models.length} OCS units, ${state.servers.length} servers`),
    h('p', { class: 'summary', id: 'cabling-summary' },
      `${sum('cabled')} ports cabled · ${sum('used')} in use · ${sum('down')} down · ` +
      `${sum('failed')} on failed devices`),
    sections.length ? sections : h('p', { class: 'empty' }, query ? 'No port matches the filter.' : 'No OCS unit.'),
    h('h2', {}, `Servers (${servers.length}${servers.length < state.servers.length ? ` of ${state.servers.length}` : ''})`),
    servers.length ? table(['server', 'fabric', 'devices × ports', 'cabled ports', 'in use',
      'failed devices', 'OCS units', ...(switches ? ['switch'] : [])], servers, { class: 'cabling-servers' })
      : h('p', { class: 'empty' }, query ? 'No server matches the filter.' : 'No server.'));
}
