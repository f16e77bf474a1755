/**
 * The values the options of `serve` and `createGate` may take: the bounds of
 * every number, and the forms of the vendor, the base path and the mode, so
 * that a flag and its library option are checked by the same code.
 */
import { CodedError } from './coded-error.js'
import type { SaleRequest } from './schema/payment.js'

/** The longest delay node's timers hold, in ms (2^31-1): a longer one fires after 1 ms instead (node's timers documentation). */
export const TIMER_MAX_MS = 2 ** 31 - 1

/**
 * The longest `--timeout`, one hour. Every timer made from it stays inside
 * TIMER_MAX_MS with room to spare: the in-flight window (three timeouts and a
 * margin, docs/idempotency.md), the drain (a timeout and a second) and
 * http-proxy-3's request timeout; and a payment held an hour on a silent
 * backend is past any client's own wait.
 */
export const TIMEOUT_MAX_MS = 3_600_000

/**
 * The smallest document the schema takes, of the smaller operation (a sale: a
 * recurring payment needs `intent` too): every string one character, an
 * instrument of another type, amount 0. A body limit below its size would
 * answer every payment 413.
 */
export const SMALLEST_PAYMENT: SaleRequest = {
  transactionReference: 'x',
  merchant: { entity: 'x' },
  instruction: {
    narrative: { line1: 'x' },
    paymentInstrument: { type: 'x' },
    value: { amount: 0, currency: 'XXX' },
  },
}

/** The smallest `--body-limit`: the smallest valid payment, written without spaces. */
export const BODY_LIMIT_MIN = Buffer.byteLength(JSON.stringify(SMALLEST_PAYMENT))

/** A whole number's range and unit, for the message that refuses it. */
export interface Bound {
  readonly unit: string
  readonly min: number
  readonly max: number
}

/** Counts and sizes: whole numbers a double holds exactly. */
const SAFE = Number.MAX_SAFE_INTEGER

/** Whole seconds a timer holds (the shutdown delay, the drain). */
const TIMER_SECONDS = Math.floor(TIMER_MAX_MS / 1000)

/** The range of every numeric option, shared by `serve`'s flags and `createGate`'s options. */
export const BOUNDS = {
  bodyLimit: { unit: 'bytes', min: BODY_LIMIT_MIN, max: SAFE },
  timeout: { unit: 'milliseconds', min: 1, max: TIMEOUT_MAX_MS },
  // Made milliseconds for the store's expiry.
  idempotencyTtl: { unit: 'seconds', min: 1, max: Math.floor(SAFE / 1000) },
  idempotencyReplicas: { unit: 'replicas', min: 0, max: SAFE },
  idempotencyMaxEntries: { unit: 'keys', min: 1, max: SAFE },
  // A timer holds it: the middleware waits at most the window for a handler whose client left (answer-capture.ts).
  idempotencyInFlight: { unit: 'seconds', min: 1, max: TIMER_SECONDS },
  trustProxy: { unit: 'proxies', min: 0, max: SAFE },
  shutdownDelay: { unit: 'seconds', min: 0, max: TIMER_SECONDS },
  drainTimeout: { unit: 'seconds', min: 0, max: TIMER_SECONDS },
  workers: { unit: 'processes (or auto)', min: 1, max: SAFE },
  backendMaxInFlight: { unit: 'payments', min: 1, max: SAFE },
} as const satisfies Readonly<Record<string, Bound>>

/**
 * The bounds past twelve digits, as a power of two: such a run of digits is masked as a card number would be in a
 * command's refusal line (docs/cli.md), and says less to a reader than where it comes from.
 */
const LARGE_BOUNDS: ReadonlyMap<number, string> = new Map([
  [SAFE, '2^53'],
  [Math.floor(SAFE / 1000), '2^53 / 1000'],
])

/** What a value outside `bound` is told: `must be a whole number of bytes from 1 to 9`, or `from 1, below 2^53`. */
export function boundMessage(bound: Bound): string {
  const below = LARGE_BOUNDS.get(bound.max)
  const range = below === undefined ? `from ${bound.min} to ${bound.max}` : `from ${bound.min}, below ${below}`
  return `must be a whole number of ${bound.unit} ${range}`
}

