import type { IncomingHttpHeaders, IncomingMessage } from 'node:http'
import type { TLSSocket } from 'node:tls'

/**
 * Adds `X-Forwarded-For`, `-Port`, `-Proto` (each appended, after a comma, to
 * what an earlier proxy put there) and `X-Forwarded-Host` (kept if already
 * there), to headers about to be forwarded: the values http-proxy's `xfwd`
 * option has always sent, now written once for both engines.
 */
export function addForwardedHeaders(headers: IncomingHttpHeaders, req: IncomingMessage): void {
  // With --tls-cert the gateway ends TLS itself (docs/deployment-reference.md, TLS).
  const secure = (req.socket as TLSSocket).encrypted === true
  append(headers, 'x-forwarded-for', `${req.socket.remoteAddress}`)
  append(headers, 'x-forwarded-port', portOf(headers.host ?? '', secure))
  append(headers, 'x-forwarded-proto', secure ? 'https' : 'http')
  headers['x-forwarded-host'] ||= headers.host ?? ''
}

function append(headers: IncomingHttpHeaders, name: string, value: string): void {
  const earlier = headers[name]
  headers[name] = earlier ? `${earlier},${value}` : value
}

/** A port's digits (RFC 3986 3.2.3). */
const PORT = /^[0-9]+$/

/**
 * The port the client addressed: the digits after the last colon of its `Host` (RFC 9110 7.2), unless that colon is
 * inside an IPv6 literal's brackets (RFC 3986 3.2.2: `[::1]:8443`, `[::1]`); else the scheme's default.
 */
function portOf(host: string, secure: boolean): string {
  const colon = host.lastIndexOf(':')
  if (colon !== -1 && colon > host.lastIndexOf(']')) {
    const port = host.slice(colon + 1)
    if (PORT.test(port)) return port
  }
  return secure ? '443' : '80'
}

/**
 * The client's address for the log line. Behind `trustedHops` proxies, each of
 * which appends the address it was called from to `X-Forwarded-For`, it is the
 * entry the farthest of them added: the Nth counted from the right. Entries
 * further left came with the request into that proxy, so any client can forge
 * them; the leftmost is taken only when it is that Nth one. A header with fewer
 * entries did not pass every trusted hop, and the connection's peer is logged.
 */
export function clientAddress(req: IncomingMessage, trustedHops: number): string | undefined {
  const peer = req.socket.remoteAddress
  if (trustedHops === 0) return peer
  // node joins repeated X-Forwarded-For lines into one string, with ", ".
  const header = req.headers['x-forwarded-for'] as string | undefined
  if (header === undefined) return peer
  let end = header.length
  for (let hop = 1; hop < trustedHops; hop++) {
    end = header.lastIndexOf(',', end - 1)
    if (end === -1) return peer
  }
  const start = header.lastIndexOf(',', end - 1) + 1
  return header.slice(start, end).trim() || peer
}
