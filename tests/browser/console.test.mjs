// The web console in Debian's Chromium against real daemons (make browser).
import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';

import { READER, launchBrowser, openPage, startDaemon } from './daemon.mjs';

const FIVE = ['srv0', 'srv1', 'srv2', 'srv3', 'srv4'];
let browser;

before(async () => {
  browser = await launchBrowser();
});

after(async () => {
  await browser.close();
});

// Resolves with the milliseconds it took until fn (run in the page) is true.
async function within(page, ms, fn, arg) {
  const t0 = Date.now();
  await page.waitForFunction(fn, arg, { timeout: ms, polling: 'raf' });
  return Date.now() - t0;
}

async function withDaemon(opts, body) {
  const d = await startDaemon(opts);
  try {
    await body(d);
  } finally {
    await d.stop();
  }
}

test('the fabric picture shows the servers and circuits, and a click names unit and ports', async () => {
  await withDaemon({}, async (d) => {
    const made = await d.req('POST', 'v1/fabrics?wait=10', { name: 'job-a', servers: FIVE });
    assert.equal(made.status, 201);
    assert.equal(made.body.state, 'applied');
    const page = await openPage(browser);
    await page.goto(`${d.url}#/fabrics/job-a`);
    await page.waitForSelector('#panel .counts');
    assert.match(await page.textContent('#panel .counts'), /5 servers · 10 circuits · 0 missing pairs/);
    assert.match(await page.textContent('#panel'), /applied/);
    const shown = await page.evaluate(() => {
      const p = window.ofcdConsole.picture;
      return { servers: p.fabric.servers, links: p.fabric.links.length };
    });
    assert.deepEqual(shown, { servers: FIVE, links: 10 });

    // Something is drawn: coloured pixels of both units' lines.
    const colours = await page.evaluate(() => {
      const cv = document.querySelector('#picture');
      const px = cv.getContext('2d').getImageData(0, 0, cv.width, cv.height).data;
      const seen = new Set();
      for (let i = 0; i < px.length; i += 4 * 7) {
        if (px[i + 3] > 200) seen.add(`${px[i] >> 5},${px[i + 1] >> 5},${px[i + 2] >> 5}`);
      }
      return seen.size;
    });
    assert.ok(colours >= 3, `the canvas holds ${colours} colours`);

    // A click on a circuit names its unit and both ends' ports.
    const link = made.body.links[3];
    const box = await page.locator('#picture').boundingBox();
    const at = await page.evaluate(() => window.ofcdConsole.picture.pointOnLink(3));
    await page.mouse.click(box.x + at.x, box.y + at.y);
    const sel = await page.textContent('#selection');
    assert.match(sel, new RegExp(`OCS unit ${link.a.ocs}`));
    assert.match(sel, new RegExp(`${link.a.server}: device ${link.a.device} port ${link.a.port} → OCS port ${link.a.ocs_port}`));
    assert.match(sel, new RegExp(`${link.b.server}: device ${link.b.device} port ${link.b.port} → OCS port ${link.b.ocs_port}`));

    // The same picture as a standalone SVG.
    const svg = await d.req('GET', 'v1/fabrics/job-a/picture.svg');
    assert.equal(svg.type, 'image/svg+xml');
    const circuits = svg.body.slice(svg.body.indexOf('id="circuits"'), svg.body.indexOf('id="missing"'));
    assert.equal((circuits.match(/<line /g) || []).length, 10);
    assert.match(svg.body, /<circle[^>]*><title>srv1<\/title>/);
    assert.deepEqual(page.problems, []);
    await page.context().close();
  });
});

