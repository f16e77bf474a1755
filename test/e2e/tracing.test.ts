import { createServer, type ServerResponse } from 'node:http'
import type { AddressInfo } from 'node:net'
import { context, propagation, trace } from '@opentelemetry/api'
import { AsyncLocalStorageContextManager } from '@opentelemetry/context-async-hooks'
import { W3CTraceContextPropagator } from '@opentelemetry/core'
import { OTLPTraceExporter } from '@opentelemetry/exporter-trace-otlp-http'
import { BatchSpanProcessor, TracerProvider } from '@opentelemetry/sdk-trace'
import express from 'express'
import Fastify from 'fastify'
import t, { type Test } from 'tap'
import { startTracing, type Tracing } from '../../lib/cli/tracing.js'
import { OTHER_PATH, SALE_PATH, TEST_PAN, saleBody } from '../helpers/fixtures.js'
import { paymentHeaders, send } from '../helpers/http.js'
import { startReceiver, type Receiver, type ReceivedSpan } from '../helpers/otlp.js'
import { closeServer, listenOnLoopback } from '../helpers/servers.js'
import { type Started, startGateway, type StartOptions, testGate } from '../helpers/surfaces.js'

/**
 * docs/tracing.md: the proxy's spans, exported by the SDK `serve` starts
 * (started here in-process, as `serve` does) to a real OTLP/HTTP receiver.
 */

const CLIENT_TRACE = '4bf92f3577b34da6a3ce929d0e0e4736'
const CLIENT_SPAN = '00f067aa0ba902b7'
const TRACEPARENT = `00-${CLIENT_TRACE}-${CLIENT_SPAN}-01`

/** The SDK started from `env` (the variables of the standard, as `serve` reads them), stopped when the test ends. */
async function sdk(t: Test, env: Record<string, string>): Promise<{ receiver: Receiver; tracing: Tracing }> {
  const receiver = await startReceiver(t)
  const variables = { OTEL_EXPORTER_OTLP_ENDPOINT: receiver.url, ...env }
  // The exporter and the resource read the process's variables, as they do under `serve`.
  Object.assign(process.env, variables)
  t.teardown(() => {
    for (const name of Object.keys(variables)) delete process.env[name]
  })
  const tracing = (await startTracing(process.env)) as Tracing
  t.ok(tracing, 'the SDK started')
  let stopped = false
  const stop = async () => {
    if (stopped) return
    stopped = true
    await tracing.shutdown()
  }
  t.teardown(stop)
  return { receiver, tracing: { shutdown: stop } }
}

/** The SDK, then the proxy in front of a recording backend. */
async function traced(
  t: Test,
  env: Record<string, string>,
  options: StartOptions = {},
): Promise<{ receiver: Receiver; tracing: Tracing; started: Started }> {
  const { receiver, tracing } = await sdk(t, env)
  return { receiver, tracing, started: await startGateway(t, options) }
}

const byName = (spans: ReceivedSpan[], name: string) => spans.filter((span) => span.name === name)

