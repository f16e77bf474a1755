import type { Dispatcher } from 'undici'
import type { BackendErrorSource } from '../backend-errors/rules.js'
import { answerBytes, headerBytes } from '../idempotency/answer-size.js'
import { CodedError } from '../coded-error.js'
import { answerFault } from './answer-fault.js'
import { clientAnswer, inspected, reasonOf, resendsPayment, type ClientAnswer } from './backend-answer.js'
import { acceptedHeaders, reasonPhrase } from './backend-head.js'
import { BoundedBody } from './bounded-body.js'
import { backendCallDone, releasePlace, type BackendCall, type Exchange, type GatewayResponse } from './exchange.js'
import { paymentFault, retriesOf, serverErrorMessage, type FaultKind } from './faults.js'
import { relayedHeaders } from './hop-by-hop.js'
import type { CallInFlight, PaymentsInFlight } from './payments-in-flight.js'

/**
 * How a forwarded payment ended, for retry protection. `answered`: what the
 * client got (a backend error answer as backend-answer.ts decided it),
 * `headers` as the flat raw list sent, `body` only when asked for and the
 * answer no larger than asked. Otherwise the fault: `refused` (the payment
 * was never written: the backend could not be reached, it waited past its
 * deadline for a connection, or its client left first), `timeout`, or
 * `reset` (it was written and may have been received; also when the answer
 * broke after its headers went out).
 */
export type BackendOutcome =
  | {
      readonly kind: 'answered'
      readonly status: number
      readonly headers: readonly string[]
      readonly body: Buffer | undefined
    }
  | { readonly kind: FaultKind }

export type OnSettled = (outcome: BackendOutcome) => void

export interface PaymentRelaySettings {
  /** Largest error body read to decide what the client gets of it. */
  readonly errorBodyLimit: number
  /** Largest answer handed whole to `settled`, body and headers as retry protection's store measures it; none when undefined. */
  readonly keepAnswerBytes: number | undefined
  /** The rules in force for the backend's error answers (docs/backend-faults.md). */
  readonly backendErrors: BackendErrorSource
  /** The forwarder's payments whose calls are not over: each relay is in it from its dispatch until it settles. */
  readonly inFlight: PaymentsInFlight
}

const FAULTS: Readonly<Record<FaultKind, BackendOutcome>> = {
  refused: { kind: 'refused' },
  timeout: { kind: 'timeout' },
  reset: { kind: 'reset' },
}

/** The reason undici is given for a payment dropped before it was written; its outcome is settled already. */
const WITHDRAWN = new Error('the payment was withdrawn before it was written')

/** The reason a payment still at the backend at the drain's deadline is given up: its log line's `backendErrorCode`. */
const DRAINED = new CodedError('EDRAINED', 'the gateway stopped before the backend answered')

/** The deadline timer's callback, one function for every payment: no closure per request. */
function sendByPassed(relay: PaymentRelay): void {
  relay.withdraw()
}

/** The client reads again: one `drain` listener for every response (its `this`). */
function onDrain(this: GatewayResponse): void {
  ;(this.backendCall as PaymentRelay).readOn()
}

/**
 * One payment on its way to the backend: undici's controller handler
 * callbacks (onRequestStart, onResponseStart, onResponseData, onResponseEnd,
 * onResponseError), each mapped onto the client's response as relay.ts does
 * for the other paths. The raw header list, which a relay needs to send each
 * header as often and as spelt as it came, is the controller's `rawHeaders`.
 *
 * The rule of docs/backend-faults.md (at most once) is kept here: once undici
 * hands the request to a socket (onRequestStart) the backend may have it, and
 * no error frees its key; before that, nothing was written, and every way out
 * frees it.
 */
