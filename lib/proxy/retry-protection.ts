import cluster from 'node:cluster'
import type { IncomingMessage } from 'node:http'
import type { Checks, Entitled, Passed } from '../checks/index.js'
import { IDEMPOTENCY_DEFAULTS } from '../defaults.js'
import { reject, type Rejection } from '../errors.js'
import { answerOf, flatHeaders, writeAnswer, type Answer } from '../http/answer.js'
import { canonicalJson } from '../idempotency/canonical.js'
import { createIdempotencyStore } from '../idempotency/create-store.js'
import type { MemoryStoreReport } from '../idempotency/memory.js'
import type { ClusterMetrics } from '../idempotency/redis-cluster.js'
import { CodedError } from '../coded-error.js'
import {
  checkFingerprintKeys,
  createFingerprinter,
  processFingerprintKeys,
  type Fingerprinter,
} from '../idempotency/fingerprint.js'
import { idempotencyKey } from '../idempotency/key.js'
import { RedisIdempotencyStore } from '../idempotency/redis.js'
import { redisTarget } from '../idempotency/redis-client.js'
import type { Claim, IdempotencyStore, Peek, RecordedAnswer } from '../idempotency/store.js'
import type { Metrics, RetryProtectionOutcome } from '../metrics.js'
import type { PaymentRequest } from '../schema/payment.js'
import type { Exchange, GatewayResponse } from './exchange.js'
import { faultAnswer } from './faults.js'
import type { BackendOutcome, Forwarder } from './forward.js'
import { admitted, guardWithLimit, rateLimiterOf, SHED } from './rate-limits.js'
import type { Admission, RateLimiter } from '../rate-limit/limiter.js'

/** Retry protection's settings, the same as `payments-gate serve`'s (docs/idempotency.md). */
export interface RetryProtectionOptions {
  /**
   * `memory` (this process, the default), `off`, a Redis shared by every
   * replica (`redis://HOST:PORT[/DB]`, `redis-sentinel://HOST:PORT[,...][/DB]#MASTER`,
   * `redis-cluster://HOST:PORT[,...]`; `rediss://`, `rediss-sentinel://`,
   * `rediss-cluster://` over TLS), or your own store. A gateway built from a gate
   * with retry protection (`createGate`'s `idempotency`) and given none of its own uses the gate's.
   */
  idempotency?: 'memory' | 'off' | string | IdempotencyStore
  /** The Redis password, in place of one in the URL (`--idempotency-password-file`). */
  idempotencyPassword?: string
  /** A PEM bundle the certificate of a TLS Redis (`rediss://`, `rediss-sentinel://`) is verified against (`--idempotency-ca`). */
  idempotencyCaBundle?: Buffer
  /** How long a recorded answer is replayed, in seconds. Default 86400. */
  idempotencyTtl?: number
  /** When the store cannot be reached: `closed` refuses with 503 (the default), `open` forwards unprotected. */
  idempotencyFailure?: 'closed' | 'open'
  /** Redis replicas that must acknowledge a claim or a record (`WAIT`). Default 0. */
  idempotencyReplicas?: number
  /** Told of every failure of the store (the gateway logs and counts them). */
  onStoreError?: (error: unknown) => void
  /** The memory store's bounds: most keys (default 1000000) and most bytes (default 64 MiB). */
  idempotencyMaxEntries?: number
  idempotencyMaxBytes?: number
  /** Told of the memory store's evictions and how far back it remembers (the gateway logs and exports them). */
  idempotencyReport?: MemoryStoreReport
  /** Told of a Redis Cluster store's redirections, node errors and slots (the gateway exports them). Default: the gateway's `metrics`. */
  idempotencyClusterMetrics?: ClusterMetrics
  /**
   * The fingerprints' HMAC key the fleet shares, at least 32 bytes; during a rotation two, the current one
   * first (docs/idempotency.md). Required with a Redis store; without one, a store of this process gets a
   * random key of its own.
   */
  idempotencyFingerprintKey?: Buffer | readonly Buffer[]
}

/** A claimed key: what `settle` needs to record or release it once the backend's outcome is known. */
export interface Ticket {
  readonly key: string
  readonly token: string
}