for (const protocol of ['http/protobuf', 'http/json']) {
  t.test(
    `${protocol}: a payment's server span is the client's child, its backend call the server span's, and the backend gets the call's context`,
    async (t) => {
      const { receiver, tracing, started } = await traced(
        t,
        { OTEL_EXPORTER_OTLP_PROTOCOL: protocol },
        { idempotency: 'memory' },
      )
      const reply = await send(started.url, {
        headers: paymentHeaders({ traceparent: TRACEPARENT, tracestate: 'vendor=abc', 'x-request-id': 'traced-1' }),
        body: saleBody(),
      })
      t.equal(reply.status, 201)
      const carded = await send(started.url, {
        headers: paymentHeaders({ 'x-request-id': `pan-${TEST_PAN}` }),
        body: { ...saleBody(), transactionReference: `carded-${protocol}` },
      })
      t.equal(carded.headers['x-request-id'], `pan-${TEST_PAN}`, "the client's own id comes back as sent")
      await tracing.shutdown()
      t.ok(receiver.exports.length > 0, 'spans were flushed on shutdown')
      for (const received of receiver.exports) {
        t.equal(received.path, '/v1/traces')
        t.equal(received.contentType, protocol === 'http/json' ? 'application/json' : 'application/x-protobuf')
        t.notOk(received.body.includes(TEST_PAN), 'no card number in the bytes exported')
        t.notOk(received.body.includes(TEST_PAN.slice(-8)), 'nor a part of one')
      }
      const spans = receiver.spans()
      const [server] = byName(spans, 'POST sale')
      const [client] = byName(spans, 'POST')
      t.match(server, {
        traceId: CLIENT_TRACE,
        parentSpanId: CLIENT_SPAN,
        kind: 2,
        service: 'payments-gate',
        attributes: {
          'http.request.method': 'POST',
          'http.response.status_code': 201,
          'payments_gate.operation': 'sale',
          'payments_gate.request_id': 'traced-1',
          'payments_gate.entity': 'default',
          'payments_gate.retry_protection': 'claimed',
        },
      })
      t.match(client, {
        traceId: CLIENT_TRACE,
        parentSpanId: server?.spanId,
        kind: 3,
        attributes: { 'http.response.status_code': 201, 'server.address': '127.0.0.1' },
      })
      t.equal(
        started.backend.received[0]?.headers.traceparent,
        `00-${CLIENT_TRACE}-${client?.spanId}-01`,
        "the backend's parent is the gateway's client span",
      )
      t.equal(started.backend.received[0]?.headers.tracestate, 'vendor=abc', "the client's tracestate goes on with it")
      t.ok(
        spans.some((span) => span.attributes['payments_gate.request_id'] === 'pan-444433******1111'),
        'a request id masked as the log line masks it',
      )
    },
  )
}

t.test(
  'a request without traceparent starts a trace; refusals and faults are marked; paths passed through are traced',
  async (t) => {
    const { receiver, tracing, started } = await traced(t, {
      OTEL_EXPORTER_OTLP_PROTOCOL: 'http/json',
      OTEL_SERVICE_NAME: 'edge-gate',
      OTEL_RESOURCE_ATTRIBUTES: 'deployment.environment=test',
    })
    t.equal((await send(started.url, { headers: paymentHeaders(), body: saleBody() })).status, 201)
    t.equal(
      (await send(started.url, { headers: paymentHeaders(), body: { ...saleBody(), transactionReference: '' } }))
        .status,
      400,
    )
    t.equal(
      (await send(started.url, { method: 'GET', path: OTHER_PATH, headers: { traceparent: TRACEPARENT } })).status,
      201,
    )
    started.backend.answer = (_req, res) => res.writeHead(502).end('<html>')
    t.equal((await send(started.url, { headers: paymentHeaders(), body: saleBody() })).status, 502)
    await started.backend.close()
    t.equal((await send(started.url, { headers: paymentHeaders(), body: saleBody() })).status, 503)
    await tracing.shutdown()
    const spans = receiver.spans()
    t.ok(
      spans.every((span) => span.service === 'edge-gate'),
      'OTEL_SERVICE_NAME',
    )
    const [fresh, refused, replaced, down] = byName(spans, 'POST sale')
    t.match(fresh, { parentSpanId: '', status: 0 })
    t.match(refused, {
      status: 0,
      attributes: { 'http.response.status_code': 400, 'payments_gate.error_name': 'bodyDoesNotMatchSchema' },
    })
    t.notOk(refused && 'payments_gate.entity' in refused.attributes, 'no entity before the checks passed')
    t.match(replaced, {
      status: 2,
      attributes: { 'http.response.status_code': 502, 'payments_gate.backend_error': 'serverError' },
    })
    t.match(down, {
      status: 2,
      attributes: { 'http.response.status_code': 503, 'payments_gate.backend_error': 'refused' },
    })
    t.equal(spans.filter((span) => span.kind === 3).length, 4, 'a client span for each call to the backend')
    t.match(
      byName(spans, 'POST').find((span) => span.parentSpanId === down?.spanId),
      { status: 2, attributes: { 'payments_gate.backend_error': 'refused' } },
    )
    const [other] = byName(spans, 'GET').filter((span) => span.kind === 2)
    const [otherCall] = spans.filter((span) => span.kind === 3 && span.parentSpanId === other?.spanId)
    t.match(other, {
      traceId: CLIENT_TRACE,
      parentSpanId: CLIENT_SPAN,
      attributes: { 'payments_gate.operation': 'other', 'http.response.status_code': 201 },
    })
    t.match(otherCall, { name: 'GET', attributes: { 'http.response.status_code': 201 } })
    const exported = JSON.stringify(receiver.exports.map((received) => received.body.toString()))
    t.match(exported, /deployment\.environment/, 'OTEL_RESOURCE_ATTRIBUTES')
  },
)