test('a device failure and a fabric deletion show without a reload, through the event stream', async () => {
  await withDaemon({}, async (d) => {
    assert.equal((await d.req('POST', 'v1/fabrics?wait=10', { name: 'job-a', servers: FIVE })).status, 201);
    const page = await openPage(browser);
    await page.goto(`${d.url}#/fabrics/job-a`);
    await page.waitForSelector('#failed-devices');
    await page.waitForFunction(() => document.querySelector('#live').textContent === 'live');
    assert.match(await page.textContent('#failed-devices'), /none/);

    const put = await d.req('PUT', 'v1/servers/srv1/devices/0', { state: 'failed' });
    assert.equal(put.status, 200);
    const failMs = await within(page, 5000, () =>
      /srv1: device 0/.test(document.querySelector('#failed-devices').textContent));
    assert.equal(await page.evaluate(() => window.ofcdConsole.picture.failed.srv1[0]), 0);
    // The device_state event shows first; the re-plan's revision is read after it.
    // Deleting before that read would make it a 404, which the browser logs.
    await within(page, 5000, () => /revision 2/.test(document.querySelector('#panel').textContent));

    // Asynchronous since the contract change: 202 "removing".
    assert.equal((await d.req('DELETE', 'v1/fabrics/job-a')).status, 202);
    const goneMs = await within(page, 5000, () =>
      /job-a was deleted/.test(document.querySelector('#view').textContent));

    // The list follows too.
    await page.goto(`${d.url}#/fabrics`);
    await page.waitForSelector('.empty');
    assert.deepEqual(page.problems, []);
    console.log(`# device failure shown after ${failMs} ms, deletion after ${goneMs} ms`);
    await page.context().close();
  });
});

test('units and servers created and deleted show without a reload, through topology events', async () => {
  await withDaemon({}, async (d) => {
    const page = await openPage(browser);
    await page.goto(`${d.url}#/cluster`);
    await page.waitForSelector('.units tr[data-ocs="ocs1"]');
    await page.waitForFunction(() => document.querySelector('#live').textContent === 'live');
    // Neither makes an operation: the topology event is all the console hears.
    const unit = { name: 'ocs9', driver: 'sim', ports: 16, endpoint: '' };
    assert.equal((await d.req('POST', 'v1/ocs', unit)).status, 201);
    assert.equal((await d.req('POST', 'v1/servers', { name: 'extra', devices: 2 })).status, 201);
    await within(page, 5000, () => document.querySelector('.units tr[data-ocs="ocs9"]') !== null);
    await within(page, 5000, () => document.querySelector('.tile[data-server="extra"]') !== null);
    assert.equal((await d.req('DELETE', 'v1/ocs/ocs9')).status, 200);
    assert.equal((await d.req('DELETE', 'v1/servers/extra')).status, 200);
    await within(page, 5000, () => document.querySelector('.units tr[data-ocs="ocs9"]') === null);
    await within(page, 5000, () => document.querySelector('.tile[data-server="extra"]') === null);
    assert.deepEqual(page.problems, []);
    await page.context().close();
  });
});

test('the cluster, a unit with drift highlighted, and the events', async () => {
  // Audits every second; failing batches keep a hand-made cross-connect in place.
  const extra = '[debug]\nfaults = true\n[reconcile]\naudit_interval = 1\n';
  await withDaemon({ extra }, async (d) => {
    assert.equal((await d.req('POST', 'v1/fabrics?wait=10', { name: 'job-a', servers: FIVE })).status, 201);
    const page = await openPage(browser);
    await page.goto(`${d.url}#/cluster`);
    await page.waitForSelector('.units tr[data-ocs="ocs1"]');
    await page.waitForFunction(() => document.querySelectorAll('.tile').length === 8);
    // srv0..srv4 use 4 of their 8 cabled ports (one per other server); srv5..srv7 none.
    assert.match(await page.getAttribute('.tile[data-server="srv2"]', 'title'), /8 cabled, 4 in circuits, fabric job-a/);
    assert.match(await page.getAttribute('.tile[data-server="srv7"]', 'title'), /8 cabled, 0 in circuits$/);

    await page.click('.units a:text("ocs0")');
    await page.waitForSelector('table.xc');
    const desired = (await d.req('GET', 'v1/ocs/ocs0/cross-connects')).body.desired.length;
    assert.equal(await page.locator('table.xc tbody tr').count(), desired);
    assert.equal(await page.locator('table.xc tr.drift').count(), 0);

    await d.req('POST', 'v1/ocs/ocs0/faults', { kind: 'fail_batches', count: 1000 });
    await d.req('POST', 'v1/ocs/ocs0/faults', { kind: 'set_xc', a: 60, b: 61 });
    await page.waitForSelector('table.xc tr.drift[data-pair="60-61"]', { timeout: 5000 });
    assert.match(await page.textContent('tr.drift[data-pair="60-61"]'), /held, not desired/);

    await page.click('nav a[data-view="events"]');
    await page.waitForSelector('#event-log li[data-type="drift"]');
    await page.waitForSelector('table.ops tr[data-op]');
    assert.deepEqual(page.problems, []);
    await page.context().close();
  });
});

