import type { Test } from 'tap'

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
