import { createServer, IncomingMessage, request, ServerResponse, type Server } from 'node:http'
import { once } from 'node:events'
import { Socket, type AddressInfo } from 'node:net'
import { Readable } from 'node:stream'
import { createGzip, gunzipSync, gzipSync, type Gzip } from 'node:zlib'
import { createAdaptorServer } from '@hono/node-server'
import { trace } from '@opentelemetry/api'
import { InMemorySpanExporter, SimpleSpanProcessor, TracerProvider } from '@opentelemetry/sdk-trace'
import express from 'express'
import Fastify from 'fastify'
import { Hono } from 'hono'
import t, { type Test } from 'tap'
import type { Passed } from '../../lib/checks/index.js'
import type { GateOptions } from '../../lib/gate.js'
import { MemoryIdempotencyStore } from '../../lib/idempotency/memory.js'
import type { Claim, IdempotencyStore, Matches, Peek, RecordedAnswer } from '../../lib/idempotency/store.js'
import { UNKNOWN_ANSWER } from '../../lib/proxy/retry-protection.js'
import { createGateway } from '../../lib/proxy/server.js'
import { bytes, FINGERPRINT_KEY, SALE_PATH, saleBody } from '../helpers/fixtures.js'
import { abortMidBody, paymentHeaders, send, until, type Reply } from '../helpers/http.js'
import {
  BIG_PIECE,
  FAILING_PATH,
  Handling,
  pieces,
  protectedServer,
  SURFACES,
  type Surface,
} from '../helpers/protected-apps.js'
import { captureLogger, memoryLogger } from '../helpers/logs.js'
import { closeServer, listenOnLoopback, startBackend } from '../helpers/servers.js'
import { testGate } from '../helpers/surfaces.js'
import { createHandlerStore, HandlerProtection } from '../../lib/surfaces/retry-protection.js'

/**
 * Retry protection around the application's own handler, on every surface (docs/middleware.md, retry
 * protection): the proxy's promise, kept where the gate is middleware.
 */

interface App {
  readonly server: Server
  readonly port: number
  readonly handling: Handling
  /** A payment under `reference` (a `PLAN-...` of protected-apps.ts), `overrides` replacing its top-level keys. */
  pay(reference: string, overrides?: Record<string, unknown>, headers?: Record<string, string>): Promise<Reply>
}

async function app(t: Test, surface: Surface, options: Partial<GateOptions> = {}): Promise<App> {
  const gate = await testGate(t, { idempotency: 'memory', ...options })
  const handling = new Handling()
  const server = await protectedServer(surface, gate, handling)
  const port = await listenOnLoopback(server)
  t.teardown(() => closeServer(server))
  return {
    server,
    port,
    handling,
    pay: (reference, overrides = {}, headers = {}) =>
      send(port, { headers: paymentHeaders(headers), body: payment(reference, overrides) }),
  }
}

const payment = (reference: string, overrides: Record<string, unknown> = {}) =>
  saleBody({ transactionReference: reference, ...overrides })

const otherAmount = { instruction: { ...saleBody().instruction, value: { amount: 999, currency: 'GBP' } } }

/**
 * Sends a payment on a connection of its own and leaves (destroys it) once `leave` resolves, before its
 * answer; resolves once the server saw the connection close.
 */
async function payAndLeave(server: Server, port: number, reference: string, leave: () => Promise<unknown>) {
  const closed = new Promise<void>((resolve) =>
    server.once('connection', (socket: Socket) => socket.once('close', () => resolve())),
  )
  const req = request({ port, path: SALE_PATH, method: 'POST', headers: paymentHeaders(), agent: false })
  req.on('error', () => undefined)
  req.on('response', (res) => res.on('data', () => undefined).on('error', () => undefined))
  req.end(JSON.stringify(payment(reference)))
  await leave()
  req.destroy()
  await closed
}

/** Retries until the answer is no longer 409, a bounded number of times. */
async function pastInProgress(pay: () => Promise<Reply>): Promise<Reply> {
  let answer = await pay()
  for (let attempt = 0; attempt < 200 && answer.status === 409; attempt++) {
    await new Promise((resolve) => setTimeout(resolve, 50))
    answer = await pay()
  }
  return answer
}

