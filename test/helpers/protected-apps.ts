/**
 * One payment handler of an application, written on each middleware surface (node, Express, Fastify,
 * Hono) behind a gate with retry protection, for test/surfaces/retry-protection.test.ts and the killed
 * process of test/e2e/middleware-killed.test.ts. What it does comes from the payment's
 * `transactionReference`, `PLAN-...`:
 *
 * - `ok` answers 201 with a header and two cookies; `buffer` answers its bytes; `empty` answers 204;
 * - `wait` waits until the test releases it, then answers as `ok`;
 * - `slow` writes the first piece of its answer, waits until released, then the rest; `slowbig` then more
 *   than a store keeps; `slowfail` then fails (not on Fastify, which ends a stream whose client left);
 * - `throw` throws; `reject` fails asynchronously (Hono: with what is not an Error);
 * - `broken` starts its answer, then fails;
 * - `refuse` answers 400;
 * - `stream` writes its 201 in pieces; `big` streams more than a store keeps;
 * - `denied` is refused with 403 by the application before its handler (Express, Fastify, Hono);
 * - `hookfail` fails in a hook before its handler the first time, a 500 (Fastify).
 */
import { createServer, type Server, type ServerResponse } from 'node:http'
import { Readable } from 'node:stream'
import { createAdaptorServer } from '@hono/node-server'
import express from 'express'
import Fastify, { type FastifyReply } from 'fastify'
import { Hono, type Context, type Env } from 'hono'
import type { Gate } from '../../lib/gate.js'
import type { PaymentRequest } from '../../lib/schema/payment.js'
import type { PaymentsGateInput } from '../../lib/surfaces/hono.js'
import { OTHER_PATH, RECURRING_PATH, SALE_PATH } from './fixtures.js'

export const SURFACES = ['node', 'express', 'fastify', 'hono'] as const
export type Surface = (typeof SURFACES)[number]

/** A path of the application whose handler throws, with no payment on it. */
export const FAILING_PATH = '/boom'

/** A piece of `big`'s answer: three of them are more than a store keeps (64 KiB). */
export const BIG_PIECE = 'x'.repeat(30_000)

/** The pieces `stream` and `slow` write, in order. */
export function pieces(reference: string, run: number): string[] {
  return ['{"reference":', JSON.stringify(reference), `,"run":${run}}`]
}

/** What the handler has done: how often it ran for each reference, and the waits a test releases. */
export class Handling {
  readonly #runs = new Map<string, number>()
  readonly #waits = new Map<string, () => void>()
  readonly #started: ((reference: string) => void) | undefined

  /** `started` is told when a handler begins (the killed process prints it). */
  constructor(started?: (reference: string) => void) {
    this.#started = started
  }

  ran(reference: string): number {
    const run = this.count(reference) + 1
    this.#runs.set(reference, run)
    this.#started?.(reference)
    return run
  }

  count(reference: string): number {
    return this.#runs.get(reference) ?? 0
  }

