import type { LlamaModel, LlamaRankingContext } from "node-llama-cpp";
import type { ModelEntry } from "../../config/app-config.ts";
import type { Engine, PreparedRerank, RerankPort, RerankRequest, RerankResult } from "../engine.ts";
import { checkQueryLength, checkPairLength } from "../input-length.ts";
import { getLlamaRuntime } from "./llama-runtime.ts";
import { llamaOptions, llamaRerankSupport } from "./llama.support.ts";

/**
 * How many documents go to one `rankAll` call. rankAll evaluates a request's documents back to back on one
 * sequence; slicing lets an abort stop the work between slices instead of after the whole list.
 */
const SLICE = 32;

/**
 * Cross-encoder reranking on a GGUF model (BERT-style rerankers, Qwen3 rerankers with a template) through
 * node-llama-cpp's ranking context. Scores are the library's: sigmoid of the classification logit.
 */
export class LlamaRerankEngine implements Engine, RerankPort {
  readonly support = llamaRerankSupport;
  private model: LlamaModel | null = null;
  private context: LlamaRankingContext | null = null;

  constructor(private readonly entry: ModelEntry) {}

  get contextSize(): number | null {
    return this.context?.contextSize ?? null;
  }

  /** The longest query/document pair in tokens: below the context window, and within `maxInputTokens`. */
  get maxInputTokens(): number | null {
    if (!this.context) return null;
    const window = this.context.contextSize - 1;
    return this.entry.maxInputTokens === null ? window : Math.min(window, this.entry.maxInputTokens);
  }

  async load(signal?: AbortSignal): Promise<void> {
    if (this.context) return;
    if (!this.entry.path) throw new Error(`model '${this.entry.id}' has no local path`);
    const llama = await getLlamaRuntime();
    const model = await llama.loadModel({ modelPath: this.entry.path, loadSignal: signal });
    try {
      const contextSize = this.entry.contextSize ?? model.trainContextSize;
      this.context = await model.createRankingContext({
        contextSize,
        // A pair is evaluated in one batch (non-causal pooling), so the batch must hold the whole window.
        batchSize: contextSize,
        threads: llamaOptions(this.entry).threads,
        createSignal: signal,
      });
      this.model = model;
    } catch (err) {
      await model.dispose();
      throw err;
    }
  }

  async unload(): Promise<void> {
    const { context, model } = this;
    this.context = null;
    this.model = null;
    await context?.dispose();
    await model?.dispose();
  }

  /**
   * Tokenizes every pair and checks it fits, before any capacity is taken. Throws 400 invalid_parameter
   * naming `query` when the query alone cannot fit, or `documents[i]` for the first document that does not.
   */
  prepareRerank(req: RerankRequest): PreparedRerank {
    const context = this.requireContext();
    const limit = this.maxInputTokens!;
    checkQueryLength(context.calculateInputLength(req.query, ""), limit, this.entry.id);
    let promptTokens = 0;
    for (let i = 0; i < req.documents.length; i++) {
      const length = context.calculateInputLength(req.query, req.documents[i]);
      checkPairLength(length, i, limit, this.entry.id);
      promptTokens += length;
    }
    return { promptTokens };
  }

  async rerank(req: RerankRequest, prepared: PreparedRerank, signal: AbortSignal): Promise<RerankResult> {
    const context = this.requireContext();
    const { promptTokens } = prepared;
    const scores: number[] = [];
    for (let start = 0; start < req.documents.length; start += SLICE) {
      signal.throwIfAborted();
      scores.push(...(await context.rankAll(req.query, req.documents.slice(start, start + SLICE))));
    }
    signal.throwIfAborted();
    return { scores, promptTokens };
  }

  private requireContext(): LlamaRankingContext {
    if (!this.context) throw new Error(`model '${this.entry.id}' is not loaded`);
    return this.context;
  }
}