for (const surface of SURFACES) {
  t.test(`${surface}: a retry gets the first answer again, replayed, and the handler runs once`, async (t) => {
    const { pay, port, handling } = await app(t, surface)
    const first = await pay('ok-1')
    t.equal(first.status, 201)
    t.same(first.json, { reference: 'ok-1', run: 1 })
    t.equal(first.headers['idempotent-replayed'], undefined, 'the first answer is no replay')
    const retry = await pay('ok-1', {}, { 'x-request-id': 'the-retry' })
    t.equal(retry.status, 201)
    t.equal(retry.text, first.text, 'the same body')
    t.equal(retry.headers['content-type'], first.headers['content-type'])
    t.equal(retry.headers['x-app'], 'one', "the handler's own header")
    t.same(retry.headers['set-cookie'], ['first=1', 'second=2', 'third=3'], 'a header given thrice, thrice')
    t.equal(retry.headers['idempotent-replayed'], 'true')
    t.equal(retry.headers['x-request-id'], 'the-retry', "the retry's own id, never the first's")
    // The members in another order, as a client that serializes the payment anew sends it.
    const { transactionReference, ...rest } = payment('ok-1')
    const reordered = await send(port, {
      headers: paymentHeaders(),
      body: JSON.stringify({ ...rest, transactionReference }),
    })
    t.equal(reordered.text, first.text, 'the same payment, whatever its member order')
    t.equal(handling.count('ok-1'), 1, 'the handler ran once')
    const other = await send(port, { method: 'GET', path: '/status' })
    t.equal(other.text, 'other', 'another path is untouched')
  })

  t.test(
    `${surface}: a copy while the handler runs gets 409; its answer, recorded once it comes, is replayed`,
    async (t) => {
      const { pay, handling } = await app(t, surface)
      const first = pay('wait-1')
      t.ok(await until(() => handling.count('wait-1') === 1), 'the handler runs')
      const copy = await pay('wait-1')
      t.equal(copy.status, 409)
      t.equal(copy.json.errorName, 'paymentIsInProgress')
      t.equal(copy.headers['retry-after'], '1')
      t.ok(handling.release('wait-1'))
      t.equal((await first).status, 201)
      const retry = await pay('wait-1')
      t.equal(retry.headers['idempotent-replayed'], 'true')
      t.same(retry.json, { reference: 'wait-1', run: 1 })
      t.equal(handling.count('wait-1'), 1)
    },
  )

  t.test(`${surface}: another payment under a recorded reference gets 422, its handler never run`, async (t) => {
    const { pay, handling } = await app(t, surface)
    t.equal((await pay('ok-2')).status, 201)
    const other = await pay('ok-2', otherAmount)
    t.equal(other.status, 422)
    t.equal(other.json.errorName, 'transactionReferenceIsAlreadyUsed')
    t.equal(handling.count('ok-2'), 1)
  })

  for (const plan of ['throw', 'reject']) {
    t.test(`${surface}: a handler that ${plan}s leaves an unknown outcome, answered 500 and replayed`, async (t) => {
      const logger = memoryLogger()
      const { pay, handling } = await app(t, surface, { logger })
      const first = await pay(`${plan}-1`)
      t.equal(first.status, 500)
      t.equal(first.json.errorName, 'internalErrorOccurred')
      t.match(first.json.message, /outcome of this payment is unknown: it failed while it was being processed/)
      t.notMatch(first.json.message, /card processor/, "the error's own words are not shown")
      const retry = await pay(`${plan}-1`)
      t.equal(retry.status, 500, 'never released: the handler may have charged the card before it threw')
      t.equal(retry.text, first.text)
      t.equal(retry.headers['idempotent-replayed'], 'true')
      t.equal(handling.count(`${plan}-1`), 1)
      // Fastify logs a route's errors itself.
      if (surface !== 'fastify')
        t.match(logger.lines, [{ message: 'payments-gate: the handler of a protected payment threw' }], 'logged')
    })
  }

  t.test(`${surface}: a client that leaves mid-body claims nothing`, async (t) => {
    const { server, port, pay, handling } = await app(t, surface)
    await abortMidBody(server, port, SALE_PATH, paymentHeaders() as Record<string, string>)
    t.equal((await pay('ok-6')).status, 201)
    t.equal(handling.count('ok-6'), 1)
  })

  t.test(`${surface}: a 4xx of the handler releases the key: the retry runs it again`, async (t) => {
    const { pay, handling } = await app(t, surface)
    t.equal((await pay('refuse-1')).status, 400)
    const retry = await pay('refuse-1')
    t.equal(retry.status, 400)
    t.equal(retry.headers['idempotent-replayed'], undefined)
    t.equal(handling.count('refuse-1'), 2)
  })

  if (surface !== 'node')
    t.test(`${surface}: a refusal of the application before the handler releases the key`, async (t) => {
      const { pay, handling } = await app(t, surface)
      t.equal((await pay('denied-1')).status, 403)
      const retry = await pay('denied-1')
      t.equal(retry.status, 403, 'never started: no unknown outcome')
      t.equal(retry.headers['idempotent-replayed'], undefined, 'released')
      t.equal(handling.count('denied-1'), 0)
    })

  if (surface === 'fastify')
    t.test(`${surface}: a hook that fails before the handler (a 500) releases the key`, async (t) => {
      const { pay, handling } = await app(t, surface)
      const failed = await pay('hookfail-1')
      t.equal(failed.status, 500)
      t.equal(handling.count('hookfail-1'), 0, 'the handler never ran')
      // Red before: the 500 was recorded and replayed for the TTL, though nothing was charged.
      const retry = await pay('hookfail-1')
      t.equal(retry.status, 201, 'the retry runs the handler')
      t.equal(retry.headers['idempotent-replayed'], undefined)
      t.equal((await pay('hookfail-1')).headers['idempotent-replayed'], 'true', 'its answer recorded')
      t.equal(handling.count('hookfail-1'), 1)
    })

  t.test(`${surface}: a refusal of the policy, after the claim, releases it`, async (t) => {
    const { pay, handling } = await app(t, surface)
    const refused = await pay('ok-3', {
      instruction: { ...saleBody().instruction, value: { amount: 1, currency: 'JPY' } },
    })
    t.equal(refused.json.errorName, 'currencyIsNotSupported')
    const invalid = await pay('ok-3', {
      instruction: { ...saleBody().instruction, value: { amount: -1, currency: 'GBP' } },
    })
    t.equal(invalid.json.errorName, 'bodyDoesNotMatchSchema', 'refused before the claim')
    t.equal((await pay('ok-3')).status, 201, 'the reference is free: no 409, no 422')
    t.equal(handling.count('ok-3'), 1)
  })

  t.test(`${surface}: an answer written in pieces is recorded whole; Buffers and no body too`, async (t) => {
    const { pay, handling } = await app(t, surface)
    const first = await pay('stream-1')
    t.equal(first.status, 201)
    t.equal(first.text, pieces('stream-1', 1).join(''))
    const retry = await pay('stream-1')
    t.equal(retry.text, first.text)
    t.equal(retry.headers['idempotent-replayed'], 'true')
    const buffer = await pay('buffer-1')
    t.same(buffer.json, { reference: 'buffer-1', run: 1 })
    t.equal((await pay('buffer-1')).text, buffer.text)
    t.equal((await pay('empty-1')).status, 204)
    const empty = await pay('empty-1')
    t.equal(empty.status, 204)
    t.equal(empty.headers['idempotent-replayed'], 'true')
    t.same([handling.count('stream-1'), handling.count('buffer-1'), handling.count('empty-1')], [1, 1, 1])
  })

  t.test(
    `${surface}: an answer larger than a store keeps is answered whole, and kept as answered, not replayable`,
    async (t) => {
      const { pay, handling } = await app(t, surface)
      const first = await pay('big-1')
      t.equal(first.status, 201)
      t.equal(first.text, BIG_PIECE.repeat(3), 'the client gets it whole')
      const retry = await pay('big-1')
      t.equal(retry.status, 500)
      t.match(retry.json.message, /was answered, but its answer was too large to keep/)
      t.equal(retry.headers['idempotent-replayed'], 'true')
      t.equal((await pay('big-1', otherAmount)).status, 422, 'another payment under it: already used')
      t.equal(handling.count('big-1'), 1)
    },
  )

  t.test(`${surface}: a client that leaves while its handler runs: the answer that comes is recorded`, async (t) => {
    const { server, port, pay, handling } = await app(t, surface)
    await payAndLeave(server, port, 'wait-2', () => until(() => handling.count('wait-2') === 1))
    t.ok(handling.release('wait-2'))
    const retry = await pastInProgress(() => pay('wait-2'))
    t.equal(retry.status, 201)
    t.same(retry.json, { reference: 'wait-2', run: 1 })
    t.equal(retry.headers['idempotent-replayed'], 'true')
    t.equal(handling.count('wait-2'), 1)
  })

  if (surface !== 'fastify')
    t.test(`${surface}: a client that leaves mid-answer: the rest of the answer is read and recorded`, async (t) => {
      const { server, port, pay, handling } = await app(t, surface)
      await payAndLeave(server, port, 'slow-1', () => until(() => handling.count('slow-1') === 1))
      t.ok(await until(() => handling.release('slow-1')), 'the handler goes on with its answer')
      const retry = await pastInProgress(() => pay('slow-1'))
      t.equal(retry.status, 201)
      t.equal(retry.text, pieces('slow-1', 1).join(''))
      t.equal(retry.headers['idempotent-replayed'], 'true')
    })
  if (surface !== 'fastify')
    t.test(`${surface}: a client that leaves mid-answer, and the rest too large or failing`, async (t) => {
      const logger = memoryLogger()
      const { server, port, pay, handling } = await app(t, surface, { logger })
      for (const plan of ['slowbig', 'slowfail']) {
        await payAndLeave(server, port, `${plan}-1`, () => until(() => handling.count(`${plan}-1`) === 1))
        t.ok(await until(() => handling.release(`${plan}-1`)))
      }
      const big = await pastInProgress(() => pay('slowbig-1'))
      t.equal(big.status, 500)
      t.match(big.json.message, /was answered, but its answer was too large to keep/)
      const failed = await pastInProgress(() => pay('slowfail-1'))
      t.equal(failed.status, 500)
      t.match(failed.json.message, /it failed while it was being processed/)
      t.match(logger.lines, [{ message: /^payments-gate: the (handler|answer body) of a protected payment/ }], 'logged')
    })
  else
    t.test(
      `${surface}: a client that leaves mid-answer stops Fastify's stream: past the window, the unknown outcome`,
      async (t) => {
        const { server, port, pay, handling } = await app(t, surface, { idempotencyInFlight: 1 })
        await payAndLeave(server, port, 'slow-1', () => until(() => handling.count('slow-1') === 1))
        const retry = await pastInProgress(() => pay('slow-1'))
        t.equal(retry.status, 500)
        t.match(retry.json.message, /did not finish within its in-flight window/)
        // Recorded, not a claim past its window: the handler's answer could no longer replace it.
        t.equal(retry.headers['idempotent-replayed'], 'true')
        t.equal(handling.count('slow-1'), 1)
      },
    )

  t.test(
    `${surface}: a client that leaves while its payment is being claimed: released, the handler never run`,
    async (t) => {
      const late = new LateStore()
      const { server, port, pay, handling } = await app(t, surface, { idempotency: late })
      await payAndLeave(server, port, 'ok-4', () => until(() => late.held === 1))
      late.go()
      t.equal((await pay('ok-4')).status, 201, 'the reference is free')
      t.equal(handling.count('ok-4'), 1, 'only the second ran')
    },
  )

  t.test(`${surface}: a store that fails: 503 (failure closed), or the handler runs unprotected (open)`, async (t) => {
    const logger = memoryLogger()
    const closed = await app(t, surface, { idempotency: new DownStore(), logger })
    const refused = await closed.pay('ok-5')
    t.equal(refused.status, 503)
    t.match(refused.json, { errorName: 'serviceUnavailable', message: /Retry protection is unavailable/ })
    t.equal(closed.handling.count('ok-5'), 0)
    t.match(logger.lines, [{ message: 'payments-gate: retry-protection store failed' }], 'logged')
    const open = await app(t, surface, { idempotency: new DownStore(), idempotencyFailure: 'open' })
    t.equal((await open.pay('ok-5')).status, 201)
    t.equal((await open.pay('ok-5')).status, 201)
    t.equal(open.handling.count('ok-5'), 2, 'unprotected: each runs')
    // The node handler has no error handler to answer a throw: the application's own to catch.
    if (surface !== 'node')
      t.equal((await open.pay('throw-5')).status, 500, "a throw, unprotected, is answered as the application's error")
  })

  // Fastify ends a reply whose stream fails itself: a failure after the head is Fastify's, no throw of the handler.
  if (surface !== 'fastify')
    t.test(`${surface}: an answer that breaks after it started is an unknown outcome`, async (t) => {
      const { pay, handling } = await app(t, surface)
      // Cut, or (@hono/node-server, whose head waits for the first pieces) its own 500: never a whole success.
      const first = await pay('broken-1').catch(() => undefined)
      t.ok(first === undefined || first.status === 500, 'the client never gets a success')
      const retry = await pastInProgress(() => pay('broken-1'))
      t.equal(retry.status, 500)
      t.match(retry.json.message, /it failed while it was being processed/)
      t.equal(handling.count('broken-1'), 1)
    })
}

