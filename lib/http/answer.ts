import { STATUS_CODES, type OutgoingHttpHeaders, type ServerResponse } from 'node:http'
import {
  ERROR_CONTENT_TYPE,
  reject,
  serializeError,
  type ErrorName,
  type Rejection,
  type RejectOptions,
} from '../errors.js'

/** A refusal as it goes on the wire: every surface writes exactly this, and nothing else. */
export interface Answer {
  readonly status: number
  readonly headers: OutgoingHttpHeaders
  readonly body: Buffer
}

/**
 * The one function that turns a rejection into an answer: its status, the
 * error body from the one serializer, `Content-Type`, `Content-Length`, the
 * rejection's own headers, and `Connection: close` when its body was not read.
 */
export function answerOf(rejection: Rejection): Answer {
  const body = Buffer.from(serializeError(rejection.body))
  const headers: OutgoingHttpHeaders = { 'content-type': ERROR_CONTENT_TYPE, 'content-length': body.length }
  if (rejection.headers !== undefined) Object.assign(headers, rejection.headers)
  if (rejection.close === true) headers.connection = 'close'
  return { status: rejection.status, headers, body }
}

/** Writes an answer on a node response. Too late for a status once the head is out: cutting the connection is the only honest answer. */
export function writeAnswer(res: ServerResponse, answer: Answer): void {
  if (res.headersSent) {
    res.destroy()
    return
  }
  res.writeHead(answer.status, answer.headers)
  res.end(answer.body)
}

/** Answers a refusal on a node response. */
export function sendRejection(res: ServerResponse, rejection: Rejection): void {
  writeAnswer(res, answerOf(rejection))
}

/**
 * For a service's own code: answer any error of the table in the standard
 * format, e.g. `sendError(res, 'entityIsNotConfigured')`.
 */
export function sendError(res: ServerResponse, errorName: ErrorName, options?: RejectOptions): void {
  sendRejection(res, reject(errorName, options))
}

/** The answer's headers as a flat raw list [name, value, ...], the shape a relayed or recorded answer keeps them in. */
export function flatHeaders(answer: Answer): string[] {
  const headers: string[] = []
  for (const name of Object.keys(answer.headers)) headers.push(name, String(answer.headers[name]))
  return headers
}

/** The answer as raw HTTP/1.1 bytes, for below HTTP, where there is only the socket (it always closes). */
export function rawAnswer(answer: Answer): Buffer {
  let head = `HTTP/1.1 ${answer.status} ${STATUS_CODES[answer.status]}\r\n`
  for (const name of Object.keys(answer.headers)) head += `${name}: ${String(answer.headers[name])}\r\n`
  return Buffer.concat([Buffer.from(`${head}\r\n`, 'latin1'), answer.body])
}
