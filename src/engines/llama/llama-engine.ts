import {
  resolveChatWrapper,
  type ChatWrapper,
  type LlamaContext,
  type LlamaContextSequence,
  type LlamaEmbeddingContext,
  type LlamaModel,
  type Token,
} from "node-llama-cpp";
import type { ModelEntry } from "../../config/app-config.ts";
import type { EngineLog } from "../engine-kind.ts";
import { fitCompletion } from "../context-window.ts";
import { AppError } from "../../errors/app-error.ts";
import type {
  ChatDelta,
  ChatPort,
  ChatRequest,
  CompletionDelta,
  CompletionPort,
  CompletionRequest,
  EmbedPort,
  EmbedRequest,
  EmbedResult,
  Engine,
  PreparedChat,
  PreparedEmbed,
  PromptCacheStats,
  ShareStanding,
  TokenizePort,
  TokenizeRequest,
} from "../engine.ts";
import { toChatHistory } from "./chat-history.ts";
import { llamaChatSupport, llamaOptions } from "./llama.support.ts";
import { embedAll, embeddingContextSize, embeddingInputLimit, tokenizeInputs, type TokenizedInputs } from "./llama-embed.ts";
import { getLlamaRuntime } from "./llama-runtime.ts";
import { PlainTextChatWrapper } from "./plain-chat-wrapper.ts";
import { ReasoningChatWrapper } from "./forced-call-wrapper.ts";
import { buildGenerationPlan, type GenerationPlan } from "./generation-plan.ts";
import { chatOnSequence } from "./llama-chat.ts";
import { Lockstep } from "./lockstep.ts";
import { checkLogitBias, completionPrompt, runCompletion, tokenizeText, vocabularySize } from "./llama-completion.ts";

/** Chats after which an unused sequence's cached tokens count half as much when choosing one to overwrite. */
const cacheHalfLife = 8;
/**
 * Sequences whose scores (in prompt tokens saved) differ by less than this are near-equals, chosen by their place.
 * An extra pass costs about one token's decode at every step two generations overlap, usually far more.
 */
const nearEqualTokens = 16;

/** Sampling defaults when neither the request nor the catalog entry sets them (OpenAI's own defaults). */
export const defaultTemperature = 1;
export const defaultTopP = 1;

interface LlamaPreparedChat extends PreparedChat {
  plan: GenerationPlan;
  /** The templated prompt, tokenized. */
  tokens: Token[];
}

interface LlamaPreparedCompletion extends PreparedChat {
  /** The prompt (or the FIM prompt), tokenized. */
  tokens: Token[];
}

interface LlamaPreparedEmbed extends PreparedEmbed {
  inputs: TokenizedInputs;
}

/**
 * A GGUF model served by node-llama-cpp. Chat models get one context with `parallel` sequences: each request takes
 * a free sequence for its lifetime (the one whose cached tokens it can reuse best, takeSequence) and gives it back
 * at the end, on abort at once, with its KV cache kept for the next request's shared prefix. Concurrent generations
 * are decoded together, one llama.cpp pass per step (lockstep.ts). Embedding models get an embedding context.
 */
export class LlamaEngine implements Engine, ChatPort<LlamaPreparedChat>, CompletionPort<LlamaPreparedCompletion>, TokenizePort, EmbedPort<LlamaPreparedEmbed> {
  readonly support = llamaChatSupport;
  private readonly capabilities: ReadonlySet<string>;
  private readonly threads: number;
  /** Chat sequences beyond `parallel`, for requests of accounts under their share (see the Lockstep's holds). */
  private readonly reserve: number;
  private model: LlamaModel | null = null;
  private context: LlamaContext | null = null;
  private embedder: LlamaEmbeddingContext | null = null;
  /** The model's own template wrapper, or the plain-text fallback. */
  private baseWrapper: ChatWrapper | null = null;
  /** What generation uses: the base wrapper, opened into a thought segment for reasoning models. */
  private wrapper: ChatWrapper | null = null;
  /**
   * The context's sequences, created once and lent out one per generation. Reusing them (rather than disposing,
   * which frees the id only asynchronously) makes a freed sequence available at once, and lets node-llama-cpp
   * reuse a shared prompt prefix still in the sequence's KV cache.
   */
  private freeSequences: LlamaContextSequence[] = [];
  /** Every sequence of the context, by id. */
  private sequences: LlamaContextSequence[] = [];
  /** Lines up the sequences' token requests so each decode carries every generating sequence's next token. */
  private lockstep = new Lockstep();
  private readonly promptCache: PromptCacheStats = { promptTokens: 0, reusedTokens: 0 };
  /** Chats started, the clock of `lastUsed` (when each sequence was last lent). */
  private chatsStarted = 0;
  private readonly lastUsed = new Map<LlamaContextSequence, number>();