// Each waits out a 1 s in-flight window with nothing else to do, on an app of its own: the surfaces side by side.
/**
 * What `compression` does, in a few lines: `writeHead` (as on-headers wraps it) decides on gzip for a client that
 * accepts it, drops the length and sets `Content-Encoding`; `write` and `end` go through the gzip stream.
 */
function gzipResponses(req: IncomingMessage, res: ServerResponse, next: () => void): void {
  const [write, end, writeHead] = [res.write, res.end, res.writeHead] as unknown as ((...args: unknown[]) => unknown)[]
  let gzip: Gzip | undefined
  res.writeHead = function (this: ServerResponse, status: number, ...rest: unknown[]) {
    const headers = rest.find((item) => typeof item === 'object' && item !== null)
    if (headers !== undefined) for (const [name, value] of Object.entries(headers)) this.setHeader(name, value)
    // As compression: an answer already encoded (Content-Encoding set) is left as it is.
    if (/\bgzip\b/.test(req.headers['accept-encoding'] ?? '') && this.getHeader('content-encoding') === undefined) {
      this.setHeader('content-encoding', 'gzip')
      this.removeHeader('content-length')
      gzip = createGzip()
      gzip.on('data', (chunk: Buffer) => write?.call(this, chunk))
      gzip.on('end', () => end?.call(this))
    }
    return writeHead?.call(this, status, typeof rest[0] === 'string' ? rest[0] : undefined)
  } as ServerResponse['writeHead']
  res.write = function (this: ServerResponse, chunk: unknown) {
    if (!this.headersSent) this.writeHead(this.statusCode)
    return gzip === undefined ? (write?.call(this, chunk) as boolean) : gzip.write(chunk as Buffer)
  } as ServerResponse['write']
  res.end = function (this: ServerResponse, chunk?: unknown) {
    if (!this.headersSent) this.writeHead(this.statusCode)
    if (gzip === undefined) return end?.call(this, chunk)
    gzip.end(chunk as Buffer)
    return this
  } as ServerResponse['end']
  next()
}

