/** What a request's handlers learn about it, for its access-log line and its metrics. */
export interface RequestOutcome {
  model: string | null;
  promptTokens: number | null;
  completionTokens: number | null;
  /** Milliseconds from the request to the first generated token (chat). */
  ttftMs: number | null;
  /** Milliseconds an inference request waited for a slot, from the end of its prepare step to the start of its work. */
  queueMs: number | null;
  /** The §7 code of an error answer (or of a stream's error event). */
  errorCode: string | null;
  /** Set once the request's line and metrics are written (a response that ends and aborts is counted once). */
  recorded: boolean;
  /** performance.now() at the request's arrival. */
  started: number;
  /** The connection's bytes written before this response (keep-alive connections carry several). */
  writtenBefore: number;
}
