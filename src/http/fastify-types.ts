import type { AuthContext } from "../auth/auth-context.ts";
import type { ConsoleSession, ConsoleSessions } from "../auth/console-sessions.ts";
import type { MemberAccess } from "../auth/access.ts";
import type { Principal } from "../auth/principal.ts";
import type { OidcSignIn } from "../auth/oidc.ts";
import type { AppContext } from "../app-context.ts";
import type { Endpoint } from "../config/config.schema.ts";

declare module "fastify" {
  interface FastifyInstance {
    ctx: AppContext;
    consoleSessions: ConsoleSessions;
    /** Operators' single sign-on, when `console.oidc` is configured. */
    oidc: OidcSignIn | null;
  }
  interface FastifyRequest {
    /** Set by the /v1 scope's auth hook on requests with a valid key; null otherwise. */
    auth: AuthContext | null;
    /** The client's address: the socket peer, or X-Forwarded-For when the peer is a trusted proxy. */
    clientIp: string;
    /** Who an admin or console call comes from (set by the admin scope's auth hook): the admin token or a console user. */
    principal: Principal | null;
    /** The console session the call came with (its cookie id and state), when it came with one. */
    consoleSession: { id: string; session: ConsoleSession } | null;
  }
  interface FastifyContextConfig {
    /** Which plan endpoint a /v1 route belongs to (scope checks, usage). */
    endpoint?: Endpoint;
    /** The body is a multipart upload: limited by maxUploadBytes instead of maxBodyBytes. */
    upload?: boolean;
    /** Admin routes: what members may do with it (auth/access.ts); absent, the route is for operators only. */
    access?: MemberAccess;
  }
}

export {};
