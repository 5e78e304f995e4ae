import { tracingStarted } from "./spans.ts";

/** The process's tracer provider, once started (one per process, whatever the number of servers in it). */
let started: Promise<{ flush(): Promise<void> } | null> | null = null;

/**
 * OpenTelemetry traces, off unless OTEL_EXPORTER_OTLP_ENDPOINT is set: then spans go to that collector over
 * OTLP/HTTP (the exporter reads the standard OTEL_* variables: headers, timeouts, OTEL_BSP_* batching) with
 * `service.name` = OTEL_SERVICE_NAME or "modelgate". The provider registers the AsyncLocalStorage context manager and
 * the W3C trace-context propagator. Resolves to a flush (run at shutdown), or null when tracing is off.
 */
export function startTracing(env: NodeJS.ProcessEnv = process.env): Promise<{ flush(): Promise<void> } | null> {
  started ??= (async () => {
    if (!env.OTEL_EXPORTER_OTLP_ENDPOINT) return null;
    const [{ NodeTracerProvider, BatchSpanProcessor }, { OTLPTraceExporter }, { resourceFromAttributes }] = await Promise.all([
      import("@opentelemetry/sdk-trace-node"),
      import("@opentelemetry/exporter-trace-otlp-http"),
      import("@opentelemetry/resources"),
    ]);
    const provider = new NodeTracerProvider({
      resource: resourceFromAttributes({ "service.name": env.OTEL_SERVICE_NAME ?? "modelgate" }),
      spanProcessors: [new BatchSpanProcessor(new OTLPTraceExporter())],
    });
    provider.register();
    tracingStarted();
    return { flush: () => provider.forceFlush() };
  })();
  return started;
}
