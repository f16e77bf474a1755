import type { IncomingMessage } from 'node:http'
import type { Rejection } from './errors.js'
import type { Principal } from './checks/auth.js'
import type { Accepted, Checks } from './gate.js'
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

/**
 * The request's path through the checks, shared by the proxy and every
 * adapter: route, BasicAuth, headers, body, then everything on the body. The
 * cheap checks come first, so most bad requests are refused before their body
 * is read. `beforeBody` runs once the head has passed, right before the body
 * is read: the proxy answers `Expect: 100-continue` there, so that a refused
 * client never sends its body.
 */
export async function screen(checks: Checks, req: IncomingMessage, beforeBody?: () => void): Promise<Screened> {
  const operation = checks.route(req.method, req.url)
  if (operation === undefined) return undefined
  const unread = hasBody(req)
  if (typeof operation !== 'string') return refused(operation, unread)
  let principal = checks.authenticate(req.headers.authorization)
  if (principal instanceof Promise) principal = await principal
  if ('ok' in principal) return refused(principal, unread)
  const head = checks.checkHead(req.headers)
  if (head !== undefined) return refused(head, unread)
  beforeBody?.()
  const body = await readBody(req, checks.bodyLimit)
  if (body === ABORTED) return ABORTED
  if (!Buffer.isBuffer(body)) return refused(body, true)
  const verdict = checks.checkBody(operation, body, principal)
  return verdict.ok ? { ...verdict, principal } : refused(verdict, false)
}

/** A request with a body that nobody has read yet (RFC 9112 6.3: chunked, or a non-zero length). */
function hasBody(req: IncomingMessage): boolean {
  const length = req.headers['content-length']
  return req.headers['transfer-encoding'] !== undefined || (length !== undefined && length !== '0')
}
