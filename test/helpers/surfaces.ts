/**
 * The gate on each of its surfaces, on loopback: the proxy in front of a
 * recording backend (`startGateway`), and the node handler, Express, Fastify
 * and the proxy side by side for the shared case table (`everyEmbedding`).
 * All built through createGate and createGateway, closed when the test ends.
 */
import type { Agent } from 'node:http'
import { createServer } from 'node:http'
import type { AddressInfo } from 'node:net'
import type { FastifyInstance, FastifyRequest } from 'fastify'
import type { Test } from 'tap'
import { createGate, type Gate, type GateOptions } from '../../lib/gate.js'
import { createMetrics, type Metrics } from '../../lib/metrics.js'
import { createGateway, type Gateway, type GatewayOptions } from '../../lib/proxy/server.js'
import {
  GATE_OPTIONS,
  OTHER_PATH,
  POLICIES_DIR,
  RECURRING_PATH,
  SALE_PATH,
  testCredentials,
  writeCredentials,
  FINGERPRINT_KEY,
} from './fixtures.js'
import { keepAliveAgent } from './http.js'
import { captureLogger } from './logs.js'
import { closeServer, listenOnLoopback, startBackend, type Answer, type Backend } from './servers.js'

/** A gate on the sample policies and the test user's credentials file, closed when the test ends. */
export async function testGate(t: Test, options: Partial<GateOptions> = {}): Promise<Gate> {
  const credentials = options.credentials ?? (await writeCredentials(t.testdir()))
  const gate = await createGate({ ...GATE_OPTIONS, policies: POLICIES_DIR, ...options, credentials })
  t.teardown(() => gate.close())
  return gate
}

export interface Started {
  readonly gate: Gate
  readonly gateway: Gateway
  readonly backend: Backend
  readonly url: string
  readonly port: number
  readonly metrics: Metrics
}

export interface StartOptions extends Partial<Omit<GatewayOptions, 'checks'>> {
  answer?: Answer
  gate?: Partial<GateOptions>
}

/** A recording backend and the proxy in front of it, both on loopback, both closed when the test ends. */
export async function startGateway(t: Test, options: StartOptions = {}): Promise<Started> {
  const backend = await startBackend(options.answer)
  t.teardown(() => backend.close())
  const gate = await createGate({ policies: POLICIES_DIR, credentials: await testCredentials(), ...options.gate })
  t.teardown(() => gate.close())
  const metrics = options.metrics ?? createMetrics({ defaultMetrics: false })
  // Retry protection off unless a test asks for it: these tests send the same payment again on purpose.
  const { checks, backendErrors } = gate
  const gateway = createGateway({
    target: backend.url,
    logger: captureLogger(),
    idempotency: 'off',
    idempotencyFingerprintKey: FINGERPRINT_KEY,
    checks,
    backendErrors,
    ...options,
    metrics,
  })
  const { port } = await gateway.listen(0, '127.0.0.1')
  t.teardown(() => gateway.drain(0))
  return { gate, gateway, backend, url: `http://127.0.0.1:${port}`, port, metrics }
}

/** What the test applications answer on a pass: what they were handed. */
export interface Echo {
  document: unknown
  operation: string
  entity: string
  username: string
  /** The request id the application was given (the backend's `X-Request-Id`, behind the proxy). */
  requestId: string | undefined
}

export interface Embedding {
  readonly name: string
  readonly port: number
  /** How many requests reached the application (the backend, behind the proxy). */
  handled(): number
  close(): Promise<void>
}

async function nodeEmbedding(gate: Gate): Promise<Embedding> {
  let handled = 0
  const server = createServer(
    gate.handler((_req, res, passed, requestId) => {
      handled++
      if (passed === undefined) {
        res.end('other')
        return
      }
      const echo: Echo = {
        document: passed.document,
        operation: passed.operation,
        entity: passed.entity,
        username: passed.principal?.username as string,
        requestId,
      }
      res.statusCode = 201
      res.setHeader('content-type', 'application/json')
      res.end(JSON.stringify(echo))
    }),
  )
  return {
    name: 'node',
    port: await listenOnLoopback(server),
    handled: () => handled,
    close: () => closeServer(server),
  }
}