  constructor(
    readonly entry: ModelEntry,
    private readonly log?: EngineLog,
  ) {
    this.capabilities = new Set(entry.capabilities);
    this.threads = llamaOptions(entry).threads;
    this.reserve = entry.capabilities.includes("chat") ? llamaOptions(entry).fairShareReserve : 0;
  }

  get pausableSlots(): number {
    return this.context ? this.reserve : 0;
  }

  get contextSize(): number | null {
    if (this.context) return this.context.contextSize;
    return this.embedder ? embeddingContextSize(this.embedder) : null;
  }

  /** The chat wrapper name in use ("PlainText" is the fallback for models without a template). */
  get chatWrapperName(): string | null {
    return this.wrapper?.wrapperName ?? null;
  }

  async load(signal?: AbortSignal): Promise<void> {
    if (!this.entry.path) throw new Error(`model ${this.entry.id} has no file path`);
    const llama = await getLlamaRuntime();
    const model = await llama.loadModel({ modelPath: this.entry.path, loadSignal: signal });
    // Which llama.cpp build serves: the prebuilt one, or one compiled for this CPU (npm run build:llama-native),
    // whose kernels batch f16 weights about a quarter faster (docs/llama-batching.md, "Cause").
    this.log?.info({ llamaCppBinary: llama.buildType }, `llama.cpp: node-llama-cpp ${llama.buildType === "localBuild" ? "local build for this CPU" : "prebuilt CPU binary"}`);
    try {
      const threads = { ideal: this.threads, min: this.threads };
      const contextSize = this.entry.contextSize ?? model.trainContextSize;
      if (this.capabilities.has("chat")) {
        const sequences = this.entry.parallel + this.reserve;
        const lockstep = (this.lockstep = new Lockstep());
        this.context = await model.createContext({
          sequences,
          contextSize,
          threads,
          flashAttention: llamaOptions(this.entry).flashAttention,
          batching: { dispatchSchedule: (dispatch) => lockstep.schedule(dispatch) },
          createSignal: signal,
        });
        // node-llama-cpp gives a fresh context's sequences the ids 0, 1, 2... in this order.
        this.sequences = Array.from({ length: sequences }, () => this.context!.getSequence());
        this.freeSequences = [...this.sequences];
        this.sequences.forEach((sequence, id) => lockstep.attach(sequence, id));
        this.baseWrapper = model.fileInfo.metadata.tokenizer?.chat_template ? resolveChatWrapper(model) : new PlainTextChatWrapper();
        this.wrapper =
          this.capabilities.has("reasoning") && ReasoningChatWrapper.supports(this.baseWrapper)
            ? new ReasoningChatWrapper(this.baseWrapper)
            : this.baseWrapper;
      }
      if (this.capabilities.has("embeddings")) {
        this.embedder = await model.createEmbeddingContext({ contextSize, threads: this.threads, createSignal: signal });
      }
      this.model = model;
    } catch (err) {
      await this.context?.dispose();
      await this.embedder?.dispose();
      await model.dispose();
      throw err;
    }
  }

  async unload(): Promise<void> {
    await this.embedder?.dispose();
    await this.context?.dispose();
    await this.model?.dispose();
    this.embedder = null;
    this.context = null;
    this.freeSequences = [];
    this.sequences = [];
    this.lastUsed.clear();
    this.wrapper = null;
    this.baseWrapper = null;
    this.model = null;
  }

