/** What a request's handlers learn about it, for its access-log line and its metrics. */
export interface RequestOutcome {
  /** The catalog entry that served (or last tried) the request. */
  model: string | null;
  /** The route the client named, when it named one (issue 45); `model` is then the route's target. */
  route: string | null;
  /** Why the request moved on to the route's next target, one reason per fallback. */
  fallbackReasons: string[];
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
  /** What the response cache did (issue 45); null where it does not apply. */
  cache: "hit" | "miss" | "bypass" | null;
}

/** The outcome of a request that has just arrived: nothing learnt yet. */
export function freshOutcome(writtenBefore: number): RequestOutcome {
  return {
    model: null,
    route: null,
    fallbackReasons: [],
    promptTokens: null,
    completionTokens: null,
    ttftMs: null,
    queueMs: null,
    errorCode: null,
    recorded: false,
    started: performance.now(),
    writtenBefore,
    cache: null,
  };
}
