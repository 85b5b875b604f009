// Small DOM helpers shared by the console's views, and the row filter.

/** An element with attributes (on* are listeners, style an object) and children. */
export function h(tag, attrs, ...children) {
  const el = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs || {})) {
    if (v === undefined || v === null || v === false) continue;
    if (k === 'class') el.className = v;
    else if (k.startsWith('on')) el.addEventListener(k.slice(2), v);
    else if (k === 'style') Object.assign(el.style, v);
    else el.setAttribute(k, v === true ? '' : v);
  }
  for (const c of children.flat(Infinity)) {
    if (c === null || c === undefined || c === false) continue;
    el.append(c instanceof Node ? c : document.createTextNode(String(c)));
  }
  return el;
}

export function badge(text, kind) {
  return h('span', { class: `badge ${kind || text}` }, text);
}

/** A table in a box that scrolls sideways, so a wide one never widens the page. */
export function table(headers, rows, attrs) {
  return h('div', { class: 'scroll' },
    h('table', attrs || {}, h('thead', {}, h('tr', {}, headers.map((x) => h('th', {}, x)))),
      h('tbody', {}, rows)));
}

/**
 * The filter typed in a view's search box: every word of it must occur in a
 * row's text, case aside ("srv1 ocs0" narrows to srv1's cables on ocs0).
 * Returns a test of a list of texts.
 */
export function matcher(query) {
  const words = (query || '').toLowerCase().split(/\s+/).filter(Boolean);
  if (!words.length) return () => true;
  return (...texts) => {
    const hay = texts.join(' ').toLowerCase();
    return words.every((w) => hay.includes(w));
  };
}
