import type { IncomingMessage, OutgoingHttpHeaders, ServerResponse } from 'node:http'
import type { Readable } from 'node:stream'
import type { Checks, Entitled, Passed, Reported, Verdict } from '../checks/index.js'
import { IDEMPOTENCY_DEFAULTS } from '../defaults.js'
import { reject, type Rejection } from '../errors.js'
import { answerOf, type Answer } from '../http/answer.js'
import { ABORTED } from '../http/read-body.js'
import { limited, screen, screenBody, type Admitted } from '../http/screen.js'
import type { IdempotencyStore, RecordedAnswer } from '../idempotency/store.js'
import { checkBounded } from '../option-values.js'
import { CodedError } from '../coded-error.js'
import {
  createRetryProtection,
  NOT_FORWARDED,
  protectedPayment,
  retryStoreOf,
  type Guard,
  type LentProtection,
  type RetryProtection,
  type RetryProtectionOptions,
  type Ticket,
} from '../proxy/retry-protection.js'
import { ANSWERED, guardWithLimit, type LimitedGuard } from '../proxy/rate-limits.js'
import type { Admission, RateLimiter } from '../rate-limit/limiter.js'
import type { Operation } from '../schema/payment.js'
import { capturedResponse, captureAnswer, recordedOf, threwOn, type Settling } from './answer-capture.js'
import type { NodeNext } from './node.js'
import type { GateLogger, GateReport } from './shared.js'
import type { HonoAnswer } from './types.js'

/** Retry protection around the application's own handler: `createGate`'s options (docs/middleware.md, retry protection). */
export interface HandlerRetryOptions extends Omit<RetryProtectionOptions, 'idempotency' | 'onStoreError'> {
  /**
   * `off` (the default: nothing is claimed), `memory` (this process), a Redis every replica shares
   * (`redis://`, `rediss://`, `redis-sentinel://`, `rediss-sentinel://`, `redis-cluster://`, `rediss-cluster://`),
   * or your own store. With one, a retry of a payment gets its first answer again instead of running your
   * handler again.
   */
  idempotency?: 'memory' | 'off' | string | IdempotencyStore
  /**
   * How long a claim holds its key while your handler runs, in seconds: past it, a retry gets the unknown
   * outcome (500) instead of 409. Longer than your handler may take. Default 95.
   */
  idempotencyInFlight?: number
}

/**
 * What `serve` gives `createGate` of retry protection, over its own flags' (which are the gateway's):
 * none, since it mounts no handler; its gateway builds the store (docs/middleware-reference.md, the proxy as a library).
 */
export const NO_HANDLER_PROTECTION = Object.freeze({
  idempotency: 'off',
  idempotencyFingerprintKey: undefined,
  idempotencyReplicas: undefined,
} as const)

/** A recorded answer, to send again as it was, marked as a replay (docs/idempotency.md). */
export interface Replay {
  readonly ok: 'replay'
  readonly answer: Answer
}

/** A payment claimed and passed by its policy: hand it to the handler, and settle the ticket with its answer. */
export interface Claimed {
  readonly ok: 'claimed'
  readonly passed: Passed
  /** Undefined when the store failed and failure is `open`: the handler runs unprotected. */
  readonly ticket: Ticket | undefined
}

/** The words of the middleware's stand-ins: the application, not a backend, processes the payment. */
const THREW_OUTCOME =
  'The outcome of this payment is unknown: it failed while it was being processed, so it may have been processed.'
export const THREW = answerOf(
  reject('internalErrorOccurred', {
    message: `${THREW_OUTCOME} It is not processed again: retries with this transactionReference get this answer while retry protection keeps it. Ask for the payment's status, and pay again under a new transactionReference only if it did not happen.`,
  }),
)
/**
 * A payment the gate let through whose handler threw with no claim held (retry protection off, or its store
 * down with failure `open`): a retry runs the handler again, so the client is to ask first, never to "Retry later"
 * (docs/middleware.md, errors; the proxy's words for `--idempotency off`, docs/backend-faults.md).
 */
