import type * as OpenTelemetry from '@opentelemetry/api'
import type { Context, ProxyTracerProvider, Span, Tracer } from '@opentelemetry/api'
import type { IncomingHttpHeaders } from 'node:http'
import { createRequire } from 'node:module'
import { maskCardNumbers } from './card-mask.js'

/**
 * The OpenTelemetry API, its CommonJS build: the one prom-client's default metrics require, so that a start
 * loads one copy of the API rather than both builds (51 modules each: docs/performance.md, start-up). The
 * copies keep their state on one global, so a tracer registered through one is the other's.
 */
export const openTelemetry = createRequire(import.meta.url)('@opentelemetry/api') as typeof OpenTelemetry
const { context, propagation, ROOT_CONTEXT, SpanKind, SpanStatusCode, trace } = openTelemetry

/**
 * Spans through the OpenTelemetry API (docs/tracing.md). Nothing here is
 * called when no SDK is registered: callers ask `registeredTracer` once, when
 * they are built, and skip every span without one.
 */

const TRACER_NAME = 'payments-gate'

/**
 * The tracer of the SDK registered now, or `undefined` when none is. The
 * API's global provider is a proxy whose delegate is the registered SDK's
 * provider; asking the delegate tells "none" without making a no-op span on
 * every request to find out.
 */
export function registeredTracer(): Tracer | undefined {
  return (trace.getTracerProvider() as ProxyTracerProvider).getDelegateTracer(TRACER_NAME)
}

/** What a span says about its request when it ends; `undefined` fields are left out. */
export interface SpanOutcome {
  /** The status answered; 0 when none was (the client left, or the connection was cut); none for a request the middleware passed on. */
  readonly status?: number
  readonly errorName?: string | undefined
  readonly entity?: string | undefined
  readonly retryProtection?: string | undefined
  readonly backendError?: string | undefined
}

/**
 * The proxy's span of one request: a server span, child of the client's
 * W3C `traceparent` when it sent one (through the registered propagator).
 * The request id is masked as the log line masks it: a client's id may hold
 * a card number (docs/logs-and-metrics.md, card numbers never appear whole).
 */
export function startServerSpan(
  tracer: Tracer,
  name: string,
  method: string,
  headers: IncomingHttpHeaders,
  operation: string,
  requestId: string,
): Span {
  const parent = withoutCardInState(propagation.extract(ROOT_CONTEXT, headers))
  const attributes = {
    'http.request.method': method,
    'payments_gate.operation': operation,
    'payments_gate.request_id': maskCardNumbers(requestId),
  }
  return tracer.startSpan(name, { kind: SpanKind.SERVER, attributes }, parent)
}

/**
 * The client's context without its `tracestate` when that holds a card number: the state is the client's free text
 * (W3C Trace Context 3.3), exported with every span of the trace and sent on to the backend.
 */
function withoutCardInState(parent: Context): Context {
  const spanContext = trace.getSpanContext(parent)
  const state = spanContext?.traceState?.serialize()
  if (spanContext === undefined || state === undefined || maskCardNumbers(state) === state) return parent
  const { traceState: _, ...rest } = spanContext
  return trace.setSpanContext(parent, rest)
}

/**
 * The middleware's span of one screened request: an internal span, child of
 * the application's active context (its HTTP server span, when its own
 * instrumentation made one).
 */
export function startCheckSpan(tracer: Tracer, operation: string, requestId: string): Span {
  const attributes = { 'payments_gate.operation': operation, 'payments_gate.request_id': maskCardNumbers(requestId) }
  return tracer.startSpan('payments-gate checks', { kind: SpanKind.INTERNAL, attributes }, context.active())
}

/**
 * The span of the call to the backend, child of the request's span; its
 * context goes to the backend in `traceparent` (and `tracestate`), in place
 * of the client's.
 */
export function startBackendSpan(
  tracer: Tracer,
  parent: Span,
  method: string,
  target: URL,
  headers: IncomingHttpHeaders,
): Span {
  const attributes = {
    'http.request.method': method,
    'server.address': target.hostname,
    // A URL leaves out its scheme's default port: 443 for https, 80 for http (RFC 9110 4.2).
    'server.port': Number(target.port || (target.protocol === 'https:' ? 443 : 80)),
  }
  const span = tracer.startSpan(method, { kind: SpanKind.CLIENT, attributes }, trace.setSpan(ROOT_CONTEXT, parent))
  propagation.inject(trace.setSpan(ROOT_CONTEXT, span), headers)
  return span
}

/**
 * Ends a span with its request's outcome: never a card number, only what the
 * log line says. An error when the status is a 5xx or none was sent (a
 * server span's rule in OpenTelemetry's HTTP conventions).
 */
export function endSpan(span: Span, outcome: SpanOutcome): void {
  const { status } = outcome
  if (status !== undefined && status !== 0) span.setAttribute('http.response.status_code', status)
  setDefined(span, 'payments_gate.error_name', outcome.errorName)
  setDefined(span, 'payments_gate.entity', outcome.entity)
  setDefined(span, 'payments_gate.retry_protection', outcome.retryProtection)
  setDefined(span, 'payments_gate.backend_error', outcome.backendError)
  if (status !== undefined && (status === 0 || status >= 500)) span.setStatus({ code: SpanStatusCode.ERROR })
  span.end()
}

function setDefined(span: Span, key: string, value: string | undefined): void {
  if (value !== undefined) span.setAttribute(key, value)
}
