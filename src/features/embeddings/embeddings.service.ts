import type { AppContext } from "../../app-context.ts";
import type { AuthContext } from "../../auth/auth-context.ts";
import { requireModel } from "../model-access.ts";
import { AppError } from "../../errors/app-error.ts";
import type { EmbeddingList, EmbeddingsRequest } from "./embeddings.schema.ts";

/** Little-endian float32 bytes in base64, which is what the openai client decodes for `encoding_format: base64`. */
export function toBase64(vector: Float32Array): string {
  const bytes = Buffer.alloc(vector.length * 4);
  for (let i = 0; i < vector.length; i++) bytes.writeFloatLE(vector[i], i * 4);
  return bytes.toString("base64");
}

/**
 * §4.3 POST /v1/embeddings. Checks in the decisions.md order: model (404), scope (403), capability (400),
 * input lengths (400, inside the engine before any work), capacity (503). Vectors are L2-normalised.
 */
export async function createEmbeddings(
  ctx: AppContext,
  auth: AuthContext,
  body: EmbeddingsRequest,
  signalFor: (deadlineMs: number) => AbortSignal,
): Promise<EmbeddingList> {
  const runner = requireModel(ctx, auth, "embeddings", body.model, "embeddings", "embeddings");
  const engine = runner.assertServable();
  if (!engine.embed) throw new AppError("internal_error", { message: `The model '${body.model}' has no embedding engine.` });
  const inputs = typeof body.input === "string" ? [body.input] : body.input;
  engine.prepareEmbed?.({ inputs });

  const signal = signalFor(runner.entry.requestTimeoutMs);
  const result = await runner.run(auth.keyId, signal, (leased) => leased.embed!({ inputs }, signal));
  ctx.usage.record({
    keyId: auth.keyId,
    accountId: auth.accountId,
    model: body.model,
    endpoint: "embeddings",
    promptTokens: result.promptTokens,
    completionTokens: 0,
  });
  const base64 = body.encoding_format === "base64";
  return {
    object: "list",
    data: result.vectors.map((vector, index) => ({
      object: "embedding",
      index,
      embedding: base64 ? toBase64(vector) : Array.from(vector),
    })),
    model: body.model,
    usage: { prompt_tokens: result.promptTokens, total_tokens: result.promptTokens },
  };
}