/**
 * A payment as retry protection sees it: a request that passed checks 1 to 9, its key, and the bytes
 * its fingerprint is of (docs/idempotency.md, the key and the fingerprint).
 */
export interface ProtectedPayment {
  readonly operation: string
  readonly entity: string
  readonly transactionReference: string
  /** The document as received, in its canonical form (member order not counted); hashed as UTF-8. */
  readonly received: string
  /**
   * The document as forwarded, what a gateway of before this fingerprint took: asked only for a record of
   * before the upgrade, still live for its TTL.
   */
  readonly asForwarded: () => string
}

/** What retry protection decided for one payment that passed checks 1 to 9 (docs/idempotency.md). */
export type Guard =
  /** Forward it; settle the ticket with the outcome. No ticket: forward unprotected (the store failed, failure `open`). */
  (
    | { readonly kind: 'forward'; readonly ticket: Ticket | undefined }
    /** Answer this refusal: 409 in flight, 422 another payment, 503 the store failed (failure `closed`) or holds a key this gateway does not. */
    | { readonly kind: 'refuse'; readonly rejection: Rejection }
    /** Replay the recorded answer. */
    | { readonly kind: 'replay'; readonly answer: RecordedAnswer }
  ) & {
    /** The decision, as the log line and the metrics name it. */
    readonly outcome: RetryProtectionOutcome
  }

/** Retry protection around one store: guard before forwarding, settle after. */
export interface RetryProtection {
  guard(payment: ProtectedPayment): Guard | Promise<Guard>
  /** Records or releases the ticket's key as the outcome says; store failures go to `onStoreError`, never thrown. */
  settle(ticket: Ticket, outcome: BackendOutcome): void
  /**
   * What `guard` would decide, from a read-only look at the store (report mode, docs/rollout.md);
   * undefined when the store cannot look without claiming.
   */
  inspect(payment: ProtectedPayment): RetryProtectionOutcome | Promise<RetryProtectionOutcome> | undefined
  close(): Promise<void>
}

const UNPROTECTED: Guard = Object.freeze({ kind: 'forward', ticket: undefined, outcome: 'unprotected' })
const IN_PROGRESS: Guard = Object.freeze({
  kind: 'refuse',
  rejection: reject('paymentIsInProgress', {
    headers: { 'Retry-After': String(IDEMPOTENCY_DEFAULTS.retryAfterSeconds) },
  }),
  outcome: 'inProgress',
})
const ALREADY_USED: Guard = Object.freeze({
  kind: 'refuse',
  rejection: reject('transactionReferenceIsAlreadyUsed'),
  outcome: 'alreadyUsed',
})
const STORE_UNAVAILABLE: Guard = Object.freeze({
  kind: 'refuse',
  rejection: reject('serviceUnavailable', {
    message: 'Retry protection is unavailable, so the payment was not forwarded. Retry later.',
  }),
  outcome: 'storeUnavailable',
})
/**
 * A record under a fingerprint key this gateway does not hold (a rotation under way): neither the same
 * payment nor another as far as it can tell. A 422 would tell the client of a charged payment to pay
 * again, a forward would charge it twice; a 503 with `Retry-After` is what clients already retry with the
 * same reference, and a gateway that holds the key answers the retry (docs/idempotency-reference.md, keyed fingerprints).
 */
const UNKNOWN_KEY: Guard = Object.freeze({
  kind: 'refuse',
  rejection: reject('serviceUnavailable', {
    message:
      'This transactionReference was recorded under a fingerprint key this gateway does not hold (a key rotation is under way), so it cannot tell whether this is the same payment. Nothing was forwarded. Retry with the same transactionReference after the time given in Retry-After.',
    headers: { 'Retry-After': String(IDEMPOTENCY_DEFAULTS.retryAfterSeconds) },
  }),
  outcome: 'unknownKey',
})

/** A refusal as an answer to record: what the client got. */
function recorded(answer: Answer): RecordedAnswer {
  return { status: answer.status, headers: flatHeaders(answer), body: answer.body }
}

/**
 * Recorded instead of a backend answer too large to keep: the backend answered, and the answer cannot be
 * replayed, so the retry of that payment gets a 500 that says so (its outcome is unknown to the client, as
 * after a timeout), never a 422 that would send it to a new reference; another payment still gets the 422.
 */
