import { test, before, after } from "node:test";
import assert from "node:assert/strict";
import { rmSync } from "node:fs";
import { runCli, startServer, tempDir, writeConfig, type TestServer } from "../harness/server.ts";
import { errorOf } from "./helpers/errors.ts";
import { clientFrom, inviteWithToken, joinWithToken, sessionCookie, setCookieValue, signInRequest, testPassword, type ConsoleClient } from "./helpers/console-users.ts";
import { totpCode } from "../src/auth/totp.ts";
import { sql } from "kysely";
import { connectDatabase, openStore } from "../src/store/store.ts";
import { AuditRepo } from "../src/store/audit.repo.ts";
import { migrationProvider } from "../src/store/migrations.ts";
import { Migrator } from "kysely/migration";
import { testConfig } from "../harness/config.ts";
import { freshPostgres, silentLogger } from "../harness/keys.ts";

/**
 * Issue 33's security rules for console users over HTTP: isolation between accounts (generated from the route
 * table), role limits, invites and passwords, sessions (fixation, CSRF, sign-out everywhere), and the audit log
 * naming the user. Session timeouts, and throttled and audited sign-ins: console-time-windows.test.ts; replicas
 * sharing sessions: console-replicas.test.ts; OIDC: console-oidc.test.ts; the browser: console.test.ts.
 */
const adminToken = "Yq4vN8sKpT2wLz6RbX1mHc9dFj3GtA7uEe5SnV0kQiW";
const admin = { authorization: `Bearer ${adminToken}` };
let srv: TestServer;

interface Tenant {
  account: { id: string; name: string };
  owner: ConsoleClient;
  key: { id: string; prefix: string; name: string };
}
let a: Tenant;
let b: Tenant;

async function adminJson<T>(method: string, path: string, body?: unknown): Promise<T> {
  const res = body === undefined ? await srv.get(path, { headers: admin, method }) : await srv.post(path, body, { headers: admin, method });
  const text = await res.text();
  assert.ok(res.ok, `${method} ${path}: ${res.status} ${text}`);
  return JSON.parse(text) as T;
}

async function tenant(name: string): Promise<Tenant> {
  const account = await adminJson<{ id: string; name: string }>("POST", "/admin/v1/accounts", { name, contacts: [`ops@${name}.example`] });
  const owner = await joinWithToken(srv.fetch, srv.origin, adminToken, account.id, `owner@${name}.example`, "owner");
  const key = await owner.json<{ id: string; prefix: string; name: string }>("POST", "/admin/v1/keys", { account: account.id, name: `${name}-secret-key-name` });
  return { account, owner, key };
}

before(async () => {
  srv = await startServer({
    adminToken,
    server: { trustProxy: ["127.0.0.1"] },
    // Room for this file's own refusals from 127.0.0.1 (the isolation sweep is hundreds of calls).
    anonymousRateLimit: { requests: 5000, window: "1m" },
    console: { loginFailureLimit: { requests: 3, window: "1m" } },
    models: [],
  });
  a = await tenant("alpha-corp");
  b = await tenant("beta-corp");
});

after(async () => {
  await srv?.close();
});

/** Every value of B a member of A must never see: its names, its key's prefix and name, its people, its ids. */
async function secretsOfB(): Promise<Record<string, string>> {
  const members = await adminJson<{ data: { id: string; email: string }[]; invites: { id: string; email: string }[]; resetLinks: { id: string }[] }>("GET", `/admin/v1/accounts/${b.account.id}/members`);
  const secrets: Record<string, string> = { accountName: b.account.name, accountId: b.account.id, keyPrefix: b.key.prefix, keyId: b.key.id, keyName: b.key.name, contact: `ops@${b.account.name}.example` };
  for (const [i, m] of members.data.entries()) Object.assign(secrets, { [`user${i}`]: m.id, [`email${i}`]: m.email });
  for (const [i, inv] of members.invites.entries()) Object.assign(secrets, { [`invite${i}`]: inv.id, [`invitee${i}`]: inv.email });
  for (const [i, link] of members.resetLinks.entries()) Object.assign(secrets, { [`resetLink${i}`]: link.id });
  return secrets;
}

interface OpenApiOperation {
  parameters?: { in: string; name: string }[];
  requestBody?: { content?: Record<string, { schema?: unknown }> };
}

/** A valid value for each body field a route declares, with B's account id where a field names an account. */
function sampleBody(schema: unknown, id: string): Record<string, unknown> | undefined {
  const props = (schema as { properties?: Record<string, { type?: string; anyOf?: unknown[] }> } | undefined)?.properties;
  if (!props) return undefined;
  const samples: Record<string, unknown> = { email: "isolation@example.com", role: "developer", password: testPassword, name: "isolation-probe", token: "x".repeat(43), code: "123456", plan: "default" };
  const body: Record<string, unknown> = {};
  for (const [field, p] of Object.entries(props)) {
    if (field === "account") body[field] = id;
    else if (field in samples) body[field] = samples[field];
    else if (p.type === "array" || p.anyOf) body[field] = null;
  }
  return body;
}

