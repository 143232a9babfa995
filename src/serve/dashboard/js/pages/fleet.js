// Fleet: every cluster by accelerator type (reachable / unreachable / breaker open, queue,
// running, max queue, the type's free capacity or why it is not known, probe age), and per type
// a chart of queue depth and failed probes over the last hours from the probe history.
// Refreshes in place every few seconds: only the values that changed are touched, and what could
// not be refreshed is marked stale.
import {api} from '../api.js';
import {lineChart, legend, queuePoints} from '../chart.js';
import {h, fmtAge, fmtNum, clusterHref} from '../util.js';

const REFRESH_MS = 5000;
const HISTORY_MS = 30000;
export const CHART_HOURS = 6;

// Status of one cluster for one accelerator type, from its probe and breakers.
export function clusterStatus(c, type) {
  const open = (c.breakers || []).filter((b) => b.state === 'open' &&
    (b.key === c.name || b.key === `${c.name}/${type}`));
  if (!c.probe) return {text: 'not probed yet', cls: 'plain'};
  if (open.length) return {text: 'breaker open', cls: 'bad', breaker: open[0]};
  if (!c.probe.result.reachable) return {text: 'unreachable', cls: 'bad'};
  const q = c.probe.result.queue_depth;
  if (q !== null && q !== undefined && q > c.config.max_queue_depth) return {text: 'queue full', cls: 'warn'};
  return {text: 'reachable', cls: 'ok'};
}

// A probe is stale when it is older than twice its interval (next_probe_at - probed_at), or
// older than two minutes when the next probe time is not known.
export function probeStale(probe) {
  if (!probe) return false;
  const probedAt = Date.parse(probe.result.probed_at);
  const next = probe.next_probe_at ? Date.parse(probe.next_probe_at) : NaN;
  const interval = Number.isNaN(next) ? 60000 : Math.max(1000, next - probedAt);
  return probe.age_ms > Math.max(2 * interval, 30000);
}

function groupsOf(clusters) {
  const groups = new Map();
  for (const c of clusters) {
    for (const slot of c.config.accelerator_slots) {
      if (!groups.has(slot.type)) groups.set(slot.type, []);
      groups.get(slot.type).push({cluster: c, slot});
    }
  }
  // The types with the most clusters first (where a choice is made), then by name.
  return [...groups.entries()].sort((a, b) => b[1].length - a[1].length || a[0].localeCompare(b[0]));
}

const FIELDS = [
  ['status', 'Status'], ['queued', 'Queued'], ['running', 'Running'], ['max', 'Max queue'],
  ['capacity', 'Capacity'], ['priority', 'Priority'], ['age', 'Probe age'], ['failures', 'Failures in a row'], ['error', 'Error'],
];

function makeCard(name) {
  const dds = {};
  const dl = h('dl', {});
  for (const [key, label] of FIELDS) {
    dds[key] = h('dd', {dataset: {field: key}});
    dl.append(h('dt', {}, label), dds[key]);
  }
  const badge = h('span', {class: 'badge plain'});
  const card = h('article', {class: 'card', dataset: {cluster: name}, 'aria-label': `cluster ${name}`},
    h('h3', {}, h('a', {href: clusterHref(name)}, name), badge), dl);
  return {card, dds, badge};
}

function set(el, text) {
  if (el.textContent !== text) el.textContent = text;
}

// The slot's capacity as the selector counts it (the server's slot_capacity: free of nominal
// chips or GPUs, the largest free block), `not known` with why when the probe could not read
// the cluster's ClusterQueues, '—' when the probe does not read them (xpk backend).
function capacityText(c, slot, r) {
  if (r && r.capacity_error) return {text: `not known: ${r.capacity_error}`, cls: 'unknown', title: r.capacity_error};
  const cap = (c.slot_capacity || []).find((s) => s.type === slot.type);
  if (!cap) return {text: '—', cls: ''};
  const unit = slot.device_class === 'gpu' ? 'GPUs' : 'chips';
  const block = cap.largest_free_block == null ? '' : `, largest free block ${fmtNum(cap.largest_free_block)}`;
  return {text: `${fmtNum(cap.free_chips)} of ${fmtNum(cap.nominal_chips)} ${unit} free${block}`, cls: ''};
}

