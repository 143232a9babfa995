// A small hand-written SVG line chart: time on x, a count on y, one line per series, and
// marks along the bottom for failed probes. Accessible: role=img with a title and a summary.

const NS = 'http://www.w3.org/2000/svg';
// Distinguishable on white (contrast >= 3:1 for graphics) and for common colour blindness.
export const PALETTE = ['#0b57d0', '#c2410c', '#15803d', '#7e22ce', '#0e7490', '#a16207', '#be185d', '#4d7c0f'];

function s(tag, attrs = {}, text) {
  const el = document.createElementNS(NS, tag);
  for (const [k, v] of Object.entries(attrs)) el.setAttribute(k, String(v));
  if (text !== undefined) el.textContent = text;
  return el;
}

function niceMax(v) {
  if (v <= 4) return 4;
  const p = 10 ** Math.floor(Math.log10(v));
  for (const m of [1, 2, 2.5, 5, 10]) if (m * p >= v) return m * p;
  return v;
}

function hhmm(t) {
  const d = new Date(t);
  return `${String(d.getUTCHours()).padStart(2, '0')}:${String(d.getUTCMinutes()).padStart(2, '0')}`;
}

// series: [{name, color, points: [{t: ms, v: number|null, ok: bool}]}]; from/to in ms.
export function lineChart({title, series, from, to, width = 640, height = 180, yLabel = ''}) {
  const pad = {l: 36, r: 22, t: 10, b: 34};
  const w = width - pad.l - pad.r;
  const hgt = height - pad.t - pad.b;
  let max = 0;
  for (const sr of series) for (const p of sr.points) if (p.v !== null && p.v > max) max = p.v;
  max = niceMax(max);
  const x = (t) => pad.l + ((t - from) / Math.max(1, to - from)) * w;
  const y = (v) => pad.t + hgt - (v / max) * hgt;

  const svg = s('svg', {viewBox: `0 0 ${width} ${height}`, class: 'chart', role: 'img',
    preserveAspectRatio: 'xMidYMid meet'});
  const failures = series.reduce((n, sr) => n + sr.points.filter((p) => !p.ok).length, 0);
  svg.append(s('title', {}, title));
  svg.append(s('desc', {}, `${series.length} series from ${hhmm(from)} to ${hhmm(to)} UTC, ` +
    `maximum ${yLabel} ${max}; ${failures} failed probes marked along the bottom`));

  for (let i = 0; i <= 4; i++) {
    const v = (max / 4) * i;
    svg.append(s('line', {class: 'grid', x1: pad.l, x2: pad.l + w, y1: y(v), y2: y(v)}));
    svg.append(s('text', {x: pad.l - 6, y: y(v) + 4, 'text-anchor': 'end'}, String(Math.round(v * 10) / 10)));
  }
  const ticks = 6;
  for (let i = 0; i <= ticks; i++) {
    const t = from + ((to - from) / ticks) * i;
    const anchor = i === 0 ? 'start' : i === ticks ? 'end' : 'middle';
    svg.append(s('text', {x: x(t), y: height - 18, 'text-anchor': anchor}, hhmm(t)));
  }
  svg.append(s('text', {x: pad.l, y: height - 3}, `${yLabel} (UTC)`));

  series.forEach((sr, i) => {
    const color = sr.color || PALETTE[i % PALETTE.length];
    let d = '';
    let pen = false;
    for (const p of sr.points) {
      if (p.v === null || p.v === undefined) {
        pen = false;
        continue;
      }
      d += `${pen ? 'L' : 'M'}${x(p.t).toFixed(1)},${y(p.v).toFixed(1)}`;
      pen = true;
    }
    if (d) svg.append(s('path', {d, fill: 'none', stroke: color, 'stroke-width': 2, 'stroke-linejoin': 'round'}));
    // Failed probes: a red tick at the bottom, in this series' row.
    const row = pad.t + hgt - 2 - (i % 3) * 4;
    for (const p of sr.points) {
      if (p.ok) continue;
      svg.append(s('rect', {x: x(p.t) - 1.5, y: row - 3, width: 3, height: 6, fill: '#b3261e'}));
    }
  });
  return svg;
}

export function legend(series) {
  const ul = document.createElement('ul');
  ul.className = 'legend';
  series.forEach((sr, i) => {
    const li = document.createElement('li');
    const sw = document.createElement('span');
    sw.className = 'swatch';
    sw.style.background = sr.color || PALETTE[i % PALETTE.length];
    li.append(sw, document.createTextNode(sr.name));
    ul.append(li);
  });
  const li = document.createElement('li');
  const sw = document.createElement('span');
  sw.className = 'swatch';
  sw.style.background = '#b3261e';
  li.append(sw, document.createTextNode('failed probe'));
  ul.append(li);
  return ul;
}

// Probe history records (GET /v1/clusters/{name}) as chart points of queue depth.
export function queuePoints(history) {
  return history.map((p) => ({
    t: Date.parse(p.result.probed_at),
    v: p.result.reachable ? (p.result.queue_depth ?? null) : null,
    ok: p.result.reachable,
  }));
}
