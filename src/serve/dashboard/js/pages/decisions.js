// Decisions: the recorded selections, newest first; one decision with every candidate's
// signals, the policy's terms and why each candidate won, lost or was skipped.
import {api, query} from '../api.js';
import {h, fmtTime, fmtNum, table, clusterHref, field} from '../util.js';

export async function decisionsPage(ctx, params) {
  const acc = h('input', {id: 'd-accelerator', type: 'text', placeholder: 'any', value: params.get('accelerator') || ''});
  const form = h('form', {class: 'filters', role: 'search', 'aria-label': 'Filter decisions'},
    field('Accelerator type', acc), h('div', {}, h('button', {type: 'submit', class: 'primary'}, 'Apply')));
  const out = h('div', {});
  ctx.main.append(h('h1', {}, 'Decisions'), form, out);
  async function load() {
    try {
      const d = await api(`/v1/selections${query({limit: 100, summary: true, accelerator: acc.value.trim()})}`);
      out.replaceChildren(table(['Id', 'Decided', 'Accelerator', 'Policy', 'Selected', 'Reason'],
        d.selections.map((s) => h('tr', {},
          h('td', {}, h('a', {href: `#/decision/${s.selection_id}`}, `#${s.selection_id}`)),
          h('td', {}, fmtTime(s.decided_at)), h('td', {}, s.accelerator), h('td', {}, s.policy || 'priority'),
          h('td', {}, s.selected_cluster ? h('a', {href: clusterHref(s.selected_cluster)}, s.selected_cluster) : '—'),
          h('td', {}, s.reason))),
        {caption: `The newest ${d.selections.length} decisions`, empty: 'No decision recorded yet.'}));
    } catch (e) {
      out.replaceChildren(h('p', {class: 'err', role: 'alert'}, `${e.type}: ${e.message}`));
    }
  }
  form.addEventListener('submit', (ev) => {
    ev.preventDefault();
    history.replaceState(null, '', `#/decisions${query({accelerator: acc.value.trim()})}`);
    load();
  });
  await load();
}

const SIGNALS = [
  ['queue_depth', 'queued'], ['running', 'running'], ['drain_per_min', 'drain/min'],
  ['recent_wait_s', 'recent wait s'], ['admission_delay_s', 'admission delay s'], ['health', 'health'],
  ['latency_ms', 'probe ms'],
];

export async function decisionPage(ctx, id) {
  ctx.main.append(h('p', {class: 'meta'}, h('a', {href: '#/decisions'}, 'Decisions'), ` › #${id}`));
  let s;
  try {
    s = await api(`/v1/selections/${id}`);
  } catch (e) {
    ctx.main.append(h('h1', {}, `Decision #${id}`), h('p', {class: 'err', role: 'alert'}, `${e.type}: ${e.message}`));
    return;
  }
  const probes = new Map((s.probe_results || []).map((p) => [p.cluster, p]));
  const scores = s.scores || [];
  const rows = scores.map((c) => h('tr', {dataset: {cluster: c.cluster}},
    h('td', {}, h('a', {href: clusterHref(c.cluster)}, c.cluster)),
    h('td', {class: 'num'}, c.rank ? String(c.rank) : '—'),
    h('td', {class: 'num'}, String(c.priority)),
    SIGNALS.map(([key]) => h('td', {class: 'num'}, fmtNum(c.signals ? c.signals[key] : null))),
    h('td', {class: 'num'}, fmtNum(c.total)),
    h('td', {class: c.rank === 1 ? 'verdict-selected' : c.eligible ? '' : 'verdict-skipped'}, c.verdict)));
  const terms = scores.filter((c) => (c.terms || []).length).map((c) => h('details', {},
    h('summary', {}, `${c.cluster}: the policy's terms`),
    table(['Signal', 'Value', 'Normalized', 'Weight', 'Contribution'], c.terms.map((t) => h('tr', {},
      h('td', {}, t.signal), h('td', {class: 'num'}, fmtNum(t.value)), h('td', {class: 'num'}, fmtNum(t.normalized)),
      h('td', {class: 'num'}, fmtNum(t.weight)), h('td', {class: 'num'}, fmtNum(t.contribution, 3)))))));
  // Candidates without a score row (records older than scoring) still show their probe.
  const probeRows = s.candidates.map((name) => {
    const p = probes.get(name);
    return h('tr', {},
      h('td', {}, name), h('td', {}, p ? h('span', {class: `badge ${p.reachable ? 'ok' : 'bad'}`}, p.reachable ? 'reachable' : 'unreachable') : '—'),
      h('td', {class: 'num'}, p?.queue_depth ?? '—'), h('td', {class: 'num'}, p?.running_count ?? '—'),
      h('td', {}, fmtTime(p?.probed_at)), h('td', {class: 'err'}, p?.error || ''));
  });
  ctx.main.append(h('h1', {}, `Decision #${id}: ${s.accelerator}`),
    h('dl', {class: 'kv'},
      h('dt', {}, 'Decided'), h('dd', {}, fmtTime(s.decided_at)),
      h('dt', {}, 'Policy'), h('dd', {}, s.policy || 'priority'),
      h('dt', {}, 'Selected'), h('dd', {id: 'selected'}, s.selected_cluster || '—'),
      h('dt', {}, 'Reason'), h('dd', {}, s.reason)),
    h('h2', {}, 'Candidates and why each lost'),
    table(['Cluster', 'Rank', 'Priority', ...SIGNALS.map(([, label]) => ({text: label, class: 'num'})), {text: 'Total', class: 'num'}, 'Verdict'],
      rows, {empty: 'This record has no scores (it predates scoring); the probes below decided it.'}),
    h('div', {}, terms.length ? h('h2', {}, 'Terms of the policy') : null, terms),
    h('h2', {}, 'Probes the decision used'),
    table(['Cluster', 'Result', 'Queued', 'Running', 'Probed at', 'Error'], probeRows));
}