  /**
   * Lends the free sequence that best keeps the KV cache useful: the one sharing the longest prefix with the prompt
   * (a conversation's next turn then evaluates only its new tokens; LlamaChat and the logprobs loop keep the
   * matching prefix), weighed against the cached tokens it would throw away, valued less the longer ago they were
   * used. One-off requests then churn the sequences holding little or stale content, and a live conversation's
   * cache survives them. Among equals, the most recently freed; but a near-equal next to a busy sequence goes first
   * (llama.cpp decodes a batch in one pass per run of consecutive sequence ids, so a gap between busy ids costs
   * another pass over the weights at every step).
   */
  private takeSequence(prompt: Token[]): LlamaContextSequence {
    const now = ++this.chatsStarted;
    const free = new Set(this.freeSequences);
    const busy = (id: number) => id >= 0 && id < this.sequences.length && !free.has(this.sequences[id]!);
    const scored = this.freeSequences.map((sequence, index) => {
      const shared = sequence.compareContextTokens(prompt).firstDifferentIndex;
      // A cached token lost counts a quarter of one saved, halved for every cacheHalfLife chats since its last use.
      const age = now - (this.lastUsed.get(sequence) ?? 0);
      const score = shared - ((sequence.contextTokens.length - shared) / 4) * 0.5 ** (age / cacheHalfLife);
      const id = this.sequences.indexOf(sequence);
      return { index, shared, score, neighbours: Number(busy(id - 1)) + Number(busy(id + 1)) };
    });
    if (scored.length === 0) throw new Error(`model ${this.entry.id}: no free sequence (the scheduler admits at most parallel=${this.entry.parallel} + ${this.reserve} paused)`);
    type Candidate = (typeof scored)[number];
    const better = (a: Candidate, b: Candidate) => (b.score > a.score || (b.score === a.score && b.index > a.index) ? b : a);
    let best = scored.reduce(better);
    const placed = scored.filter((c) => c.neighbours > best.neighbours && c.score >= best.score - nearEqualTokens);
    if (placed.length > 0) best = placed.reduce((a, b) => (b.neighbours > a.neighbours ? b : b.neighbours < a.neighbours ? a : better(a, b)));
    this.promptCache.promptTokens += prompt.length;
    // At least the last prompt token is evaluated again: generation needs its logits.
    this.promptCache.reusedTokens += Math.min(best.shared, prompt.length - 1);
    const chosen = this.freeSequences.splice(best.index, 1)[0]!;
    this.lastUsed.set(chosen, now);
    return chosen;
  }

  promptCacheStats(): PromptCacheStats {
    return { ...this.promptCache };
  }

  /** Free sequences in the chat context (for tests and stats). */
  get sequencesLeft(): number {
    return this.freeSequences.length;
  }

  /** How generation steps were batched: steps released and tokens requested in them (for tests and the probe). */
  get lockstepStats(): { generations: number; steps: number; tokens: number } {
    return this.lockstep.stats;
  }

  private ready(): { model: LlamaModel; context: LlamaContext; wrapper: ChatWrapper; baseWrapper: ChatWrapper } {
    if (!this.model || !this.context || !this.wrapper || !this.baseWrapper) throw new Error(`model ${this.entry.id} is not loaded for chat`);
    return { model: this.model, context: this.context, wrapper: this.wrapper, baseWrapper: this.baseWrapper };
  }

  async prepareChat(req: ChatRequest): Promise<LlamaPreparedChat> {
    const { model, context, wrapper, baseWrapper } = this.ready();
    const history = toChatHistory(req.messages);
    const plan = await buildGenerationPlan(req, { model, baseWrapper, history });
    // The logprobs loop, and a request without thinking, render with the model's own wrapper (no opened thought segment).
    const renderWith = plan.wrapper ?? (req.topLogprobs !== null || req.reasoning === false ? baseWrapper : wrapper);
    const { contextText } = renderWith.generateContextState({
      chatHistory: history,
      availableFunctions: plan.functions,
      documentFunctionParams: plan.functions ? true : undefined,
    });
    const tokens = contextText.tokenize(model.tokenizer);
    const promptTokens = tokens.length;
    return { promptTokens, maxTokens: fitCompletion(context.contextSize, promptTokens, req).budget, plan, tokens };
  }

  /** One run per delta: a token is decoded at a time. */
  async *chat(req: ChatRequest, prepared: LlamaPreparedChat, signal: AbortSignal, standing?: ShareStanding): AsyncIterable<ChatDelta[]> {
    for await (const delta of this.onSequence(prepared.tokens, signal, standing, (sequence) => this.generate(req, prepared, signal, sequence))) yield [delta];
  }

