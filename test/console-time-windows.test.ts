// test: alone (a 1.5 s idle timeout and a 4 s session lifetime, each checked to within 0.5 s; 24 sign-ins, each a password hash, within the first of the audit's 1-minute windows)
import { test } from "node:test";
import assert from "node:assert/strict";
import { startServer } from "../harness/server.ts";
import { errorOf } from "./helpers/errors.ts";
import { clientFrom, joinWithToken, signInRequest, testPassword } from "./helpers/console-users.ts";

/*
 * Issue 33's console rules that hold within a time window (session timeouts, sign-in throttling and its audit), apart
 * from console-users.test.ts so that only these run alone. Each test starts its own server, so its windows start with
 * it.
 */
const adminToken = "Yq4vN8sKpT2wLz6RbX1mHc9dFj3GtA7uEe5SnV0kQiW";
const admin = { authorization: `Bearer ${adminToken}` };

test("issue 33 sessions end after the idle timeout and after the absolute lifetime, whatever the activity", async () => {
  const short = await startServer({ adminToken, console: { sessionIdleTimeout: "1500ms", sessionLifetime: "4s" }, models: [] });
  try {
    const account = (await (await short.post("/admin/v1/accounts", { name: "timeouts" }, { headers: admin })).json()) as { id: string };
    const member = await joinWithToken(short.fetch, short.origin, adminToken, account.id, "t@timeouts.example", "owner");
    const busy = await clientFrom(short.fetch, short.origin, await signInRequest(short.fetch, short.origin, "t@timeouts.example", testPassword));
    const started = Date.now();
    let idleChecked = false;
    let lastOk = 0;
    while (Date.now() - started < 6000) {
      if (!idleChecked && Date.now() - started > 1700) {
        assert.equal((await member.send("GET", "/console/api/session")).status, 401, "idle past 1.5 s");
        idleChecked = true;
      }
      const status = (await busy.send("GET", "/admin/v1/keys")).status;
      if (status !== 200) break;
      lastOk = Date.now() - started;
      await new Promise((r) => setTimeout(r, 300));
    }
    assert.ok(idleChecked);
    assert.ok(lastOk > 2000 && lastOk < 4500, `an active session lives to its lifetime and not past it (last ok at ${lastOk} ms)`);
  } finally {
    await short.close();
  }
});

test("issue 33 sign-in throttling and audit: failures per email from many addresses hit the email's limit (429 even with the right password); each attempt is audited (auth.login by the user, auth.failed) and a flood adds one entry per address", async () => {
  const srv = await startServer({ adminToken, server: { trustProxy: ["127.0.0.1"] }, console: { loginFailureLimit: { requests: 3, window: "1m" } }, models: [] });
  try {
    const account = async (name: string) => (await (await srv.post("/admin/v1/accounts", { name }, { headers: admin })).json()) as { id: string };
    const alpha = await account("alpha-corp");
    const owner = await joinWithToken(srv.fetch, srv.origin, adminToken, alpha.id, "owner@alpha-corp.example", "owner");
    await joinWithToken(srv.fetch, srv.origin, adminToken, (await account("beta-corp")).id, "owner@beta-corp.example", "owner");
    const auditOf = async <T>(query: string) => (await (await srv.get(`/admin/v1/audit?${query}`, { headers: admin })).json()) as { data: T[] };

    const email = "owner@beta-corp.example";
    for (let i = 0; i < 3; i++) {
      const res = await signInRequest(srv.fetch, srv.origin, email, `wrong password number ${i}`, {}, { "x-forwarded-for": `203.0.113.${i + 1}` });
      assert.deepEqual(await errorOf(res), { status: 401, type: "authentication_error", code: "invalid_api_key", param: null });
    }
    const right = await signInRequest(srv.fetch, srv.origin, email, testPassword, {}, { "x-forwarded-for": "203.0.113.50" });
    assert.deepEqual(await errorOf(right), { status: 429, type: "rate_limit_error", code: "rate_limit_exceeded", param: null });
    assert.ok(Number(right.headers.get("retry-after")) >= 1);

    for (let i = 0; i < 20; i++) await signInRequest(srv.fetch, srv.origin, `nobody${i}@example.com`, "some wrong password", {}, { "x-forwarded-for": "203.0.113.99" });
    const failed = await auditOf<{ actor: string; source: string; detail: { email: string; reason: string } }>("action=auth.failed");
    const flood = failed.data.filter((e) => e.source === "203.0.113.99");
    assert.equal(flood.length, 1, "one entry for the flooding address in this window");
    const byEmail = failed.data.filter((e) => e.detail?.email === email).map((e) => [e.actor, e.detail.reason]);
    assert.deepEqual(byEmail, [["anonymous", "wrong password"], ["anonymous", "wrong password"], ["anonymous", "wrong password"]]);
    const signedIn = await clientFrom(srv.fetch, srv.origin, await signInRequest(srv.fetch, srv.origin, "owner@alpha-corp.example", testPassword, {}, { "x-forwarded-for": "203.0.113.60" }));
    assert.equal(signedIn.user.id, owner.user.id);
    const logins = await auditOf<{ actor: string; actorId: string; actorEmail: string; detail: { method: string } }>(`action=auth.login&account=${alpha.id}`);
    assert.ok(logins.data.some((e) => e.actor === "member" && e.actorEmail === "owner@alpha-corp.example" && e.actorId === owner.user.id && e.detail.method === "password"));
  } finally {
    await srv.close();
  }
});