t.test('OTEL_TRACES_SAMPLER=always_off: nothing exported, the backend told the trace is not sampled', async (t) => {
  const { receiver, tracing, started } = await traced(t, { OTEL_TRACES_SAMPLER: 'always_off' })
  t.equal((await send(started.url, { headers: paymentHeaders(), body: saleBody() })).status, 201)
  await tracing.shutdown()
  t.same(receiver.spans(), [])
  t.match(started.backend.received[0]?.headers.traceparent, /^00-[0-9a-f]{32}-[0-9a-f]{16}-00$/)
})

t.test(
  "a client's cleared sampled flag: the default sampler traces the request all the same, parentbased_always_on obeys it",
  async (t) => {
    const unsampled = paymentHeaders({ traceparent: `00-${CLIENT_TRACE}-${CLIENT_SPAN}-00` })
    t.test('the default (docs/tracing.md, sampling at the edge)', async (t) => {
      const { receiver, tracing, started } = await traced(t, {})
      t.equal((await send(started.url, { headers: unsampled, body: saleBody() })).status, 201)
      await tracing.shutdown()
      t.match(byName(receiver.spans(), 'POST sale'), [{ traceId: CLIENT_TRACE, parentSpanId: CLIENT_SPAN }])
      t.match(started.backend.received[0]?.headers.traceparent, new RegExp(`^00-${CLIENT_TRACE}-[0-9a-f]{16}-01$`))
    })
    t.test('OTEL_TRACES_SAMPLER=parentbased_always_on', async (t) => {
      const { receiver, tracing, started } = await traced(t, { OTEL_TRACES_SAMPLER: 'parentbased_always_on' })
      t.equal((await send(started.url, { headers: unsampled, body: saleBody() })).status, 201)
      await tracing.shutdown()
      t.same(receiver.spans(), [])
      t.match(started.backend.received[0]?.headers.traceparent, new RegExp(`^00-${CLIENT_TRACE}-[0-9a-f]{16}-00$`))
    })
  },
)

t.test("without a registered SDK, no span and the client's traceparent goes on untouched", async (t) => {
  const { url, backend } = await startGateway(t)
  t.equal((await send(url, { headers: paymentHeaders({ traceparent: TRACEPARENT }), body: saleBody() })).status, 201)
  t.equal(backend.received[0]?.headers.traceparent, TRACEPARENT)
})

