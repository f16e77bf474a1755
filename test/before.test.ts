import { spawnSync } from 'node:child_process'
import { chmodSync, readFileSync, writeFileSync } from 'node:fs'
import { delimiter, join } from 'node:path'
import t from 'tap'
import { onPath, toolFacts, toolPlan, type ToolFacts } from './helpers/provision.js'
import { uncovered } from './helpers/uncovered.js'

const root = process.getuid?.() === 0

/** An executable in `dir`: a node script, so the fakes need nothing else on PATH. */
function executable(dir: string, name: string, body = ''): void {
  writeFileSync(join(dir, name), `#!${process.execPath}\n${body}\n`)
  chmodSync(join(dir, name), 0o755)
}

/** test/before.ts as tap runs it, with PATH set to `path` alone and no CI or opt-out unless given. */
function before(path: string, env: Record<string, string> = {}) {
  const clean = { ...process.env }
  delete clean.CI
  delete clean.PAYMENTS_GATE_SKIP_REDIS
  // test/before.ts and its fakes run none of lib/: no coverage is measured there.
  const childEnv = { ...clean, PATH: path, _TAPJS_PROCESSINFO_COVERAGE_: '0', ...env }
  const run = spawnSync(...uncovered(['--import=./test/typescript.mjs', 'test/before.ts'], childEnv), {
    env: childEnv,
    encoding: 'utf8',
    timeout: 60_000,
  })
  return { code: run.status, stderr: run.stderr, lines: run.stderr.split('\n').filter(Boolean) }
}

const facts = (over: Partial<ToolFacts>): ToolFacts => ({
  missing: ['redis-server', 'redis-sentinel'],
  root: true,
  aptGet: true,
  skip: false,
  ...over,
})