test('with tokens: the page asks for one, keeps it for the tab and sends it', async () => {
  await withDaemon({ tokens: true }, async (d) => {
    const page = await openPage(browser);
    await page.goto(`${d.url}#/fabrics`);
    await page.waitForSelector('#banner.warn:not([hidden])');
    assert.match(await page.textContent('#banner'), /needs an API token/);
    assert.equal(await page.textContent('#live'), 'unauthorized');
    // Only the refused requests themselves are logged by the browser.
    assert.ok(page.problems.every((p) => /status of 401/.test(p)), page.problems.join('\n'));
    page.problems.length = 0;

    await page.fill('#token', READER);
    await page.click('#token-form button[type="submit"]');
    await page.waitForFunction(() => document.querySelector('#live').textContent === 'live');
    assert.equal(await page.evaluate(() => sessionStorage.getItem('ofcd.token')), READER);
    assert.ok(await page.isHidden('#banner'));

    // Live with the token: a fabric created meanwhile appears.
    assert.equal((await d.req('POST', 'v1/fabrics', { name: 'job-t', servers: ['srv5', 'srv6', 'srv7'] })).status, 201);
    await within(page, 2000, () => !!document.querySelector('tr[data-fabric="job-t"]'));
    await page.reload();
    await page.waitForSelector('tr[data-fabric="job-t"]');
    assert.deepEqual(page.problems, []);
    await page.context().close();
  });
});

// The rows of one unit's cabling table: OCS port -> {server, device, port, state, to, fabric}.
function cablingRows(page, unit) {
  return page.evaluate((u) => Object.fromEntries([...document.querySelectorAll(
    `details[data-unit="${u}"] table.cabling tbody tr`)].map((tr) => {
    const td = [...tr.cells].map((c) => c.textContent.trim());
    return [td[0], { server: td[1], device: td[2], port: td[3], state: td[4], to: td[5], fabric: td[6] }];
  })), unit);
}

test('the cabling view marks the ports a fabric uses, with its name, and a failed device', async () => {
  await withDaemon({}, async (d) => {
    assert.equal((await d.req('POST', 'v1/fabrics?wait=10', { name: 'job-a', servers: FIVE })).status, 201);
    assert.equal((await d.req('PUT', 'v1/servers/srv1/devices/0', { state: 'failed' })).status, 200);
    const fabric = (await d.req('GET', 'v1/fabrics/job-a?wait=10')).body;
    assert.equal(fabric.state, 'applied');
    const wiring = (await d.req('GET', 'v1/wiring')).body.links;
    const page = await openPage(browser);
    await page.goto(`${d.url}#/cabling`);
    await page.waitForSelector('details[data-unit="ocs1"] table.cabling');
    await page.waitForFunction(() => document.querySelector('#live').textContent === 'live');

    // Every cable is a row, and each end of each circuit is in use for job-a.
    const rows = { ocs0: await cablingRows(page, 'ocs0'), ocs1: await cablingRows(page, 'ocs1') };
    for (const l of wiring) {
      const r = rows[l.ocs][l.ocs_port];
      assert.deepEqual([r.server, r.device, r.port], [l.server, String(l.device), String(l.port)]);
    }
    for (const l of fabric.links) {
      for (const [e, o] of [[l.a, l.b], [l.b, l.a]]) {
        const r = rows[e.ocs][e.ocs_port];
        assert.match(r.state, /in use/, `${e.ocs} port ${e.ocs_port}`);
        assert.equal(r.fabric, 'job-a');
        assert.equal(r.to, `→ ${o.ocs_port} (${o.server} d${o.device}p${o.port})`);
      }
    }
    const broken = wiring.find((l) => l.server === 'srv1' && l.device === 0);
    assert.match(rows[broken.ocs][broken.ocs_port].state, /device failed/);
    const spare = wiring.find((l) => l.server === 'srv7');
    assert.equal(rows[spare.ocs][spare.ocs_port].state, 'free');
    const used = Object.values(rows.ocs0).filter((r) => /in use/.test(r.state)).length;
    assert.match(await page.textContent('details[data-unit="ocs0"] summary'),
      new RegExp(`${wiring.filter((l) => l.ocs === 'ocs0').length} cabled · ${used} in use · 0 down`));

    // Another device fails: its row follows through the event stream, no reload.
    const next = wiring.find((l) => l.server === 'srv6' && l.device === 3);
    assert.equal((await d.req('PUT', 'v1/servers/srv6/devices/3', { state: 'failed' })).status, 200);
    await within(page, 10000, ({ ocs, port }) => /device failed/.test(document.querySelector(
      `details[data-unit="${ocs}"] tr[data-port="${port}"]`).textContent), { ocs: next.ocs, port: next.ocs_port });
    assert.deepEqual(page.problems, []);
    await page.context().close();
  });
});

