import { createServer, type Server, type ServerResponse } from 'node:http'
import type { AddressInfo } from 'node:net'
import type { Registry } from 'prom-client'
import { ADMIN_DEFAULTS } from './defaults.js'
import { listen } from './http/listen.js'

export interface AdminOptions {
  /** Whether the gateway should get traffic: policies loaded, listening, not draining. */
  ready: () => boolean
  /** The Prometheus text of the metrics (one registry, or the aggregate of every worker). */
  metrics: () => Promise<string>
  contentType?: string
  /** Told of a connection the listener could not accept (lib/http/listen.ts); it goes on listening. */
  onAcceptError: (error: Error) => void
}

export interface Admin {
  readonly server: Server
  listen(port: number, host?: string): Promise<AddressInfo>
  close(): Promise<void>
}

/**
 * The `--admin` listener, apart from the gateway's port so that probes and
 * scrapes never count as payments traffic: `/healthz` (the process runs),
 * `/readyz` (send traffic), `/metrics`. Its timeouts are short and its
 * connections capped (docs/deployment-reference.md, health).
 */
export function createAdmin(options: AdminOptions): Admin {
  const { headersTimeout, requestTimeout, keepAliveTimeout, timeoutCheckInterval, maxConnections } = ADMIN_DEFAULTS
  const limits = { headersTimeout, requestTimeout, keepAliveTimeout, connectionsCheckingInterval: timeoutCheckInterval }
  const server = createServer(limits, (req, res) => {
    // A probe or a scrape reads: a POST or a DELETE is nobody's probe (RFC 9110 15.5.6).
    if (req.method !== 'GET' && req.method !== 'HEAD')
      return text(res.setHeader('allow', 'GET, HEAD'), 405, 'GET or HEAD only\n')
    const path = (req.url as string).split('?')[0]
    if (path === '/healthz') return text(res, 200, 'ok\n')
    if (path === '/readyz') return options.ready() ? text(res, 200, 'ready\n') : text(res, 503, 'not ready\n')
    if (path !== '/metrics') return text(res, 404, 'not found\n')
    options.metrics().then(
      (body) => text(res, 200, body, options.contentType),
      (error: Error) => text(res, 500, `${error.message}\n`),
    )
  })
  server.maxConnections = maxConnections
  return {
    server,
    listen: (port, host) => listen(server, port, host, options.onAcceptError),
    close: () =>
      new Promise((resolve) => {
        server.close(() => resolve())
        server.closeAllConnections()
      }),
  }
}

function text(res: ServerResponse, status: number, body: string, contentType = 'text/plain; charset=utf-8'): void {
  res.writeHead(status, { 'content-type': contentType, 'content-length': Buffer.byteLength(body) })
  res.end(body)
}

/** The admin's metrics from one registry. */
export function metricsOf(registry: Registry): Pick<AdminOptions, 'metrics' | 'contentType'> {
  return { metrics: () => registry.metrics(), contentType: registry.contentType }
}
