import type { Redis } from "ioredis";
import { newRedis } from "../store/redis-client.ts";
import { subscribedConnection } from "../store/redis-subscriber.ts";
import type { AuditEntry } from "../store/audit.repo.ts";

const channel = "modelgate:revocations";
/** Revocations accepted while the database was unreachable, waiting to be written (key id -> revokedAt). */
const pendingKey = "modelgate:revocations:pending";
/** Their audit entries (entry id -> JSON entry; its keyId names the key), written with the revocation. */
const pendingAuditKey = "modelgate:revocations:pending-audit";

/**
 * Tells every replica at once that a key was revoked (Redis pub/sub), so a cached or stale key stops working
 * within a second even while the database is away, and holds revocations made during such an outage until one
 * replica writes them (`takePending`). Without Redis there is no bus, and a revocation is seen within the key
 * cache time.
 */
export interface RevocationBus {
  publish(keyId: string, revokedAt: string): Promise<void>;
  /** Records a revocation the database could not take yet, and its audit entry; every replica retries writing them. */
  holdPending(keyId: string, revokedAt: string, audit?: AuditEntry): Promise<void>;
  pending(): Promise<Map<string, string>>;
  /** The audit entries held with pending revocations, oldest first. */
  pendingAudit(): Promise<AuditEntry[]>;
  /** Drops a written revocation and the audit entries written with it, at once. */
  clearPending(keyId: string, auditIds?: string[]): Promise<void>;
  subscribe(onRevoked: (keyId: string) => void): Promise<void>;
  close(): Promise<void>;
}

export class RedisRevocationBus implements RevocationBus {
  private subscriber: Redis | null = null;

  private constructor(
    private readonly url: string,
    private readonly redis: Redis,
  ) {}

  static async connect(url: string): Promise<RedisRevocationBus> {
    const redis = await newRedis(url, { lazyConnect: true, maxRetriesPerRequest: 1, commandTimeout: 1000, connectTimeout: 1000 });
    redis.on("error", () => {
      // Reported by the failing call; ioredis reconnects on its own.
    });
    await redis.connect();
    return new RedisRevocationBus(url, redis);
  }

  async publish(keyId: string, revokedAt: string): Promise<void> {
    await this.redis.publish(channel, JSON.stringify({ keyId, revokedAt }));
  }

  async holdPending(keyId: string, revokedAt: string, audit?: AuditEntry): Promise<void> {
    const multi = this.redis.multi().hsetnx(pendingKey, keyId, revokedAt);
    if (audit) multi.hset(pendingAuditKey, audit.id, JSON.stringify(audit));
    await execOrThrow(multi);
  }

  async pending(): Promise<Map<string, string>> {
    return new Map(Object.entries(await this.redis.hgetall(pendingKey)));
  }

  async pendingAudit(): Promise<AuditEntry[]> {
    const entries: AuditEntry[] = [];
    for (const text of await this.redis.hvals(pendingAuditKey)) {
      try {
        entries.push(JSON.parse(text) as AuditEntry);
      } catch {
        // not one of ours
      }
    }
    return entries.sort((a, b) => a.at.localeCompare(b.at) || a.id.localeCompare(b.id));
  }

  async clearPending(keyId: string, auditIds: string[] = []): Promise<void> {
    const multi = this.redis.multi();
    if (auditIds.length > 0) multi.hdel(pendingAuditKey, ...auditIds);
    multi.hdel(pendingKey, keyId);
    await execOrThrow(multi);
  }

  async subscribe(onRevoked: (keyId: string) => void): Promise<void> {
    this.subscriber = await subscribedConnection(this.url, channel, (message) => {
      try {
        onRevoked((JSON.parse(message) as { keyId: string }).keyId);
      } catch {
        // not one of ours
      }
    });
  }

  async close(): Promise<void> {
    this.subscriber?.disconnect();
    this.redis.disconnect();
  }
}

/** Runs a MULTI and throws the first command error (ioredis reports them per command). */
async function execOrThrow(multi: ReturnType<Redis["multi"]>): Promise<void> {
  const results = await multi.exec();
  const failed = results?.find(([err]) => err);
  if (failed) throw failed[0];
  if (!results) throw new Error("redis transaction aborted");
}
