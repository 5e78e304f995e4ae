import { LRUCache } from "lru-cache";
import type { Redis } from "ioredis";
import { connectFailFast } from "../rate-limit/redis-connection.ts";

/** Where the response cache keeps its compressed entries: bytes under a key, each with its own TTL. */
export interface ResponseStore {
  get(key: string): Promise<Buffer | null>;
  /** Issues the write before it returns (a later `get` from this node is served after it). */
  set(key: string, value: Buffer, ttlMs: number): Promise<void>;
  /** Removes every entry whose key starts with `prefix`; resolves to how many. */
  deletePrefix(prefix: string): Promise<number>;
  ping(): Promise<unknown>;
  close(): Promise<void>;
}

/** This process's store: least recently used entries go first once the entries' bytes pass `maxBytes`. */
export class MemoryResponseStore implements ResponseStore {
  private readonly lru: LRUCache<string, Buffer>;

  constructor(maxBytes: number) {
    this.lru = new LRUCache<string, Buffer>({ maxSize: maxBytes, sizeCalculation: (value, key) => value.length + key.length });
  }

  /** The bytes held (entries and their keys), for tests of the bound. */
  get size(): number {
    return this.lru.calculatedSize;
  }

  async get(key: string): Promise<Buffer | null> {
    return this.lru.get(key) ?? null;
  }

  async set(key: string, value: Buffer, ttlMs: number): Promise<void> {
    this.lru.set(key, value, { ttl: ttlMs });
  }

  async deletePrefix(prefix: string): Promise<number> {
    let removed = 0;
    for (const key of [...this.lru.keys()]) if (key.startsWith(prefix) && this.lru.delete(key)) removed++;
    return removed;
  }

  async ping(): Promise<void> {}

  async close(): Promise<void> {
    this.lru.clear();
  }
}

/** Keys scanned per SCAN call while purging. */
const scanCount = 1000;

/**
 * The store shared by the replicas: one Redis string per entry with its TTL (PX), so Redis expires them (and its
 * own `maxmemory` policy bounds them). The connection fails fast (no offline queue, a 250 ms command timeout) and
 * is made on first use, so a node whose models cache nothing never opens it.
 */
export class RedisResponseStore implements ResponseStore {
  private connecting: Promise<Redis> | null = null;

  constructor(private readonly url: string) {}

  /** The connection, made once; a failed attempt is forgotten so the next call tries again. */
  connection(): Promise<Redis> {
    this.connecting ??= connectFailFast(this.url, 250).catch((err: unknown) => {
      this.connecting = null;
      throw err;
    });
    return this.connecting;
  }

  async get(key: string): Promise<Buffer | null> {
    const redis = await this.connection();
    return timed(redis, redis.getBuffer(key));
  }

  async set(key: string, value: Buffer, ttlMs: number): Promise<void> {
    const redis = await this.connection();
    await timed(redis, redis.set(key, value, "PX", Math.max(1, Math.round(ttlMs))));
  }

  async deletePrefix(prefix: string): Promise<number> {
    const redis = await this.connection();
    const match = `${prefix.replace(/[*?[\]\\]/g, "\\$&")}*`;
    let cursor = "0";
    let removed = 0;
    do {
      const [next, keys] = await redis.scan(cursor, "MATCH", match, "COUNT", scanCount);
      cursor = next;
      if (keys.length > 0) removed += await redis.unlink(...keys);
    } while (cursor !== "0");
    return removed;
  }

  async ping(): Promise<unknown> {
    const redis = await this.connection();
    return timed(redis, redis.ping());
  }

  async close(): Promise<void> {
    const connecting = this.connecting;
    this.connecting = null;
    if (connecting) (await connecting.catch(() => null))?.disconnect();
  }
}

/**
 * A command that timed out means the connection may be dead while open (a partition): its socket is destroyed (a
 * graceful close would wait for a peer that does not answer), and ioredis reconnects by its retryStrategy.
 */
async function timed<T>(redis: Redis, command: Promise<T>): Promise<T> {
  try {
    return await command;
  } catch (err) {
    if (/timed out/i.test((err as Error).message)) redis.stream?.destroy();
    throw err;
  }
}
