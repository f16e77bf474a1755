import type { IncomingMessage, ServerResponse } from 'node:http'
import type { Readable } from 'node:stream'
import type { Rejection } from './errors.js'
import type { Principal } from './checks/auth.js'
import type { Accepted, Checks } from './gate.js'
import type { Operation } from './schema/payment.js'
import { ABORTED, readBody } from './read-body.js'

/** A request that passed every check, with who sent it. */
export interface Passed extends Accepted {
  readonly principal: Principal
}

/**
 * What the screening of one request decided: `undefined` for a path that is
 * not one of the two operations (pass it through untouched), ABORTED when the
 * client left mid-body, a refusal (with `close` when its body was not read to
 * the end), or the request that passed.
 */
export type Screened = Passed | Refused | typeof ABORTED | undefined

export interface Refused {
  readonly ok: false
  readonly rejection: Rejection
  /** The request's body was not read to its end: close the connection after answering. */
  readonly close: boolean
}

function refused(rejection: Rejection, close: boolean): Refused {
  return { ok: false, rejection, close }
}

/** A request whose route, credentials and headers passed: its body comes next. */
export interface Admitted {
  readonly ok: true
  readonly operation: Operation
  readonly principal: Principal
}

/**
 * The request's path through the checks, shared by the proxy and every
 * adapter: route, BasicAuth, headers, body, then everything on the body. The
 * cheap checks come first, so most bad requests are refused before their body
 * is read. `beforeBody` runs once the head has passed, right before the body
 * is read: the proxy answers `Expect: 100-continue` there, so that a refused
 * client never sends its body.
 */
export async function screen(checks: Checks, req: IncomingMessage, beforeBody?: () => void): Promise<Screened> {
  const head = await screenHead(checks, req)
  if (head === undefined || !head.ok) return head
  beforeBody?.()
  return screenBody(checks, req, head)
}

/**
 * The first half of `screen`, everything decided before the body is read:
 * route, BasicAuth, headers. For hosts that read the body themselves later
 * (Fastify's content-type parser).
 */
export async function screenHead(checks: Checks, req: IncomingMessage): Promise<Admitted | Refused | undefined> {
  const operation = checks.route(req.method, req.url)
  if (operation === undefined) return undefined
  const unread = hasBody(req)
  if (typeof operation !== 'string') return refused(operation, unread)
  let principal = checks.authenticate(req.headers.authorization)
  if (principal instanceof Promise) principal = await principal
  if ('ok' in principal) return refused(principal, unread)
  const head = checks.checkHead(req.headers)
  if (head !== undefined) return refused(head, unread)
  return { ok: true, operation, principal }
}

/** The second half of `screen`: reads the body of an admitted request and runs checks 5 to 13 on it. */
export async function screenBody(checks: Checks, body: Readable, admitted: Admitted): Promise<Passed | Refused | typeof ABORTED> {
  const bytes = await readBody(body, checks.bodyLimit)
  if (bytes === ABORTED) return ABORTED
  if (!Buffer.isBuffer(bytes)) return refused(bytes, true)
  const verdict = checks.checkBody(admitted.operation, bytes, admitted.principal)
  return verdict.ok ? { ...verdict, principal: admitted.principal } : refused(verdict, false)
}

/** A request with a body that nobody has read yet (RFC 9112 6.3: chunked, or a non-zero length). */
function hasBody(req: IncomingMessage): boolean {
  const length = req.headers['content-length']
  return req.headers['transfer-encoding'] !== undefined || (length !== undefined && length !== '0')
}

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