t.test(
  'a compression middleware mounted before the gate: the replay is whole, encoded as the retry asks',
  async (t) => {
    const gate = await testGate(t, { idempotency: 'memory' })
    let charged = 0
    const app = express()
    app.use(gzipResponses)
    app.use(gate.express())
    app.post(SALE_PATH, (req, res) => {
      charged++
      const answer = { outcome: 'authorized', reference: req.body.transactionReference }
      // Its head given to writeHead, as a node handler writes it, or set and sent by Express's res.json.
      if (!answer.reference.endsWith('-head')) return void res.status(201).json(answer)
      res.writeHead(201, { 'content-type': 'application/json' }).end(JSON.stringify(answer))
    })
    app.use(gate.expressErrorHandler())
    const server = app.listen(0, '127.0.0.1')
    await once(server, 'listening')
    t.teardown(() => closeServer(server))
    const port = (server.address() as AddressInfo).port
    const gzipped = { 'accept-encoding': 'gzip' }
    const read = (reply: Reply) =>
      JSON.parse((reply.headers['content-encoding'] === 'gzip' ? gunzipSync(reply.body) : reply.body).toString())
    for (const reference of ['PLAN-gz-1', 'PLAN-gz-head']) {
      const body = payment(reference)
      const first = await send(port, { headers: paymentHeaders(gzipped), body })
      t.equal(first.headers['content-encoding'], 'gzip', `${reference}: sent compressed`)
      t.same(read(first), { outcome: 'authorized', reference })
      // Red before: the replay said gzip over the bytes the gate had seen, which were not.
      const again = await send(port, { headers: paymentHeaders(gzipped), body })
      t.equal(again.headers['idempotent-replayed'], 'true')
      t.same(read(again), { outcome: 'authorized', reference }, `${reference}: the replay decodes to the answer`)
      const plain = await send(port, { headers: paymentHeaders(), body })
      t.equal(plain.headers['content-encoding'], undefined, `${reference}: a retry that takes no gzip gets none`)
      t.same(read(plain), { outcome: 'authorized', reference })
    }
    t.equal(charged, 2, 'each payment charged once')
  },
)

