/** What the code under test logs, and what a test process must not do: crash or leak a rejection. */
import { Writable } from 'node:stream'
import type { Test } from 'tap'
import { maskCardNumbers } from '../../lib/card-mask.js'
import { createLogger, type Logger } from '../../lib/log.js'
import { luhnValid } from '../../lib/luhn.js'

/** Every log line written by a logger of `captureLogger`, in this test process. */
export const logLines: string[] = []

/** The password a test gives a Redis that requires one (and the wrong one it tries): neither may reach a line. */
export const TEST_REDIS_PASSWORD = 'redis-test-password-3f9c'
export const WRONG_REDIS_PASSWORD = 'redis-wrong-password-8d21'

/** Every Luhn-valid card number of the fixtures and cases (the Luhn-invalid ones are refused before any log). */
const TEST_CARD_NUMBERS = ['4444333322221111', '4111111111111111', '5105105105105100', '6000000000000000004']

/**
 * What a line says once decoded as a reader would (percent-escapes, a `+`
 * for a space, JSON's `\u` escapes), with only its digits and the masking
 * stars kept: a card number in any spelling is its digits in a row here.
 */
function digitsOf(line: string): string {
  let text = line
  for (let pass = 0; pass < 3 && text.includes('%25'); pass++) text = text.replaceAll('%25', '%')
  text = text.replace(/%3([0-9])/g, '$1').replace(/\\u003([0-9])/g, '$1')
  return text.replace(/%[0-9A-Fa-f]{2}|\\u[0-9A-Fa-f]{4}/g, ' ').replace(/[^0-9*]/g, '')
}

/** The secret a line holds: a test card number in any spelling, or a test Redis password; undefined when none. */
export function secretIn(line: string): string | undefined {
  for (const password of [TEST_REDIS_PASSWORD, WRONG_REDIS_PASSWORD])
    if (line.includes(password) || line.includes(encodeURIComponent(password))) return password
  const digits = digitsOf(line)
  return TEST_CARD_NUMBERS.find((number) => digits.includes(number))
}

/** Lines of this process's logs (captured loggers, spawned gateways) that hold a secret. */
const leaked: string[] = []
let watching = false

/**
 * Every log line the suite captures is scanned as it comes: one that holds a
 * test card number or a test Redis password fails the test file at its end,
 * whichever test wrote it (the exit code, and the lines on stderr).
 */
export function scanLine(line: string): void {
  if (secretIn(line) === undefined) return
  leaked.push(line)
  if (watching) return
  watching = true
  process.once('exit', () => {
    // Said without the secrets themselves: the test output is a log of its own.
    const shown = leaked.map((line) =>
      [TEST_REDIS_PASSWORD, WRONG_REDIS_PASSWORD, ...TEST_CARD_NUMBERS].reduce(
        (text, secret) => text.replaceAll(secret, '[secret]'),
        maskCardNumbers(line),
      ),
    )
    console.error('log lines holding a test card number (in some spelling) or a test Redis password:', shown)
    process.exitCode = 1
  })
}

/** The gateway's real logger, writing into `logLines`; every line scanned for secrets (scanLine). */
export function captureLogger(): Logger {
  const destination = new Writable({
    write(chunk: Buffer, _encoding, done) {
      for (const line of chunk.toString('utf8').split('\n')) {
        if (line === '') continue
        logLines.push(line)
        scanLine(line)
      }
      done()
    },
  })
  return createLogger({ destination })
}

/** Log lines as objects, for assertions on their fields. */
export function loggedRequests(): Record<string, unknown>[] {
  return logLines.map((line) => JSON.parse(line) as Record<string, unknown>)
}

/**
 * Asserts that no captured log line holds a whole card number: no Luhn-valid
 * run of 12 to 19 digits, and no test card number in any spelling.
 */
export function scanLogsForCards(t: Test): void {
  t.test('no log line holds a whole card number', async (t) => {
    t.ok(logLines.length > 0, 'lines were logged')
    const whole = logLines.filter(
      (line) => (line.match(/[0-9]{12,19}/g) ?? []).some(luhnValid) || secretIn(line) !== undefined,
    )
    t.same(whole, [])
  })
}

/** A middleware logger that keeps what it is given. */
export function memoryLogger(): {
  lines: { object: object; message?: string }[]
  info(): void
  warn(): void
  error(object: object, message?: string): void
} {
  const lines: { object: object; message?: string }[] = []
  return { lines, info() {}, warn() {}, error: (object, message) => lines.push({ object, message }) }
}

/**
 * Records every unhandled rejection and uncaught exception of this test
 * process from now on. The function returned adds the test asserting there
 * were none; call it last, once the rest has been queued: a gateway that
 * crashed or leaked a rejection under hostile input fails it. A test file that
 * throws before it gets there (its data missing, a server that did not start)
 * would otherwise end with no test and exit 0, which tap reports as a skip:
 * the exit code says it failed instead.
 */
export function watchCrashes(t: Test): () => void {
  const crashes: unknown[] = []
  const record = (error: unknown) => crashes.push(error)
  process.on('unhandledRejection', record)
  process.on('uncaughtException', record)
  let queued = false
  process.once('exit', () => {
    if (queued) return
    console.error('the test file ended before it queued its crash check:', crashes)
    process.exitCode = 1
  })
  t.teardown(() => {
    process.off('unhandledRejection', record)
    process.off('uncaughtException', record)
  })
  return () => {
    queued = true
    t.test('no crash, no unhandled rejection', async (t) => {
      t.same(crashes.map(String), [])
    })
  }
}
