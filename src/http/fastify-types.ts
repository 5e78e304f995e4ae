import type { AuthContext } from "../auth/auth-context.ts";
import type { AppContext } from "../app-context.ts";
import type { Endpoint } from "../config/config.schema.ts";

declare module "fastify" {
  interface FastifyInstance {
    ctx: AppContext;
  }
  interface FastifyRequest {
    /** Set by the auth plugin on /v1 requests with a valid key; null otherwise. */
    auth: AuthContext | null;
    /** The client's address: the socket peer, or X-Forwarded-For when the peer is a trusted proxy. */
    clientIp: string;
  }
  interface FastifyContextConfig {
    /** Which plan endpoint a /v1 route belongs to (scopes, limits, usage). */
    endpoint?: Endpoint;
    /** Routes outside the API-key world: health checks, OpenAPI, admin (its own token). */
    public?: boolean;
    /** The body is a multipart upload: limited by maxUploadBytes instead of maxBodyBytes. */
    upload?: boolean;
  }
}

export {};
