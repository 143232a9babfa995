// Workload: state timeline, times and exit code; recoveries (when the server has the route);
// a per-rank log viewer (rank and slice pickers, grep on the server, tail, live follow over the
// API's stream); export to a bucket with progress; cancel (operate role, confirmed).
import {api, query, stream} from '../api.js';
import {confirmAction} from '../dialog.js';
import {h, fill, fmtTime, stateBadge, table, clusterHref, field} from '../util.js';

const MAX_LINES = 20000;  // the viewer keeps the newest lines; older ones are dropped

function phaseRows(r) {
  const phases = ['t_violation', 'detected', 'decided', 'submitted', 'admitted', 'recovered'];
  const t0 = r.t_violation ? Date.parse(r.t_violation) : null;
  return phases.map((p) => h('tr', {},
    h('td', {}, p), h('td', {}, fmtTime(r[p])),
    h('td', {class: 'num'}, r[p] && t0 !== null ? `+${((Date.parse(r[p]) - t0) / 1000).toFixed(1)} s` : '—')));
}

let openapi = null;

// True when this server documents `path` (GET /v1/openapi.json, fetched once): a route another
// version adds is used only where it exists, without a 404 in the console.
async function hasRoute(path) {
  if (!openapi) openapi = api('/v1/openapi.json').catch(() => ({paths: {}}));
  return Object.hasOwn((await openapi).paths || {}, path);
}

async function recoveriesSection(name) {
  if (!(await hasRoute('/v1/recoveries'))) return null;
  let d;
  try {
    d = await api(`/v1/recoveries${query({workload: name, limit: 50})}`);
  } catch (e) {
    return h('section', {}, h('h2', {}, 'Recoveries'), h('p', {class: 'err'}, e.message));
  }
  const list = d.recoveries || [];
  return h('section', {id: 'recoveries'}, h('h2', {}, 'Recoveries'),
    list.length ? list.map((r) => h('details', {open: true},
      h('summary', {}, `${r.incident_id}: ${r.outcome}, ${r.classification || 'unclassified'}, ${r.attempts} attempts on ${r.cluster}`,
        r.t_violation && r.recovered ? `, SVRT ${((Date.parse(r.recovered) - Date.parse(r.t_violation)) / 1000).toFixed(1)} s` : ''),
      table(['Phase', 'At', 'Since violation'], phaseRows(r))))
      : h('p', {class: 'empty'}, 'No recovery incidents.'));
}

