// Which recorded decision chose a submission's cluster. A submission row does not carry its
// selection's id, so it is matched: the newest decision for the same accelerator type that
// chose the same cluster at most MATCH_WINDOW_MS before the submission (POST /v1/workloads
// without a cluster selects and submits within that). None: the cluster was given.
import {api, query} from './api.js';

const MATCH_WINDOW_MS = 120000;

function sameType(a, b) {
  const norm = (t) => String(t || '').replace(/^tpu-/, '');
  return norm(a) === norm(b);
}

// rows: submissions (GET /v1/workloads). Returns Map<submission id, selection>.
export async function matchSelections(rows) {
  const types = [...new Set(rows.map((r) => r.accelerator_type))];
  const byType = new Map();
  // Decisions are stored under the spelling they were asked with ("tpu-v4-64" or "v4-64").
  const spellings = (t) => [...new Set([t, t.startsWith('tpu-') ? t.slice(4) : `tpu-${t}`])];
  await Promise.all(types.map(async (t) => {
    const lists = await Promise.all(spellings(t).map((s) =>
      api(`/v1/selections${query({accelerator: s, limit: 200})}`).then((d) => d.selections).catch(() => [])));
    byType.set(t, lists.flat());
  }));
  const out = new Map();
  for (const r of rows) {
    const submitted = Date.parse(r.handle.submitted_at);
    let best = null;
    for (const s of byType.get(r.accelerator_type) || []) {
      if (s.selected_cluster !== r.handle.cluster || !sameType(s.accelerator, r.accelerator_type)) continue;
      const decided = Date.parse(s.decided_at);
      if (decided > submitted + 1000 || submitted - decided > MATCH_WINDOW_MS) continue;
      if (!best || decided > Date.parse(best.decided_at)) best = s;
    }
    if (best) out.set(r.id, best);
  }
  return out;
}
