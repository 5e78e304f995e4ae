import type { ModelEntry } from "../../config/app-config.ts";
import { parseTimerDuration } from "../../config/duration.ts";
import { fitCompletion } from "../context-window.ts";
import type { EngineLog } from "../engine-kind.ts";
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
  EngineSupport,
  PreparedChat,
  PreparedEmbed,
  PreparedRerank,
  PreparedTranscription,
  RerankPort,
  RerankRequest,
  RerankResult,
  TokenizePort,
  TokenizeRequest,
  TranscribePort,
  TranscribeRequest,
  Transcript,
} from "../engine.ts";
import { conversationKey } from "./affinity-key.ts";
import { ChunkReader, toWireChat, type WireChunk } from "./chat-wire.ts";
import { embeddingsCall, readEmbeddings, readRerank, rerankCall, transcriptionForm, readTranscript } from "./endpoint-wire.ts";
import { countCompletion, countPrompt, detokenizeWith, llamaServerContext, llamaServerVocabulary, tokenizeWith, type PromptCount } from "./prompt-counter.ts";
import { CompletionChunkReader, toWireCompletion, toWireInfill, type WireCompletionChunk } from "./completion-wire.ts";
import { collectedDeltas, endedEarly, streamedDeltas, type GenerationCall } from "./upstream-stream.ts";
import { UpstreamClient, type UpstreamTimeouts } from "./upstream-client.ts";
import { PoolMember, type MemberStats } from "./pool-member.ts";
import { UpstreamPool, type PoolLease } from "./upstream-pool.ts";
import { upstreamDetail, UpstreamUnavailable } from "./upstream-errors.ts";
import { tokenizeStrategy, upstreamOptions, upstreamSupportOf, type TokenizeStrategy, type UpstreamOptions } from "./upstream.support.ts";

/** A prepared chat, and the max_tokens the upstream is asked for (null: none). */
export interface UpstreamPreparedChat extends PreparedChat {
  asked: number | null;
}

function timeoutsOf(options: UpstreamOptions): UpstreamTimeouts {
  const t = options.timeouts ?? {};
  return {
    connectMs: parseTimerDuration(t.connect ?? "2s"),
    firstByteMs: parseTimerDuration(t.firstByte ?? "60s"),
    idleMs: parseTimerDuration(t.idle ?? "30s"),
    totalMs: parseTimerDuration(t.total ?? "10m"),
  };
}

/**
 * A model served by another inference server (vLLM, SGLang, TGI, llama-server, Ollama, another Modelgate node).
 * Everything of the contract (auth, limits, validation, admission) has happened before a call gets here; this
 * translates to the upstream's wire and back, and maps its failures to §7.
 */
export class UpstreamEngine implements Engine, ChatPort<UpstreamPreparedChat>, CompletionPort<UpstreamPreparedChat>, TokenizePort, EmbedPort, RerankPort, TranscribePort {
  readonly support: EngineSupport;
  private readonly options: UpstreamOptions;
  private readonly timeouts: UpstreamTimeouts;
  private readonly protocol: NonNullable<UpstreamOptions["protocol"]>;
  private pool: UpstreamPool | null = null;
  private learnedContext: number | null = null;
  /** The vocabulary size a llama-server reports (`/v1/models` meta), learned at the first detokenize. */
  private vocabulary: number | null | undefined;
  private readonly reported = new WeakSet<object>();

  constructor(
    private readonly entry: ModelEntry,
    private readonly log: EngineLog,
  ) {
    this.options = upstreamOptions(entry);
    this.support = upstreamSupportOf(this.options);
    this.timeouts = timeoutsOf(this.options);
    this.protocol = this.options.protocol ?? "openai";
  }

  get contextSize(): number | null {
    return this.entry.contextSize ?? this.learnedContext;
  }

  async load(): Promise<void> {
    const o = this.options;
    const modelgate = this.protocol === "modelgate";
    const members = o.upstreams.map((u) => {
      const client = new UpstreamClient({ url: u.url.replace(/\/$/, ""), apiKey: u.apiKey ?? null, model: u.model, ca: UpstreamClient.readCa(u.ca) }, this.timeouts, modelgate);
      return new PoolMember(client, {
        weight: u.weight ?? 1,
        maxInFlight: u.maxInFlight ?? 64,
        breakerFailures: o.breaker?.failures ?? 5,
        cooldownMs: parseTimerDuration(o.breaker?.cooldown ?? "10s"),
        unhealthyAfter: o.health?.unhealthyAfter ?? 3,
        healthyAfter: o.health?.healthyAfter ?? 2,
      });
    });
    this.pool = new UpstreamPool(members, {
      routing: o.routing ?? "least-outstanding",
      attempts: o.retry?.attempts ?? 3,
      maxWaitMs: parseTimerDuration(o.retry?.maxWait ?? "20s"),
      healthIntervalMs: parseTimerDuration(o.health?.interval ?? "5s"),
      healthPath: o.health?.path ?? (modelgate ? "/healthz" : "/health"),
      loadFactor: o.affinity?.loadFactor ?? 1.25,
    });
    this.pool.startHealthChecks();
  }

