// Cluster: its configuration and status (with its capacity when the probe reads it, or why it
// cannot), its circuit breakers, its probe history (chart and table, errors in full), and its
// workloads.
import {api, query} from '../api.js';
import {lineChart, legend, queuePoints} from '../chart.js';
import {h, fmtAge, fmtNum, fmtTime, stateBadge, table, workloadHref} from '../util.js';
import {clusterStatus, probeStale} from './fleet.js';

const HOURS_CHOICES = [1, 6, 24, 72];

// What the probe read of the cluster's ClusterQueues (kube backend): free of nominal per flavor
// and the largest free block, or why it could not read them. Nothing for a probe that does not
// read them (xpk backend, an unreachable cluster).
function capacityRows(result) {
  if (result.capacity_error) {
    return [h('dt', {}, 'Capacity'), h('dd', {id: 'capacity'},
      h('span', {class: 'badge warn'}, 'not known'), ' ', result.capacity_error)];
  }
  if (!result.capacity || !result.capacity.length) return null;
  return [h('dt', {}, 'Capacity'), h('dd', {id: 'capacity'}, result.capacity.map((c) => {
    const unit = c.resource === 'nvidia.com/gpu' ? 'GPUs' : 'chips';
    const block = c.largest_free_block == null ? '' : `, largest free block ${fmtNum(c.largest_free_block)}`;
    return h('div', {dataset: {flavor: c.flavor}},
      `${c.device_type || c.flavor}: ${fmtNum(c.nominal - c.used)} of ${fmtNum(c.nominal)} ${unit} free${block}`);
  }))];
}

export async function clusterPage(ctx, name) {
  const hoursSel = h('select', {id: 'hours'},
    HOURS_CHOICES.map((n) => h('option', {value: n, selected: n === 6}, `last ${n} h`)));
  const summary = h('div', {});
  const chartBox = h('div', {});
  const historyBox = h('div', {});
  const workloadsBox = h('div', {});
  ctx.main.append(
    h('p', {class: 'meta'}, h('a', {href: '#/fleet'}, 'Fleet'), ' › cluster'),
    h('h1', {}, name), summary,
    h('h2', {}, 'Probe history'),
    h('div', {class: 'filters'}, h('div', {}, h('label', {for: 'hours'}, 'Period'), hoursSel)),
    chartBox, historyBox,
    h('h2', {}, 'Workloads'), workloadsBox);

  async function load() {
    const hours = Number(hoursSel.value);
    let d;
    try {
      d = await api(`/v1/clusters/${encodeURIComponent(name)}${query({since: `${hours}h`, limit: 5000})}`);
    } catch (e) {
      summary.replaceChildren(h('p', {class: 'err', role: 'alert'}, `${e.type}: ${e.message}`));
      return;
    }
    const probe = d.probe;
    const slots = d.config.accelerator_slots || [];
    summary.replaceChildren(h('div', {class: 'row'},
      h('section', {'aria-label': 'status'}, h('dl', {class: 'kv'},
        h('dt', {}, 'Status'), h('dd', {}, slots.length
          ? slots.map((s) => {
            const st = clusterStatus(d, s.type);
            return h('span', {}, h('span', {class: `badge ${st.cls}`, dataset: {status: st.text}}, st.text), ` ${s.type} (priority ${s.priority}) `);
          }) : '—'),
        h('dt', {}, 'Queued / running'), h('dd', {}, probe ? `${probe.result.queue_depth ?? '—'} / ${probe.result.running_count ?? '—'}` : '—'),
        h('dt', {}, 'Max queue'), h('dd', {}, String(d.config.max_queue_depth)),
        h('dt', {}, 'Probe'), h('dd', {}, probe
          ? `${fmtTime(probe.result.probed_at)}, ${fmtAge(probe.age_ms)} old${probeStale(probe) ? ' (stale)' : ''}, ${probe.backend}, ${probe.duration_ms} ms`
          : 'not probed yet'),
        probe && probe.result.error ? [h('dt', {}, 'Error'), h('dd', {class: 'err'}, probe.result.error)] : null,
        probe ? capacityRows(probe.result) : null)),
      h('section', {'aria-label': 'configuration'}, h('dl', {class: 'kv'},
        h('dt', {}, 'Project'), h('dd', {}, d.config.project),
        h('dt', {}, 'Zone'), h('dd', {}, d.config.zone),
        h('dt', {}, 'GKE cluster'), h('dd', {}, d.config.cluster_id),
        h('dt', {}, 'Bucket'), h('dd', {}, d.config.gcs_bucket || '—'))),
    ), h('h2', {}, 'Circuit breakers'), table(['Key', 'State', 'Failures', 'Trips', 'Open until', 'Summary'],
      (d.breakers || []).map((b) => h('tr', {},
        h('td', {}, b.key), h('td', {}, h('span', {class: `badge ${b.state === 'open' ? 'bad' : b.state === 'closed' ? 'ok' : 'warn'}`}, b.state)),
        h('td', {class: 'num'}, String(b.consecutive_failures)), h('td', {class: 'num'}, String(b.trips)),
        h('td', {}, fmtTime(b.opened_until)), h('td', {}, b.summary || ''))),
      {empty: 'No circuit breakers recorded.'}));

    const to = Date.now();
    const from = to - hours * 3600 * 1000;
    const series = [{name, points: queuePoints(d.history)}];
    const title = `${name}: queue depth, last ${hours} hours`;
    chartBox.replaceChildren(lineChart({title, series, from, to, yLabel: 'queued workloads'}), legend(series));
    const rows = [...d.history].reverse().map((p) => h('tr', {class: p.result.reachable ? '' : 'failed'},
      h('td', {}, fmtTime(p.result.probed_at)),
      h('td', {}, h('span', {class: `badge ${p.result.reachable ? 'ok' : 'bad'}`}, p.result.reachable ? 'reachable' : 'unreachable')),
      h('td', {class: 'num'}, p.result.queue_depth ?? '—'), h('td', {class: 'num'}, p.result.running_count ?? '—'),
      h('td', {class: 'num'}, String(p.duration_ms)), h('td', {}, p.backend),
      h('td', {class: 'err'}, p.result.error || '')));
    historyBox.replaceChildren(table(['Probed at', 'Result', 'Queued', 'Running', 'ms', 'Backend', 'Error'], rows,
      {caption: `${d.history.length} probes since ${fmtTime(d.history_since)}, newest first`, empty: 'No probes in this period.'}));

    try {
      const w = await api(`/v1/workloads${query({cluster: name, limit: 50, total: true})}`);
      workloadsBox.replaceChildren(
        h('p', {class: 'meta'}, `${w.total} submitted through falcon; the newest ${w.workloads.length}. `,
          h('a', {href: `#/workloads?cluster=${encodeURIComponent(name)}`}, 'All with filters')),
        table(['Workload', 'State', 'Accelerator', 'Submitted'], w.workloads.map((r) => h('tr', {},
          h('td', {}, h('a', {href: workloadHref(r.handle.cluster, r.handle.workload_name)}, r.handle.workload_name)),
          h('td', {}, stateBadge(r.state)), h('td', {}, r.accelerator_type), h('td', {}, fmtTime(r.handle.submitted_at)))),
        {empty: 'No workloads submitted to this cluster.'}));
    } catch (e) {
      workloadsBox.replaceChildren(h('p', {class: 'err'}, e.message));
    }
  }
  hoursSel.addEventListener('change', load);
  await load();
  const timer = setInterval(load, 15000);
  return () => clearInterval(timer);
}