// The log viewer. Lines are appended in one text node per animation frame (a burst of
// thousands costs one layout), and the oldest are dropped past MAX_LINES.
function logViewer(ctx, cluster, name) {
  const rank = h('input', {id: 'log-rank', type: 'number', min: 0, value: 0});
  const slice = h('input', {id: 'log-slice', type: 'number', min: 0, value: 0});
  const grep = h('input', {id: 'log-grep', type: 'text', size: 28,
    placeholder: 'Cloud Logging filter: textPayload:"loss"'});
  const tail = h('input', {id: 'log-tail', type: 'number', min: 1, value: 200});
  const show = h('button', {type: 'submit', class: 'primary', id: 'log-show'}, 'Show');
  const follow = h('button', {type: 'button', id: 'log-follow', 'aria-pressed': 'false'}, 'Follow');
  const status = h('span', {class: 'meta', id: 'log-status', 'aria-live': 'polite'});
  const pre = h('pre', {class: 'log', id: 'log', tabindex: 0, 'aria-label': 'log lines'});
  let controller = null;
  let pending = [];
  let chunks = [];  // [textNode, lineCount]
  let lines = 0;
  let frame = 0;
  let timer = 0;

  function flush() {
    cancelAnimationFrame(frame);
    clearTimeout(timer);
    frame = 0;
    timer = 0;
    if (!pending.length) return;
    const atBottom = pre.scrollHeight - pre.scrollTop - pre.clientHeight < 40;
    const node = document.createTextNode(pending.join(''));
    chunks.push([node, pending.length]);
    lines += pending.length;
    pending = [];
    pre.append(node);
    while (lines > MAX_LINES && chunks.length > 1) {
      const [old, n] = chunks.shift();
      old.remove();
      lines -= n;
    }
    pre.dataset.lines = String(lines);
    if (atBottom) pre.scrollTop = pre.scrollHeight;
  }
  function push(line) {
    pending.push(`${line}\n`);
    // At the next frame, or within 100 ms where frames do not come (a hidden tab).
    if (!frame) {
      frame = requestAnimationFrame(flush);
      timer = setTimeout(flush, 100);
    }
  }
  function clear() {
    pre.replaceChildren();
    chunks = [];
    pending = [];
    lines = 0;
    pre.dataset.lines = '0';
  }
  function stop() {
    if (controller) controller.abort();
    controller = null;
    follow.textContent = 'Follow';
    follow.setAttribute('aria-pressed', 'false');
  }

  async function run(followMode) {
    stop();
    clear();
    controller = new AbortController();
    const mine = controller;
    const params = {rank: rank.value || 0, slice: slice.value || 0, grep: grep.value.trim()};
    if (followMode) {
      // Server-sent events: one event per line, never compressed.
      params.follow = true;
      params.format = 'sse';
      follow.textContent = 'Stop following';
      follow.setAttribute('aria-pressed', 'true');
    } else if (tail.value) {
      params.tail = tail.value;
    }
    status.textContent = followMode ? 'Following…' : 'Loading…';
    try {
      const res = await stream(`/v1/workloads/${encodeURIComponent(cluster)}/${encodeURIComponent(name)}/logs${query(params)}`, mine.signal);
      const reader = res.body.pipeThrough(new TextDecoderStream()).getReader();
      let rest = '';
      let event = '';
      let failure = '';
      for (;;) {
        const {value, done} = await reader.read();
        if (done) break;
        const parts = (rest + value).split('\n');
        rest = parts.pop();
        for (const p of parts) {
          if (!followMode) {
            push(p);
          } else if (p.startsWith('event: ')) {
            event = p.slice(7);
          } else if (p.startsWith('data: ')) {
            if (event === 'error') {
              try {
                failure = JSON.parse(p.slice(6)).message;
              } catch {
                failure = p.slice(6);
              }
            } else {
              push(p.slice(6));
            }
          } else if (p === '') {
            event = '';
          }
        }
      }
      if (rest && !followMode) push(rest);
      flush();
      if (failure) throw new Error(`the stream failed: ${failure}`);
      status.textContent = followMode ? `The stream ended (the workload finished); ${lines} lines.` : `${lines} lines.`;
    } catch (e) {
      if (e.name === 'AbortError') {
        flush();
        status.textContent = `Stopped; ${lines} lines.`;
      } else {
        status.textContent = `${e.type || 'Error'}: ${e.message}`;
      }
    } finally {
      if (controller === mine) stop();
    }
  }

  const form = h('form', {class: 'logs-controls', 'aria-label': 'Log viewer'},
    field('Rank', rank), field('Slice', slice), field('Grep', grep), field('Tail lines', tail),
    h('div', {}, show), h('div', {}, follow));
  form.addEventListener('submit', (ev) => {
    ev.preventDefault();
    run(false);
  });
  follow.addEventListener('click', () => (controller && follow.getAttribute('aria-pressed') === 'true' ? stop() : run(true)));
  const section = h('section', {id: 'logs'}, h('h2', {}, 'Logs'), form, status, pre);
  return {section, stop, run};
}