t.test('a wrapper before the gate: each form of writeHead recorded as given, and replayed so', async (t) => {
  const gate = await testGate(t, { idempotency: 'memory' })
  const heads: Record<string, (res: ServerResponse, body: string) => void> = {
    'PLAN-wh-object': (res, body) => res.writeHead(201, 'Made', { 'content-type': 'application/json' }).end(body),
    'PLAN-wh-flat': (res, body) =>
      res.writeHead(201, ['x-a', '1', 'X-A', '2', 'content-type', 'application/json']).end(body),
    'PLAN-wh-pairs': (res, body) =>
      res
        .writeHead(201, [
          ['x-b', '3'],
          ['content-type', 'application/json'],
        ] as unknown as string[])
        .end(body),
  }
  const handler = gate.handler((req, res, passed) => {
    const reference = (passed?.document as { transactionReference: string }).transactionReference
    heads[reference]?.(res, JSON.stringify({ reference }))
  })
  const server = createServer((req, res) => {
    // A wrapper that changes nothing, as a middleware before the gate puts one there.
    const [write, end] = [res.write, res.end]
    res.write = function (this: ServerResponse, ...args: unknown[]) {
      return (write as (...a: unknown[]) => boolean).apply(this, args)
    } as ServerResponse['write']
    res.end = function (this: ServerResponse, ...args: unknown[]) {
      return (end as (...a: unknown[]) => ServerResponse).apply(this, args)
    } as ServerResponse['end']
    handler(req, res)
  })
  const port = await listenOnLoopback(server)
  t.teardown(() => closeServer(server))
  const kept = (reply: Reply) => ({
    status: reply.status,
    a: reply.headers['x-a'],
    b: reply.headers['x-b'],
    type: reply.headers['content-type'],
    body: reply.text,
  })
  for (const reference of Object.keys(heads)) {
    const body = payment(reference)
    const first = await send(port, { headers: paymentHeaders(), body })
    t.equal(first.status, 201, reference)
    const again = await send(port, { headers: paymentHeaders(), body })
    t.equal(again.headers['idempotent-replayed'], 'true', `${reference}: replayed`)
    t.same(kept(again), kept(first), `${reference}: as first answered`)
  }
  t.equal((await send(port, { headers: paymentHeaders(), body: payment('PLAN-wh-flat') })).headers['x-a'], '1, 2')
})

t.test("Fastify: a replay is the answer the client got, not passed through the app's onSend hooks again", async (t) => {
  const gate = await testGate(t, { idempotency: 'memory' })
  let charged = 0
  const app = Fastify()
  await app.register(gate.fastify, { errorHandler: true })
  // An application's own hook on every answer: its JSON payloads wrapped in an envelope.
  app.addHook('onSend', (_request, reply, payload, done) => {
    const json = String(reply.getHeader('content-type')).startsWith('application/json')
    const text = typeof payload === 'string' || Buffer.isBuffer(payload)
    done(null, json && text ? `{"envelope":1,"data":${String(payload)}}` : payload)
  })
  app.post(SALE_PATH, async (request, reply) => {
    charged++
    return reply.code(201).send({ reference: (request.body as { transactionReference: string }).transactionReference })
  })
  await app.listen({ port: 0, host: '127.0.0.1' })
  t.teardown(() => app.close())
  const port = (app.server.address() as AddressInfo).port
  const body = payment('PLAN-envelope')
  const first = await send(port, { headers: paymentHeaders(), body })
  t.same(first.json, { envelope: 1, data: { reference: 'PLAN-envelope' } })
  const again = await send(port, { headers: paymentHeaders(), body })
  t.equal(again.headers['idempotent-replayed'], 'true')
  // Red before: wrapped a second time, {"envelope":1,"data":{"envelope":1,...}}.
  t.equal(again.text, first.text, 'the same bytes')
  t.match(again.headers['x-request-id'], /./, "the retry's own request id")
  t.not(again.headers['x-request-id'], first.headers['x-request-id'])
  t.equal(charged, 1)
})

t.test('Hono: a Response streaming strings is passed on and recorded as the UTF-8 node writes', async (t) => {
  const gate = await testGate(t, { idempotency: 'memory' })
  let charged = 0
  const app = new Hono()
  app.use('/payments/*', gate.hono())
  app.post(SALE_PATH, () => {
    charged++
    // A stream of strings is no Fetch body, but @hono/node-server writes each chunk to node's response.
    return new Response(Readable.toWeb(Readable.from(['a', 'é', 'c'])) as ReadableStream, { status: 201 })
  })
  const server = createAdaptorServer({ fetch: app.fetch }) as Server
  const port = await listenOnLoopback(server)
  t.teardown(() => closeServer(server))
  const body = payment('PLAN-strings')
  // Red before: a TypeError on the first string, the body cut off and the payment recorded as the unknown outcome.
  const first = await send(port, { headers: paymentHeaders(), body })
  t.equal(first.status, 201)
  t.equal(first.text, 'aéc')
  const retry = await send(port, { headers: paymentHeaders(), body })
  t.equal(retry.status, 201)
  t.equal(retry.text, 'aéc', 'replayed as sent')
  t.equal(retry.headers['idempotent-replayed'], 'true')
  t.equal(charged, 1)
})

t.test("a card number in a handler's error or in the path never reaches the application's logger whole", async (t) => {
  const logger = memoryLogger()
  const gate = await testGate(t, { idempotency: 'memory', logger })
  const app = express()
  // A parser of the application's before the gate: the gate logs that it cannot read the body, with the path.
  app.use(express.json({ type: '*/*' }))
  app.use(gate.express())
  app.post(SALE_PATH, () => {
    throw new Error('the processor declined card 4444333322221111')
  })
  app.use(gate.expressErrorHandler())
  const server = createServer(app)
  const port = await listenOnLoopback(server)
  t.teardown(() => closeServer(server))
  await send(port, { path: `${SALE_PATH};pan=4444333322221111`, headers: paymentHeaders(), body: payment('PLAN-x') })
  const node = createServer(
    gate.handler(() => {
      throw new Error('the processor declined card 4444333322221111')
    }),
  )
  const nodePort = await listenOnLoopback(node)
  t.teardown(() => closeServer(node))
  await send(nodePort, { headers: paymentHeaders(), body: payment('PLAN-card-in-error') })
  t.ok(await until(() => logger.lines.length >= 2), 'both logged')
  const written = JSON.stringify(logger.lines)
  // Red before: the path and the error's message and stack, whole.
  t.notMatch(written, /4444333322221111/)
  t.match(written, /444433\*{6}1111/, 'masked, as the gateway masks its own lines')
})

