import { spawnSync } from 'node:child_process'
import { readFileSync } from 'node:fs'
import t from 'tap'
import { uncovered } from './helpers/uncovered.js'
import { NODE_MIN, onSupportedNode, refuseUnsupportedNode, unsupportedNode } from '../lib/node-version.js'

const LINE =
  'Node 20.20.2 is not supported; run payments-gate on Node 24 or later (Node 24 and 26 are the lines tested)'

t.test('the oldest line served is the one package.json states', async (t) => {
  const { engines } = JSON.parse(readFileSync(new URL('../package.json', import.meta.url), 'utf8')) as {
    engines: { node: string }
  }
  t.equal(engines.node, `>=${NODE_MIN}`)
})

t.test('Node 24 and later are served; an older one is told so in one line', async (t) => {
  for (const version of ['24.0.0', '24.21.0', '26.10.0', '30.1.2'])
    t.equal(unsupportedNode(version), undefined, version)
  t.equal(unsupportedNode('20.20.2'), LINE)
  t.match(unsupportedNode('23.11.1'), /^Node 23\.11\.1 is not supported/)
  t.doesNotThrow(() => refuseUnsupportedNode(process.versions.node))
  t.throws(() => refuseUnsupportedNode('20.20.2'), { message: `payments-gate: ${LINE}` })
})

t.test('the command line runs only on a Node served: elsewhere one line and exit 2', async (t) => {
  const written: string[] = []
  const stderr = { write: (line: string) => written.push(line) }
  t.equal(await onSupportedNode('26.10.0', stderr, async () => 7), 7)
  t.same(written, [])
  t.equal(await onSupportedNode('20.20.2', stderr, () => t.fail('not run') as never), 2)
  t.same(written, [`payments-gate: ${LINE}\n`])
})

/** The machine's own node, outside node_modules: older than 24 here (Debian's), whatever runs the tests. */
const machine = ['/usr/bin/node', '/usr/local/bin/node']
  .map((path) => ({ path, run: spawnSync(path, ['--version'], { encoding: 'utf8' }) }))
  .find(({ run }) => run.status === 0 && Number(run.stdout.slice(1).split('.')[0]) < NODE_MIN)

t.test(
  'dist/cli.js and the library on a real older Node: one line, no stack trace',
  {
    skip: machine === undefined ? 'no node older than 24 on this machine (/usr/bin/node, /usr/local/bin/node)' : false,
  },
  async (t) => {
    const { path, run } = machine as NonNullable<typeof machine>
    const version = run.stdout.trim().slice(1)
    // The built code, outside the coverage of lib/ (test/bench.test.ts says why both), as a user runs it.
    const { NODE_V8_COVERAGE: _, ...inherited } = process.env
    const env = { ...inherited, _TAPJS_PROCESSINFO_COVERAGE_: '0' }
    const options = { cwd: new URL('..', import.meta.url), env, encoding: 'utf8' } as const
    const cli = spawnSync(...uncovered(['dist/cli.js', 'serve', '--target', 'http://127.0.0.1:9'], env, path), options)
    t.equal(cli.status, 2)
    t.equal(cli.stdout, '')
    t.equal(cli.stderr, `payments-gate: ${unsupportedNode(version)}\n`)
    const library = spawnSync(
      ...uncovered(
        ['--input-type=module', '-e', "import('./dist/index.js').catch((error) => console.log(error.message))"],
        env,
        path,
      ),
      options,
    )
    t.equal(library.stdout, `payments-gate: ${unsupportedNode(version)}\n`, library.stderr)
  },
)
