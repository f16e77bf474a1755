import type { IncomingHttpHeaders, IncomingMessage } from 'node:http'

/**
 * Adds `X-Forwarded-For`, `-Port`, `-Proto` (each appended, after a comma, to
 * what an earlier proxy put there) and `X-Forwarded-Host` (kept if already
 * there), to headers about to be forwarded: the values http-proxy's `xfwd`
 * option has always sent, now written once for both engines.
 */
export function addForwardedHeaders(headers: IncomingHttpHeaders, req: IncomingMessage): void {
  append(headers, 'x-forwarded-for', `${req.socket.remoteAddress}`)
  append(headers, 'x-forwarded-port', portOf(headers.host))
  // The gateway listens on plain HTTP (node:http); TLS, if any, ends before it.
  append(headers, 'x-forwarded-proto', 'http')
  headers['x-forwarded-host'] ||= headers.host ?? ''
}

function append(headers: IncomingHttpHeaders, name: string, value: string): void {
  const earlier = headers[name]
  headers[name] = earlier ? `${earlier},${value}` : value
}

/** The port the client addressed: the first `:digits` of its `Host`, else HTTP's default. */
function portOf(host: string | undefined): string {
  return host?.match(/:(\d+)/)?.[1] ?? '80'
}
