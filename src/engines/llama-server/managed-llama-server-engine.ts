import type { ModelEntry } from "../../config/app-config.ts";
import { parseTimerDuration } from "../../config/duration.ts";
import { AppError } from "../../errors/app-error.ts";
import type { EngineLog } from "../engine-kind.ts";
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
  PreparedEmbed,
  PreparedRerank,
  RerankPort,
  RerankRequest,
  RerankResult,
  TokenizePort,
  TokenizeRequest,
} from "../engine.ts";
import type { MemberStats } from "../upstream/pool-member.ts";
import { UpstreamEngine, type UpstreamPreparedChat } from "../upstream/upstream-engine.ts";
import type { UpstreamOptions } from "../upstream/upstream.support.ts";
import { LlamaServerProcess, type LlamaServerEndpoint } from "./llama-server-process.ts";
import { llamaServerOptions, llamaServerSupport } from "./llama-server.support.ts";

/**
 * Sampling as on the in-process engine and in OpenAI's API (decision 0009): temperature and top_p 1 unless the
 * request or the entry's `defaults` say otherwise (the relay sends them), top-k and min-p off. llama-server's own
 * defaults (temperature 0.8, top_k 40, top_p 0.95, min_p 0.05) would make the same entry sample another distribution
 * when `llama.server` places it here.
 */
export const openAiSampling = ["--temp", "1", "--top-k", "0", "--top-p", "1", "--min-p", "0"];

/** The llama-server flags for an entry: the model, one slot per `parallel`, each with the entry's context. */
export function llamaServerArgs(entry: ModelEntry): string[] {
  const options = llamaServerOptions(entry);
  const threads = String(options.threads ?? 1);
  // -c is the whole KV cache, shared out over the -np slots: contextSize each.
  const context = entry.contextSize === null ? "0" : String(entry.contextSize * entry.parallel);
  const role = entry.capabilities.includes("chat") ? ["--jinja"] : entry.capabilities.includes("rerank") ? ["--reranking"] : ["--embeddings"];
  return ["-m", entry.path!, "-np", String(entry.parallel), "-c", context, "-t", threads, "-tb", threads, "--no-webui", ...role, ...openAiSampling, ...(options.args ?? [])];
}

/**
 * `engine: llama-server`: Modelgate runs llama.cpp's own server for the model, one process on a loopback port, and
 * relays through the upstream engine's client (so prompt counting, context errors, §7 mapping, stall timeouts and
 * aborts are the upstream engine's). Loading starts the process and waits for /health (the runner answers
 * 503 model_loading meanwhile); a crash is restarted with backoff, and requests in between get 503 model_loading.
 */
export class ManagedLlamaServerEngine implements Engine, ChatPort<UpstreamPreparedChat>, CompletionPort<UpstreamPreparedChat>, TokenizePort, EmbedPort, RerankPort {
  readonly support: EngineSupport;
  private process: LlamaServerProcess | null = null;
  private relay: UpstreamEngine | null = null;

  constructor(
    private readonly entry: ModelEntry,
    private readonly log: EngineLog,
  ) {
    this.support = llamaServerSupport(entry);
  }

  get contextSize(): number | null {
    return this.relay?.contextSize ?? this.entry.contextSize;
  }

  /** The process's pid, restarts and port (for tests and diagnostics; no API shows them). */
  get processInfo(): { pid: number | null; restarts: number; port: number } | null {
    return this.process ? { pid: this.process.pid, restarts: this.process.restarts, port: this.process.port } : null;
  }

  async load(signal?: AbortSignal): Promise<void> {
    const options = llamaServerOptions(this.entry);
    if (this.entry.configuredEngine === "llama") {
      // `engine: llama` placed here by `llama.server` (llama-placement.ts): said once, when the model loads.
      this.log.info(
        { model: this.entry.id, engine: "llama-server", configuredEngine: "llama", parallel: this.entry.parallel, binary: options.binary },
        `model ${this.entry.id}: engine llama with parallel ${this.entry.parallel} runs on the managed llama-server (llama.server: never keeps it in-process)`,
      );
    }
    this.process = await LlamaServerProcess.start(
      { binary: options.binary, args: llamaServerArgs(this.entry), startTimeoutMs: parseTimerDuration(options.startTimeout ?? "120s") },
      this.log,
      { ready: (endpoint) => this.relayTo(endpoint), exited: () => this.dropRelay() },
      signal,
    );
  }