  async unload(): Promise<void> {
    const pool = this.pool;
    this.pool = null;
    pool?.stop();
    await Promise.all((pool?.members ?? []).map((m) => m.client.close()));
  }

  /** Each upstream's state, in flight, recent failures and latency (the admin API shows them). */
  upstreamStats(): MemberStats[] {
    return this.pool?.stats() ?? [];
  }

  takeUpstreamLatencies(): Map<string, number[]> {
    return new Map((this.pool?.members ?? []).map((m) => [m.client.target.url, m.takeLatencies()]));
  }

  private requirePool(): UpstreamPool {
    if (!this.pool) throw new UpstreamUnavailable(`The model '${this.entry.id}' has no upstream loaded.`, null, 1000);
    return this.pool;
  }

  /**
   * The pool's acquire, with every failed attempt logged against its upstream (the client's message names none),
   * and a failure of the pool itself (every upstream ejected) logged with each upstream's state.
   */
  private async acquire<T>(signal: AbortSignal, establish: (client: UpstreamClient) => Promise<T>, key: number | null = null): Promise<PoolLease<T>> {
    const pool = this.requirePool();
    try {
      return await pool.acquire(
        signal,
        async (member) => {
          try {
            return await establish(member.client);
          } catch (err) {
            this.report(err, member.client.origin);
            throw err;
          }
        },
        key,
      );
    } catch (err) {
      this.report(err, pool.stats().map((s) => `${s.url} (${s.state})`).join(", "));
      throw err;
    }
  }

  /** Logs an upstream's failure once, with what the client's message leaves out: where, and the upstream's words. */
  private report(err: unknown, upstream: string): void {
    if (typeof err !== "object" || err === null || this.reported.has(err)) return;
    const detail = upstreamDetail(err);
    if (detail === null && !(err instanceof UpstreamUnavailable)) return;
    this.reported.add(err);
    const fields = { upstream, code: (err as UpstreamUnavailable).code, detail: detail ?? (err as Error).message };
    if (err instanceof UpstreamUnavailable) this.log.warn(fields, "upstream failed");
    else this.log.info(fields, "upstream refused the request");
  }

  /** One whole call on the pool (retried by its rules), for answers that are not streamed to the client. */
  private async call<T>(signal: AbortSignal, fn: (client: UpstreamClient) => Promise<T>, key: number | null = null): Promise<T> {
    const lease = await this.acquire(signal, fn, key);
    lease.release();
    return lease.value;
  }

  async prepareChat(req: ChatRequest, signal = AbortSignal.timeout(this.timeouts.firstByteMs)): Promise<UpstreamPreparedChat> {
    const counted = await this.count(signal, (strategy, client) => countPrompt(strategy, client, req, signal));
    // Without our own count of the prompt, the window is the upstream's to check.
    const { budget, asked } = fitCompletion(counted ? this.contextSize : null, counted?.count ?? 0, req);
    return { promptTokens: counted?.count ?? 0, maxTokens: budget, asked };
  }

  /** A prompt counted by the `tokenize` strategy (null with none), learning the window from the answer when unset. */
  private async count(signal: AbortSignal, counter: (strategy: TokenizeStrategy, client: UpstreamClient) => Promise<PromptCount | null>): Promise<PromptCount | null> {
    const strategy = tokenizeStrategy(this.options);
    if (strategy === "none") return null;
    return this.call(signal, async (client) => {
      const count = await counter(strategy, client);
      if (count && this.entry.contextSize === null && this.learnedContext === null) {
        this.learnedContext = count.contextSize ?? (strategy === "llama-server" ? await llamaServerContext(client, signal) : null);
      }
      return count;
    });
  }

