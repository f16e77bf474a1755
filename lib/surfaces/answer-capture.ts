import type { OutgoingHttpHeaders, ServerResponse } from 'node:http'
import type { UnderlyingSource } from 'node:stream/web'
import { IDEMPOTENCY_DEFAULTS } from '../defaults.js'
import { writeAnswer, type Answer } from '../http/answer.js'
import { headerBytes } from '../idempotency/answer-size.js'
import type { RecordedAnswer } from '../idempotency/store.js'
import { BoundedBody } from '../proxy/bounded-body.js'
import { relayedHeaders } from '../proxy/hop-by-hop.js'
import { NOT_FORWARDED, type RetryProtection, type Ticket } from '../proxy/retry-protection.js'
import type { GateLogger } from './shared.js'

/**
 * The answer of the application's handler to a claimed payment, captured as the client gets it (status,
 * headers, body) and handed to retry protection's table (`RetryProtection.settle`), as the proxy hands
 * it a backend's (docs/middleware.md, retry protection). The body is kept by reference while the whole
 * answer fits what a store keeps (answer-size.ts); past that it is counted only, and the answer is kept
 * as answered but not replayable.
 */

/** What a capture settles its claim with, and the answers it records when the handler's own is not known. */
export interface Settling {
  readonly protection: RetryProtection
  /** The in-flight window, in ms. */
  readonly inFlightMs: number
  /** Recorded when the claim's client left, and the handler did not end its answer within the window. */
  readonly unknownAnswer: RecordedAnswer
  /** Answered and recorded when the handler threw: its outcome is unknown. */
  readonly threw: Answer
  readonly logger: GateLogger | undefined
}

/** Largest answer kept whole, body and headers as a store counts them. */
const MAX_ANSWER_BYTES = IDEMPOTENCY_DEFAULTS.maxAnswerBytes
const NO_BODY = Buffer.alloc(0)

/** A handler's answer settled: its body only when the whole answer fits what a store keeps. */
function settleAnswered(
  settling: Settling,
  ticket: Ticket,
  status: number,
  headers: readonly string[],
  body: Buffer | undefined,
): void {
  const kept = body !== undefined && body.length + headerBytes(headers) <= MAX_ANSWER_BYTES ? body : undefined
  settling.protection.settle(ticket, { kind: 'answered', status, headers, body: kept })
}

/** An answer of ours (the unknown outcome of a throw, of a window over) as the record keeps it. */
export function recordedOf(answer: Answer): RecordedAnswer {
  return { status: answer.status, headers: flatHeaders(answer.headers), body: answer.body }
}

function settleRecorded(settling: Settling, ticket: Ticket, answer: RecordedAnswer): void {
  settling.protection.settle(ticket, {
    kind: 'answered',
    status: answer.status,
    headers: answer.headers,
    body: answer.body,
  })
}

/** Headers as node keeps them, as a flat raw list: a list value (`set-cookie`) one line a value. */
function flatHeaders(headers: OutgoingHttpHeaders): string[] {
  const flat: string[] = []
  for (const name of Object.keys(headers)) {
    const value = headers[name]
    if (Array.isArray(value)) for (const item of value) flat.push(name, item)
    else flat.push(name, String(value))
  }
  return flat
}

const CAPTURE = Symbol('payments-gate answer capture')

type Write = (this: ServerResponse, chunk: unknown, encoding?: unknown, callback?: unknown) => boolean
type End = (this: ServerResponse, chunk?: unknown, encoding?: unknown, callback?: unknown) => ServerResponse
type WriteHead = (this: ServerResponse, status: number, reason?: unknown, headers?: unknown) => ServerResponse

/** A response whose answer is captured. */
interface Captured extends ServerResponse {
  [CAPTURE]?: NodeCapture
  /**
   * The head node wrote (`HTTP/1.1 201 Created\r\nname: value\r\n...\r\n\r\n`): every header the client got,
   * node's own and those passed to `writeHead` alike, which `getHeaders()` leaves out (node's `_storeHeader`).
   */
  _header?: string | null
}

/** One claimed payment's answer on a node response: what `write` and `end` replaced, and what they kept. */
class NodeCapture {
  /** Undefined once settled. */
  ticket: Ticket | undefined
  readonly settling: Settling
  readonly write: Write
  readonly end: End
  readonly body = new BoundedBody(MAX_ANSWER_BYTES)
  /** performance.now() at which the claim's window ends. */
  readonly until: number
  /** Fastify called the route's handler (retry-protection.ts): an error from now on may come after a charge. */
  started = false
  /** The route's handler is one whose start Fastify marks: an answer ended before it started never charged. */
  tracked = false
  /** Fastify's `onError` saw an error once the handler started: its answer is replaced by the unknown outcome. */
  threw = false
  timer: NodeJS.Timeout | undefined = undefined

