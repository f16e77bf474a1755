// `npm run bench [-- OPTIONS]` (bench/README.md): every table on stdout and in bench/results/latest.md, a
// chart in latest.svg and its figures in latest.json.
import { mkdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs'
import { cpus, loadavg, totalmem } from 'node:os'
import { benchOptions } from './options.js'

/**
 * The run's options; `--help` prints the commands of bench/README.md, and a refused option its reason in one line,
 * each before anything is built or started.
 */
function optionsOrExit(args) {
  try {
    const options = benchOptions(args)
    if (options.values.help !== true) return options
    const readme = readFileSync(new URL('README.md', import.meta.url), 'utf8')
    process.stdout.write(`${/```sh\n([^]*?)```/.exec(readme)?.[1] ?? ''}bench/README.md says what each one measures.\n`)
    process.exit(0)
  } catch (error) {
    process.stderr.write(`npm run bench: ${error.message}\n(npm run bench -- --help lists the options)\n`)
    process.exit(2)
  }
}
const { values, s, plan, fill, baseline, only } = optionsOrExit(process.argv.slice(2))
// The harness, loaded once the options are taken: a refusal or `--help` loads none of it.
const [
  { runLadder },
  { runPaired },
  { runMicro },
  { runStartup, startupSection },
  { chartData, chartFigures, renderChart },
  { isSmoke, loadWarning },
  { cpuBreakdown },
  { ladderSection, microSection, profileSection, serversSection },
  { targetsSection },
] = await Promise.all([
  import('./e2e/ladder.js'),
  import('./e2e/run.js'),
  import('./micro/stages.js'),
  import('./startup.js'),
  import('./lib/chart.js'),
  import('./lib/pairing.js'),
  import('./lib/profile.js'),
  import('./lib/report.js'),
  import('./lib/targets.js'),
])
const smoke = isSmoke(s)
const results = new URL('./results/', import.meta.url)
const log = (message) => process.stderr.write(`${message}\n`)

const started = performance.now()
const load = loadavg()
const cpu = cpus()
const loads = (l) => l.map((x) => x.toFixed(2)).join(' ')
const machine = `node ${process.version}, ${cpu[0]?.model.trim() ?? 'unknown CPU'}, ${cpu.length} cores, ${(totalmem() / 2 ** 30).toFixed(1)} GiB, ${loads(load)} load average at start`
const warning = loadWarning(load[0])
if (warning !== undefined) log(`WARNING: ${warning}`)
const smokeNote = `SMOKE TEST (${values.quick ? '--quick: ' : ''}rounds of ${s.seconds} s, ${s.pairs} pairs): it shows that the bench runs, and states no verdict`
if (smoke) log(smokeNote)

if (only === 'micro' || (only === undefined && baseline === undefined)) log('micro benchmarks')
const micro =
  only === 'micro' || (only === undefined && baseline === undefined)
    ? await runMicro({ quick: values.quick === true })
    : undefined
const startup = only === undefined ? await runStartup({ starts: values.quick ? 4 : 10, baseline, log }) : undefined
const profileDir = values.profile ? new URL('profiles/', results) : undefined
if (profileDir !== undefined) rmSync(profileDir, { recursive: true, force: true })
const e2e =
  only === undefined || only === 'pairs'
    ? await runPaired({ plan, s, baseline, fill, probe: only === undefined && baseline === undefined, profileDir, log })
    : undefined
const ladder = values.ladder || only === 'ladder' ? await runLadder({ s, log }) : undefined
const breakdowns =
  profileDir === undefined || e2e === undefined
    ? undefined
    : Object.fromEntries(
        Object.entries(e2e.profiled).map(([id, requests]) => [
          id,
          cpuBreakdown(new URL(`${id}.cpuprofile`, profileDir), requests),
        ]),
      )

const command = `npm run bench${process.argv.length > 2 ? ` -- ${process.argv.slice(2).join(' ')}` : ''}`
const atEnd = `load average ${loads(loadavg())} at the end`
const report = [
  `# payments-gate benchmark${smoke ? `: ${smokeNote}` : ''}`,
  '',
  ...(warning === undefined ? [] : [`**Warning**: ${warning}.`, '']),
  `Machine: ${machine}, ${atEnd}`,
  `Command: ${command}; ${new Date().toISOString()}; took ${((performance.now() - started) / 1000).toFixed(0)} s`,
  'Compare ratios within this run only: absolute figures move between runs on a shared machine.',
  '',
  ...(only === 'ladder' ? [] : [targetsSection(e2e, { smoke, skipped: only && `not measured (--${only}-only)` }), '']),
  ...(micro ? [microSection(micro), ''] : []),
  ...(startup ? [startupSection(startup), ''] : []),
  ...(e2e ? [serversSection(e2e), ''] : []),
  ...(breakdowns ? [profileSection(breakdowns, e2e.profiled), ''] : []),
  ...(ladder ? [ladderSection(ladder), ''] : []),
].join('\n')

process.stdout.write(report)
mkdirSync(results, { recursive: true })
writeFileSync(new URL('latest.md', results), report)
const data = chartData({ e2e, smoke })
const title = [
  `${command}, ${new Date().toISOString().slice(0, 16)}Z`,
  `node ${process.version}, ${cpu.length} cores, load average ${loads(load)} at the start, ${atEnd}`,
  ...(smoke ? ['smoke test: no verdicts'] : []),
  ...(warning === undefined ? [] : [`warning: ${warning}`]),
]
if (data.cpu.length + data.ratios.length > 0) {
  writeFileSync(new URL('latest.json', results), chartFigures(data, title))
  writeFileSync(new URL('latest.svg', results), await renderChart(data, title))
}
log(
  `written to bench/results/latest.md${data.cpu.length + data.ratios.length > 0 ? ', latest.svg and its figures, latest.json' : ''}${values.profile ? '; CPU profiles in bench/results/profiles/' : ''}`,
)
