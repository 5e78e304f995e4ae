import { AutoModel, AutoModelForSequenceClassification, Tensor, env, type PreTrainedModel } from "@huggingface/transformers";

/**
 * Worker side of OnnxEncoderEngine: holds one encoder session and runs already tokenized batches on it.
 * The main thread tokenizes (it must check input lengths before capacity is taken anyway), so the ids come
 * here as flat int64 arrays and are not tokenized twice.
 */

export interface EncoderInit {
  /** Absolute folder of the model in transformers.js layout. */
  modelPath: string;
  kind: "embeddings" | "rerank";
  dtype: string | null;
  threads: number;
  pooling: "mean" | "cls";
}

/** One padded batch: `rows` × `cols` ids, row-major. */
export interface TokenBatch {
  rows: number;
  cols: number;
  inputIds: BigInt64Array;
  attentionMask: BigInt64Array;
  tokenTypeIds: BigInt64Array | null;
}

let model: PreTrainedModel | null = null;
let settings: EncoderInit | null = null;

export async function init(arg: EncoderInit): Promise<void> {
  env.allowRemoteModels = false;
  env.allowLocalModels = true;
  settings = arg;
  const options = {
    dtype: (arg.dtype ?? "fp32") as "fp32",
    device: "cpu" as const,
    local_files_only: true,
    session_options: { intraOpNumThreads: arg.threads, interOpNumThreads: 1 },
  };
  model =
    arg.kind === "rerank"
      ? await AutoModelForSequenceClassification.from_pretrained(arg.modelPath, options)
      : await AutoModel.from_pretrained(arg.modelPath, options);
}

function feeds(batch: TokenBatch): Record<string, Tensor> {
  const dims = [batch.rows, batch.cols];
  const out: Record<string, Tensor> = {
    input_ids: new Tensor("int64", batch.inputIds, dims),
    attention_mask: new Tensor("int64", batch.attentionMask, dims),
  };
  if (batch.tokenTypeIds) out.token_type_ids = new Tensor("int64", batch.tokenTypeIds, dims);
  return out;
}

function requireModel(): PreTrainedModel {
  if (!model || !settings) throw new Error("encoder worker is not initialised");
  return model;
}

/** Pooled, L2-normalised sentence vectors, one per row, concatenated. */
export async function embed(args: { batches: TokenBatch[] }, ctx: { signal: AbortSignal }): Promise<{ dim: number; data: Float32Array }> {
  const m = requireModel();
  const parts: Float32Array[] = [];
  let dim = 0;
  for (const batch of args.batches) {
    if (ctx.signal.aborted) throw new Error("aborted");
    const output = (await m(feeds(batch))) as Record<string, Tensor>;
    const hidden = output.last_hidden_state ?? output.token_embeddings ?? Object.values(output)[0];
    const [rows, cols, width] = hidden.dims as number[];
    const values = hidden.data as Float32Array;
    dim = width;
    const pooled = new Float32Array(rows * width);
    for (let r = 0; r < rows; r++) {
      const vec = pooled.subarray(r * width, (r + 1) * width);
      if (settings!.pooling === "cls") {
        // The first attended position: 0 with right padding, later with left padding.
        let c = 0;
        while (c < cols - 1 && batch.attentionMask[r * batch.cols + c] === 0n) c++;
        const base = (r * cols + c) * width;
        vec.set(values.subarray(base, base + width));
      } else {
        let count = 0;
        for (let c = 0; c < cols; c++) {
          if (batch.attentionMask[r * batch.cols + c] === 0n) continue;
          count++;
          const base = (r * cols + c) * width;
          for (let k = 0; k < width; k++) vec[k] += values[base + k];
        }
        if (count > 0) for (let k = 0; k < width; k++) vec[k] /= count;
      }
      let norm = 0;
      for (let k = 0; k < width; k++) norm += vec[k] * vec[k];
      norm = Math.sqrt(norm);
      if (norm > 1e-12) for (let k = 0; k < width; k++) vec[k] /= norm;
    }
    parts.push(pooled);
    for (const t of Object.values(output)) (t as Tensor).dispose?.();
  }
  const data = new Float32Array(parts.reduce((n, p) => n + p.length, 0));
  let offset = 0;
  for (const p of parts) {
    data.set(p, offset);
    offset += p.length;
  }
  return { dim, data };
}

/**
 * One relevance score per query/document row: a sigmoid over single-logit heads (the usual cross-encoder),
 * the probability of the last label for multi-label heads (e.g. [not relevant, relevant]).
 */
export async function score(args: { batches: TokenBatch[] }, ctx: { signal: AbortSignal }): Promise<number[]> {
  const m = requireModel();
  const scores: number[] = [];
  for (const batch of args.batches) {
    if (ctx.signal.aborted) throw new Error("aborted");
    const { logits } = (await m(feeds(batch))) as { logits: Tensor };
    const [rows, labels] = logits.dims as number[];
    const values = logits.data as Float32Array;
    for (let r = 0; r < rows; r++) {
      if (labels === 1) {
        scores.push(1 / (1 + Math.exp(-values[r])));
      } else {
        const row = Array.from(values.subarray(r * labels, (r + 1) * labels));
        const max = Math.max(...row);
        const exps = row.map((x) => Math.exp(x - max));
        scores.push(exps[labels - 1] / exps.reduce((a, b) => a + b, 0));
      }
    }
    logits.dispose?.();
  }
  return scores;
}