t.test(
  'toolPlan: ready when every command is there, else skip, install the packages of those missing, or stop with what to install',
  async (t) => {
    t.same(toolPlan(facts({ missing: [] })), { action: 'ready' })
    t.same(toolPlan(facts({ missing: [], root: false, aptGet: false })), { action: 'ready' })
    t.same(toolPlan(facts({})), { action: 'install', packages: ['redis-server', 'redis-sentinel'] })
    t.same(toolPlan(facts({ missing: ['redis-sentinel'] })), { action: 'install', packages: ['redis-sentinel'] })
    t.same(
      toolPlan(facts({ missing: ['promtool'] })),
      { action: 'install', packages: ['prometheus'] },
      "promtool comes in Debian's prometheus package",
    )
    t.same(
      toolPlan(facts({ missing: ['redis-cli'] })),
      { action: 'install', packages: ['redis-tools'] },
      "redis-cli comes in Debian's redis-tools package",
    )
    const skip = toolPlan(facts({ skip: true, root: false }))
    t.equal(skip.action, 'skip')
    const notRoot = toolPlan(facts({ root: false }))
    t.equal(notRoot.action, 'stop')
    t.match(notRoot, {
      message:
        /redis-server and redis-sentinel \(not on PATH, and this run is not root\): install them \(Debian: apt-get install -y redis-server redis-sentinel\)/,
    })
    t.match(toolPlan(facts({ aptGet: false })), {
      action: 'stop',
      message: /there is no apt-get.*PAYMENTS_GATE_SKIP_REDIS=1/,
    })
    t.match(toolPlan(facts({ missing: ['redis-sentinel'], root: false })), {
      action: 'stop',
      message: /needs redis-sentinel \(/,
    })
    t.match(toolPlan(facts({ missing: ['promtool'], root: false })), {
      action: 'stop',
      message: /needs promtool \(.*apt-get install -y prometheus\)/,
    })
  },
)

t.test('onPath finds executable files only, in any folder of PATH', async (t) => {
  const dir = t.testdir({ a: {}, b: { 'not-executable': 'x' } })
  executable(join(dir, 'a'), 'tool')
  t.ok(onPath('tool', join(dir, 'a')))
  t.ok(onPath('tool', ['', join(dir, 'b'), join(dir, 'a')].join(delimiter)))
  t.notOk(onPath('tool', join(dir, 'b')))
  t.notOk(onPath('not-executable', join(dir, 'b')))
  t.notOk(onPath('tool', undefined))
  t.notOk(onPath('tool', ''))
})

t.test('toolFacts reads PATH, the user and the opt-out, which CI=true overrides', async (t) => {
  const dir = t.testdir({})
  executable(dir, 'redis-server')
  executable(dir, 'apt-get')
  t.same(toolFacts({ PATH: dir }, 0), {
    missing: ['redis-sentinel', 'redis-cli', 'promtool'],
    root: true,
    aptGet: true,
    skip: false,
  })
  t.same(toolFacts({ PATH: dir, PAYMENTS_GATE_SKIP_REDIS: '1' }, 1000), {
    missing: ['redis-sentinel', 'redis-cli', 'promtool'],
    root: false,
    aptGet: true,
    skip: true,
  })
  t.equal(toolFacts({ PATH: dir, PAYMENTS_GATE_SKIP_REDIS: '1', CI: 'true' }, 0).skip, false)
  t.equal(toolFacts({}, undefined).root, false)
})

t.test('test/before.ts: says nothing and lets the tests run when Redis and promtool are there', async (t) => {
  const dir = t.testdir({})
  for (const command of ['redis-server', 'redis-sentinel', 'redis-cli', 'promtool']) executable(dir, command)
  const run = before(dir)
  t.equal(run.code, 0)
  t.same(run.lines, [])
})

t.test('test/before.ts: stops with one line when Redis and promtool are missing and cannot be installed', async (t) => {
  const run = before(t.testdir({}))
  t.equal(run.code, 1)
  t.equal(run.lines.length, 1)
  t.match(run.lines[0], root ? /there is no apt-get/ : /this run is not root/)
  t.match(run.lines[0], /apt-get install -y redis-server redis-sentinel redis-tools prometheus/)
})

t.test(
  'test/before.ts: PAYMENTS_GATE_SKIP_REDIS=1 lets the run go on, saying the tests that need them are skipped',
  async (t) => {
    const run = before(t.testdir({}), { PAYMENTS_GATE_SKIP_REDIS: '1' })
    t.equal(run.code, 0)
    t.match(run.lines, [/the tests that need them are skipped/])
    t.equal(before(t.testdir({}), { PAYMENTS_GATE_SKIP_REDIS: '1', CI: 'true' }).code, 1)
  },
)

t.test(
  'test/before.ts: as root, installs redis-server, redis-sentinel, redis-tools (redis-cli) and prometheus (promtool) with apt-get',
  async (t) => {
    const dir = t.testdir({ 'package.json': '{"type": "commonjs"}' })
    // A stand-in apt-get that logs its arguments and, on install, puts the four commands on PATH.
    executable(
      dir,
      'apt-get',
      `const fs = require('node:fs'), path = require('node:path')
fs.appendFileSync(path.join(__dirname, 'log'), process.argv.slice(2).join(' ') + '\\n')
if (process.argv.includes('install')) for (const name of ['redis-server', 'redis-sentinel', 'redis-cli', 'promtool']) fs.writeFileSync(path.join(__dirname, name), '', { mode: 0o755 })`,
    )
    const run = before(dir)
    if (!root) {
      t.equal(run.code, 1, 'not root: stops instead of installing')
      return
    }
    t.equal(run.code, 0)
    t.equal(
      readFileSync(join(dir, 'log'), 'utf8'),
      '-qq update\n-qq install -y redis-server redis-sentinel redis-tools prometheus\n',
    )
    t.match(run.lines, [/Installing redis-server and redis-sentinel and redis-tools and prometheus/])
  },
)

t.test('test/before.ts: stops with one line when apt-get fails', async (t) => {
  const dir = t.testdir({ 'package.json': '{"type": "commonjs"}' })
  executable(dir, 'apt-get', 'process.exit(100)')
  const run = before(dir)
  t.equal(run.code, 1)
  t.match(run.lines.at(-1), root ? /apt-get could not install them/ : /this run is not root/)
})