export const THREW_UNPROTECTED = answerOf(
  reject('internalErrorOccurred', {
    message: `${THREW_OUTCOME} Ask for the payment's status before sending it again: a retry is processed again, and a new transactionReference makes a new payment.`,
  }),
)
const UNKNOWN = recordedOf(
  answerOf(
    reject('internalErrorOccurred', {
      message:
        "The outcome of this payment is unknown: it did not finish within its in-flight window (its process may have stopped), so it may have been processed. It is not processed again: retries with this transactionReference get this answer while retry protection keeps it. Ask for the payment's status, and pay again under a new transactionReference only if it did not happen.",
    }),
  ),
)
const OVERSIZED = recordedOf(
  answerOf(
    reject('internalErrorOccurred', {
      message:
        "This payment was answered, but its answer was too large to keep, so it cannot be replayed. It is not processed again: ask for the payment's status, and pay again under a new transactionReference only if it did not happen.",
    }),
  ),
)

/** What the gate's store is: built from a spec by the gate (and closed by it), or given (the caller's). */
export interface HandlerStore {
  readonly store: IdempotencyStore
  readonly owned: boolean
  readonly inFlightMs: number
}

/**
 * The store `createGate`'s `idempotency` names (undefined when `off`, the default), built as the proxy
 * builds its own (`retryStoreOf`), with the handler's window. Throws `EINVALID` for a setting out of
 * its bounds, `EIDEMPOTENCY` for a spec not taken, `EFINGERPRINTKEY` for a Redis store without the fleet's key.
 */
export function createHandlerStore(options: HandlerRetryOptions & RetryProtectionOptions): HandlerStore | undefined {
  checkBounded('idempotencyTtl', options.idempotencyTtl)
  checkBounded('idempotencyReplicas', options.idempotencyReplicas)
  checkBounded('idempotencyMaxEntries', options.idempotencyMaxEntries)
  checkBounded('idempotencyInFlight', options.idempotencyInFlight)
  const failure = options.idempotencyFailure
  if (failure !== undefined && failure !== 'closed' && failure !== 'open')
    throw new CodedError('EINVALID', `idempotencyFailure=${JSON.stringify(failure)} must be closed or open`)
  const idempotency = options.idempotency ?? IDEMPOTENCY_DEFAULTS.middlewareStore
  const inFlightMs = (options.idempotencyInFlight ?? IDEMPOTENCY_DEFAULTS.middlewareInFlightSeconds) * 1000
  const store = retryStoreOf(idempotency, options, { inFlightMs, oversizedAnswer: OVERSIZED, unknownAnswer: UNKNOWN })
  return store && { store, owned: typeof idempotency === 'string', inFlightMs }
}

/** A replay's headers as node takes them: a name recorded more than once (`set-cookie`) as a list. */
function replayOf(answer: RecordedAnswer): Replay {
  const headers: OutgoingHttpHeaders = {}
  const { headers: raw } = answer
  for (let i = 0; i < raw.length; i += 2) {
    const name = (raw[i] as string).toLowerCase()
    const value = raw[i + 1] as string
    const had = headers[name]
    if (had === undefined) headers[name] = value
    else headers[name] = Array.isArray(had) ? [...had, value] : [String(had), value]
  }
  headers['idempotent-replayed'] = 'true'
  return { ok: 'replay', answer: { status: answer.status, headers, body: answer.body } }
}

/** A handler's throw: the unknown outcome of its claim (`threwOn`), or, without an open claim, thrown on. */
function threw(res: ServerResponse, error: unknown): void {
  if (!threwOn(res, error)) throw error
}

/** What a surface answers for a refusal or a replay: the one answer a surface writes for either. */
export function answerFor(outcome: Rejection | Replay): Answer {
  return outcome.ok === 'replay' ? outcome.answer : answerOf(outcome)
}

/**
 * Retry protection as the middleware runs it around the application's handler: the proxy's core
 * (`createRetryProtection`: claim, the table, replays) between check 9 and the policy, as the proxy runs
 * it, and the handler's answer captured (answer-capture.ts) where the proxy relays the backend's.
 * Built once per gate; each surface calls it only when the gate has a store.
 */
export class HandlerProtection {
  readonly #checks: Checks
  readonly #core: RetryProtection
  readonly #store: HandlerStore
  readonly #limiter: RateLimiter
  readonly #settling: Settling

