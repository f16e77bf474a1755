// How long `serve` takes to listen: spawn to the "gateway listening" log line, with the memory store, no TLS,
// the sample policies and a one-user credentials file, in front of a target that is never called.
// Alone: `node bench/startup.js [--starts N] [--baseline DIR]` (DIR: another build's dist/, started
// alternately with this one, so both see the same load).
import { spawn } from 'node:child_process'
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs'
import { loadavg, tmpdir } from 'node:os'
import { join } from 'node:path'
import { fileURLToPath } from 'node:url'
import { parseArgs } from 'node:util'
import { median, pairStats, passOrder } from './lib/pairing.js'

const repo = fileURLToPath(new URL('../', import.meta.url))

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

/** One start of `dist/cli.js serve` of the build in `dist`: wall and CPU ms from spawn to the listening line. */
function startOnce(dist, credentials) {
  const args = [
    join(dist, 'cli.js'),
    'serve',
    ...['--target', 'http://127.0.0.1:9', '--credentials', credentials, '--policies', join(repo, 'policies')],
    ...['--listen', '127.0.0.1:0', '--idempotency', 'memory', '--workers', '1'],
  ]
  return new Promise((resolve, reject) => {
    const started = performance.now()
    const child = spawn(process.execPath, args, { cwd: repo, stdio: ['ignore', 'pipe', 'pipe'] })
    let output = ''
    let took
    const scan = (chunk) => {
      output += chunk
      if (took === undefined && output.includes('gateway listening')) {
        took = { wall: performance.now() - started, cpu: cpuMs(child.pid) }
        child.kill('SIGKILL')
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
 * `starts` starts of this build (and as many of the build in `baseline`, alternating with them).
 * Returns each arm's starts: `{ wall, cpu }` in ms (cpu undefined off Linux).
 */
export async function runStartup({ starts = 10, baseline, log = () => {} } = {}) {
  const dir = mkdtempSync(join(tmpdir(), 'payments-gate-startup-'))
  try {
    const credentials = await writeCredentials(dir)
    const arms = { this: { dist: join(repo, 'dist'), times: [] } }
    if (baseline !== undefined) arms.baseline = { dist: baseline, times: [] }
    for (let i = 0; i < starts; i++) {
      // The bench's pairing: the two builds one right after the other, the order swapped every pair, so
      // neither always starts on a warmer cache.
      for (const name of passOrder(Object.keys(arms), i))
        arms[name].times.push(await startOnce(arms[name].dist, credentials))
    }
    log(`start-up: ${starts} starts${baseline === undefined ? '' : ' per build, alternating'}`)
    return Object.fromEntries(Object.entries(arms).map(([name, arm]) => [name, arm.times]))
  } finally {
    rmSync(dir, { recursive: true, force: true })
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
  return lines.join('\n')
}

if (process.argv[1] === fileURLToPath(import.meta.url)) {
  const { values } = parseArgs({
    options: { starts: { type: 'string', default: '10' }, baseline: { type: 'string' } },
  })
  const before = loadavg()
  process.stderr.write(`load average at start ${before.map((l) => l.toFixed(2)).join(' ')}\n`)
  const times = await runStartup({ starts: Number(values.starts), baseline: values.baseline })
  process.stdout.write(`${startupSection(times)}\n`)
}