export const OVERSIZED_ANSWER = recorded(
  answerOf(
    reject('internalErrorOccurred', {
      message:
        "The backend answered this payment, but its answer was too large to keep, so it cannot be replayed. It is not sent again: ask the backend for the payment's status, and pay again under a new transactionReference only if it says the payment did not happen.",
    }),
  ),
)

/** A payment its policy refused after its claim, or whose handler never started: never forwarded, so its key is released. */
export const NOT_FORWARDED: BackendOutcome = Object.freeze({ kind: 'refused' })

/** What the client got when the backend timed out or reset after the write (answer-fault.ts): what its retries get. */
const UNKNOWN_OUTCOME: Readonly<Record<'timeout' | 'reset', RecordedAnswer>> = {
  timeout: recorded(answerOf(faultAnswer('timeout', 'replayed'))),
  reset: recorded(answerOf(faultAnswer('reset', 'replayed'))),
}

/**
 * What a claim past its in-flight window answers: the gateway that forwarded
 * it may have died after the backend received it, so its outcome is unknown,
 * as after a timeout, and it is never forwarded again (docs/idempotency.md).
 */
export const UNKNOWN_ANSWER = recorded(
  answerOf(
    reject('internalErrorOccurred', {
      message:
        'The outcome of this payment is unknown: it may have reached the backend, so it is not forwarded again. Check its status with the backend, and pay again under a new transactionReference only if it says the payment did not happen.',
    }),
  ),
)

/**
 * What a retry gets after this outcome, or undefined when the outcome frees the key: the backend
 * refused the request (4xx: the client fixes it and retries), said it is unavailable (503), or was
 * never reached. Anything else may have moved money, so it is recorded and replayed, never forwarded
 * again: the backend's answer as the client got it (`oversized` when the forwarder did not keep its
 * body), or the unknown outcome of a timeout or a reset. The middleware's handlers are settled by this
 * same table (docs/middleware.md, retry protection).
 */
function retryAnswer(outcome: BackendOutcome, oversized: RecordedAnswer): RecordedAnswer | undefined {
  switch (outcome.kind) {
    case 'refused':
      return undefined
    case 'answered': {
      const { status, headers, body } = outcome
      if ((status >= 400 && status < 500) || status === 503) return undefined
      return body === undefined ? oversized : { status, headers, body }
    }
    default:
      return UNKNOWN_OUTCOME[outcome.kind]
  }
}

/** What `guard` decides on each answer of the store, as `peek` gives it. */
const WOULD: Readonly<Record<Peek, RetryProtectionOutcome>> = {
  free: 'claimed',
  inFlight: 'inProgress',
  recorded: 'replayed',
  mismatch: 'alreadyUsed',
  unknownKey: 'unknownKey',
}
const would = (peek: Peek) => WOULD[peek]

/** The settings `createRetryProtection` reads: the store's failure mode, its errors, the fingerprints' keys. */
export interface ProtectionSettings extends Pick<
  RetryProtectionOptions,
  'idempotencyFailure' | 'onStoreError' | 'idempotencyFingerprintKey'
> {
  /** What a retry gets of an answer kept without its body (too large to keep). Default `OVERSIZED_ANSWER`, the proxy's words. */
  readonly oversizedAnswer?: RecordedAnswer
}

