import type { Redis } from "ioredis";
import { newRedis } from "../../store/redis-client.ts";
import { subscribedConnection } from "../../store/redis-subscriber.ts";

const channel = "modelgate:batches:cancel";

/**
 * Issue 42.6: tells every replica at once that a batch was cancelled (Redis pub/sub), so the node working it stops
 * its lines within a second whichever node took the cancel. Without Redis the runner polls the store instead.
 */
export class BatchCancelBus {
  private constructor(
    private readonly publisher: Redis,
    private readonly subscriber: Redis,
  ) {}

  static async connect(url: string, onCancel: (batchId: string) => void): Promise<BatchCancelBus> {
    const publisher = await newRedis(url, { lazyConnect: true, connectTimeout: 1000, maxRetriesPerRequest: 1, commandTimeout: 1000 });
    // Reported by the failing call; ioredis reconnects on its own.
    publisher.on("error", () => {});
    const [subscribed, published] = await Promise.allSettled([subscribedConnection(url, channel, onCancel), publisher.connect()]);
    if (subscribed.status === "fulfilled" && published.status === "fulfilled") return new BatchCancelBus(publisher, subscribed.value);
    // One side failed: neither connection is left behind, reconnecting for a bus nobody holds.
    publisher.disconnect();
    if (subscribed.status === "fulfilled") subscribed.value.disconnect();
    throw subscribed.status === "rejected" ? subscribed.reason : (published as PromiseRejectedResult).reason;
  }

  async publish(batchId: string): Promise<void> {
    await this.publisher.publish(channel, batchId);
  }

  close(): void {
    this.subscriber.disconnect();
    this.publisher.disconnect();
  }
}
