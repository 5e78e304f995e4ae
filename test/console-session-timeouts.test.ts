// test: alone (a 1.5 s idle timeout and a 4 s session lifetime, each checked to within 0.5 s)
import { test } from "node:test";
import assert from "node:assert/strict";
import { startServer } from "../harness/server.ts";
import { clientFrom, joinWithToken, signInRequest, testPassword } from "./helpers/console-users.ts";

/** Issue 33's console session timeouts, apart from console-users.test.ts so that only this runs alone. */
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
