// Runs the real build/ofcd (OFCD_BIN) on a free loopback port with a temporary
// configuration and store, like tests/integration/conftest.py, and Debian's
// Chromium through playwright-core (no browser download: /usr/bin/chromium).
import { spawn } from 'node:child_process';
import { mkdtempSync, openSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import net from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

import { chromium } from 'playwright-core';

const here = path.dirname(fileURLToPath(import.meta.url));
export const OFCD_BIN = process.env.OFCD_BIN || path.join(here, '../../build/ofcd');
export const ADMIN = 'admin-secret-0123456789';
export const READER = 'reader-secret-0123456789';

function freePort() {
  return new Promise((resolve, reject) => {
    const s = net.createServer();
    s.on('error', reject);
    s.listen(0, '127.0.0.1', () => {
      const { port } = s.address();
      s.close(() => resolve(port));
    });
  });
}

/**
 * Starts ofcd --demo (two sim OCS units, 8 servers of 8 devices), or without
 * any topology when demo is false. tokens adds an admin and a read token;
 * extra is appended to the configuration.
 */
export async function startDaemon({ tokens = false, extra = '', demo = true } = {}) {
  const dir = mkdtempSync(path.join(os.tmpdir(), 'ofcd-browser-'));
  const port = await freePort();
  const config = path.join(dir, 'ofcd.ini');
  let text = `[http]\nlisten = 127.0.0.1:${port}\n[store]\npath = ${dir}/ofcd.db\n[log]\nlevel = info\n`;
  if (tokens) text += `[auth]\ntoken.ops = admin:${ADMIN}\ntoken.mon = read:${READER}\n`;
  writeFileSync(config, text + extra);
  const logPath = path.join(dir, 'ofcd.log');
  const log = openSync(logPath, 'a');
  const proc = spawn(OFCD_BIN, ['-c', config, ...(demo ? ['--demo'] : [])], { stdio: ['ignore', log, log] });
  const url = `http://127.0.0.1:${port}/`;
  const d = {
    url,
    port,
    proc,
    log: () => readFileSync(logPath, 'utf8'),
    /** A request as an admin; returns {status, body}. */
    async req(method, p, body) {
      const headers = tokens ? { Authorization: `Bearer ${ADMIN}` } : {};
      if (body !== undefined) headers['Content-Type'] = 'application/json';
      const r = await fetch(url + p.replace(/^\//, ''), {
        method, headers, body: body === undefined ? undefined : JSON.stringify(body),
      });
      const t = await r.text();
      let parsed = t;
      try {
        parsed = JSON.parse(t);
      } catch {
        // SVG or text
      }
      return { status: r.status, body: parsed, type: r.headers.get('content-type') };
    },
    async stop() {
      if (proc.exitCode === null) {
        const done = new Promise((resolve) => proc.once('exit', resolve));
        proc.kill('SIGTERM');
        await done;
      }
      rmSync(dir, { recursive: true, force: true });
    },
  };
  for (let i = 0; i < 500; i++) {
    if (proc.exitCode !== null) throw new Error(`ofcd exited with ${proc.exitCode}:\n${d.log()}`);
    try {
      if ((await fetch(`${url}v1/health`)).ok) return d;
    } catch {
      // not listening yet
    }
    await new Promise((r) => setTimeout(r, 20));
  }
  await d.stop();
  throw new Error('ofcd did not become ready');
}

/** Debian's Chromium, headless, with the flags this machine's closed network needs. */
export function launchBrowser() {
  return chromium.launch({
    executablePath: process.env.CHROMIUM || '/usr/bin/chromium',
    headless: true,
    // Playwright gives every launch a new, empty profile directory.
    args: ['--no-sandbox', '--disable-gpu', '--disable-quic', '--no-first-run',
      '--disable-background-networking', '--disable-component-update', '--disable-sync'],
  });
}

/** A page that records console errors and uncaught exceptions into page.problems. */
export async function openPage(browser, opts = {}) {
  const context = await browser.newContext({ viewport: { width: 1400, height: 900 }, ...opts });
  const page = await context.newPage();
  page.problems = [];
  page.on('console', (m) => {
    if (m.type() === 'error') page.problems.push(`console: ${m.text()}`);
  });
  page.on('pageerror', (e) => page.problems.push(`exception: ${e.message}`));
  return page;
}
