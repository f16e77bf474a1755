// `node bench/instructions.js [--targets c,d,c0,u] [--requests N] [--warmup N] [--runs N] [--baseline DIR ...]`:
// the instructions each server spends on one request, counted by valgrind's callgrind, which counts what the
// process executes whatever else the machine runs: on a shared machine, where CPU time moves with the load,
// a change of a few percent shows here run after run (bench/README.md, instruction counts).
//
// Each server is one of the bench's own children (e2e/servers/*.js) run under `valgrind --tool=callgrind`,
// with the backend and the client in this process, so only the server is counted. One keep-alive connection
// sends a warm-up, then callgrind's counters are zeroed (`callgrind_control -z`), the measured requests are
// sent one after another, and the counters dumped (`callgrind_control -d`): their total over the requests is
// the figure. Every answer must have the target's status. The runs alternate the targets and the builds.
import { spawn, execFile } from 'node:child_process'
import { copyFileSync, mkdirSync, mkdtempSync, readdirSync, rmSync } from 'node:fs'
import { Agent, createServer, request } from 'node:http'
import { loadavg, tmpdir } from 'node:os'
import { basename, join, resolve } from 'node:path'
import { promisify } from 'node:util'
import { parseArgs } from 'node:util'
import { hashPassword } from 'payments-gate'
import {
  ACCEPT,
  AUTHORIZATION,
  bytesOf,
  CONTENT_TYPE,
  invalidSale,
  PASSWORD,
  SALE_PATH,
  USER,
  validSale,
} from './lib/fixtures.js'
import { freshBodies } from './lib/references.js'

/**
 * What can be measured: a server script of e2e/servers/, its environment, the body it is sent and the status
 * it must answer. `gateway` marks the targets that load the build under test (and so take `--baseline`).
 */
const TARGETS = {
  c: {
    name: 'payments-gate, valid sale, retry protection in memory',
    script: 'gateway',
    env: { BENCH_IDEMPOTENCY: 'memory' },
    body: 'valid',
    expect: 201,
    gateway: true,
  },
  c0: {
    name: 'payments-gate, valid sale, retry protection off',
    script: 'gateway',
    env: { BENCH_IDEMPOTENCY: 'off' },
    body: 'valid',
    expect: 201,
    gateway: true,
  },
  d: {
    name: 'payments-gate, invalid sale (400)',
    script: 'gateway',
    env: { BENCH_IDEMPOTENCY: 'memory' },
    body: 'invalid',
    expect: 400,
    gateway: true,
  },
  cli: {
    name: 'payments-gate serve (dist/cli.js as shipped), valid sale, retry protection in memory',
    script: 'cli',
    env: { BENCH_IDEMPOTENCY: 'memory' },
    body: 'valid',
    expect: 201,
    gateway: true,
  },
  u: { name: 'the bare undici forwarder, body read whole', script: 'undici', env: {}, body: 'valid', expect: 201 },
  parsed: {
    name: 'ladder: (u) + parsed and re-serialized',
    script: 'steps',
    env: { BENCH_STEP: 'parsed' },
    body: 'valid',
    expect: 201,
  },
  checked: {
    name: 'ladder: + every check of the core',
    script: 'steps',
    env: { BENCH_STEP: 'checked' },
    body: 'valid',
    expect: 201,
    gateway: true,
  },
  g0: {
    name: 'ladder: the gateway, no logs or metrics, retry protection off',
    script: 'steps',
    env: { BENCH_STEP: 'gateway', BENCH_IDEMPOTENCY: 'off' },
    body: 'valid',
    expect: 201,
    gateway: true,
  },
  gm: {
    name: 'ladder: the gateway, no logs or metrics, retry protection in memory',
    script: 'steps',
    env: { BENCH_STEP: 'gateway', BENCH_IDEMPOTENCY: 'memory' },
    body: 'valid',
    expect: 201,
    gateway: true,
  },
  fp: {
    name: "Fastify route, Fastify's JSON parser, no checks",
    script: 'fastify-arms',
    env: { BENCH_ARM: 'plain' },
    body: 'valid',
    expect: 201,
  },
  fs: {
    name: '... + the JSON schema on the route (Ajv)',
    script: 'fastify-arms',
    env: { BENCH_ARM: 'schema' },
    body: 'valid',
    expect: 201,
  },
  fa: {
    name: '... + a cached BasicAuth hook',
    script: 'fastify-arms',
    env: { BENCH_ARM: 'auth' },
    body: 'valid',
    expect: 201,
  },
  fg: {
    name: 'the payments-gate Fastify plugin instead',
    script: 'fastify-arms',
    env: { BENCH_ARM: 'plugin' },
    body: 'valid',
    expect: 201,
    gateway: true,
  },
  mx: {
    name: 'Express 5 route behind the gate, retry protection in memory',
    script: 'express-protected',
    env: { BENCH_IDEMPOTENCY: 'memory' },
    body: 'valid',
    expect: 201,
    gateway: true,
  },
  mx0: {
    name: 'Express 5 route behind the gate, retry protection off',
    script: 'express-protected',
    env: { BENCH_IDEMPOTENCY: 'off' },
    body: 'valid',
    expect: 201,
    gateway: true,
  },
  mf: {
    name: 'Fastify 5 route behind the gate, retry protection in memory',
    script: 'fastify-protected',
    env: { BENCH_IDEMPOTENCY: 'memory' },
    body: 'valid',
    expect: 201,
    gateway: true,
  },
  mf0: {
    name: 'Fastify 5 route behind the gate, retry protection off',
    script: 'fastify-protected',
    env: { BENCH_IDEMPOTENCY: 'off' },
    body: 'valid',
    expect: 201,
    gateway: true,
  },
}

