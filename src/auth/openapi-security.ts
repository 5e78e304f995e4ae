import type { FastifyInstance } from "fastify";
import { consoleCookie } from "./console-sessions.ts";

/** How a caller proves who it is, as the OpenAPI document's `components.securitySchemes` names them. */
export const securitySchemes = {
  apiKey: { type: "http", scheme: "bearer", description: "Authorization: Bearer <API key>" },
  xApiKey: { type: "apiKey", in: "header", name: "x-api-key", description: "x-api-key: <API key>, as Anthropic's clients send it (read when there is no Authorization: Bearer)" },
  adminToken: { type: "http", scheme: "bearer", description: "Authorization: Bearer <adminToken> (or x-admin-token)" },
  metricsToken: { type: "http", scheme: "bearer", description: "Authorization: Bearer <metrics.token>: GET /metrics only" },
  consoleCookie: { type: "apiKey", in: "cookie", name: consoleCookie, description: "A console session (POST /console/api/login, an invite, or OpenID Connect): a member is confined to their account and role" },
  csrfToken: { type: "apiKey", in: "header", name: "X-CSRF-Token", description: "The console session's CSRF token: every call with the cookie that changes something" },
} as const;

/** One way to be let in (every scheme it names is needed); a route's `security` lists the ways, any one of which will do. */
export type SecurityRequirement = Partial<Record<keyof typeof securitySchemes, string[]>>;

const readMethods = new Set(["GET", "HEAD", "OPTIONS"]);

function isRead(method: string | string[]): boolean {
  return (Array.isArray(method) ? method : [method]).every((m) => readMethods.has(m));
}

/** A console session stands in for the admin token; a call that changes something also needs its CSRF token. */
export function consoleLogin(method: string | string[]): SecurityRequirement {
  return isRead(method) ? { consoleCookie: [] } : { consoleCookie: [], csrfToken: [] };
}

/** /v1 and /v1/messages: an API key, as a Bearer token or in x-api-key (the scopes' hooks). */
export const apiKeyCallers = (): SecurityRequirement[] => [{ apiKey: [] }, { xApiKey: [] }];
/** /admin/v1: the admin token, or a console session (authenticateAdmin). */
export const adminCallers = (method: string | string[]): SecurityRequirement[] => [{ adminToken: [] }, consoleLogin(method)];
/** GET /metrics: the admin token or metrics.token (authenticateMetrics). */
export const metricsCallers = (): SecurityRequirement[] => [{ adminToken: [] }, { metricsToken: [] }];
/** No credentials. */
export const anyone = (): SecurityRequirement[] => [];

/**
 * Documents who may call each route registered in `app`'s scope (the OpenAPI `security`), from the scope that
 * installs the checks rather than from the URL. A route whose own checks differ declares `schema.security` itself.
 */
export function documentCallers(app: FastifyInstance, callers: (method: string | string[]) => SecurityRequirement[]): void {
  app.addHook("onRoute", (route) => {
    if (route.schema?.security !== undefined) return;
    route.schema = { ...route.schema, security: callers(route.method) };
  });
}
