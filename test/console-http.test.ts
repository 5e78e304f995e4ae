// test: alone (30 failed sign-ins, each a password hash, must fall within the limiter's 1-minute window)
import { test, before, after } from "node:test";
import assert from "node:assert/strict";
import { startServer, type TestServer } from "../harness/server.ts";
import { errorOf } from "./helpers/errors.ts";
import { inviteWithToken, signInRequest, testPassword } from "./helpers/console-users.ts";

/**
 * The console's rules seen from outside a browser (spec §2.9, §3): the session cookie, CSRF on every change made
 * with it, failed sign-ins on the per-address limiter, the files it is served from, and the audit log of the admin
 * API. (test/console.test.ts clicks through the console in Chromium; console-users.test.ts has issue 33's rules.)
 */
const adminToken = "JIgzn5dhEhACa4vjj2zYFcP5tqhMnHk1bQzf8GNGSgs";
const cookieName = "__Host-modelgate_console";
const admin = { authorization: `Bearer ${adminToken}` };

let srv: TestServer;

before(async () => {
  srv = await startServer({ adminToken, anonymousRateLimit: { requests: 30, window: "1m" } });
});

after(async () => {
  await srv?.close();
});

const operatorEmail = "operator@console-http.example";
let operatorReady: Promise<void> | null = null;

/** A console session of an operator-admin (invited with the admin token once, then signed in by password). */
async function login(): Promise<{ cookie: string; csrfToken: string; setCookie: string }> {
  operatorReady ??= (async () => {
    const token = await inviteWithToken(srv.fetch, srv.origin, adminToken, null, operatorEmail, "operator-admin");
    assert.equal((await srv.post("/console/api/invites/accept", { token, password: testPassword })).status, 200);
  })();
  await operatorReady;
  const res = await signInRequest(srv.fetch, srv.origin, operatorEmail, testPassword);
  assert.equal(res.status, 200);
  const { csrfToken } = (await res.json()) as { csrfToken: string };
  const setCookie = res.headers.get("set-cookie")!;
  return { cookie: setCookie.split(";")[0]!, csrfToken, setCookie };
}

test("§2.9 console sign-in: an HttpOnly, Secure, SameSite=Strict cookie with an expiry, holding nothing but an id", async () => {
  const { cookie, setCookie } = await login();
  assert.match(setCookie, new RegExp(`^${cookieName}=[\\w-]{43}; Max-Age=43200; Path=/; HttpOnly; Secure; SameSite=Strict$`));
  assert.ok(!cookie.includes(testPassword));
  assert.equal((await srv.get("/admin/v1/accounts", { headers: { cookie } })).status, 200, "the admin API takes the cookie");
  const wrong = await errorOf(await srv.get("/admin/v1/accounts", { headers: { cookie: `${cookieName}=${"A".repeat(43)}` } }));
  assert.deepEqual([wrong.status, wrong.code], [401, "invalid_api_key"]);
  const noSession = await srv.get("/console/api/session");
  assert.equal(noSession.headers.get("x-ratelimit-limit-requests"), "30", "the per-address limiter's headers, as on every answer (§8)");
  assert.deepEqual((await errorOf(noSession)).code, "invalid_api_key", "no cookie, no session");
});

test("§2.9 CSRF: a change with the cookie but without its session's X-CSRF-Token is refused; with it, it goes through; reads need none", async () => {
  const { cookie, csrfToken } = await login();
  const other = await login();
  const attempts: Record<string, string>[] = [{ cookie }, { cookie, "x-csrf-token": other.csrfToken }, { cookie, "x-csrf-token": "" }];
  for (const headers of attempts) {
    const forged = await errorOf(await srv.post("/admin/v1/accounts", { name: "csrf-victim" }, { headers }));
    assert.deepEqual([forged.status, forged.code], [401, "invalid_api_key"], JSON.stringify(Object.keys(headers)));
  }
  assert.equal((await srv.get("/admin/v1/accounts/csrf-victim", { headers: admin })).status, 404, "nothing was created");
  assert.equal((await srv.get("/admin/v1/accounts", { headers: { cookie } })).status, 200);
  const made = await srv.post("/admin/v1/accounts", { name: "csrf-ok", contacts: ["ops@csrf.example"] }, { headers: { cookie, "x-csrf-token": csrfToken } });
  assert.equal(made.status, 201);
  const logoutWithout = await errorOf(await srv.post("/console/api/logout", {}, { headers: { cookie } }));
  assert.equal(logoutWithout.status, 401, "logout is a change too");
});

test("§2.9 logout ends the session: the old cookie is refused, and the answer clears it", async () => {
  const { cookie, csrfToken } = await login();
  const res = await srv.post("/console/api/logout", {}, { headers: { cookie, "x-csrf-token": csrfToken } });
  assert.equal(res.status, 200);
  assert.match(res.headers.get("set-cookie")!, new RegExp(`^${cookieName}=; Max-Age=0; Path=/; Expires=Thu, 01 Jan 1970 00:00:00 GMT; HttpOnly; Secure; SameSite=Strict$`));
  for (const call of [srv.get("/admin/v1/accounts", { headers: { cookie } }), srv.post("/admin/v1/accounts", { name: "after-logout" }, { headers: { cookie, "x-csrf-token": csrfToken } }), srv.get("/console/api/session", { headers: { cookie } })]) {
    const refused = await errorOf(await call);
    assert.deepEqual([refused.status, refused.code], [401, "invalid_api_key"]);
  }
});