/** The ratios printed when both sides were measured: x/y is instructions(y) / instructions(x), as the bench's CPU ratios. */
const RATIOS = [
  ['c', 'u', 'c/u: the valid sale against the bare forwarder'],
  ['c', 'c0', 'c/c0: retry protection in memory against off (memory/off is its inverse)'],
  ['fg', 'fs', 'fg/fs: the Fastify plugin against the schema route'],
  ['fg', 'fa', 'fg/fa: the Fastify plugin against the schema route with a BasicAuth hook'],
  ['mx0', 'mx', 'express memory/off: instructions(mx)/instructions(mx0), retry protection around an Express handler'],
  ['mf0', 'mf', 'fastify memory/off: instructions(mf)/instructions(mf0), retry protection around a Fastify handler'],
]

const USAGE = `node bench/instructions.js [--targets ${Object.keys(TARGETS).join(',')}] [--requests N] [--warmup N] [--runs N] [--baseline DIR ...] [--keep DIR]
(bench/README.md, instruction counts)
`

/** The options read, as run.js reads its own: `--help` prints the usage, a refused option its reason in one line. */
function optionsOrExit() {
  try {
    const { values } = parseArgs({
      options: {
        targets: { type: 'string', default: 'c,d,c0' },
        requests: { type: 'string', default: '500' },
        warmup: { type: 'string', default: '1500' },
        runs: { type: 'string', default: '3' },
        baseline: { type: 'string', multiple: true, default: [] },
        keep: { type: 'string' },
        help: { type: 'boolean' },
      },
    })
    if (values.help === true) {
      process.stdout.write(USAGE)
      process.exit(0)
    }
    const whole = (flag, least) => {
      const n = Number(values[flag])
      if (!Number.isInteger(n) || n < least)
        throw new Error(`--${flag}: expected a whole number of at least ${least}, got ${values[flag]}`)
      return n
    }
    const targets = values.targets.split(',').map((key) => {
      if (TARGETS[key] === undefined)
        throw new Error(`--targets: unknown target ${key}; known: ${Object.keys(TARGETS).join(', ')}`)
      return key
    })
    return { values, requests: whole('requests', 1), warmup: whole('warmup', 0), runs: whole('runs', 1), targets }
  } catch (error) {
    process.stderr.write(
      `bench/instructions.js: ${error.message}\n(node bench/instructions.js --help lists the options)\n`,
    )
    process.exit(2)
  }
}
const { values, requests, warmup, runs, targets } = optionsOrExit()
/** The builds: this checkout's dist/ ('' for the children), then each --baseline DIR. */
const builds = [{ label: 'this', dist: '' }, ...values.baseline.map((dir) => ({ label: dir, dist: resolve(dir) }))]
const log = (message) => process.stderr.write(`${message}\n`)
const run = promisify(execFile)
if (values.keep !== undefined) mkdirSync(values.keep, { recursive: true })

