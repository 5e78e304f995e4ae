import type { LlamaModel, LlamaRankingContext } from "node-llama-cpp";
import type { ModelEntry } from "../../config/app-config.ts";
import type { Capability } from "../../config/config.schema.ts";
import type { Engine, RerankRequest, RerankResult } from "../engine.ts";
import { AppError } from "../../errors/app-error.ts";
import { getLlamaRuntime } from "./llama-runtime.ts";

/**
 * How many documents go to one `rankAll` call. rankAll evaluates a request's documents back to back on one
 * sequence; slicing lets an abort stop the work between slices instead of after the whole list.
 */
const SLICE = 32;

/** What a rerank request costs before it runs: the input tokens of every query/document pair. */
export interface PreparedRerank {
  promptTokens: number;
}

/**
 * Cross-encoder reranking on a GGUF model (BERT-style rerankers, Qwen3 rerankers with a template) through
 * node-llama-cpp's ranking context. Scores are the library's: sigmoid of the classification logit.
 */
export class LlamaRerankEngine implements Engine {
  readonly capabilities: ReadonlySet<Capability>;
  private model: LlamaModel | null = null;
  private context: LlamaRankingContext | null = null;
  /** prepareRerank's answer, kept for the rerank call the service makes with the same request object. */
  private readonly prepared = new WeakMap<RerankRequest, PreparedRerank>();

  constructor(private readonly entry: ModelEntry) {
    this.capabilities = new Set(entry.capabilities);
  }

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
        threads: this.entry.threads,
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
    const cached = this.prepared.get(req);
    if (cached) return cached;
    const context = this.requireContext();
    const limit = this.maxInputTokens!;
    const queryAlone = context.calculateInputLength(req.query, "");
    if (queryAlone > limit) {
      throw new AppError("invalid_parameter", {
        param: "query",
        message: `The query is ${queryAlone} tokens long; the model '${this.entry.id}' takes at most ${limit} tokens per query/document pair.`,
      });
    }
    let promptTokens = 0;
    for (let i = 0; i < req.documents.length; i++) {
      const length = context.calculateInputLength(req.query, req.documents[i]);
      if (length > limit) {
        throw new AppError("invalid_parameter", {
          param: `documents[${i}]`,
          message: `Query plus documents[${i}] is ${length} tokens; the model '${this.entry.id}' takes at most ${limit} tokens per query/document pair.`,
        });
      }
      promptTokens += length;
    }
    const prepared = { promptTokens };
    this.prepared.set(req, prepared);
    return prepared;
  }

  async rerank(req: RerankRequest, signal: AbortSignal): Promise<RerankResult> {
    const context = this.requireContext();
    const { promptTokens } = this.prepareRerank(req);
    this.prepared.delete(req);
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
