import { test } from "node:test";
import assert from "node:assert/strict";
import { randomBytes } from "node:crypto";
import { startServer } from "../harness/server.ts";
import { freshPostgres, redisTestUrl } from "../harness/keys.ts";
import { clientFrom, consoleClient, joinWithToken, signInRequest, testPassword } from "./helpers/console-users.ts";

/**
 * Issue 33: console sessions are shared by replicas, in the database (PostgreSQL here) or in Redis when it is
 * configured: a session made on one replica works on the other, and signing out on one ends it on both.
 */
const adminToken = "Kd8rWq2nZs5vXb1mLp7tYc4hGf9jNa3eUo6iRk0TwQe";

for (const where of ["database", "redis"] as const) {
  test(`issue 33 sessions in the ${where}: a session from replica A works on B; signing out on A, or everywhere on B, ends it on both`, async () => {
    const db = await freshPostgres();
    const raw = {
      adminToken,
      models: [],
      database: { url: db.url },
      keySecret: `shared-secret-${randomBytes(8).toString("hex")}`,
      // Its own deployment name: sessions in Redis are namespaced by it, so tests sharing the Redis do not meet.
      deployment: `console-replicas-${randomBytes(4).toString("hex")}`,
      ...(where === "redis" ? { redis: { url: redisTestUrl } } : {}),
    };
    const a = await startServer(raw);
    const b = await startServer(raw);
    try {
      const account = (await (await a.post("/admin/v1/accounts", { name: "replicated" }, { headers: { authorization: `Bearer ${adminToken}` } })).json()) as { id: string };
      const onA = await joinWithToken(a.fetch, a.origin, adminToken, account.id, "r@replicated.example", "owner");
      const onB = consoleClient(b.fetch, b.origin, onA.cookie, { csrfToken: onA.csrf, user: onA.user });
      assert.equal((await onB.send("GET", "/admin/v1/keys")).status, 200, "A's session works on B");
      assert.equal((await onB.send("POST", "/admin/v1/keys", { account: account.id, name: "from-b" })).status, 201, "with its CSRF token");
      assert.equal((await onA.send("POST", "/console/api/logout")).status, 200);
      assert.equal((await onB.send("GET", "/admin/v1/keys")).status, 401, "signed out on A: refused on B");

      const first = await clientFrom(a.fetch, a.origin, await signInRequest(a.fetch, a.origin, "r@replicated.example", testPassword));
      const second = await clientFrom(a.fetch, a.origin, await signInRequest(a.fetch, a.origin, "r@replicated.example", testPassword));
      const secondOnB = consoleClient(b.fetch, b.origin, second.cookie, { csrfToken: second.csrf, user: second.user });
      assert.equal((await secondOnB.send("POST", "/console/api/logout-everywhere")).status, 200);
      assert.equal((await first.send("GET", "/admin/v1/keys")).status, 401, "everywhere, from B: ended on A");
      assert.equal((await second.send("GET", "/admin/v1/keys")).status, 401);
    } finally {
      await a.close();
      await b.close();
      await db.drop();
    }
  });
}
