// Calls to the falcon serve API from the page: the bearer token the user entered (kept in
// sessionStorage, so it lives as long as the tab) goes in the Authorization header of every
// call. On loopback without a tokens file none is needed.

const TOKEN_KEY = 'falcon.token';

export class ApiError extends Error {
  constructor(status, type, message, body) {
    super(message);
    this.status = status;
    this.type = type;
    this.body = body;
  }
}

export function token() {
  return sessionStorage.getItem(TOKEN_KEY) || '';
}

export function setToken(value) {
  if (value) sessionStorage.setItem(TOKEN_KEY, value);
  else sessionStorage.removeItem(TOKEN_KEY);
}

function headers(extra = {}) {
  const out = {...extra};
  const t = token();
  if (t) out.Authorization = `Bearer ${t}`;
  return out;
}

async function errorOf(res) {
  let body = null;
  try {
    body = await res.json();
  } catch {
    // not JSON: keep the status
  }
  const e = body && body.error ? body.error : {};
  return new ApiError(res.status, e.type || `HTTP ${res.status}`,
    e.message || `${res.status} ${res.statusText}`, body);
}

// GET/POST/DELETE returning JSON; throws ApiError with the server's error type and message.
export async function api(path, {method = 'GET', body, signal} = {}) {
  const init = {method, headers: headers(body ? {'Content-Type': 'application/json'} : {}), signal};
  if (body !== undefined) init.body = JSON.stringify(body);
  const res = await fetch(path, init);
  if (!res.ok) throw await errorOf(res);
  return res.json();
}

// A log request: the Response, whose body the caller reads as a stream.
export async function stream(path, signal) {
  const res = await fetch(path, {headers: headers(), signal, cache: 'no-store'});
  if (!res.ok) throw await errorOf(res);
  return res;
}

export function query(params) {
  const q = new URLSearchParams();
  for (const [k, v] of Object.entries(params)) {
    if (v !== undefined && v !== null && v !== '') q.set(k, String(v));
  }
  const s = q.toString();
  return s ? `?${s}` : '';
}
