import type { Dispatcher } from 'undici'
import { answerOf, flatHeaders, writeAnswer } from '../../http/answer.js'
import { answerFault } from './answer-fault.js'
import { BoundedBody } from './bounded-body.js'
import { backendCallDone, type BackendCall, type Exchange, type GatewayResponse } from './exchange.js'
import { faultKind, serverErrorReplacement, type FaultKind } from './faults.js'
import { rawHeader, relayedHeaders } from './hop-by-hop.js'

/**
 * How a forwarded payment ended, for retry protection. `answered`: what the
 * client got (a backend 5xx not in the error format as the standard body it
 * was replaced by), `headers` as the flat raw list sent, `body` only when
 * asked for and no larger than asked. Otherwise the fault: `refused` (the
 * payment never left the gateway), `timeout`, or `reset` (it may have been
 * received; also when the answer broke after its headers went out, or the
 * client left before it was complete).
 */
export type BackendOutcome =
  | { readonly kind: 'answered'; readonly status: number; readonly headers: readonly string[]; readonly body: Buffer | undefined }
  | { readonly kind: FaultKind }

export type OnSettled = (outcome: BackendOutcome) => void

export interface PaymentRelaySettings {
  /** Largest 5xx body read to see whether it is in the error format. */
  readonly errorBodyLimit: number
  /** Largest answer body handed to `settled`; none when undefined. */
  readonly keepAnswerBytes: number | undefined
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
  private serverError: BoundedBody | undefined = undefined
  private kept: BoundedBody | undefined = undefined
  private resume: (() => void) | undefined = undefined

  constructor(
    private readonly res: GatewayResponse,
    private readonly settings: PaymentRelaySettings,
    private readonly settled: OnSettled | undefined,
  ) {
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
    if (status >= 500) {
      // Read first, so that a body not in the error format can still be replaced.
      this.exchange.backendError = 'serverError'
      this.statusText = statusText
      this.serverError = new BoundedBody(this.settings.errorBodyLimit)
      return true
    }
    this.headers = relayedHeaders(this.raw)
    if (!this.clientLeft) this.res.writeHead(status, statusText, this.headers)
    if (this.settings.keepAnswerBytes !== undefined) this.kept = new BoundedBody(this.settings.keepAnswerBytes)
    this.resume = resume
    return true
  }

  onData(chunk: Buffer): boolean {
    if (this.serverError !== undefined) {
      this.serverError.add(chunk)
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
    if (this.serverError !== undefined) {
      this.endServerError(this.serverError.bytes())
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

  private endServerError(body: Buffer | undefined): void {
    const replacement = serverErrorReplacement(this.status, body, rawHeader(this.raw, 'retry-after'))
    if (replacement === undefined) {
      const passed = body as Buffer
      this.headers = relayedHeaders(this.raw, passed.length)
      this.res.writeHead(this.status, this.statusText, this.headers)
      this.res.end(passed)
      this.settled?.({ kind: 'answered', status: this.status, headers: this.headers, body: this.keep(passed) })
      return
    }
    this.exchange.errorName = replacement.body.errorName
    const answer = answerOf(replacement)
    writeAnswer(this.res, answer)
    this.settled?.({ kind: 'answered', status: answer.status, headers: flatHeaders(answer), body: this.keep(answer.body) })
  }

  private keep(body: Buffer): Buffer | undefined {
    const limit = this.settings.keepAnswerBytes
    return limit !== undefined && body.length <= limit ? body : undefined
  }
}

function latin1(raw: Buffer[]): string[] {
  const strings = new Array<string>(raw.length)
  for (let i = 0; i < raw.length; i++) strings[i] = (raw[i] as Buffer).toString('latin1')
  return strings
}
