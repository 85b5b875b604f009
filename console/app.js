// The ofcd web console: the cluster, the fabrics (as a list and as a
// picture), an OCS unit's desired and held cross-connects, the whole cabling,
// and the live events and operations. It reads the REST API only; GET
// v1/events tells it what changed, and it re-fetches what an event concerns
// (no polling).

import { ApiError, EventStream, getBlob, getJson, setToken, token } from './api.js';
import { cablingView } from './cabling.js';
import { badge, h, matcher, table } from './dom.js';
import { coordsOf, dimOf, DIM_COLOURS, FabricPicture, FAIL, isGrid, PALETTE, unitsOf } from './picture.js';

const EVENTS_KEPT = 200;
const SYNC_ROWS_SHOWN = 300; // rows in sync shown for a unit; drift rows are always shown
const FILTERED_VIEWS = ['cluster', 'fabrics', 'cabling']; // views with a search box

const state = {
  live: 'connecting',
  needToken: false,
  error: null,
  ocs: new Map(), // name -> GET v1/ocs/{name}
  xc: new Map(), // name -> GET v1/ocs/{name}/cross-connects
  servers: [], // GET v1/servers
  failed: new Map(), // server -> [failed device indexes] (GET v1/servers, device_state events)
  wiring: [], // GET v1/wiring links
  fabrics: [], // GET v1/fabrics
  fabricErrors: new Map(), // fabric -> error of a failed fabric
  fabric: null, // GET v1/fabrics/{name} of the fabric on screen
  fabricGone: null, // name of the fabric on screen once it was deleted
  fabricOps: [], // operations of the fabric on screen
  operations: [], // GET v1/operations
  events: [], // newest first
  selection: null, // what was clicked in the picture
};

// ---- small helpers ---------------------------------------------------------

function time(t) {
  return t ? t.replace('T', ' ').replace(/\.\d+Z$/, 'Z') : '';
}

function fabricColour(name) {
  const i = state.fabrics.findIndex((f) => f.name === name);
  return i < 0 ? '#ccc' : PALETTE[i % PALETTE.length];
}

// ---- loading ---------------------------------------------------------------

// Work triggered by events is coalesced: a burst of events about one thing
// costs one request.
const pending = new Map();
function soon(key, fn) {
  if (pending.has(key)) return;
  pending.set(key, setTimeout(() => {
    pending.delete(key);
    fn().catch(failed);
  }, 30));
}

function failed(e) {
  if (e instanceof ApiError && (e.status === 401 || e.status === 403)) {
    state.needToken = true;
  } else {
    state.error = e.message;
  }
  render();
}

async function loadFabrics() {
  const { fabrics } = await getJson('v1/fabrics');
  state.fabrics = fabrics;
  for (const f of fabrics) {
    if (f.state === 'failed' && !state.fabricErrors.has(f.name)) {
      const full = await getJson(`v1/fabrics/${encodeURIComponent(f.name)}`);
      if (full.error) state.fabricErrors.set(f.name, full.error);
    }
  }
  const shown = route().fabric;
  if (shown && !fabrics.some((f) => f.name === shown)) {
    state.fabricGone = shown;
    state.fabric = null;
  }
  render();
}

function fabricGone(name) {
  state.fabric = null;
  state.fabricGone = name;
  render();
}

async function loadFabric(name) {
  if (!state.fabrics.some((f) => f.name === name)) return fabricGone(name);
  let fabric;
  let ops;
  try {
    [fabric, ops] = await Promise.all([
      getJson(`v1/fabrics/${encodeURIComponent(name)}`),
      getJson(`v1/operations?fabric=${encodeURIComponent(name)}&limit=20`),
    ]);
  } catch (e) {
    // Deleted between the list and this read.
    if (e instanceof ApiError && e.status === 404 && route().fabric === name) return fabricGone(name);
    throw e;
  }
  if (route().fabric !== name) return;
  const revised = !state.fabric || state.fabric.name !== name ||
    state.fabric.revision !== fabric.revision;
  state.fabric = fabric;
  state.fabricGone = null;
  state.fabricOps = ops.operations;
  if (fabric.error) state.fabricErrors.set(name, fabric.error);
  // A new revision follows a device's failure or return: its servers' devices changed.
  if (revised) await loadServers();
  render();
}

// The list names each server's failed devices: one request for all of them.
async function loadServers() {
  const { servers } = await getJson('v1/servers');
  state.servers = servers;
  state.failed = new Map(servers.map((s) => [s.name, s.failed_devices || []]));
  render();
}

async function loadWiring() {
  state.wiring = (await getJson('v1/wiring')).links;
  render();
}

