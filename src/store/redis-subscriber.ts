import type { Redis } from "ioredis";
import { newRedis } from "./redis-client.ts";

/**
 * A Redis connection subscribed to `channel`, subscribed again after each reconnection by this code rather than by
 * ioredis. ioredis's own resubscription (`autoResubscribe`) sends SUBSCRIBE without handling its promise: when the
 * connection drops again before Redis answers (a Redis restarting, a proxy cutting connections), the rejection is
 * unhandled, and an unhandled rejection ends a Node process (ioredis 5.11 and 6.0; redis/ioredis#2187). Here a
 * failed SUBSCRIBE is dropped: the next `ready` tries again.
 */
export async function subscribedConnection(url: string, channel: string, onMessage: (message: string) => void): Promise<Redis> {
  const subscriber = await newRedis(url, { lazyConnect: true, connectTimeout: 1000, autoResubscribe: false });
  subscriber.on("error", () => {
    // ioredis reconnects on its own; the `ready` after it subscribes again.
  });
  subscriber.on("message", (from: string, message: string) => {
    if (from === channel) onMessage(message);
  });
  try {
    await subscriber.connect();
    await subscriber.subscribe(channel);
  } catch (err) {
    // Not left reconnecting in the background for a caller that never got it.
    subscriber.disconnect();
    throw err;
  }
  subscriber.on("ready", () => void subscriber.subscribe(channel).catch(() => {}));
  return subscriber;
}