export function createRetryProtection(store: IdempotencyStore, options: ProtectionSettings = {}): RetryProtection {
  const failOpen = options.idempotencyFailure === 'open'
  const oversized = options.oversizedAnswer ?? OVERSIZED_ANSWER
  const onStoreError = options.onStoreError
  const fingerprinter: Fingerprinter = createFingerprinter(
    options.idempotencyFingerprintKey === undefined
      ? processFingerprintKeys()
      : checkFingerprintKeys(options.idempotencyFingerprintKey),
  )
  /** The payment's fingerprint; before keyed fingerprints a gateway took the SHA-256 of the document it forwarded. */
  const fingerprintOf = (payment: ProtectedPayment) =>
    fingerprinter.of(payment.operation, payment.received, () => [payment.asForwarded()])
  const keyOf = (payment: ProtectedPayment) => idempotencyKey(payment.entity, payment.transactionReference)

  function decide(key: string, claim: Claim): Guard {
    switch (claim.state) {
      case 'claimed':
        return { kind: 'forward', ticket: { key, token: claim.token }, outcome: 'claimed' }
      case 'inFlight':
        return IN_PROGRESS
      case 'mismatch':
        return ALREADY_USED
      case 'unknownKey':
        return UNKNOWN_KEY
      default:
        return { kind: 'replay', answer: claim.answer, outcome: 'replayed' }
    }
  }

  function failed(error: unknown): Guard {
    onStoreError?.(error)
    return failOpen ? UNPROTECTED : STORE_UNAVAILABLE
  }

  function settled(result: void | Promise<void>): void {
    if (result instanceof Promise) result.catch(failedQuietly)
  }
  const failedQuietly = (error: unknown) => onStoreError?.(error)

  return {
    guard(payment) {
      const key = keyOf(payment)
      let claim: Claim | Promise<Claim>
      try {
        const print = fingerprintOf(payment)
        claim = store.claim(key, print.value, print.matches)
      } catch (error) {
        return failed(error)
      }
      return claim instanceof Promise ? claim.then((found) => decide(key, found), failed) : decide(key, claim)
    },
    settle(ticket, outcome) {
      try {
        const kept = retryAnswer(outcome, oversized)
        settled(
          kept === undefined ? store.release(ticket.key, ticket.token) : store.record(ticket.key, ticket.token, kept),
        )
      } catch (error) {
        failedQuietly(error)
      }
    },
    inspect(payment) {
      if (store.peek === undefined) return undefined
      let peek: Peek | Promise<Peek>
      try {
        const print = fingerprintOf(payment)
        peek = store.peek(keyOf(payment), print.value, print.matches)
      } catch (error) {
        return failed(error).outcome
      }
      return peek instanceof Promise ? peek.then(would, (error: unknown) => failed(error).outcome) : would(peek)
    },
    close: () => store.close(),
  }
}

/**
 * A recorded answer, sent again as it was, marked as a replay (the IETF draft
 * "The Idempotency-Key HTTP Header Field"; docs/idempotency.md).
 */
function replay(res: GatewayResponse, answer: RecordedAnswer): void {
  res.writeHead(answer.status, [...answer.headers, 'Idempotent-Replayed', 'true'])
  res.end(answer.body)
}

/** The rest of the checks on a payment that passed check 9: its entity's policy and the rewrites (`Checks.checkPolicy`). */
export type PolicyCheck = (entitled: Entitled) => Passed | Rejection

/** The document a payment that passed every check forwards: the rewritten one. */
const payloadOf = (passed: Passed) => Buffer.from(JSON.stringify(passed.document))

/**
 * A payment as retry protection sees it, from the document as it came (parsed) and the document as
 * forwarded: the canonical form of the first is taken now, before the policy rewrites the document in
 * place; the second is read only for a record of before the upgrade.
 */
export function protectedPayment(
  operation: string,
  entity: string,
  received: unknown,
  forwarded: PaymentRequest,
): ProtectedPayment {
  return {
    operation,
    entity,
    transactionReference: forwarded.transactionReference,
    received: canonicalJson(received),
    asForwarded: () => JSON.stringify(forwarded),
  }
}

/** Refuses a payment at the in-flight cap (lib/proxy/server.ts). */
export type Shed = (res: GatewayResponse, exchange: Exchange, entity: string) => void

/** The proxy's payments: each forwarded once, under retry protection unless it is off. */
export interface Payments {
  /**
   * Answers a payment that passed check 9 from retry protection (a replay, whatever its policy says now),
   * or runs `checkPolicy` on it and forwards it or answers the refusal. `shed`: the in-flight cap has no
   * place for it (docs/deployment-reference.md, backend protection): a payment retry protection knows
   * gets what its retry always gets, any other is handed to `shed`, its claim released.
   */
  forward(
    req: IncomingMessage,
    res: GatewayResponse,
    exchange: Exchange,
    entitled: Entitled,
    checkPolicy: PolicyCheck,
    shed?: Shed,
  ): void | Promise<void>
  /** What retry protection would do with the payment (report mode); undefined when it is off or cannot look. */
  inspect(payment: ProtectedPayment): ReturnType<RetryProtection['inspect']>
  /** The rate limit, counted in the store's backend (docs/policies.md, rate limit). */
  readonly rateLimiter: RateLimiter
  /** Resolves true once the store answers (at once for memory), false after `timeoutMs`; never rejects. */
  ready(timeoutMs?: number): Promise<boolean>
  /** Closes the store. */
  close(): Promise<void>
}

