import type { Socket } from 'node:net'
import type { Duplex } from 'node:stream'
import { reject, type ErrorName } from '../errors.js'
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

interface SocketWithMessage extends Duplex {
  /**
   * The first response on this socket still to be written, if any (an internal of node's HTTP
   * server, which queues the answers to pipelined requests behind it), and its request.
   */
  _httpMessage?: { headersSent: boolean; req: { complete: boolean } } | null
}

/**
 * The `clientError` handler: what node's parser refused (malformed requests,
 * smuggling shapes, oversized headers, HTTP/2's preface) or what came too
 * slowly gets an error body, or the HTTP/2 refusal, then the connection is
 * closed. Nothing is written while an answer to an earlier request on this
 * socket is pending, whole requests whose answers are started or still to
 * come (a payment at the backend, pipelined, RFC 9112 9.6): the client would
 * read the refusal as that answer. Only the request still being received,
 * whose answer has not started (a body that came too slowly or malformed),
 * is answered, as node's own handler does.
 */
export function answerClientError(error: NodeJS.ErrnoException, socket: Duplex): BelowHttpAnswer | undefined {
  const inFlight = (socket as SocketWithMessage)._httpMessage
  const pending = inFlight !== undefined && inFlight !== null && (inFlight.headersSent || inFlight.req.complete)
  let answered: BelowHttpAnswer | undefined
  if (error.code !== 'ECONNRESET' && socket.writable && !pending) {
    if (error.code === HTTP2_PREFACE) {
      socket.write(HTTP2_REFUSAL)
      answered = HTTP2_REFUSED
    } else {
      const rejection = reject(clientErrorName(error.code), { close: true })
      socket.write(rawAnswer(answerOf(rejection)))
      answered = { status: rejection.status, errorName: rejection.body.errorName }
    }
  }
  // An HTTP server's sockets are net sockets: close once the answer is flushed.
  ;(socket as Socket).destroySoon()
  return answered
}
