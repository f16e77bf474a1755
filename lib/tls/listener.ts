import type { IncomingMessage, Server, ServerOptions } from 'node:http'
import { createServer } from 'node:https'
import type { GatewayResponse } from '../proxy/exchange.js'
import type { TlsSource } from './files.js'
import { MIN_VERSION, type KeyPair } from './pem.js'

type GatewayServer = Server<typeof IncomingMessage, typeof GatewayResponse>

function contextOf(pair: KeyPair) {
  return { cert: pair.cert, key: pair.key, minVersion: MIN_VERSION } as const
}

/**
 * The gateway's server with TLS (docs/deployment-reference.md, TLS): HTTP/1.1 only
 * (ALPN `http/1.1`), TLS 1.2 at least, node's default ciphers. Each new pair
 * the source gives is set with `setSecureContext`: new connections get it,
 * open ones keep theirs. Plain HTTP sent to this port fails the handshake and
 * node closes the connection without an answer. The handshake must end within
 * the HTTP listener's header timeout (`headersTimeout`).
 */
export function createSecureServer(
  options: ServerOptions<typeof IncomingMessage, typeof GatewayResponse>,
  pair: TlsSource<KeyPair>,
): GatewayServer {
  const server = createServer({
    ...options,
    ...contextOf(pair.current),
    ALPNProtocols: ['http/1.1'],
    // A connection silent before its handshake is let go as soon as one silent before its headers on the
    // HTTP listener would be, not after node's 120 s (docs/deployment-reference.md, server limits).
    handshakeTimeout: options.headersTimeout,
  })
  // node's https server hands a failed handshake (its timeout included) to `clientError`, whose handler
  // answers in HTTP: on a connection without a finished handshake that write waits for a handshake that
  // never comes, and the connection stayed open. Nothing can be said on it: it is closed.
  server.removeAllListeners('tlsClientError')
  server.on('tlsClientError', (_error, socket) => socket.destroy())
  pair.onChange((next) => server.setSecureContext(contextOf(next)))
  return server
}