  /**
   * With a middleware before the gate that replaced `write` or `end` (a compression middleware): the `writeHead`
   * it sees, and the head as the handler gave it, which goes with the bytes captured here (not the head sent).
   */
  readonly writeHead: WriteHead | undefined
  head: { readonly status: number; readonly headers: string[] } | undefined = undefined

  constructor(res: ServerResponse, ticket: Ticket, settling: Settling, above: boolean) {
    this.ticket = ticket
    this.settling = settling
    this.write = res.write as Write
    this.end = res.end as End
    this.writeHead = above ? (res.writeHead as WriteHead) : undefined
    this.until = performance.now() + settling.inFlightMs
  }

  /** A chunk written, as the bytes that go out; nothing once settled or past the limit. */
  keep(chunk: unknown, encoding: unknown): void {
    if (this.ticket === undefined || this.body.over || chunk === undefined || chunk === null) return
    if (typeof chunk === 'string')
      this.body.add(Buffer.from(chunk, typeof encoding === 'string' ? (encoding as BufferEncoding) : 'utf8'))
    else if (Buffer.isBuffer(chunk)) this.body.add(chunk)
    else if (chunk instanceof Uint8Array) this.body.add(Buffer.from(chunk.buffer, chunk.byteOffset, chunk.byteLength))
  }

  /** The ticket, now settled by the caller: later writes, ends and closes do nothing more. */
  take(): Ticket | undefined {
    const ticket = this.ticket
    this.ticket = undefined
    clearTimeout(this.timer)
    return ticket
  }
}

/**
 * Captures the answer the handler writes on `res` for the claim `ticket`: `write` and `end` are wrapped
 * on this response alone (the functions are the module's, their state the capture's: no closure per
 * request), so whatever writes it, a framework's reply, `pipe`, a wrapper mounted after the gate,
 * is seen as it goes out. The claim is settled when the handler ends its answer.
 */
export function captureAnswer(res: ServerResponse, ticket: Ticket, settling: Settling): void {
  const captured = res as Captured
  // A `write` or `end` of this response's own was put there before the gate: the bytes seen here may go out
  // otherwise (compressed), and the head sent says so. The head is then taken here too, as the handler gives it, so
  // that the record holds a head and a body of one layer, and a replay goes through that middleware again.
  const above = Object.hasOwn(res, 'write') || Object.hasOwn(res, 'end')
  captured[CAPTURE] = new NodeCapture(res, ticket, settling, above)
  captured.write = capturedWrite as ServerResponse['write']
  captured.end = capturedEnd as ServerResponse['end']
  if (above) captured.writeHead = capturedWriteHead as ServerResponse['writeHead']
  res.once('close', capturedClose)
}

/**
 * `writeHead` below a middleware mounted before the gate: its headers set as `writeHead` sets them, the head taken
 * as it is then, before that middleware's own `writeHead` changes it, then passed on to it.
 */
function capturedWriteHead(this: Captured, status: number, reason?: unknown, headers?: unknown): ServerResponse {
  const capture = this[CAPTURE] as NodeCapture
  const given = typeof reason === 'string' ? headers : reason
  if (Array.isArray(given)) {
    // node's flat list, or a list of pairs: a name given twice keeps both values.
    const pairs = (Array.isArray(given[0]) ? given.flat() : given) as string[]
    const values = new Map<string, string[]>()
    for (let i = 0; i < pairs.length; i += 2) {
      const name = String(pairs[i]).toLowerCase()
      values.set(name, [...(values.get(name) ?? []), String(pairs[i + 1])])
    }
    for (const [name, list] of values) this.setHeader(name, list.length === 1 ? (list[0] as string) : list)
  } else if (given !== undefined && given !== null) {
    for (const [name, value] of Object.entries(given)) this.setHeader(name, value as string | string[])
  }
  capture.head ??= { status, headers: flatHeaders(this.getHeaders()) }
  const writeHead = capture.writeHead as WriteHead
  return typeof reason === 'string' ? writeHead.call(this, status, reason) : writeHead.call(this, status)
}

function capturedWrite(this: Captured, chunk: unknown, encoding?: unknown, callback?: unknown): boolean {
  const capture = this[CAPTURE] as NodeCapture
  capture.keep(chunk, encoding)
  return capture.write.call(this, chunk, encoding, callback)
}

