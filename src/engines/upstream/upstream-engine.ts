import type { ModelEntry } from "../../config/app-config.ts";
import { parseDuration } from "../../config/duration.ts";
import { fitContextWindow } from "../context-window.ts";
import type {
  ChatDelta,
  ChatRequest,
  EmbedRequest,
  EmbedResult,
  Engine,
  PreparedChat,
  PreparedEmbed,
  PreparedRerank,
  PreparedTranscription,
  RerankRequest,
  RerankResult,
  TranscribeRequest,
  Transcript,
} from "../engine.ts";
import { ChunkReader, toWireChat, type WireChunk } from "./chat-wire.ts";
import { embeddingsCall, readEmbeddings, readRerank, rerankCall, transcriptionForm, readTranscript } from "./endpoint-wire.ts";
import { countPrompt, llamaServerContext, type TokenizeStrategy } from "./prompt-counter.ts";
import { sseEvents } from "./sse-events.ts";
import { StallWatchdog } from "./stall-watchdog.ts";
import { UpstreamClient, type UpstreamTimeouts } from "./upstream-client.ts";
import { readErrorBody, UpstreamUnavailable } from "./upstream-errors.ts";
import { upstreamOptions, upstreamSupport, type UpstreamOptions } from "./upstream.kind.ts";

/** A prepared chat, plus the budget that means "nobody set one" (-1 when the client did). */
interface UpstreamPreparedChat extends PreparedChat {
  unsetBudget: number;
}

function timeoutsOf(options: UpstreamOptions): UpstreamTimeouts {
  const t = options.timeouts ?? {};
  return {
    connectMs: parseDuration(t.connect ?? "2s"),
    firstByteMs: parseDuration(t.firstByte ?? "60s"),
    idleMs: parseDuration(t.idle ?? "30s"),
    totalMs: parseDuration(t.total ?? "10m"),
  };
}

export function tokenizeStrategy(options: UpstreamOptions): TokenizeStrategy {
  return options.tokenize ?? (options.protocol === "modelgate" ? "modelgate" : "none");
}

/**
 * A model served by another inference server (vLLM, SGLang, TGI, llama-server, Ollama, another Modelgate node).
 * Everything of the contract (auth, limits, validation, admission) has happened before a call gets here; this
 * translates to the upstream's wire and back, and maps its failures to §7.
 */
export class UpstreamEngine implements Engine {
  readonly support = upstreamSupport;
  private readonly options: UpstreamOptions;
  private readonly timeouts: UpstreamTimeouts;
  private readonly protocol: NonNullable<UpstreamOptions["protocol"]>;
  private clients: UpstreamClient[] = [];
  private learnedContext: number | null = null;
  private next = 0;

  constructor(private readonly entry: ModelEntry) {
    this.options = upstreamOptions(entry);
    this.timeouts = timeoutsOf(this.options);
    this.protocol = this.options.protocol ?? "openai";
  }

  get contextSize(): number | null {
    return this.entry.contextSize ?? this.learnedContext;
  }

  async load(): Promise<void> {
    const modelgate = this.protocol === "modelgate";
    this.clients = this.options.upstreams.map(
      (u) => new UpstreamClient({ url: u.url.replace(/\/$/, ""), apiKey: u.apiKey ?? null, model: u.model, ca: UpstreamClient.readCa(u.ca) }, this.timeouts, modelgate),
    );
  }

  async unload(): Promise<void> {
    const clients = this.clients;
    this.clients = [];
    await Promise.all(clients.map((c) => c.close()));
  }

  /** The upstream for the next call (round robin; the pool issue replaces this with routing and health). */
  private pick(): UpstreamClient {
    const client = this.clients[this.next++ % this.clients.length];
    if (!client) throw new UpstreamUnavailable(`The model '${this.entry.id}' has no upstream loaded.`, null, 1000);
    return client;
  }