test("issue 33 isolation: a member of A, signed in with a CSRF token, tries every admin and console route (from the route table) with B's ids in the path, the body and the query: 404 or 403, and nothing of B in any answer", async () => {
  const attacker = await joinWithToken(srv.fetch, srv.origin, adminToken, a.account.id, "dev@alpha-corp.example", "developer");
  const bViewer = await inviteWithToken(srv.fetch, srv.origin, adminToken, b.account.id, "pending@beta-corp.example", "viewer");
  assert.ok(bViewer);
  await b.owner.json("POST", `/admin/v1/users/${b.owner.user.id}/password-reset`);
  const secrets = await secretsOfB();
  const bIds = [secrets.accountId!, secrets.accountName!, secrets.keyId!, secrets.user0!, secrets.invite0!, secrets.resetLink0!];
  const routes = srv.server.app.routeTable.routes.filter((r) => r.url.startsWith("/admin/v1/") || r.url.startsWith("/console/api/"));
  // Each route's body and query fields, from the OpenAPI document built from the same routes' schemas.
  const doc = srv.server.app.swagger() as { paths: Record<string, Record<string, OpenApiOperation>>; components: { schemas: Record<string, unknown> } };
  const operation = (method: string, url: string) => doc.paths[url.replace(/:(\w+)/g, "{$1}")]?.[method.toLowerCase()];
  const resolve = (schema: unknown) => {
    const ref = (schema as { $ref?: string } | undefined)?.$ref;
    return ref ? doc.components.schemas[ref.split("/").pop()!] : schema;
  };
  // The console's own calls act on the signed-in user only; these would end the attacker's session or sign-in.
  const skipped = new Set(["POST /console/api/logout", "POST /console/api/logout-everywhere", "POST /console/api/login", "POST /console/api/invites/accept"]);
  let tried = 0;
  for (const route of routes) {
    const label = `${route.method} ${route.url}`;
    if (skipped.has(label)) continue;
    const params = route.url.match(/:\w+/g) ?? [];
    const op = operation(route.method, route.url);
    const query = Object.fromEntries((op?.parameters ?? []).filter((p) => p.in === "query").map((p) => [p.name, true]));
    for (const id of bIds) {
      const path = route.url.replace(/:\w+/g, encodeURIComponent(id)) + ("account" in query ? `?account=${encodeURIComponent(id)}` : "");
      const body = route.method === "GET" || route.method === "DELETE" ? undefined : sampleBody(resolve(op?.requestBody?.content?.["application/json"]?.schema), id);
      const res = await attacker.send(route.method, path, body ?? (route.method === "POST" ? {} : undefined));
      const text = await res.text();
      tried += 1;
      const carriesB = params.length > 0 || "account" in query || (body !== undefined && "account" in body);
      if (route.url.startsWith("/admin/v1/") && carriesB) assert.ok(res.status === 404 || res.status === 403, `${label} with ${id}: ${res.status} ${text}`);
      const sent = `${path} ${JSON.stringify(body ?? {})}`;
      for (const [what, value] of Object.entries(secrets)) {
        if (!sent.includes(value)) assert.ok(!text.includes(value), `${label} with ${id}: B's ${what} in the answer: ${text.slice(0, 300)}`);
      }
      if (params.length === 0 && !("account" in query) && !(body && "account" in body)) break;
    }
  }
  assert.ok(routes.length >= 30 && tried >= routes.length, `every route of the table was tried (${tried} calls over ${routes.length} routes)`);
  // And A's own data is still reachable to A, so the refusals above are about B, not a broken session.
  const own = await attacker.json<{ data: { id: string }[] }>("GET", "/admin/v1/keys");
  assert.deepEqual(own.data.map((k) => k.id), [a.key.id]);
  const audit = await attacker.json<{ data: { accountId: string | null }[] }>("GET", "/admin/v1/audit");
  assert.ok(audit.data.length > 0 && audit.data.every((e) => e.accountId === a.account.id), "a member's audit log is their account's only");
});