/** Whether a value is a whole number inside `bound`. */
export function inBound(value: unknown, bound: Bound): value is number {
  return Number.isInteger(value) && (value as number) >= bound.min && (value as number) <= bound.max
}

/**
 * A flag's text as a whole number inside `bound` (digits only: no sign, no
 * exponent, no fraction); an `EINVALID` error saying the range otherwise.
 * Digits past what a double holds exactly are refused, never read as Infinity.
 */
export function wholeNumberIn(bound: Bound): (text: string) => number {
  return (text) => {
    const number = /^[0-9]{1,16}$/.test(text) ? Number(text) : Number.NaN
    if (!inBound(number, bound)) throw new CodedError('EINVALID', boundMessage(bound))
    return number
  }
}

/**
 * `createGate`'s numeric options checked as `serve` checks its flags, with the
 * same bounds: an `EINVALID` error naming the option, as a TypeError would.
 */
export function checkBounded(name: keyof typeof BOUNDS, value: unknown): void {
  const bound: Bound = BOUNDS[name]
  if (value !== undefined && !inBound(value, bound))
    throw new CodedError('EINVALID', `${name}=${String(value)} ${boundMessage(bound)}`)
}

/** The vendor goes into a media type: RFC 6838 restricted-name characters only. */
export function parseVendor(value: string): string {
  if (!/^[A-Za-z0-9][A-Za-z0-9!#$&^_.+-]*$/.test(value))
    throw new CodedError('EINVALID', 'must be a media type name (RFC 6838): letters, digits and !#$&^_.+- only')
  return value
}

/**
 * A base path is `/`-separated segments of RFC 3986 path characters (pchar:
 * unreserved, percent-escapes, sub-delims, `:` and `@`), without `.` or `..`
 * segments in any spelling (`%2e%2e` is `..` to WHATWG URL, RFC 3986 6.2.2.2),
 * nor an escaped `/` or `\`, which readers take for a separator or not, so
 * that the path the router matches is the one clients send. A query, a
 * fragment, a space or an empty segment is refused; one leading and trailing
 * slash are optional.
 */
const PCHAR = String.raw`(?:[A-Za-z0-9\-._~!$&'()*+,;=:@]|%[0-9A-Fa-f]{2})`
const BASE_PATH = new RegExp(String.raw`^\/?(?:${PCHAR}+\/)*${PCHAR}*$`)
const DOT_SEGMENT = /^(?:\.|%2e){1,2}$/i
const ESCAPED_SEPARATOR = /%(?:2f|5c)/i

export function parseBasePath(value: string): string {
  const segments = value.replace(/^\/|\/$/g, '').split('/')
  if (
    !BASE_PATH.test(value) ||
    ESCAPED_SEPARATOR.test(value) ||
    segments.some((segment) => DOT_SEGMENT.test(segment))
  ) {
    throw new CodedError(
      'EINVALID',
      "must be a path such as /api/v1: segments of letters, digits and -._~!$&'()*+,;=:@ or %XX, no query, no spaces, no . or .. segments, no escaped / or \\",
    )
  }
  return value
}

const MODES: readonly string[] = ['enforce', 'report']

function parseMode(value: string): string {
  if (!MODES.includes(value)) throw new CodedError('EINVALID', 'must be enforce or report')
  return value
}

/**
 * `createGate`'s options checked with the parsers and bounds of `serve`'s
 * flags (one validation for both): an `EINVALID` error naming the option and
 * saying what to give, before the gate opens anything.
 */
export function checkGateOptions(options: {
  readonly bodyLimit?: unknown
  readonly vendor?: unknown
  readonly basePath?: unknown
  readonly mode?: unknown
}): void {
  checkBounded('bodyLimit', options.bodyLimit)
  const texts: [name: string, value: unknown, parse: (text: string) => string][] = [
    ['vendor', options.vendor, parseVendor],
    ['basePath', options.basePath, parseBasePath],
    ['mode', options.mode, parseMode],
  ]
  for (const [name, value, parse] of texts) {
    if (value === undefined) continue
    try {
      if (typeof value !== 'string') throw new CodedError('EINVALID', 'must be a string')
      parse(value)
    } catch (error) {
      throw new CodedError('EINVALID', `${name}=${JSON.stringify(value)} ${(error as Error).message}`)
    }
  }
}