  async prepareChat(req: ChatRequest, signal = AbortSignal.timeout(this.timeouts.firstByteMs)): Promise<UpstreamPreparedChat> {
    const strategy = tokenizeStrategy(this.options);
    const client = this.pick();
    const counted = await countPrompt(strategy, client, req, signal);
    if (counted && this.entry.contextSize === null && this.learnedContext === null) {
      this.learnedContext = counted.contextSize ?? (strategy === "llama-server" ? await llamaServerContext(client, signal) : null);
    }
    const window = this.contextSize;
    if (!counted || window === null) {
      return { promptTokens: counted?.count ?? 0, maxTokens: req.maxTokens ?? Number.MAX_SAFE_INTEGER, unsetBudget: req.maxTokens === null ? Number.MAX_SAFE_INTEGER : -1 };
    }
    const budget = fitContextWindow(window, counted.count, req.maxTokens);
    return { promptTokens: counted.count, maxTokens: budget, unsetBudget: req.maxTokens === null ? budget : -1 };
  }

  async *chat(req: ChatRequest, prepared: PreparedChat, signal: AbortSignal): AsyncIterable<ChatDelta> {
    const client = this.pick();
    // Left unset upstream unless the client or the plan's cap set it: our count of the prompt may differ slightly.
    const budget = prepared.maxTokens === (prepared as UpstreamPreparedChat).unsetBudget ? null : prepared.maxTokens;
    const watchdog = new StallWatchdog(this.timeouts.firstByteMs, this.timeouts.idleMs, client.origin);
    const callSignal = AbortSignal.any([signal, watchdog.signal]);
    const reader = new ChunkReader();
    try {
      const body = toWireChat(req, { model: client.target.model, maxTokens: budget, defaults: this.entry.defaults });
      const response = await client.send({ path: "/chat/completions", json: body, signal: callSignal, contextParam: "messages", streaming: true });
      try {
        for await (const event of sseEvents(response.body)) {
          watchdog.beat();
          const chunk = parseChunk(event.data, client.origin);
          if (chunk.error !== undefined) throw streamError(chunk.error, client.origin);
          yield* reader.read(chunk);
        }
      } finally {
        response.body.destroy();
      }
    } catch (err) {
      throw client.failure(err, callSignal, null);
    } finally {
      watchdog.stop();
    }
    if (reader.finishReason === null) throw new UpstreamUnavailable(`The model's engine ended the stream before it finished (${client.origin}).`, null, 1000);
    // No usage from the upstream: the prompt as counted in prepare (0 when not counted) and one token per piece.
    const usage = reader.usage ?? { promptTokens: prepared.promptTokens, completionTokens: reader.pieces };
    yield { type: "done", finishReason: reader.finishReason, usage };
  }

  prepareEmbed(): PreparedEmbed {
    return { promptTokens: 0 };
  }

  async embed(req: EmbedRequest, _prepared: PreparedEmbed, signal: AbortSignal): Promise<EmbedResult> {
    const client = this.pick();
    const answer = await client.json<unknown>({ ...embeddingsCall(this.protocol, client.target.model, req.inputs), signal, contextParam: "input" });
    return readEmbeddings(answer, req.inputs.length, client.origin);
  }

  prepareRerank(): PreparedRerank {
    return { promptTokens: 0 };
  }

  async rerank(req: RerankRequest, _prepared: PreparedRerank, signal: AbortSignal): Promise<RerankResult> {
    const client = this.pick();
    const answer = await client.json<unknown>({ ...rerankCall(this.protocol, client.target.model, req), signal, contextParam: "documents" });
    return readRerank(answer, req.documents.length, client.origin);
  }

  /** The file goes upstream as it came: nothing to decode here, and one slot (the upstream cuts windows itself). */
  async prepareTranscribe(): Promise<PreparedTranscription> {
    return { audio: null, windows: 1 };
  }

  async transcribe(req: TranscribeRequest, _prepared: PreparedTranscription, signal: AbortSignal): Promise<Transcript> {
    const client = this.pick();
    const answer = await client.json<unknown>({ path: "/audio/transcriptions", form: transcriptionForm(client.target.model, req), signal, contextParam: "file" });
    return readTranscript(answer, req, client.origin);
  }
}

function parseChunk(data: string, origin: string): WireChunk {
  try {
    return JSON.parse(data) as WireChunk;
  } catch {
    throw new UpstreamUnavailable(`The model's engine sent a malformed stream event (${origin}).`, null, 1000);
  }
}

/** An error event inside an upstream stream (vLLM, llama-server: `data: {"error": {...}}`). */
function streamError(error: unknown, origin: string): UpstreamUnavailable {
  const { message } = readErrorBody(JSON.stringify({ error }));
  return new UpstreamUnavailable(`The model's engine failed during the stream (${origin}): ${message}`, null, 1000);
}