test("issue 33 roles: a viewer cannot create, rotate or revoke; a developer cannot invite; a member cannot reach operator routes; an operator-viewer only reads", async () => {
  const viewer = await joinWithToken(srv.fetch, srv.origin, adminToken, a.account.id, "viewer@alpha-corp.example", "viewer");
  const developer = await joinWithToken(srv.fetch, srv.origin, adminToken, a.account.id, "dev2@alpha-corp.example", "developer");
  const refused = async (client: ConsoleClient, method: string, path: string, body?: unknown) => {
    const res = await client.send(method, path, body);
    assert.deepEqual(await errorOf(res), { status: 403, type: "permission_error", code: "permission_denied", param: null }, `${client.user.role} ${method} ${path}`);
  };
  await refused(viewer, "POST", "/admin/v1/keys", { account: a.account.id, name: "nope" });
  await refused(viewer, "POST", `/admin/v1/keys/${a.key.id}/rotate`);
  await refused(viewer, "POST", `/admin/v1/keys/${a.key.id}/revoke`);
  await refused(viewer, "GET", `/admin/v1/accounts/${a.account.id}/members`);
  assert.equal((await viewer.send("GET", "/admin/v1/keys")).status, 200, "a viewer reads keys");
  assert.equal((await viewer.send("GET", `/admin/v1/accounts/${a.account.id}/plan`)).status, 200, "a viewer reads the plan");
  await refused(developer, "POST", `/admin/v1/accounts/${a.account.id}/invites`, { email: "x@alpha-corp.example", role: "viewer" });
  await refused(developer, "PATCH", `/admin/v1/users/${viewer.user.id}`, { role: "owner" });
  const created = await developer.json<{ id: string }>("POST", "/admin/v1/keys", { account: a.account.id, name: "dev-key", endpoints: ["chat"] });
  assert.equal((await developer.send("POST", `/admin/v1/keys/${created.id}/revoke`)).status, 200, "a developer manages keys");
  const deployment = await developer.send("POST", "/admin/v1/keys", { account: a.account.id, deployment: "dedicated-1" });
  assert.deepEqual(await errorOf(deployment), { status: 400, type: "invalid_request_error", code: "invalid_parameter", param: "deployment" });
  for (const [method, path, body] of [
    ["GET", "/admin/v1/operators"],
    ["POST", "/admin/v1/operators/invites", { email: "op@example.com", role: "operator-admin" }],
    ["POST", "/admin/v1/accounts", { name: "made-by-a-member" }],
    ["PATCH", `/admin/v1/accounts/${a.account.id}`, { plan: "default" }],
    ["GET", "/admin/v1/models"],
  ] as [string, string, unknown][]) {
    await refused(a.owner, method, path, body);
  }
  const opViewer = await joinWithToken(srv.fetch, srv.origin, adminToken, null, "opview@example.com", "operator-viewer");
  assert.equal((await opViewer.send("GET", "/admin/v1/accounts")).status, 200);
  assert.equal((await opViewer.send("GET", `/admin/v1/keys?account=${b.account.id}`)).status, 200, "operators read every account");
  await refused(opViewer, "POST", "/admin/v1/keys", { account: a.account.id });
  await refused(opViewer, "POST", `/admin/v1/accounts/${a.account.id}/invites`, { email: "y@alpha-corp.example", role: "viewer" });
});

test("issue 33 invites: a link works once; a used, expired or withdrawn link is refused; passwords need 12 characters and not a common one; a reset link follows the same rules", async () => {
  const token = await inviteWithToken(srv.fetch, srv.origin, adminToken, a.account.id, "once@alpha-corp.example", "viewer");
  const accept = (t: string, password: string) => srv.post("/console/api/invites/accept", { token: t, password });
  assert.deepEqual(await errorOf(await accept(token, "short-pw-1")), { status: 400, type: "invalid_request_error", code: "invalid_parameter", param: "password" });
  assert.deepEqual(await errorOf(await accept(token, "qwerty123456")), { status: 400, type: "invalid_request_error", code: "invalid_parameter", param: "password" });
  assert.deepEqual(await errorOf(await accept(token, "Password1234!")), { status: 400, type: "invalid_request_error", code: "invalid_parameter", param: "password" });
  const lookup = (await (await srv.post("/console/api/invites/lookup", { token })).json()) as Record<string, string>;
  assert.deepEqual({ ...lookup, expiresAt: typeof lookup.expiresAt }, { email: "once@alpha-corp.example", role: "viewer", purpose: "invite", accountName: a.account.name, expiresAt: "string", secondFactor: false });
  const [first, second] = await Promise.all([accept(token, testPassword), accept(token, testPassword)]);
  assert.deepEqual([first.status, second.status].sort(), [200, 404], "two racing uses: one wins");
  assert.deepEqual(await errorOf(await accept(token, testPassword)), { status: 404, type: "invalid_request_error", code: "model_not_found", param: "token" });
  assert.equal((await srv.post("/console/api/invites/lookup", { token })).status, 404);

  const late = await inviteWithToken(srv.fetch, srv.origin, adminToken, a.account.id, "late@alpha-corp.example", "viewer");
  const store = await openStore(srv.config, silentLogger());
  try {
    const hours72 = 72 * 3600 * 1000;
    const pending = await store.invites.pending(a.account.id, new Date().toISOString());
    const invite = pending.find((i) => i.email === "late@alpha-corp.example")!;
    assert.ok(Math.abs(Date.parse(invite.expiresAt) - Date.parse(invite.createdAt) - hours72) < 1000, "valid 72 h");
    await store.db.updateTable("invites").set({ expires_at: new Date(Date.now() - 1000).toISOString() }).where("id", "=", invite.id).execute();
    const rows = await store.db.selectFrom("invites").select(["token_hash"]).execute();
    assert.ok(rows.every((r) => /^[0-9a-f]{64}$/.test(r.token_hash) && r.token_hash !== late), "only a hash is stored");
  } finally {
    await store.close();
  }
  assert.equal((await accept(late, testPassword)).status, 404, "an expired link is refused");

  const withdrawn = await a.owner.json<{ id: string; token: string }>("POST", `/admin/v1/accounts/${a.account.id}/invites`, { email: "withdrawn@alpha-corp.example", role: "viewer" });
  await a.owner.json("DELETE", `/admin/v1/invites/${withdrawn.id}`);
  assert.equal((await accept(withdrawn.token, testPassword)).status, 404, "a withdrawn link is refused");

  const member = await clientFrom(srv.fetch, srv.origin, await signInRequest(srv.fetch, srv.origin, "once@alpha-corp.example", testPassword));
  const reset = await a.owner.json<{ token: string; purpose: string }>("POST", `/admin/v1/users/${member.user.id}/password-reset`);
  assert.equal(reset.purpose, "reset");
  const newPassword = "another calm harbour of 7 ships";
  const racing = await Promise.all([accept(reset.token, newPassword), accept(reset.token, "and one more password 99")]);
  assert.deepEqual(racing.map((r) => r.status).sort(), [200, 404], "a reset link works once, however many race");
  const winner = racing[0]!.status === 200 ? newPassword : "and one more password 99";
  assert.equal((await accept(reset.token, "and a third password 123")).status, 404, "and never again");
  assert.equal((await member.send("GET", "/admin/v1/keys")).status, 401, "a new password ends the sessions of the old one");
  assert.equal((await signInRequest(srv.fetch, srv.origin, "once@alpha-corp.example", winner)).status, 200);
});

