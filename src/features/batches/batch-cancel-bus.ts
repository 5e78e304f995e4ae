import { Redis } from "ioredis";

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
    const options = { lazyConnect: true, connectTimeout: 1000 };
    const publisher = new Redis(url, { ...options, maxRetriesPerRequest: 1, commandTimeout: 1000 });
    const subscriber = new Redis(url, options);
    // Reported by the failing call; ioredis reconnects (and resubscribes) on its own.
    publisher.on("error", () => {});
    subscriber.on("error", () => {});
    subscriber.on("message", (_channel: string, batchId: string) => onCancel(batchId));
    await Promise.all([publisher.connect(), subscriber.connect()]);
    await subscriber.subscribe(channel);
    return new BatchCancelBus(publisher, subscriber);
  }

  async publish(batchId: string): Promise<void> {
    await this.publisher.publish(channel, batchId);
  }

  close(): void {
    this.subscriber.disconnect();
    this.publisher.disconnect();
  }
}
