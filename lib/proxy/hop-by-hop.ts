import type { IncomingHttpHeaders } from 'node:http'
import { connectionOptions } from '../checks/headers.js'

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

function isHopByHop(name: string, listed: Set<string> | undefined): boolean {
  return HOP_BY_HOP.has(name) || (listed !== undefined && listed.has(name))
}

/**
 * The headers of a request about to be forwarded, without the hop-by-hop
 * ones. A new object rather than deletes in place: deleting turns node's
 * header object into a slow dictionary, and http-proxy-3 copies and walks it
 * on every request. `framing` keeps the body's own `Transfer-Encoding`, for a
 * body streamed on as it came; a re-serialized body gets its
 * `Content-Length` from the caller.
 */
export function forwardedRequestHeaders(headers: IncomingHttpHeaders, framing: boolean): IncomingHttpHeaders {
  const listed = connectionOptions(headers.connection)
  const kept: IncomingHttpHeaders = {}
  for (const name of Object.keys(headers)) {
    if (!isHopByHop(name, listed) || (framing && name === 'transfer-encoding')) kept[name] = headers[name]
  }
  return kept
}

/**
 * A response's headers to send on, as a flat raw list (name, value, name,
 * value...): everything but the hop-by-hop ones, each header as often and as
 * spelt as the backend sent it (`Set-Cookie` may repeat). With `bodyLength`,
 * the backend's `Content-Length` is replaced by it; with `noContent` (a 204),
 * dropped, as RFC 9110 8.6 forbids it there. The list is read, never
 * changed: the backend's `Keep-Alive` hint in it still tells the client
 * engine how long to keep the connection. The backend's `X-Request-Id` is
 * left out: the gateway's own goes on every answer (exchange.ts).
 */
export function relayedHeaders(raw: readonly string[], bodyLength?: number, noContent = false): string[] {
  const listed = connectionOptions(connectionOf(raw))
  const lengthDropped = noContent || bodyLength !== undefined
  const headers: string[] = []
  for (let i = 0; i < raw.length; i += 2) {
    const name = raw[i] as string
    const lower = name.toLowerCase()
    if (isHopByHop(lower, listed) || lower === 'x-request-id' || (lengthDropped && lower === 'content-length')) continue
    headers.push(name, raw[i + 1] as string)
  }
  if (bodyLength !== undefined) headers.push('content-length', String(bodyLength))
  return headers
}

/** The `Connection` header of a raw list, its repeats joined as node joins them. */
function connectionOf(raw: readonly string[]): string | undefined {
  let value: string | undefined
  for (let i = 0; i < raw.length; i += 2) {
    const name = raw[i] as string
    if (name.length !== 10 || name.toLowerCase() !== 'connection') continue
    value = value === undefined ? raw[i + 1] : `${value}, ${raw[i + 1]}`
  }
  return value
}