test("issue 42.8: a reset link is bound to its user: listed beside invites while pending, withdrawn when the user is removed, and it never opens the next user with that email (another account's)", async () => {
  const accept = (token: string) => srv.post("/console/api/invites/accept", { token, password: "a brand new password for bob 42" });
  const bob = await joinWithToken(srv.fetch, srv.origin, adminToken, a.account.id, "bob@shared.example", "developer");
  const kept = await a.owner.json<{ id: string; token: string }>("POST", `/admin/v1/users/${bob.user.id}/password-reset`);
  type Listed = { invites: { id: string }[]; resetLinks: { id: string; userId: string; email: string; clearsTotp: boolean; createdByEmail: string | null }[] };
  const listed = await a.owner.json<Listed>("GET", `/admin/v1/accounts/${a.account.id}/members`);
  assert.deepEqual(listed.resetLinks.find((r) => r.id === kept.id), { ...listed.resetLinks.find((r) => r.id === kept.id)!, userId: bob.user.id, email: "bob@shared.example", clearsTotp: false, createdByEmail: "owner@alpha-corp.example" });
  assert.ok(!listed.invites.some((i) => i.id === kept.id), "a reset link is not an invite");

  await a.owner.json("DELETE", `/admin/v1/users/${bob.user.id}`);
  const afterRemoval = await a.owner.json<Listed>("GET", `/admin/v1/accounts/${a.account.id}/members`);
  assert.ok(!afterRemoval.resetLinks.some((r) => r.id === kept.id), "removing the user withdrew their link");
  // Account B invites the same address; the new bob joins B.
  const newBob = await joinWithToken(srv.fetch, srv.origin, adminToken, b.account.id, "bob@shared.example", "viewer");
  assert.equal(newBob.user.accountId, b.account.id);
  assert.equal((await srv.post("/console/api/invites/lookup", { token: kept.token })).status, 404);
  const taken = await accept(kept.token);
  assert.deepEqual(await errorOf(taken), { status: 404, type: "invalid_request_error", code: "model_not_found", param: "token" });
  assert.equal(setCookieValue(taken), null, "the old link signs no one in");
  assert.equal((await newBob.send("GET", "/console/api/session")).status, 200, "and the new bob's session is untouched");

  // An owner withdraws a pending reset link; another account's owner cannot.
  const member = await joinWithToken(srv.fetch, srv.origin, adminToken, a.account.id, "withdraw-me@alpha-corp.example", "viewer");
  const link = await a.owner.json<{ id: string; token: string }>("POST", `/admin/v1/users/${member.user.id}/password-reset`);
  assert.equal((await b.owner.send("DELETE", `/admin/v1/invites/${link.id}`)).status, 404);
  await a.owner.json("DELETE", `/admin/v1/invites/${link.id}`);
  assert.ok(!(await a.owner.json<Listed>("GET", `/admin/v1/accounts/${a.account.id}/members`)).resetLinks.some((r) => r.id === link.id));
  assert.equal((await accept(link.token)).status, 404, "a withdrawn reset link is refused");
  const withdrawal = await adminJson<{ data: { actor: string; actorEmail: string; detail: { inviteId: string; purpose: string } }[] }>("GET", "/admin/v1/audit?action=link.withdraw");
  assert.ok(withdrawal.data.some((e) => e.detail.inviteId === link.id && e.detail.purpose === "reset" && e.actorEmail === "owner@alpha-corp.example"));
});

