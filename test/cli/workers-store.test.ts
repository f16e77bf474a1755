import t from 'tap'
import { spawnCli } from '../helpers/cli.js'
import { writeCredentials } from '../helpers/fixtures.js'

/** `serve --workers N` with the memory store, a real process: each worker would keep its own store (docs/idempotency.md). */
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
    for (const [args, env, line] of cases) {
      const run = spawnCli(['serve', '--target', 'http://127.0.0.1:9', '--credentials', credentials, ...args], env)
      t.equal(await run.exited, 2)
      t.match(run.output().stderr, line)
      t.equal(run.output().stdout, '', 'no worker started')
    }
  },
)
