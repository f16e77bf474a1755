import { INTERNAL_ERROR, SERVICE_UNAVAILABLE, type Rejection } from '../errors.js'
import type { BackendErrorKind } from '../metrics.js'

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

/**
 * The answer to a failed backend: 503 when it could not be reached (the
 * payment certainly did not happen, the client may retry), 500 when it may
 * have been received (timeout, reset), so the client must not assume either.
 */
export function faultAnswer(kind: FaultKind): Rejection {
  return kind === 'refused' ? SERVICE_UNAVAILABLE : INTERNAL_ERROR
}