function updateCard(view, c, slot) {
  const st = clusterStatus(c, slot.type);
  const probe = c.probe;
  const r = probe ? probe.result : null;
  set(view.badge, st.text);
  view.badge.className = `badge ${st.cls}`;
  view.card.dataset.status = st.text;
  set(view.dds.status, st.breaker ? `${st.text} (${st.breaker.key}): ${st.breaker.summary || ''}` : st.text);
  set(view.dds.queued, r && r.queue_depth !== null && r.queue_depth !== undefined ? String(r.queue_depth) : '—');
  set(view.dds.running, r && r.running_count !== null && r.running_count !== undefined ? String(r.running_count) : '—');
  set(view.dds.max, String(c.config.max_queue_depth));
  const cap = capacityText(c, slot, r);
  set(view.dds.capacity, cap.text);
  view.dds.capacity.className = cap.cls;
  if (cap.title) view.dds.capacity.title = cap.title;
  else view.dds.capacity.removeAttribute('title');
  set(view.dds.priority, String(slot.priority));
  const stale = probeStale(probe);
  set(view.dds.age, probe ? `${fmtAge(probe.age_ms)}${stale ? ' (stale)' : ''}` : '—');
  view.dds.age.className = stale ? 'stale-note' : '';
  set(view.dds.failures, probe ? String(probe.consecutive_failures) : '—');
  // The card shows the error's first lines; the full text is its tooltip and on the cluster page.
  set(view.dds.error, r && r.error ? r.error : '—');
  view.dds.error.className = r && r.error ? 'err' : '';
  if (r && r.error) view.dds.error.title = r.error;
  else view.dds.error.removeAttribute('title');
}

export async function fleetPage(ctx) {
  const updated = h('p', {class: 'meta', 'aria-live': 'polite'}, 'Loading…');
  const body = h('div', {});
  ctx.main.append(h('h1', {}, 'Fleet'), updated, body);
  const views = new Map();  // `${type}|${cluster}` -> card view
  const charts = new Map(); // type -> {box, key}
  let lastOk = 0;
  let stopped = false;
  let clusters = [];

  async function refresh() {
    try {
      clusters = (await api('/v1/clusters')).clusters;
      lastOk = Date.now();
      body.classList.remove('stale');
      set(updated, `Updated ${new Date(lastOk).toISOString().slice(11, 19)} UTC; refreshes every ${REFRESH_MS / 1000} s.`);
      updated.className = 'meta';
    } catch (e) {
      body.classList.add('stale');
      set(updated, lastOk ? `Stale: last updated ${new Date(lastOk).toISOString().slice(11, 19)} UTC (${e.message})`
        : `Cannot load the clusters: ${e.message}`);
      updated.className = 'stale-note';
      return;
    }
    const groups = groupsOf(clusters);
    const seen = new Set();
    for (const [type, members] of groups) {
      let section = body.querySelector(`section[data-type="${CSS.escape(type)}"]`);
      if (!section) {
        const chartBox = h('div', {class: 'chart-box'});
        section = h('section', {class: 'group', dataset: {type}, 'aria-labelledby': `g-${type}`},
          h('h2', {id: `g-${type}`}, type), h('div', {class: 'group-body'}, h('div', {class: 'cards'}), chartBox));
        body.append(section);
        charts.set(type, {box: chartBox, key: ''});
      }
      const cards = section.querySelector('.cards');
      for (const {cluster, slot} of members) {
        const key = `${type}|${cluster.name}`;
        seen.add(key);
        let view = views.get(key);
        if (!view) {
          view = makeCard(cluster.name);
          views.set(key, view);
          cards.append(view.card);
        }
        updateCard(view, cluster, slot);
      }
    }
    for (const [key, view] of views) {
      if (!seen.has(key)) {
        view.card.remove();
        views.delete(key);
      }
    }
  }

  async function refreshHistory() {
    const to = Date.now();
    const from = to - CHART_HOURS * 3600 * 1000;
    const histories = new Map();
    await Promise.all(clusters.map(async (c) => {
      try {
        const d = await api(`/v1/clusters/${encodeURIComponent(c.name)}?since=${CHART_HOURS}h&limit=5000`);
        histories.set(c.name, d.history);
      } catch {
        // keep the chart as it was: the cards say what is wrong
      }
    }));
    for (const [type, members] of groupsOf(clusters)) {
      const chart = charts.get(type);
      if (!chart) continue;
      const series = members.filter(({cluster}) => histories.has(cluster.name))
        .map(({cluster}) => ({name: cluster.name, points: queuePoints(histories.get(cluster.name))}));
      const key = JSON.stringify(series.map((s) => [s.name, s.points.length, s.points.at(-1)?.t]));
      if (key === chart.key) continue;
      chart.key = key;
      const title = `${type}: queue depth per cluster, last ${CHART_HOURS} hours`;
      chart.box.replaceChildren(h('h3', {}, title),
        lineChart({title, series, from, to, yLabel: 'queued workloads'}), legend(series));
    }
  }

  await refresh();
  refreshHistory();
  const t1 = setInterval(() => !stopped && refresh(), REFRESH_MS);
  const t2 = setInterval(() => !stopped && refreshHistory(), HISTORY_MS);
  return () => {
    stopped = true;
    clearInterval(t1);
    clearInterval(t2);
  };
}
