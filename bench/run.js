// `npm run bench [-- --quick] [-- --profile] [-- --ladder] [-- --ladder-only] [-- --fastify-only] [-- --baseline DIR [--targets c,d] [--connections N]] [-- --pairs-only [--fill N] [--baseline DIR]] [-- --rounds N] [-- --pairs N] [-- --micro-only]`: every table on stdout and in bench/results/latest.md.
import { mkdirSync, rmSync, writeFileSync } from 'node:fs'
import { cpus, loadavg, totalmem } from 'node:os'
import { parseArgs } from 'node:util'
import { runBaseline } from './e2e/baseline.js'
import { runFastify } from './e2e/fastify.js'
import { runE2E, runLadder, runPairs } from './e2e/run.js'
import { runMicro } from './micro/stages.js'
import { runStartup, startupSection } from './startup.js'
import { chartData, chartFigures, renderChart } from './lib/chart.js'
import { cpuBreakdown } from './lib/profile.js'
import {
  baselineProfileSection,
  baselineSection,
  e2eSection,
  fastifySection,
  ladderSection,
  microSection,
  pairedSection,
  profileSection,
  targetsSection,
} from './lib/report.js'

const { values } = parseArgs({
  options: {
    quick: { type: 'boolean' },
    profile: { type: 'boolean' },
    ladder: { type: 'boolean' },
    baseline: { type: 'string' },
    'ladder-only': { type: 'boolean' },
    rounds: { type: 'string' },
    'micro-only': { type: 'boolean' },
    pairs: { type: 'string' },
    'pairs-only': { type: 'boolean' },
    fill: { type: 'string' },
    targets: { type: 'string' },
    connections: { type: 'string' },
    'fastify-only': { type: 'boolean' },
  },
})
const quick = values.quick === true
if (values['ladder-only']) values.ladder = true
const count = (flag) => {
  const n = values[flag] === undefined ? undefined : Number(values[flag])
  if (n !== undefined && !(Number.isInteger(n) && n > 0))
    throw new Error(`--${flag}: expected a whole number above 0, got ${values[flag]}`)
  return n
}
const rounds = count('rounds')
const pairs = count('pairs')
const fill = count('fill')
const connections = count('connections')
if (values.targets !== undefined && values.baseline === undefined)
  throw new Error('--targets names what --baseline DIR compares: give --baseline too')
// With --pairs-only, DIR gets its own memory/off pairs; otherwise the chosen targets are compared with DIR's, paired.
const versus = values.baseline !== undefined && !values['pairs-only']
const results = new URL('./results/', import.meta.url)
const log = (message) => process.stderr.write(`${message}\n`)

const started = performance.now()
const cpu = cpus()
const machine = `node ${process.version}, ${cpu[0]?.model.trim() ?? 'unknown CPU'}, ${cpu.length} cores, ${(totalmem() / 2 ** 30).toFixed(1)} GiB, ${loadavg()
  .map((l) => l.toFixed(2))
  .join(' ')} load average at start`

const only = values['ladder-only'] || values['pairs-only'] || values['fastify-only'] || (versus && !values.ladder)
if (!only) log(`micro benchmarks${quick ? ' (quick)' : ''}`)
const micro = only ? undefined : await runMicro({ quick })
const startup = only || values['micro-only'] ? undefined : await runStartup({ log })
const profileDir = values.profile ? new URL('profiles/', results) : undefined
if (profileDir !== undefined) rmSync(profileDir, { recursive: true, force: true })
const e2e = values['micro-only'] || only ? undefined : await runE2E({ quick, rounds, pairs, log, profileDir })
const pairsOnly = values['pairs-only']
  ? await runPairs({ quick, pairs, fill, log, baseline: values.baseline })
  : undefined
const fastify =
  values['fastify-only'] || !(only || values['micro-only']) ? await runFastify({ quick, rounds, log }) : undefined
const ladder =
  values.ladder && !values['micro-only'] && !values['pairs-only'] ? await runLadder({ quick, rounds, log }) : undefined
const against = versus
  ? await runBaseline({ quick, pairs, connections, baseline: values.baseline, keys: values.targets, log, profileDir })
  : undefined
const breakdownsOf = (profiled) =>
  Object.fromEntries(
    Object.entries(profiled).map(([name, requests]) => [
      name,
      cpuBreakdown(new URL(`${name}.cpuprofile`, profileDir), requests),
    ]),
  )
const breakdowns = profileDir === undefined || e2e === undefined ? undefined : breakdownsOf(e2e.profiled)
const againstBreakdowns = profileDir === undefined || against === undefined ? undefined : breakdownsOf(against.profiled)
const uptime = () =>
  `load average ${loadavg()
    .map((l) => l.toFixed(2))
    .join(' ')}`

const report = [
  `# payments-gate benchmark${quick ? ' (--quick: short rounds, memory after 10,000 requests)' : ''}`,
  '',
  `Machine: ${machine}, ${uptime()} at the end`,
  `Command: npm run bench${process.argv.length > 2 ? ` -- ${process.argv.slice(2).join(' ')}` : ''}; ${new Date().toISOString()}; took ${((performance.now() - started) / 1000).toFixed(0)} s`,
  'Compare ratios within this run only: absolute figures move between runs on a shared machine.',
  '',
  ...(only ? [] : [targetsSection(e2e), '']),
  ...(pairsOnly ? [pairedSection(pairsOnly), ''] : []),
  ...(against ? [baselineSection(against), ''] : []),
  ...(againstBreakdowns ? [baselineProfileSection(againstBreakdowns, against.profiled), ''] : []),
  ...(micro ? [microSection(micro), ''] : []),
  ...(startup ? [startupSection(startup), ''] : []),
  e2e
    ? e2eSection(e2e)
    : `(end to end skipped: ${values['ladder-only'] ? '--ladder-only' : values['pairs-only'] ? '--pairs-only' : versus ? '--baseline' : values['fastify-only'] ? '--fastify-only' : '--micro-only'})`,
  ...(e2e?.paired ? ['', pairedSection(e2e)] : []),
  '',
  ...(fastify ? [fastifySection(fastify), ''] : []),
  ...(breakdowns ? [profileSection(breakdowns, e2e.profiled), ''] : []),
  ...(ladder ? [ladderSection(ladder), ''] : []),
].join('\n')

process.stdout.write(report)
mkdirSync(results, { recursive: true })
writeFileSync(new URL('latest.md', results), report)
const data = chartData({ e2e, fastify, against, paired: pairsOnly?.paired ?? e2e?.paired })
const title = [
  `npm run bench${process.argv.length > 2 ? ` -- ${process.argv.slice(2).join(' ')}` : ''}, ${new Date().toISOString().slice(0, 16)}Z`,
  `node ${process.version}, ${cpu.length} cores, ${uptime()} at the end`,
]
if (data.cpu.length + data.ratios.length > 0) {
  writeFileSync(new URL('latest.json', results), chartFigures(data, title))
  writeFileSync(new URL('latest.svg', results), await renderChart(data, title))
}
log(
  `written to bench/results/latest.md${data.cpu.length + data.ratios.length > 0 ? ', latest.svg and its figures, latest.json' : ''}${values.profile ? '; CPU profiles of (b), (c) and (d) in bench/results/profiles/' : ''}`,
)
