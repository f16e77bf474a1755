import type { IncomingHttpHeaders, IncomingMessage, OutgoingHttpHeaders } from 'node:http'

/**
 * RFC 9110 7.6.1: headers that describe one connection, not the message, and
 * so stop at a proxy; plus `Expect`, which the gateway answers itself, and
 * `Proxy-Authorization`, meant for this hop.
 */
const HOP_BY_HOP = new Set([
  'connection',
  'keep-alive',
  'proxy-connection',
  'proxy-authorization',
  'te',
  'trailer',
  'transfer-encoding',
  'upgrade',
  'expect',
])

/** The hop-by-hop names of a message: the fixed list and every name its `Connection` header lists. */
function dropped(connection: string | string[] | undefined): (name: string) => boolean {
  if (connection === undefined) return (name) => HOP_BY_HOP.has(name)
  const listed = new Set(String(connection).toLowerCase().split(',').map((name) => name.trim()))
  return (name) => HOP_BY_HOP.has(name) || listed.has(name)
}

/**
 * Removes the hop-by-hop headers of a request about to be forwarded, in place
 * (http-proxy-3 copies `req.headers` into the outgoing request). `framing`
 * keeps the body's own `Transfer-Encoding` for a body that is streamed on as
 * it came; a re-serialized body gets its `Content-Length` from the caller.
 */
export function dropRequestHopHeaders(headers: IncomingHttpHeaders, framing: boolean): void {
  const drop = dropped(headers.connection)
  const encoding = headers['transfer-encoding']
  for (const name of Object.keys(headers)) if (drop(name)) delete headers[name]
  if (framing && encoding !== undefined) headers['transfer-encoding'] = encoding
}

/**
 * The backend's response headers to send on: everything but the hop-by-hop
 * ones, each name with all of its values (`Set-Cookie` may repeat). The
 * backend's message is left as it is, because node's agent reads its
 * `Keep-Alive` hint to decide how long to keep the socket.
 */
export function responseHeaders(proxyRes: IncomingMessage): OutgoingHttpHeaders {
  const drop = dropped(proxyRes.headers.connection)
  const headers: OutgoingHttpHeaders = {}
  const distinct = proxyRes.headersDistinct
  for (const name of Object.keys(distinct)) {
    if (drop(name)) continue
    const values = distinct[name] as string[]
    headers[name] = values.length === 1 ? values[0] : values
  }
  return headers
}
