import { timingSafeEqual, createHash } from "node:crypto";
import type { FastifyRequest } from "fastify";
import { AppError } from "../../errors/app-error.ts";
import "../../http/fastify-types.ts";

function digest(text: string): Buffer {
  return createHash("sha256").update(text).digest();
}

/**
 * Guards /admin/v1 routes (declared `config: { public: true }` so API-key auth skips them). The admin token comes
 * from config `adminToken`, sent as `Authorization: Bearer <token>` or `x-admin-token`; it is never an API key and
 * the /v1 auth never accepts it. With no adminToken configured the admin API is off: every call is 401.
 */
export function requireAdmin(request: FastifyRequest): void {
  const expected = request.server.ctx.config.adminToken;
  if (!expected) throw new AppError("invalid_api_key", { message: "The admin API is disabled: no adminToken is configured." });
  const header = request.headers.authorization;
  const bearer = typeof header === "string" ? /^Bearer[ \t]+(\S+)[ \t]*$/i.exec(header)?.[1] : undefined;
  const alt = request.headers["x-admin-token"];
  const given = bearer ?? (typeof alt === "string" ? alt : undefined);
  // Compare digests so the comparison time says nothing about the token's length or content.
  if (!given || !timingSafeEqual(digest(given), digest(expected))) {
    throw new AppError("invalid_api_key", { message: "Invalid admin token." });
  }
}
