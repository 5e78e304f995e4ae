import { randomBytes } from "node:crypto";
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
export function assertBatchAccess(auth: AuthContext, deployment: string): void {
  if (grantsEndpoint(auth, "chat", deployment) || grantsEndpoint(auth, "embeddings", deployment)) return;
  throw new AppError("model_not_in_plan", { param: null, message: "This key's plan includes neither the chat nor the embeddings endpoint, which the Batch API runs." });
}

/** `file-…` and `batch_…`, as OpenAI's ids look; 24 random characters. */
export function newId(prefix: string): string {
  return `${prefix}${randomBytes(18).toString("base64url")}`;
}

export function notFound(what: "file" | "batch", id: string, param: string): AppError {
  return new AppError("model_not_found", { param, message: `No such ${what}: '${id}'.` });
}

export const seconds = (ms: number | null): number | null => (ms === null ? null : Math.floor(ms / 1000));
