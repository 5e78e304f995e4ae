import { endianness } from "node:os";
import type { AppContext } from "../../app-context.ts";
import { runInference } from "../inference.ts";
import { answerModel, type RequestContext } from "../request-context.ts";
import type { EmbeddingList, EmbeddingsRequest } from "./embeddings.schema.ts";

const littleEndian = endianness() === "LE";

/** Little-endian float32 bytes in base64, which is what the openai client decodes for `encoding_format: base64`. */
export function toBase64(vector: Float32Array): string {
  if (littleEndian) return Buffer.from(vector.buffer, vector.byteOffset, vector.byteLength).toString("base64");
  const bytes = Buffer.alloc(vector.length * 4);
  for (let i = 0; i < vector.length; i++) bytes.writeFloatLE(vector[i], i * 4);
  return bytes.toString("base64");
}

/**
 * §4.3 POST /v1/embeddings: inputs are tokenized and checked in the prepare step (400 naming `input[i]` before
 * any capacity is taken). Vectors are L2-normalised.
 */
export async function createEmbeddings(ctx: AppContext, request: RequestContext, body: EmbeddingsRequest): Promise<EmbeddingList> {
  const req = { inputs: typeof body.input === "string" ? [body.input] : body.input };
  const result = await runInference(ctx, request, {
    model: body.model,
    port: "embeddings",
    input: { kind: "embeddings", inputs: req.inputs },
    prepare: (port) => port.prepareEmbed(req),
    run: (port, prepared, signal) => port.embed(req, prepared, signal),
    usage: (r) => ({ promptTokens: r.promptTokens, completionTokens: 0 }),
  });
  const base64 = body.encoding_format === "base64";
  return {
    object: "list",
    data: result.vectors.map((vector, index) => ({
      object: "embedding",
      index,
      embedding: base64 ? toBase64(vector) : Array.from(vector),
    })),
    model: answerModel(request, body.model),
    usage: { prompt_tokens: result.promptTokens, total_tokens: result.promptTokens },
  };
}