async function expressEmbedding(gate: Gate): Promise<Embedding> {
  let handled = 0
  // The frameworks are loaded by the few files that embed the gate in them, not by every file that starts a gateway.
  const { default: express } = await import('express')
  const app = express()
  app.use(gate.express())
  app.post([SALE_PATH, RECURRING_PATH], (req, res) => {
    handled++
    const context = req.paymentsGate
    const echo: Echo = {
      document: req.body,
      operation: context!.operation,
      entity: context!.entity,
      username: context!.principal.username,
      requestId: context!.requestId,
    }
    res.status(201).json(echo)
  })
  app.get(OTHER_PATH, (_req, res) => {
    handled++
    res.send('other')
  })
  app.use(gate.expressErrorHandler())
  const server = createServer(app)
  return {
    name: 'express',
    port: await listenOnLoopback(server),
    handled: () => handled,
    close: () => closeServer(server),
  }
}

/** A Fastify application with the gate registered and the echo routes; `onHandled` is called by each. */
export async function fastifyApp(gate: Gate, onHandled: () => void = () => {}): Promise<FastifyInstance> {
  const { default: Fastify } = await import('fastify')
  const app = Fastify()
  await app.register(gate.fastify)
  app.post(SALE_PATH, async (request, reply) => (onHandled(), reply.code(201).send(echoOf(request))))
  app.post(RECURRING_PATH, async (request, reply) => (onHandled(), reply.code(201).send(echoOf(request))))
  app.get(OTHER_PATH, async () => (onHandled(), 'other'))
  return app
}

function echoOf(request: FastifyRequest): Echo {
  const context = request.paymentsGate!
  return {
    document: request.body,
    operation: context.operation,
    entity: context.entity,
    username: context.principal.username,
    requestId: context.requestId,
  }
}

async function fastifyEmbedding(gate: Gate): Promise<Embedding> {
  let handled = 0
  const app = await fastifyApp(gate, () => handled++)
  await app.listen({ port: 0, host: '127.0.0.1' })
  return {
    name: 'fastify',
    port: (app.server.address() as AddressInfo).port,
    handled: () => handled,
    close: () => app.close(),
  }
}

/**
 * The sidecar: the proxy built on the gate, in front of a real backend that
 * echoes what reached it (the user from the forwarded Authorization header,
 * the operation from the path).
 */
async function proxyEmbedding(gate: Gate): Promise<Embedding> {
  const backend = await startBackend((req, res, body) => {
    if (req.url === OTHER_PATH) {
      res.end('other')
      return
    }
    const document = JSON.parse(body.toString()) as { merchant: { entity: string } }
    const credentials = Buffer.from((req.headers.authorization as string).slice(6), 'base64').toString()
    const echo: Echo = {
      document,
      operation: req.url === SALE_PATH ? 'sale' : 'recurring',
      entity: document.merchant.entity,
      username: credentials.slice(0, credentials.indexOf(':')),
      requestId: req.headers['x-request-id'] as string | undefined,
    }
    res.writeHead(201, { 'content-type': 'application/json' })
    res.end(JSON.stringify(echo))
  })
  const gateway = createGateway({ checks: gate.checks, target: backend.url, logger: captureLogger() })
  const { port } = await gateway.listen(0, '127.0.0.1')
  return {
    name: 'proxy',
    port,
    handled: () => backend.received.length,
    close: async () => {
      await gateway.drain(0)
      await backend.close()
    },
  }
}

/**
 * One gate (`testGate`, with `options`) mounted in all four ways, each on its
 * own loopback port, and a keep-alive agent; all closed when the test ends.
 * The proxy runs with retry protection on (the default): a request that
 * passes with another body than an earlier one needs its own transactionReference.
 */
export async function everyEmbedding(
  t: Test,
  options: Partial<GateOptions> = {},
): Promise<{ gate: Gate; embeddings: Embedding[]; agent: Agent }> {
  const gate = await testGate(t, options)
  const embeddings = [
    await nodeEmbedding(gate),
    await expressEmbedding(gate),
    await fastifyEmbedding(gate),
    await proxyEmbedding(gate),
  ]
  t.teardown(async () => {
    for (const embedding of embeddings) await embedding.close()
  })
  return { gate, embeddings, agent: keepAliveAgent(t) }
}