test("issue 42.9: accepting a reset for a user with TOTP on asks for a current code or a recovery code; only an operator's reset may clear TOTP, and that is audited", async () => {
  const coOwner = await joinWithToken(srv.fetch, srv.origin, adminToken, a.account.id, "co-owner@alpha-corp.example", "owner");
  const setup = await coOwner.json<{ secret: string }>("POST", "/console/api/totp/setup");
  const { recoveryCodes } = await coOwner.json<{ recoveryCodes: string[] }>("POST", "/console/api/totp/enable", { code: totpCode(setup.secret) });
  const accept = (token: string, extra: Record<string, unknown> = {}) => srv.post("/console/api/invites/accept", { token, password: "the other owner wants in 2024", ...extra }, { headers: { "x-forwarded-for": "192.0.2.150" } });

  // The other owner issues a reset link for their co-owner and tries to use it.
  const takeover = await a.owner.json<{ token: string }>("POST", `/admin/v1/users/${coOwner.user.id}/password-reset`);
  const lookup = (await (await srv.post("/console/api/invites/lookup", { token: takeover.token })).json()) as { secondFactor: boolean };
  assert.equal(lookup.secondFactor, true);
  const noCode = await accept(takeover.token);
  assert.deepEqual(await errorOf(noCode), { status: 401, type: "authentication_error", code: "invalid_api_key", param: "code" });
  assert.equal(setCookieValue(noCode), null, "no session without the second factor");
  assert.deepEqual(await errorOf(await accept(takeover.token, { code: "000000" })), { status: 401, type: "authentication_error", code: "invalid_api_key", param: "code" });
  assert.equal((await coOwner.send("GET", "/console/api/session")).status, 200, "the link is not used up, nor the co-owner's sessions ended");

  // The co-owner, with the link and their authenticator (the next step: enabling spent the current one), or a recovery code.
  const withCode = await clientFrom(srv.fetch, srv.origin, await accept(takeover.token, { code: totpCode(setup.secret, Date.now() + 30_000) }));
  assert.equal(withCode.user.id, coOwner.user.id);
  const second = await a.owner.json<{ token: string }>("POST", `/admin/v1/users/${coOwner.user.id}/password-reset`);
  const withRecovery = await clientFrom(srv.fetch, srv.origin, await accept(second.token, { code: recoveryCodes[0] }));
  assert.equal(((await withRecovery.json<{ user: { totpEnabled: boolean } }>("GET", "/console/api/session")).user.totpEnabled), true, "a reset keeps TOTP on");
  const logins = await adminJson<{ data: { actorId: string; detail: { method: string } }[] }>("GET", `/admin/v1/audit?action=auth.login&account=${a.account.id}`);
  const methods = logins.data.filter((e) => e.actorId === coOwner.user.id).map((e) => e.detail.method);
  assert.ok(methods.includes("password-reset+totp") && methods.includes("password-reset+recovery-code"), methods.join(", "));

  // Clearing TOTP with the reset is an operator's action: an owner is refused, the admin token (an operator) is not.
  const byOwner = await a.owner.send("POST", `/admin/v1/users/${coOwner.user.id}/password-reset`, { clearTotp: true });
  assert.deepEqual(await errorOf(byOwner), { status: 403, type: "permission_error", code: "permission_denied", param: null });
  const cleared = await adminJson<{ token: string; id: string }>("POST", `/admin/v1/users/${coOwner.user.id}/password-reset`, { clearTotp: true });
  assert.equal(((await (await srv.post("/console/api/invites/lookup", { token: cleared.token })).json()) as { secondFactor: boolean }).secondFactor, false);
  const recovered = await clientFrom(srv.fetch, srv.origin, await accept(cleared.token));
  assert.equal(((await recovered.json<{ user: { totpEnabled: boolean } }>("GET", "/console/api/session")).user.totpEnabled), false, "the operator's reset turned TOTP off");
  const audit = await adminJson<{ data: { action: string; actor: string; actorId: string | null; detail: Record<string, unknown> }[] }>("GET", `/admin/v1/audit?account=${a.account.id}`);
  const issued = audit.data.find((e) => e.action === "user.password_reset_link" && e.detail.inviteId === cleared.id);
  assert.deepEqual([issued?.actor, issued?.detail.clearsTotp, issued?.detail.userId], ["admin-token", true, coOwner.user.id]);
  assert.ok(audit.data.some((e) => e.action === "user.totp.clear" && e.actorId === coOwner.user.id && e.detail.inviteId === cleared.id));
  // A keeps one owner, as the other tests expect.
  await a.owner.json("DELETE", `/admin/v1/users/${coOwner.user.id}`);
});

