import type { FastifyBaseLogger } from "fastify";
import { newId } from "../keys/key-format.ts";
import type { AuditActor, AuditEntry } from "../store/audit.repo.ts";

/** Where an admin token was tried. */
export type TokenSurface = "admin" | "metrics";

export interface AuthAuditOptions {
  /** Each address gets at most one `auth.failed` entry per window; the rest are counted in the window's summary. */
  windowMs?: number;
  /** Addresses that get their own entry in one window (all addresses together); past it they are only counted. */
  maxAddressesPerWindow?: number;
  now?: () => number;
}

/**
 * The `auth.*` audit entries: console sign-ins (`auth.login`, by the user), failed sign-ins and failed admin-token
 * attempts (`auth.failed`). A flood of failures cannot fill the table: an address gets one `auth.failed` entry per
 * window (a minute), whatever it tried (token, email, password), at most
 * `maxAddressesPerWindow` addresses get one, and every failure past those is counted in one `auth.failed.summary`
 * entry written when the window ends. A write that fails is logged and dropped: it never fails the request.
 */
export class AuthAudit {
  private readonly windowMs: number;
  private readonly maxAddresses: number;
  private readonly now: () => number;
  private windowStart: number;
  private readonly recorded = new Set<string>();
  private unrecorded = 0;
  private readonly timer: NodeJS.Timeout;
  private readonly writes = new Set<Promise<void>>();

  constructor(
    private readonly append: (entry: AuditEntry) => Promise<void>,
    private readonly log: FastifyBaseLogger,
    options: AuthAuditOptions = {},
  ) {
    this.windowMs = options.windowMs ?? 60_000;
    this.maxAddresses = options.maxAddressesPerWindow ?? 100;
    this.now = options.now ?? Date.now;
    this.windowStart = this.now();
    this.timer = setInterval(() => this.roll(), this.windowMs);
    this.timer.unref();
  }

  /** A wrong admin token (or metrics token) from `source`. */
  failed(source: string, surface: TokenSurface): void {
    this.roll();
    if (this.recorded.has(source) || this.recorded.size >= this.maxAddresses) {
      this.unrecorded += 1;
      return;
    }
    this.recorded.add(source);
    this.write("auth.failed", "admin-token", source, { surface });
  }

  /** A failed console sign-in (wrong password or code, unknown email, refused by the identity provider). */
  failedSignIn(source: string, email: string | null, reason: string): void {
    this.roll();
    if (this.recorded.has(source) || this.recorded.size >= this.maxAddresses) {
      this.unrecorded += 1;
      return;
    }
    this.recorded.add(source);
    this.write("auth.failed", "anonymous", source, { surface: "console", email, reason });
  }

  /** A console sign-in by a member or an operator; written before the sign-in answers. */
  async login(source: string, user: { id: string; email: string; accountId: string | null; operator: boolean }, method: string): Promise<void> {
    await this.write("auth.login", user.operator ? "operator" : "member", source, { method }, { actorId: user.id, actorEmail: user.email, accountId: user.accountId });
  }

  /** Writes the summary of the window under way and waits for pending writes. */
  async close(): Promise<void> {
    clearInterval(this.timer);
    this.roll(true);
    await Promise.all(this.writes);
  }

  /** Ends the window when its time is up (or `force`): its summary is written if failures went unrecorded. */
  private roll(force = false): void {
    const now = this.now();
    if (!force && now - this.windowStart < this.windowMs) return;
    if (this.unrecorded > 0) {
      this.write("auth.failed.summary", "admin-token", null, {
        failures: this.unrecorded,
        from: new Date(this.windowStart).toISOString(),
        to: new Date(now).toISOString(),
      });
    }
    this.windowStart = now;
    this.recorded.clear();
    this.unrecorded = 0;
  }

  private write(action: string, actor: AuditActor, source: string | null, detail: Record<string, unknown> | null, who: { actorId: string; actorEmail: string; accountId: string | null } | null = null): Promise<void> {
    const entry: AuditEntry = { id: newId("aud"), at: new Date(this.now()).toISOString(), actor, actorId: who?.actorId ?? null, actorEmail: who?.actorEmail ?? null, onBehalfOf: null, action, accountId: who?.accountId ?? null, keyId: null, source, detail };
    const done = this.append(entry).catch((err: unknown) => this.log.warn({ err, action }, "could not write an auth audit entry"));
    this.writes.add(done);
    void done.finally(() => this.writes.delete(done));
    return done;
  }
}
