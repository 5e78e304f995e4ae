import { test, before, after } from "node:test";
import assert from "node:assert/strict";
import { Agent, fetch as undiciFetch } from "undici";
import { startServer, type TestServer } from "../harness/server.ts";
import { freePort } from "../harness/llama-server.ts";
import { startOidcProvider, type ProviderUser, type TestOidcProvider } from "./helpers/oidc-provider.ts";
import { joinWithToken, sessionCookie } from "./helpers/console-users.ts";
import { passwordResetLink } from "../src/auth/console-users.ts";
import { openStore } from "../src/store/store.ts";
import { silentLogger } from "../harness/keys.ts";

/**
 * Issue 33: operators sign in with OpenID Connect (authorization code + PKCE through openid-client) against a real
 * provider started here (the `oidc-provider` package): the role from a claim or the email list, and every forged or
 * mismatched answer refused (audience, issuer, nonce, state), as is an email with no operator role.
 */
const adminToken = "Vb3nQ8xLr1sWk6pTz9yHd4mJc7gFa2eUo5iRt0KwNe";
const client = { clientId: "modelgate-console", clientSecret: "a-client-secret-for-tests-0123456789" };
let idp: TestOidcProvider;
let srv: TestServer;
let agent: Agent;

before(async () => {
  const port = await freePort();
  idp = await startOidcProvider({ ...client, redirectUri: `https://127.0.0.1:${port}/console/api/oidc/callback` });
  srv = await startServer({
    adminToken,
    server: { port },
    console: { oidc: { issuer: idp.issuer, ...client, caFile: idp.caFile, roleClaim: "groups", adminEmails: ["admin@ops.example"] } },
    models: [],
  });
  agent = new Agent({ connect: { ca: [srv.ca, idp.ca] } });
});

after(async () => {
  await srv?.close();
  await idp?.close();
  await agent?.close();
});

/**
 * A browser in miniature: follows redirects between the console and the provider, keeping cookies (both listen on
 * 127.0.0.1, and cookies do not tell ports apart). `onCallback` may change the provider's answer on its way back.
 * Returns where the console sent the browser at the end, and the session cookie if one was set.
 */
async function signInThroughProvider(user: ProviderUser, onCallback: (url: URL) => URL = (u) => u): Promise<{ landing: string; session: string | null }> {
  idp.nextUser(user);
  const jar = new Map<string, string>();
  let url = new URL(`${srv.origin}/console/api/oidc/start`);
  for (let hop = 0; hop < 20; hop++) {
    if (url.pathname === "/console/api/oidc/callback") url = onCallback(url);
    const res = await undiciFetch(url, { redirect: "manual", headers: { cookie: [...jar].map(([k, v]) => `${k}=${v}`).join("; ") }, dispatcher: agent });
    for (const line of res.headers.getSetCookie()) {
      const [pair, ...attrs] = line.split(";");
      const [name, value] = [pair!.slice(0, pair!.indexOf("=")), pair!.slice(pair!.indexOf("=") + 1)];
      const expired = attrs.some((a) => /max-age=0$/i.test(a.trim()) || /expires=Thu, 01 Jan 1970/i.test(a.trim()));
      if (expired || value === "") jar.delete(name);
      else jar.set(name, value);
    }
    await res.arrayBuffer();
    const location = res.headers.get("location");
    assert.ok(res.status >= 300 && res.status < 400 && location, `${url.pathname}: ${res.status}`);
    const next = new URL(location, url);
    if (next.pathname === "/console") return { landing: next.hash, session: jar.get(sessionCookie) ?? null };
    url = next;
  }
  assert.fail("too many redirects");
}

async function sessionOf(cookie: string): Promise<{ user: { email: string; role: string; kind: string } }> {
  const res = await srv.get("/console/api/session", { headers: { cookie: `${sessionCookie}=${cookie}` } });
  assert.equal(res.status, 200);
  return (await res.json()) as { user: { email: string; role: string; kind: string } };
}

async function auditOf(action: string): Promise<{ actor: string; actorEmail: string | null; detail: Record<string, unknown> }[]> {
  const res = await srv.get(`/admin/v1/audit?action=${action}`, { headers: { authorization: `Bearer ${adminToken}` } });
  return ((await res.json()) as { data: { actor: string; actorEmail: string | null; detail: Record<string, unknown> }[] }).data;
}

