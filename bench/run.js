// `npm run bench [-- --quick] [-- --profile] [-- --ladder [--baseline DIR]] [-- --ladder-only] [-- --pairs-only [--fill N] [--baseline DIR]] [-- --rounds N] [-- --pairs N] [-- --micro-only]`: every table on stdout and in bench/results/latest.md.
import { mkdirSync, rmSync, writeFileSync } from 'node:fs'
import { cpus, loadavg, totalmem } from 'node:os'
import { parseArgs } from 'node:util'
import { runE2E, runLadder, runPairs } from './e2e/run.js'
import { runMicro } from './micro/stages.js'
import { cpuBreakdown } from './lib/profile.js'
import { e2eSection, ladderSection, microSection, pairedSection, profileSection, targetsSection } from './lib/report.js'

const { values } = parseArgs({ options: { quick: { type: 'boolean' }, profile: { type: 'boolean' }, ladder: { type: 'boolean' }, baseline: { type: 'string' }, 'ladder-only': { type: 'boolean' }, rounds: { type: 'string' }, 'micro-only': { type: 'boolean' }, pairs: { type: 'string' }, 'pairs-only': { type: 'boolean' }, fill: { type: 'string' } } })
const quick = values.quick === true
if (values['ladder-only']) values.ladder = true
const count = (flag) => {
  const n = values[flag] === undefined ? undefined : Number(values[flag])
  if (n !== undefined && !(Number.isInteger(n) && n > 0)) throw new Error(`--${flag}: expected a whole number above 0, got ${values[flag]}`)
  return n
}
const rounds = count('rounds')
const pairs = count('pairs')
const fill = count('fill')
if (values.baseline !== undefined && !values.ladder && !values['pairs-only']) throw new Error('--baseline DIR adds rows to the ladders or the paired rounds: give --ladder or --pairs-only too')
const results = new URL('./results/', import.meta.url)
const log = (message) => process.stderr.write(`${message}\n`)

const started = performance.now()
const cpu = cpus()
const machine = `node ${process.version}, ${cpu[0]?.model.trim() ?? 'unknown CPU'}, ${cpu.length} cores, ${(totalmem() / 2 ** 30).toFixed(1)} GiB, load average at start ${loadavg()
  .map((l) => l.toFixed(2))
  .join(' ')}`

const only = values['ladder-only'] || values['pairs-only']
if (!only) log(`micro benchmarks${quick ? ' (quick)' : ''}`)
const micro = only ? undefined : await runMicro({ quick })
const profileDir = values.profile ? new URL('profiles/', results) : undefined
if (profileDir !== undefined) rmSync(profileDir, { recursive: true, force: true })
const e2e = values['micro-only'] || only ? undefined : await runE2E({ quick, rounds, pairs, log, profileDir })
const pairsOnly = values['pairs-only'] ? await runPairs({ quick, pairs, fill, log, baseline: values.baseline }) : undefined
const ladder = values.ladder && !values['micro-only'] && !values['pairs-only'] ? await runLadder({ quick, rounds, log, baseline: values.baseline }) : undefined
const breakdowns =
  profileDir === undefined || e2e === undefined
    ? undefined
    : Object.fromEntries(Object.entries(e2e.profiled).map(([name, requests]) => [name, cpuBreakdown(new URL(`${name}.cpuprofile`, profileDir), requests)]))

const report = [
  `# payments-gate benchmark${quick ? ' (--quick: short rounds, memory after 10,000 requests)' : ''}`,
  '',
  `Machine: ${machine}`,
  `Command: npm run bench${process.argv.length > 2 ? ` -- ${process.argv.slice(2).join(' ')}` : ''}; ${new Date().toISOString()}; took ${((performance.now() - started) / 1000).toFixed(0)} s`,
  'Compare ratios within this run only: absolute figures move between runs on a shared machine.',
  '',
  ...(only ? [] : [targetsSection(e2e), '']),
  ...(pairsOnly ? [pairedSection(pairsOnly), ''] : []),
  ...(micro ? [microSection(micro), ''] : []),
  e2e ? e2eSection(e2e) : `(end to end skipped: ${values['ladder-only'] ? '--ladder-only' : values['pairs-only'] ? '--pairs-only' : '--micro-only'})`,
  ...(e2e?.paired ? ['', pairedSection(e2e)] : []),
  '',
  ...(breakdowns ? [profileSection(breakdowns, e2e.profiled), ''] : []),
  ...(ladder ? [ladderSection(ladder), ''] : []),
].join('\n')

process.stdout.write(report)
mkdirSync(results, { recursive: true })
writeFileSync(new URL('latest.md', results), report)
log(`written to bench/results/latest.md${values.profile ? '; CPU profiles of (b), (c) and (d) in bench/results/profiles/' : ''}`)
