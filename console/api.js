// The daemon's API as the console uses it: JSON requests with the session's
// token, and the event stream read through fetch() so that it can carry the
// Authorization header too (EventSource cannot send headers).

const TOKEN_KEY = 'ofcd.token';

/** The token kept for this browser tab ('' when none). */
export function token() {
  return sessionStorage.getItem(TOKEN_KEY) || '';
}

/** Keeps t for this tab only (sessionStorage), or forgets it when empty. */
export function setToken(t) {
  if (t) sessionStorage.setItem(TOKEN_KEY, t);
  else sessionStorage.removeItem(TOKEN_KEY);
}

function headers() {
  const t = token();
  return t ? { Authorization: `Bearer ${t}` } : {};
}

/** A refusal of the API, with its status and error object ({code, message, ...}). */
export class ApiError extends Error {
  constructor(status, error) {
    super(error && error.message ? error.message : `HTTP ${status}`);
    this.status = status;
    this.error = error;
  }
}

// Paths are relative to the page, so the console also works behind a proxy
// that serves the daemon under a prefix.
async function send(path) {
  const r = await fetch(path, { headers: headers(), cache: 'no-store' });
  if (!r.ok) {
    let body = null;
    try {
      body = await r.json();
    } catch {
      // not JSON: the status says enough
    }
    throw new ApiError(r.status, body && body.error);
  }
  return r;
}

/** GET path and parse its JSON reply; throws ApiError on an error status. */
export async function getJson(path) {
  return (await send(path)).json();
}

/** GET path as a Blob (e.g. the SVG picture). */
export async function getBlob(path) {
  return (await send(path)).blob();
}

/**
 * Follows GET v1/events for as long as it is not stopped, reconnecting with a
 * growing delay. Calls onOpen() each time the stream is (re)opened (the
 * caller reloads what it shows: events in between are lost), onEvent(type,
 * data, id) for each event, and onState(state) with 'live', 'reconnecting'
 * or 'unauthorized' (then it waits for restart()).
 */
export class EventStream {
  constructor({ onOpen, onEvent, onState }) {
    this.onOpen = onOpen;
    this.onEvent = onEvent;
    this.onState = onState;
    this.abort = null;
    this.delay = 500;
    this.timer = null;
  }

  /** (Re)connects now, e.g. with a new token. */
  restart() {
    this.stop();
    this.run();
  }

  stop() {
    clearTimeout(this.timer);
    if (this.abort) this.abort.abort();
    this.abort = null;
  }

  async run() {
    const abort = new AbortController();
    this.abort = abort;
    try {
      const r = await fetch('v1/events', { headers: headers(), signal: abort.signal, cache: 'no-store' });
      if (r.status === 401 || r.status === 403) {
        this.onState('unauthorized');
        return;
      }
      if (!r.ok || !r.body) throw new Error(`HTTP ${r.status}`);
      this.delay = 500;
      this.onState('live');
      this.onOpen();
      await this.read(r.body.getReader());
    } catch (e) {
      if (abort.signal.aborted) return;
    }
    if (abort.signal.aborted) return;
    // The stream ended or failed: try again, less often each time.
    this.onState('reconnecting');
    this.timer = setTimeout(() => this.run(), this.delay);
    this.delay = Math.min(this.delay * 2, 10000);
  }

  // Server-Sent Events: lines "field: value", an event ends at an empty line;
  // lines starting with ':' are comments (the greeting and the keep-alives).
  async read(reader) {
    const decoder = new TextDecoder();
    let buf = '';
    let ev = { type: 'message', data: [], id: null };
    for (;;) {
      const { value, done } = await reader.read();
      if (done) return;
      buf += decoder.decode(value, { stream: true });
      let nl;
      while ((nl = buf.indexOf('\n')) >= 0) {
        const line = buf.slice(0, nl).replace(/\r$/, '');
        buf = buf.slice(nl + 1);
        if (line === '') {
          if (ev.data.length) this.dispatch(ev);
          ev = { type: 'message', data: [], id: null };
        } else if (!line.startsWith(':')) {
          const colon = line.indexOf(':');
          const field = colon < 0 ? line : line.slice(0, colon);
          const val = colon < 0 ? '' : line.slice(colon + 1).replace(/^ /, '');
          if (field === 'event') ev.type = val;
          else if (field === 'data') ev.data.push(val);
          else if (field === 'id') ev.id = val;
        }
      }
    }
  }

  dispatch(ev) {
    let data;
    try {
      data = JSON.parse(ev.data.join('\n'));
    } catch {
      return;
    }
    this.onEvent(ev.type, data, ev.id);
  }
}
