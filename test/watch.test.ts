import t from 'tap'
import { watchFolder } from '../lib/watch.js'

t.test('a reload that throws is logged, and every reload after it still runs', async (t) => {
  const warned: unknown[] = []
  let runs = 0
  const watch = watchFolder(
    t.testdir(),
    async () => {
      runs++
      // A caller's listener that throws, as an application's onPolicyReload might.
      if (runs <= 2) throw new Error(`listener failed ${runs}`)
    },
    { logger: { warn: (fields: unknown) => warned.push(fields) } as never, rescanMs: 60_000 },
  )
  t.teardown(() => watch.close())
  // Red before: the first rejected, and every reload after it was chained on that rejection and never ran.
  await watch.reload()
  t.equal(runs, 1)
  t.match(warned, [{ err: { message: 'listener failed 1' } }])
  await watch.reload()
  await watch.reload()
  t.equal(runs, 3, 'the ones after it ran')
  t.equal(warned.length, 2)
})

t.test(
  'a reload a timer started that throws is logged, not an unhandled rejection that ends the process',
  async (t) => {
    let warn!: (fields: unknown) => void
    const warned = new Promise<unknown>((resolve) => (warn = resolve))
    const watch = watchFolder(t.testdir(), () => Promise.reject(new Error('listener failed')), {
      logger: { warn } as never,
      rescanMs: 5,
    })
    // The re-scan's timer does not hold the process open: this one does, while the test waits for it.
    const alive = setInterval(() => undefined, 1000)
    t.teardown(() => (watch.close(), clearInterval(alive)))
    t.match(await warned, { err: { message: 'listener failed' } })
  },
)