function capturedEnd(this: Captured, chunk?: unknown, encoding?: unknown, callback?: unknown): ServerResponse {
  const capture = this[CAPTURE] as NodeCapture
  // `end(callback)`: no chunk.
  if (typeof chunk !== 'function') capture.keep(chunk, encoding)
  const ended = capture.end.call(this, chunk, encoding, callback)
  const ticket = capture.take()
  // A hook before the handler answered (its 5xx too): nothing was charged, so the retry may run the handler.
  if (ticket !== undefined && capture.tracked && !capture.started)
    capture.settling.protection.settle(ticket, NOT_FORWARDED)
  else if (ticket !== undefined) {
    const { head } = capture
    const headers = head === undefined ? headersOf(this) : relayedHeaders(head.headers)
    settleAnswered(capture.settling, ticket, head?.status ?? sentStatus(this), headers, capture.body.bytes())
  }
  return ended
}

/**
 * The client left before the handler ended its answer. The handler may still end it, and its answer is
 * recorded then, as the proxy reads a backend's answer to its end; at the end of the claim's window it
 * is the unknown outcome (`givenUp`), so that no claim is held for ever.
 */
function capturedClose(this: Captured): void {
  const capture = this[CAPTURE] as NodeCapture
  if (capture.ticket === undefined) return
  capture.timer = setTimeout(givenUp, Math.max(0, capture.until - performance.now()), this)
  capture.timer.unref()
}

/** The window ended with the handler's answer unfinished, its client gone: the outcome is unknown. */
function givenUp(res: Captured): void {
  const capture = res[CAPTURE] as NodeCapture
  const ticket = capture.take()
  if (ticket !== undefined) settleRecorded(capture.settling, ticket, capture.settling.unknownAnswer)
}

/**
 * The status the client got: the one in the head node wrote, once written. `statusCode` may be set after the head
 * went out (`res.status(400).end()` once streaming began), where it says nothing to the client; recorded, a 4xx
 * would release the key of a payment the client saw answered 201, and its retry would run the handler again.
 */
function sentStatus(res: Captured): number {
  const head = res._header
  // `HTTP/1.1 201 Created\r\n...`: the status is the three digits after the version.
  return typeof head === 'string' ? Number(head.slice(9, 12)) : res.statusCode
}

/** The headers the client got, as the proxy records a backend's: hop-by-hop headers and the request id left out. */
function headersOf(res: Captured): string[] {
  const head = res._header
  // No head when the client left before the answer: node writes none on a destroyed response.
  return relayedHeaders(typeof head === 'string' ? headLines(head) : flatHeaders(res.getHeaders()))
}

/** The header lines of a head node wrote, as a flat raw list: node writes each as `name: value\r\n`. */
function headLines(head: string): string[] {
  const raw: string[] = []
  let start = head.indexOf('\r\n') + 2
  for (let end = head.indexOf('\r\n', start); end > start; start = end + 2, end = head.indexOf('\r\n', start)) {
    const colon = head.indexOf(':', start)
    raw.push(head.slice(start, colon), head.slice(colon + 2, end))
  }
  return raw
}

/**
 * The handler of a claimed payment threw (or its promise rejected): it may have charged the card before
 * it threw, so the outcome is unknown, recorded and never released. The client gets that 500 while
 * nothing of an answer has gone out, and it is recorded as written; after that its connection is cut.
 * False when `res` holds no open claim: the caller answers as it would without retry protection.
 */
export function threwOn(res: ServerResponse, error: unknown): boolean {
  const capture = (res as Captured)[CAPTURE]
  if (capture?.ticket === undefined) return false
  const { settling } = capture
  settling.logger?.error({ err: error }, 'payments-gate: the handler of a protected payment threw')
  if (!res.headersSent) {
    // Through the capture: what the client gets is what is recorded.
    writeAnswer(res, settling.threw)
    return true
  }
  settleRecorded(settling, capture.take() as Ticket, recordedOf(settling.threw))
  res.destroy()
  return true
}

/** Whether `res` is a payment's whose claim is still open: its handler's throw is retry protection's to answer. */
export function holdsClaim(res: ServerResponse): boolean {
  return (res as Captured)[CAPTURE]?.ticket !== undefined
}

/** Fastify will mark the start of the handler of the payment on `res` (its route was registered after the plugin). */
export function markTracked(res: ServerResponse): void {
  const capture = (res as Captured)[CAPTURE]
  if (capture !== undefined) capture.tracked = true
}

/** Fastify calls the route's handler of the payment on `res`. */
export function markStarted(res: ServerResponse): void {
  const capture = (res as Captured)[CAPTURE]
  if (capture !== undefined) capture.started = true
}

/**
 * Fastify's `onError`: once the handler started, its reply, not yet sent, is to be the unknown outcome
 * (`threwMarked`); an error before it (a hook, a route schema) is answered as it would be, and settled by its status.
 */
