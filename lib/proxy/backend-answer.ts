import { defaultName, valueAt, type BackendErrorRule, type BackendErrorRules } from '../backend-errors/rules.js'
import { maskCardNumbers } from '../card-mask.js'
import { WWW_AUTHENTICATE } from '../checks/auth.js'
import { definedRejection, reject, type Rejection } from '../errors.js'
import { answerOf, flatHeaders } from '../http/answer.js'
import { relayedHeaders } from './hop-by-hop.js'

/**
 * The one place that decides what the client gets of a backend's answer
 * (docs/backend-faults.md): both relays ask it, and retry protection records
 * what it decided, so a replay is what the client first got.
 */

/** What the client gets of a backend answer that was read whole before anything went out. */
export interface ClientAnswer {
  readonly status: number
  /** A flat raw list, [name, value, ...], free of hop-by-hop headers. */
  readonly headers: string[]
  readonly body: Buffer
  /** The name the answer was given when its body was replaced; undefined when the backend's own error body went on. */
  readonly errorName: string | undefined
}

/**
 * Whether an answer is read whole before anything of it goes out: every
 * error on the two operations, a 5xx on any other path. Everything else (2xx,
 * 3xx) streams through unbuffered.
 */
export function inspected(status: number, onOperation: boolean): boolean {
  return status >= (onOperation ? 400 : 500) || (onOperation && resendsPayment(status))
}

/**
 * A redirect that keeps the method and body (307, 308: RFC 9110 15.4.8, 15.4.9), which a client follows by itself
 * (fetch does), sending the payment again, to wherever `Location` says. On a payment it is answered as a 5xx whose
 * outcome is unknown, `Location` dropped: the gateway cannot tell what the backend did (docs/backend-faults.md).
 */
export function resendsPayment(status: number): boolean {
  return status === 307 || status === 308
}

/**
 * What the client gets of an error answer, from its status, raw headers and
 * body (`undefined` when it went past the read limit). A body in the error
 * format goes on with card numbers masked; any other becomes the standard
 * body with the backend's status, named by the first matching rule or by
 * status, keeping the headers that status needs. `serverError`, given for a
 * payment: the message of a body named `internalErrorOccurred` by status (a
 * payment's 5xx, whose outcome is unknown: faults.ts); a rule's message is
 * never replaced. A status past 599 is none (RFC 9110 15: a client reads it as a 5xx), so it becomes a 500,
 * as a payment's 307 and 308 do. A payment's 5xx but 503 keeps no `Retry-After`: it may have
 * been charged, and a client that obeys the header would pay twice
 * (docs/idempotency.md, the words of an unknown outcome).
 */
export function clientAnswer(
  backendStatus: number,
  raw: readonly string[],
  body: Buffer | undefined,
  rules: BackendErrorRules,
  serverError?: string,
): ClientAnswer {
  const status = resendsPayment(backendStatus) || backendStatus > 599 ? 500 : backendStatus
  const headers = serverError !== undefined && status >= 500 && status !== 503 ? withoutRetryAfter(raw) : raw
  const document = body === undefined ? undefined : parsed(body)
  if (status === backendStatus && isErrorFormat(document)) {
    const text = (body as Buffer).toString('utf8')
    const masked = maskCardNumbers(text)
    const passed = masked === text ? (body as Buffer) : Buffer.from(masked)
    return {
      status,
      headers: maskedHeaders(relayedHeaders(headers, passed.length)),
      body: passed,
      errorName: undefined,
    }
  }
  const rejection = replacement(status, headers, document, rules, serverError)
  const answer = answerOf(rejection)
  return { status, headers: maskedHeaders(flatHeaders(answer)), body: answer.body, errorName: rejection.body.errorName }
}

/** The reason phrase `answer` goes out with: the backend's `reason` while its status is kept, else node's own for the new status. */
export function reasonOf(answer: ClientAnswer, backendStatus: number, reason: string | undefined): string | undefined {
  return answer.status === backendStatus ? reason : undefined
}

/** A header list, [name, value, ...], each name's and value's card numbers masked as the body's are: recorded and replayed too. */
function maskedHeaders(headers: string[]): string[] {
  for (let i = 0; i < headers.length; i++) headers[i] = maskedHeaderText(headers[i] as string)
  return headers
}

