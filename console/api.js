// The console's one way to the server: the admin API with the login cookie, plus the CSRF token of the login on
// every call that changes something. Errors come back as the §7 envelope and are thrown as ApiError.
export class ApiError extends Error {
  constructor(status, error) {
    super(error?.message ?? `HTTP ${status}`);
    this.status = status;
    this.code = error?.code ?? null;
    this.param = error?.param ?? null;
  }
}

let csrfToken = null;
let sessionEnded = () => {};

export function setCsrf(token) {
  csrfToken = token;
}

/** Called when the admin API refuses the login cookie (it expired, or the server restarted): log in again. */
export function onSessionEnded(callback) {
  sessionEnded = callback;
}

async function call(method, path, body, headers = {}) {
  const init = { method, credentials: "same-origin", headers: { ...headers } };
  if (body !== undefined) {
    init.headers["content-type"] = "application/json";
    init.body = JSON.stringify(body);
  }
  if (method !== "GET" && csrfToken) init.headers["x-csrf-token"] = csrfToken;
  const res = await fetch(path, init);
  if (res.status === 204) return null;
  const data = await res.json().catch(() => null);
  if (res.status === 401 && path.startsWith("/admin/")) sessionEnded();
  if (!res.ok) throw new ApiError(res.status, data?.error);
  return data;
}

const onBehalf = (email) => (email ? { "x-on-behalf-of": email } : {});

export const api = {
  session: () => call("GET", "/console/api/session"),
  login: (token) => call("POST", "/console/api/login", { token }),
  logout: () => call("POST", "/console/api/logout"),
  accounts: () => call("GET", "/admin/v1/accounts"),
  account: (id) => call("GET", `/admin/v1/accounts/${encodeURIComponent(id)}`),
  createAccount: (body, email) => call("POST", "/admin/v1/accounts", body, onBehalf(email)),
  updateAccount: (id, body, email) => call("PATCH", `/admin/v1/accounts/${encodeURIComponent(id)}`, body, onBehalf(email)),
  keys: (account) => call("GET", `/admin/v1/keys${account ? `?account=${encodeURIComponent(account)}` : ""}`),
  createKey: (body, email) => call("POST", "/admin/v1/keys", body, onBehalf(email)),
  rotateKey: (id, email) => call("POST", `/admin/v1/keys/${encodeURIComponent(id)}/rotate`, undefined, onBehalf(email)),
  revokeKey: (id, email) => call("POST", `/admin/v1/keys/${encodeURIComponent(id)}/revoke`, undefined, onBehalf(email)),
  dailyUsage: (account) => call("GET", `/admin/v1/usage/daily${account ? `?account=${encodeURIComponent(account)}` : ""}`),
  audit: (filter) => call("GET", `/admin/v1/audit?${new URLSearchParams(Object.entries(filter).filter(([, v]) => v))}`),
};

/** "a, b ,c" -> ["a", "b", "c"] (empty entries dropped). */
export function splitList(text) {
  return text.split(/[\s,]+/).map((s) => s.trim()).filter(Boolean);
}