async function loadUnit(name) {
  let unit;
  let xc;
  try {
    [unit, xc] = await Promise.all([
      getJson(`v1/ocs/${encodeURIComponent(name)}`),
      getJson(`v1/ocs/${encodeURIComponent(name)}/cross-connects`),
    ]);
  } catch (e) {
    // Deleted since the event that named it.
    if (e instanceof ApiError && e.status === 404) return forgetUnit(name);
    throw e;
  }
  state.ocs.set(name, unit);
  state.xc.set(name, xc);
  render();
}

async function loadUnits() {
  const { ocs } = await getJson('v1/ocs');
  const names = new Set(ocs.map((u) => u.name));
  for (const n of [...state.ocs.keys()]) if (!names.has(n)) forgetUnit(n);
  await Promise.all(ocs.map((u) => loadUnit(u.name)));
}

function forgetUnit(name) {
  state.ocs.delete(name);
  state.xc.delete(name);
  render();
}

async function loadOperations() {
  state.operations = (await getJson('v1/operations?limit=50')).operations;
  render();
}

/** Everything, as after a (re)connection of the event stream. */
async function loadAll() {
  state.error = null;
  await Promise.all([loadFabrics(), loadServers(), loadWiring(), loadUnits(), loadOperations()]);
  const r = route();
  if (r.fabric) await loadFabric(r.fabric);
}

// ---- events ----------------------------------------------------------------

function onEvent(type, data, id) {
  state.events.unshift({ id, type, data });
  state.events.length = Math.min(state.events.length, EVENTS_KEPT);
  const shown = route().fabric;
  switch (type) {
  case 'fabric_state': {
    const f = state.fabrics.find((x) => x.name === data.fabric);
    if (data.error) state.fabricErrors.set(data.fabric, data.error);
    else state.fabricErrors.delete(data.fabric);
    if (f && f.revision === data.revision) {
      f.state = data.state;
    } else {
      // New, or re-planned: counts and membership changed.
      soon('fabrics', loadFabrics);
      soon('servers', loadServers);
    }
    if (data.fabric === shown) {
      if (state.fabric && state.fabric.revision === data.revision) state.fabric.state = data.state;
      else soon('fabric', () => loadFabricAfterList(shown));
    }
    break;
  }
  case 'operation':
    // Batches follow every change of the circuits.
    soon('operations', loadOperations);
    soon('fabrics', loadFabrics);
    soon('servers', loadServers);
    soon(`unit:${data.ocs}`, () => loadUnit(data.ocs));
    if (shown && (data.fabrics || []).includes(shown)) {
      soon('fabric', () => loadFabricAfterList(shown));
    }
    break;
  case 'ocs_connection':
  case 'port_state':
  case 'drift':
  case 'isolation_violation':
    soon(`unit:${data.ocs}`, () => loadUnit(data.ocs));
    break;
  case 'device_state':
    // Shown at once; the list read again after it, in case one read before
    // the change answers after the event. A fabric's re-plan follows as fabric_state.
    setDeviceState(data.server, data.device, data.state);
    soon('servers', loadServers);
    break;
  case 'fabric':
    // Created, updated or deleted: the list, and the servers' membership.
    soon('fabrics', loadFabrics);
    soon('servers', loadServers);
    if (data.fabric === shown) soon('fabric', () => loadFabricAfterList(shown));
    break;
  case 'topology':
    onTopology(data);
    break;
  default:
    break;
  }
  render();
}

function setDeviceState(server, device, s) {
  const failed = (state.failed.get(server) || []).filter((d) => d !== device);
  if (s === 'failed') failed.push(device);
  state.failed.set(server, failed.sort((a, b) => a - b));
}

// A topology change names what changed; the cables may change with units and
// servers (a deleted one's go with it), so the wiring is read again too.
function onTopology({ resource, name, change }) {
  switch (resource) {
  case 'ocs':
    if (name && change === 'deleted') forgetUnit(name);
    else if (name) soon(`unit:${name}`, () => loadUnit(name));
    else soon('units', loadUnits);
    soon('wiring', loadWiring);
    break;
  case 'server':
  case 'switch': // servers name theirs
    soon('servers', loadServers);
    soon('wiring', loadWiring);
    break;
  case 'wiring':
    soon('wiring', loadWiring);
    break;
  default: // 'topology': all of it was put at once
    soon('units', loadUnits);
    soon('servers', loadServers);
    soon('wiring', loadWiring);
    break;
  }
}

// After the list: a deleted fabric is then known gone without asking for it.
async function loadFabricAfterList(name) {
  await loadFabrics();
  await loadFabric(name);
}

