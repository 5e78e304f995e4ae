import assert from "node:assert/strict";
import { randomBytes } from "node:crypto";
import { after, test } from "node:test";
import { Redis } from "ioredis";
import { redisTestUrl } from "../harness/keys.ts";
import { TcpProxy } from "../harness/tcp-proxy.ts";
import { subscribedConnection } from "../src/store/redis-subscriber.ts";
import { until } from "./helpers/wait-for.ts";

/**
 * A subscriber's connection closed while it subscribes again after a reconnection: ioredis's own resubscription
 * (autoResubscribe) leaves that SUBSCRIBE's rejection unhandled, which ends a Node process. With a plain ioredis
 * subscriber in place of subscribedConnection, the first test below fails with "Connection is closed." (checked
 * 2026-11-30, ioredis 5.11.1).
 */
const publisher = new Redis(redisTestUrl, { lazyConnect: true });
const unhandled: unknown[] = [];
const onUnhandled = (reason: unknown) => unhandled.push(reason);
process.on("unhandledRejection", onUnhandled);
const cleanups: (() => unknown)[] = [];
after(async () => {
  for (const cleanup of cleanups.reverse()) await cleanup();
  process.off("unhandledRejection", onUnhandled);
  publisher.disconnect();
});

/**
 * Subscribes `subscriber` (connected through `proxy`) and makes its connection drop while its resubscription after a
 * reconnection is still on its way: every byte the client sends is held 1 s, and the client is closed (as at
 * shutdown) the moment it is ready again, with that SUBSCRIBE pending.
 */
async function closeWhileResubscribing(subscriber: Redis, proxy: TcpProxy): Promise<void> {
  const closed = new Promise<void>((resolve) => subscriber.once("end", resolve));
  subscriber.once("ready", () => subscriber.disconnect());
  proxy.cut("refuse");
  proxy.restore();
  proxy.delay(1000);
  await closed;
  // The rejection is delivered on a later turn.
  await new Promise((r) => setTimeout(r, 100));
}

test("subscribedConnection: a SUBSCRIBE cut short is not left unhandled", async () => {
  const channel = `mg-test-sub-${randomBytes(6).toString("hex")}`;
  const { proxy, url } = await TcpProxy.inFrontOf(redisTestUrl);
  cleanups.push(() => proxy.close());
  const subscriber = await subscribedConnection(url, channel, () => {});
  const before = unhandled.length;
  await closeWhileResubscribing(subscriber, proxy);
  assert.equal(unhandled.length, before, `no unhandled rejection: ${unhandled.map(String).join("; ")}`);
});

test("subscribedConnection subscribes again after each reconnection", async () => {
  const channel = `mg-test-sub-${randomBytes(6).toString("hex")}`;
  const { proxy, url } = await TcpProxy.inFrontOf(redisTestUrl);
  cleanups.push(() => proxy.close());
  const received: string[] = [];
  const subscriber = await subscribedConnection(url, channel, (m) => received.push(m));
  cleanups.push(() => subscriber.disconnect());
  await publisher.connect();
  await publisher.publish(channel, "first");
  await until(() => received.includes("first"), "the first message", 5000);

  for (const round of [1, 2]) {
    proxy.cut("refuse");
    proxy.restore();
    // Subscribed again on the reconnection: a message published now arrives, once.
    await until(async () => (await publisher.publish(channel, `after ${round}`)) > 0 && received.includes(`after ${round}`), `a message after reconnection ${round}`, 5000);
  }
  assert.deepEqual(received.filter((m) => m === "first"), ["first"], "a message once, not once per subscription");
});

test("subscribedConnection that fails leaves no connection behind, reconnecting for a caller that never got it", async () => {
  const channel = `mg-test-sub-${randomBytes(6).toString("hex")}`;
  const talked = new Set<object>();
  const { proxy, url } = await TcpProxy.inFrontOf(redisTestUrl, { onClientData: (_chunk, connection) => talked.add(connection) });
  cleanups.push(() => proxy.close());
  proxy.cut("refuse");
  await assert.rejects(subscribedConnection(url, channel, () => {}));
  proxy.restore();
  await new Promise((r) => setTimeout(r, 1500));
  assert.equal(talked.size, 0, "nothing connected to Redis after the failure");
});