  async prepareCompletion(req: CompletionRequest, signal = AbortSignal.timeout(this.timeouts.firstByteMs)): Promise<UpstreamPreparedChat> {
    const counted = await this.count(signal, (strategy, client) => countCompletion(strategy, client, req, signal));
    const subject = { param: req.promptParam, takes: req.suffix === null ? "The prompt takes" : "The prompt and suffix take" };
    const { budget, asked } = fitCompletion(counted ? this.contextSize : null, counted?.count ?? 0, { maxTokens: req.maxTokens, outputCap: req.outputCap }, subject);
    return { promptTokens: counted?.count ?? 0, maxTokens: budget, asked };
  }

  /** /v1/completions (or llama-server's /infill for a suffix, with `infill: llama-server`), relayed as chat is. */
  complete(req: CompletionRequest, prepared: UpstreamPreparedChat, signal: AbortSignal): AsyncIterable<CompletionDelta> {
    return flatten(this.relay(signal, null, req.buffered === true, (client) => this.completionCall(client, req, prepared), (deltas) => deltas));
  }

  private completionCall(client: UpstreamClient, req: CompletionRequest, prepared: UpstreamPreparedChat): GenerationCall<CompletionDelta> {
    const options = { model: client.target.model, maxTokens: prepared.asked, defaults: this.entry.defaults };
    const infill = req.suffix !== null && this.options.infill === "llama-server";
    const call = infill
      ? { path: "/infill", root: true, json: toWireInfill(req, options), contextParam: req.promptParam, unsupportedParam: "suffix" }
      : { path: "/completions", json: toWireCompletion(req, options), contextParam: req.promptParam };
    const reader = new CompletionChunkReader(req.promptLogprobs ? { promptLength: req.prompt.length } : null);
    return {
      call,
      read: (chunk) => reader.read(chunk as WireCompletionChunk),
      flush: () => reader.flush(),
      done: () => {
        if (reader.finishReason === null) throw endedEarly(client.origin);
        const usage = reader.usage ?? { promptTokens: prepared.promptTokens, completionTokens: reader.pieces };
        return { type: "done", finishReason: reader.finishReason, usage };
      },
    };
  }

  async tokenize(req: TokenizeRequest, signal: AbortSignal): Promise<number[]> {
    const strategy = this.tokenizer();
    const tokens = await this.call(signal, (client) => tokenizeWith(strategy, client, req, signal));
    if (tokens === null) throw new UpstreamUnavailable("The model's engine did not answer the token ids.", null, 1000, "overloaded", `tokenize (${strategy}) answered no tokens`);
    return tokens;
  }

  async detokenize(tokens: readonly number[], signal: AbortSignal): Promise<string> {
    const strategy = this.tokenizer();
    return this.call(signal, async (client) => {
      // llama-server fails (500) on an id outside its vocabulary: checked here, against the size it reports.
      if (strategy === "llama-server") {
        const size = (this.vocabulary ??= await llamaServerVocabulary(client, signal));
        const outside = size === null ? -1 : tokens.findIndex((t) => t >= size);
        if (outside >= 0) throw new AppError("invalid_parameter", { param: `tokens[${outside}]`, message: `Token ${tokens[outside]} is not in the model's vocabulary (0 to ${size! - 1}).` });
      }
      return detokenizeWith(strategy, client, tokens, signal);
    });
  }

  private tokenizer(): Exclude<TokenizeStrategy, "none"> {
    const strategy = tokenizeStrategy(this.options);
    // The capability check refused tokenization of a model without a strategy (upstreamSupportOf).
    if (strategy === "none") throw new Error(`model ${this.entry.id}: tokenize is none, yet a tokenize port was asked for`);
    return strategy;
  }

  /** The deltas of each read of the upstream's stream as one run; a buffered answer as one run. */
  chat(req: ChatRequest, prepared: UpstreamPreparedChat, signal: AbortSignal): AsyncIterable<ChatDelta[]> {
    const key = this.options.routing === "prefix-affinity" ? conversationKey(req.messages) : null;
    return this.relay(signal, key, req.buffered === true, (client) => this.chatCall(client, req, prepared), joinContent);
  }