/** The backend: reads the body whole, answers 201 with a small JSON body (as e2e/servers/backend.js). */
const ANSWER = JSON.stringify({
  outcome: 'authorized',
  transactionReference: 'order-2024-000187',
  _links: { self: { href: '/payments/events/1' } },
})
const backend = createServer((req, res) => {
  req.on('data', () => {})
  req.on('end', () => {
    res.writeHead(201, { 'content-type': ACCEPT, 'content-length': Buffer.byteLength(ANSWER) })
    res.end(ANSWER)
  })
})
await new Promise((ready) => backend.listen(0, '127.0.0.1', ready))
const backendUrl = `http://127.0.0.1:${backend.address().port}`
const users = JSON.stringify([{ username: USER, password: await hashPassword(PASSWORD), entities: ['default'] }])
const bodies = { valid: bytesOf(validSale()), invalid: bytesOf(invalidSale()) }

/** Starts `script` under callgrind; resolves once it listens. */
function startCounted(script, env, dir) {
  const child = spawn(
    'valgrind',
    [
      '--tool=callgrind',
      '--instr-atstart=no',
      `--callgrind-out-file=${dir}/callgrind.%p`,
      process.execPath,
      join(import.meta.dirname, 'e2e/servers', `${script}.js`),
    ],
    { env: { ...process.env, ...env }, stdio: ['ignore', 'ignore', 'pipe', 'ipc'] },
  )
  let stderr = ''
  child.stderr.on('data', (chunk) => {
    if (stderr.length < 20000) stderr += chunk
  })
  return new Promise((ready, fail) => {
    child.once('exit', (code) => fail(new Error(`${script} exited with ${code}: ${stderr.slice(-2000)}`)))
    child.on('message', (message) => {
      if (message?.port === undefined) return
      child.removeAllListeners('exit')
      ready({ child, port: message.port })
    })
  })
}

/** Sends `count` requests one after another on `agent`'s one connection; throws on an unexpected status. */
async function send(agent, port, { body, expect, next }, count) {
  for (let i = 0; i < count; i++) {
    const payload = next()
    const status = await new Promise((done, fail) => {
      const req = request(
        {
          host: '127.0.0.1',
          port,
          path: SALE_PATH,
          method: 'POST',
          agent,
          headers: {
            'content-type': CONTENT_TYPE,
            accept: ACCEPT,
            authorization: AUTHORIZATION,
            'content-length': body.length,
          },
        },
        (res) => {
          res.on('data', () => {})
          res.on('end', () => done(res.statusCode))
          res.on('error', fail)
        },
      )
      req.on('error', fail)
      req.end(payload)
    })
    if (status !== expect) throw new Error(`answered ${status}, expected ${expect}`)
  }
}

/**
 * The functions that run V8's optimizing compilers (TurboFan, Maglev) on their own threads. A function
 * that turns hot late is compiled in the measured window: one compilation takes tens of millions of
 * instructions, what a long-running server spends once, so their cost is counted apart.
 */
const COMPILE_JOBS = [
  'v8::internal::OptimizingCompileTaskExecutor::CompileTask::Run(',
  'v8::internal::maglev::MaglevConcurrentDispatcher::JobTask::Run(',
]

/** A dump's total (instructions, the only event counted) and the inclusive cost of COMPILE_JOBS, from callgrind_annotate. */
async function countsOf(file) {
  const { stdout } = await run('callgrind_annotate', ['--auto=no', '--inclusive=yes', '--threshold=100', file], {
    maxBuffer: 256 * 1024 * 1024,
  })
  const cost = (line) => Number(line.trim().split(' ')[0].replaceAll(',', ''))
  const lines = stdout.split('\n')
  const total = cost(lines.find((line) => line.includes('PROGRAM TOTALS')))
  let compile = 0
  for (const line of lines) if (COMPILE_JOBS.some((job) => line.includes(job))) compile += cost(line)
  return { total, compile }
}

