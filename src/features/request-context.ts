import type { FastifyBaseLogger, FastifyReply, FastifyRequest } from "fastify";
import type { AuthContext } from "../auth/auth-context.ts";
import type { Endpoint } from "../config/config.schema.ts";
import type { RequestOutcome } from "../http/request-outcome.ts";
import { requestSignal } from "../http/request-signal.ts";
import type { AppContext } from "../app-context.ts";
import type { Priority } from "../scheduler/runner-types.ts";

declare module "fastify" {
  interface FastifyContextConfig {
    /** Which plan endpoint a /v1 route belongs to (key grants, usage). */
    endpoint?: Endpoint;
  }
}

/** What a route hands an inference service about its request. */
export interface RequestContext {
  auth: AuthContext;
  /** The endpoint the route belongs to (its `config.endpoint`): grants and usage are per endpoint. */
  endpoint: Endpoint;
  /** The request's logger (it carries the request id). */
  log: FastifyBaseLogger;
  /** The request's AbortSignal: the client disconnecting or the deadline (the model's requestTimeout) aborts it. */
  signalFor(deadlineMs: number): AbortSignal;
  /** Milliseconds since the request arrived. */
  elapsedMs(): number;
  /** What the access log and metrics learn about the request (model, tokens, TTFT, error code). */
  outcome: RequestOutcome | null;
  /** The request's headers, for a client's W3C trace context (`traceparent`). */
  headers: Record<string, string | string[] | undefined>;
  /** The scheduling class; when set it overrides the plan's `priority` (the batch runner sets "batch"). */
  priority?: Priority;
  /**
   * Puts rate-limit headers on the answer (the token meter's `x-ratelimit-*-tokens`), while it is not yet sent; a
   * caller that is not an HTTP request (a batch line) leaves it out.
   */
  setHeaders?(headers: Record<string, string>): void;
  /**
   * Whether any byte of the answer has gone to the client (a stream's headers or a keep-alive): a route never falls
   * back after that (issue 45). A caller that is not an HTTP request leaves it out.
   */
  responseStarted?(): boolean;
  /** The catalog entry the request runs on, set when the model it named is a route (features/routing.ts). */
  target?: string;
  /**
   * Where the request's usage goes instead of the node's usage recorder: the batch runner keeps a line's, to write
   * it with the line's result in one transaction (issue 47: charged exactly once, whenever the node dies).
   */
  usage?: Pick<AppContext["usage"], "record">;
}

/**
 * The model an answer names (`model` of a completion, chunk, response or list): the catalog entry that served it,
 * which is a route's target when the client named a route, else the model the client named.
 */
export function answerModel(request: RequestContext, named: string): string {
  return request.target ?? named;
}

/** The context of an authenticated /v1 request (the auth hook has run). */
export function requestContext(request: FastifyRequest, reply: FastifyReply): RequestContext {
  const endpoint = request.routeOptions.config.endpoint;
  if (!endpoint) throw new Error(`route ${request.routeOptions.url} declares no config.endpoint`);
  return {
    auth: request.auth!,
    endpoint,
    log: request.log,
    outcome: request.outcome,
    headers: request.headers,
    // Methods, not arrow properties: under tsx (keepNames) each named closure costs a defineProperty per request.
    signalFor(deadlineMs) {
      return requestSignal(request, reply, deadlineMs);
    },
    elapsedMs() {
      return reply.elapsedTime;
    },
    setHeaders(headers) {
      if (!reply.sent && !reply.raw.headersSent) reply.headers(headers);
    },
    responseStarted() {
      return reply.sent || reply.raw.headersSent;
    },
  };
}