const stream = new EventStream({
  onOpen: () => {
    state.needToken = false;
    loadAll().catch(failed);
  },
  onEvent,
  onState: (s) => {
    state.live = s;
    if (s === 'unauthorized') state.needToken = true;
    render();
  },
});

// ---- routing and rendering -------------------------------------------------

function decode(x) {
  try {
    return decodeURIComponent(x);
  } catch {
    return x; // a hand-typed '%': as it is
  }
}

// #/VIEW[/NAME][?q=FILTER]: the filter rides in the hash, so a link shares it.
function route() {
  const [path, query] = location.hash.replace(/^#\/?/, '').split('?');
  const q = new URLSearchParams(query || '').get('q') || '';
  const parts = path.split('/').map(decode);
  if (parts[0] === 'fabrics' && parts[1]) return { view: 'fabric', fabric: parts[1], q };
  if (parts[0] === 'ocs' && parts[1]) return { view: 'unit', unit: parts[1], q };
  if (['fabrics', 'events', 'cabling'].includes(parts[0])) return { view: parts[0], q };
  return { view: 'cluster', q };
}

// The search box, one element kept across redraws so that typing keeps its focus.
const filterBox = h('input', {
  id: 'filter', type: 'search', placeholder: 'Filter: server, unit, fabric, port',
  'aria-label': 'Filter', autocomplete: 'off', oninput: onFilter,
});
const filterBar = h('div', { class: 'filter' }, filterBox);

function onFilter() {
  const path = location.hash.split('?')[0] || '#/cluster';
  const q = filterBox.value.trim() ? `?q=${encodeURIComponent(filterBox.value)}` : '';
  // Replaced, not pushed: one history entry per view, not per keystroke.
  history.replaceState(null, '', path + q);
  render();
}

// Puts body in the view, under the search box for the views that have one.
function mount(view, r, body) {
  if (!FILTERED_VIEWS.includes(r.view)) {
    view.replaceChildren(body);
    return;
  }
  if (filterBox.value !== r.q && document.activeElement !== filterBox) filterBox.value = r.q;
  if (view.firstChild === filterBar) {
    while (filterBar.nextSibling) filterBar.nextSibling.remove();
    view.append(body);
  } else {
    view.replaceChildren(filterBar, body);
  }
}

// Redraws are coalesced, and spaced by twice what the last one cost: a view of
// 1,024 servers that takes 200 ms to build is redrawn at most ~2.5 times a
// second however many events arrive, a small one at every frame.
let picture = null;
let pendingDraw = 0;
let lastDraw = 0;
let drawCost = 0;
function render() {
  if (pendingDraw) return;
  const wait = Math.max(0, lastDraw + 2 * drawCost - performance.now());
  pendingDraw = setTimeout(() => requestAnimationFrame(draw), wait);
}

function draw() {
  pendingDraw = 0;
  const t0 = performance.now();
  drawView();
  lastDraw = performance.now();
  drawCost = lastDraw - t0;
}

function drawView() {
  const r = route();
  const live = document.getElementById('live');
  live.textContent = state.live;
  live.className = `live ${state.live}`;
  for (const a of document.querySelectorAll('nav a')) {
    const v = a.dataset.view;
    a.classList.toggle('active', v === r.view || (v === 'fabrics' && r.view === 'fabric') ||
      (v === 'cluster' && r.view === 'unit'));
  }
  const banner = document.getElementById('banner');
  banner.hidden = !state.needToken && !state.error;
  banner.textContent = state.needToken
    ? 'This daemon needs an API token: enter one above (it is kept for this tab only).'
    : state.error || '';
  banner.className = state.needToken ? 'warn' : 'error';

  const view = document.getElementById('view');
  view.dataset.view = r.view;
  if (r.view === 'fabric') {
    drawFabric(view, r.fabric);
    return;
  }
  picture = null;
  const views = { cluster: clusterView, fabrics: fabricsView, events: eventsView, unit: unitView, cabling };
  mount(view, r, views[r.view](r));
}

function cabling(r) {
  return cablingView(state, r.q, { colour: fabricColour, redraw: render });
}

// Ports of each server in use: cabled ports whose OCS port holds a circuit now.
function portUsage() {
  const busy = new Map();
  for (const [name, xc] of state.xc) busy.set(name, new Set((xc.actual || []).flat()));
  const usage = new Map();
  for (const l of state.wiring) {
    const u = usage.get(l.server) || { cabled: 0, used: 0 };
    u.cabled++;
    if (busy.get(l.ocs) && busy.get(l.ocs).has(l.ocs_port)) u.used++;
    usage.set(l.server, u);
  }
  return usage;
}

// "(3 of 8)" when a filter hides some, "(8)" otherwise.
function shownOf(shown, all) {
  return shown < all ? `(${shown} of ${all})` : `(${all})`;
}

function clusterView(r) {
  const match = matcher(r.q);
  const usage = portUsage();
  const cabledOn = new Map();
  for (const l of state.wiring) cabledOn.set(l.ocs, (cabledOn.get(l.ocs) || 0) + 1);
  const units = [...state.ocs.values()].sort((a, b) => a.name.localeCompare(b.name))
    .filter((u) => match(u.name));
  const unitRows = units.map((u) => {
    const xc = state.xc.get(u.name) || {};
    const c = u.connection || { state: 'down', in_sync: false };
    const drift = xc.in_sync === false;
    return h('tr', { 'data-ocs': u.name },
      h('td', {}, h('a', { href: `#/ocs/${encodeURIComponent(u.name)}` }, u.name)),
      h('td', {}, u.driver),
      h('td', { class: 'num' }, u.ports),
      h('td', {}, badge(c.state), c.last_error ? h('span', { class: 'why' }, ` ${c.last_error}`) : ''),
      h('td', {}, drift ? badge('drift', 'failed') : badge('in sync', 'applied')),
      h('td', { class: 'num' }, cabledOn.get(u.name) || 0),
      h('td', { class: 'num' }, (xc.actual || []).length * 2),
      h('td', { class: 'num' }, (u.ports_down || []).length),
      h('td', { class: 'num' }, (u.foreign || []).length));
  });
  const inFabrics = state.servers.filter((s) => s.fabric).length;
  const withFailed = state.servers.filter((s) => (state.failed.get(s.name) || []).length).length;
  const shown = state.servers.filter((s) => match(s.name, s.fabric || ''));
  const tiles = shown.map((s) => {
    const u = usage.get(s.name) || { cabled: 0, used: 0 };
    const total = s.devices * s.ports_per_device;
    const bad = (state.failed.get(s.name) || []).length;
    const title = `${s.name}: ${s.devices} devices × ${s.ports_per_device} ports, ` +
      `${u.cabled} cabled, ${u.used} in circuits` + (s.fabric ? `, fabric ${s.fabric}` : '') +
      (bad ? `, failed devices ${state.failed.get(s.name).join(', ')}` : '') + (s.stale ? ', stale' : '');
    const tile = h('a', {
      class: `tile${bad ? ' bad' : ''}${s.stale ? ' stale' : ''}`,
      href: s.fabric ? `#/fabrics/${encodeURIComponent(s.fabric)}` : '#/cluster',
      title,
      'data-server': s.name,
    },
    h('span', { class: 'name' }, s.name),
    h('span', { class: 'bar' },
      h('span', { class: 'used', style: { width: `${(100 * u.used) / Math.max(total, 1)}%` } }),
      h('span', { class: 'cabled', style: { width: `${(100 * (u.cabled - u.used)) / Math.max(total, 1)}%` } })),
    bad ? h('span', { class: 'failed' }, `${bad} failed`) : '');
    tile.style.borderLeftColor = s.fabric ? fabricColour(s.fabric) : '#ddd';
    return tile;
  });
  return h('div', { class: 'cluster' },
    h('h2', {}, `OCS units ${shownOf(units.length, state.ocs.size)}`),
    table(['unit', 'driver', 'ports', 'connection', 'state', 'cabled ports', 'ports in circuits',
      'ports down', 'foreign entries'], unitRows, { class: 'units' }),
    h('h2', {}, `Servers ${shownOf(shown.length, state.servers.length)}`),
    h('p', { class: 'summary' },
      `${inFabrics} in fabrics · ${withFailed} with failed devices · ` +
      `${state.servers.filter((s) => s.stale).length} stale. Bar: `,
      h('span', { class: 'key used' }), ' ports in circuits ', h('span', { class: 'key cabled' }),
      ' cabled, free; the edge shows the fabric.'),
    h('div', { class: 'tiles' }, tiles));
}

function fabricsView(r) {
  const match = matcher(r.q);
  const shown = state.fabrics.filter((f) => match(f.name, f.state, ...(f.servers || [])));
  const rows = shown.map((f) => h('tr', { 'data-fabric': f.name },
    h('td', {}, h('span', { class: 'swatch', style: { background: fabricColour(f.name) } }),
      h('a', { href: `#/fabrics/${encodeURIComponent(f.name)}` }, f.name)),
    h('td', {}, badge(f.state)),
    h('td', { class: 'num' }, f.revision),
    h('td', { class: 'num' }, f.servers.length),
    h('td', { class: 'num' }, f.circuits),
    h('td', { class: 'num' }, f.missing),
    h('td', { class: 'num' }, f.min_devices),
    h('td', { class: 'why' }, state.fabricErrors.get(f.name) || '')));
  const none = state.fabrics.length ? 'No fabric matches the filter.' : 'No fabric yet: POST /v1/fabrics creates one.';
  return h('div', {},
    h('h2', {}, `Fabrics ${shownOf(shown.length, state.fabrics.length)}`),
    shown.length ? table(['fabric', 'state', 'revision', 'servers', 'circuits', 'missing pairs',
      'devices per server', 'error'], rows, { class: 'fabrics' })
      : h('p', { class: 'empty' }, none));
}

function linkText(l) {
  const end = (e) => `${e.server} device ${e.device} port ${e.port} (OCS port ${e.ocs_port})`;
  return `${end(l.a)} — ${end(l.b)}`;
}

function selectionPanel() {
  const s = state.selection;
  if (!s) return h('p', { class: 'hint' }, isGrid(state.fabric) ? 'Click a server.' : 'Click a circuit or a server.');
  if (s.link) {
    return h('div', { id: 'selection', class: 'selection' },
      h('div', {}, h('span', { class: 'swatch', style: { background: picture ? picture.colour.get(s.link.a.ocs) : '#999' } }),
        h('b', {}, `OCS unit ${s.link.a.ocs}`), `, plane ${s.link.plane}`),
      h('div', {}, `${s.link.a.server}: device ${s.link.a.device} port ${s.link.a.port} → OCS port ${s.link.a.ocs_port}`),
      h('div', {}, `${s.link.b.server}: device ${s.link.b.device} port ${s.link.b.port} → OCS port ${s.link.b.ocs_port}`));
  }
  const f = state.fabric;
  const n = f.links.filter((l) => l.a.server === s.server || l.b.server === s.server).length;
  const bad = state.failed.get(s.server) || [];
  return h('div', { id: 'selection', class: 'selection' },
    h('div', {}, h('b', {}, `server ${s.server}`)),
    h('div', {}, `${n} circuits`),
    bad.length ? h('div', { class: 'bad' }, `failed devices: ${bad.join(', ')}`) : h('div', {}, 'all devices ok'),
    Array.isArray(f.shape) ? gridCircuits(f, s.server) : '');
}

// A grid server's place and its circuits, dimension by dimension: the peer,
// its coordinates, the unit and the ports at both ends.
function gridCircuits(f, name) {
  const index = new Map(f.servers.map((x, i) => [x, i]));
  const me = index.get(name);
  const coords = (i) => `(${coordsOf(f.shape, i).join(', ')})`;
  const dims = f.shape.map(() => []);
  for (const l of f.links) {
    const [mine, peer] = l.a.server === name ? [l.a, l.b] : l.b.server === name ? [l.b, l.a] : [];
    if (!mine) continue;
    const d = dimOf(f.shape, me, index.get(peer.server));
    if (d >= 0) dims[d].push({ mine, peer, ocs: l.a.ocs });
  }
  const byPeer = (x, y) => index.get(x.peer.server) - index.get(y.peer.server);
  return h('div', { class: 'grid-place' },
    h('div', { id: 'coordinates' }, `coordinates ${coords(me)} of ${f.shape.join(' × ')}`),
    dims.map((list, d) => h('div', { class: 'dim', 'data-dim': d },
      h('div', {}, h('span', { class: 'swatch', style: { background: DIM_COLOURS[d % DIM_COLOURS.length] } }),
        `dimension ${d}: ${list.length} circuit${list.length === 1 ? '' : 's'}`),
      list.length ? table(['peer', 'unit', 'ports here', 'ports there'], list.sort(byPeer).map((c) =>
        h('tr', { 'data-peer': c.peer.server },
          h('td', {}, `${c.peer.server} ${coords(index.get(c.peer.server))}`),
          h('td', {}, c.ocs),
          h('td', {}, `d${c.mine.device}p${c.mine.port} → ${c.mine.ocs_port}`),
          h('td', {}, `d${c.peer.device}p${c.peer.port} → ${c.peer.ocs_port}`))), { class: 'dim-circuits' }) : '')));
}

// The layout: topology, and for a grid its shape, diameter and degree.
function layoutInfo(f) {
  if (!f.topology) return '';
  const grid = Array.isArray(f.shape);
  return h('p', { id: 'layout', class: 'counts' }, `topology ${f.topology}` +
    (grid ? ` · shape ${f.shape.join(' × ')} · diameter ${f.diameter} · degree ${f.degree}` : ''));
}

// An automatic layout's reason and the candidates it weighed.
function choiceInfo(f) {
  const c = f.choice;
  if (!c) return [];
  const shape = Array.isArray(f.shape) ? f.shape.join('x') : '';
  const rows = (c.candidates || []).map((x) => h('tr', {
    class: x.topology === f.topology && x.shape === shape ? 'chosen' : '',
  },
  h('td', {}, x.topology), h('td', {}, x.shape), h('td', { class: 'num' }, x.diameter),
  h('td', { class: 'num' }, x.planes), h('td', { class: 'num' }, x.bisection),
  h('td', { class: 'num' }, x.predicted_us === undefined ? '' : (x.predicted_us / 1000).toFixed(2))));
  return [h('h3', {}, `Automatic choice${c.traffic ? ` (${c.traffic})` : ''}`),
    h('p', { id: 'choice-reason', class: 'reason' }, c.reason),
    rows.length ? table(['topology', 'shape', 'diameter', 'planes', 'bisection', 'predicted ms'], rows,
      { class: 'candidates' }) : ''];
}

// The legend of a grid: a colour per dimension, then the units by name.
function gridLegend(f, units) {
  const index = new Map(f.servers.map((x, i) => [x, i]));
  const circuits = f.shape.map(() => 0);
  for (const l of f.links) {
    const d = dimOf(f.shape, index.get(l.a.server), index.get(l.b.server));
    if (d >= 0) circuits[d]++;
  }
  const torus = f.topology === 'torus';
  return [h('h3', {}, 'Dimensions'),
    h('ul', { class: 'legend', id: 'dimensions' }, f.shape.map((k, d) => h('li', { 'data-dim': d },
      h('span', { class: 'swatch', style: { background: DIM_COLOURS[d % DIM_COLOURS.length] } }),
      `${d} (${d === 0 ? 'across' : d === 1 ? 'down' : 'between panels'}): ` +
      `${f.servers.length / k} ${torus ? 'rings' : 'lines'} of ${k} · ${circuits[d]} circuits`)),
    h('li', { class: 'hint' }, torus ? 'a ring: its segments, and an arc that closes it'
      : 'a line: one bus, every server on it joined to every other'),
    h('li', {}, h('span', { class: 'swatch dashed' }), 'missing pair'),
    h('li', {}, h('span', { class: 'dot', style: { background: FAIL } }), 'server with failed devices')),
    h('h3', {}, 'OCS units'),
    h('ul', { class: 'legend' }, units.map((u) => h('li', {},
      h('a', { href: `#/ocs/${encodeURIComponent(u.name)}` }, u.name), ` ${u.circuits} circuits`)))];
}

function drawFabric(view, name) {
  if (state.fabricGone === name) {
    picture = null;
    view.replaceChildren(h('div', { class: 'gone' }, h('h2', {}, `Fabric ${name}`),
      h('p', {}, `Fabric ${name} was deleted.`), h('a', { href: '#/fabrics' }, 'All fabrics')));
    return;
  }
  const f = state.fabric && state.fabric.name === name ? state.fabric : null;
  if (!f) {
    view.replaceChildren(h('p', { class: 'empty' }, `Loading fabric ${name}…`));
    return;
  }
  // The canvas survives re-renders: only the panel around it is rebuilt.
  let canvas = view.querySelector('canvas#picture');
  if (!canvas || !picture) {
    canvas = h('canvas', { id: 'picture' });
    picture = new FabricPicture(canvas, (sel) => {
      state.selection = sel;
      render();
    });
    window.ofcdConsole = { picture };
    view.replaceChildren(h('div', { class: 'fabric' }, h('div', { class: 'stage' }, canvas),
      h('aside', { id: 'panel' })));
  }
  const failed = {};
  for (const s of f.servers) {
    const d = state.failed.get(s);
    if (d && d.length) failed[s] = d;
  }
  picture.set(f, failed);
  state.selection = picture.selected; // a new revision drops the selection
  const units = unitsOf(f);
  const badServers = Object.keys(failed);
  const err = state.fabricErrors.get(name);
  const panel = view.querySelector('#panel');
  panel.replaceChildren(...[
    h('h2', {}, `Fabric ${f.name}`),
    h('p', {}, badge(f.state), ` revision ${f.revision}`),
    err ? h('p', { class: 'why' }, err) : '',
    h('p', { class: 'counts' }, `${f.servers.length} servers · ${f.links.length} circuits · ` +
      `${f.missing.length} missing pairs · ${f.min_devices} devices per server`),
    layoutInfo(f),
    h('button', { type: 'button', onclick: () => downloadSvg(f.name) }, 'Download SVG'),
    isGrid(f) ? gridLegend(f, units) : [h('h3', {}, 'OCS units'),
      h('ul', { class: 'legend' }, units.map((u) => h('li', {},
        h('span', { class: 'swatch', style: { background: u.colour } }),
        h('a', { href: `#/ocs/${encodeURIComponent(u.name)}` }, u.name), ` ${u.circuits} circuits`)),
      h('li', {}, h('span', { class: 'swatch dashed' }), 'missing pair'),
      h('li', {}, h('span', { class: 'dot', style: { background: FAIL } }), 'server with failed devices'))],
    h('h3', {}, 'Selected'),
    selectionPanel(),
    choiceInfo(f),
    h('h3', {}, `Failed devices (${badServers.length} server${badServers.length === 1 ? '' : 's'})`),
    badServers.length ? h('ul', { id: 'failed-devices', class: 'bad' },
      badServers.slice(0, 50).map((s) => h('li', { 'data-server': s }, `${s}: device ${failed[s].join(', ')}`)))
      : h('p', { class: 'hint', id: 'failed-devices' }, 'none'),
    h('h3', {}, `Missing pairs (${f.missing.length})`),
    f.missing.length ? h('ul', { id: 'missing-pairs', class: 'bad' },
      f.missing.slice(0, 50).map(([a, b]) => h('li', {}, `${a} — ${b}`)),
      f.missing.length > 50 ? h('li', {}, `and ${f.missing.length - 50} more`) : '')
      : h('p', { class: 'hint', id: 'missing-pairs' }, 'none'),
    h('h3', {}, 'Recent operations'),
    operationsTable(state.fabricOps.slice(0, 10), true)].flat(Infinity));
}

async function downloadSvg(name) {
  try {
    const blob = await getBlob(`v1/fabrics/${encodeURIComponent(name)}/picture.svg`);
    const a = h('a', { href: URL.createObjectURL(blob), download: `${name}.svg` });
    document.body.append(a);
    a.click();
    a.remove();
    setTimeout(() => URL.revokeObjectURL(a.href), 10000);
  } catch (e) {
    failed(e);
  }
}

function portOwner() {
  const owner = new Map();
  for (const l of state.wiring) owner.set(`${l.ocs}:${l.ocs_port}`, `${l.server} d${l.device}p${l.port}`);
  return owner;
}

function unitView(r) {
  const u = state.ocs.get(r.unit);
  const xc = state.xc.get(r.unit);
  if (!u || !xc) return h('p', { class: 'empty' }, `Loading OCS unit ${r.unit}…`);
  const key = (p) => `${p[0]}-${p[1]}`;
  const desired = new Set(xc.desired.map(key));
  const held = new Set(xc.actual.map(key));
  const pairs = new Map();
  for (const p of [...xc.desired, ...xc.actual]) pairs.set(key(p), p);
  const all = [...pairs.values()].sort((a, b) => a[0] - b[0] || a[1] - b[1]);
  const drift = all.filter((p) => desired.has(key(p)) !== held.has(key(p)));
  const synced = all.filter((p) => desired.has(key(p)) && held.has(key(p)));
  const owner = portOwner();
  const who = (port) => owner.get(`${u.name}:${port}`) || '';
  const row = (p) => {
    const d = desired.has(key(p));
    const hh = held.has(key(p));
    const status = d && hh ? 'in sync' : d ? 'desired, not held' : 'held, not desired';
    return h('tr', { class: d && hh ? '' : 'drift', 'data-pair': key(p) },
      h('td', { class: 'num' }, p[0]), h('td', {}, who(p[0])),
      h('td', { class: 'num' }, p[1]), h('td', {}, who(p[1])),
      h('td', { class: 'mark' }, d ? '✓' : ''), h('td', { class: 'mark' }, hh ? '✓' : ''),
      h('td', {}, status));
  };
  const c = u.connection || { state: 'down', in_sync: false, last_error: null };
  const flows = (title, list) => list && list.length
    ? [h('h3', {}, `${title} (${list.length})`), h('p', { class: 'why' }, list.map((p) => `${p[0]}→${p[1]}`).join(', '))]
    : [];
  return h('div', { class: 'unit' },
    h('h2', {}, `OCS unit ${u.name}`),
    h('p', {}, badge(c.state), ' ', xc.in_sync ? badge('in sync', 'applied') : badge('drift', 'failed'),
      ` ${u.driver}, ${u.ports} ports${u.endpoint ? `, ${u.endpoint}` : ''}`,
      c.last_error ? h('span', { class: 'why' }, ` last error: ${c.last_error}`) : ''),
    h('p', { class: 'counts' }, `${xc.desired.length} desired cross-connects, ${xc.actual.length} held, ` +
      `${drift.length} differ` + ((u.ports_down || []).length ? `; ports down: ${u.ports_down.join(', ')}` : '')),
    table(['port', 'cabled to', 'port', 'cabled to', 'desired', 'held', ''],
      [...drift.map(row), ...synced.slice(0, SYNC_ROWS_SHOWN).map(row)], { class: 'xc' }),
    synced.length > SYNC_ROWS_SHOWN ? h('p', { class: 'hint' }, `and ${synced.length - SYNC_ROWS_SHOWN} more in sync`) : '',
    flows('One-way entries of ofcd', xc.partial),
    flows('Foreign entries (not made by ofcd, never deleted)', xc.foreign));
}

// An error gets a row of its own under its operation, across the columns:
// in a column, a long one made the table wider than the fabric page's panel.
function operationsTable(ops, short) {
  if (!ops.length) return h('p', { class: 'hint' }, 'none');
  const headers = short ? ['id', 'unit', 'changes', 'status', 'started']
    : ['id', 'unit', 'trigger', 'changes', 'status', 'fabrics', 'started'];
  const rows = ops.map((o) => [h('tr', { 'data-op': o.id, class: o.error ? 'has-error' : '' },
    h('td', { class: 'num' }, o.id), h('td', {}, o.ocs), short ? '' : h('td', {}, o.trigger),
    h('td', { class: 'num' }, `+${o.nadds} −${o.ndeletes}`), h('td', {}, badge(o.status)),
    short ? '' : h('td', {}, o.fabrics.join(', ')),
    h('td', {}, short ? time(o.started).slice(11) : time(o.started))),
  o.error ? h('tr', { class: 'op-error', 'data-op-error': o.id },
    h('td', { class: 'why', colspan: headers.length }, o.error)) : '']);
  return table(headers, rows, { class: 'ops' });
}

function eventSummary(type, d) {
  switch (type) {
  case 'fabric_state': return `${d.fabric} → ${d.state} (revision ${d.revision})${d.error ? `: ${d.error}` : ''}`;
  case 'operation': return `${d.ocs} #${d.id} ${d.status}${d.fabrics && d.fabrics.length ? ` (${d.fabrics.join(', ')})` : ''}${d.error ? `: ${d.error}` : ''}`;
  case 'ocs_connection': return `${d.ocs} ${d.state}${d.error ? `: ${d.error}` : ''}`;
  case 'port_state': return `${d.ocs} port ${d.port} ${d.link}`;
  case 'drift': return `${d.ocs} changed behind the controller's back`;
  case 'isolation_violation': return `${d.ocs} joins ${JSON.stringify(d.cross_connect || d.foreign_entry)} across ${(d.fabrics || []).join(', ')}`;
  default: return JSON.stringify(d);
  }
}

function eventsView() {
  const bad = (e) => ['drift', 'isolation_violation'].includes(e.type) ||
    ['failed', 'degraded', 'down'].includes(e.data.state || e.data.status || e.data.link);
  return h('div', { class: 'events' },
    h('section', {},
      h('h2', {}, 'Live events (since this page opened)'),
      state.events.length ? h('ol', { id: 'event-log' }, state.events.map((e) => h('li', { class: bad(e) ? 'bad' : '', 'data-type': e.type },
        h('span', { class: 'when' }, time(e.data.time)), h('span', { class: 'type' }, e.type),
        eventSummary(e.type, e.data))))
        : h('p', { class: 'hint', id: 'event-log' }, 'Waiting for events…')),
    h('section', {}, h('h2', {}, 'Recent operations'), operationsTable(state.operations, false)));
}

// ---- start -----------------------------------------------------------------

function start() {
  const form = document.getElementById('token-form');
  const input = document.getElementById('token');
  input.value = token();
  form.addEventListener('submit', (e) => {
    e.preventDefault();
    setToken(input.value.trim());
    state.needToken = false;
    stream.restart();
  });
  document.getElementById('token-forget').addEventListener('click', () => {
    setToken('');
    input.value = '';
    stream.restart();
  });
  window.addEventListener('hashchange', () => {
    state.selection = null;
    const r = route();
    filterBox.value = r.q; // another view, or a link: its filter, even while typing
    if (r.fabric) loadFabric(r.fabric).catch(failed);
    if (r.unit) loadUnit(r.unit).catch(failed);
    render();
  });
  render();
  stream.run();
}

start();