  /**
   * One generation on the pool, as runs of deltas. A client waiting for the whole answer (`buffered`) has nothing
   * committed until the end, so the whole generation may be retried on another upstream (collected whole, its deltas
   * joined by `join`, one run); a streaming client is committed at its first run, so only the steps before it
   * (connect, headers, the first events) are.
   */
  private async *relay<D>(signal: AbortSignal, key: number | null, buffered: boolean, generation: (client: UpstreamClient) => GenerationCall<D>, join: (deltas: D[]) => D[]): AsyncGenerator<D[]> {
    if (buffered) {
      yield await this.call(
        signal,
        async (client) => join(await collectedDeltas(client, generation(client), this.timeouts, signal)),
        key,
      );
      return;
    }
    const lease = await this.acquire(
      signal,
      async (client) => {
        const stream = streamedDeltas(client, generation(client), this.timeouts, signal);
        return { stream, first: await stream.next() };
      },
      key,
    );
    try {
      const { stream, first } = lease.value;
      if (first.done) return;
      yield first.value;
      yield* stream;
    } catch (err) {
      this.report(err, lease.member.client.origin);
      throw err;
    } finally {
      lease.release();
    }
  }

  private chatCall(client: UpstreamClient, req: ChatRequest, prepared: UpstreamPreparedChat): GenerationCall<ChatDelta> {
    const reader = new ChunkReader();
    const json = toWireChat(req, { model: client.target.model, maxTokens: prepared.asked, defaults: this.entry.defaults });
    return {
      call: { path: "/chat/completions", json, contextParam: "messages" },
      read: (chunk) => reader.read(chunk as WireChunk),
      flush: () => [],
      done: () => {
        if (reader.finishReason === null) throw endedEarly(client.origin);
        // No usage from the upstream: the prompt as counted in prepare (0 when not counted) and one token per piece.
        const usage = reader.usage ?? { promptTokens: prepared.promptTokens, completionTokens: reader.pieces };
        const cached = reader.cachedPromptTokens;
        return { type: "done", finishReason: reader.finishReason, usage, ...(cached !== undefined ? { cachedPromptTokens: Math.min(cached, usage.promptTokens) } : {}) };
      },
    };
  }

  prepareEmbed(): PreparedEmbed {
    return { promptTokens: 0 };
  }

  async embed(req: EmbedRequest, _prepared: PreparedEmbed, signal: AbortSignal): Promise<EmbedResult> {
    return this.call(signal, async (client) => {
      const answer = await client.json<unknown>({ ...embeddingsCall(this.protocol, client.target.model, req.inputs), signal, contextParam: "input" });
      return readEmbeddings(answer, req.inputs.length, client.origin);
    });
  }

  prepareRerank(): PreparedRerank {
    return { promptTokens: 0 };
  }

  async rerank(req: RerankRequest, _prepared: PreparedRerank, signal: AbortSignal): Promise<RerankResult> {
    return this.call(signal, async (client) => {
      const answer = await client.json<unknown>({ ...rerankCall(this.protocol, client.target.model, req), signal, contextParam: "documents" });
      return readRerank(answer, req.documents.length, client.origin);
    });
  }

  /** The file goes upstream as it came: nothing to decode here, and one slot (the upstream cuts windows itself). */
  async prepareTranscribe(): Promise<PreparedTranscription> {
    return { audio: null, windows: 1 };
  }

  async transcribe(req: TranscribeRequest, _prepared: PreparedTranscription, signal: AbortSignal): Promise<Transcript> {
    return this.call(signal, async (client) => {
      const answer = await client.json<unknown>({ path: "/audio/transcriptions", form: transcriptionForm(client.target.model, req), signal, contextParam: "file" });
      return readTranscript(answer, req, client.origin);
    });
  }
}

/**
 * A buffered answer's runs of content deltas, each as one delta (text joined, logprobs kept in order). The whole
 * answer is in hand before its first delta is passed on, so one delta per token would only cost the loop above a
 * step, a timer observation and an accumulator call per token, and record inter-token gaps that are our own loop's.
 * Reasoning deltas stay one per piece: the Responses API counts them as reasoning tokens.
 */
function joinContent(deltas: ChatDelta[]): ChatDelta[] {
  const joined: ChatDelta[] = [];
  let run: Extract<ChatDelta, { type: "content" }> | null = null;
  for (const delta of deltas) {
    if (delta.type !== "content") {
      run = null;
      joined.push(delta);
    } else if (run === null) {
      run = { type: "content", text: delta.text, ...(delta.logprobs ? { logprobs: [...delta.logprobs] } : {}) };
      joined.push(run);
    } else {
      run.text += delta.text;
      if (delta.logprobs) (run.logprobs ??= []).push(...delta.logprobs);
    }
  }
  return joined;
}

/** Runs of deltas, one delta at a time (the completion port's interface). */
async function* flatten<D>(batches: AsyncIterable<D[]>): AsyncGenerator<D> {
  for await (const batch of batches) yield* batch;
}
