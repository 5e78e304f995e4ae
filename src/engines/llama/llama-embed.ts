import type { LlamaEmbeddingContext, Token } from "node-llama-cpp";
import type { ModelEntry } from "../../config/app-config.ts";
import type { EmbedResult } from "../engine.ts";
import { checkInputLength } from "../input-length.ts";

/** The embedding context's size (node-llama-cpp keeps it on an internal field). */
export function embeddingContextSize(embedder: LlamaEmbeddingContext): number {
  return (embedder as unknown as { _llamaContext: { contextSize: number } })._llamaContext.contextSize;
}

/** The longest input in tokens (BOS/EOS included): the config's maxInputTokens, else what the context takes. */
export function embeddingInputLimit(embedder: LlamaEmbeddingContext, entry: ModelEntry): number {
  // node-llama-cpp refuses inputs of contextSize tokens or more.
  return Math.min(entry.maxInputTokens ?? Infinity, embeddingContextSize(embedder) - 1);
}

/** A request's inputs, tokenized once and checked against the limit. */
export interface TokenizedInputs {
  tokens: Token[][];
  promptTokens: number;
}

/**
 * Embeds every input of one request under one lease, from the tokens of `tokenizeInputs` (so the text is
 * tokenized once). Vectors are L2-normalised, so a dot product is the cosine similarity.
 */
export async function embedAll(embedder: LlamaEmbeddingContext, inputs: TokenizedInputs, signal: AbortSignal): Promise<EmbedResult> {
  const vectors: Float32Array[] = [];
  for (const tokens of inputs.tokens) {
    signal.throwIfAborted();
    const { vector } = await embedder.getEmbeddingFor(tokens);
    vectors.push(normalise(vector));
  }
  return { vectors, promptTokens: inputs.promptTokens };
}

/**
 * Tokenizes every input (BOS/EOS as the embedding context adds them) and checks it, so a too-long input is a 400
 * (`input`, or `input[i]` for an array) before any work.
 */
export function tokenizeInputs(embedder: LlamaEmbeddingContext, inputs: string[], limit: number, modelId: string): TokenizedInputs {
  let promptTokens = 0;
  const tokens = inputs.map((input, i) => {
    const ids = embedder.model.tokenizer(input, false);
    const length = embedder.calculateInputLength(ids);
    checkInputLength(length, i, inputs.length, limit, modelId);
    promptTokens += length;
    return ids;
  });
  return { tokens, promptTokens };
}

function normalise(vector: readonly number[]): Float32Array {
  const out = Float32Array.from(vector);
  let sum = 0;
  for (const v of out) sum += v * v;
  const norm = Math.sqrt(sum);
  if (norm > 0) for (let i = 0; i < out.length; i++) out[i] /= norm;
  return out;
}
