import t from 'tap'
import { COVERED, runCliOnce, spawnCli, type CliResult } from '../helpers/cli.js'
import { writeCredentials } from '../helpers/fixtures.js'

/** `serve --workers N` with the memory store: each worker would keep its own store (docs/idempotency.md). */
const credentials = await writeCredentials(t.testdir())

t.test(
  '--workers with the memory store: refused at start, one line, before anything listens (each process would keep its own store)',
  async (t) => {
    const cases: [string[], Record<string, string>, string | RegExp][] = [
      [
        ['--workers', '2'],
        {},
        'payments-gate serve: --workers 2 with --idempotency memory: each process would keep its own store and forward a retry again; give --idempotency a Redis URL that every process shares (or off)\n',
      ],
      [
        ['--idempotency', 'memory'],
        { PAYMENTS_GATE_WORKERS: '3' },
        /^payments-gate serve: PAYMENTS_GATE_WORKERS 3 with --idempotency memory: [^\n]* \(or off\)\n$/,
      ],
    ]
    // The first in a real process, where a worker forked would write its lines; the second in this one, the same main.
    for (const [i, [args, env, line]] of cases.entries()) {
      const argv = ['serve', '--target', 'http://127.0.0.1:9', '--credentials', credentials, ...args]
      let result: CliResult
      if (i > 0) result = await runCliOnce(argv, env)
      else {
        const run = spawnCli(argv, { ...env, ...COVERED })
        // A process ended by a signal has no code: -1, never the 2 asserted.
        result = { code: (await run.exited) ?? -1, ...run.output() }
      }
      t.equal(result.code, 2)
      t.match(result.stderr, line)
      t.equal(result.stdout, '', 'no worker started')
    }
  },
)
