// What every server child shares: listen on loopback, report the port to the
// parent, answer questions on its memory, CPU time, garbage collection and requests
// served, profile itself on request, and leave when the parent says so or goes away.
import { writeFileSync } from 'node:fs'
import { Session } from 'node:inspector'
import { PerformanceObserver } from 'node:perf_hooks'

/** The time the process has spent paused for garbage collection, in microseconds. */
let gcUs = 0
new PerformanceObserver((list) => {
  for (const entry of list.getEntries()) gcUs += entry.duration * 1000
}).observe({ entryTypes: ['gc'] })

export async function serve(server) {
  let requests = 0
  server.on('request', () => requests++)
  await new Promise((resolve, reject) => {
    server.once('error', reject)
    server.listen(0, '127.0.0.1', resolve)
  })
  process.on('message', (message) => {
    if (message === 'memory') process.send({ memory: process.memoryUsage().rss })
    if (message === 'requests') process.send({ requests })
    if (message === 'gc') process.send({ gc: gcUs })
    // A full collection promotes what is live now, as the first mark-compact of a long-lived process does.
    if (message === 'collect') {
      globalThis.gc?.()
      process.send({ collected: globalThis.gc !== undefined })
    }
    if (message === 'cpu') {
      const { user, system } = process.cpuUsage()
      process.send({ cpu: user + system })
    }
    if (message === 'kernel') process.send({ kernel: process.cpuUsage().system })
    if (message?.profile === 'start') startProfile(() => requests)
    if (message?.profile === 'stop') stopProfile(message.file, () => requests)
    if (message === 'stop') {
      server.close(() => process.exit(0))
      server.closeAllConnections()
    }
  })
  process.on('disconnect', () => process.exit(0))
  process.send({ port: server.address().port })
}

let profiling

/** A sample every 100 us instead of V8's default 1 ms: a refusal takes tens of microseconds, and a few seconds of rounds would give few samples of each function. */
const SAMPLING_US = 100

/** V8's sampling profiler, started from inside: only the measured rounds are profiled, not warm-up or the memory phase. */
function startProfile(requests) {
  const session = new Session()
  session.connect()
  session.post('Profiler.enable', () =>
    session.post('Profiler.setSamplingInterval', { interval: SAMPLING_US }, () =>
      session.post('Profiler.start', () => process.send({ profiling: true })),
    ),
  )
  profiling = { session, from: requests() }
}

/** Writes the profile to `file`; answers how many requests it covers. */
function stopProfile(file, requests) {
  const { session, from } = profiling
  session.post('Profiler.stop', (error, result) => {
    if (error === null) writeFileSync(file, JSON.stringify(result.profile))
    session.disconnect()
    process.send({ profiled: error === null ? requests() - from : 0 })
  })
}

/** The backend's URL, given by the parent. */
export const target = () => process.env.BENCH_TARGET