/** One measurement: instructions per request of `key` on `build`. */
async function measure(key, build) {
  const t = TARGETS[key]
  const dir = mkdtempSync(join(tmpdir(), 'instructions-'))
  const env = { ...t.env, BENCH_TARGET: backendUrl, BENCH_USERS: users, BENCH_DIST: t.gateway ? build.dist : '' }
  const { child, port } = await startCounted(t.script, env, dir)
  const agent = new Agent({ keepAlive: true, maxSockets: 1 })
  try {
    const load = { body: bodies[t.body], expect: t.expect, next: freshBodies(bodies[t.body]) }
    await send(agent, port, load, warmup)
    await run('callgrind_control', ['-i', 'on', String(child.pid)])
    await run('callgrind_control', ['-z', String(child.pid)])
    await send(agent, port, load, requests)
    await run('callgrind_control', ['-d', String(child.pid)])
    const dump = readdirSync(dir).find((name) => name.startsWith(`callgrind.${child.pid}.`))
    // `--keep DIR`: each dump kept for callgrind_annotate, named after its target and build.
    if (values.keep !== undefined)
      copyFileSync(join(dir, dump), join(values.keep, `${key}@${basename(build.dist) || 'this'}.${child.pid}`))
    const { total, compile } = await countsOf(join(dir, dump))
    return { count: (total - compile) / requests, compile: compile / requests }
  } finally {
    agent.destroy()
    await new Promise((exited) => {
      child.once('exit', exited)
      child.send('stop')
    })
    rmSync(dir, { recursive: true, force: true })
  }
}

const median = (list) => [...list].sort((a, b) => a - b)[Math.floor((list.length - 1) / 2)]
const thousands = (n) => Math.round(n / 1000).toLocaleString('en')

log(
  `instructions: targets ${targets.join(',')}, ${builds.length} build(s), ${runs} run(s), ${warmup} warm-up and ${requests} measured requests each; load average ${loadavg()[0].toFixed(2)}`,
)
const arms = builds.flatMap((build) =>
  targets.filter((key) => build.dist === '' || TARGETS[key].gateway).map((key) => ({ key, build, counts: [] })),
)
try {
  for (let r = 0; r < runs; r++) {
    // Rotated each run, so no arm is always measured first.
    for (let i = 0; i < arms.length; i++) {
      const arm = arms[(i + r) % arms.length]
      const { count, compile } = await measure(arm.key, arm.build)
      arm.counts.push(count)
      log(
        `run ${r + 1}: ${arm.key} on ${arm.build.label}: ${thousands(count)} k instructions per request, and ${thousands(compile)} k compiling`,
      )
    }
  }
} finally {
  backend.close()
}

const rows = arms.map(({ key, build, counts }) => {
  const sorted = [...counts].sort((a, b) => a - b)
  return `| ${key} | ${build.label} | ${thousands(median(counts))} | ${thousands(sorted[0])} to ${thousands(sorted.at(-1))} | ${TARGETS[key].name} |`
})
const lines = [
  `Instructions per request (thousands), ${runs} run(s) of ${requests} requests after ${warmup} of warm-up, one keep-alive connection:`,
  '',
  '| target | build | median | range | what |',
  '| --- | --- | ---: | --- | --- |',
  ...rows,
]
const of = (key, label) => arms.find((arm) => arm.key === key && arm.build.label === label)
for (const build of builds) {
  for (const [x, y, name] of RATIOS) {
    const a = of(x, build.label) ?? of(x, 'this')
    const b = of(y, build.label) ?? of(y, 'this')
    if (a === undefined || b === undefined || (a.build !== build && b.build !== build)) continue
    lines.push(
      '',
      `${name} (${a.build.label} against ${b.build.label}): ${(median(b.counts) / median(a.counts)).toFixed(3)}`,
    )
  }
}
for (const build of builds.slice(1)) {
  for (const key of targets) {
    const base = of(key, build.label)
    if (base === undefined) continue
    // Paired by run: the two were measured in the same run.
    const ratios = of(key, 'this').counts.map((count, i) => count / base.counts[i])
    const sorted = [...ratios].sort((a, b) => a - b)
    lines.push(
      '',
      `${key}: this build / ${build.label} = ${median(ratios).toFixed(3)} (${sorted[0].toFixed(3)} to ${sorted.at(-1).toFixed(3)})`,
    )
  }
}
process.stdout.write(`${lines.join('\n')}\n`)