test("§3 the audit log: admin-token calls recorded with the contact asked for and the source address, never a key value; GET /admin/v1/audit filters", async () => {
  const contact = "cfo@token.example";
  const onBehalf = { ...admin, "x-on-behalf-of": contact };
  assert.equal((await srv.post("/admin/v1/accounts", { name: "token-co", contacts: [contact] }, { headers: onBehalf })).status, 201);
  const created = (await (await srv.post("/admin/v1/keys", { account: "token-co", name: "batch" }, { headers: onBehalf })).json()) as { id: string; key: string };
  const stranger = await errorOf(await srv.get(`/admin/v1/keys/${created.id}/rotate`, { method: "POST", headers: { ...admin, "x-on-behalf-of": "someone@else.example" } }));
  assert.deepEqual([stranger.status, stranger.code, stranger.param], [400, "invalid_parameter", "on_behalf_of"]);
  assert.equal((await srv.get(`/admin/v1/keys/${created.id}/revoke`, { method: "POST", headers: admin })).status, 200);

  const audit = async (query: string) => ((await (await srv.get(`/admin/v1/audit?${query}`, { headers: admin })).json()) as { data: Record<string, unknown>[] }).data;
  const entries = await audit("account=token-co");
  assert.deepEqual(
    entries.map((e) => [e.action, e.actor, e.onBehalfOf, e.keyId, e.source]),
    [
      ["key.revoke", "admin-token", null, created.id, "127.0.0.1"],
      ["key.create", "admin-token", contact, created.id, "127.0.0.1"],
      ["account.create", "admin-token", contact, null, "127.0.0.1"],
    ],
    "the refused rotation left no entry",
  );
  for (const e of entries) assert.ok(Date.now() - Date.parse(e.at as string) < 60_000, "the time of each");
  assert.ok(!JSON.stringify(entries).includes(created.key.slice(11)), "no key value");
  assert.deepEqual((await audit("account=token-co&action=key.create")).map((e) => e.action), ["key.create"]);
  assert.deepEqual(await audit("account=token-co&actor=member"), []);
  assert.equal((await audit("account=token-co&limit=1")).length, 1);
  for (const limit of ["0", "10001", "two"]) {
    const refused = await errorOf(await srv.get(`/admin/v1/audit?limit=${limit}`, { headers: admin }));
    assert.deepEqual([refused.status, refused.param], [400, "limit"], limit);
  }
  const unknown = await errorOf(await srv.get("/admin/v1/audit?account=nobody", { headers: admin }));
  assert.deepEqual([unknown.status, unknown.code, unknown.param], [404, "model_not_found", "account"]);
});

test("§2.9 console files: the right content types, a strong ETag answered with 304, no-cache; the page's strict CSP; unknown files are the §7 404", async () => {
  const page = await srv.get("/console");
  assert.equal(page.status, 200);
  assert.equal(page.headers.get("content-type"), "text/html; charset=utf-8");
  assert.equal(page.headers.get("cache-control"), "no-store");
  assert.match(page.headers.get("content-security-policy")!, /^default-src 'none'; script-src 'self' 'sha256-[A-Za-z0-9+/]+=*'; style-src 'self';.* frame-ancestors 'none'/);
  assert.equal(page.headers.get("x-frame-options"), "DENY");

  const files: [string, string][] = [
    ["/console/assets/app.js", "text/javascript; charset=utf-8"],
    ["/console/assets/pages/usage.js", "text/javascript; charset=utf-8"],
    ["/console/assets/style.css", "text/css; charset=utf-8"],
    ["/console/vendor/preact.js", "text/javascript; charset=utf-8"],
    ["/console/vendor/uplot.css", "text/css; charset=utf-8"],
  ];
  for (const [file, type] of files) {
    const res = await srv.get(file);
    assert.equal(res.status, 200, file);
    assert.deepEqual([res.headers.get("content-type"), res.headers.get("cache-control"), res.headers.get("x-content-type-options")], [type, "no-cache", "nosniff"], file);
    const etag = res.headers.get("etag")!;
    assert.match(etag, /^"[\w-]{32}"$/, file);
    assert.ok((await res.arrayBuffer()).byteLength > 0);
    const cached = await srv.get(file, { headers: { "if-none-match": `"stale", ${etag}` } });
    assert.deepEqual([cached.status, cached.headers.get("etag"), (await cached.arrayBuffer()).byteLength], [304, etag, 0], file);
    assert.equal((await srv.get(file, { headers: { "if-none-match": '"stale"' } })).status, 200, file);
  }
  for (const missing of ["/console/assets/nope.js", "/console/assets/..%2Fpackage.json", "/console/assets/index.html", "/console/vendor/react.js"]) {
    const refused = await errorOf(await srv.get(missing));
    assert.deepEqual([refused.status, refused.code], [404, "model_not_found"], missing);
  }
});

test("§2.9 failed console sign-ins count against the per-address limiter, as wrong admin tokens do: 429 with Retry-After", async () => {
  let limited: Response | null = null;
  for (let i = 0; i < 60 && !limited; i++) {
    const res = await signInRequest(srv.fetch, srv.origin, `guess-${i}@example.com`, `wrong password ${i}`);
    if (res.status === 429) limited = res;
    else assert.equal(res.status, 401);
  }
  assert.ok(limited, "failed logins hit the per-address limiter");
  assert.ok(Number(limited.headers.get("retry-after")) >= 1);
  const tokenGuess = await srv.get("/admin/v1/accounts", { headers: { authorization: "Bearer another-guess-0123456789" } });
  assert.equal(tokenGuess.status, 429, "the same limiter as wrong admin tokens");
});
