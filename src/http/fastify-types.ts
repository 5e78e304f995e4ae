import type { AuthContext } from "../auth/auth-context.ts";
import type { ConsoleSessions } from "../auth/console-sessions.ts";
import type { AppContext } from "../app-context.ts";
import type { Endpoint } from "../config/config.schema.ts";

declare module "fastify" {
  interface FastifyInstance {
    ctx: AppContext;
    consoleSessions: ConsoleSessions;
  }
  interface FastifyRequest {
    /** Set by the /v1 scope's auth hook on requests with a valid key; null otherwise. */
    auth: AuthContext | null;
    /** The client's address: the socket peer, or X-Forwarded-For when the peer is a trusted proxy. */
    clientIp: string;
    /** Who an admin call comes from (set by the admin scope's auth hook): a console login or the admin token. */
    adminActor: "console" | "admin-token" | null;
  }
  interface FastifyContextConfig {
    /** Which plan endpoint a /v1 route belongs to (scope checks, usage). */
    endpoint?: Endpoint;
    /** The body is a multipart upload: limited by maxUploadBytes instead of maxBodyBytes. */
    upload?: boolean;
  }
}

export {};