function exportSection(ctx, cluster, name, bucket) {
  const dest = h('input', {id: 'export-dest', type: 'text', size: 44,
    value: bucket ? `${bucket.replace(/\/$/, '')}/${name}/` : 'gs://'});
  const start = h('button', {type: 'submit', id: 'export-start', disabled: !ctx.canOperate()}, 'Export all ranks');
  const note = ctx.canOperate() ? null : h('p', {class: 'meta'}, 'Exporting needs a token with the operate role.');
  const out = h('div', {id: 'export-progress', 'aria-live': 'polite'});
  let timer = 0;
  const form = h('form', {class: 'logs-controls', 'aria-label': 'Export logs'}, field('Destination (gs://bucket/prefix/)', dest), h('div', {}, start));
  form.addEventListener('submit', async (ev) => {
    ev.preventDefault();
    clearTimeout(timer);
    out.replaceChildren(h('p', {}, 'Starting…'));
    let id;
    try {
      id = (await api('/v1/exports', {method: 'POST', body: {cluster, workload: name, dest: dest.value.trim()}})).id;
    } catch (e) {
      out.replaceChildren(h('p', {class: 'err', role: 'alert'}, `${e.type}: ${e.message}`));
      return;
    }
    const poll = async () => {
      let x;
      try {
        x = await api(`/v1/exports/${id}`);
      } catch (e) {
        out.replaceChildren(h('p', {class: 'err'}, e.message));
        return;
      }
      const ranks = Object.entries(x.progress || {});
      const done = ranks.filter(([, p]) => p.done).length;
      const bytes = ranks.reduce((n, [, p]) => n + (p.bytes || 0), 0);
      const linesN = ranks.reduce((n, [, p]) => n + (p.lines || 0), 0);
      const step = x.state === 'queued'
        ? `waiting for the server's running exports (place ${x.queue_position ?? '?'})`
        : x.status ? `${x.status.message}${x.status.percent !== undefined ? ` (${x.status.percent}%)` : ''}` : null;
      fill(out,
        h('p', {}, `Export ${id}: `, h('span', {class: `badge ${x.state === 'done' ? 'ok' : x.state === 'failed' ? 'bad' : 'warn'}`, id: 'export-state'}, x.state),
          ` ${done}/${ranks.length} ranks, ${linesN} lines, ${bytes} bytes`),
        step ? h('p', {class: 'meta', id: 'export-step'}, step) : null,
        h('progress', {max: Math.max(1, ranks.length), value: x.state === 'done' ? Math.max(1, ranks.length) : done, 'aria-label': 'ranks exported'}),
        x.state === 'failed' ? h('p', {class: 'err'}, x.result?.error?.message || 'failed') : null,
        x.state === 'done' && x.result ? h('p', {class: 'meta'}, `Written to ${x.dest}`) : null);
      if (x.state === 'running' || x.state === 'queued') timer = setTimeout(poll, 500);
    };
    poll();
  });
  return {section: h('section', {id: 'export'}, h('h2', {}, 'Export to a bucket'), note, form, out), stop: () => clearTimeout(timer)};
}

