import { Agent, type ClientRequest, type IncomingMessage } from 'node:http'
import type { Stream } from 'node:stream'
import { createProxyServer } from 'http-proxy-3'
import { sendRejection } from '../../http/answer.js'
import type { Exchange, GatewayResponse } from './exchange.js'
import { BackendTimeout, faultAnswer, faultKind } from './faults.js'
import { forwardedRequestHeaders } from './hop-by-hop.js'
import { relay } from './relay.js'

/** What became of a forwarded payment, as the client got it. */
export type BackendOutcome =
  | { readonly kind: 'answered'; readonly status: number; readonly headers: readonly string[]; readonly body: Buffer | undefined }
  | { readonly kind: 'refused' | 'timeout' | 'reset' }

export interface ForwarderOptions {
  /** The backend, an `http:` URL; its path, if any, is put in front of the request's. */
  target: URL
  /** How long the backend may stay silent, in ms. */
  timeout: number
  /** Most connections open to the backend at once; further requests wait for one. */
  maxSockets?: number
  /** Largest 5xx body read to see whether it is in the error format. */
  errorBodyLimit?: number
}

export interface Forwarder {
  /**
   * Sends a request to the backend once and relays its answer. With `payload`,
   * that is the body sent (the validated document); without, the request's own
   * body is streamed as it comes.
   */
  forward(req: IncomingMessage, res: GatewayResponse, payload?: Buffer): void
  /** Closes the idle connections to the backend. */
  close(): void
}

/**
 * Node closes an idle keep-alive connection after 5 s by default; letting ours
 * go after 4 s keeps the gateway from sending a payment on a socket the
 * backend is closing at that moment (which would be a reset, a 500, and no retry).
 */
const IDLE_SOCKET_MS = 4000

export function createForwarder(options: ForwarderOptions): Forwarder {
  const { timeout } = options
  const errorBodyLimit = options.errorBodyLimit ?? 65536
  // One bounded keep-alive pool: without it every request opens a connection
  // (about 4x slower) and the backend's `Connection: close` reaches clients.
  const agent = new Agent({ keepAlive: true, maxSockets: options.maxSockets ?? 256, timeout: IDLE_SOCKET_MS, scheduling: 'lifo' })
  const proxy = createProxyServer({ target: options.target, agent, xfwd: true, selfHandleResponse: true })
  // Called as the request's own `timeout` listener: one function for every request.
  function onBackendTimeout(this: ClientRequest): void {
    this.destroy(new BackendTimeout(timeout))
  }

  proxy.on('proxyReq', (proxyReq) => {
    proxyReq.setTimeout(timeout, onBackendTimeout)
  })
  proxy.on('proxyRes', (proxyRes, _req, res) => {
    relay(proxyRes, res, (res as GatewayResponse).exchange as Exchange, errorBodyLimit)
  })
  // http-proxy-3 throws on an error nobody listens to. The request is never
  // sent again: a payment reaches the backend at most once.
  proxy.on('error', (error, _req, res) => {
    const exchange = (res as GatewayResponse).exchange as Exchange
    const kind = faultKind(error)
    exchange.backendError = kind
    const answer = faultAnswer(kind)
    exchange.errorName = answer.body.errorName
    sendRejection(res as GatewayResponse, answer)
  })

  return {
    forward(req, res, payload) {
      const headers = forwardedRequestHeaders(req.headers, payload === undefined)
      if (payload === undefined) {
        req.headers = headers
        proxy.web(req, res)
        return
      }
      headers['content-length'] = String(payload.length)
      req.headers = headers
      proxy.web(req, res, { buffer: bodyOf(payload) })
    },
    close: () => agent.destroy(),
  }
}

/**
 * http-proxy-3 sends its `buffer` option with `buffer.pipe(proxyReq)`. A
 * stream made with `Readable.from` costs about 1.5x the CPU of this: one
 * `end()` with the whole body, which also lets node send it with the headers.
 */
function bodyOf(payload: Buffer): Stream {
  return { pipe: (destination: NodeJS.WritableStream) => destination.end(payload) } as unknown as Stream
}
