import { reject, type Rejection } from '../../errors.js'
import type { BackendErrorKind } from '../../metrics.js'

/** The backend did not answer within `--timeout` (the pass-through engine's own timer). */
export class BackendTimeout extends Error {
  readonly code = 'EBACKENDTIMEOUT'
  constructor(ms: number) {
    super(`the backend did not answer within ${ms} ms`)
  }
}

/** How a call to the backend failed. */
export type FaultKind = Exclude<BackendErrorKind, 'serverError'>

/**
 * Which failure an error code means, for both engines (node's sockets for
 * the pass-through, undici for payments). `refused`: raised before a
 * connection exists, so nothing was sent. `timeout`: the backend stayed
 * silent past `--timeout`. Any other code, once connected, is a `reset`.
 */
const FAULTS = new Map<string, FaultKind>([
  ['ECONNREFUSED', 'refused'],
  ['ENOTFOUND', 'refused'],
  ['EAI_AGAIN', 'refused'],
  ['EHOSTUNREACH', 'refused'],
  ['ENETUNREACH', 'refused'],
  ['UND_ERR_CONNECT_TIMEOUT', 'refused'],
  ['EBACKENDTIMEOUT', 'timeout'],
  ['UND_ERR_HEADERS_TIMEOUT', 'timeout'],
  ['UND_ERR_BODY_TIMEOUT', 'timeout'],
])

/** Which failure it was (docs/backend-faults.md). */
export function faultKind(error: Error): FaultKind {
  const code = (error as NodeJS.ErrnoException).code
  return (code === undefined ? undefined : FAULTS.get(code)) ?? 'reset'
}

const SERVICE_UNAVAILABLE = reject('serviceUnavailable')
const INTERNAL_ERROR = reject('internalErrorOccurred')

/**
 * The answer to a failed backend: 503 when it could not be reached (the
 * payment certainly did not happen, the client may retry), 500 when it may
 * have been received (timeout, reset), so the client must not assume either.
 */
export function faultAnswer(kind: FaultKind): Rejection {
  return kind === 'refused' ? SERVICE_UNAVAILABLE : INTERNAL_ERROR
}

/**
 * What a backend 5xx becomes: `undefined` when its body (read up to a limit;
 * `undefined` past it) is in the error format and goes on as it is; else the
 * standard body with the backend's status, keeping its `Retry-After`, which
 * still tells the client when to come back.
 */
export function serverErrorReplacement(status: number, body: Buffer | undefined, retryAfter: string | undefined): Rejection | undefined {
  if (body !== undefined && isErrorFormat(body)) return undefined
  const headers = retryAfter === undefined ? undefined : { 'Retry-After': retryAfter }
  return reject(status === 503 ? 'serviceUnavailable' : 'internalErrorOccurred', { status, headers })
}

/** The error format: a JSON object with string `errorName` and `message`. */
function isErrorFormat(body: Buffer): boolean {
  let parsed: unknown
  try {
    parsed = JSON.parse(body.toString('utf8'))
  } catch {
    return false
  }
  if (typeof parsed !== 'object' || parsed === null) return false
  const { errorName, message } = parsed as Record<string, unknown>
  return typeof errorName === 'string' && typeof message === 'string'
}
