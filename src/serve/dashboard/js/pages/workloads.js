// Workloads: the submissions in the state store, filtered by cluster, state, name and time,
// paginated on the server (keyset cursor, with the total), each with its cluster and the
// decision that chose it.
import {api, query} from '../api.js';
import {h, fill, fmtTime, stateBadge, table, workloadHref, clusterHref, field} from '../util.js';

const STATES = ['', 'QUEUED', 'RUNNING', 'COMPLETED', 'FAILED', 'UNKNOWN'];
const PAGE_SIZES = [25, 50, 100, 200];

export async function workloadsPage(ctx, params) {
  const f = {
    cluster: h('select', {id: 'f-cluster'}, h('option', {value: ''}, 'any')),
    state: h('select', {id: 'f-state'}, STATES.map((s) => h('option', {value: s}, s || 'any'))),
    name: h('input', {id: 'f-name', type: 'search', placeholder: 'substring'}),
    from: h('input', {id: 'f-from', type: 'text', placeholder: '6h or 2026-05-01T00:00:00Z', size: 22}),
    before: h('input', {id: 'f-before', type: 'text', placeholder: 'age or RFC 3339', size: 22}),
    limit: h('select', {id: 'f-limit'}, PAGE_SIZES.map((n) => h('option', {value: n}, String(n)))),
  };
  for (const key of ['cluster', 'state', 'name', 'from', 'before', 'limit']) {
    if (params.get(key)) {
      if (key === 'cluster') f.cluster.append(h('option', {value: params.get(key)}, params.get(key)));
      f[key].value = params.get(key);
    }
  }
  if (!params.get('limit')) f.limit.value = '50';
  const form = h('form', {class: 'filters', role: 'search', 'aria-label': 'Filter workloads'},
    field('Cluster', f.cluster), field('State', f.state), field('Name contains', f.name),
    field('Submitted from', f.from), field('Submitted before', f.before), field('Per page', f.limit),
    h('div', {}, h('button', {type: 'submit', class: 'primary'}, 'Apply')));
  const info = h('p', {class: 'meta', id: 'page-info', 'aria-live': 'polite'});
  const prev = h('button', {type: 'button', id: 'prev'}, '‹ Newer');
  const next = h('button', {type: 'button', id: 'next'}, 'Older ›');
  const results = h('div', {id: 'results'});
  ctx.main.append(h('h1', {}, 'Workloads'), form, h('div', {class: 'pager'}, prev, next, info), results);

  // The cluster picker's choices: asked for after the first page is on screen.
  const fillClusters = () => api('/v1/clusters').then((d) => {
    const current = f.cluster.value;
    fill(f.cluster, h('option', {value: ''}, 'any'),
      d.clusters.map((c) => h('option', {value: c.name, selected: c.name === current}, c.name)));
  }).catch(() => {});

  const cursors = [''];  // cursors[i]: the cursor of page i
  let pageIndex = 0;
  let generation = 0;

  function filters() {
    return {cluster: f.cluster.value, state: f.state.value, name: f.name.value.trim(),
      from: f.from.value.trim(), before: f.before.value.trim(), limit: f.limit.value};
  }

  async function load() {
    const mine = ++generation;
    const started = performance.now();
    const q = {...filters(), cursor: cursors[pageIndex], total: true};
    let d;
    try {
      d = await api(`/v1/workloads${query(q)}`);
    } catch (e) {
      if (mine !== generation) return;
      results.replaceChildren(h('p', {class: 'err', role: 'alert'}, `${e.type}: ${e.message}`));
      info.textContent = '';
      return;
    }
    if (mine !== generation) return;
    cursors[pageIndex + 1] = d.next_cursor || null;
    const limit = Number(q.limit);
    const first = pageIndex * limit + 1;
    info.textContent = d.total === 0 ? 'No workload matches.'
      : `${first}–${first + d.workloads.length - 1} of ${d.total}`;
    prev.disabled = pageIndex === 0;
    next.disabled = !d.next_cursor;
    const rows = d.workloads.map((r) => {
      // The decision that chose the cluster (submissions.selection_id); none: it was given.
      const why = h('td', {class: 'why'}, r.selection_id
        ? h('a', {href: `#/decision/${r.selection_id}`, title: 'why this cluster: every candidate and its verdict'},
          `selection ${r.selection_id}`)
        : h('span', {class: 'meta'}, 'cluster given (no decision)'));
      return h('tr', {dataset: {workload: r.handle.workload_name}},
        h('td', {}, h('a', {href: workloadHref(r.handle.cluster, r.handle.workload_name)}, r.handle.workload_name)),
        h('td', {}, h('a', {href: clusterHref(r.handle.cluster)}, r.handle.cluster)),
        h('td', {}, stateBadge(r.state)),
        h('td', {class: 'hide-narrow'}, r.accelerator_type),
        h('td', {}, fmtTime(r.handle.submitted_at)),
        why);
    });
    results.replaceChildren(table(['Workload', 'Cluster', 'State', {text: 'Accelerator', class: 'hide-narrow'},
      'Submitted', 'Why this cluster'], rows, {empty: 'No workload matches these filters.'}));
    // For the browser test's performance check: this request and render, and since navigation.
    results.dataset.renderMs = String(Math.round(performance.now() - started));
    results.dataset.doneAt = String(Math.round(performance.now()));
    results.dataset.loaded = String(mine);
  }

  form.addEventListener('submit', (ev) => {
    ev.preventDefault();
    const q = query(filters());
    cursors.length = 1;
    pageIndex = 0;
    if (location.hash !== `#/workloads${q}`) history.replaceState(null, '', `#/workloads${q}`);
    load();
  });
  prev.addEventListener('click', () => {
    if (pageIndex > 0) {
      pageIndex -= 1;
      load();
    }
  });
  next.addEventListener('click', () => {
    if (cursors[pageIndex + 1]) {
      pageIndex += 1;
      load();
    }
  });
  await load();
  fillClusters();
  return () => {
    generation += 1;
  };
}
