// Issue 29.4 (IPv6 clients by network, a bounded number of buckets) and 29.18 (an account's keys share a bucket).
import { after, test } from "node:test";
import assert from "node:assert/strict";
import { addressBucket } from "../src/plugins/rate-limit/address-bucket.ts";
import { MemoryStore } from "../src/plugins/rate-limit/memory-store.ts";
import { startServer, type TestServer } from "../harness/server.ts";
import { errorOf } from "./helpers/errors.ts";

const cleanups: (() => Promise<unknown> | unknown)[] = [];
after(async () => {
  for (const cleanup of cleanups.reverse()) await cleanup();
});

async function serve(raw: Record<string, unknown>): Promise<TestServer> {
  const srv = await startServer({ models: [], server: { trustProxy: ["127.0.0.1"] }, ...raw });
  cleanups.push(() => srv.close());
  return srv;
}

const anonymousFrom = async (srv: TestServer, address: string) => {
  const res = await srv.get("/v1/models", { headers: { "x-forwarded-for": address } });
  await res.arrayBuffer();
  return res.status;
};

test("issue 29.4 IPv6 clients share the anonymous bucket of their /64 (default): rotating addresses inside it gets 429", async () => {
  const srv = await serve({ anonymousRateLimit: { requests: 3, window: "1m" } });
  const seen = [];
  for (const address of ["2001:db8:1:2::1", "2001:db8:1:2::2", "2001:db8:1:2:aaaa::3", "2001:db8:1:2:ffff:ffff:ffff:ffff"]) seen.push(await anonymousFrom(srv, address));
  assert.deepEqual(seen, [401, 401, 401, 429]);
  assert.equal(await anonymousFrom(srv, "2001:db8:1:3::1"), 401, "the next /64 is another client");
  assert.equal(await anonymousFrom(srv, "192.0.2.1"), 401, "IPv4 addresses are their own bucket");
  assert.equal(await anonymousFrom(srv, "192.0.2.2"), 401);
});

test("issue 29.4 anonymousRateLimit.ipv6Prefix sets the network size (48: a whole site shares one bucket)", async () => {
  const srv = await serve({ anonymousRateLimit: { requests: 2, window: "1m", ipv6Prefix: 48 } });
  assert.deepEqual([await anonymousFrom(srv, "2001:db8:7:1::1"), await anonymousFrom(srv, "2001:db8:7:2::1"), await anonymousFrom(srv, "2001:db8:7:ffff::1")], [401, 401, 429]);
  assert.equal(await anonymousFrom(srv, "2001:db8:8::1"), 401);
});

test("issue 29.4 the bucket of an address: IPv6 masked to its prefix, IPv4 (also written as IPv6) as is", () => {
  assert.equal(addressBucket("2001:db8:1:2:3:4:5:6", 64), "2001:db8:1:2::/64");
  assert.equal(addressBucket("2001:DB8:1:2::9", 64), "2001:db8:1:2::/64");
  assert.equal(addressBucket("2001:db8:1:2:3:4:5:6", 56), "2001:db8:1::/56");
  assert.equal(addressBucket("2001:db8:1:2ff:3:4:5:6", 56), "2001:db8:1:200::/56");
  assert.equal(addressBucket("2001:db8::1", 128), "2001:db8::1/128");
  assert.equal(addressBucket("::ffff:10.1.2.3", 64), "10.1.2.3");
  assert.equal(addressBucket("10.1.2.3", 64), "10.1.2.3");
});

test("issue 29.4 the memory limiter holds at most maxBuckets buckets, dropping the least recently used", async () => {
  const store = new MemoryStore(Date.now, 3);
  cleanups.push(() => store.close());
  for (const bucket of ["a", "b", "c"]) await store.hit(bucket, 10, 60_000);
  await store.hit("a", 10, 60_000); // a is now the most recently used
  await store.hit("d", 10, 60_000); // b goes
  assert.equal(store.size, 3);
  assert.equal((await store.peek("a", 10, 60_000)).count, 2, "a kept its count");
  assert.equal((await store.peek("b", 10, 60_000)).count, 0, "b was dropped");
  for (let i = 0; i < 10_000; i++) await store.hit(`flood-${i}`, 10, 60_000);
  assert.equal(store.size, 3, "a flood of addresses cannot grow the map");
});

test("issue 29.18 a request is counted in the key's and the account's bucket together, or in neither (memory store)", async () => {
  const store = new MemoryStore();
  cleanups.push(() => store.close());
  const key = { bucket: "k", limit: 3, windowMs: 60_000 };
  const account = { bucket: "acct", limit: 2, windowMs: 60_000 };
  assert.deepEqual((await store.hitAll([key, account])).map((r) => [r.count, r.allowed]), [[1, true], [1, true]]);
  assert.deepEqual((await store.hitAll([key, account])).map((r) => [r.count, r.allowed]), [[2, true], [2, true]]);
  assert.deepEqual((await store.hitAll([key, account])).map((r) => [r.count, r.allowed]), [[2, true], [2, false]], "the account is full: not counted in the key's either");
  assert.equal((await store.peek("k", 3, 60_000)).count, 2);
  await store.release("acct", 60_000);
  assert.deepEqual((await store.hitAll([key, account])).map((r) => [r.count, r.allowed]), [[3, true], [2, true]]);
});

test("issue 29.18 an account's keys share the account's bucket (default: the plan's rateLimit); the headers show the most constraining bucket", async () => {
  const srv = await serve({
    plans: {
      shared: { rateLimit: { requests: 3, window: "1h" } },
      pooled: { rateLimit: { requests: 3, window: "1h" }, accountRateLimit: { requests: 5, window: "1h" } },
    },
  });
  const call = async (key: string) => {
    const res = await srv.get("/v1/models", { key });
    const headers = [res.headers.get("x-ratelimit-limit-requests"), res.headers.get("x-ratelimit-remaining-requests")];
    return { status: res.status, headers, error: res.status === 200 ? (await res.arrayBuffer(), null) : await errorOf(res) };
  };

  // Default: the account gets the plan's rate, however many keys it has.
  const a = await srv.createKey({ plan: "shared" });
  const b = await srv.createKey({ account: a.accountId });
  assert.deepEqual((await call(a.key)).headers, ["3", "2"]);
  assert.deepEqual((await call(a.key)).headers, ["3", "1"]);
  assert.deepEqual((await call(b.key)).headers, ["3", "0"], "the account's bucket: 2 left for b's key, none for the account");
  const refused = await call(b.key);
  assert.deepEqual([refused.status, refused.error?.code, refused.headers], [429, "rate_limit_exceeded", ["3", "0"]]);

  // A larger account bucket: each key still has its own rate, all of them together the account's.
  const c = await srv.createKey({ plan: "pooled" });
  const d = await srv.createKey({ account: c.accountId });
  assert.deepEqual((await call(c.key)).headers, ["3", "2"], "key 2 left, account 4 left: the key's");
  await call(c.key);
  assert.deepEqual((await call(c.key)).headers, ["3", "0"]);
  assert.equal((await call(c.key)).status, 429, "the key's own limit");
  assert.deepEqual((await call(d.key)).headers, ["5", "1"], "key 2 left, account 1 left: the account's");
  assert.deepEqual((await call(d.key)).headers, ["5", "0"]);
  const full = await call(d.key);
  assert.deepEqual([full.status, full.headers], [429, ["5", "0"]]);
  const other = await srv.createKey({ plan: "pooled" });
  assert.deepEqual((await call(other.key)).headers, ["3", "2"], "another account is not affected");
});
