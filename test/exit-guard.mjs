// In every test file's process (package.json's tap `node-arg`, after test/typescript.mjs): once the file's tests are
// complete, the process must exit on its own. tap's runner stops timing a file that has printed its end, so a file
// that leaves a server, a socket or a client open would hold `npm test` for ever; this fails it instead, naming what
// is still open. The timer is unref'd: it never keeps a process alive that would exit.
import t from 'tap'

const GRACE_MS = 60_000

t.on('complete', () => {
  const timer = setTimeout(() => {
    process.stderr.write(
      `exit-guard: ${GRACE_MS / 1000} s after its tests ended, this file's process has not exited; still open: ${process.getActiveResourcesInfo().join(', ')}\n`,
    )
    process.exit(1)
  }, GRACE_MS)
  timer.unref()
})