export class PaymentRelay implements Dispatcher.DispatchHandler, BackendCall, CallInFlight {
  private readonly res: GatewayResponse
  private readonly settings: PaymentRelaySettings
  private readonly settled: OnSettled | undefined
  private readonly exchange: Exchange
  /** performance.now() past which the payment is never written (docs/idempotency-reference.md, the in-flight window). */
  private readonly sendBy: number
  /** Set once undici handed the request to a socket: from then on, the backend may have it. */
  private written = false
  /** Set when the payment was dropped before it was written: its outcome is settled, and it never will be written. */
  private withdrawn = false
  private ended = false
  private status = 0
  /** The backend's reason phrase, undefined when node would refuse it (backend-head.ts): node's standard one goes out. */
  private statusText: string | undefined = undefined
  private raw: string[] = []
  private headers: string[] = []
  /** The backend's head, relayed with the first piece of its body: until then the client can still get a 500. */
  private headPending = false
  /** The body of an error answer, read whole before anything of it goes out. */
  private inspecting: BoundedBody | undefined = undefined
  private kept: BoundedBody | undefined = undefined
  private controller: Dispatcher.DispatchController | undefined = undefined
  private timer: NodeJS.Timeout | undefined = undefined
  /** Its place in the forwarder's calls in flight (payments-in-flight.ts). */
  inFlightSlot = -1

  constructor(res: GatewayResponse, settings: PaymentRelaySettings, settled: OnSettled | undefined, sendBy: number) {
    this.res = res
    this.settings = settings
    this.settled = settled
    this.sendBy = sendBy
    this.exchange = res.exchange as Exchange
    res.backendCall = this
  }

  /**
   * Hands the payment to undici, unless its client left in an earlier step
   * (an asynchronous claim, a password check). One that did not get a
   * connection at once is dropped at its deadline if it is still waiting.
   */
  send(dispatcher: Dispatcher, call: Dispatcher.DispatchOptions): void {
    if (this.res.destroyed) {
      this.withdraw()
      return
    }
    this.settings.inFlight.add(this)
    dispatcher.dispatch(call, this)
    if (!this.written && !this.withdrawn && !this.ended)
      // At once when the claim outlasted it already: node warns of a negative delay, and makes it 1 ms.
      this.timer = setTimeout(sendByPassed, Math.max(0, this.sendBy - performance.now()), this)
  }

  /**
   * The response closed (the server's close listener, from the start of the
   * request). A payment not yet written is dropped at once, its key released.
   * One already written is with the backend, and cutting the call would not
   * take it back, only lose its answer: the answer is read to its end, so that
   * retry protection records what happened and a retry gets that answer
   * (docs/idempotency.md).
   */
  responseClosed(): void {
    if (this.ended) return
    if (!this.written) {
      this.withdraw()
      return
    }
    // A relay paused for a client that is gone would wait for a drain that never comes.
    this.controller?.resume()
  }

  /**
   * Drops a payment not yet written: its client left, or its deadline passed.
   * Its key is released; a client still there gets 503 (nothing was sent).
   */
  withdraw(): void {
    if (this.written || this.withdrawn || this.ended) return
    this.withdrawn = true
    clearTimeout(this.timer)
    if (!this.res.destroyed) answerFault(this.res, this.exchange, 'refused')
    this.finish(FAULTS.refused)
  }

  /**
   * The drain's deadline came first (docs/deployment-reference.md, stopping). A payment not yet written is
   * withdrawn; one written may have been processed: it is told and recorded as a timeout, its outcome
   * unknown, before its call is aborted, and the client gets that 500 while nothing of an answer went out.
   */
  cut(): string | undefined {
    if (!this.written) {
      this.withdraw()
      return undefined
    }
    const left = this.res.destroyed
    this.ended = true
    answerFault(this.res, this.exchange, 'timeout', DRAINED)
    this.finish(FAULTS.timeout)
    ;(this.controller as Dispatcher.DispatchController).abort(DRAINED)
    return left ? this.exchange.requestId : undefined
  }

  readOn(): void {
    this.controller?.resume()
  }

  onRequestStart(controller: Dispatcher.DispatchController): void {
    this.controller = controller
    // Its deadline passed while it waited (the timer may not have run yet): it is never written.
    if (performance.now() > this.sendBy) this.withdraw()
    // Thrown, not `controller.abort()`: undici's abort destroys the socket it handed over, a healthy
    // connection the next payment would use. A throw here fails this request alone (undici's HTTP/1.1
    // writer catches it before writing anything) and the connection stays in the pool.
    if (this.withdrawn) throw WITHDRAWN
    this.written = true
    clearTimeout(this.timer)
  }