export interface PaymentsOptions extends RetryProtectionOptions {
  /**
   * How long the backend may stay silent, in ms, and how long a payment may wait for a connection to it:
   * a claim holds its key for three times this plus a margin (docs/idempotency-reference.md, the in-flight window).
   */
  readonly timeout: number
  readonly metrics: Metrics | undefined
}

/**
 * How long a payment may take with backend timeout `timeout` (ms), and so how long its claim holds its key: the wait
 * for a connection (never longer: payment-relay.ts), the headers, a gap in the body, and the margin to record the
 * answer (docs/idempotency-reference.md, the in-flight window). A drain waits as long (docs/deployment-reference.md, stopping).
 */
export function inFlightWindowMs(timeout: number): number {
  return 3 * timeout + IDEMPOTENCY_DEFAULTS.inFlightMarginMs
}

/** What a store built for retry protection holds a claim for, and the words of what it records in an answer's stead. */
export interface StoreSettings {
  /** The in-flight window, in ms: past it, a claim with neither a record nor a release is the unknown outcome. */
  readonly inFlightMs: number
  /** Recorded in place of an answer too large to keep. */
  readonly oversizedAnswer: RecordedAnswer
  /** What a claim past its window answers. */
  readonly unknownAnswer: RecordedAnswer
}

/**
 * The store `idempotency` names, with the proxy's settings (undefined when
 * `off`), or the store given. Throws the one-line `EIDEMPOTENCY` error for a
 * store spec it does not take. `payments-gate serve` builds it before the
 * gate, so that a Redis store's client also carries the login throttle.
 */
export function createRetryStore(options: Omit<PaymentsOptions, 'metrics'>): IdempotencyStore | undefined {
  return retryStoreOf(options.idempotency ?? IDEMPOTENCY_DEFAULTS.store, options, {
    inFlightMs: inFlightWindowMs(options.timeout),
    oversizedAnswer: OVERSIZED_ANSWER,
    unknownAnswer: UNKNOWN_ANSWER,
  })
}

/**
 * The store `idempotency` names, built with `settings` (undefined when `off`), or the store given: the one
 * way the proxy and the middleware (`createGate`) get theirs, through `createIdempotencyStore`.
 */
export function retryStoreOf(
  idempotency: NonNullable<RetryProtectionOptions['idempotency']>,
  options: RetryProtectionOptions,
  settings: StoreSettings,
): IdempotencyStore | undefined {
  const shared =
    idempotency instanceof RedisIdempotencyStore ||
    (typeof idempotency === 'string' && redisTarget(idempotency) !== undefined)
  // Each gateway's own random key would make every retry that lands on another gateway a 422.
  if (shared && options.idempotencyFingerprintKey === undefined)
    throw new CodedError(
      'EFINGERPRINTKEY',
      (name) =>
        `${name('idempotencyFingerprintKey')} must be given with a Redis store: every gateway sharing it fingerprints payments with the same key`,
    )
  // Only a Redis store waits for replicas: elsewhere the setting would promise a copy that no write makes.
  if (!shared && (options.idempotencyReplicas ?? 0) > 0)
    throw new CodedError(
      'EIDEMPOTENCY',
      (name) =>
        `${name('idempotencyReplicas')} ${options.idempotencyReplicas} needs a Redis store in ${name('idempotency')}: only Redis has replicas to wait for`,
    )
  if (typeof idempotency !== 'string') return idempotency
  // As `serve --workers` with memory (cli/workers.ts): node:cluster's workers, PM2's cluster mode among them, share a port.
  if (idempotency === 'memory' && cluster.isWorker)
    throw new CodedError(
      'EIDEMPOTENCY',
      (name) =>
        `${name('idempotency')} memory in a cluster worker (node:cluster, PM2's cluster mode): each worker would keep its own store and run a retry again; give ${name('idempotency')} a Redis URL that every worker shares (or off)`,
    )
  return createIdempotencyStore(idempotency, {
    ttlMs: (options.idempotencyTtl ?? IDEMPOTENCY_DEFAULTS.ttlSeconds) * 1000,
    ...settings,
    replicas: options.idempotencyReplicas,
    maxEntries: options.idempotencyMaxEntries,
    maxBytes: options.idempotencyMaxBytes,
    report: options.idempotencyReport,
    clusterMetrics: options.idempotencyClusterMetrics,
    onError: options.onStoreError,
    password: options.idempotencyPassword,
    ca: options.idempotencyCaBundle,
  })
}

