import { createHash, randomBytes, timingSafeEqual } from "node:crypto";
import type { Redis } from "ioredis";
import { newRedis } from "../store/redis-client.ts";
import type { ConsoleSessionsRepo, SessionRecord } from "../store/console-sessions.repo.ts";

/**
 * The console's session cookie: HttpOnly, Secure, SameSite=Strict. The `__Host-` prefix makes browsers refuse it
 * unless it is Secure, for path / and set by this host itself, so a sibling domain cannot plant one.
 */
export const consoleCookie = "__Host-modelgate_console";

/** A session as a request sees it: who, and the CSRF token every change must echo. */
export interface ConsoleSession {
  userId: string;
  csrf: string;
  createdAt: number;
  lastSeenAt: number;
  /** The absolute end. */
  expiresAt: number;
}

export interface SessionTimeouts {
  idleMs: number;
  lifetimeMs: number;
}

/** Where sessions live: the database, or Redis when configured; either way every replica sees the same ones. */
export interface SessionBackend {
  insert(idHash: string, session: SessionRecord, ttlMs: number): Promise<void>;
  get(idHash: string): Promise<SessionRecord | null>;
  touch(idHash: string, at: number, ttlMs: number): Promise<void>;
  delete(idHash: string): Promise<void>;
  deleteUser(userId: string): Promise<void>;
  close(): Promise<void>;
}

/** The cookie holds the id; the backend only its SHA-256, so a copy of the sessions table opens no session. */
const hashId = (id: string) => createHash("sha256").update(id).digest("hex");

/** How often a session's last activity is written (each request would be a write per click). */
const touchEveryMs = 60_000;

/**
 * Console sessions: an opaque random id (the cookie) → the user and the CSRF token. A session ends after
 * `idleMs` without a request or `lifetimeMs` after sign-in, whichever is first; signing in always makes a new id
 * (the one a browser brought is dropped, so an id planted before sign-in never becomes a session).
 */
export class ConsoleSessions {
  constructor(
    private readonly backend: SessionBackend,
    readonly timeouts: SessionTimeouts,
    private readonly now: () => number = Date.now,
  ) {}

  async create(userId: string): Promise<{ id: string; session: ConsoleSession }> {
    const now = this.now();
    const id = randomBytes(32).toString("base64url");
    const session: ConsoleSession = { userId, csrf: randomBytes(32).toString("base64url"), createdAt: now, lastSeenAt: now, expiresAt: now + this.timeouts.lifetimeMs };
    await this.backend.insert(hashId(id), session, this.ttl(session, now));
    return { id, session };
  }

  /** The live session of this id (its activity recorded), or null when there is none or it has ended. */
  async get(id: string): Promise<ConsoleSession | null> {
    if (id.length > 128) return null;
    const idHash = hashId(id);
    const session = await this.backend.get(idHash);
    if (!session) return null;
    const now = this.now();
    if (session.expiresAt <= now || now - session.lastSeenAt >= this.timeouts.idleMs) {
      await this.backend.delete(idHash);
      return null;
    }
    if (now - session.lastSeenAt >= Math.min(touchEveryMs, this.timeouts.idleMs / 4)) {
      session.lastSeenAt = now;
      await this.backend.touch(idHash, now, this.ttl(session, now));
    }
    return session;
  }

  /** When the session ends if nothing more happens: the idle end or the absolute one. */
  endsAt(session: ConsoleSession): number {
    return Math.min(session.expiresAt, session.lastSeenAt + this.timeouts.idleMs);
  }

  delete(id: string): Promise<void> {
    return this.backend.delete(hashId(id));
  }

  /** "Sign out everywhere", and what removing a user or changing a password does. */
  deleteUser(userId: string): Promise<void> {
    return this.backend.deleteUser(userId);
  }

  close(): Promise<void> {
    return this.backend.close();
  }

  private ttl(session: ConsoleSession, now: number): number {
    return Math.max(1, this.endsAt(session) - now);
  }
}

/** Sessions in the database (the default): shared by every replica that shares it. */
export class DatabaseSessions implements SessionBackend {
  private lastPrune = 0;

