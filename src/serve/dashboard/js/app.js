// The dashboard: hash routes, the token form, the caller's role, and each page's lifecycle
// (a page returns a function that stops its timers and streams when the user leaves it).
import {api, setToken, token} from './api.js';
import {fleetPage} from './pages/fleet.js';
import {clusterPage} from './pages/cluster.js';
import {workloadsPage} from './pages/workloads.js';
import {workloadPage} from './pages/workload.js';
import {decisionsPage, decisionPage} from './pages/decisions.js';
import {h} from './util.js';

const ROUTES = [
  [/^#\/fleet$/, 'fleet', () => fleetPage],
  [/^#\/cluster\/([^/]+)$/, 'fleet', (m) => (ctx) => clusterPage(ctx, decodeURIComponent(m[1]))],
  [/^#\/workloads(\?.*)?$/, 'workloads', (m) => (ctx) => workloadsPage(ctx, new URLSearchParams((m[1] || '').slice(1)))],
  [/^#\/workload\/([^/]+)\/([^/]+)$/, 'workloads',
    (m) => (ctx) => workloadPage(ctx, decodeURIComponent(m[1]), decodeURIComponent(m[2]))],
  [/^#\/decisions(\?.*)?$/, 'decisions', (m) => (ctx) => decisionsPage(ctx, new URLSearchParams((m[1] || '').slice(1)))],
  [/^#\/decision\/(\d+)$/, 'decisions', (m) => (ctx) => decisionPage(ctx, Number(m[1]))],
];

const state = {role: null, cleanup: null, roleKnown: null, signedOut: false};
const main = document.getElementById('main');
const banner = document.getElementById('banner');

export function showBanner(text, kind = 'warn') {
  if (!text) {
    banner.hidden = true;
    banner.textContent = '';
    return;
  }
  banner.hidden = false;
  banner.className = `banner ${kind === 'error' ? 'error' : ''}`;
  banner.textContent = text;
}

// Asks the server what the token may do; the page hides or disables actions for `read`.
async function refreshRole() {
  const roleEl = document.getElementById('role');
  try {
    const who = await api('/v1/whoami');  // needs no token: it says whether one is needed
    state.role = who.role;
    state.signedOut = who.tokens_required && !who.role;
    if (!who.tokens_required) {
      roleEl.textContent = 'no token needed';
      showBanner('');
    } else if (who.role) {
      roleEl.textContent = `role: ${who.role}`;
      showBanner('');
    } else {
      roleEl.textContent = 'not signed in';
      showBanner(who.token === 'unknown' ? 'The server does not know this token: enter another.'
        : 'This server needs a bearer token: enter one above.', 'error');
    }
  } catch (e) {
    state.role = null;
    roleEl.textContent = '';
    showBanner(`Cannot reach the server: ${e.message}`, 'error');
  }
}

async function render() {
  if (state.cleanup) {
    try {
      state.cleanup();
    } catch {
      // a page that failed to stop cleanly must not keep the next one from rendering
    }
    state.cleanup = null;
  }
  // With a token the page renders at once (the role comes meanwhile); without one it first
  // learns whether one is needed, and asks for it instead of calling for data in vain.
  if (!token()) await state.roleKnown;
  if (state.signedOut) {
    main.replaceChildren(h('h1', {}, 'Sign in'),
      h('p', {}, 'This server needs a bearer token: enter a read or operate token in the form above.'));
    document.getElementById('token-input').focus();
    return;
  }
  const hash = location.hash || '#/fleet';
  for (const a of document.querySelectorAll('.top nav a')) a.removeAttribute('aria-current');
  for (const [re, nav, make] of ROUTES) {
    const m = hash.match(re);
    if (!m) continue;
    document.querySelector(`.top nav a[data-page="${nav}"]`)?.setAttribute('aria-current', 'page');
    main.replaceChildren();
    // roleKnown: pages that show actions wait for it; the others render at once.
    const ctx = {main, role: () => state.role, canOperate: () => state.role === 'operate',
      roleKnown: state.roleKnown, showBanner};
    try {
      state.cleanup = (await make(m)(ctx)) || null;
    } catch (e) {
      main.replaceChildren(h('h1', {}, 'Error'), h('p', {class: 'err'}, e.message));
    }
    return;
  }
  main.replaceChildren(h('h1', {}, 'Not found'), h('p', {}, `No page ${hash}. `, h('a', {href: '#/fleet'}, 'Fleet')));
}

function setupToken() {
  const form = document.getElementById('token-form');
  const input = document.getElementById('token-input');
  input.value = token();
  form.addEventListener('submit', async (ev) => {
    ev.preventDefault();
    setToken(input.value.trim());
    state.roleKnown = refreshRole();
    await state.roleKnown;
    await render();
    if (!state.signedOut) main.focus();  // on to the content, as after the skip link
  });
  document.getElementById('token-forget').addEventListener('click', async () => {
    input.value = '';
    setToken('');
    state.roleKnown = refreshRole();
    await state.roleKnown;
    render();
  });
}

window.addEventListener('hashchange', render);
setupToken();
state.roleKnown = refreshRole();
render();