  /** Lends a sequence (takeSequence) to one generation, in the lockstep with the request's standing. */
  private async *onSequence<D>(prompt: Token[], signal: AbortSignal, standing: ShareStanding | undefined, run: (sequence: LlamaContextSequence) => AsyncIterable<D>): AsyncIterable<D> {
    signal.throwIfAborted();
    const sequence = this.takeSequence(prompt);
    const id = this.sequences.indexOf(sequence);
    this.lockstep.assign(id, standing ?? null);
    try {
      yield* run(sequence);
    } finally {
      this.lockstep.assign(id, null);
      this.freeSequences.push(sequence);
    }
  }

  /** The prompt as it is (no template), or the model's FIM prompt for a suffix; its length against the window. */
  async prepareCompletion(req: CompletionRequest): Promise<LlamaPreparedCompletion> {
    const { model, context } = this.ready();
    checkLogitBias(model, req.logitBias);
    const tokens = completionPrompt(model, req, this.entry.id);
    const subject = { param: req.promptParam, takes: req.suffix === null ? "The prompt takes" : "The prompt and suffix take" };
    return { promptTokens: tokens.length, maxTokens: fitCompletion(context.contextSize, tokens.length, req, subject).budget, tokens };
  }

  complete(req: CompletionRequest, prepared: LlamaPreparedCompletion, signal: AbortSignal, standing?: ShareStanding): AsyncIterable<CompletionDelta> {
    const { model } = this.ready();
    const temperature = req.temperature ?? this.entry.defaults.temperature ?? defaultTemperature;
    const topP = req.topP ?? this.entry.defaults.topP ?? defaultTopP;
    return this.onSequence(prepared.tokens, signal, standing, (sequence) =>
      runCompletion({ model, sequence, req, tokens: prepared.tokens, maxTokens: prepared.maxTokens, temperature, topP, signal }),
    );
  }

  async tokenize(req: TokenizeRequest): Promise<number[]> {
    if ("chat" in req) return (await this.prepareChat(req.chat)).tokens;
    return tokenizeText(this.loadedModel(), req.text, req.addSpecial);
  }

  async detokenize(tokens: readonly number[]): Promise<string> {
    const model = this.loadedModel();
    const size = vocabularySize(model);
    const outside = tokens.findIndex((t) => t >= size);
    if (outside >= 0) throw new AppError("invalid_parameter", { param: `tokens[${outside}]`, message: `Token ${tokens[outside]} is not in the model's vocabulary (0 to ${size - 1}).` });
    return model.detokenize(tokens as Token[], true);
  }

  /** The model, for chat and embeddings models alike (the tokenizer serves both). */
  private loadedModel(): LlamaModel {
    if (!this.model) throw new Error(`model ${this.entry.id} is not loaded`);
    return this.model;
  }

  /** One chat on a lent sequence: the logprobs loop, or LlamaChat. */
  private generate(req: ChatRequest, prepared: LlamaPreparedChat, signal: AbortSignal, sequence: LlamaContextSequence): AsyncIterable<ChatDelta> {
    const ready = this.ready();
    const { model } = ready;
    const wrapper = req.reasoning === false ? ready.baseWrapper : ready.wrapper;
    const temperature = req.temperature ?? this.entry.defaults.temperature ?? defaultTemperature;
    const topP = req.topP ?? this.entry.defaults.topP ?? defaultTopP;
    return chatOnSequence({ model, wrapper, sequence, req, plan: prepared.plan, tokens: prepared.tokens, maxTokens: prepared.maxTokens, promptTokens: prepared.promptTokens, temperature, topP, signal });
  }

  /** Tokenizes and checks every input before capacity is taken (400 invalid_parameter naming `input[i]`). */
  prepareEmbed(req: EmbedRequest): LlamaPreparedEmbed {
    if (!this.embedder) throw new Error(`model ${this.entry.id} is not loaded for embeddings`);
    const inputs = tokenizeInputs(this.embedder, req.inputs, embeddingInputLimit(this.embedder, this.entry), this.entry.id);
    return { inputs, promptTokens: inputs.promptTokens };
  }

  async embed(_req: EmbedRequest, prepared: LlamaPreparedEmbed, signal: AbortSignal): Promise<EmbedResult> {
    if (!this.embedder) throw new Error(`model ${this.entry.id} is not loaded for embeddings`);
    return embedAll(this.embedder, prepared.inputs, signal);
  }
}
