import type { ServerResponse } from 'node:http'

/**
 * Pipelining (RFC 9112 9.6): node parses a request while the answers before
 * it on its connection are still being worked on, and queues its response
 * without a socket. `handle` runs when the request's turn comes. After an
 * answer that closed the connection (a refusal with `Connection: close`) the
 * turn never comes, or, for a request parsed from a later read, comes with a
 * socket already ending: either way the request is dropped unhandled.
 * Handling it anyway would forward, or hand the application, a payment whose
 * answer can never be sent, and its client would send it again.
 */
export function inTurn(res: ServerResponse, handle: () => void): void {
  const socket = res.socket
  if (socket === null) res.once('socket', () => inTurn(res, handle))
  else if (!socket.writableEnded && !socket.destroyed) handle()
}