  constructor(
    private readonly repo: ConsoleSessionsRepo,
    private readonly timeouts: SessionTimeouts,
  ) {}

  async insert(idHash: string, session: SessionRecord): Promise<void> {
    await this.prune(session.createdAt);
    await this.repo.insert(idHash, session);
  }

  get(idHash: string): Promise<SessionRecord | null> {
    return this.repo.get(idHash);
  }

  touch(idHash: string, at: number): Promise<void> {
    return this.repo.touch(idHash, at);
  }

  delete(idHash: string): Promise<void> {
    return this.repo.delete(idHash);
  }

  async deleteUser(userId: string): Promise<void> {
    await this.repo.deleteUser(userId);
  }

  async close(): Promise<void> {}

  /** Ended sessions are dropped at most once a minute, at a sign-in (the table only grows through sign-ins). */
  private async prune(now: number): Promise<void> {
    if (now - this.lastPrune < 60_000) return;
    this.lastPrune = now;
    await this.repo.prune(now, now - this.timeouts.idleMs);
  }
}

const touchScript = "if redis.call('exists', KEYS[1]) == 1 then redis.call('hset', KEYS[1], 'lastSeenAt', ARGV[1]); redis.call('pexpire', KEYS[1], ARGV[2]) end";

/**
 * Sessions in Redis: one hash per session that expires when the session would end (renewed by activity), and one
 * set per user of their sessions' hashes, for "sign out everywhere". Namespaced by deployment.
 */
export class RedisSessions implements SessionBackend {
  private constructor(
    private readonly redis: Redis,
    private readonly prefix: string,
  ) {}

  static async connect(url: string, deployment: string): Promise<RedisSessions> {
    const redis = await newRedis(url, { lazyConnect: true, maxRetriesPerRequest: 1, commandTimeout: 1000, connectTimeout: 1000 });
    redis.on("error", () => {
      // A failed command rejects and its request answers 503; ioredis reconnects on its own.
    });
    await redis.connect();
    return new RedisSessions(redis, `mg:console:${deployment}:`);
  }

  private key(idHash: string): string {
    return `${this.prefix}s:${idHash}`;
  }

  private userKey(userId: string): string {
    return `${this.prefix}u:${userId}`;
  }

  async insert(idHash: string, s: SessionRecord, ttlMs: number): Promise<void> {
    await this.redis
      .multi()
      .hset(this.key(idHash), { userId: s.userId, csrf: s.csrf, createdAt: s.createdAt, lastSeenAt: s.lastSeenAt, expiresAt: s.expiresAt })
      .pexpire(this.key(idHash), ttlMs)
      .sadd(this.userKey(s.userId), idHash)
      .pexpireat(this.userKey(s.userId), s.expiresAt)
      .exec();
  }

  async get(idHash: string): Promise<SessionRecord | null> {
    const h = await this.redis.hgetall(this.key(idHash));
    if (!h.userId) return null;
    return { userId: h.userId, csrf: h.csrf!, createdAt: Number(h.createdAt), lastSeenAt: Number(h.lastSeenAt), expiresAt: Number(h.expiresAt) };
  }

  async touch(idHash: string, at: number, ttlMs: number): Promise<void> {
    // Only an existing session is renewed: a touch racing a sign-out must not bring it back.
    await this.redis.eval(touchScript, 1, this.key(idHash), at, ttlMs);
  }

  async delete(idHash: string): Promise<void> {
    await this.redis.del(this.key(idHash));
  }

  async deleteUser(userId: string): Promise<void> {
    const hashes = await this.redis.smembers(this.userKey(userId));
    await this.redis.del(this.userKey(userId), ...hashes.map((h) => this.key(h)));
  }

  async close(): Promise<void> {
    this.redis.disconnect();
  }
}

/** Whether a request's X-CSRF-Token is the session's (compared in constant time). */
export function csrfMatches(given: string | string[] | undefined, session: ConsoleSession): boolean {
  if (typeof given !== "string" || given.length !== session.csrf.length) return false;
  return timingSafeEqual(Buffer.from(given), Buffer.from(session.csrf));
}
