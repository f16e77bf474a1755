/** The clients of the tests: one HTTP sender, raw bytes on a socket, a bounded load run, and waiting. */
import { Agent, request, type IncomingHttpHeaders, type IncomingMessage, type OutgoingHttpHeaders } from 'node:http'
import { createRequire } from 'node:module'
import { connect, type Server } from 'node:net'
import { constants } from 'node:os'
import type { Options, Result, Run } from 'autocannon'
import type { Test } from 'tap'
import { AUTH, REQUEST_TYPE, RESPONSE_TYPE, SALE_PATH, saleBody } from './fixtures.js'

export interface Reply {
  readonly status: number
  readonly headers: IncomingHttpHeaders
  readonly body: Buffer
  /** The body as UTF-8 text. */
  readonly text: string
  /** The body parsed, when it is JSON. */
  readonly json: any
}

export interface SendOptions {
  /** POST unless given. */
  method?: string
  /** The sale's path unless given. */
  path?: string
  headers?: OutgoingHttpHeaders
  /** An object is sent as JSON. */
  body?: string | Buffer | object
  /** Send the body chunked, in two chunks, without Content-Length. */
  chunked?: boolean
}

/**
 * One request to `target` (a base URL, or a loopback port) and its whole
 * answer. Without an agent it goes on a fresh connection; with a keep-alive
 * agent, a `Connection: close` in the answer shows.
 */
export function send(target: string | number, options: SendOptions = {}, agent: Agent | false = false): Promise<Reply> {
  const base = typeof target === 'number' ? `http://127.0.0.1:${target}` : target
  const { body } = options
  const payload = body === undefined || typeof body === 'string' || Buffer.isBuffer(body) ? body : JSON.stringify(body)
  const headers = options.chunked === true ? { ...options.headers, 'transfer-encoding': 'chunked' } : options.headers
  return new Promise((resolve, reject) => {
    const req = request(
      `${base}${options.path ?? SALE_PATH}`,
      { method: options.method ?? 'POST', headers, agent },
      (res) => {
        const chunks: Buffer[] = []
        res.on('data', (chunk: Buffer) => chunks.push(chunk))
        res.on('error', reject)
        res.on('end', () => {
          const bytes = Buffer.concat(chunks)
          const text = bytes.toString('utf8')
          let json: unknown
          try {
            json = JSON.parse(text)
          } catch {
            json = undefined
          }
          resolve({ status: res.statusCode as number, headers: res.headers, body: bytes, text, json })
        })
      },
    )
    req.on('error', reject)
    if (options.chunked === true && payload !== undefined && payload.length > 0) {
      const bytes = Buffer.from(payload)
      const half = bytes.length >> 1
      req.write(bytes.subarray(0, half))
      req.end(bytes.subarray(half))
    } else req.end(payload)
  })
}

/** `send` over a few kept-alive connections, for many requests in a row; the connections close when the test ends. */
export function keepAliveSender(t: Test, base: string, maxSockets = 8): (options: SendOptions) => Promise<Reply> {
  const agent = new Agent({ keepAlive: true, maxSockets })
  t.teardown(() => agent.destroy())
  return (options) => send(base, options, agent)
}

/** A keep-alive agent, destroyed when the test ends. */
export function keepAliveAgent(t: Test): Agent {
  const agent = new Agent({ keepAlive: true })
  t.teardown(() => agent.destroy())
  return agent
}

/** The headers of a well-formed payment request. */
export function paymentHeaders(extra: OutgoingHttpHeaders = {}): OutgoingHttpHeaders {
  return { authorization: AUTH, 'content-type': REQUEST_TYPE, accept: RESPONSE_TYPE, ...extra }
}

/** A server whose `request` event gives each request (node's, Fastify's `app.server`). */
export interface RequestEmitter {
  once(event: 'request', listener: (req: IncomingMessage) => void): unknown
}

export interface RawOptions {
  /** Do not half-close after writing: the server decides when the connection ends. */
  keepOpen?: boolean
}

/** Writes raw bytes on a new connection and collects everything the server sends until the connection closes. */
export function raw(port: number, bytes: string | Buffer, options: RawOptions = {}): Promise<string> {
  return new Promise((resolve, reject) => {
    const socket = connect(port, '127.0.0.1')
    const chunks: Buffer[] = []
    socket.on('data', (chunk: Buffer) => chunks.push(chunk))
    socket.on('error', (error: NodeJS.ErrnoException) => (error.code === 'ECONNRESET' ? undefined : reject(error)))
    socket.on('close', () => resolve(Buffer.concat(chunks).toString('latin1')))
    socket.write(bytes)
    if (options.keepOpen !== true) socket.end()
  })
}

/**
 * Sends the head of a request and part of its declared body, and hangs up once `server` has the request (a hang-up
 * the server never saw begin proves nothing, and a loaded machine outruns any fixed delay); resolves once the
 * request closed on the server, and a turn of the event loop for what that settled.
 */
export async function abortMidBody(
  server: RequestEmitter,
  port: number,
  path: string,
  headers: Readonly<Record<string, string>>,
): Promise<void> {
  const lines = Object.entries({ ...headers, host: 'localhost', 'content-length': '1000' }).map(
    ([name, value]) => `${name}: ${value}`,
  )
  const socket = connect(port, '127.0.0.1')
  const req = await new Promise<IncomingMessage>((resolve, reject) => {
    server.once('request', resolve)
    socket.once('error', reject)
    socket.write(`POST ${path} HTTP/1.1\r\n${lines.join('\r\n')}\r\n\r\n{"transactionReference":`)
  })
  const closed = new Promise<void>((resolve) => req.once('close', () => setImmediate(resolve)))
  socket.destroy()
  await closed
}

/** A bounded autocannon run of valid sales: `duration` seconds at most (`stop()` ends it sooner), few connections. */
export function loadSales(url: string, duration: number, connections = 4): Run {
  const headers = { authorization: AUTH, 'content-type': REQUEST_TYPE, accept: RESPONSE_TYPE }
  // Loaded by the few load tests as they run, not at start by every file that imports this module.
  const autocannon = createRequire(import.meta.url)('autocannon') as (options: Options) => Run
  return autocannon({
    url,
    connections,
    duration,
    timeout: 5,
    requests: [{ method: 'POST', path: SALE_PATH, headers, body: JSON.stringify(saleBody()) }],
  })
}

/** How many answers had each status, e.g. `{ 201: 900, 503: 12 }`. */
export function statusCounts(result: Result): Record<string, number> {
  return Object.fromEntries(Object.entries(result.statusCodeStats).map(([status, { count }]) => [status, count]))
}

/**
 * An `accept` on `server`'s listening socket that fails with `code`, reported to node's net.Server as libuv reports
 * one (the negative errno, to the handle's `onconnection`): the kernel refuses one only for want of memory or by a
 * firewall's rule, which no test here can arrange.
 */
export function failAccept(server: Server, code: keyof typeof constants.errno): void {
  const handle = (server as unknown as { _handle: { onconnection(status: number): void } })._handle
  handle.onconnection(-constants.errno[code])
}

// Waiting, for the files that already import this module; a helper that needs nothing else imports wait.ts.
export { until, waitFor } from './wait.js'
