import type { Test } from 'tap'

/**
 * Records every unhandled rejection and uncaught exception of this test
 * process from now on. The function returned adds the test asserting there
 * were none; call it last, once the rest has been queued: a gateway that
 * crashed or leaked a rejection under hostile input fails it.
 */
export function watchCrashes(t: Test): () => void {
  const crashes: unknown[] = []
  const record = (error: unknown) => crashes.push(error)
  process.on('unhandledRejection', record)
  process.on('uncaughtException', record)
  t.teardown(() => {
    process.off('unhandledRejection', record)
    process.off('uncaughtException', record)
  })
  return () => {
    t.test('no crash, no unhandled rejection', async (t) => {
      t.same(crashes.map(String), [])
    })
  }
}
