// Small DOM and formatting helpers. Text always goes in as text nodes (never as HTML), so
// nothing a cluster, a workload or a log line says can inject markup.

// h('a', {href: '#/x', class: 'y'}, 'text', child, ...): an element.
export function h(tag, attrs = {}, ...children) {
  const el = document.createElement(tag);
  for (const [key, value] of Object.entries(attrs || {})) {
    if (value === undefined || value === null || value === false) continue;
    if (key === 'class') el.className = value;
    else if (key.startsWith('on') && typeof value === 'function') el.addEventListener(key.slice(2), value);
    else if (key === 'dataset') Object.assign(el.dataset, value);
    else if (value === true) el.setAttribute(key, '');
    else el.setAttribute(key, String(value));
  }
  append(el, children);
  return el;
}

function append(el, children) {
  for (const child of children) {
    if (child === undefined || child === null || child === false) continue;
    if (Array.isArray(child)) append(el, child);
    else el.append(child instanceof Node ? child : document.createTextNode(String(child)));
  }
}

// Replaces the children of `el` with `children` (null, false and undefined left out).
export function fill(el, ...children) {
  el.replaceChildren();
  append(el, children);
  return el;
}

export function fmtTime(iso) {
  if (!iso) return '—';
  const d = new Date(iso);
  if (Number.isNaN(d.getTime())) return String(iso);
  return d.toISOString().replace('T', ' ').replace(/\.\d+Z$/, 'Z');
}

export function fmtAge(ms) {
  if (ms === undefined || ms === null || Number.isNaN(ms)) return '—';
  const s = Math.max(0, Math.round(ms / 1000));
  if (s < 90) return `${s} s`;
  const m = Math.round(s / 60);
  if (m < 90) return `${m} min`;
  const hrs = Math.round(m / 60);
  if (hrs < 48) return `${hrs} h`;
  return `${Math.round(hrs / 24)} d`;
}

export function fmtNum(v, digits = 2) {
  if (v === undefined || v === null) return '—';
  if (typeof v !== 'number') return String(v);
  return Number.isInteger(v) ? String(v) : v.toFixed(digits);
}

const STATE_CLASS = {RUNNING: 'ok', COMPLETED: 'ok', QUEUED: 'warn', FAILED: 'bad', UNKNOWN: 'plain'};

export function stateBadge(state) {
  if (!state) return h('span', {class: 'badge plain'}, 'not observed');
  return h('span', {class: `badge ${STATE_CLASS[state] || 'plain'}`}, state);
}

export function workloadHref(cluster, name) {
  return `#/workload/${encodeURIComponent(cluster)}/${encodeURIComponent(name)}`;
}

export function clusterHref(name) {
  return `#/cluster/${encodeURIComponent(name)}`;
}

export function table(headers, rows, {caption, empty = 'Nothing to show.'} = {}) {
  if (!rows.length) return h('p', {class: 'empty'}, empty);
  return h('div', {class: 'table-wrap'},
    h('table', {},
      caption ? h('caption', {class: 'meta'}, caption) : null,
      h('thead', {}, h('tr', {}, headers.map((t) =>
        typeof t === 'string' ? h('th', {scope: 'col'}, t) : h('th', {scope: 'col', class: t.class}, t.text)))),
      h('tbody', {}, rows)));
}

// A labelled control: <div><label for=id>text</label><control id=id></div>.
export function field(label, control) {
  return h('div', {}, h('label', {for: control.id}, label), control);
}
