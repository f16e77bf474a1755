import type { Dispatcher } from 'undici'
import type { BackendErrorSource } from '../backend-errors/rules.js'
import { answerBytes, headerBytes } from '../idempotency/answer-size.js'
import { answerFault } from './answer-fault.js'
import { clientAnswer, inspected, type ClientAnswer } from './backend-answer.js'
import { BoundedBody } from './bounded-body.js'
import { backendCallDone, type BackendCall, type Exchange, type GatewayResponse } from './exchange.js'
import { faultKind, type FaultKind } from './faults.js'
import { relayedHeaders } from './hop-by-hop.js'

/**
 * How a forwarded payment ended, for retry protection. `answered`: what the
 * client got (a backend error answer as backend-answer.ts decided it),
 * `headers` as the flat raw list sent, `body` only when asked for and the
 * answer no larger than asked. Otherwise the fault: `refused` (the
 * payment never left the gateway), `timeout`, or `reset` (it may have been
 * received; also when the answer broke after its headers went out, or the
 * client left before it was complete).
 */
export type BackendOutcome =
  | { readonly kind: 'answered'; readonly status: number; readonly headers: readonly string[]; readonly body: Buffer | undefined }
  | { readonly kind: FaultKind }

export type OnSettled = (outcome: BackendOutcome) => void

export interface PaymentRelaySettings {
  /** Largest error body read to decide what the client gets of it. */
  readonly errorBodyLimit: number
  /** Largest answer handed whole to `settled`, body and headers as retry protection's store measures it; none when undefined. */
  readonly keepAnswerBytes: number | undefined
  /** The rules in force for the backend's error answers (docs/backend-faults.md). */
  readonly backendErrors: BackendErrorSource
}

const FAULTS: Readonly<Record<FaultKind, BackendOutcome>> = {
  refused: { kind: 'refused' },
  timeout: { kind: 'timeout' },
  reset: { kind: 'reset' },
}

/** The reason a payment still waiting for a connection is dropped when its client leaves. */
const CLIENT_LEFT = new Error('the client left before its payment was sent')

/** One listener for every response (its `this`): no closure per request. */
function onResponseClose(this: GatewayResponse): void {
  this.backendCall?.responseClosed()
}

/**
 * One payment on its way to the backend: undici's dispatch callbacks, each
 * mapped onto the client's response as relay.ts does for the other paths.
 * Written against undici's core handler interface (onConnect, onHeaders,
 * onData, onComplete, onError), the one its HTTP/1.1 client calls: it hands
 * over the raw header list, which a relay needs to send each header as often
 * and as spelt as it came, with no wrapper object per request.
 */
export class PaymentRelay implements Dispatcher.DispatchHandler, BackendCall {
  private readonly exchange: Exchange
  /** Set once undici is about to write the request: from then on, the backend may have it. */
  private written = false
  private clientLeft = false
  private ended = false
  private status = 0
  private statusText = ''
  private raw: string[] = []
  private headers: string[] = []
  /** The body of an error answer, read whole before anything of it goes out. */
  private inspecting: BoundedBody | undefined = undefined
  private kept: BoundedBody | undefined = undefined
  private resume: (() => void) | undefined = undefined

  private readonly res: GatewayResponse
  private readonly settings: PaymentRelaySettings
  private readonly settled: OnSettled | undefined

  constructor(res: GatewayResponse, settings: PaymentRelaySettings, settled: OnSettled | undefined) {
    this.res = res
    this.settings = settings
    this.settled = settled
    this.exchange = res.exchange as Exchange
    res.backendCall = this
    res.on('close', onResponseClose)
  }

  /**
   * The client left before its answer was complete. A payment not yet written
   * is dropped (onConnect). One already written is with the backend, and
   * cutting the call would not take it back, only lose its answer: the answer
   * is read to its end, so that retry protection records what happened and a
   * retry gets that answer (docs/idempotency.md).
   */
  responseClosed(): void {
    if (this.ended) return
    this.clientLeft = true
    // A relay paused for a client that is gone would wait for a drain that never comes.
    this.resume?.()
  }

  onConnect(abort: (error?: Error) => void): void {
    // A client gone while the payment waited for a connection: it is never written.
    if (this.clientLeft) abort(CLIENT_LEFT)
    else this.written = true
  }

  onHeaders(status: number, rawHeaders: Buffer[], resume: () => void, statusText: string): boolean {
    // 1xx informational answers come before the real one; node's client skips them too.
    if (status < 200) return true
    this.status = status
    this.raw = latin1(rawHeaders)
    if (status >= 500) this.exchange.backendError = 'serverError'
    this.statusText = statusText
    // Report mode passes the backend's answer as it came (docs/rollout.md).
    if (inspected(status, true) && this.exchange.mode !== 'report') {
      this.inspecting = new BoundedBody(this.settings.errorBodyLimit)
      return true
    }
    this.headers = relayedHeaders(this.raw)
    if (!this.clientLeft) this.res.writeHead(status, statusText, this.headers)
    const limit = this.settings.keepAnswerBytes
    // Kept only while the whole answer fits the limit, counted as the store counts it (answer-size.ts).
    if (limit !== undefined) this.kept = new BoundedBody(limit - headerBytes(this.headers))
    this.resume = resume
    return true
  }

  onData(chunk: Buffer): boolean {
    if (this.inspecting !== undefined) {
      this.inspecting.add(chunk)
      return true
    }
    this.kept?.add(chunk)
    if (this.clientLeft || this.res.write(chunk)) return true
    // The client reads slower than the backend sends: undici stops reading until it catches up.
    this.res.once('drain', this.resume as () => void)
    return false
  }

  onComplete(): void {
    this.ended = true
    backendCallDone(this.exchange, this.status)
    if (this.inspecting !== undefined) {
      this.endInspected(this.inspecting.bytes())
      return
    }
    if (!this.clientLeft) this.res.end()
    this.settled?.({ kind: 'answered', status: this.status, headers: this.headers, body: this.kept?.bytes() })
  }

  onError(error: Error): void {
    this.ended = true
    // Before onConnect the request was never written: the backend certainly does not have it.
    const { written } = this
    if (error === CLIENT_LEFT) {
      this.settled?.(FAULTS.refused)
      return
    }
    const kind = written ? faultKind(error) : 'refused'
    answerFault(this.res, this.exchange, kind)
    this.settled?.(FAULTS[kind])
  }

  private endInspected(body: Buffer | undefined): void {
    const answer = clientAnswer(this.status, this.raw, body, this.settings.backendErrors.rules)
    if (answer.errorName !== undefined) this.exchange.errorName = answer.errorName
    this.res.writeHead(answer.status, this.statusText, answer.headers)
    this.res.end(answer.body)
    this.settled?.({ kind: 'answered', status: answer.status, headers: answer.headers, body: this.keep(answer) })
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
