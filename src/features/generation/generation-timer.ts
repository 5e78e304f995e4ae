import type { Histogram } from "prom-client";
import type { ChatDelta } from "../../engines/engine.ts";
import type { Metrics } from "../../metrics/metrics.ts";
import type { RequestContext } from "../request-context.ts";

/** One model's timing series. */
interface ModelSeries {
  ttft: Histogram.Internal<"model">;
  interToken: Histogram.Internal<"model">;
  generationRate: Histogram.Internal<"model">;
}

/**
 * The series per model, looked up once (prom-client hashes a label object on every `observe(labels, v)`: once per
 * generated piece, that was 2% of the CPU of a non-stream chat through an upstream).
 */
const seriesByMetrics = new WeakMap<Metrics, Map<string, ModelSeries>>();

function seriesFor(metrics: Metrics, model: string): ModelSeries {
  let byModel = seriesByMetrics.get(metrics);
  if (!byModel) seriesByMetrics.set(metrics, (byModel = new Map()));
  let series = byModel.get(model);
  if (!series) {
    series = { ttft: metrics.ttft.labels({ model }), interToken: metrics.interToken.labels({ model }), generationRate: metrics.generationRate.labels({ model }) };
    byModel.set(model, series);
  }
  return series;
}

/**
 * Times one generation as its deltas arrive from the engine: time to first token (from the request's arrival),
 * the gap between pieces, and the generation rate after the first token. Feeds the metrics and the access log.
 */
export class GenerationTimer {
  private first: number | null = null;
  private last = 0;
  private readonly series: ModelSeries;

  constructor(
    metrics: Metrics,
    model: string,
    private readonly request: RequestContext,
  ) {
    this.series = seriesFor(metrics, model);
  }

  /**
   * A run of deltas that arrived together (ChatPort.chat): timed as one piece when it carries output. Its pieces
   * after the first have no gap of their own to observe: they came in the same read.
   */
  run(deltas: readonly ChatDelta[]): void {
    if (deltas.length > 1 || deltas[0]?.type !== "done") this.piece();
  }

  piece(): void {
    const now = performance.now();
    if (this.first === null) {
      this.first = now;
      const ttftMs = this.request.elapsedMs();
      if (this.request.outcome) this.request.outcome.ttftMs = ttftMs;
      this.series.ttft.observe(ttftMs / 1000);
    } else {
      this.series.interToken.observe((now - this.last) / 1000);
    }
    this.last = now;
  }

  finish(completionTokens: number): void {
    if (this.first === null || completionTokens < 2 || this.last <= this.first) return;
    this.series.generationRate.observe((completionTokens - 1) / ((this.last - this.first) / 1000));
  }
}