test("issue 33 OIDC: an operator signs in through the provider (code + PKCE); the role comes from the email list or the role claim; the session works on the admin API and is audited as the operator", async () => {
  const admin = await signInThroughProvider({ email: "admin@ops.example" });
  assert.equal(admin.landing, "#/");
  assert.ok(admin.session);
  assert.deepEqual((await sessionOf(admin.session)).user, { ...(await sessionOf(admin.session)).user, email: "admin@ops.example", role: "operator-admin", kind: "operator" });
  assert.equal((await srv.get("/admin/v1/accounts", { headers: { cookie: `${sessionCookie}=${admin.session}` } })).status, 200);

  const viewer = await signInThroughProvider({ email: "Viewer@Ops.Example", groups: ["staff", "operator-viewer"] });
  assert.equal((await sessionOf(viewer.session!)).user.role, "operator-viewer");
  const logins = await auditOf("auth.login");
  assert.ok(logins.some((e) => e.actor === "operator" && e.actorEmail === "admin@ops.example" && e.detail.method === "oidc"));
  assert.ok(logins.some((e) => e.actor === "operator" && e.actorEmail === "viewer@ops.example"));
  const joined = await auditOf("operator.join");
  assert.deepEqual(joined.map((e) => e.actorEmail).sort(), ["admin@ops.example", "viewer@ops.example"]);
});