/** A gate's retry protection (`createGate`'s `idempotency`), lent to a gateway built from the gate's checks. */
export interface LentProtection {
  readonly protection: RetryProtection
  readonly store: IdempotencyStore
  /** The gate's in-flight window, in ms. */
  readonly inFlightMs: number
}

/** The retry protection of each gate that has one, by the gate's checks: what `createGateway` is given of a gate. */
const LENT = new WeakMap<Checks, LentProtection>()

/**
 * Lends a gate's retry protection to every gateway built from its checks, so that one store, one client,
 * one fingerprint key and one failure mode protect every payment the process takes (docs/middleware.md).
 */
export function lendRetryProtection(checks: Checks, lent: LentProtection): void {
  LENT.set(checks, lent)
}

/**
 * The retry protection a gateway on `checks` runs: its own `idempotency` when given, else the gate's that
 * built the checks, else none (undefined: `createPayments` builds the default). Throws `EIDEMPOTENCY` when the
 * gate's window is shorter than the gateway's: a payment still with the backend would be told its
 * outcome is unknown, and its client could pay again.
 */
export function lentRetryProtection(
  checks: Checks,
  options: Pick<RetryProtectionOptions, 'idempotency'> & { readonly timeout: number },
): LentProtection | undefined {
  const lent = options.idempotency === undefined ? LENT.get(checks) : undefined
  const needed = inFlightWindowMs(options.timeout)
  if (lent !== undefined && lent.inFlightMs < needed)
    throw new CodedError(
      'EIDEMPOTENCY',
      `the gate's idempotencyInFlight (${lent.inFlightMs / 1000} s) is shorter than this gateway's in-flight window (3 x timeout + 5 s = ${needed / 1000} s): raise it, or give the gateway an idempotency of its own`,
    )
  return lent
}

/**
 * Retry protection as the proxy runs it around the forwarder: the store
 * `idempotency` names (or the gate's, `lent`), a claim before each payment is forwarded, its outcome
 * recorded or its key released after. Throws the one-line `EIDEMPOTENCY`
 * error for a store spec it does not take.
 */
