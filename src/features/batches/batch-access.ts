import { randomBytes } from "node:crypto";
import type { FastifyInstance } from "fastify";
import type { AuthContext } from "../../auth/auth-context.ts";
import { grantsEndpoint } from "../../auth/key-grants.ts";
import type { Endpoint } from "../../config/config.schema.ts";
import { AppError } from "../../errors/app-error.ts";
import type { BatchEndpoint } from "./batches.schema.ts";

/** The plan endpoint a batch's lines run under: its grants, token limits and usage rows. */
export const endpointOfBatch: Record<BatchEndpoint, Endpoint> = { "/v1/chat/completions": "chat", "/v1/embeddings": "embeddings" };

/**
 * /v1/files and /v1/batches have no endpoint scope of their own: a key may use them when it (and its plan) may call
 * an endpoint a batch can run, chat or embeddings. Creating a batch needs the scope of the batch's own endpoint, and
 * every line is checked again when it runs (the key as the store holds it then: revoked, its lines fail).
 */
function assertBatchAccess(auth: AuthContext, deployment: string): void {
  if (grantsEndpoint(auth, "chat", deployment) || grantsEndpoint(auth, "embeddings", deployment)) return;
  throw new AppError("model_not_in_plan", { param: null, message: "This key's plan includes neither the chat nor the embeddings endpoint, which the Batch API runs." });
}

/** Every route of the scope (the files' and the batches') checks the key's access to the Batch API first. */
export function requireBatchAccess(app: FastifyInstance): void {
  const deployment = app.ctx.config.deployment;
  app.addHook("preHandler", async (request) => assertBatchAccess(request.auth!, deployment));
}

/** `file-…` and `batch_…`, as OpenAI's ids look; 24 random characters. */
export function newId(prefix: string): string {
  return `${prefix}${randomBytes(18).toString("base64url")}`;
}

const idParams = { file: "file_id", batch: "batch_id" } as const;

/**
 * The caller's file or batch that a lookup found, or the 404 every miss gets (another account's, an expired file or
 * none at all look the same): §7's one 404 code, `param` the id's (`file_id`, `batch_id`, or `param` when the id
 * came in another field).
 */
export async function foundOr404<T>(what: "file" | "batch", id: string, lookup: Promise<T | null | false>, param: string = idParams[what]): Promise<T> {
  const found = await lookup;
  if (found === null || found === false) throw new AppError("model_not_found", { param, message: `No such ${what}: '${id}'.` });
  return found;
}

export const seconds = (ms: number | null): number | null => (ms === null ? null : Math.floor(ms / 1000));