export function markThrew(res: ServerResponse): void {
  const capture = (res as Captured)[CAPTURE]
  if (capture?.ticket !== undefined && capture.started) capture.threw = true
}

/** Whether the reply about to go out on `res` is a claimed payment's whose handler threw. */
export function threwMarked(res: ServerResponse): boolean {
  return (res as Captured)[CAPTURE]?.threw === true
}

/**
 * Captures a handler's `Response` (Hono, the Fetch API): its body is passed on as it streams and kept
 * by reference, and the claim is settled at its end. A `Response` is immutable, so the one returned is
 * new, on the same status and headers.
 */
export function capturedResponse(response: Response, ticket: Ticket, settling: Settling): Response {
  const headers = relayedHeaders(fetchHeaders(response.headers))
  const { body } = response
  if (body === null) {
    settleAnswered(settling, ticket, response.status, headers, NO_BODY)
    return response
  }
  const source = new FetchCapture(body.getReader(), ticket, settling, response.status, headers)
  return new Response(new ReadableStream(source), response)
}

/** The Fetch API's headers as a flat raw list; it gives each `set-cookie` apart. */
function fetchHeaders(headers: Headers): string[] {
  const flat: string[] = []
  for (const [name, value] of headers) flat.push(name, value)
  return flat
}

/** Before the first read: nothing read, more to read. */
const NOTHING_YET: Promise<Uint8Array | undefined> = Promise.resolve(new Uint8Array(0))

/** The body of a handler's `Response`, read from its own reader, passed on and kept. */
class FetchCapture implements UnderlyingSource<Uint8Array> {
  readonly #reader: ReadableStreamDefaultReader<Uint8Array>
  #ticket: Ticket | undefined
  readonly #settling: Settling
  readonly #status: number
  readonly #headers: readonly string[]
  readonly #body = new BoundedBody(MAX_ANSWER_BYTES)
  /** The read under way: `cancel` waits for it, so the chunks are kept in order. */
  #reading = NOTHING_YET
  #cancelled = false

  constructor(
    reader: ReadableStreamDefaultReader<Uint8Array>,
    ticket: Ticket,
    settling: Settling,
    status: number,
    headers: readonly string[],
  ) {
    this.#reader = reader
    this.#ticket = ticket
    this.#settling = settling
    this.#status = status
    this.#headers = headers
  }

  async pull(controller: ReadableStreamDefaultController<Uint8Array>): Promise<void> {
    let chunk: Uint8Array | undefined
    try {
      this.#reading = this.#next()
      chunk = await this.#reading
    } catch (error) {
      this.#failed(error)
      controller.error(error)
      return
    }
    if (this.#cancelled) return
    if (chunk !== undefined) controller.enqueue(chunk)
    else {
      this.#ended()
      controller.close()
    }
  }

  /**
   * The client left: the body is read on to its end all the same, as the proxy reads a backend's, so
   * that the retry gets it; once past what a store keeps, the rest is not read (it would never be replayed).
   */
  async cancel(): Promise<void> {
    this.#cancelled = true
    try {
      let chunk = await this.#reading
      while (chunk !== undefined && !this.#body.over) chunk = await this.#next()
    } catch (error) {
      this.#failed(error)
      return
    }
    if (this.#body.over) this.#reader.cancel().catch(() => undefined)
    this.#ended()
  }

  /**
   * The next chunk, kept; undefined at the end. A stream of strings is no Fetch body, but @hono/node-server writes
   * each to node's response as UTF-8: passed on and kept as those bytes.
   */
  async #next(): Promise<Uint8Array | undefined> {
    const read = await this.#reader.read()
    if (read.done) return undefined
    const value = read.value as Uint8Array | string
    if (typeof value === 'string') {
      const bytes = Buffer.from(value)
      this.#body.add(bytes)
      return bytes
    }
    this.#body.add(Buffer.from(value.buffer, value.byteOffset, value.byteLength))
    return value
  }

  #ended(): void {
    const ticket = this.#take()
    if (ticket !== undefined) settleAnswered(this.#settling, ticket, this.#status, this.#headers, this.#body.bytes())
  }

  /** The handler's body failed mid-answer: as a throw, an unknown outcome. */
  #failed(error: unknown): void {
    const ticket = this.#take()
    if (ticket === undefined) return
    this.#settling.logger?.error({ err: error }, 'payments-gate: the answer body of a protected payment failed')
    settleRecorded(this.#settling, ticket, recordedOf(this.#settling.threw))
  }

  #take(): Ticket | undefined {
    const ticket = this.#ticket
    this.#ticket = undefined
    return ticket
  }
}
