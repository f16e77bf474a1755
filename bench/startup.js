// How long `serve` takes to listen: spawn to the "gateway listening" log line, with the memory store, no TLS,
// the sample policies and a one-user credentials file, in front of a target that is never called.
// Alone: `node bench/startup.js [--starts N] [--baseline DIR] [--profile]` (DIR: another build's dist/, paired
// with this one, so both see the same load; --profile: where each start's CPU goes, by package).
import { spawn } from 'node:child_process'
import { mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs'
import { loadavg, tmpdir } from 'node:os'
import { join } from 'node:path'
import { fileURLToPath } from 'node:url'
import { parseArgs } from 'node:util'
import { median, pairStats, passOrder } from './lib/pairing.js'
import { packageOf, startupShares } from './lib/startup-profile.js'

const repo = fileURLToPath(new URL('../', import.meta.url))

/** The hook that lists the modules a profiled start loads. */
const MODULES = new URL('./lib/startup-modules.js', import.meta.url).href

/** The credentials file of one user, hashed by the build under test at a cheap cost: `serve` only reads it. */
async function writeCredentials(dir) {
  const { hashPassword } = await import(new URL('../dist/credentials/hash.js', import.meta.url).href)
  const password = await hashPassword('startup-bench', { N: 1024, r: 8, p: 1 })
  const file = join(dir, 'credentials.json')
  writeFileSync(file, JSON.stringify({ users: [{ username: 'bench', password, entities: ['default'] }] }))
  return file
}

/**
 * The CPU time (user and system) a process has used so far, in ms, from /proc (Linux; undefined elsewhere):
 * on a loaded machine the wall time mostly measures the wait for a core, the CPU time what the start costs.
 */
function cpuMs(pid) {
  try {
    const fields = readFileSync(`/proc/${pid}/stat`, 'utf8').split(') ')[1].split(' ')
    // utime and stime, fields 14 and 15 of proc(5), in clock ticks of 10 ms (USER_HZ 100 on Linux).
    return (Number(fields[11]) + Number(fields[12])) * 10
  } catch {
    return undefined
  }
}

/**
 * One start of `dist/cli.js serve` of the build in `dist`: wall and CPU ms from spawn to the listening line.
 * `into` a directory: node writes a CPU profile of the start there or, with `modules`, the list of the
 * modules it loaded (apart: the hook that lists them slows the loader down); the process is then stopped
 * by SIGTERM (no shutdown delay) rather than killed, since both are written as it exits.
 */
function startOnce(dist, credentials, { into, modules = false } = {}) {
  const watch = modules ? ['--import', MODULES] : ['--cpu-prof', '--cpu-prof-dir', into, '--cpu-prof-interval', '100']
  const args = [
    ...(into === undefined ? [] : watch),
    join(dist, 'cli.js'),
    'serve',
    ...['--target', 'http://127.0.0.1:9', '--credentials', credentials, '--policies', join(repo, 'policies')],
    ...['--listen', '127.0.0.1:0', '--idempotency', 'memory', '--workers', '1'],
    ...(into === undefined ? [] : ['--shutdown-delay', '0']),
  ]
  return new Promise((resolve, reject) => {
    const started = performance.now()
    const env = { ...process.env, BENCH_MODULES_DIR: into }
    const child = spawn(process.execPath, args, { cwd: repo, env, stdio: ['ignore', 'pipe', 'pipe'] })
    let output = ''
    let took
    const scan = (chunk) => {
      output += chunk
      if (took === undefined && output.includes('gateway listening')) {
        took = { wall: performance.now() - started, cpu: cpuMs(child.pid) }
        child.kill(into === undefined ? 'SIGKILL' : 'SIGTERM')
      }
    }
    child.stdout.on('data', scan)
    child.stderr.on('data', scan)
    child.on('error', reject)
    child.on('exit', () =>
      took === undefined ? reject(new Error(`serve exited before listening:\n${output}`)) : resolve(took),
    )
  })
}

const range = (values, digits = 0) =>
  `median ${median(values).toFixed(digits)} (${Math.min(...values).toFixed(digits)} to ${Math.max(...values).toFixed(digits)})`

function summary(starts) {
  const wall = `${range(starts.map((s) => s.wall))} ms`
  const cpu = starts.map((s) => s.cpu)
  return cpu.includes(undefined) ? wall : `${wall}, CPU ${range(cpu)} ms`
}

/**
 * `starts` starts of this build (and as many of the build in `baseline`, paired with them). Returns each
 * arm's starts: `{ wall, cpu }` in ms (cpu undefined off Linux); with `profile`, also `shares`, each arm's
 * CPU by package over its profiled starts (lib/startup-profile.js).
 */
export async function runStartup({ starts = 10, baseline, profile = false, log = () => {} } = {}) {
  const dir = mkdtempSync(join(tmpdir(), 'payments-gate-startup-'))
  try {
    const credentials = await writeCredentials(dir)
    const arms = { this: { dist: join(repo, 'dist'), times: [] } }
    if (baseline !== undefined) arms.baseline = { dist: baseline, times: [] }
    for (let i = 0; i < starts; i++) {
      // The bench's pairing: the two builds one right after the other, the order swapped every pair, so
      // neither always starts on a warmer cache.
      for (const name of passOrder(Object.keys(arms), i))
        arms[name].times.push(
          await startOnce(arms[name].dist, credentials, { into: profile ? join(dir, name) : undefined }),
        )
    }
    if (profile)
      for (const [name, arm] of Object.entries(arms))
        await startOnce(arm.dist, credentials, { into: join(dir, name), modules: true })
    log(`start-up: ${starts} starts${baseline === undefined ? '' : ' per build, paired'}`)
    const times = Object.fromEntries(Object.entries(arms).map(([name, arm]) => [name, arm.times]))
    if (!profile) return times
    const shares = Object.fromEntries(
      Object.keys(arms).map((name) => {
        const read = (suffix) =>
          readdirSync(join(dir, name))
            .filter((f) => f.endsWith(suffix))
            .map((f) => JSON.parse(readFileSync(join(dir, name, f), 'utf8')))
        return [
          name,
          { ...sumShares(read('.cpuprofile').map(startupShares)), modules: modulesByPackage(read('.json')[0]) },
        ]
      }),
    )
    return { ...times, shares }
  } finally {
    rmSync(dir, { recursive: true, force: true })
  }
}

/** The modules one start loaded, by package: `[[package, modules, bytes], ...]`, most bytes first. */
function modulesByPackage(loaded = []) {
  const by = new Map()
  for (const [url, bytes] of loaded) {
    const name = packageOf(url) ?? (url.startsWith('node:') ? "node's built-in modules" : url)
    const [count, size] = by.get(name) ?? [0, 0]
    by.set(name, [count + 1, size + bytes])
  }
  return [...by].map(([name, [count, size]]) => [name, count, size]).sort((a, b) => b[2] - a[2])
}

/** The shares of several profiled starts as one: ms per start by category, and the share of the whole. */
function sumShares(profiles) {
  const totals = new Map()
  for (const { shares } of profiles) for (const [name, ms] of shares) totals.set(name, (totals.get(name) ?? 0) + ms)
  const total = profiles.reduce((sum, p) => sum + p.total, 0)
  return {
    starts: profiles.length,
    total: total / profiles.length,
    shares: [...totals].sort((a, b) => b[1] - a[1]).map(([name, ms]) => [name, ms / profiles.length, ms / total]),
  }
}

/** The report's section: the median and range of each arm, with the load average beside them. */
export function startupSection(times, load = loadavg()) {
  const lines = [
    '## Start-up',
    '',
    '`serve` (dist/cli.js, the memory store, no TLS, the sample policies) from spawn to "gateway listening";',
    `load average ${load.map((l) => l.toFixed(2)).join(' ')} after the starts.`,
    '',
    `- this build: ${summary(times.this)}, ${times.this.length} starts`,
  ]
  if (times.baseline !== undefined) {
    const ratios = (of) => {
      const stats = pairStats(times.this.map((t, i) => t[of] / times.baseline[i][of]))
      return `median ${stats.median.toFixed(2)} (${stats.min.toFixed(2)} to ${stats.max.toFixed(2)}; this build slower in ${stats.above} of ${stats.count})`
    }
    lines.push(
      `- baseline: ${summary(times.baseline)}, ${times.baseline.length} starts`,
      `- this/baseline, paired: wall ${ratios('wall')}${times.this[0].cpu === undefined ? '' : `, CPU ${ratios('cpu')}`}`,
    )
  }
  for (const [name, { starts, total, shares, modules }] of Object.entries(times.shares ?? {})) {
    lines.push(
      '',
      `### Where a start's CPU goes (${name === 'this' ? 'this build' : 'baseline'}: V8 CPU profiles of ${starts} starts, ${total.toFixed(0)} ms a start under the profiler, idle left out)`,
      '',
      '| category | ms a start | share |',
      '| --- | ---: | ---: |',
      ...shares
        .filter(([, , share]) => share >= 0.005)
        .map(([category, ms, share]) => `| ${category} | ${ms.toFixed(1)} | ${(share * 100).toFixed(1)}% |`),
      '',
      `The loader's share, by what it loads: ${modules.reduce((n, [, count]) => n + count, 0)} modules in one start.`,
      '',
      '| package | modules | KiB of source |',
      '| --- | ---: | ---: |',
      ...modules
        .filter(([, , bytes]) => bytes >= 4096)
        .map(([pkg, count, bytes]) => `| ${pkg} | ${count} | ${(bytes / 1024).toFixed(0)} |`),
    )
  }
  return lines.join('\n')
}

if (process.argv[1] === fileURLToPath(import.meta.url)) {
  const { values } = parseArgs({
    options: { starts: { type: 'string', default: '10' }, baseline: { type: 'string' }, profile: { type: 'boolean' } },
  })
  const before = loadavg()
  process.stderr.write(`load average at start ${before.map((l) => l.toFixed(2)).join(' ')}\n`)
  const times = await runStartup({ starts: Number(values.starts), baseline: values.baseline, profile: values.profile })
  process.stdout.write(`${startupSection(times)}\n`)
}
