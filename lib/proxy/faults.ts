import { INTERNAL_ERROR, reject, SERVICE_UNAVAILABLE, type Rejection } from '../errors.js'
import type { BackendErrorKind } from '../metrics.js'
import type { Exchange } from './exchange.js'

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
 * What a retry of a payment gets: this answer again (`replayed`: retry protection recorded it), or a
 * second forward (`forwarded`: report mode, `--idempotency off`, a store that failed with failure `open`).
 */
export type Retries = 'replayed' | 'forwarded'

/** What a retry of this payment gets: its answer is recorded only under a claim. */
export function retriesOf(exchange: Pick<Exchange, 'retryProtection'>): Retries {
  return exchange.retryProtection === 'claimed' ? 'replayed' : 'forwarded'
}

/** An end after the payment was written: the backend may have processed it. */
type Unknown = Exclude<BackendErrorKind, 'refused'>

const LOST: Readonly<Record<Unknown, string>> = {
  timeout:
    'The outcome of this payment is unknown: it was sent to the backend, which did not answer in time, so it may have been processed.',
  reset:
    'The outcome of this payment is unknown: it was sent to the backend, and the connection broke before its answer came, so it may have been processed.',
  serverError:
    'The outcome of this payment is unknown: the backend answered it with a server error, so it may have been processed.',
}

const NEXT: Readonly<Record<Retries, string>> = {
  replayed:
    "It is not sent again: retries with this transactionReference get this answer while retry protection keeps it. Ask the backend for the payment's status, and pay again under a new transactionReference only if it says the payment did not happen.",
  forwarded:
    "Ask the backend for the payment's status before sending it again: this gateway forwards a retry to the backend again, and a new transactionReference makes a new payment.",
}

/**
 * The messages of a payment whose outcome is unknown, by how it ended and by what a retry gets: each
 * says so and how to learn the outcome (docs/backend-faults.md), where "Retry later" would send the
 * client to a new transactionReference once its retries kept getting the same 500.
 */
const UNKNOWN_OUTCOME: Readonly<Record<Unknown, Readonly<Record<Retries, string>>>> = {
  timeout: { replayed: `${LOST.timeout} ${NEXT.replayed}`, forwarded: `${LOST.timeout} ${NEXT.forwarded}` },
  reset: { replayed: `${LOST.reset} ${NEXT.replayed}`, forwarded: `${LOST.reset} ${NEXT.forwarded}` },
  serverError: { replayed: `${LOST.serverError} ${NEXT.replayed}`, forwarded: `${LOST.serverError} ${NEXT.forwarded}` },
}

const unknownOutcome = (kind: 'timeout' | 'reset', retries: Retries) =>
  Object.freeze(reject('internalErrorOccurred', { message: UNKNOWN_OUTCOME[kind][retries] }))

const UNKNOWN_FAULT: Readonly<Record<'timeout' | 'reset', Readonly<Record<Retries, Rejection>>>> = {
  timeout: { replayed: unknownOutcome('timeout', 'replayed'), forwarded: unknownOutcome('timeout', 'forwarded') },
  reset: { replayed: unknownOutcome('reset', 'replayed'), forwarded: unknownOutcome('reset', 'forwarded') },
}

/**
 * The answer to a failed backend: 503 when it could not be reached (the
 * payment certainly did not happen, the client may retry), 500 when it may
 * have been received (timeout, reset), so the client must not assume either.
 * For a payment (`retries` given) that 500 says its outcome is unknown and
 * what a retry gets; a path passed through gets the table's.
 */
export function faultAnswer(kind: FaultKind, retries?: Retries): Rejection {
  if (kind === 'refused') return SERVICE_UNAVAILABLE
  return retries === undefined ? INTERNAL_ERROR : UNKNOWN_FAULT[kind][retries]
}

/**
 * The message of a payment's 5xx answer whose body is replaced by the standard one under
 * `internalErrorOccurred` (backend-answer.ts, no rule naming it): its outcome is unknown too.
 */
export function serverErrorMessage(retries: Retries): string {
  return UNKNOWN_OUTCOME.serverError[retries]
}