t.test("the middleware's span joins the application's active context: node handler, Express, Fastify", async (t) => {
  // The application's own tracing set-up, as its instrumentation would register it: with an AsyncLocalStorage context.
  const receiver = await startReceiver(t)
  const provider = new TracerProvider({
    spanProcessors: [new BatchSpanProcessor({ exporter: new OTLPTraceExporter({ url: `${receiver.url}/v1/traces` }) })],
  })
  trace.setGlobalTracerProvider(provider)
  context.setGlobalContextManager(new AsyncLocalStorageContextManager().enable())
  propagation.setGlobalPropagator(new W3CTraceContextPropagator())
  const tracing = {
    async shutdown() {
      await provider.shutdown()
      trace.disable()
      context.disable()
      propagation.disable()
    },
  }
  const gate = await testGate(t)
  const failing = await testGate(t, {
    credentials: {
      authenticate: () => {
        throw new Error('credential store broken')
      },
    },
  })
  const app = trace.getTracer('app')
  /** Each request runs inside the application's own span, as its HTTP instrumentation would make it. */
  const inAppSpan = (res: ServerResponse, then: () => void) =>
    app.startActiveSpan('app request', (span) => {
      res.on('finish', () => span.end())
      then()
    })
  const answer = (res: ServerResponse, requestId: string | undefined) =>
    res.writeHead(201, { 'content-type': 'application/json' }).end(JSON.stringify({ requestId }))
  const node = gate.handler((_req, res, _passed, requestId) => answer(res, requestId))
  const nodeServer = createServer((req, res) => inAppSpan(res, () => node(req, res)))
  const broken = failing.handler(() => undefined)
  const brokenServer = createServer((req, res) => inAppSpan(res, () => broken(req, res)))
  const expressApp = express()
  expressApp.use((_req, res, next) => inAppSpan(res, next))
  expressApp.use(gate.express())
  expressApp.post(SALE_PATH, (req, res) => answer(res, req.paymentsGate?.requestId))
  const expressServer = createServer(expressApp)
  const fastify = Fastify()
  fastify.addHook('onRequest', (_request, reply, done) => inAppSpan(reply.raw, done))
  await fastify.register(gate.fastify)
  fastify.post(SALE_PATH, async (request, reply) => answer(reply.raw, request.paymentsGate?.requestId))
  await fastify.listen({ port: 0, host: '127.0.0.1' })
  t.teardown(() => fastify.close())
  const ports: [string, number][] = [
    ['node', await listenOnLoopback(nodeServer)],
    ['express', await listenOnLoopback(expressServer)],
    ['fastify', (fastify.server.address() as AddressInfo).port],
  ]
  t.teardown(() => Promise.all([closeServer(nodeServer), closeServer(expressServer)]))
  for (const [name, port] of ports) {
    const passed = await send(port, { headers: paymentHeaders({ 'x-request-id': `${name}-pass` }), body: saleBody() })
    t.equal(passed.status, 201, name)
    t.equal(passed.json.requestId, `${name}-pass`, name)
    t.equal(
      (
        await send(port, {
          headers: paymentHeaders({ 'x-request-id': `${name}-refused`, authorization: 'Basic eDp5' }),
          body: saleBody(),
        })
      ).status,
      401,
    )
  }
  const brokenPort = await listenOnLoopback(brokenServer)
  t.teardown(() => closeServer(brokenServer))
  t.equal(
    (await send(brokenPort, { headers: paymentHeaders({ 'x-request-id': 'broken' }), body: saleBody() })).status,
    500,
  )
  await tracing.shutdown()
  const spans = receiver.spans()
  const checks = spans.filter((span) => span.name === 'payments-gate checks')
  t.equal(checks.length, 7)
  for (const span of checks) {
    const parent = spans.find((other) => other.spanId === span.parentSpanId)
    t.match(
      parent,
      { name: 'app request', traceId: span.traceId },
      `${span.attributes['payments_gate.request_id']}: a child of the application's span`,
    )
    t.equal(span.kind, 1, 'internal')
  }
  const of = (id: string) => checks.find((span) => span.attributes['payments_gate.request_id'] === id)
  for (const [name] of ports) {
    t.match(of(`${name}-pass`), {
      status: 0,
      attributes: { 'payments_gate.operation': 'sale', 'payments_gate.entity': 'default' },
    })
    t.notOk('http.response.status_code' in (of(`${name}-pass`)?.attributes ?? {}), 'no status: the application answers')
    t.match(of(`${name}-refused`), {
      attributes: { 'http.response.status_code': 401, 'payments_gate.error_name': 'accessDenied' },
    })
  }
  t.match(of('broken'), { status: 2, attributes: { 'http.response.status_code': 500 } })
})
