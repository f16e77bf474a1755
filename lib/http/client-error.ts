import type { Socket } from 'node:net'
import type { Duplex } from 'node:stream'
import { closing, reject, type ErrorName, type Rejection } from '../errors.js'
import { answerOf, rawAnswer } from './answer.js'

/** Which refusal a parser or timeout error of node's HTTP server is (docs/checks.md, refusals below HTTP). */
export function clientErrorName(code: string | undefined): ErrorName {
  if (code === 'HPE_HEADER_OVERFLOW') return 'headersAreTooLarge'
  if (code === 'ERR_HTTP_REQUEST_TIMEOUT' || code === 'HPE_HEADERS_TIMEOUT') return 'requestTimedOut'
  return 'requestIsMalformed'
}

/** What a refusal below HTTP answered, for its log line and metrics. */
export interface BelowHttpAnswer {
  /** The HTTP status answered; 0 when the answer was not HTTP/1.1 (the HTTP/2 preface's). */
  readonly status: number
  readonly errorName: string
}

/** node's parser pauses on HTTP/2's connection preface, `PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n` (RFC 9113, section 3.4). */
const HTTP2_PREFACE = 'HPE_PAUSED_H2_UPGRADE'

/**
 * What RFC 9113 asks of a server that will not speak HTTP/2 to a client that
 * starts with it: its own preface, an empty SETTINGS frame (section 3.4), then
 * GOAWAY with last stream id 0 and HTTP_1_1_REQUIRED, 0xd (sections 6.8 and 7).
 * Each frame is a 9-byte header (length, type, flags, stream id 0), then its payload.
 */
const HTTP2_REFUSAL = Buffer.from([
  ...[0, 0, 0, 0x4, 0, 0, 0, 0, 0],
  ...[0, 0, 8, 0x7, 0, 0, 0, 0, 0],
  ...[0, 0, 0, 0, 0, 0, 0, 0xd],
])
/** How the HTTP/2 refusal is logged and counted: no HTTP status, and HTTP/2's own name for its error code. */
const HTTP2_REFUSED: BelowHttpAnswer = { status: 0, errorName: 'HTTP_1_1_REQUIRED' }

/** What the refusals read of a socket's pending response (pendingResponse, below). */
interface InFlight {
  headersSent: boolean
  shouldKeepAlive: boolean
  readonly req: { readonly complete: boolean }
  prependOnceListener(event: 'finish', listener: () => void): unknown
}

/**
 * The first response on `socket` still to be written, if any, and its request: an internal of node's HTTP server
 * (`_httpMessage`), which queues the answers to pipelined requests behind it.
 */
export function pendingResponse<Response = InFlight>(socket: Duplex): Response | undefined {
  return (socket as { _httpMessage?: Response | null })._httpMessage ?? undefined
}

/**
 * The `clientError` handler: what node's parser refused (malformed requests,
 * smuggling shapes, oversized headers, HTTP/2's preface) or what came too
 * slowly gets an error body, or the HTTP/2 refusal, then the connection is
 * closed. Nothing is written while an answer to an earlier request on this
 * socket is pending, whole requests whose answers are started or still to
 * come (a payment at the backend, pipelined, RFC 9112 9.6): the client would
 * read the refusal as that answer. Bytes the parser refused after such a
 * whole request (a request pipelined behind it, anything after `Connection:
 * close`, one that came too slowly) are not processed: its answer is sent, then the connection closed
 * (RFC 9112 9.6), as cutting it would lose a charged payment's answer and
 * its client would pay again. Only the request still being received, whose
 * answer has not started (a body that came too slowly or malformed), is
 * answered, as node's own handler does.
 */
export function answerClientError(error: NodeJS.ErrnoException, socket: Duplex): BelowHttpAnswer | undefined {
  if (error.code === 'ECONNRESET') return refuseOnSocket(socket, undefined)
  if (error.code === HTTP2_PREFACE) return refuseOnSocket(socket, HTTP2_WRITTEN)
  // Behind a whole request, refused bytes and a timeout (a head that trickles) alike wait for its answer, then the close.
  if (closedAfterAnswer(socket)) return undefined
  return refuseOnSocket(socket, written(reject(clientErrorName(error.code), { close: true })))
}

/** The sockets whose connection ends with the answer pending on them: refused bytes after it change nothing. */
const ENDING = new WeakSet<Duplex>()

/**
 * When the request whose answer is pending on `socket` came whole, that answer is made the connection's last: it
 * says `Connection: close` when its head is still to be written, and the socket is closed once it is sent, before
 * node hands the socket to the answer of a request pipelined behind it, which is so never handled (pipelining.ts).
 */
function closedAfterAnswer(socket: Duplex): boolean {
  const inFlight = pendingResponse(socket)
  if (inFlight === undefined || !inFlight.req.complete) return false
  if (ENDING.has(socket)) return true
  ENDING.add(socket)
  inFlight.shouldKeepAlive = false
  inFlight.prependOnceListener('finish', () => (socket as Socket).destroySoon())
  return true
}

/**
 * The `connect` handler: a gateway in front of a backend opens no tunnels (RFC 9110 9.3.6), and node closes a
 * CONNECT no listener takes without a word. Its refusal is the route's (`Checks.route`): 405 on an operation's
 * path (another method than POST), otherwise 400 `requestIsMalformed`, as for every target that is not origin or
 * absolute form (`host:443`, the form CONNECT takes). The connection is closed after it, as `answerClientError` says.
 */
export function answerConnect(socket: Duplex, route: Rejection | string | undefined): BelowHttpAnswer | undefined {
  if (closedAfterAnswer(socket)) return undefined
  return refuseOnSocket(socket, written(closing(typeof route === 'object' ? route : MALFORMED)))
}

const MALFORMED = reject('requestIsMalformed')

/** A refusal's bytes, and how it is logged. */
interface Written {
  readonly bytes: Buffer
  readonly answered: BelowHttpAnswer
}

const HTTP2_WRITTEN: Written = { bytes: HTTP2_REFUSAL, answered: HTTP2_REFUSED }

function written(rejection: Rejection): Written {
  return {
    bytes: rawAnswer(answerOf(rejection)),
    answered: { status: rejection.status, errorName: rejection.body.errorName },
  }
}

/** Writes a refusal on a socket node's HTTP server has let go of, unless an answer on it is pending; then closes it. */
function refuseOnSocket(socket: Duplex, refusal: Written | undefined): BelowHttpAnswer | undefined {
  const inFlight = pendingResponse(socket)
  const pending = inFlight !== undefined && (inFlight.headersSent || inFlight.req.complete)
  const answered = refusal !== undefined && socket.writable && !pending ? refusal : undefined
  if (answered !== undefined) socket.write(answered.bytes)
  // An HTTP server's sockets are net sockets: close once the answer is flushed.
  ;(socket as Socket).destroySoon()
  return answered?.answered
}
