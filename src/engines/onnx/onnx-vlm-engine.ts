import { readFileSync } from "node:fs";
import path from "node:path";
import type { ModelEntry } from "../../config/app-config.ts";
import type { Capability } from "../../config/config.schema.ts";
import { AppError } from "../../errors/app-error.ts";
import type { ChatDelta, ChatRequest, Engine, PreparedChat } from "../engine.ts";
import type { GenerateArgs, VlmEvent, VlmInit, VlmLayout } from "./tasks/vlm.task.ts";
import { WorkerPool } from "./worker-pool.ts";

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
 * `parallel` slot; the main thread only forwards requests and streamed pieces.
 *
 * It can't constrain output (no grammar), call tools or return logprobs: requests for them get 400 here even
 * if a service forgot to check the model's capabilities (spec §4.2 rule 6).
 */
export class OnnxVlmEngine implements Engine {
  readonly capabilities: ReadonlySet<Capability>;
  private pool: WorkerPool | null = null;
  private window: number | null = null;
  /** prepareChat calls in flight: they run before the scheduler's queue, so they get their own bound. */
  private preparing = 0;

  constructor(private readonly entry: ModelEntry) {
    this.capabilities = new Set(entry.capabilities);
  }

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
    const init: VlmInit = { modelPath, dtype: this.entry.dtype, threads: this.entry.threads, layout: vlmLayout(modelType) };
    const pool = new WorkerPool({ size: this.entry.parallel, taskModule: path.join(import.meta.dirname, "tasks/vlm.task.ts"), init });
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

  /** Rejects what this engine can't honour, then counts the prompt (image tokens included) against the window. */
  async prepareChat(req: ChatRequest): Promise<PreparedChat> {
    this.assertSupported(req);
    const pool = this.requirePool();
    const window = this.window!;
    // Counting needs the processor (image tokens depend on the image), which runs in the workers before a slot is
    // taken; without a bound a burst of requests would queue there unbounded instead of getting the queue's 503.
    if (this.preparing >= this.entry.queueSize + this.entry.parallel) {
      throw new AppError("overloaded", { message: `The model '${this.entry.id}' is at capacity.`, retryAfterMs: 1000 });
    }
    this.preparing++;
    let counted: { promptTokens: number; images: number };
    try {
      counted = await pool.call<{ promptTokens: number; images: number }>("prepare", { messages: req.messages });
    } finally {
      this.preparing--;
    }
    const { promptTokens, images } = counted;
    const requested = req.maxTokens;
    if (promptTokens >= window || (requested !== null && promptTokens + requested > window)) {
      const imageNote = images > 0 ? ` (including ${images} image${images === 1 ? "" : "s"})` : "";
      throw new AppError("context_length_exceeded", {
        param: "messages",
        message:
          requested !== null
            ? `The prompt is ${promptTokens} tokens${imageNote} and max_tokens is ${requested}; together they exceed the model's context window of ${window} tokens.`
            : `The prompt is ${promptTokens} tokens${imageNote}, which leaves no room in the model's context window of ${window} tokens.`,
      });
    }
    return { promptTokens, maxTokens: requested ?? window - promptTokens };
  }

  async *chat(req: ChatRequest, prepared: PreparedChat, signal: AbortSignal): AsyncIterable<ChatDelta> {
    this.assertSupported(req);
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
      if (event.type === "content") yield { type: "content", text: event.text };
      else yield { type: "done", finishReason: event.finishReason, usage: event.usage };
    }
    signal.throwIfAborted();
  }

  private assertSupported(req: ChatRequest): void {
    const reject = (param: string, what: string) => {
      throw new AppError("invalid_parameter", {
        param,
        message: `The model '${this.entry.id}' does not support ${what}; it supports: ${this.entry.capabilities.join(", ")}.`,
      });
    };
    if (req.responseFormat === "json_object") reject("response_format", "response_format json_object");
    if (req.tools.length > 0) reject("tools", "tools");
    if (req.topLogprobs !== null) reject("logprobs", "logprobs");
  }

  private requirePool(): WorkerPool {
    if (!this.pool) throw new Error(`model '${this.entry.id}' is not loaded`);
    return this.pool;
  }
}
