import { closeSync, openSync } from 'node:fs'
import t from 'tap'
import { spawnCli } from '../helpers/cli.js'

// The real process, as a shell runs it: its stdout a file on a full disk (/dev/full), or a pipe whose reader left.

t.test('an output its stdout refuses (/dev/full: no space left) is one line on stderr and exit 2', async (t) => {
  const full = openSync('/dev/full', 'w')
  t.teardown(() => closeSync(full))
  const run = spawnCli(['openapi'], {}, 'lib/cli.ts', full)
  t.equal(await run.exited, 2)
  t.equal(run.output().stderr, 'payments-gate: stdout: ENOSPC: no space left on device, write\n')
})

t.test(
  'a reader that leaves (EPIPE, `payments-gate openapi | head`) is not a failure: exit 0, nothing said',
  async (t) => {
    const run = spawnCli(['openapi'])
    // The document is larger than a pipe holds, so its write meets the closed end whenever it comes.
    run.child.stdout?.destroy()
    t.equal(await run.exited, 0)
    t.equal(run.output().stderr, '')
  },
)
