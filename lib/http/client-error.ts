import type { Socket } from 'node:net'
import type { Duplex } from 'node:stream'
import { reject, type ErrorName, type Rejection } from '../errors.js'
import { answerOf, rawAnswer } from './answer.js'

/** Which refusal a parser or timeout error of node's HTTP server is (docs/checks.md, refusals below HTTP). */
export function clientErrorName(code: string | undefined): ErrorName {
  if (code === 'HPE_HEADER_OVERFLOW') return 'headersAreTooLarge'
  if (code === 'ERR_HTTP_REQUEST_TIMEOUT' || code === 'HPE_HEADERS_TIMEOUT') return 'requestTimedOut'
  return 'requestIsMalformed'
}

interface SocketWithMessage extends Duplex {
  /** The response node is writing on this socket, if any (an internal of node's HTTP server). */
  _httpMessage?: { headersSent: boolean } | null
}

/**
 * The `clientError` handler: what node's parser refused (malformed requests,
 * smuggling shapes, oversized headers) or what came too slowly gets an error
 * body, then the connection is closed. As node's own handler does, nothing is
 * written once a response on this socket has started: that would corrupt it.
 */
export function answerClientError(error: NodeJS.ErrnoException, socket: Duplex): Rejection | undefined {
  const inFlight = (socket as SocketWithMessage)._httpMessage
  let answered: Rejection | undefined
  if (error.code !== 'ECONNRESET' && socket.writable && !inFlight?.headersSent) {
    answered = reject(clientErrorName(error.code), { close: true })
    socket.write(rawAnswer(answerOf(answered)))
  }
  // An HTTP server's sockets are net sockets: close once the answer is flushed.
  ;(socket as Socket).destroySoon()
  return answered
}