test('a filter narrows the cabling, the servers and the fabrics, and the link keeps it', async () => {
  await withDaemon({}, async (d) => {
    assert.equal((await d.req('POST', 'v1/fabrics?wait=10', { name: 'job-a', servers: FIVE })).status, 201);
    assert.equal((await d.req('POST', 'v1/fabrics?wait=10', { name: 'job-b', servers: ['srv5', 'srv6', 'srv7'] })).status, 201);
    const cables = (await d.req('GET', 'v1/wiring')).body.links.filter((l) => l.server === 'srv6').length;
    const page = await openPage(browser);
    await page.goto(`${d.url}#/cabling`);
    await page.waitForSelector('details[data-unit="ocs1"] table.cabling');
    const all = await page.locator('table.cabling tbody tr').count();

    await page.fill('#filter', 'srv6');
    await within(page, 5000, (n) => document.querySelectorAll('table.cabling tbody tr').length === n, cables);
    const servers = await page.$$eval('table.cabling tbody tr', (trs) => [...new Set(trs.map((t) => t.dataset.server))]);
    assert.deepEqual(servers, ['srv6']);
    assert.deepEqual(await page.$$eval('table.cabling-servers tbody tr', (trs) => trs.map((t) => t.dataset.server)), ['srv6']);
    assert.match(page.url(), /#\/cabling\?q=srv6$/);

    // The link restores it.
    await page.reload();
    await page.waitForSelector('details[data-unit="ocs1"] table.cabling');
    assert.equal(await page.inputValue('#filter'), 'srv6');
    assert.equal(await page.locator('table.cabling tbody tr').count(), cables);

    // Words narrow together: a unit and a fabric.
    await page.fill('#filter', 'ocs0 job-b');
    await within(page, 5000, () => {
      const rows = [...document.querySelectorAll('table.cabling tbody tr')];
      return !document.querySelector('details[data-unit="ocs1"]') && rows.length > 0 &&
        rows.every((t) => t.dataset.fabric === 'job-b');
    });
    await page.fill('#filter', '');
    await within(page, 5000, (n) => document.querySelectorAll('table.cabling tbody tr').length === n, all);
    assert.match(page.url(), /#\/cabling$/);

    // The fabric list and the servers of the cluster view filter too.
    await page.goto(`${d.url}#/fabrics?q=job-b`);
    // The cabling rows of job-b's circuits match tr[data-fabric] too, until the list is drawn.
    await page.waitForSelector('#view[data-view="fabrics"] tr[data-fabric="job-b"]');
    assert.equal(await page.locator('tr[data-fabric]').count(), 1);
    await page.fill('#filter', 'srv2');
    await page.waitForSelector('tr[data-fabric="job-a"]');
    assert.equal(await page.locator('tr[data-fabric]').count(), 1);
    await page.goto(`${d.url}#/cluster?q=job-b`);
    await within(page, 5000, () => document.querySelectorAll('.tile').length === 3);
    assert.deepEqual(await page.$$eval('.tile', (ts) => ts.map((t) => t.dataset.server)), ['srv5', 'srv6', 'srv7']);
    assert.equal(await page.inputValue('#filter'), 'job-b');
    assert.deepEqual(page.problems, []);
    await page.context().close();
  });
});

test('a long operation error wraps: the fabric page does not overflow at 1400 and 1024 px', async () => {
  await withDaemon({}, async (d) => {
    assert.equal((await d.req('POST', 'v1/fabrics?wait=10', { name: 'job-a', servers: FIVE })).status, 201);
    // No unit fails with so long a message on demand: the operations' reply is given one.
    const long = `OCS unit ocs0: apply: ${'refused/'.repeat(30)} and a sentence that goes on ${'and on '.repeat(30)}`;
    for (const width of [1400, 1024]) {
      const page = await openPage(browser, { viewport: { width, height: 800 } });
      await page.route(/\/v1\/operations\?/, async (route) => {
        const r = await route.fetch();
        const body = await r.json();
        for (const o of body.operations) Object.assign(o, { status: 'failed', error: long });
        await route.fulfill({ response: r, json: body });
      });
      await page.goto(`${d.url}#/fabrics/job-a`);
      await page.waitForSelector('#panel table.ops tr.op-error');
      const m = await page.evaluate(() => {
        const panel = document.querySelector('#panel');
        return {
          page: document.documentElement.scrollWidth,
          window: window.innerWidth,
          panel: panel.scrollWidth,
          panelBox: panel.clientWidth,
        };
      });
      assert.ok(m.page <= m.window, `${width} px: the page is ${m.page} px wide`);
      assert.ok(m.panel <= m.panelBox, `${width} px: the panel holds ${m.panel} px in ${m.panelBox}`);
      assert.deepEqual(page.problems, []);
      await page.context().close();
    }
  });
});

// 8 units of 64 ports and n servers of 8 devices (one port each), cabled one plane per unit.
async function gridCluster(d, n) {
  for (let i = 0; i < 8; i++) {
    assert.equal((await d.req('POST', 'v1/ocs', { name: `ocs${i}`, driver: 'sim', ports: 64 })).status, 201);
  }
  for (let i = 0; i < n; i++) {
    assert.equal((await d.req('POST', 'v1/servers', { name: `srv${i}`, devices: 8 })).status, 201);
  }
  assert.equal((await d.req('PUT', 'v1/wiring', { rule: 'plane-per-ocs' })).status, 200);
}

// The colour (as [r, g, b, alpha]) of the canvas at layout point q.
function pixelAt(page, q) {
  return page.evaluate(({ x, y }) => {
    const p = window.ofcdConsole.picture;
    const { scale, ox, oy } = p.fit();
    const dpr = window.devicePixelRatio || 1;
    const px = p.canvas.getContext('2d').getImageData(Math.round((ox + x * scale) * dpr),
      Math.round((oy + y * scale) * dpr), 1, 1).data;
    return [...px];
  }, q);
}

function hex(c) {
  return [1, 3, 5].map((i) => parseInt(c.slice(i, i + 2), 16));
}

// Near in colour: the lines are drawn a little transparent on white.
function near(px, colour) {
  const c = hex(colour);
  return px[3] > 200 && c.every((v, i) => Math.abs(v - px[i]) < 60);
}

// The server's circuits per dimension as the selection lists them: dim -> [[peer, unit, here, there]].
function selectedCircuits(page) {
  return page.evaluate(() => Object.fromEntries([...document.querySelectorAll('#selection .dim')].map((el) =>
    [el.dataset.dim, [...el.querySelectorAll('tbody tr')].map((tr) => [...tr.cells].map((c) => c.textContent))])));
}

// What the REST view says of one server's circuits, in the selection's form.
function expectedCircuits(fabric, name, coords) {
  const out = {};
  const index = new Map(fabric.servers.map((s, i) => [s, i]));
  for (const l of fabric.links) {
    const [me, peer] = l.a.server === name ? [l.a, l.b] : l.b.server === name ? [l.b, l.a] : [];
    if (!me) continue;
    const [ca, cb] = [coords(index.get(name)), coords(index.get(peer.server))];
    const d = ca.findIndex((c, i) => c !== cb[i]);
    (out[d] = out[d] || []).push([`${peer.server} (${cb.join(', ')})`, l.a.ocs,
      `d${me.device}p${me.port} → ${me.ocs_port}`, `d${peer.device}p${peer.port} → ${peer.ocs_port}`]);
  }
  for (const d of Object.keys(out)) out[d].sort((x, y) => index.get(x[0].split(' ')[0]) - index.get(y[0].split(' ')[0]));
  return out;
}

test('a HyperX and a torus fabric are drawn on their grids, by dimension', async () => {
  await withDaemon({ demo: false }, async (d) => {
    await gridCluster(d, 28);
    const sixteen = Array.from({ length: 16 }, (_, i) => `srv${i}`);
    const hx = await d.req('POST', 'v1/fabrics?wait=10', { name: 'hx', servers: sixteen, topology: 'auto' });
    assert.equal(hx.status, 201);
    assert.equal(hx.body.state, 'applied');
    assert.equal(hx.body.topology, 'hyperx');
    assert.deepEqual(hx.body.shape, [4, 4]);
    const twelve = Array.from({ length: 12 }, (_, i) => `srv${16 + i}`);
    const tor = await d.req('POST', 'v1/fabrics?wait=10', { name: 'tor', servers: twelve, topology: 'torus', shape: [4, 3] });
    assert.equal(tor.status, 201);
    assert.equal(tor.body.state, 'applied');

    for (const width of [1400, 1024]) {
      const page = await openPage(browser, { viewport: { width, height: 800 } });
      await page.goto(`${d.url}#/fabrics/hx`);
      await page.waitForSelector('#panel #dimensions');
      assert.match(await page.textContent('#layout'), /topology hyperx · shape 4 × 4 · diameter 2 · degree 6/);
      assert.match(await page.textContent('#choice-reason'), /HyperX 4x4/);
      assert.equal(await page.locator('table.candidates tbody tr').count(), hx.body.choice.candidates.length);
      assert.match(await page.textContent('table.candidates tr.chosen'), /hyperx\s*4x4/);
      assert.match(await page.textContent('#dimensions li[data-dim="0"]'), /4 lines of 4 · 24 circuits/);
      assert.match(await page.textContent('#dimensions li[data-dim="1"]'), /4 lines of 4 · 24 circuits/);

      // 16 marks, 4 columns by 4 rows, in position order (dimension 0 across).
      const pts = await page.evaluate(() => window.ofcdConsole.picture.points);
      assert.equal(pts.length, 16);
      const xs = [...new Set(pts.map((q) => q.x))].sort((a, b) => a - b);
      const ys = [...new Set(pts.map((q) => q.y))].sort((a, b) => a - b);
      assert.equal(xs.length, 4);
      assert.equal(ys.length, 4);
      pts.forEach((q, i) => assert.deepEqual([xs.indexOf(q.x), ys.indexOf(q.y)], [i % 4, Math.floor(i / 4)]));
      // A line of each dimension, one bus each, in the dimension's colour.
      const segs = await page.evaluate(() => window.ofcdConsole.picture.segments.map((l) => l.length));
      assert.deepEqual(segs, [4, 4]);
      const mid = (a, b) => ({ x: (pts[a].x + pts[b].x) / 2, y: (pts[a].y + pts[b].y) / 2 });
      assert.ok(near(await pixelAt(page, mid(5, 6)), '#4e79a7'), 'dimension 0 in its colour');
      assert.ok(near(await pixelAt(page, mid(5, 9)), '#f28e2b'), 'dimension 1 in its colour');

      // A click on srv5 (1, 1): its coordinates and its circuits per dimension.
      const box = await page.locator('#picture').boundingBox();
      const at = await page.evaluate(() => window.ofcdConsole.picture.pointOfServer('srv5'));
      await page.mouse.click(box.x + at.x, box.y + at.y);
      await page.waitForSelector('#selection #coordinates');
      assert.match(await page.textContent('#coordinates'), /coordinates \(1, 1\) of 4 × 4/);
      const coords = (i) => [i % 4, Math.floor(i / 4)];
      const want = expectedCircuits(hx.body, 'srv5', coords);
      assert.deepEqual(want[0].map((r) => r[0]), ['srv4 (0, 1)', 'srv6 (2, 1)', 'srv7 (3, 1)']);
      assert.deepEqual(want[1].map((r) => r[0]), ['srv1 (1, 0)', 'srv9 (1, 2)', 'srv13 (1, 3)']);
      assert.deepEqual(await selectedCircuits(page), want);

      const m = await page.evaluate(() => ({
        page: document.documentElement.scrollWidth,
        window: window.innerWidth,
        panel: document.querySelector('#panel').scrollWidth,
        panelBox: document.querySelector('#panel').clientWidth,
      }));
      assert.ok(m.page <= m.window, `${width} px: the page is ${m.page} px wide`);
      assert.ok(m.panel <= m.panelBox, `${width} px: the panel holds ${m.panel} px in ${m.panelBox}`);

      // The torus 4 × 3: segments and the arcs that close each ring.
      await page.goto(`${d.url}#/fabrics/tor`);
      await page.waitForSelector('#panel #dimensions');
      await within(page, 5000, () => window.ofcdConsole.picture.fabric.name === 'tor');
      assert.match(await page.textContent('#layout'), /topology torus · shape 4 × 3 · diameter 3 · degree 4/);
      assert.equal(await page.locator('#choice-reason').count(), 0);
      const rings = await page.evaluate(() => window.ofcdConsole.picture.segments.map((l) => ({
        straight: l.filter((s) => !s.wrap).length, wraps: l.filter((s) => s.wrap).length,
      })));
      assert.deepEqual(rings, [{ straight: 3 * 3, wraps: 3 }, { straight: 4 * 2, wraps: 4 }]);
      const tp = await page.evaluate(() => window.ofcdConsole.picture.points);
      assert.equal(new Set(tp.map((q) => q.x)).size, 4);
      assert.equal(new Set(tp.map((q) => q.y)).size, 3);
      // The wrap of row 0 (srv16 — srv19) arcs above it: its top in dimension 0's colour.
      const apex = await page.evaluate(() => {
        const p = window.ofcdConsole.picture;
        return { x: (p.points[0].x + p.points[3].x) / 2, y: p.points[0].y - 0.4 * p.geo.step };
      });
      assert.ok(near(await pixelAt(page, apex), '#4e79a7'), 'the wrap-around arc is drawn');
      const at2 = await page.evaluate(() => window.ofcdConsole.picture.pointOfServer('srv16'));
      const box2 = await page.locator('#picture').boundingBox();
      await page.mouse.click(box2.x + at2.x, box2.y + at2.y);
      await page.waitForSelector('#selection #coordinates');
      assert.match(await page.textContent('#coordinates'), /coordinates \(0, 0\) of 4 × 3/);
      const tw = expectedCircuits(tor.body, 'srv16', (i) => [i % 4, Math.floor(i / 4)]);
      assert.deepEqual(tw[0].map((r) => r[0]), ['srv17 (1, 0)', 'srv19 (3, 0)']);
      assert.deepEqual(tw[1].map((r) => r[0]), ['srv20 (0, 1)', 'srv24 (0, 2)']);
      assert.deepEqual(await selectedCircuits(page), tw);
      assert.deepEqual(page.problems, []);
      await page.context().close();
    }

    // Devices fail: the server turns red and the pairs left without a circuit show.
    for (const dev of [0, 1, 2]) {
      assert.equal((await d.req('PUT', `v1/servers/srv5/devices/${dev}`, { state: 'failed' })).status, 200);
    }
    const after = (await d.req('GET', 'v1/fabrics/hx?wait=10')).body;
    assert.ok(after.missing.length > 0, 'three failed devices leave a pair missing');
    const page = await openPage(browser);
    await page.goto(`${d.url}#/fabrics/hx`);
    await page.waitForSelector('#failed-devices li');
    await within(page, 5000, (n) => document.querySelectorAll('#missing-pairs li').length === n, after.missing.length);
    assert.deepEqual(await page.evaluate(() => window.ofcdConsole.picture.failed.srv5), [0, 1, 2]);
    const five = await page.evaluate(() => window.ofcdConsole.picture.points[5]);
    assert.ok(near(await pixelAt(page, five), '#d62728'), 'srv5 is red');
    assert.deepEqual(page.problems, []);
    await page.context().close();
  });
});