for (const dialect of ["sqlite", "postgres"] as const) {
  test(`issue 42.8 and 42.10 (${dialect}) migration 0011: reset links made before it (found by email) are withdrawn; operators an OpenID sign-in made are marked so, and invited ones keep their role`, async () => {
    const dataDir = tempDir();
    const db = dialect === "postgres" ? await freshPostgres() : null;
    try {
      const config = testConfig({ dataDir, models: [], keySecret: "migration-0011-key-secret-0123456789", ...(db ? { database: { url: db.url } } : {}) }, null);
      const legacy = connectDatabase(config, config.databaseUrl, silentLogger()).db;
      try {
        assert.ifError((await new Migrator({ db: legacy, provider: migrationProvider }).migrateTo("0009_batch_api")).error);
        const at = new Date().toISOString();
        const later = new Date(Date.now() + 3600_000).toISOString();
        for (const [id, email] of [["usr_sso", "sso@ops.example"], ["usr_local", "local@ops.example"]]) {
          await legacy.insertInto("users").values({ id, email, account_id: null, role: "operator-admin", password_hash: null, totp_secret: null, totp_enabled_at: null, totp_last_step: null, created_at: at, disabled_at: null }).execute();
        }
        const audit = new AuditRepo(legacy);
        await audit.append({ id: "aud_sso", at, actor: "operator", actorId: "usr_sso", actorEmail: "sso@ops.example", onBehalfOf: null, action: "operator.join", accountId: null, keyId: null, source: null, detail: { role: "operator-admin", via: "oidc" } });
        await audit.append({ id: "aud_local", at, actor: "operator", actorId: "usr_local", actorEmail: "local@ops.example", onBehalfOf: null, action: "operator.join", accountId: null, keyId: null, source: null, detail: { inviteId: "inv_x", role: "operator-admin", invitedBy: null } });
        for (const [id, purpose] of [["inv_reset", "reset"], ["inv_invite", "invite"]]) {
          await legacy.insertInto("invites").values({ id, token_hash: id, purpose, email: "local@ops.example", account_id: null, role: "operator-admin", created_by_id: null, created_by_email: null, created_at: at, expires_at: later, used_at: null }).execute();
        }
      } finally {
        await legacy.destroy();
      }
      const store = await openStore(config, silentLogger());
      try {
        assert.deepEqual([(await store.users.get("usr_sso"))?.provisionedBy, (await store.users.get("usr_local"))?.provisionedBy], ["oidc", "invite"]);
        assert.notEqual((await store.invites.get("inv_reset"))?.usedAt, null, "an old reset link is withdrawn");
        assert.equal((await store.invites.get("inv_invite"))?.usedAt, null, "an invite is not");
        assert.equal((await store.audit.verify()).firstBreak, null);
      } finally {
        await store.close();
      }
    } finally {
      await db?.drop();
      rmSync(dataDir, { recursive: true, force: true });
    }
  });
}

test("issue 33 sessions: an id planted before sign-in is not kept; a change from another origin or without the CSRF token is refused; sign out everywhere ends every session", async () => {
  const planted = "attacker-chosen-session-id-0123456789abcdef";
  const res = await signInRequest(srv.fetch, srv.origin, "owner@alpha-corp.example", testPassword, {}, { cookie: `${sessionCookie}=${planted}`, "x-forwarded-for": "198.51.100.1" });
  const session = await clientFrom(srv.fetch, srv.origin, res);
  assert.notEqual(session.cookie, planted, "a new id at sign-in");
  assert.match(res.headers.getSetCookie().join("\n"), /__Host-modelgate_console=[\w-]{43}; Max-Age=\d+; Path=\/; HttpOnly; Secure; SameSite=Strict/);
  assert.equal((await srv.get("/admin/v1/keys", { headers: { cookie: `${sessionCookie}=${planted}` } })).status, 401);

  const crossSiteSignIn = await signInRequest(srv.fetch, srv.origin, "owner@alpha-corp.example", testPassword, {}, { origin: "https://evil.example", "x-forwarded-for": "198.51.100.4" });
  assert.deepEqual([crossSiteSignIn.status, setCookieValue(crossSiteSignIn)], [401, null], "a sign-in posted by another site");
  const body = { account: a.account.id, name: "csrf" };
  const noToken = await srv.post("/admin/v1/keys", body, { headers: { cookie: `${sessionCookie}=${session.cookie}` } });
  assert.deepEqual(await errorOf(noToken), { status: 401, type: "authentication_error", code: "invalid_api_key", param: null });
  const crossOrigin = await session.send("POST", "/admin/v1/keys", body, { origin: "https://evil.example" });
  assert.equal(crossOrigin.status, 401, "another origin is refused even with the token");
  assert.equal((await session.send("POST", "/admin/v1/keys", body)).status, 201, "same origin with the token");

  const second = await clientFrom(srv.fetch, srv.origin, await signInRequest(srv.fetch, srv.origin, "owner@alpha-corp.example", testPassword, {}, { "x-forwarded-for": "198.51.100.2" }));
  const out = await second.send("POST", "/console/api/logout-everywhere");
  assert.equal(out.status, 200);
  assert.match(out.headers.getSetCookie().join(""), /__Host-modelgate_console=;/);
  for (const client of [session, second, a.owner]) assert.equal((await client.send("GET", "/console/api/session")).status, 401);
  a.owner = await clientFrom(srv.fetch, srv.origin, await signInRequest(srv.fetch, srv.origin, "owner@alpha-corp.example", testPassword, {}, { "x-forwarded-for": "198.51.100.3" }));
});