t.test('a status changed after the head went out is not what is recorded: the client got the first', async (t) => {
  const gate = await testGate(t, { idempotency: 'memory' })
  let charged = 0
  const answer = (res: ServerResponse, late: () => void) => {
    charged++
    res.writeHead(201, { 'content-type': 'application/json' })
    res.write('{"charged":')
    late()
    res.end('true}')
  }
  const node = createServer(gate.handler((_req, res) => answer(res, () => (res.statusCode = 402))))
  const app = express()
  app.use(gate.express())
  // A generic error path once streaming began: Express sets the status, node has sent 201 already.
  app.post(SALE_PATH, (_req, res) => answer(res, () => res.status(400)))
  for (const [name, server] of [
    ['node', node],
    ['express', createServer(app)],
  ] as const) {
    const port = await listenOnLoopback(server)
    t.teardown(() => closeServer(server))
    const body = payment(`PLAN-late-status-${name}`)
    const first = await send(port, { headers: paymentHeaders(), body })
    t.equal(first.status, 201, `${name}: the client got 201`)
    const retry = await send(port, { headers: paymentHeaders(), body })
    // Red before: recorded as the 4xx, the key released, the handler run again.
    t.equal(retry.status, 201, `${name}: replayed as the client got it`)
    t.equal(retry.headers['idempotent-replayed'], 'true')
  }
  t.equal(charged, 2, 'once on each surface')
})

t.test(
  "Fastify: the unknown outcome of a throw drops what an onSend hook before the plugin's said of the error's body",
  async (t) => {
    const gate = await testGate(t, { idempotency: 'memory' })
    let charged = 0
    const app = Fastify()
    // An instance-level compression hook registered before the plugin: it runs on the error's reply before the plugin's.
    app.addHook('onSend', (_request, reply, payload, done) => {
      if (typeof payload !== 'string' && !Buffer.isBuffer(payload)) return done(null, payload)
      reply.header('content-encoding', 'gzip').header('content-language', 'en').header('etag', '"error"')
      done(null, gzipSync(payload))
    })
    await app.register(gate.fastify, { errorHandler: true })
    app.post(SALE_PATH, async () => {
      charged++
      throw new Error('the card processor failed')
    })
    await app.listen({ port: 0, host: '127.0.0.1' })
    t.teardown(() => app.close())
    const port = (app.server.address() as AddressInfo).port
    const body = payment('PLAN-compressed-throw')
    const headers = paymentHeaders({ 'accept-encoding': 'gzip' })
    const first = await send(port, { headers, body })
    t.equal(first.status, 500)
    // Red before: Content-Encoding: gzip over the plain JSON of the unknown outcome, which no client could read.
    t.equal(first.headers['content-encoding'], undefined, 'no Content-Encoding over plain JSON')
    t.equal(first.headers['content-language'], undefined)
    t.equal(first.headers.etag, undefined)
    t.equal(first.json.errorName, 'internalErrorOccurred')
    t.equal(first.headers['content-length'], String(Buffer.byteLength(first.text)))
    const again = await send(port, { headers, body })
    t.equal(again.headers['idempotent-replayed'], 'true')
    t.equal(again.headers['content-encoding'], undefined)
    t.equal(again.text, first.text, 'replayed as the client first got it')
    t.equal(charged, 1)
  },
)

t.test(
  "Fastify: an application's own preValidation or preHandler hook that fails before the handler releases the key",
  async (t) => {
    const gate = await testGate(t, { idempotency: 'memory' })
    for (const kind of ['preValidation', 'preHandler'] as const) {
      let charged = 0
      let failures = 1
      const app = Fastify()
      await app.register(gate.fastify, { errorHandler: true })
      // An instance's hook added after the plugin: Fastify runs it before any of the route's own hooks.
      app.addHook(kind, async () => {
        if (failures-- > 0) throw new Error('the fraud service is down')
      })
      app.post(SALE_PATH, async (_request, reply) => {
        charged++
        return reply.code(201).send({ ok: true })
      })
      await app.listen({ port: 0, host: '127.0.0.1' })
      t.teardown(() => app.close())
      const port = (app.server.address() as AddressInfo).port
      const body = payment(`PLAN-app-hook-${kind}`)
      t.equal((await send(port, { headers: paymentHeaders(), body })).status, 500, `${kind}: the hook's 500`)
      // Red before for preValidation: the 500 was recorded and replayed for the TTL, though nothing was charged.
      const retry = await send(port, { headers: paymentHeaders(), body })
      t.equal(retry.status, 201, `${kind}: the retry runs the handler`)
      t.equal(retry.headers['idempotent-replayed'], undefined)
      t.equal(charged, 1)
    }
  },
)