/** A byte outside ASCII, in a header's text as node gives it: one character a byte (latin1). */
const NOT_ASCII = /[^\x00-\x7f]/

/**
 * A header's text with its card numbers masked, read as its bytes are and, when it holds bytes outside ASCII, as
 * UTF-8 too, as a client may decode them (`４１１１...`, docs/logs-and-metrics.md: a decimal digit of any script).
 */
function maskedHeaderText(text: string): string {
  const masked = maskCardNumbers(text)
  if (!NOT_ASCII.test(masked)) return masked
  const decoded = Buffer.from(masked, 'latin1').toString('utf8')
  const shown = maskCardNumbers(decoded)
  return shown === decoded ? masked : Buffer.from(shown, 'utf8').toString('latin1')
}

/** A header list, [name, value, ...], without its `Retry-After`. */
function withoutRetryAfter(raw: readonly string[]): readonly string[] {
  const kept: string[] = []
  for (let i = 0; i < raw.length; i += 2)
    if ((raw[i] as string).toLowerCase() !== 'retry-after') kept.push(raw[i] as string, raw[i + 1] as string)
  return kept
}

/** The body as JSON, or undefined when it is not JSON (JSON itself never yields undefined). */
function parsed(body: Buffer): unknown {
  try {
    return JSON.parse(body.toString('utf8'))
  } catch {
    return undefined
  }
}

/** The error format: a JSON object with string `errorName` and `message`. */
function isErrorFormat(document: unknown): boolean {
  if (typeof document !== 'object' || document === null) return false
  const { errorName, message } = document as Record<string, unknown>
  return typeof errorName === 'string' && typeof message === 'string'
}

function replacement(
  status: number,
  raw: readonly string[],
  document: unknown,
  rules: BackendErrorRules,
  serverError: string | undefined,
): Rejection {
  const headers = neededHeaders(status, raw)
  const rule = firstMatch(rules.rules, status, document)
  if (rule === undefined) {
    const name = defaultName(status)
    return reject(name, { status, headers, message: name === 'internalErrorOccurred' ? serverError : undefined })
  }
  const copied = rule.messageFrom === undefined ? undefined : valueAt(document, rule.messageFrom)
  const message = typeof copied === 'string' && copied !== '' ? maskCardNumbers(copied) : rule.message
  return definedRejection(rule.errorName, message, status, headers)
}

function firstMatch(
  rules: readonly BackendErrorRule[],
  status: number,
  document: unknown,
): BackendErrorRule | undefined {
  for (const rule of rules) {
    if (status < rule.from || status > rule.to) continue
    let matches = true
    for (const { path, value } of rule.match) {
      if (valueAt(document, path) !== value) {
        matches = false
        break
      }
    }
    if (matches) return rule
  }
  return undefined
}

/** The backend's headers that a replaced answer keeps, lower case, as sent, and the status each needs (0: any). */
const NEEDED = new Map<string, readonly [name: string, status: number]>([
  ['retry-after', ['Retry-After', 0]],
  ['www-authenticate', ['WWW-Authenticate', 401]],
  ['allow', ['Allow', 405]],
])

/**
 * The backend's headers that the replaced answer keeps: `Retry-After`, still
 * telling the client when to come back; `WWW-Authenticate` on a 401 (RFC 9110
 * 15.5.2 requires one: the gateway's own when the backend sent none); `Allow`
 * on a 405 (RFC 9110 15.5.6). Repeats are joined as one list.
 */
function neededHeaders(status: number, raw: readonly string[]): Record<string, string> | undefined {
  let headers: Record<string, string> | undefined
  for (let i = 0; i < raw.length; i += 2) {
    const needed = NEEDED.get((raw[i] as string).toLowerCase())
    if (needed === undefined || (needed[1] !== 0 && needed[1] !== status)) continue
    const [name] = needed
    headers ??= {}
    const earlier = headers[name]
    headers[name] = earlier === undefined ? (raw[i + 1] as string) : `${earlier}, ${raw[i + 1] as string}`
  }
  if (status === 401 && headers?.['WWW-Authenticate'] === undefined)
    headers = { ...headers, 'WWW-Authenticate': WWW_AUTHENTICATE }
  return headers
}
