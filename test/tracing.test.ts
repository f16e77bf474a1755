import { propagation, trace } from '@opentelemetry/api'
import { W3CTraceContextPropagator } from '@opentelemetry/core'
import { InMemorySpanExporter, SimpleSpanProcessor, TracerProvider } from '@opentelemetry/sdk-trace'
import t from 'tap'
import { registeredTracer, startBackendSpan, startCheckSpan, startServerSpan } from '../lib/tracing.js'

t.test('no tracer until an SDK is registered, and none once it is gone', async (t) => {
  t.equal(registeredTracer(), undefined, 'none: the API alone')
  const exporter = new InMemorySpanExporter()
  const provider = new TracerProvider({ spanProcessors: [new SimpleSpanProcessor({ exporter })] })
  trace.setGlobalTracerProvider(provider)
  propagation.setGlobalPropagator(new W3CTraceContextPropagator())
  const tracer = registeredTracer()
  t.ok(tracer, "the registered provider's")
  const server = startServerSpan(tracer!, 'POST sale', 'POST', {}, 'sale', 'id-1')
  const headers = {}
  const backend = startBackendSpan(tracer!, server, 'POST', new URL('http://backend.internal/base'), headers)
  backend.end()
  startBackendSpan(tracer!, server, 'POST', new URL('https://backend.internal/base'), {}).end()
  startBackendSpan(tracer!, server, 'POST', new URL('https://backend.internal:8443'), {}).end()
  server.end()
  const [exported, secure, named] = exporter.getFinishedSpans()
  t.match(
    exported?.attributes,
    { 'server.address': 'backend.internal', 'server.port': 80 },
    "HTTP's default port when the URL names none",
  )
  t.match(secure?.attributes, { 'server.port': 443 }, "HTTPS's default port when the URL names none")
  t.match(named?.attributes, { 'server.port': 8443 }, 'the port the URL names')
  t.same(
    headers,
    { traceparent: `00-${backend.spanContext().traceId}-${backend.spanContext().spanId}-01` },
    "the backend call's context, to send on",
  )
  await provider.shutdown()
  trace.disable()
  propagation.disable()
  t.equal(registeredTracer(), undefined)
})

t.test('a request id holding a card number in any spelling is masked on the spans, as in the log line', async (t) => {
  const exporter = new InMemorySpanExporter()
  const provider = new TracerProvider({ spanProcessors: [new SimpleSpanProcessor({ exporter })] })
  const tracer = provider.getTracer('test')
  startServerSpan(tracer, 'POST sale', 'POST', {}, 'sale', 'r-4444+3333+2222+1111').end()
  startCheckSpan(tracer, 'sale', 'r-99994444333322221111').end()
  const ids = exporter.getFinishedSpans().map((span) => span.attributes['payments_gate.request_id'])
  t.same(ids, ['r-4444+33**+****+1111', 'r-999944**********1111'])
  await provider.shutdown()
})

t.test(
  "a client's tracestate holding a card number is dropped; its trace is kept, and a clean state goes on",
  async (t) => {
    const exporter = new InMemorySpanExporter()
    const provider = new TracerProvider({ spanProcessors: [new SimpleSpanProcessor({ exporter })] })
    propagation.setGlobalPropagator(new W3CTraceContextPropagator())
    t.teardown(() => propagation.disable())
    const tracer = provider.getTracer('test')
    const traceparent = '00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01'
    const forwarded: Record<string, string>[] = []
    for (const tracestate of ['shop=4111111111111111', 'vendor=abc,pan=4111-1111-1111-1111', 'vendor=abc']) {
      const server = startServerSpan(tracer, 'POST sale', 'POST', { traceparent, tracestate }, 'sale', 'id')
      const headers = {}
      startBackendSpan(tracer, server, 'POST', new URL('http://backend.internal'), headers).end()
      server.end()
      forwarded.push(headers)
    }
    const spans = exporter.getFinishedSpans()
    // Red before: exported with every span, and sent on to the backend.
    t.same(
      spans.map((span) => span.spanContext().traceState?.serialize()),
      [undefined, undefined, undefined, undefined, 'vendor=abc', 'vendor=abc'],
    )
    t.same(
      forwarded.map((headers) => headers.tracestate),
      [undefined, undefined, 'vendor=abc'],
    )
    t.ok(
      spans.every((span) => span.spanContext().traceId === '0af7651916cd43dd8448eb211c80319c'),
      "the client's trace",
    )
    await provider.shutdown()
  },
)