t.test("Fastify: a route's own preValidation hooks, one or a list, still run after the plugin's", async (t) => {
  const gate = await testGate(t, { idempotency: 'memory' })
  for (const [name, list] of [
    ['one hook', false],
    ['a list of hooks', true],
  ] as const) {
    const app = Fastify()
    await app.register(gate.fastify, { errorHandler: true })
    let ran = 0
    const own = (_request: unknown, _reply: unknown, done: () => void) => {
      ran++
      done()
    }
    app.post(SALE_PATH, { preValidation: list ? [own] : own }, async (_request, reply) => reply.code(201).send({}))
    await app.listen({ port: 0, host: '127.0.0.1' })
    t.teardown(() => app.close())
    const port = (app.server.address() as AddressInfo).port
    t.equal((await send(port, { headers: paymentHeaders(), body: payment(`PLAN-own-${Number(list)}`) })).status, 201)
    t.equal(ran, 1, `${name}: the route's own hook ran`)
  }
})

t.test('in-flight window over, on every surface', async (t) => {
  t.jobs = SURFACES.length
  for (const surface of SURFACES)
    t.test(
      `${surface}: in-flight window over, a retry gets the unknown outcome; the late answer replaces it`,
      async (t) => {
        const { pay, handling } = await app(t, surface, { idempotencyInFlight: 1 })
        const first = pay('wait-3')
        t.ok(await until(() => handling.count('wait-3') === 1))
        const unknown = await pastInProgress(() => pay('wait-3'))
        t.equal(unknown.status, 500)
        t.match(unknown.json.message, /did not finish within its in-flight window/)
        t.equal(unknown.headers['idempotent-replayed'], 'true')
        handling.release('wait-3')
        t.equal((await first).status, 201)
        t.same((await pay('wait-3')).json, { reference: 'wait-3', run: 1 })
      },
    )
})

/** The real memory store, its claims held while `holding`, until `go`: a store that answers late. */
class LateStore implements IdempotencyStore {
  readonly #store = memoryStore()
  readonly #held: (() => void)[] = []
  #holding = true

  get held(): number {
    return this.#held.length
  }

