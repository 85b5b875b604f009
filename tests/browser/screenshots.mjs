// Regenerates the console's pictures for the README (make screenshots):
//   node tests/browser/screenshots.mjs OUTDIR
// against a demo daemon with two fabrics, a failed device and a unit that
// holds a cross-connect nobody asked for; then a HyperX fabric on a daemon of
// its own.
import { mkdirSync, writeFileSync } from 'node:fs';
import path from 'node:path';

import { launchBrowser, openPage, startDaemon } from './daemon.mjs';

const out = process.argv[2] || 'docs/img';
mkdirSync(out, { recursive: true });

const d = await startDaemon({ extra: '[debug]\nfaults = true\n[reconcile]\naudit_interval = 1\n' });
const browser = await launchBrowser();
try {
  const must = async (method, p, body) => {
    const r = await d.req(method, p, body);
    if (r.status >= 300) throw new Error(`${method} ${p}: ${r.status} ${JSON.stringify(r.body)}`);
    return r;
  };
  await must('POST', 'v1/fabrics?wait=10', { name: 'job-a', servers: ['srv0', 'srv1', 'srv2', 'srv3', 'srv4'] });
  await must('POST', 'v1/fabrics?wait=10', { name: 'job-b', servers: ['srv5', 'srv6', 'srv7'] });
  await must('PUT', 'v1/servers/srv1/devices/0', { state: 'failed' });
  await must('GET', 'v1/fabrics/job-a?wait=10');
  await must('POST', 'v1/ocs/ocs1/faults', { kind: 'fail_batches', count: 1000 });
  await must('POST', 'v1/ocs/ocs1/faults', { kind: 'set_xc', a: 60, b: 61 });
  writeFileSync(path.join(out, 'fabric-job-a.svg'), (await must('GET', 'v1/fabrics/job-a/picture.svg')).body);

  const page = await openPage(browser, { viewport: { width: 1200, height: 720 } });
  const shot = async (name) => {
    await page.waitForTimeout(300); // let the last re-render settle
    await page.screenshot({ path: path.join(out, `${name}.png`) });
    console.log(`${out}/${name}.png`);
  };
  await page.goto(`${d.url}#/cluster`);
  await page.waitForSelector('.tile[data-server="srv7"]');
  await page.waitForSelector('.units tr[data-ocs="ocs1"] .badge.failed');
  await shot('cluster');

  await page.goto(`${d.url}#/fabrics`);
  await page.waitForSelector('tr[data-fabric="job-b"]');
  await shot('fabrics');

  await page.goto(`${d.url}#/fabrics/job-a`);
  await page.waitForSelector('#failed-devices li');
  const box = await page.locator('#picture').boundingBox();
  const at = await page.evaluate(() => window.ofcdConsole.picture.pointOnLink(2));
  await page.mouse.click(box.x + at.x, box.y + at.y);
  await page.waitForSelector('#selection');
  await shot('fabric');

  await page.goto(`${d.url}#/cabling?q=srv1`);
  await page.waitForSelector('table.cabling tr.bad');
  await shot('cabling');

  await page.goto(`${d.url}#/ocs/ocs1`);
  await page.waitForSelector('tr.drift[data-pair="60-61"]');
  await shot('unit');

  await page.goto(`${d.url}#/events`);
  await page.waitForSelector('#event-log li');
  await shot('events');
  if (page.problems.length) throw new Error(page.problems.join('\n'));
  await page.context().close();
  await hyperx();
} finally {
  await browser.close();
  await d.stop();
}

// A fabric larger than a full mesh, on a daemon of its own: 16 servers of 8
// devices become a HyperX 4 x 4; three failed devices of srv5 leave a pair missing.
async function hyperx() {
  const g = await startDaemon({ demo: false });
  try {
    const must = async (method, p, body) => {
      const r = await g.req(method, p, body);
      if (r.status >= 300) throw new Error(`${method} ${p}: ${r.status} ${JSON.stringify(r.body)}`);
      return r;
    };
    for (let i = 0; i < 8; i++) await must('POST', 'v1/ocs', { name: `ocs${i}`, driver: 'sim', ports: 64 });
    const servers = Array.from({ length: 16 }, (_, i) => `srv${i}`);
    for (const name of servers) await must('POST', 'v1/servers', { name, devices: 8 });
    await must('PUT', 'v1/wiring', { rule: 'plane-per-ocs' });
    await must('POST', 'v1/fabrics?wait=10', { name: 'hx', servers, topology: 'auto' });
    for (const dev of [0, 1, 2]) await must('PUT', `v1/servers/srv5/devices/${dev}`, { state: 'failed' });
    await must('GET', 'v1/fabrics/hx?wait=10');
    writeFileSync(path.join(out, 'fabric-hx.svg'), (await must('GET', 'v1/fabrics/hx/picture.svg')).body);

    const page = await openPage(browser, { viewport: { width: 1200, height: 900 } });
    await page.goto(`${g.url}#/fabrics/hx`);
    await page.waitForSelector('#missing-pairs li');
    const box = await page.locator('#picture').boundingBox();
    const at = await page.evaluate(() => window.ofcdConsole.picture.pointOfServer('srv6'));
    await page.mouse.click(box.x + at.x, box.y + at.y);
    await page.waitForSelector('#selection #coordinates');
    await page.waitForTimeout(300);
    await page.screenshot({ path: path.join(out, 'fabric-hyperx.png') });
    console.log(`${out}/fabric-hyperx.png`);
    if (page.problems.length) throw new Error(page.problems.join('\n'));
    await page.context().close();
  } finally {
    await g.stop();
  }
}