test("issue 33 audit: a member's key operations name the member (actor member, id, email), an admin-token call names the token; the hash chain verifies with both kinds of entries", async () => {
  const created = await a.owner.json<{ id: string }>("POST", "/admin/v1/keys", { account: a.account.id, name: "audited" });
  await a.owner.json("POST", `/admin/v1/keys/${created.id}/revoke`);
  await adminJson("POST", "/admin/v1/keys", { account: a.account.id, name: "by-automation" });
  const entries = await adminJson<{ data: { action: string; actor: string; actorId: string | null; actorEmail: string | null; keyId: string | null; detail: { name?: string } | null }[] }>("GET", `/admin/v1/audit?account=${a.account.id}`);
  const byMember = entries.data.filter((e) => e.keyId === created.id).map((e) => [e.action, e.actor, e.actorId, e.actorEmail]);
  assert.deepEqual(byMember, [
    ["key.revoke", "member", a.owner.user.id, "owner@alpha-corp.example"],
    ["key.create", "member", a.owner.user.id, "owner@alpha-corp.example"],
  ]);
  const automation = entries.data.find((e) => e.action === "key.create" && e.detail?.name === "by-automation")!;
  assert.deepEqual([automation.actor, automation.actorId, automation.actorEmail], ["admin-token", null, null]);
  assert.ok(!entries.data.some((e) => e.actor === "console"), "no console action is recorded as a shared token");
  const store = await openStore(srv.config, silentLogger());
  try {
    const report = await store.audit.verify();
    assert.equal(report.firstBreak, null, JSON.stringify(report.firstBreak));
    // Removing the user from an entry breaks its hash.
    const row = await store.db.selectFrom("audit_log").select(["seq"]).where("actor_id", "=", a.owner.user.id).orderBy("seq", "desc").executeTakeFirstOrThrow();
    await sql`DROP TRIGGER audit_log_no_update`.execute(store.db);
    await store.db.updateTable("audit_log").set({ actor_id: null, actor_email: null }).where("seq", "=", row.seq).execute();
    assert.equal((await store.audit.verify()).firstBreak?.seq, Number(row.seq));
  } finally {
    await store.close();
  }
});

test("issue 33 TOTP: turned on with a code, recovery codes shown once; sign-in then needs a code, each code works once, a recovery code once", async () => {
  const member = await joinWithToken(srv.fetch, srv.origin, adminToken, b.account.id, "totp@beta-corp.example", "developer");
  const setup = await member.json<{ secret: string; uri: string }>("POST", "/console/api/totp/setup");
  assert.match(setup.uri, /^otpauth:\/\/totp\/Modelgate:totp%40beta-corp\.example\?.*secret=/);
  assert.equal((await member.send("POST", "/console/api/totp/enable", { code: "000000" })).status, 400);
  // One instant for every code below: the test must not depend on whether a 30 s step boundary falls inside it.
  const enabledAt = Date.now();
  const { recoveryCodes } = await member.json<{ recoveryCodes: string[] }>("POST", "/console/api/totp/enable", { code: totpCode(setup.secret, enabledAt) });
  assert.equal(recoveryCodes.length, 10);
  const from = { "x-forwarded-for": "192.0.2.77" };
  const noCode = await signInRequest(srv.fetch, srv.origin, "totp@beta-corp.example", testPassword, {}, from);
  assert.deepEqual(await errorOf(noCode), { status: 401, type: "authentication_error", code: "invalid_api_key", param: "code" });
  // The code enable used is spent: the same time step again is refused.
  const reused = await signInRequest(srv.fetch, srv.origin, "totp@beta-corp.example", testPassword, { code: totpCode(setup.secret, enabledAt) }, from);
  assert.deepEqual(await errorOf(reused), { status: 401, type: "authentication_error", code: "invalid_api_key", param: "code" });
  // The next time step's code (a step is accepted once, and the current one was spent turning TOTP on).
  const next = await signInRequest(srv.fetch, srv.origin, "totp@beta-corp.example", testPassword, { code: totpCode(setup.secret, enabledAt + 30_000) }, { "x-forwarded-for": "192.0.2.76" });
  assert.equal(next.status, 200, "password and a fresh code sign in");
  const withRecovery = await signInRequest(srv.fetch, srv.origin, "totp@beta-corp.example", testPassword, { code: recoveryCodes[0] }, { "x-forwarded-for": "192.0.2.78" });
  assert.equal(withRecovery.status, 200);
  const again = await signInRequest(srv.fetch, srv.origin, "totp@beta-corp.example", testPassword, { code: recoveryCodes[0] }, { "x-forwarded-for": "192.0.2.79" });
  assert.equal(again.status, 401, "a recovery code works once");
  const store = await openStore(srv.config, silentLogger());
  try {
    const stored = await store.db.selectFrom("recovery_codes").select("hash").where("user_id", "=", member.user.id).execute();
    assert.equal(stored.length, 10);
    assert.ok(stored.every((r) => !recoveryCodes.includes(r.hash)), "stored as hashes");
  } finally {
    await store.close();
  }
});

