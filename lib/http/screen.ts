import type { IncomingMessage } from 'node:http'
import type { Readable } from 'node:stream'
import type { Principal } from '../checks/auth.js'
import type { Checks, Entitled, Reported, Verdict } from '../checks/index.js'
import { routeFor } from '../checks/route.js'
import { closing, type Rejection } from '../errors.js'
import type { Mode } from '../policy/policy.js'
import type { Admission, RateLimiter } from '../rate-limit/limiter.js'
import type { Operation } from '../schema/payment.js'
import { ABORTED, readBody } from './read-body.js'

/**
 * What the screening of one request decided: the verdict of the checks (a
 * refusal with `close` when its body was not read to the end), `undefined`
 * for a path that is not one of the two operations (pass it through
 * untouched), or ABORTED when the client left mid-body.
 */
export type Screened = Verdict | typeof ABORTED | undefined

/** A request whose route, credentials and headers passed: its body comes next. */
export interface Admitted {
  readonly ok: true
  readonly operation: Operation
  readonly principal: Principal
  /** The request's mode until its entity is known (docs/rollout.md). */
  readonly mode: Mode
  /** In report mode, the refusal of its `Accept`, or of a JSON type as its `Content-Type`, held until the entity's mode is known. */
  readonly refused: Rejection | undefined
}

/**
 * The request's path through the checks, shared by the proxy and every
 * adapter: route, BasicAuth, headers, body, then everything on the body. The
 * cheap checks come first, so most bad requests are refused before their body
 * is read. `beforeBody` runs once the head has passed, right before the body
 * is read: the proxy answers `Expect: 100-continue` there, so that a refused
 * client never sends its body. `operation` is the operation of the request's
 * target (`checks.targetOf(req.url)`), or its refusal, looked up once by the
 * caller: the proxy labels its logs and metrics with it too.
 * `client` is the client's address where the caller can trust it, for check 1 (`Authenticator`).
 */
export function screen(
  checks: Checks,
  req: IncomingMessage,
  operation: Operation | Rejection | undefined,
  beforeBody?: () => void,
  mode?: Mode,
  client?: string,
): Promise<Screened>
/**
 * With `upTo` `entitled`, an enforce-mode request that passed check 9 comes back `Entitled`, its policy
 * not yet applied: the proxy looks its key up first (docs/idempotency.md), then runs `checks.checkPolicy`.
 */
export function screen(
  checks: Checks,
  req: IncomingMessage,
  operation: Operation | Rejection | undefined,
  beforeBody: (() => void) | undefined,
  mode: Mode,
  client: string | undefined,
  upTo: 'entitled',
): Promise<Entitled | Reported | Rejection | typeof ABORTED | undefined>
export async function screen(
  checks: Checks,
  req: IncomingMessage,
  operation: Operation | Rejection | undefined,
  beforeBody?: () => void,
  mode = checks.mode,
  client?: string,
  upTo?: 'entitled',
): Promise<Screened | Entitled> {
  const head = await screenHead(checks, req, operation, mode, client)
  if (head === undefined || head.ok !== true) return head
  beforeBody?.()
  return screenBody(checks, req, head, upTo)
}

/**
 * The first half of `screen`, everything decided before the body is read:
 * route, BasicAuth, headers. For hosts that read the body themselves later
 * (Fastify's content-type parser). `operationOfPath` as `screen` takes it.
 * In report mode a refused `Accept`, or a JSON type other than the v6 type,
 * is held until the body names its entity; a wrong method, a declared length
 * over the limit, or a head that changes how the body is read (another
 * `Content-Type` or charset, `Content-Encoding`, `Connection`) gets enforce's
 * answer (docs/rollout.md, `checks.holdable`).
 */
export async function screenHead(
  checks: Checks,
  req: IncomingMessage,
  operationOfPath: Operation | Rejection | undefined,
  mode = checks.mode,
  client?: string,
): Promise<Admitted | Rejection | undefined> {
  const unread = hasBody(req)
  // A target that is not one is refused in either mode: nobody could say which path it is reported for.
  if (typeof operationOfPath === 'object') return refused(operationOfPath, unread)
  const operation = routeFor(req.method, operationOfPath)
  if (operation === undefined) return undefined
  if (typeof operation !== 'string') return refused(operation, unread)
  let principal = checks.authenticate(req.headers.authorization, client)
  if (principal instanceof Promise) principal = await principal
  if ('ok' in principal) return refused(principal, unread)
  const head = checks.checkHead(req.headers)
  if (head !== undefined && (mode === 'enforce' || !checks.holdable(req.headers))) return refused(head, unread)
  return { ok: true, operation, principal, mode, refused: head }
}

/** The second half of `screen`: reads the body of an admitted request and runs checks 5 to 13 on it. */
export function screenBody(checks: Checks, body: Readable, admitted: Admitted): Promise<Verdict | typeof ABORTED>
/** With `upTo` `entitled`, checks 5 to 9 only, as `screen` says. */
export function screenBody(
  checks: Checks,
  body: Readable,
  admitted: Admitted,
  upTo: 'entitled' | undefined,
): Promise<Verdict | Entitled | typeof ABORTED>
export async function screenBody(
  checks: Checks,
  body: Readable,
  admitted: Admitted,
  upTo?: 'entitled',
): Promise<Verdict | Entitled | typeof ABORTED> {
  const bytes = await readBody(body, checks.bodyLimit)
  if (bytes === ABORTED) return ABORTED
  // Enforce's answer in both modes: a body past the limit names no entity (docs/rollout.md).
  if (!Buffer.isBuffer(bytes)) return closing(admitted.refused ?? bytes)
  if (upTo === 'entitled')
    return checks.checkEntitled(admitted.operation, bytes, admitted.principal, admitted.mode, admitted.refused)
  const verdict = checks.checkBody(admitted.operation, bytes, admitted.principal, admitted.mode, admitted.refused)
  const limiter = checks.rateLimiter
  return limiter === undefined ? verdict : limited(limiter, verdict)
}

/**
 * The middleware's rate limit (docs/middleware.md, rate limits): a payment that passed every check is counted,
 * and over its entity's limit refused 429 before the handler; in report mode counted and, over the limit,
 * reported as what enforce mode would refuse. A caller that asks for `entitled` (retry protection's look-up
 * first) counts after that look-up itself (proxy/rate-limits.ts, surfaces/retry-protection.ts).
 */
export async function limited(limiter: RateLimiter, verdict: Verdict): Promise<Verdict> {
  if (verdict.ok === false || verdict.policy?.rateLimit === undefined) return verdict
  const admission = (await limiter.admit(verdict.entity, verdict.policy)) as Admission
  if (admission.outcome === 'admitted' || admission.outcome === 'unchecked') return verdict
  if (verdict.ok === true) return admission.rejection
  return admission.outcome === 'limited'
    ? { ...verdict, wouldRefuse: admission.rejection, document: undefined }
    : verdict
}

function refused(rejection: Rejection, unread: boolean): Rejection {
  return unread ? closing(rejection) : rejection
}

/** A request with a body that nobody has read yet (RFC 9112 6.3: chunked, or a non-zero length). */
function hasBody(req: IncomingMessage): boolean {
  const length = req.headers['content-length']
  return req.headers['transfer-encoding'] !== undefined || (length !== undefined && length !== '0')
}