test("issue 33 OIDC: an ID token for another audience, from another issuer or with another nonce is refused, as is a changed state: no session, the failure audited", async () => {
  const cases: [string, (url: URL) => URL, ((c: Record<string, unknown>) => Record<string, unknown>) | null][] = [
    ["wrong audience", (u) => u, (c) => ({ ...c, aud: "another-client" })],
    ["wrong issuer", (u) => u, (c) => ({ ...c, iss: "https://evil.example" })],
    ["wrong nonce", (u) => u, (c) => ({ ...c, nonce: "not-the-one-we-sent" })],
    ["changed state", (u) => { u.searchParams.set("state", "forged-state"); return u; }, null],
  ];
  const before = (await auditOf("auth.failed")).length;
  for (const [label, onCallback, change] of cases) {
    idp.tamper(change);
    try {
      const attempt = await signInThroughProvider({ email: "admin@ops.example" }, onCallback);
      assert.equal(attempt.session, null, `${label}: no session`);
      assert.match(attempt.landing, /^#\/signin\?error=/, label);
    } finally {
      idp.tamper(null);
    }
  }
  // One auth.failed entry per address per minute: the four refusals from 127.0.0.1 make one (or none if already written).
  const failed = await auditOf("auth.failed");
  assert.ok(failed.length >= Math.max(before, 1) && failed.some((e) => String(e.detail.reason).startsWith("oidc:")));
  // The same provider and user, untampered, still sign in: the refusals were about the answers, not the setup.
  assert.ok((await signInThroughProvider({ email: "admin@ops.example" })).session);
});

test("issue 33 OIDC: an email with no operator role (not in the list, no role claim) is refused, and so is an account member's email", async () => {
  const stranger = await signInThroughProvider({ email: "stranger@elsewhere.example", groups: ["staff"] });
  assert.equal(stranger.session, null);
  assert.match(decodeURIComponent(stranger.landing), /no operator role/);

  const account = (await (await srv.post("/admin/v1/accounts", { name: "sso-member" }, { headers: { authorization: `Bearer ${adminToken}` } })).json()) as { id: string };
  await joinWithToken(srv.fetch, srv.origin, adminToken, account.id, "member@sso-member.example", "owner");
  const member = await signInThroughProvider({ email: "member@sso-member.example", groups: ["operator-admin"] });
  assert.equal(member.session, null, "a member does not become an operator through the provider");

  // With OIDC configured, an operator's password is not a way in.
  const unverified = await signInThroughProvider({ email: "admin@ops.example", emailVerified: false });
  assert.equal(unverified.session, null, "an unverified email is refused");
});

const sessionStatus = async (cookie: string) => (await srv.get("/console/api/session", { headers: { cookie: `${sessionCookie}=${cookie}` } })).status;

async function operators(): Promise<{ data: { id: string; email: string; role: string }[]; resetLinks: { id: string; userId: string }[] }> {
  const res = await srv.get("/admin/v1/operators", { headers: { authorization: `Bearer ${adminToken}` } });
  assert.equal(res.status, 200);
  return (await res.json()) as { data: { id: string; email: string; role: string }[]; resetLinks: { id: string; userId: string }[] };
}

test("issue 42.10 OIDC: the role claim decides the role at every sign-in: operator-admin, then operator-viewer (the admin's session ends), then staff only (refused, every session ends, the operator is removed)", async () => {
  const who = { email: "rotating@ops.example", subject: "sub-rotating" };
  const admin = await signInThroughProvider({ ...who, groups: ["operator-admin"] });
  assert.equal((await sessionOf(admin.session!)).user.role, "operator-admin");

  const viewer = await signInThroughProvider({ ...who, groups: ["operator-viewer"] });
  assert.equal((await sessionOf(viewer.session!)).user.role, "operator-viewer");
  assert.equal(await sessionStatus(admin.session!), 401, "the session opened as operator-admin ends when the role is lowered");

  const staff = await signInThroughProvider({ ...who, groups: ["staff"] });
  assert.equal(staff.session, null, "no operator role any more: refused");
  assert.match(decodeURIComponent(staff.landing), /no operator role/);
  assert.equal(await sessionStatus(viewer.session!), 401, "losing the role ends the user's sessions");
  assert.ok(!(await operators()).data.some((u) => u.email === who.email), "and the operator is removed");
  const removed = (await auditOf("operator.remove")).find((e) => e.actorEmail === who.email);
  assert.equal(removed?.detail.via, "oidc");

  // Given the role again at the provider, the same identity signs in again (as a new operator user).
  const back = await signInThroughProvider({ ...who, groups: ["operator-viewer"] });
  assert.equal((await sessionOf(back.session!)).user.role, "operator-viewer");
});

test("issue 42.10 OIDC: an operator invited locally keeps the stored role whatever the claim says; the claim decides only for operators the provider made", async () => {
  await joinWithToken(srv.fetch, srv.origin, adminToken, null, "local@ops.example", "operator-viewer");
  const promoted = await signInThroughProvider({ email: "local@ops.example", groups: ["operator-admin"] });
  assert.equal((await sessionOf(promoted.session!)).user.role, "operator-viewer", "the claim does not change a local invite's role");
  const none = await signInThroughProvider({ email: "local@ops.example", groups: [] });
  assert.equal((await sessionOf(none.session!)).user.role, "operator-viewer", "and no claim does not take it away");
});

test("issue 42.11 OIDC: an operator is linked by iss + sub (an email change at the provider follows the user and withdraws their reset links); a new sub with a linked operator's email is refused and audited; an unverified email matches no one", async () => {
  const first = await signInThroughProvider({ email: "linked@ops.example", subject: "sub-linked", groups: ["operator-admin"] });
  const original = (await sessionOf(first.session!)) as unknown as { user: { id: string; email: string } };
  // A reset link made before single sign-on was turned on (the admin API refuses operators' resets with it on).
  const store = await openStore(srv.config, silentLogger());
  try {
    const user = (await store.users.get(original.user.id))!;
    await passwordResetLink(store, user, { actor: "cli", source: "test" });
  } finally {
    await store.close();
  }
  assert.ok((await operators()).resetLinks.some((r) => r.userId === original.user.id));

  const renamed = await signInThroughProvider({ email: "renamed@ops.example", subject: "sub-linked", groups: ["operator-admin"] });
  const after = (await sessionOf(renamed.session!)) as unknown as { user: { id: string; email: string } };
  assert.deepEqual(after.user.id, original.user.id, "the same sub is the same operator, whatever the email");
  assert.equal(after.user.email, "renamed@ops.example");
  assert.ok(!(await operators()).resetLinks.some((r) => r.userId === original.user.id), "the email change withdrew the reset link");

  const impostor = await signInThroughProvider({ email: "renamed@ops.example", subject: "sub-impostor", groups: ["operator-admin"] });
  assert.equal(impostor.session, null, "a new sub with a linked operator's email is refused");
  assert.match(decodeURIComponent(impostor.landing), /another identity at the provider/);
  const conflict = (await auditOf("auth.oidc_conflict")).find((e) => e.detail.subject === "sub-impostor");
  assert.deepEqual([conflict?.actor, conflict?.detail.email, conflict?.detail.userId], ["anonymous", "renamed@ops.example", original.user.id]);

  // An operator invited locally (not linked yet) is matched by email only when the provider says it is verified.
  const local = await joinWithToken(srv.fetch, srv.origin, adminToken, null, "unlinked@ops.example", "operator-admin");
  const unverified = await signInThroughProvider({ email: "unlinked@ops.example", subject: "sub-unlinked", emailVerified: null });
  assert.equal(unverified.session, null, "no email_verified: no match by email");
  assert.match(decodeURIComponent(unverified.landing), /does not say this email address is verified/);
  const verified = await signInThroughProvider({ email: "unlinked@ops.example", subject: "sub-unlinked" });
  assert.equal(((await sessionOf(verified.session!)) as unknown as { user: { id: string } }).user.id, local.user.id);
  assert.ok((await auditOf("operator.oidc_link")).some((e) => e.detail.userId === local.user.id && e.detail.subject === "sub-unlinked"));
  // Linked now: another sub with that (verified) email is refused too.
  assert.equal((await signInThroughProvider({ email: "unlinked@ops.example", subject: "sub-other" })).session, null);
});
