import { closeSync, openSync } from 'node:fs'
import t from 'tap'
import { COVERED, spawnCli } from '../helpers/cli.js'

// The real process, as a shell runs it: its stdout or stderr a file on a full disk (/dev/full), or a pipe whose reader
// left.

t.test('an output its stdout refuses (/dev/full: no space left) is one line on stderr and exit 2', async (t) => {
  const full = openSync('/dev/full', 'w')
  t.teardown(() => closeSync(full))
  const run = spawnCli(['openapi'], COVERED, 'lib/cli.ts', { stdout: full })
  t.equal(await run.exited, 2)
  t.equal(run.output().stderr, 'payments-gate: stdout: ENOSPC: no space left on device, write\n')
})

t.test(
  'a reader that leaves (EPIPE, `payments-gate openapi | head`) is not a failure: exit 0, nothing said',
  async (t) => {
    const run = spawnCli(['openapi'], COVERED)
    // The document is larger than a pipe holds, so its write meets the closed end whenever it comes.
    run.child.stdout?.destroy()
    t.equal(await run.exited, 0)
    t.equal(run.output().stderr, '')
  },
)

t.test('a stderr that refuses (/dev/full) leaves the command its own code: nothing can be told', async (t) => {
  const full = openSync('/dev/full', 'w')
  t.teardown(() => closeSync(full))
  // openapi's usage failure takes main's path for every command, and loads a third of serve's modules.
  const refused = spawnCli(['openapi', '--no-such-flag'], {}, 'lib/cli.ts', { stderr: full })
  t.equal(await refused.exited, 2, 'a usage failure is still 2')
  const both = spawnCli(['openapi'], {}, 'lib/cli.ts', { stdout: full, stderr: full })
  t.equal(await both.exited, 2, 'an output refused is still 2')
  const fine = spawnCli(['--version'], {}, 'lib/cli.ts', { stderr: full })
  t.equal(await fine.exited, 0)
  t.match(fine.output().stdout, /^\d+\.\d+\.\d+\n$/, 'the output written')
})
