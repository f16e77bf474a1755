import { reject, type Rejection } from '../../errors.js'
import type { BackendErrorKind } from '../../metrics.js'

/** The backend did not answer within `--timeout`. */
export class BackendTimeout extends Error {
  readonly code = 'EBACKENDTIMEOUT'
  constructor(ms: number) {
    super(`the backend did not answer within ${ms} ms`)
  }
}

/** Errors raised before a connection exists: nothing was sent, the backend is not there. */
const CANNOT_CONNECT = new Set(['ECONNREFUSED', 'ENOTFOUND', 'EAI_AGAIN', 'EHOSTUNREACH', 'ENETUNREACH'])

/** Which failure it was (docs/backend-faults.md). */
export function faultKind(error: Error): BackendErrorKind {
  if (error instanceof BackendTimeout) return 'timeout'
  const code = (error as NodeJS.ErrnoException).code
  return code !== undefined && CANNOT_CONNECT.has(code) ? 'refused' : 'reset'
}

const SERVICE_UNAVAILABLE = reject('serviceUnavailable')
const INTERNAL_ERROR = reject('internalErrorOccurred')

/**
 * The answer to a failed backend: 503 when it could not be reached (the
 * payment certainly did not happen, the client may retry), 500 when it may
 * have been received (timeout, reset), so the client must not assume either.
 */
export function faultAnswer(kind: BackendErrorKind): Rejection {
  return kind === 'refused' ? SERVICE_UNAVAILABLE : INTERNAL_ERROR
}

/** The standard body for a backend 5xx whose own body is not in the error format, with its status. */
export function standardServerError(status: number): Rejection {
  return reject(status === 503 ? 'serviceUnavailable' : 'internalErrorOccurred', { status })
}

/** The error format: a JSON object with string `errorName` and `message`. */
export function isErrorFormat(body: Buffer): boolean {
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
