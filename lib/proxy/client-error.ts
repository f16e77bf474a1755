import { STATUS_CODES } from 'node:http'
import type { Socket } from 'node:net'
import type { Duplex } from 'node:stream'
import { ERROR_CONTENT_TYPE, reject, serializeError, type ErrorName, type Rejection } from '../errors.js'

/** Which refusal a parser or timeout error of node's HTTP server is (CONTRACT.md, "Refusals below HTTP"). */
export function clientErrorName(code: string | undefined): ErrorName {
  if (code === 'HPE_HEADER_OVERFLOW') return 'headersAreTooLarge'
  if (code === 'ERR_HTTP_REQUEST_TIMEOUT' || code === 'HPE_HEADERS_TIMEOUT') return 'requestTimedOut'
  return 'requestIsMalformed'
}

/** The whole answer as bytes: there is no response object below HTTP, only the socket. */
export function rawAnswer(rejection: Rejection): string {
  const payload = serializeError(rejection.body)
  return (
    `HTTP/1.1 ${rejection.status} ${STATUS_CODES[rejection.status]}\r\n` +
    `Content-Type: ${ERROR_CONTENT_TYPE}\r\nContent-Length: ${Buffer.byteLength(payload)}\r\nConnection: close\r\n\r\n${payload}`
  )
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
    answered = reject(clientErrorName(error.code))
    socket.write(rawAnswer(answered))
  }
  // An HTTP server's sockets are net sockets: close once the answer is flushed.
  ;(socket as Socket).destroySoon()
  return answered
}