  claim(key: string, fingerprint: string, matches?: Matches): Claim | Promise<Claim> {
    if (!this.#holding) return this.#store.claim(key, fingerprint, matches)
    return new Promise((resolve) => this.#held.push(() => resolve(this.#store.claim(key, fingerprint, matches))))
  }

  go(): void {
    this.#holding = false
    for (const resume of this.#held.splice(0)) resume()
  }

  record(key: string, token: string, answer: RecordedAnswer): void {
    this.#store.record(key, token, answer)
  }

  release(key: string, token: string): void {
    this.#store.release(key, token)
  }

  async peek(key: string, fingerprint: string, matches?: Matches): Promise<Peek> {
    return this.#store.peek(key, fingerprint, matches)
  }

  close(): Promise<void> {
    return this.#store.close()
  }
}

/** A store that cannot be reached. */
class DownStore implements IdempotencyStore {
  claim(): Promise<Claim> {
    return Promise.reject(new Error('connection refused'))
  }

  record(): void {}
  release(): void {}
  async close(): Promise<void> {}
}

function memoryStore(): MemoryIdempotencyStore {
  return new MemoryIdempotencyStore({
    ttlMs: 60_000,
    inFlightMs: 60_000,
    oversizedAnswer: UNKNOWN_ANSWER,
    unknownAnswer: UNKNOWN_ANSWER,
  })
}

t.test('report mode looks at the store and claims nothing, as the proxy does', async (t) => {
  const store = memoryStore()
  const late = new LateStore()
  late.go()
  const reporting = async (idempotency: IdempotencyStore) => {
    const gate = await testGate(t, { idempotency, mode: 'report', idempotencyFingerprintKey: FINGERPRINT_KEY })
    const server = createServer(
      gate.handler((_req, res, _passed, _id, report) => {
        res.end(
          JSON.stringify({ would: report?.wouldRetryProtection ?? null, refused: report?.wouldRefuse !== undefined }),
        )
      }),
    )
    const port = await listenOnLoopback(server)
    t.teardown(() => closeServer(server))
    return (reference: string, overrides: Record<string, unknown> = {}) =>
      send(port, { headers: paymentHeaders(), body: payment(reference, overrides) }).then((answer) => answer.json)
  }
  const report = await reporting(store)
  t.same(await report('ok-1'), { would: 'claimed', refused: false })
  t.same(await report('ok-1'), { would: 'claimed', refused: false }, 'nothing was claimed')
  const enforcing = await app(t, 'node', { idempotency: store, idempotencyFingerprintKey: FINGERPRINT_KEY })
  t.equal((await enforcing.pay('ok-1')).status, 201)
  t.same(await report('ok-1'), { would: 'replayed', refused: false })
  t.same(await report('ok-1', otherAmount), { would: 'alreadyUsed', refused: false })
  const jpy = { instruction: { ...saleBody().instruction, value: { amount: 1, currency: 'JPY' } } }
  t.same(await report('ok-2', jpy), { would: null, refused: true }, 'a payment enforce would refuse: no look')
  t.same(await (await reporting(late))('ok-1'), { would: 'claimed', refused: false }, 'a store that answers later')
  t.same(await (await reporting(new DownStore()))('ok-1'), { would: null, refused: false }, 'a store that cannot look')
})

t.test('a replay ends the middleware span with the status replayed (docs/tracing.md)', async (t) => {
  const exporter = new InMemorySpanExporter()
  const provider = new TracerProvider({ spanProcessors: [new SimpleSpanProcessor({ exporter })] })
  trace.setGlobalTracerProvider(provider)
  t.teardown(async () => {
    await provider.shutdown()
    trace.disable()
  })
  const { pay } = await app(t, 'node')
  t.equal((await pay('refuse-9')).status, 400)
  t.equal((await pay('ok-9')).status, 201)
  t.equal((await pay('ok-9')).headers['idempotent-replayed'], 'true')
  const statuses = exporter.getFinishedSpans().map((span) => span.attributes['http.response.status_code'])
  t.same(statuses, [undefined, undefined, 201], 'passed, passed, then the replayed answer')
})

t.test("a gateway built from a gate with retry protection protects its payments in the gate's store", async (t) => {
  const backend = await startBackend()
  t.teardown(() => backend.close())
  const gate = await testGate(t, { idempotency: 'memory' })
  const handling = new Handling()
  const server = await protectedServer('express', gate, handling)
  const port = await listenOnLoopback(server)
  t.teardown(() => closeServer(server))
  const to = (where: number) => (reference: string) =>
    send(where, { headers: paymentHeaders(), body: payment(reference) })
  const viaApp = to(port)
  const target = backend.url
  t.throws(
    () => createGateway({ checks: gate.checks, target, logger: captureLogger(), timeout: 40_000 }),
    {
      code: 'EIDEMPOTENCY',
      message:
        /idempotencyInFlight \(95 s\) is shorter than this gateway's in-flight window \(3 x timeout \+ 5 s = 125 s\)/,
    },
    'a window shorter than a forward may take: refused',
  )
  const gateway = createGateway({ checks: gate.checks, target, logger: captureLogger() })
  const viaProxy = to((await gateway.listen(0, '127.0.0.1')).port)
  t.equal((await viaApp('ok-1')).status, 201)
  const replayed = await viaProxy('ok-1')
  t.equal(replayed.headers['idempotent-replayed'], 'true', 'paid through the handler, replayed by the proxy')
  t.equal(backend.received.length, 0, 'never forwarded')
  t.equal((await viaProxy('ok-2')).status, 201)
  t.equal(backend.received.length, 1)
  t.equal((await viaApp('ok-2')).headers['idempotent-replayed'], 'true', 'paid through the proxy, replayed by the app')
  t.equal(handling.count('ok-2'), 0)
  await gateway.drain(0)
  t.equal(
    (await viaApp('ok-1')).headers['idempotent-replayed'],
    'true',
    "the gateway's drain leaves the gate's store open",
  )
  const own = createGateway({ checks: gate.checks, target, logger: captureLogger(), idempotency: 'memory' })
  const viaOwn = to((await own.listen(0, '127.0.0.1')).port)
  t.teardown(() => own.drain(0))
  t.equal((await viaOwn('ok-1')).headers['idempotent-replayed'], undefined, 'given its own: a store of its own')
  t.equal(backend.received.length, 2)
})

t.test(
  'a protecting gateway in front of a protecting application on one store: every payment 409, as documented',
  async (t) => {
    const store = memoryStore()
    const inner = await app(t, 'node', { idempotency: store, idempotencyFingerprintKey: FINGERPRINT_KEY })
    const gate = await testGate(t)
    const gateway = createGateway({
      checks: gate.checks,
      target: `http://127.0.0.1:${inner.port}`,
      logger: captureLogger(),
      idempotency: store,
      idempotencyFingerprintKey: FINGERPRINT_KEY,
    })
    const { port } = await gateway.listen(0, '127.0.0.1')
    t.teardown(() => gateway.drain(0))
    const answer = await send(port, { headers: paymentHeaders(), body: payment('ok-1') })
    t.equal(answer.status, 409, "the application finds the gateway's claim in flight")
    t.equal(inner.handling.count('ok-1'), 0)
    t.equal((await inner.pay('ok-1')).status, 201, 'the 409 released the key: one layer protects it')
  },
)

t.test('a record under a fingerprint key the gate does not hold: 503 to retry, as the proxy answers', async (t) => {
  const store = memoryStore()
  const older = await app(t, 'express', { idempotency: store, idempotencyFingerprintKey: Buffer.alloc(32, 1) })
  t.equal((await older.pay('ok-1')).status, 201)
  const newer = await app(t, 'express', { idempotency: store, idempotencyFingerprintKey: Buffer.alloc(32, 2) })
  const answer = await newer.pay('ok-1')
  t.equal(answer.status, 503)
  t.equal(answer.headers['retry-after'], '1')
  t.match(answer.json.message, /fingerprint key this gateway does not hold/)
  t.equal(newer.handling.count('ok-1'), 0)
})

t.test('a failure on a path with no payment is answered as without retry protection', async (t) => {
  for (const surface of ['express', 'fastify'] as const) {
    const { port } = await app(t, surface)
    const failed = await send(port, { method: 'GET', path: FAILING_PATH })
    t.equal(failed.status, 500, surface)
    t.equal(failed.json.errorName, 'internalErrorOccurred', surface)
    t.notMatch(failed.json.message, /outcome of this payment/, `${surface}: no payment, no unknown outcome`)
  }
})

t.test('run: a throw or a rejection with no open claim goes on as it would without retry protection', async (t) => {
  const gate = await testGate(t)
  const protection = new HandlerProtection(
    gate.checks,
    createHandlerStore({ idempotency: 'memory' })!,
    gate.checks.rateLimiter!,
    {},
    undefined,
  )
  t.teardown(() => protection.close())
  const req = new IncomingMessage(new Socket())
  const res = new ServerResponse(req)
  const passed = gate.checks.checkBody('sale', bytes(saleBody())) as Passed
  t.throws(
    () =>
      protection.run(
        () => {
          throw new Error('thrown')
        },
        req,
        res,
        passed,
        'id',
      ),
    /thrown/,
  )
  await t.rejects(
    // eslint-disable-next-line @typescript-eslint/no-misused-promises
    protection.run(() => Promise.reject(new Error('rejected')), req, res, passed, 'id') as Promise<unknown>,
    /rejected/,
  )
  t.equal(
    protection.run(() => undefined, req, res, passed, 'id'),
    undefined,
  )
})
