import { INTERNAL_ERROR, SERVICE_UNAVAILABLE, type Rejection } from '../errors.js'
import type { BackendErrorKind } from '../metrics.js'

/** How a call to the backend failed. */
export type FaultKind = Exclude<BackendErrorKind, 'serverError'>

/**
 * Which failure an error code means on a path passed through (node's
 * sockets, http-proxy-3). `refused`: raised before a connection exists, so
 * nothing was sent; a backend certificate that fails verification is one,
 * since node checks it before the request is written (docs/backend-faults.md,
 * TLS to the backend). `timeout`: the backend stayed silent past `--timeout`.
 * Any other code, once connected, is a `reset`, an unreachable host reported
 * by an open connection included (CONNECT_ONLY).
 */
const FAULTS = new Map<string, FaultKind>([
  ['ECONNREFUSED', 'refused'],
  ['ENOTFOUND', 'refused'],
  ['EAI_AGAIN', 'refused'],
  ['EHOSTUNREACH', 'refused'],
  ['ENETUNREACH', 'refused'],
  ['UND_ERR_CONNECT_TIMEOUT', 'refused'],
  ['UNABLE_TO_VERIFY_LEAF_SIGNATURE', 'refused'],
  ['UNABLE_TO_GET_ISSUER_CERT_LOCALLY', 'refused'],
  ['SELF_SIGNED_CERT_IN_CHAIN', 'refused'],
  ['DEPTH_ZERO_SELF_SIGNED_CERT', 'refused'],
  ['CERT_HAS_EXPIRED', 'refused'],
  ['CERT_NOT_YET_VALID', 'refused'],
  ['ERR_TLS_CERT_ALTNAME_INVALID', 'refused'],
  ['EBACKENDTIMEOUT', 'timeout'],
  ['UND_ERR_HEADERS_TIMEOUT', 'timeout'],
  ['UND_ERR_BODY_TIMEOUT', 'timeout'],
])

/**
 * Codes that say nothing was sent only when connecting raised them (`syscall` `connect`): the same code
 * from a read or a write on an open connection comes after the request may have gone out.
 */
const CONNECT_ONLY = new Set(['ECONNREFUSED', 'EHOSTUNREACH', 'ENETUNREACH'])

/** Which failure it was on a path passed through (docs/backend-faults.md). */
export function faultKind(error: Error): FaultKind {
  const { code, syscall } = error as NodeJS.ErrnoException
  if (code === undefined) return 'reset'
  if (CONNECT_ONLY.has(code) && syscall !== 'connect') return 'reset'
  return FAULTS.get(code) ?? 'reset'
}

/**
 * Which failure it was for a payment, by when it came, not by its code
 * (docs/backend-faults.md, at most once): before undici handed the request
 * to a socket nothing was written, so any error is `refused`, a TLS
 * certificate the gateway refuses included; after it the backend may have
 * the payment, so an error is a `timeout` or a `reset`, whatever its code
 * (an unreachable host reported by an open connection, a client certificate
 * refused after a TLS 1.3 handshake).
 */
export function paymentFault(error: Error, written: boolean): FaultKind {
  if (!written) return 'refused'
  return faultKind(error) === 'timeout' ? 'timeout' : 'reset'
}

/**
 * The answer to a failed backend: 503 when it could not be reached (the
 * payment certainly did not happen, the client may retry), 500 when it may
 * have been received (timeout, reset), so the client must not assume either.
 */
export function faultAnswer(kind: FaultKind): Rejection {
  return kind === 'refused' ? SERVICE_UNAVAILABLE : INTERNAL_ERROR
}