test("issue 33 owners manage members: invite (link once), change a role, remove (their sessions end); the last owner cannot be demoted", async () => {
  const link = await a.owner.json<{ token: string; path: string; url: string | null }>("POST", `/admin/v1/accounts/${a.account.id}/invites`, { email: "new@alpha-corp.example", role: "developer" });
  assert.equal(link.path, `/console#/invite/${link.token}`);
  const member = await clientFrom(srv.fetch, srv.origin, await srv.post("/console/api/invites/accept", { token: link.token, password: testPassword }));
  assert.equal(member.user.role, "developer");
  const listed = await a.owner.json<{ data: { id: string; email: string; role: string }[] }>("GET", `/admin/v1/accounts/${a.account.id}/members`);
  assert.ok(listed.data.some((m) => m.email === "new@alpha-corp.example" && m.role === "developer"));
  const last = await a.owner.send("PATCH", `/admin/v1/users/${a.owner.user.id}`, { role: "viewer" });
  assert.deepEqual(await errorOf(last), { status: 400, type: "invalid_request_error", code: "invalid_parameter", param: "role" });
  await a.owner.json("PATCH", `/admin/v1/users/${member.user.id}`, { role: "viewer" });
  assert.equal((await member.send("POST", "/admin/v1/keys", { account: a.account.id })).status, 403, "the new role holds at once");
  await a.owner.json("DELETE", `/admin/v1/users/${member.user.id}`);
  assert.equal((await member.send("GET", "/admin/v1/keys")).status, 401, "a removed member's session ends");
  assert.equal((await signInRequest(srv.fetch, srv.origin, "new@alpha-corp.example", testPassword, {}, { "x-forwarded-for": "192.0.2.90" })).status, 401);
  assert.equal(setCookieValue(await srv.post("/console/api/invites/accept", { token: link.token, password: testPassword })), null);
});

test("issue 33 CLI: `modelgate members invite` and `operators invite` print a one-time link once (the full URL with console.publicUrl); it works in the console", async () => {
  const dir = tempDir();
  const configFile = writeConfig(dir, { dataDir: srv.config.dataDir, models: [], console: { publicUrl: "https://gate.example.com" } });
  try {
    const member = await runCli(["members", "invite", "--account", a.account.name, "--email", "cli@alpha-corp.example", "--role", "developer", "--config", configFile, "--json"]);
    assert.equal(member.code, 0, member.stderr);
    const link = JSON.parse(member.stdout) as { token: string; url: string; role: string; accountId: string };
    assert.equal(link.url, `https://gate.example.com/console#/invite/${link.token}`);
    assert.deepEqual([link.role, link.accountId], ["developer", a.account.id]);
    const joined = await clientFrom(srv.fetch, srv.origin, await srv.post("/console/api/invites/accept", { token: link.token, password: testPassword }));
    assert.deepEqual([joined.user.role, joined.user.accountId], ["developer", a.account.id]);
    const operator = await runCli(["operators", "invite", "--email", "cli-ops@example.com", "--role", "operator-viewer", "--config", configFile]);
    assert.equal(operator.code, 0, operator.stderr);
    assert.match(operator.stdout, /invited cli-ops@example\.com as operator-viewer .*; the link, shown once:\nhttps:\/\/gate\.example\.com\/console#\/invite\/[\w-]{43}\n/);
    const entries = await adminJson<{ data: { action: string; actor: string }[] }>("GET", "/admin/v1/audit?action=operator.invite&actor=cli");
    assert.equal(entries.data.length, 1);
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
});
