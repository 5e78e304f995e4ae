// Issue 32: the token counters' outage policy, the request limiter's (redis.onError): `open` counts per replica,
// starting each window at what Redis last said of it; `closed` answers 503. The shared store here is the real
// Redis store until it is closed under the breaker (what a dead Redis looks like to it).
import { test } from "node:test";
import assert from "node:assert/strict";
import { randomBytes } from "node:crypto";
import { redisTestUrl, silentLogger } from "../harness/keys.ts";
import { RedisTokenStore } from "../src/plugins/rate-limit/token-redis-store.ts";
import { ResilientTokenStore } from "../src/plugins/rate-limit/resilient-token-store.ts";
import type { ReserveOutcome } from "../src/plugins/rate-limit/token-store.ts";

const taken = (o: ReserveOutcome) => (o.missing ? null : o.taken);

for (const onError of ["open", "closed"] as const) {
  test(`issue 32 token counters while Redis is away (redis.onError: ${onError})`, async () => {
    const shared = await RedisTokenStore.connect(redisTestUrl);
    const store = new ResilientTokenStore(shared, onError, silentLogger());
    const hit = { bucket: `test:${randomBytes(6).toString("hex")}`, limit: 1000, amount: 900, windowMs: 60_000 };
    try {
      assert.equal(taken(await store.reserve([hit])), true, "900 of 1000 reserved in Redis");
      await shared.close(); // Redis gone: every command fails from now on
      for (let i = 0; i < 5; i++) await store.reserve([{ ...hit, amount: 0 }]).catch(() => null);
      assert.equal(store.healthy, false, "the circuit is open");
      if (onError === "closed") {
        await assert.rejects(store.reserve([{ ...hit, amount: 50 }]), (err: { code?: string }) => err.code === "overloaded");
      } else {
        // The fallback starts the window at the 900 Redis last reported: 100 left, not a fresh 1000.
        assert.equal(taken(await store.reserve([{ ...hit, amount: 200 }])), false);
        assert.equal(taken(await store.reserve([{ ...hit, amount: 100 }])), true);
      }
    } finally {
      await store.close();
    }
  });
}
