import type { Metrics } from "../../metrics/metrics.ts";
import type { RequestContext } from "../request-context.ts";

/**
 * Times one generation as its deltas arrive from the engine: time to first token (from the request's arrival),
 * the gap between pieces, and the generation rate after the first token. Feeds the metrics and the access log.
 */
export class GenerationTimer {
  private first: number | null = null;
  private last = 0;

  constructor(
    private readonly metrics: Metrics,
    private readonly model: string,
    private readonly request: RequestContext,
  ) {}

  piece(): void {
    const now = performance.now();
    if (this.first === null) {
      this.first = now;
      const ttftMs = this.request.elapsedMs();
      if (this.request.outcome) this.request.outcome.ttftMs = ttftMs;
      this.metrics.ttft.observe({ model: this.model }, ttftMs / 1000);
    } else {
      this.metrics.interToken.observe({ model: this.model }, (now - this.last) / 1000);
    }
    this.last = now;
  }

  finish(completionTokens: number): void {
    if (this.first === null || completionTokens < 2 || this.last <= this.first) return;
    this.metrics.generationRate.observe({ model: this.model }, (completionTokens - 1) / ((this.last - this.first) / 1000));
  }
}
