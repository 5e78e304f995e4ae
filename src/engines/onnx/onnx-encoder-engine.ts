import { existsSync, readFileSync } from "node:fs";
import path from "node:path";
import type { PreTrainedTokenizer } from "@huggingface/transformers";
import type { ModelEntry } from "../../config/app-config.ts";
import type {
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
} from "../engine.ts";
import { checkInputLength, checkQueryLength, checkPairLength } from "../input-length.ts";
import { encoderEmbedSupport, encoderRerankSupport, onnxOptions } from "./onnx.support.ts";
import { loadTransformers } from "./transformers-runtime.ts";
import type { EncoderInit, TokenBatch } from "./tasks/encoder.task.ts";
import type { WorkerPool } from "../../workers/worker-pool.ts";
import { onnxPool } from "./onnx-pool.ts";

/** Inputs per forward pass: one request's inputs are batched, in slices this big. */
const BATCH = 64;

interface Encoded {
  input_ids: number[];
  attention_mask: number[];
  token_type_ids?: number[];
}

/** Tokenized work from `prepare*`, handed to the run: padded batches ready for the worker. */
interface PreparedBatches extends PreparedEmbed, PreparedRerank {
  batches: TokenBatch[];
}

/** The pooling a sentence-transformers model declares (modules.json -> Pooling -> config.json); mean by default. */
export function readPooling(modelDir: string): "mean" | "cls" {
  let poolingDir = path.join(modelDir, "1_Pooling");
  const modulesFile = path.join(modelDir, "modules.json");
  if (existsSync(modulesFile)) {
    const modules = JSON.parse(readFileSync(modulesFile, "utf8")) as { type?: string; path?: string }[];
    const pooling = modules.find((m) => typeof m.type === "string" && m.type.endsWith(".Pooling"));
    if (pooling?.path) poolingDir = path.join(modelDir, pooling.path);
  }
  const configFile = path.join(poolingDir, "config.json");
  if (!existsSync(configFile)) return "mean";
  const config = JSON.parse(readFileSync(configFile, "utf8")) as Record<string, unknown>;
  if (config.pooling_mode_cls_token === true) return "cls";
  if (config.pooling_mode_mean_tokens === true) return "mean";
  throw new Error(`unsupported sentence-transformers pooling in ${configFile} (only mean and cls are supported)`);
}

/**
 * Embeddings and cross-encoder rerank on ONNX encoders (transformers.js layout). The main thread tokenizes,
 * which is cheap and lets the length checks answer 400 before capacity is taken; the forward passes run in a
 * worker pool (one worker per `parallel` slot) so they never block the event loop.
 */
export class OnnxEncoderEngine implements Engine, EmbedPort<PreparedBatches>, RerankPort<PreparedBatches> {
  readonly support: EngineSupport;
  private readonly kind: "embeddings" | "rerank";
  private tokenizer: PreTrainedTokenizer | null = null;
  private pool: WorkerPool | null = null;
  private maxTokens: number | null = null;

  constructor(private readonly entry: ModelEntry) {
    this.kind = entry.capabilities.includes("rerank") ? "rerank" : "embeddings";
    this.support = this.kind === "rerank" ? encoderRerankSupport : encoderEmbedSupport;
  }

  get contextSize(): number | null {
    return this.maxTokens;
  }

  /** The longest input (embeddings) or query/document pair (rerank) in tokens, special tokens included. */
  get maxInputTokens(): number | null {
    return this.maxTokens;
  }

  async load(signal?: AbortSignal): Promise<void> {
    if (this.pool) return;
    const modelPath = this.entry.path;
    if (!modelPath) throw new Error(`model '${this.entry.id}' has no local path`);
    const { AutoTokenizer } = await loadTransformers();
    const tokenizer = await AutoTokenizer.from_pretrained(modelPath, { local_files_only: true });
    signal?.throwIfAborted();
    const config = JSON.parse(readFileSync(path.join(modelPath, "config.json"), "utf8")) as { max_position_embeddings?: number };
    const own = Math.min(tokenizer.model_max_length ?? Infinity, config.max_position_embeddings ?? Infinity);
    const limit = this.entry.maxInputTokens ?? (Number.isFinite(own) ? own : 512);
    const init: EncoderInit = {
      modelPath,
      kind: this.kind,
      dtype: this.entry.dtype,
      threads: onnxOptions(this.entry).threads,
      pooling: this.kind === "embeddings" ? readPooling(modelPath) : "mean",
    };
    const pool = onnxPool("encoder.task.ts", this.entry.parallel, init);
    await pool.start();
    this.tokenizer = tokenizer;
    this.maxTokens = limit;
    this.pool = pool;
  }

  async unload(): Promise<void> {
    const pool = this.pool;
    this.pool = null;
    this.tokenizer = null;
    await pool?.close();
  }