export function createPayments(
  forwarder: Pick<Forwarder, 'forward'>,
  options: PaymentsOptions,
  lent?: LentProtection,
): Payments {
  const { metrics } = options
  const store =
    lent === undefined
      ? createRetryStore({ ...options, idempotencyClusterMetrics: options.idempotencyClusterMetrics ?? metrics })
      : lent.store
  const protection = lent === undefined ? store && createRetryProtection(store, options) : lent.protection
  const rateLimiter = rateLimiterOf(store, { failure: options.idempotencyFailure, onError: options.onStoreError })

  async function guarded(
    req: IncomingMessage,
    res: GatewayResponse,
    exchange: Exchange,
    pending: Promise<Guard>,
    verdict: Passed | Rejection,
  ): Promise<void> {
    act(req, res, exchange, await pending, verdict)
  }

  /**
   * At the in-flight cap: the look-up decides, so that a retry of a payment at the backend or answered gets
   * its 409 or its replay, never "not forwarded, retry". Neither the policy nor the rate limit runs.
   */
  function shedding(
    req: IncomingMessage,
    res: GatewayResponse,
    exchange: Exchange,
    entitled: Entitled,
    shed: Shed,
  ): void | Promise<void> {
    const { operation, entity, document } = entitled
    if (protection === undefined) return shed(res, exchange, entity)
    const guard = protection.guard(protectedPayment(operation, entity, document, document))
    if (guard instanceof Promise) return guard.then((found) => actShed(req, res, exchange, found, entity, shed))
    actShed(req, res, exchange, guard, entity, shed)
  }

  function actShed(
    req: IncomingMessage,
    res: GatewayResponse,
    exchange: Exchange,
    guard: Guard,
    entity: string,
    shed: Shed,
  ): void {
    if (guard.kind !== 'forward') return act(req, res, exchange, guard, SHED)
    // Nothing is recorded under its key: the claim made to look is freed at once.
    if (guard.ticket !== undefined) (protection as RetryProtection).settle(guard.ticket, NOT_FORWARDED)
    shed(res, exchange, entity)
  }

  function refuse(res: GatewayResponse, exchange: Exchange, rejection: Rejection): void {
    exchange.errorName = rejection.body.errorName
    writeAnswer(res, answerOf(rejection))
  }

  function act(
    req: IncomingMessage,
    res: GatewayResponse,
    exchange: Exchange,
    guard: Guard,
    verdict: Passed | Rejection,
  ): void {
    if (guard.kind === 'forward' && verdict.ok !== true) {
      // Its policy refuses it, and nothing is recorded under its key: the claim made to look is freed at once.
      if (guard.ticket !== undefined) (protection as RetryProtection).settle(guard.ticket, NOT_FORWARDED)
      refuse(res, exchange, verdict)
      return
    }
    exchange.retryProtection = guard.outcome
    metrics?.retryProtection(guard.outcome)
    if (guard.kind === 'forward') {
      const { ticket } = guard
      forwarder.forward(
        req,
        res,
        payloadOf(verdict as Passed),
        ticket && ((outcome) => (protection as RetryProtection).settle(ticket, outcome)),
      )
    } else if (guard.kind === 'replay') {
      replay(res, guard.answer)
    } else {
      refuse(res, exchange, guard.rejection)
    }
  }

  /** A payment of an entity with a rate limit: counted after retry protection's look-up, before its claim. */
  async function limited(
    req: IncomingMessage,
    res: GatewayResponse,
    exchange: Exchange,
    entitled: Entitled,
    checkPolicy: PolicyCheck,
  ): Promise<void> {
    const { operation, entity, document, policy } = entitled
    if (protection === undefined) {
      const verdict = checkPolicy(entitled)
      if (!verdict.ok) return refuse(res, exchange, verdict)
      // The policy has a rate limit: admit decides.
      const admission = (await rateLimiter.admit(entity, policy)) as Admission
      if (admitted(res, exchange, entity, admission, metrics)) forwarder.forward(req, res, payloadOf(verdict))
      return
    }
    const payment = protectedPayment(operation, entity, document, document)
    const verdict = checkPolicy(entitled)
    const { guard, admission } = await guardWithLimit(protection, rateLimiter, payment, policy, verdict.ok)
    if (admission !== undefined && !admitted(res, exchange, entity, admission, metrics)) return
    act(req, res, exchange, guard as Guard, verdict)
  }

  return {
    forward(req, res, exchange, entitled, checkPolicy, shed) {
      if (shed !== undefined) return shedding(req, res, exchange, entitled, shed)
      // Taken before the claim, so that a claim's window covers the whole wait for a connection.
      exchange.sendBy = performance.now() + options.timeout
      if (entitled.policy.rateLimit !== undefined) return limited(req, res, exchange, entitled, checkPolicy)
      if (protection === undefined) {
        const verdict = checkPolicy(entitled)
        if (verdict.ok) forwarder.forward(req, res, payloadOf(verdict))
        else refuse(res, exchange, verdict)
        return
      }
      const { operation, entity, document } = entitled
      // Before the policy, which rewrites the document in place.
      const payment = protectedPayment(operation, entity, document, document)
      const verdict = checkPolicy(entitled)
      const guard = protection.guard(payment)
      if (guard instanceof Promise) return guarded(req, res, exchange, guard, verdict)
      act(req, res, exchange, guard, verdict)
    },
    inspect: (payment) => protection?.inspect(payment),
    rateLimiter,
    async ready(timeoutMs) {
      return store instanceof RedisIdempotencyStore ? store.ready(timeoutMs) : true
    },
    // The gate's is the gate's to close (gate.close()).
    close: async () => (lent === undefined ? protection?.close() : undefined),
  }
}
