import { context, INVALID_SPAN_CONTEXT, propagation, SpanKind, SpanStatusCode, trace, type Attributes, type Context, type Span } from "@opentelemetry/api";

/**
 * The spans of an inference request. Without a registered provider (tracing off) every call here is the API's
 * no-op, which costs next to nothing. Attribute names follow the OpenTelemetry GenAI semantic conventions.
 */
const tracer = trace.getTracer("modelgate");

/** Whether a tracer provider was registered (tracing.ts): until then, every span is the no-op one. */
let tracing = false;
const noSpan = trace.wrapSpanContext(INVALID_SPAN_CONTEXT);

export function tracingStarted(): void {
  tracing = true;
}

/**
 * Runs `fn` in a new active span (a child of the current one), ending it when `fn` settles. With tracing off, `fn`
 * runs as it is, given the no-op span: the API's no-op path still made a context, a closure and an async step per
 * span, four spans per request.
 */
export function inSpan<T>(name: string, attributes: Attributes, fn: (span: Span) => Promise<T>, kind = SpanKind.INTERNAL, parent?: Context): Promise<T> {
  if (!tracing) {
    try {
      return fn(noSpan);
    } catch (err) {
      return Promise.reject(err as Error);
    }
  }
  return tracer.startActiveSpan(name, { kind, attributes }, parent ?? context.active(), async (span) => {
    try {
      return await fn(span);
    } catch (err) {
      span.recordException(err as Error);
      span.setStatus({ code: SpanStatusCode.ERROR, message: (err as Error).message });
      throw err;
    } finally {
      span.end();
    }
  });
}

/** A span that starts now, under `parent` (default: the current span), and is ended by the caller. */
export function startSpan(name: string, attributes: Attributes = {}, parent: Context = context.active()): Span {
  return tracer.startSpan(name, { attributes }, parent);
}

/** The current context, to start spans under the current span later from another one. */
export function currentContext(): Context {
  return context.active();
}

/** The context a client's `traceparent` header names, so our spans continue its trace. */
export function incomingContext(headers: Record<string, string | string[] | undefined>): Context {
  return propagation.extract(context.active(), headers);
}

/** Adds `traceparent` (W3C trace context) for the current span to an outgoing request's headers. */
export function injectTraceContext(headers: Record<string, string>): void {
  propagation.inject(context.active(), headers);
}

export { SpanKind };