  /** Tokenizes and checks every input; 400 invalid_parameter `input` / `input[i]` when one is too long. */
  prepareEmbed(req: EmbedRequest): PreparedBatches {
    const tokenizer = this.requireTokenizer();
    const limit = this.maxTokens!;
    const batches: TokenBatch[] = [];
    let promptTokens = 0;
    for (let start = 0; start < req.inputs.length; start += BATCH) {
      const texts = req.inputs.slice(start, start + BATCH);
      const encoded = tokenizer(texts, { padding: false, truncation: false, return_tensor: false }) as unknown as Encoded[] | BatchEncoded;
      const rows = unbatch(encoded, texts.length);
      rows.forEach((row, j) => {
        checkInputLength(row.input_ids.length, start + j, req.inputs.length, limit, this.entry.id);
        promptTokens += row.input_ids.length;
      });
      batches.push(pad(rows, tokenizer));
    }
    return { batches, promptTokens };
  }

  async embed(req: EmbedRequest, prepared: PreparedBatches, signal: AbortSignal): Promise<EmbedResult> {
    const pool = this.requirePool();
    const { batches, promptTokens } = prepared;
    const { dim, data } = await pool.call<{ dim: number; data: Float32Array }>("embed", { batches }, { signal, transfer: transferables(batches) });
    const vectors: Float32Array[] = [];
    for (let i = 0; i < req.inputs.length; i++) vectors.push(data.subarray(i * dim, (i + 1) * dim));
    return { vectors, promptTokens };
  }

  /**
   * Tokenizes every query/document pair and checks it fits: 400 invalid_parameter `query` when the query alone
   * cannot fit, else `documents[i]` for the first pair that does not.
   */
  prepareRerank(req: RerankRequest): PreparedBatches {
    const tokenizer = this.requireTokenizer();
    const limit = this.maxTokens!;
    const queryAlone = (tokenizer([req.query], { text_pair: [""], return_tensor: false }) as unknown as BatchEncoded).input_ids[0].length;
    checkQueryLength(queryAlone, limit, this.entry.id);
    const batches: TokenBatch[] = [];
    let promptTokens = 0;
    for (let start = 0; start < req.documents.length; start += BATCH) {
      const docs = req.documents.slice(start, start + BATCH);
      const encoded = tokenizer(new Array<string>(docs.length).fill(req.query), {
        text_pair: docs,
        padding: false,
        truncation: false,
        return_tensor: false,
      }) as unknown as BatchEncoded;
      const rows = unbatch(encoded, docs.length);
      rows.forEach((row, j) => {
        checkPairLength(row.input_ids.length, start + j, limit, this.entry.id);
        promptTokens += row.input_ids.length;
      });
      batches.push(pad(rows, tokenizer));
    }
    return { batches, promptTokens };
  }

  async rerank(req: RerankRequest, prepared: PreparedBatches, signal: AbortSignal): Promise<RerankResult> {
    const pool = this.requirePool();
    if (req.documents.length === 0) return { scores: [], promptTokens: 0 };
    const { batches, promptTokens } = prepared;
    const scores = await pool.call<number[]>("score", { batches }, { signal, transfer: transferables(batches) });
    return { scores, promptTokens };
  }

  private requireTokenizer(): PreTrainedTokenizer {
    if (!this.tokenizer) throw new Error(`model '${this.entry.id}' is not loaded`);
    return this.tokenizer;
  }

  private requirePool(): WorkerPool {
    if (!this.pool) throw new Error(`model '${this.entry.id}' is not loaded`);
    return this.pool;
  }
}

/** transformers.js returns a batch without tensors as {input_ids: number[][], ...}. */
interface BatchEncoded {
  input_ids: number[][];
  attention_mask: number[][];
  token_type_ids?: number[][];
}

function unbatch(encoded: Encoded[] | BatchEncoded, count: number): Encoded[] {
  if (Array.isArray(encoded)) return encoded;
  const rows: Encoded[] = [];
  for (let i = 0; i < count; i++) {
    rows.push({
      input_ids: encoded.input_ids[i],
      attention_mask: encoded.attention_mask[i],
      token_type_ids: encoded.token_type_ids?.[i],
    });
  }
  return rows;
}

/** Pads rows to the longest one, on the tokenizer's padding side, into flat int64 arrays for the worker. */
function pad(rows: Encoded[], tokenizer: PreTrainedTokenizer): TokenBatch {
  const cols = Math.max(1, ...rows.map((r) => r.input_ids.length));
  const n = rows.length * cols;
  const inputIds = new BigInt64Array(n).fill(BigInt(tokenizer.pad_token_id ?? 0));
  const attentionMask = new BigInt64Array(n);
  const withTypes = rows.some((r) => r.token_type_ids !== undefined);
  const tokenTypeIds = withTypes ? new BigInt64Array(n) : null;
  const left = tokenizer.padding_side === "left";
  rows.forEach((row, r) => {
    const offset = r * cols + (left ? cols - row.input_ids.length : 0);
    for (let c = 0; c < row.input_ids.length; c++) {
      inputIds[offset + c] = BigInt(row.input_ids[c]);
      attentionMask[offset + c] = 1n;
      if (tokenTypeIds && row.token_type_ids) tokenTypeIds[offset + c] = BigInt(row.token_type_ids[c]);
    }
  });
  return { rows: rows.length, cols, inputIds, attentionMask, tokenTypeIds };
}

function transferables(batches: TokenBatch[]): Transferable[] {
  const out: Transferable[] = [];
  for (const b of batches) {
    out.push(b.inputIds.buffer, b.attentionMask.buffer);
    if (b.tokenTypeIds) out.push(b.tokenTypeIds.buffer);
  }
  return out;
}
