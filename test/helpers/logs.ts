/** What the code under test logs, and what a test process must not do: crash or leak a rejection. */
import { Writable } from 'node:stream'
import type { Test } from 'tap'
import { createLogger, type Logger } from '../../lib/log.js'
import { luhnValid } from '../../lib/luhn.js'

/** Every log line written by a logger of `captureLogger`, in this test process. */
export const logLines: string[] = []

/** The gateway's real logger, writing into `logLines`. */
export function captureLogger(): Logger {
  const destination = new Writable({
    write(chunk: Buffer, _encoding, done) {
      for (const line of chunk.toString('utf8').split('\n')) if (line !== '') logLines.push(line)
      done()
    },
  })
  return createLogger({ destination })
}

/** Log lines as objects, for assertions on their fields. */
export function loggedRequests(): Record<string, unknown>[] {
  return logLines.map((line) => JSON.parse(line) as Record<string, unknown>)
}

/** Asserts that no captured log line holds a whole card number (any Luhn-valid run of 12 to 19 digits). */
export function scanLogsForCards(t: Test): void {
  t.test('no log line holds a whole card number', async (t) => {
    t.ok(logLines.length > 0, 'lines were logged')
    const whole = logLines.filter((line) => (line.match(/[0-9]{12,19}/g) ?? []).some(luhnValid))
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
