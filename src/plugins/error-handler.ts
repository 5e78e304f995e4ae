import type { FastifyError, FastifyReply, FastifyRequest } from "fastify";
import fp from "fastify-plugin";
import type { AppError } from "../errors/app-error.ts";
import { retryHeaders, toEnvelope } from "../errors/envelope.ts";
import { toAppError } from "../errors/to-app-error.ts";

/** An error as a dialect answers it: its status and body (§7's envelope, or Anthropic's). */
export type ErrorAnswer = (error: AppError) => { status: number; body: unknown };

const ourAnswer: ErrorAnswer = (error) => ({ status: error.status, body: toEnvelope(error) });

/**
 * The one place errors become responses, for the scope that installs it with its dialect's answer. Unknown errors
 * are logged with their cause and answered as 500 internal_error without details. (Unknown paths:
 * http/not-found.ts, per scope.)
 */
export function errorHandler(answer: ErrorAnswer) {
  return async function handleError(err: FastifyError, request: FastifyRequest, reply: FastifyReply) {
    const { appError, unexpected, disconnected } = toAppError(err);
    if (request.outcome && !disconnected) request.outcome.errorCode = appError.code;
    if (disconnected) request.log.debug("client disconnected before the response");
    else if (unexpected) request.log.error({ err }, "unexpected error");
    else if (appError.status >= 500 && !appError.routine) request.log.warn({ code: appError.code, msg: appError.message }, "request failed");
    if (reply.sent || reply.raw.headersSent) return;
    const { status, body } = answer(appError);
    reply.code(status).headers(appError.headers);
    if (appError.retryAfterMs !== undefined) reply.headers(retryHeaders(appError.retryAfterMs));
    return reply.type("application/json; charset=utf-8").send(body);
  };
}

/** Every body that is not 2xx is the §7 envelope, except in a scope that installs its dialect's (anthropic.scope.ts). */
export const errorHandlerPlugin = fp(
  async (app) => {
    app.setErrorHandler(errorHandler(ourAnswer));
  },
  { name: "error-handler" },
);
