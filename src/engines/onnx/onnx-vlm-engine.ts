import { readFileSync } from "node:fs";
import path from "node:path";
import type { ModelEntry } from "../../config/app-config.ts";
import { fitCompletion } from "../context-window.ts";
import { AppError } from "../../errors/app-error.ts";
import type { ChatDelta, ChatPort, ChatRequest, Engine, PreparedChat, TokenizePort, TokenizeRequest } from "../engine.ts";
import { onnxOptions, vlmSupport } from "./onnx.support.ts";
import type { GenerateArgs, VlmEvent, VlmInit, VlmLayout } from "./tasks/vlm.task.ts";
import type { WorkerPool } from "../../workers/worker-pool.ts";
import { onnxPool } from "./onnx-pool.ts";

interface ModelConfigJson {
  model_type?: string;
  max_position_embeddings?: number;
  text_config?: { max_position_embeddings?: number };
}

/** Model types whose processor takes `(images, text)`; the others (Idefics3, SmolVLM, Qwen2-VL...) take `(text, images)`. */
const IMAGES_FIRST = new Set(["llava"]);

/** Model types this engine is built and tested for (transformers.js 4.3.1 image-text-to-text). */
export const supportedVlmTypes: ReadonlySet<string> = new Set(["llava", "idefics3", "smolvlm", "qwen2_vl"]);

export function vlmLayout(modelType: string): VlmLayout {
  return IMAGES_FIRST.has(modelType) ? "llava" : "text-first";
}

/**
 * Chat with images on transformers.js image-text-to-text models. Everything that touches the model or the
 * images (templating, image decoding, the processor, generation) runs in a worker pool with one worker per
 * `parallel` slot; the main thread only forwards requests and streamed pieces. It can't constrain output (no
 * grammar), call tools or return logprobs (`vlmSupport`), nor complete a raw prompt (transformers.js's
 * image-text-to-text models are driven through their processor and chat template). Its prepare processes the
 * images, so the scheduler bounds it (`expensivePrepare`).
 */
export class OnnxVlmEngine implements Engine, ChatPort, TokenizePort {
  readonly support = vlmSupport;
  private pool: WorkerPool | null = null;
  private window: number | null = null;

  constructor(private readonly entry: ModelEntry) {}

  get contextSize(): number | null {
    return this.window;
  }

  async load(signal?: AbortSignal): Promise<void> {
    if (this.pool) return;
    const modelPath = this.entry.path;
    if (!modelPath) throw new Error(`model '${this.entry.id}' has no local path`);
    const config = JSON.parse(readFileSync(path.join(modelPath, "config.json"), "utf8")) as ModelConfigJson;
    const modelType = config.model_type ?? "";
    if (!supportedVlmTypes.has(modelType)) {
      throw new Error(`model type '${modelType}' is not supported by the ONNX VLM engine (supported: ${[...supportedVlmTypes].join(", ")})`);
    }
    const trained = config.text_config?.max_position_embeddings ?? config.max_position_embeddings ?? 4096;
    const init: VlmInit = { modelPath, dtype: this.entry.dtype, threads: onnxOptions(this.entry).threads, layout: vlmLayout(modelType) };
    const pool = onnxPool("vlm.task.ts", this.entry.parallel, init);
    signal?.throwIfAborted();
    await pool.start();
    this.window = Math.min(this.entry.contextSize ?? trained, trained);
    this.pool = pool;
  }

  async unload(): Promise<void> {
    const pool = this.pool;
    this.pool = null;
    await pool?.close();
  }

  /** Counts the prompt (image tokens included, so it needs the processor) against the window. */
  async prepareChat(req: ChatRequest): Promise<PreparedChat> {
    const pool = this.requirePool();
    const window = this.window!;
    const { promptTokens, images } = await pool.call<{ promptTokens: number; images: number }>("prepare", { messages: req.messages });
    const note = images > 0 ? `including ${images} image${images === 1 ? "" : "s"}` : "";
    return { promptTokens, maxTokens: fitCompletion(window, promptTokens, req, { param: "messages", takes: "The messages take", note }).budget };
  }

  async *chat(req: ChatRequest, prepared: PreparedChat, signal: AbortSignal): AsyncIterable<ChatDelta[]> {
    const pool = this.requirePool();
    const args: GenerateArgs = {
      messages: req.messages,
      maxTokens: prepared.maxTokens,
      temperature: req.temperature ?? this.entry.defaults.temperature ?? null,
      topP: req.topP ?? this.entry.defaults.topP ?? null,
      seed: req.seed,
      stop: req.stop,
    };
    for await (const event of pool.stream<VlmEvent>("generate", args, { signal })) {
      if (event.type === "content") yield [{ type: "content", text: event.text }];
      else yield [{ type: "done", finishReason: event.finishReason, usage: event.usage }];
    }
    signal.throwIfAborted();
  }

  async tokenize(req: TokenizeRequest): Promise<number[]> {
    const pool = this.requirePool();
    if ("chat" in req) return pool.call<number[]>("tokenizeChat", { messages: req.chat.messages });
    return pool.call<number[]>("encode", { text: req.text, addSpecial: req.addSpecial });
  }

  async detokenize(tokens: readonly number[]): Promise<string> {
    return this.requirePool().call<string>("decode", { tokens: [...tokens] });
  }

  private requirePool(): WorkerPool {
    if (!this.pool) throw new Error(`model '${this.entry.id}' is not loaded`);
    return this.pool;
  }
}
