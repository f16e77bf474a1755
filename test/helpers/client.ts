import { Agent, request, type IncomingHttpHeaders, type OutgoingHttpHeaders } from 'node:http'
import { connect } from 'node:net'
import type { Test } from 'tap'
import { ACCEPT, CONTENT_TYPE, SALE_PATH } from './payments.js'
import { AUTH } from './gateway.js'

export interface Reply {
  readonly status: number
  readonly headers: IncomingHttpHeaders
  readonly text: string
  readonly json: any
}

export interface SendOptions {
  method?: string
  path?: string
  headers?: OutgoingHttpHeaders
  body?: string | Buffer | object
}

/** One request on a fresh connection; the body as text, and parsed when it is JSON. */
export function send(base: string, options: SendOptions = {}, agent: Agent | false = false): Promise<Reply> {
  const { body } = options
  const payload = body === undefined || typeof body === 'string' || Buffer.isBuffer(body) ? body : JSON.stringify(body)
  return new Promise((resolve, reject) => {
    const req = request(`${base}${options.path ?? SALE_PATH}`, { method: options.method ?? 'POST', headers: options.headers, agent }, (res) => {
      const chunks: Buffer[] = []
      res.on('data', (chunk: Buffer) => chunks.push(chunk))
      res.on('error', reject)
      res.on('end', () => {
        const text = Buffer.concat(chunks).toString('utf8')
        let json: unknown
        try {
          json = JSON.parse(text)
        } catch {
          json = undefined
        }
        resolve({ status: res.statusCode as number, headers: res.headers, text, json })
      })
    })
    req.on('error', reject)
    req.end(payload)
  })
}

/** `send` over a few kept-alive connections, for many requests in a row; the connections close when the test ends. */
export function keepAliveSender(t: Test, base: string, maxSockets = 8): (options: SendOptions) => Promise<Reply> {
  const agent = new Agent({ keepAlive: true, maxSockets })
  t.teardown(() => agent.destroy())
  return (options) => send(base, options, agent)
}

/** The headers of a well-formed payment request. */
export function paymentHeaders(extra: OutgoingHttpHeaders = {}): OutgoingHttpHeaders {
  return { authorization: AUTH, 'content-type': CONTENT_TYPE, accept: ACCEPT, ...extra }
}

/** Writes raw bytes on a new connection and collects everything the server sends until it closes. */
export function raw(port: number, bytes: string | Buffer, options: { keepOpen?: boolean } = {}): Promise<string> {
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