  constructor(
    checks: Checks,
    store: HandlerStore,
    limiter: RateLimiter,
    options: RetryProtectionOptions,
    logger: GateLogger | undefined,
  ) {
    this.#checks = checks
    this.#store = store
    this.#limiter = limiter
    const onStoreError =
      options.onStoreError ??
      (logger && ((error: unknown) => logger.error({ err: error }, 'payments-gate: retry-protection store failed')))
    this.#core = createRetryProtection(store.store, { ...options, onStoreError, oversizedAnswer: OVERSIZED })
    this.#settling = {
      protection: this.#core,
      inFlightMs: store.inFlightMs,
      unknownAnswer: UNKNOWN,
      threw: THREW,
      logger,
    }
  }

  /** What a gateway built from the gate's checks protects its payments with (docs/middleware.md). */
  get lent(): LentProtection {
    return { protection: this.#core, store: this.#store.store, inFlightMs: this.#store.inFlightMs }
  }

  /** `screen` with the payment's key looked up between check 9 and its policy; what the handler writes on `res` settles the claim. */
  screen(
    req: IncomingMessage,
    res: ServerResponse,
    operation: Operation | Rejection | undefined,
  ): Promise<Verdict | Replay | typeof ABORTED | undefined> {
    return screen(this.#checks, req, operation, undefined, this.#checks.mode, undefined, 'entitled').then((outcome) =>
      outcome === undefined ? undefined : this.#onResponse(outcome, res),
    )
  }

  /** `screenBody` so, for the surfaces that read the body themselves (Express, Fastify). */
  screenBody(body: Readable, admitted: Admitted, res: ServerResponse): Promise<Verdict | Replay | typeof ABORTED> {
    return screenBody(this.#checks, body, admitted, 'entitled').then((outcome) => this.#onResponse(outcome, res))
  }

  /** `screenBody` for Hono: a claimed payment comes back `Claimed`, for `respond`; `signal` says whether its client left. */
  async claimBody(
    body: Readable,
    admitted: Admitted,
    signal: AbortSignal,
  ): Promise<Verdict | Claimed | Replay | typeof ABORTED> {
    const outcome = await screenBody(this.#checks, body, admitted, 'entitled')
    const decided = await this.#decided(outcome)
    if (decided === ABORTED || decided.ok !== 'claimed' || !signal.aborted) return decided
    this.#release(decided.ticket)
    return ABORTED
  }

  /**
   * Runs Hono's next middleware or handler on a claimed payment, and settles the claim with its answer:
   * the `Response` captured as it streams, or the unknown outcome of a throw, which the client gets.
   */
  async respond(
    c: HonoAnswer,
    next: () => Promise<void>,
    ticket: Ticket | undefined,
    requestId: string,
  ): Promise<void> {
    if (ticket === undefined) return next()
    let threw: unknown
    let failed = false
    try {
      await next()
      threw = c.error
      failed = threw !== undefined
    } catch (error) {
      // Hono's compose hands on what is not an Error.
      threw = error
      failed = true
    }
    if (!failed) {
      c.res = capturedResponse(c.res, ticket, this.#settling)
      return
    }
    this.#settling.logger?.error({ err: threw }, 'payments-gate: the handler of a protected payment threw')
    this.#core.settle(ticket, { kind: 'answered', ...recordedOf(THREW) })
    const headers = new Headers({ 'x-request-id': requestId })
    for (const name of Object.keys(THREW.headers)) headers.set(name, String(THREW.headers[name]))
    // Unset first: Hono's setter would carry the failed answer's headers over.
    c.res = undefined
    c.res = new Response(new Uint8Array(THREW.body), { status: THREW.status, headers })
  }

  /**
   * Calls the node handler on a payment that passed: a throw, or a promise it returns that rejects, while
   * its claim is open is the unknown outcome; any other goes on as it would without retry protection.
   */
  run(
    next: NodeNext,
    req: IncomingMessage,
    res: ServerResponse,
    passed: Passed,
    requestId: string | undefined,
  ): void | Promise<unknown> {
    let result: unknown
    try {
      result = next(req, res, passed, requestId)
    } catch (error) {
      return threw(res, error)
    }
    if (result instanceof Promise) return result.catch((error: unknown) => threw(res, error))
  }

  /** Closes the store when the gate built it. */
  async close(): Promise<void> {
    if (this.#store.owned) await this.#core.close()
  }

  #onResponse(
    outcome: Entitled | Verdict | typeof ABORTED,
    res: ServerResponse,
  ): Verdict | Replay | typeof ABORTED | Promise<Verdict | Replay | typeof ABORTED> {
    const decided = this.#decided(outcome)
    return decided instanceof Promise ? decided.then((d) => this.#captured(d, res)) : this.#captured(decided, res)
  }

  /** A claimed payment's answer captured on `res`, unless its client left while it was claimed: then released. */
  #captured(
    decided: Verdict | Claimed | Replay | typeof ABORTED,
    res: ServerResponse,
  ): Verdict | Replay | typeof ABORTED {
    if (decided === ABORTED || decided.ok !== 'claimed') return decided
    const { ticket } = decided
    if (res.destroyed) {
      this.#release(ticket)
      return ABORTED
    }
    if (ticket !== undefined) captureAnswer(res, ticket, this.#settling)
    return decided.passed
  }

  #release(ticket: Ticket | undefined): void {
    if (ticket !== undefined) this.#core.settle(ticket, NOT_FORWARDED)
  }

  /** An enforce-mode payment past check 9 decided by its key then its policy; a report looked at; the rest as it is. */
  #decided(
    outcome: Entitled | Verdict | typeof ABORTED,
  ): Verdict | Claimed | Replay | typeof ABORTED | Promise<Verdict | Claimed | Replay | typeof ABORTED> {
    if (outcome === ABORTED) return outcome
    if (outcome.ok === 'report') return this.#report(outcome)
    if (outcome.ok !== 'entitled') return outcome
    const { operation, entity, document, policy } = outcome
    // Before the policy, which rewrites the document in place.
    const payment = protectedPayment(operation, entity, document, document)
    const verdict = this.#checks.checkPolicy(outcome)
    // Looked up, counted, then claimed, as the proxy does: a limited payment is never claimed (proxy/rate-limits.ts).
    if (policy.rateLimit !== undefined)
      return guardWithLimit(this.#core, this.#limiter, payment, policy, verdict.ok).then((limit) =>
        this.#limited(limit, verdict),
      )
    const guard = this.#core.guard(payment)
    return guard instanceof Promise
      ? guard.then((found) => this.#decision(found, verdict))
      : this.#decision(guard, verdict)
  }

  /** The limit's refusal (429, or 503 with its store down and failure closed), or retry protection's decision. */
  #limited({ guard, admission }: LimitedGuard, verdict: Passed | Rejection): Claimed | Rejection | Replay {
    if (guard === undefined) return (admission as Extract<Admission, { rejection: Rejection }>).rejection
    return this.#decision(guard, verdict)
  }

  /** As the proxy acts on a guard (createPayments): a replay or a refusal whatever the policy says now. */
  #decision(guard: Guard, verdict: Passed | Rejection): Claimed | Rejection | Replay {
    if (guard.kind === 'replay') return replayOf(guard.answer)
    if (guard.kind === 'refuse') return guard.rejection
    if (verdict.ok === true) return { ok: 'claimed', passed: verdict, ticket: guard.ticket }
    // Its policy refuses it, and nothing is recorded under its key: the claim made to look is freed at once.
    this.#release(guard.ticket)
    return verdict
  }

  /** Report mode: what retry protection would do, from a look that claims nothing (docs/rollout.md). */
  #report(reported: Reported): GateReport | Promise<GateReport> {
    const { document } = reported
    if (document === undefined) return reported
    const would = this.#core.inspect(protectedPayment(reported.operation, reported.entity, reported.received, document))
    if (would instanceof Promise) return would.then((outcome) => this.#reportLimit(reported, outcome))
    return this.#reportLimit(reported, would)
  }

  /** Report mode counts a payment as enforce mode would, unless retry protection would answer it itself. */
  #reportLimit(reported: Reported, would: GateReport['wouldRetryProtection']): GateReport | Promise<GateReport> {
    const seen: GateReport = would === undefined ? reported : { ...reported, wouldRetryProtection: would }
    if (reported.policy?.rateLimit === undefined || ANSWERED.has(would)) return seen
    return limited(this.#limiter, seen) as Promise<GateReport>
  }
}