  /** Each run of the process has its own port and key: a new relay for it, with the key as its upstream apiKey. */
  private async relayTo(endpoint: LlamaServerEndpoint): Promise<void> {
    const relay: UpstreamOptions = {
      upstreams: [{ url: `${endpoint.origin}/v1`, apiKey: endpoint.apiKey, model: this.entry.id, maxInFlight: this.entry.parallel }],
      protocol: "openai",
      tokenize: "llama-server",
      // A suffix goes to /infill, which builds the FIM prompt from the model's own FIM tokens.
      infill: "llama-server",
      // One local process: a failure is not retried elsewhere.
      retry: { attempts: 1 },
      breaker: { failures: 1_000_000 },
      health: { interval: "2s" },
    };
    const engine = new UpstreamEngine({ ...this.entry, engine: "upstream", options: relay }, this.log);
    await engine.load();
    this.dropRelay();
    this.relay = engine;
  }

  /** The run ended: its relay stops at once (health checks included), before anyone else can bind its port. */
  private dropRelay(): void {
    const old = this.relay;
    this.relay = null;
    void old?.unload();
  }

  async unload(): Promise<void> {
    await this.relay?.unload();
    await this.process?.stop();
    this.relay = null;
    this.process = null;
  }

  upstreamStats(): MemberStats[] {
    return this.relay?.upstreamStats() ?? [];
  }

  takeUpstreamLatencies(): Map<string, number[]> {
    return this.relay?.takeUpstreamLatencies() ?? new Map();
  }

  /** The relay, or 503 model_loading while the process restarts after a crash. */
  private running(): UpstreamEngine {
    const process = this.process;
    if (process && !process.ready) {
      throw new AppError("model_loading", { message: `The model '${this.entry.id}' is restarting after its llama-server exited.`, retryAfterMs: process.retryAfterMs });
    }
    if (!this.relay || !process) throw new AppError("model_loading", { message: `The model '${this.entry.id}' is not loaded.`, retryAfterMs: 1000 });
    return this.relay;
  }

  prepareChat(req: ChatRequest, signal?: AbortSignal): Promise<UpstreamPreparedChat> {
    return this.running().prepareChat(req, signal);
  }

  chat(req: ChatRequest, prepared: UpstreamPreparedChat, signal: AbortSignal): AsyncIterable<ChatDelta[]> {
    return this.running().chat(req, prepared, signal);
  }

  prepareCompletion(req: CompletionRequest, signal?: AbortSignal): Promise<UpstreamPreparedChat> {
    return this.running().prepareCompletion(req, signal);
  }

  complete(req: CompletionRequest, prepared: UpstreamPreparedChat, signal: AbortSignal): AsyncIterable<CompletionDelta> {
    return this.running().complete(req, prepared, signal);
  }

  tokenize(req: TokenizeRequest, signal: AbortSignal): Promise<number[]> {
    return this.running().tokenize(req, signal);
  }

  detokenize(tokens: readonly number[], signal: AbortSignal): Promise<string> {
    return this.running().detokenize(tokens, signal);
  }

  prepareEmbed(): PreparedEmbed {
    return this.running().prepareEmbed();
  }

  embed(req: EmbedRequest, prepared: PreparedEmbed, signal: AbortSignal): Promise<EmbedResult> {
    return this.running().embed(req, prepared, signal);
  }

  prepareRerank(): PreparedRerank {
    return this.running().prepareRerank();
  }

  rerank(req: RerankRequest, prepared: PreparedRerank, signal: AbortSignal): Promise<RerankResult> {
    return this.running().rerank(req, prepared, signal);
  }
}