export async function workloadPage(ctx, cluster, name) {
  await ctx.roleKnown;  // cancel and export depend on the token's role
  const head = h('div', {});
  const statusBox = h('section', {id: 'status', 'aria-label': 'status'});
  statusBox.append('Loading…');
  const timelineBox = h('section', {id: 'timeline'}, h('h2', {}, 'State timeline'));
  const recBox = h('div', {});
  const cancel = h('button', {type: 'button', class: 'danger', id: 'cancel', disabled: !ctx.canOperate()}, 'Cancel workload');
  const cancelOut = h('span', {class: 'meta', id: 'cancel-result', 'aria-live': 'polite'});
  ctx.main.append(
    h('p', {class: 'meta'}, h('a', {href: '#/workloads'}, 'Workloads'), ' › ', h('a', {href: clusterHref(cluster)}, cluster)),
    h('h1', {}, name), head,
    h('div', {class: 'pager'}, cancel, ctx.canOperate() ? null : h('span', {class: 'meta'}, 'Cancelling needs a token with the operate role.'), cancelOut),
    h('div', {class: 'row'}, statusBox, timelineBox), recBox);

  const sub = api(`/v1/workloads${query({cluster, name, limit: 100})}`)
    .then((d) => d.workloads.find((r) => r.handle.workload_name === name) || null).catch(() => null);
  let bucket = '';
  try {
    bucket = (await api(`/v1/clusters/${encodeURIComponent(cluster)}`)).config.gcs_bucket;
  } catch {
    // the export form then starts from gs://
  }
  const logs = logViewer(ctx, cluster, name);
  const exp = exportSection(ctx, cluster, name, bucket);
  ctx.main.append(logs.section, exp.section);

  async function loadStatus() {
    const submission = await sub;
    let d = null;
    let err = null;
    try {
      d = await api(`/v1/workloads/${encodeURIComponent(cluster)}/${encodeURIComponent(name)}`);
    } catch (e) {
      err = e;
    }
    let events = d ? d.events : [];
    if (!d) {
      try {
        events = (await api(`/v1/workloads/${encodeURIComponent(cluster)}/${encodeURIComponent(name)}/events`)).events;
      } catch {
        events = [];
      }
    }
    const st = d ? d.status : null;
    head.replaceChildren(h('p', {}, stateBadge(st ? st.state : submission?.state),
      ' on ', h('a', {href: clusterHref(cluster)}, cluster),
      submission ? ` · ${submission.accelerator_type} · ${submission.docker_image}` : ''));
    fill(statusBox, h('h2', {}, 'Status'),
      err ? h('p', {class: 'err', role: 'alert'}, `The cluster could not be asked: ${err.type}: ${err.message}`) : null,
      h('dl', {class: 'kv'},
        h('dt', {}, 'State'), h('dd', {id: 'wl-state'}, st ? st.state : (submission?.state || '—')),
        h('dt', {}, 'Submitted'), h('dd', {}, fmtTime(submission?.handle.submitted_at)),
        h('dt', {}, 'Started'), h('dd', {}, fmtTime(st?.start_time)),
        h('dt', {}, 'Ended'), h('dd', {}, fmtTime(st?.end_time)),
        h('dt', {}, 'Exit code'), h('dd', {id: 'wl-exit'}, st && st.exit_code !== null && st.exit_code !== undefined ? String(st.exit_code) : '—'),
        h('dt', {}, 'Priority'), h('dd', {}, submission?.priority || '—'),
        h('dt', {}, 'Command'), h('dd', {}, submission?.spec ? submission.spec.command.join(' ') : '—')));
    const items = [];
    if (submission) items.push(['submitted', submission.handle.submitted_at, `to ${cluster}`]);
    for (const e of events) items.push([e.state, e.observed_at, e.detail]);
    if (st?.start_time) items.push(['started', st.start_time, '']);
    if (st?.end_time) items.push(['ended', st.end_time, st.exit_code !== null && st.exit_code !== undefined ? `exit code ${st.exit_code}` : '']);
    items.sort((a, b) => Date.parse(a[1]) - Date.parse(b[1]));
    fill(timelineBox, h('h2', {}, 'State timeline'), items.length
      ? h('ol', {class: 'timeline'}, items.map(([what, at, detail]) => h('li', {},
        h('strong', {}, what), ' ', h('time', {datetime: at}, fmtTime(at)), detail ? h('div', {class: 'meta'}, detail) : null)))
      : h('p', {class: 'empty'}, 'No state recorded yet.'));
    return st;
  }

  cancel.addEventListener('click', async () => {
    if (!(await confirmAction(`Cancel ${name} on ${cluster}? xpk deletes the workload and its pods.`, 'Cancel workload'))) return;
    cancel.disabled = true;
    cancelOut.textContent = 'Cancelling…';
    try {
      const r = await api(`/v1/workloads/${encodeURIComponent(cluster)}/${encodeURIComponent(name)}`, {method: 'DELETE'});
      cancelOut.textContent = r.cancelled ? 'Cancelled.' : 'Nothing to cancel (it had finished).';
      loadStatus();
    } catch (e) {
      cancelOut.textContent = `${e.type}: ${e.message}`;
      cancel.disabled = !ctx.canOperate();
    }
  });

  await loadStatus();
  const rec = await recoveriesSection(name);
  if (rec) recBox.replaceChildren(rec);
  const timer = setInterval(loadStatus, 10000);
  return () => {
    clearInterval(timer);
    logs.stop();
    exp.stop();
  };
}
