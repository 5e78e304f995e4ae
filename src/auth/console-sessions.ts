import { randomBytes, timingSafeEqual } from "node:crypto";

/**
 * The console's login cookie: HttpOnly, Secure, SameSite=Strict, for `ttlMs`. The `__Host-` prefix makes browsers
 * refuse it unless it is Secure, for path / and set by this host itself, so a sibling domain cannot plant one.
 */
export const consoleCookie = "__Host-modelgate_console";

export interface ConsoleSession {
  csrf: string;
  expiresAt: number;
}

const maxSessions = 1000;

/**
 * Console logins, in this process's memory: an opaque id (the cookie) → the CSRF token every mutating call must
 * echo, and an expiry. Nothing else is kept: no admin token, no key value. A restart or another replica logs the
 * console out (log in again).
 */
export class ConsoleSessions {
  private readonly sessions = new Map<string, ConsoleSession>();

  constructor(readonly ttlMs = 8 * 60 * 60 * 1000) {}

  create(): { id: string; session: ConsoleSession } {
    const now = Date.now();
    for (const [id, s] of this.sessions) if (s.expiresAt <= now) this.sessions.delete(id);
    if (this.sessions.size >= maxSessions) this.sessions.delete(this.sessions.keys().next().value!);
    const id = randomBytes(32).toString("base64url");
    const session = { csrf: randomBytes(32).toString("base64url"), expiresAt: now + this.ttlMs };
    this.sessions.set(id, session);
    return { id, session };
  }

  get(id: string): ConsoleSession | null {
    const session = this.sessions.get(id);
    if (!session) return null;
    if (session.expiresAt <= Date.now()) {
      this.sessions.delete(id);
      return null;
    }
    return session;
  }

  delete(id: string): void {
    this.sessions.delete(id);
  }
}

/** Whether a request's X-CSRF-Token is the session's (compared in constant time). */
export function csrfMatches(given: string | string[] | undefined, session: ConsoleSession): boolean {
  if (typeof given !== "string" || given.length !== session.csrf.length) return false;
  return timingSafeEqual(Buffer.from(given), Buffer.from(session.csrf));
}
