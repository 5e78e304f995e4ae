// The console's one way to the server: the admin API and the console's own calls with the session cookie, plus the
// session's CSRF token on every call that changes something. Errors come back as the §7 envelope and are thrown as ApiError.
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

/** Called when the server refuses the session (it ended, or was signed out elsewhere): sign in again. */
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
  // A refused session (it ended, or was signed out elsewhere) brings back the sign-in form; the sign-in calls
  // themselves answer 401 for a wrong password, which is the form's own error.
  if (res.status === 401 && (path.startsWith("/admin/") || sessionCalls.has(path))) sessionEnded();
  if (!res.ok) throw new ApiError(res.status, data?.error);
  return data;
}

const sessionCalls = new Set(["/console/api/logout", "/console/api/logout-everywhere", "/console/api/totp/setup", "/console/api/totp/enable", "/console/api/totp/disable"]);
const enc = encodeURIComponent;

const onBehalf = (email) => (email ? { "x-on-behalf-of": email } : {});

export const api = {
  signInOptions: () => call("GET", "/console/api/sign-in"),
  session: () => call("GET", "/console/api/session"),
  login: (email, password, code) => call("POST", "/console/api/login", { email, password, ...(code ? { code } : {}) }),
  logout: () => call("POST", "/console/api/logout"),
  logoutEverywhere: () => call("POST", "/console/api/logout-everywhere"),
  inviteLookup: (token) => call("POST", "/console/api/invites/lookup", { token }),
  acceptInvite: (token, password, code) => call("POST", "/console/api/invites/accept", { token, password, ...(code ? { code } : {}) }),
  totpSetup: () => call("POST", "/console/api/totp/setup"),
  totpEnable: (code) => call("POST", "/console/api/totp/enable", { code }),
  totpDisable: (password) => call("POST", "/console/api/totp/disable", { password }),
  accounts: () => call("GET", "/admin/v1/accounts"),
  account: (id) => call("GET", `/admin/v1/accounts/${enc(id)}`),
  plan: (id) => call("GET", `/admin/v1/accounts/${enc(id)}/plan`),
  createAccount: (body, email) => call("POST", "/admin/v1/accounts", body, onBehalf(email)),
  updateAccount: (id, body, email) => call("PATCH", `/admin/v1/accounts/${enc(id)}`, body, onBehalf(email)),
  keys: (account) => call("GET", `/admin/v1/keys${account ? `?account=${enc(account)}` : ""}`),
  createKey: (body, email) => call("POST", "/admin/v1/keys", body, onBehalf(email)),
  rotateKey: (id, email) => call("POST", `/admin/v1/keys/${enc(id)}/rotate`, undefined, onBehalf(email)),
  revokeKey: (id, email) => call("POST", `/admin/v1/keys/${enc(id)}/revoke`, undefined, onBehalf(email)),
  models: () => call("GET", "/admin/v1/models"),
  routes: () => call("GET", "/admin/v1/routes"),
  batches: (account) => call("GET", `/admin/v1/batches${account ? `?account=${enc(account)}` : ""}`),
  dailyUsage: (account) => call("GET", `/admin/v1/usage/daily${account ? `?account=${enc(account)}` : ""}`),
  audit: (filter) => call("GET", `/admin/v1/audit?${new URLSearchParams(Object.entries(filter).filter(([, v]) => v))}`),
  // Members of an account (accountId) or operators (null).
  users: (accountId) => call("GET", accountId ? `/admin/v1/accounts/${enc(accountId)}/members` : "/admin/v1/operators"),
  invite: (accountId, body) => call("POST", accountId ? `/admin/v1/accounts/${enc(accountId)}/invites` : "/admin/v1/operators/invites", body),
  setRole: (id, role) => call("PATCH", `/admin/v1/users/${enc(id)}`, { role }),
  removeUser: (id) => call("DELETE", `/admin/v1/users/${enc(id)}`),
  resetLink: (id, clearTotp = false) => call("POST", `/admin/v1/users/${enc(id)}/password-reset`, clearTotp ? { clearTotp } : undefined),
  withdrawInvite: (id) => call("DELETE", `/admin/v1/invites/${enc(id)}`),
};

/** "a, b ,c" -> ["a", "b", "c"] (empty entries dropped). */
export function splitList(text) {
  return text.split(/[\s,]+/).map((s) => s.trim()).filter(Boolean);
}
