import type { LlamaEmbeddingContext } from "node-llama-cpp";
import type { ModelEntry } from "../../config/app-config.ts";
import { AppError } from "../../errors/app-error.ts";
import type { EmbedResult } from "../engine.ts";

/** The embedding context's size (node-llama-cpp keeps it on an internal field). */
export function embeddingContextSize(embedder: LlamaEmbeddingContext): number {
  return (embedder as unknown as { _llamaContext: { contextSize: number } })._llamaContext.contextSize;
}

/** The longest input in tokens (BOS/EOS included): the config's maxInputTokens, else what the context takes. */
export function embeddingInputLimit(embedder: LlamaEmbeddingContext, entry: ModelEntry): number {
  // node-llama-cpp refuses inputs of contextSize tokens or more.
  return Math.min(entry.maxInputTokens ?? Infinity, embeddingContextSize(embedder) - 1);
}

/**
 * Embeds every input of one request under one lease. All inputs are tokenized and checked first, so a too-long
 * input is a 400 (`input` or `input[i]`) before any work. Vectors are L2-normalised, so a dot product is the
 * cosine similarity.
 */
export async function embedAll(
  embedder: LlamaEmbeddingContext,
  inputs: string[],
  limit: number,
  signal: AbortSignal,
  checkedTokens?: number,
): Promise<EmbedResult> {
  const promptTokens = checkedTokens ?? checkInputLengths(embedder, inputs, limit);
  const vectors: Float32Array[] = [];
  for (const input of inputs) {
    signal.throwIfAborted();
    const { vector } = await embedder.getEmbeddingFor(input);
    vectors.push(normalise(vector));
  }
  return { vectors, promptTokens };
}

/** Tokenizes every input; 400 `input` / `input[i]` for one over the limit. Returns the total token count. */
export function checkInputLengths(embedder: LlamaEmbeddingContext, inputs: string[], limit: number): number {
  let promptTokens = 0;
  inputs.forEach((input, i) => {
    const length = embedder.calculateInputLength(input);
    if (length > limit) {
      throw new AppError("invalid_parameter", {
        param: inputs.length === 1 ? "input" : `input[${i}]`,
        message: `The input is ${length} tokens long; this model's maximum input length is ${limit} tokens.`,
      });
    }
    promptTokens += length;
  });
  return promptTokens;
}

function normalise(vector: readonly number[]): Float32Array {
  const out = Float32Array.from(vector);
  let sum = 0;
  for (const v of out) sum += v * v;
  const norm = Math.sqrt(sum);
  if (norm > 0) for (let i = 0; i < out.length; i++) out[i] /= norm;
  return out;
}
