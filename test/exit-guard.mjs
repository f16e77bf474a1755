// In every test file's process (package.json's tap `node-arg`, after test/typescript.mjs): once the file's tests are
// complete, the process must exit on its own. tap's runner stops timing a file that has printed its end, so a file
// that leaves a server, a socket or a client open would hold `npm test` for ever; this fails it instead, naming what
// is still open. The timer is unref'd: it never keeps a process alive that would exit.
//
// A process that ends before its tests do shows in tap's results only as "test unfinished": this says why, as a TAP
// comment in the file's results (.ci/run prints it), since tap's own account of an uncaught error goes to stderr.
import { inspect } from 'node:util'
import t from 'tap'

const GRACE_MS = 60_000

let complete = false
let drained = false
/** The last error no code caught, as Node reported it to its monitor. */
let uncaught

t.on('complete', () => {
  complete = true
  const timer = setTimeout(() => {
    process.stderr.write(
      `exit-guard: ${GRACE_MS / 1000} s after its tests ended, this file's process has not exited; still open: ${process.getActiveResourcesInfo().join(', ')}\n`,
    )
    process.exit(1)
  }, GRACE_MS)
  timer.unref()
})

process.on('uncaughtExceptionMonitor', (error, origin) => {
  uncaught = `${origin}: ${inspect(error)}`
})
process.on('beforeExit', () => {
  drained = true
})
process.on('exit', (code) => {
  if (complete) return
  const why =
    uncaught !== undefined
      ? `the last uncaught error (${uncaught})`
      : drained
        ? 'the event loop emptied: a test or a teardown awaits a promise that nothing still open can settle'
        : `process.exit(${code}) or a fatal error`
  const comment = `exit-guard: this file's process ended before its tests did, after ${why}`
  process.stderr.write(`${comment}\n`)
  process.stdout.write(`\n# ${comment.replaceAll('\n', '\n# ')}\n`)
})