  onResponseStart(
    controller: Dispatcher.DispatchController,
    status: number,
    _headers: unknown,
    statusText: string,
  ): void {
    // 1xx informational answers come before the real one; node's client skips them too.
    if (status < 200) return
    this.status = status
    // HTTP/1.1 (the pool refuses HTTP/2) hands the list as it came: each header as often and as spelt.
    this.raw = acceptedHeaders(latin1(controller.rawHeaders as Buffer[]), this.exchange)
    if (status >= 500 || resendsPayment(status)) this.exchange.backendError = 'serverError'
    this.statusText = reasonPhrase(statusText)
    // Report mode passes the backend's answer as it came (docs/rollout.md).
    if (inspected(status, true) && this.exchange.mode !== 'report') {
      this.inspecting = new BoundedBody(this.settings.errorBodyLimit)
      return
    }
    this.headers = relayedHeaders(this.raw, undefined, status === 204)
    // node writes a head with the body's first piece anyway; a backend that fails before one is then still the
    // unknown outcome the client is told of (answerFault), not a connection cut after a 201 logged as sent.
    this.headPending = true
    const limit = this.settings.keepAnswerBytes
    // Kept only while the whole answer fits the limit, counted as the store counts it (answer-size.ts).
    if (limit !== undefined) this.kept = new BoundedBody(limit - headerBytes(this.headers))
  }

  onResponseData(controller: Dispatcher.DispatchController, chunk: Buffer): void {
    if (this.inspecting !== undefined) {
      this.inspecting.add(chunk)
      return
    }
    this.kept?.add(chunk)
    if (this.headPending) this.sendHead()
    if (this.res.destroyed || this.res.write(chunk)) return
    // The client reads slower than the backend sends: undici stops reading until it catches up.
    controller.pause()
    this.res.once('drain', onDrain)
  }

  onResponseEnd(): void {
    this.ended = true
    backendCallDone(this.exchange, this.status)
    if (this.inspecting !== undefined) {
      this.endInspected(this.inspecting.bytes())
      return
    }
    if (this.headPending) this.sendHead()
    if (!this.res.destroyed) this.res.end()
    this.finish({ kind: 'answered', status: this.status, headers: this.headers, body: this.kept?.bytes() })
  }

  private sendHead(): void {
    this.headPending = false
    if (!this.res.destroyed) this.res.writeHead(this.status, this.statusText, this.headers)
  }

  onResponseError(_controller: unknown, error: Error): void {
    clearTimeout(this.timer)
    // Settled already: withdrawn (WITHDRAWN, or the pool closed after), or cut by a drain.
    if (this.withdrawn || this.ended) return
    this.ended = true
    const kind = paymentFault(error, this.written)
    answerFault(this.res, this.exchange, kind, error)
    this.finish(FAULTS[kind])
  }

  /** The backend call is over: its place under the in-flight cap given back, its outcome told. */
  private finish(outcome: BackendOutcome): void {
    this.settings.inFlight.delete(this)
    releasePlace(this.exchange)
    this.settled?.(outcome)
  }

  private endInspected(body: Buffer | undefined): void {
    const serverError = serverErrorMessage(retriesOf(this.exchange))
    const answer = clientAnswer(this.status, this.raw, body, this.settings.backendErrors.rules, serverError)
    if (answer.errorName !== undefined) this.exchange.errorName = answer.errorName
    this.res.writeHead(answer.status, reasonOf(answer, this.status, this.statusText), answer.headers)
    this.res.end(answer.body)
    this.finish({ kind: 'answered', status: answer.status, headers: answer.headers, body: this.keep(answer) })
  }

  private keep(answer: ClientAnswer): Buffer | undefined {
    const limit = this.settings.keepAnswerBytes
    return limit !== undefined && answerBytes(answer) <= limit ? answer.body : undefined
  }
}

function latin1(raw: Buffer[]): string[] {
  const strings = new Array<string>(raw.length)
  for (let i = 0; i < raw.length; i++) strings[i] = (raw[i] as Buffer).toString('latin1')
  return strings
}
