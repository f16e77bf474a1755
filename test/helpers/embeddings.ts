import { Agent, createServer, request, type IncomingHttpHeaders, type IncomingMessage, type Server } from 'node:http'
import { connect } from 'node:net'
import type { AddressInfo } from 'node:net'
import express from 'express'
import Fastify, { type FastifyInstance, type FastifyRequest } from 'fastify'
import type { Gate } from '../../lib/gate.js'
import { createGateway } from '../../lib/surfaces/proxy/server.js'
import { startBackend } from './backend.js'
import { captureLogger } from './gateway.js'
import { OTHER_PATH, RECURRING_PATH, SALE_PATH, type Case } from './cases.js'

/** What the test applications answer on a pass: what they were handed. */
export interface Echo {
  document: unknown
  operation: string
  entity: string
  username: string
}

export interface Embedding {
  readonly name: string
  readonly port: number
  close(): Promise<void>
}

function listen(server: Server): Promise<number> {
  return new Promise((resolve) => server.listen(0, '127.0.0.1', () => resolve((server.address() as AddressInfo).port)))
}

function closer(server: Server): () => Promise<void> {
  return () => new Promise((resolve) => {
    server.closeAllConnections()
    server.close(() => resolve())
  })
}

export async function nodeEmbedding(gate: Gate): Promise<Embedding> {
  const server = createServer(
    gate.handler((_req, res, passed) => {
      if (passed === undefined) {
        res.end('other')
        return
      }
      const echo: Echo = { document: passed.document, operation: passed.operation, entity: passed.entity, username: passed.principal?.username as string }
      res.statusCode = 201
      res.setHeader('content-type', 'application/json')
      res.end(JSON.stringify(echo))
    }),
  )
  return { name: 'node', port: await listen(server), close: closer(server) }
}

export async function expressEmbedding(gate: Gate): Promise<Embedding> {
  const app = express()
  app.use(gate.express())
  app.post([SALE_PATH, RECURRING_PATH], (req, res) => {
    const context = req.paymentsGate
    const echo: Echo = { document: req.body, operation: context!.operation, entity: context!.entity, username: context!.principal.username }
    res.status(201).json(echo)
  })
  app.get(OTHER_PATH, (_req, res) => {
    res.send('other')
  })
  app.use(gate.expressErrorHandler())
  const server = createServer(app)
  return { name: 'express', port: await listen(server), close: closer(server) }
}

export async function fastifyApp(gate: Gate): Promise<FastifyInstance> {
  const app = Fastify()
  await app.register(gate.fastify)
  app.post(SALE_PATH, async (request, reply) => reply.code(201).send(echoOf(request)))
  app.post(RECURRING_PATH, async (request, reply) => reply.code(201).send(echoOf(request)))
  app.get(OTHER_PATH, async () => 'other')
  return app
}

function echoOf(request: FastifyRequest): Echo {
  const context = request.paymentsGate!
  return { document: request.body, operation: context.operation, entity: context.entity, username: context.principal.username }
}

export async function fastifyEmbedding(gate: Gate): Promise<Embedding> {
  const app = await fastifyApp(gate)
  await app.listen({ port: 0, host: '127.0.0.1' })
  return { name: 'fastify', port: (app.server.address() as AddressInfo).port, close: () => app.close() }
}

/**
 * The sidecar: the proxy built on the gate's checks, in front of a real
 * backend that echoes what reached it (the user from the forwarded
 * Authorization header, the operation from the path).
 */
export async function proxyEmbedding(gate: Gate): Promise<Embedding> {
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
    }
    res.writeHead(201, { 'content-type': 'application/json' })
    res.end(JSON.stringify(echo))
  })
  const gateway = createGateway({ gate, target: backend.url, logger: captureLogger() })
  const { port } = await gateway.listen(0, '127.0.0.1')
  return {
    name: 'proxy',
    port,
    close: async () => {
      await gateway.drain(0)
      await backend.close()
    },
  }
}

export interface Answer {
  readonly status: number
  readonly headers: IncomingHttpHeaders
  readonly body: Buffer
}

/** Sends one case over a real connection; the agent keeps connections alive, so `Connection: close` shows. */
export function send(port: number, c: Pick<Case, 'method' | 'path' | 'headers' | 'body' | 'chunked'>, agent: Agent): Promise<Answer> {
  return new Promise((resolve, reject) => {
    const headers: Record<string, string | number> = { ...c.headers }
    if (c.body !== undefined && c.chunked !== true) headers['content-length'] = Buffer.byteLength(c.body)
    if (c.chunked === true) headers['transfer-encoding'] = 'chunked'
    const req = request({ host: '127.0.0.1', port, method: c.method, path: c.path, headers, agent }, (res) => {
      const chunks: Buffer[] = []
      res.on('data', (chunk: Buffer) => chunks.push(chunk))
      res.on('end', () => resolve({ status: res.statusCode as number, headers: res.headers, body: Buffer.concat(chunks) }))
      res.on('error', reject)
    })
    req.on('error', reject)
    if (c.body !== undefined && c.body.length > 0) {
      const body = Buffer.from(c.body)
      const half = body.length >> 1
      if (c.chunked === true) req.write(body.subarray(0, half))
      req.end(c.chunked === true ? body.subarray(half) : body)
    } else {
      req.end()
    }
  })
}

/** Sends the head of a request and part of its declared body, then hangs up. */
export function abortMidBody(port: number, path: string, headers: Readonly<Record<string, string>>): Promise<void> {
  return new Promise((resolve) => {
    const socket = connect(port, '127.0.0.1', () => {
      const lines = Object.entries({ ...headers, host: 'localhost', 'content-length': '1000' }).map(([name, value]) => `${name}: ${value}`)
      socket.write(`POST ${path} HTTP/1.1\r\n${lines.join('\r\n')}\r\n\r\n{"transactionReference":`)
      setTimeout(() => socket.destroy(), 20)
    })
    socket.on('close', () => resolve())
  })
}

/** A request's `close` on the server, and a turn of the event loop for what it settled. */
export function closedOnServer(server: { once(event: 'request', listener: (req: IncomingMessage) => void): unknown }): Promise<void> {
  return new Promise((resolve) => server.once('request', (req) => req.once('close', () => setImmediate(resolve))))
}
