import fp from "fastify-plugin";
import { retryHeaders, toEnvelope } from "../errors/envelope.ts";
import { toAppError } from "../errors/to-app-error.ts";

/**
 * The one place errors become responses: every non-2xx body is the §7 envelope. Unknown errors are logged with
 * their cause and answered as 500 internal_error without details. (Unknown paths: http/not-found.ts, per scope.)
 */
export const errorHandlerPlugin = fp(
  async (app) => {
    app.setErrorHandler(async (err, request, reply) => {
      const { appError, unexpected, disconnected } = toAppError(err);
      if (request.outcome && !disconnected) request.outcome.errorCode = appError.code;
      if (disconnected) request.log.debug("client disconnected before the response");
      else if (unexpected) request.log.error({ err }, "unexpected error");
      else if (appError.status >= 500 && !appError.routine) request.log.warn({ code: appError.code, msg: appError.message }, "request failed");
      if (reply.sent || reply.raw.headersSent) return;
      reply.code(appError.status).headers(appError.headers);
      if (appError.retryAfterMs !== undefined) reply.headers(retryHeaders(appError.retryAfterMs));
      return reply.type("application/json; charset=utf-8").send(toEnvelope(appError));
    });

  },
  { name: "error-handler" },
);