  wait(reference: string): Promise<void> {
    return new Promise((resolve) => this.#waits.set(reference, resolve))
  }

  /** Lets a waiting handler go on; false when none waits. */
  release(reference: string): boolean {
    const resume = this.#waits.get(reference)
    this.#waits.delete(reference)
    resume?.()
    return resume !== undefined
  }
}

const planOf = (reference: string) => reference.slice(0, reference.indexOf('-'))
const COOKIES = ['first=1', 'second=2', 'third=3']
const okBody = (reference: string, run: number) => JSON.stringify({ reference, run })
const failure = () => new Error('the card processor failed')
/** What a middleware or hook of the application before the handler refuses `denied` with. */
const denial = () => Object.assign(new Error('not this merchant today'), { status: 403, statusCode: 403 })

function nodeOk(res: ServerResponse, reference: string, run: number): void {
  res.writeHead(201, { 'content-type': 'application/json', 'x-app': 'one', 'set-cookie': COOKIES })
  res.end(okBody(reference, run))
}

function writePieces(res: ServerResponse, all: readonly string[]): void {
  for (const piece of all) res.write(piece, 'utf8')
  res.end()
}

/** `slow`, `slowbig` and `slowfail` on a node response: the first piece, the wait, the rest or the failure. */
async function writeSlowly(
  res: ServerResponse,
  handling: Handling,
  reference: string,
  run: number,
  plan: string,
): Promise<void> {
  const [first, ...rest] = pieces(reference, run)
  res.write(first)
  await handling.wait(reference)
  if (plan === 'slowfail') throw failure()
  writePieces(res, plan === 'slowbig' ? [BIG_PIECE, BIG_PIECE, BIG_PIECE] : rest)
}

/** The node handler's payment route. */
function nodeServer(gate: Gate, handling: Handling): Server {
  return createServer(
    // An async handler, as applications write them: with retry protection its rejection is a throw (docs/middleware.md).
    // eslint-disable-next-line @typescript-eslint/no-misused-promises
    gate.handler((_req, res, passed): void | Promise<void> => {
      if (passed === undefined) return void res.end('other')
      const reference = passed.document.transactionReference
      const run = handling.ran(reference)
      switch (planOf(reference)) {
        case 'wait':
          return handling.wait(reference).then(() => nodeOk(res, reference, run))
        case 'slow':
        case 'slowbig':
        case 'slowfail':
          res.writeHead(201, { 'content-type': 'application/json' })
          return writeSlowly(res, handling, reference, run, planOf(reference))
        case 'throw':
          throw failure()
        case 'reject':
          return Promise.reject(failure())
        case 'broken':
          res.writeHead(201, { 'content-type': 'application/json' })
          res.write('{"reference":')
          throw failure()
        case 'refuse':
          res.writeHead(400, { 'content-type': 'application/json' })
          return void res.end('{"declined":true}')
        case 'stream':
          res.writeHead(201, { 'content-type': 'application/json' })
          return writePieces(res, pieces(reference, run))
        case 'big':
          res.writeHead(201, { 'content-type': 'text/plain' })
          return writePieces(res, [BIG_PIECE, BIG_PIECE, BIG_PIECE])
        case 'buffer':
          res.writeHead(201, { 'content-type': 'application/json' })
          // A Uint8Array that is no Buffer, as a Fetch body would be.
          return void res.end(new Uint8Array(Buffer.from(okBody(reference, run))))
        case 'empty':
          res.writeHead(204)
          return void res.end(() => undefined)
        default:
          return nodeOk(res, reference, run)
      }
    }),
  )
}

function expressServer(gate: Gate, handling: Handling): Server {
  const app = express()
  app.use(gate.express())
  app.use((req, _res, next) => {
    const reference = (req.body as PaymentRequest | undefined)?.transactionReference
    next(reference !== undefined && planOf(reference) === 'denied' ? denial() : undefined)
  })
  app.post([SALE_PATH, RECURRING_PATH], (req, res) => {
    const reference = (req.body as PaymentRequest).transactionReference
    const run = handling.ran(reference)
    const ok = () => res.status(201).set('x-app', 'one').append('set-cookie', COOKIES).json({ reference, run })
    switch (planOf(reference)) {
      case 'wait':
        return handling.wait(reference).then(ok)
      case 'slow':
      case 'slowbig':
      case 'slowfail':
        res.status(201).type('application/json')
        return writeSlowly(res, handling, reference, run, planOf(reference))
      case 'throw':
        throw failure()
      case 'reject':
        return Promise.reject(failure())
      case 'broken':
        res.status(201).type('application/json').write('{"reference":')
        throw failure()
      case 'refuse':
        return void res.status(400).json({ declined: true })
      case 'stream':
        res.status(201).type('application/json')
        return writePieces(res, pieces(reference, run))
      case 'big':
        res.status(201).type('text/plain')
        return writePieces(res, [BIG_PIECE, BIG_PIECE, BIG_PIECE])
      case 'buffer':
        return void res
          .status(201)
          .type('application/json')
          .send(Buffer.from(okBody(reference, run)))
      case 'empty':
        return void res.status(204).end()
      default:
        return void ok()
    }
  })
  app.get(OTHER_PATH, (_req, res) => void res.send('other'))
  app.get(FAILING_PATH, () => {
    throw failure()
  })
  app.use(gate.expressErrorHandler())
  return createServer(app)
}

function fastifyOk(reply: FastifyReply, reference: string, run: number): FastifyReply {
  return reply.code(201).header('x-app', 'one').header('set-cookie', COOKIES).send({ reference, run })
}

async function fastifyServer(gate: Gate, handling: Handling): Promise<Server> {
  let server!: Server
  const app = Fastify({ serverFactory: (handler) => (server = createServer(handler)) })
  await app.register(gate.fastify, { errorHandler: true })
  const failed = new Set<string>()
  app.addHook('preHandler', (request, _reply, done) => {
    const reference = (request.body as PaymentRequest | undefined)?.transactionReference
    if (reference !== undefined && planOf(reference) === 'hookfail' && !failed.has(reference)) {
      failed.add(reference)
      return done(new Error('a lookup before the handler timed out'))
    }
    done(reference !== undefined && planOf(reference) === 'denied' ? denial() : undefined)
  })
  app.post(SALE_PATH, async (request, reply) => {
    const reference = (request.body as PaymentRequest).transactionReference
    const run = handling.ran(reference)
    switch (planOf(reference)) {
      case 'wait':
        await handling.wait(reference)
        return fastifyOk(reply, reference, run)
      case 'slow': {
        const [first, ...rest] = pieces(reference, run)
        const slowly = async function* () {
          yield first
          await handling.wait(reference)
          yield* rest
        }
        return reply.code(201).type('application/json').send(Readable.from(slowly()))
      }
      case 'throw':
      case 'reject':
        throw failure()
      case 'refuse':
        return reply.code(400).send({ declined: true })
      case 'stream':
        return reply
          .code(201)
          .type('application/json')
          .send(Readable.from(pieces(reference, run)))
      case 'big':
        return reply
          .code(201)
          .type('text/plain')
          .send(Readable.from([BIG_PIECE, BIG_PIECE, BIG_PIECE]))
      case 'buffer':
        return reply
          .code(201)
          .type('application/json')
          .send(Buffer.from(okBody(reference, run)))
      case 'empty':
        return reply.code(204).send()
      default:
        return fastifyOk(reply, reference, run)
    }
  })
  app.get(OTHER_PATH, async () => 'other')
  app.get(FAILING_PATH, async () => {
    throw failure()
  })
  await app.ready()
  return server
}

/** A `ReadableStream` of the pieces, one a pull; `before(i)` is awaited before piece `i`; `fail` errors it at the second. */
function piecesStream(
  all: readonly string[],
  before?: (index: number) => Promise<void>,
  fail = false,
): ReadableStream<Uint8Array> {
  let index = 0
  return new ReadableStream({
    async pull(controller) {
      await before?.(index)
      if (fail && index === 1) return controller.error(failure())
      const next = all[index++]
      if (next === undefined) controller.close()
      else controller.enqueue(Buffer.from(next))
    },
  })
}

function honoOk(reference: string, run: number): Response {
  const headers = new Headers({ 'content-type': 'application/json', 'x-app': 'one' })
  for (const cookie of COOKIES) headers.append('set-cookie', cookie)
  return new Response(okBody(reference, run), { status: 201, headers })
}

const JSON_TYPE = { 'content-type': 'application/json' }

function honoServer(gate: Gate, handling: Handling): Server {
  const app = new Hono()
  app.use('/payments/*', gate.hono())
  app.use(SALE_PATH, async (c: Context<Env, string, PaymentsGateInput>, next) => {
    if (planOf(c.req.valid('json').transactionReference) === 'denied') return c.json({ denied: true }, 403)
    await next()
  })
  app.post(SALE_PATH, async (c: Context<Env, string, PaymentsGateInput>) => {
    const reference = c.req.valid('json').transactionReference
    const run = handling.ran(reference)
    switch (planOf(reference)) {
      case 'wait':
        await handling.wait(reference)
        return honoOk(reference, run)
      case 'slow':
      case 'slowbig':
      case 'slowfail': {
        const plan = planOf(reference)
        const wait = (index: number) => (index === 1 ? handling.wait(reference) : Promise.resolve())
        const [first, ...rest] = pieces(reference, run)
        const all = plan === 'slowbig' ? [first as string, BIG_PIECE, BIG_PIECE, BIG_PIECE] : [first as string, ...rest]
        return new Response(piecesStream(all, wait, plan === 'slowfail'), { status: 201, headers: JSON_TYPE })
      }
      case 'throw':
        throw failure()
      case 'reject':
        // Not an Error: Hono's compose hands it on instead of calling onError.
        throw Object.assign(Object.create(null) as object, { message: 'the card processor failed' })
      case 'broken':
        return new Response(piecesStream(pieces(reference, run), undefined, true), { status: 201, headers: JSON_TYPE })
      case 'refuse':
        return c.json({ declined: true }, 400)
      case 'stream':
        return new Response(piecesStream(pieces(reference, run)), { status: 201, headers: JSON_TYPE })
      case 'big':
        return new Response(piecesStream([BIG_PIECE, BIG_PIECE, BIG_PIECE]), {
          status: 201,
          headers: { 'content-type': 'text/plain' },
        })
      case 'buffer':
        return c.body(new Uint8Array(Buffer.from(okBody(reference, run))), 201, JSON_TYPE)
      case 'empty':
        return c.body(null, 204)
      default:
        return honoOk(reference, run)
    }
  })
  app.get(OTHER_PATH, (c) => c.text('other'))
  return createAdaptorServer({ fetch: app.fetch }) as Server
}

/** The application on `surface`, not yet listening. */
export async function protectedServer(surface: Surface, gate: Gate, handling: Handling): Promise<Server> {
  switch (surface) {
    case 'node':
      return nodeServer(gate, handling)
    case 'express':
      return expressServer(gate, handling)
    case 'fastify':
      return fastifyServer(gate, handling)
    default:
      return honoServer(gate, handling)
  }
}
