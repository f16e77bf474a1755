import { spawn } from 'node:child_process'
import { existsSync, readFileSync } from 'node:fs'
import { join } from 'node:path'
import { pathToFileURL } from 'node:url'
import t from 'tap'
import { uncovered } from './helpers/uncovered.js'

// `npm run bench` runs against the built code, as users do; `npm ci` builds it (the `prepare` script).
const built = new URL('../dist/gate.js', import.meta.url)

/** The benchmark's own command in a child, outside the coverage of the tests: no timing is asserted, only what it prints. */
function bench(args: string[]): Promise<{ code: number | null; stdout: string; stderr: string }> {
  // tap's process tracking would count the benchmark's own files into the coverage of lib/, and so
  // would node itself, for the built files mapped back to lib/ by their source maps: neither records.
  const { NODE_V8_COVERAGE: _, ...inherited } = process.env
  // Each micro task sampled for 5 ms, not --quick's 80: only what is printed is asserted.
  const env = { ...inherited, _TAPJS_PROCESSINFO_COVERAGE_: '0', BENCH_MICRO_MS: '5' }
  const child = spawn(...uncovered(['bench/run.js', ...args], env), { env, stdio: ['ignore', 'pipe', 'pipe'] })
  let stdout = ''
  let stderr = ''
  child.stdout.on('data', (chunk: Buffer) => (stdout += chunk.toString()))
  child.stderr.on('data', (chunk: Buffer) => (stderr += chunk.toString()))
  return new Promise((resolve) => child.on('exit', (code) => resolve({ code, stdout, stderr })))
}

t.test(
  '--fresh is refused where a run needs one process a server: the probe, the memory phase, --profile',
  async (t) => {
    // bench/run.js reads its arguments with benchOptions before it starts anything; what it throws is what it prints.
    // @ts-expect-error the bench is plain JavaScript without declarations
    const { benchOptions } = (await import('../bench/options.js')) as typeof import('../bench/options.js')
    for (const args of [
      ['--fresh', '--micro-only'],
      ['--fresh', '--pairs-only', '--profile'],
    ])
      t.throws(
        () => benchOptions(args),
        { message: '--fresh: only with --pairs-only or --baseline, and without --profile' },
        args.join(' '),
      )
    t.equal(benchOptions(['--fresh', '--pairs-only']).s.fresh, true, 'taken with --pairs-only')
    t.equal(benchOptions(['--fresh', '--baseline', '/tmp/old']).s.fresh, true, 'taken with --baseline')
  },
)

t.test('the bench refuses a count or a time that is not a number above 0, and says which stages run', async (t) => {
  // @ts-expect-error the bench is plain JavaScript without declarations
  const { benchOptions } = (await import('../bench/options.js')) as typeof import('../bench/options.js')
  for (const [flag, value, kind] of [
    ['--pairs', '0', 'whole number'],
    ['--connections', '2.5', 'whole number'],
    ['--fill', 'many', 'whole number'],
    ['--seconds', '0', 'number'],
    ['--seconds', 'Infinity', 'number'],
  ] as const)
    t.throws(
      () => benchOptions([flag, value]),
      { message: `${flag}: expected a ${kind} above 0, got ${value}` },
      `${flag} ${value}`,
    )
  t.equal(benchOptions(['--seconds', '0.5']).s.seconds, 0.5, 'a time may be a fraction')
  t.equal(benchOptions(['--fill', '3']).fill, 3)
  t.same(
    ['--micro-only', '--ladder-only', '--pairs-only', '--quick'].map((flag) => benchOptions([flag]).only),
    ['micro', 'ladder', 'pairs', undefined],
    'the stage each --*-only flag keeps; every stage otherwise',
  )
})

t.test(
  'a refused option is one line and exit 2, --help the commands of bench/README.md; neither starts a run',
  async (t) => {
    const refused = await bench(['--pairs', '0'])
    t.same(
      [refused.code, refused.stdout, refused.stderr],
      [
        2,
        '',
        'npm run bench: --pairs: expected a whole number above 0, got 0\n(npm run bench -- --help lists the options)\n',
      ],
    )
    t.equal((await bench(['--warmup'])).stderr.split('\n')[0], "npm run bench: Unknown option '--warmup'")
    const help = await bench(['--help'])
    t.equal(help.code, 0, help.stderr)
    t.ok(
      help.stdout.startsWith('npm run bench                  # the default run'),
      'the first command of the README, from its first line',
    )
    t.match(help.stdout, /npm run bench -- --baseline DIR .*\n[^]*bench\/README\.md says what each one measures\.\n$/)
  },
)

t.test(
  'npm run bench -- --micro-only --quick prints every stage and ratio, and is labelled a smoke test that states no verdict',
  async (t) => {
    t.ok(existsSync(built), 'dist/ is built (npm run build)')
    const { code, stdout, stderr } = await bench(['--micro-only', '--quick'])
    t.equal(code, 0, stderr)
    t.match(
      stdout,
      /^# payments-gate benchmark: SMOKE TEST \(--quick: rounds of 1 s, 2 pairs\)/,
      'labelled a smoke test',
    )
    t.match(stderr, /SMOKE TEST/)
    const targets = ['c/u', 'memory/off', 'fg/fs', 'c/b', 'd/b', 'c/f', 'c/e', 'fg/fa']
    const goals = ['>= 0.75', '<= 1.08', '>= 1', '>= 1.3 (stretch 1.6)', '>= 2', '>= 1 (stretch 1.2)', '>= 3', '>= 1']
    const targetsTable = stdout.slice(stdout.indexOf('## Targets'), stdout.indexOf('## Micro'))
    t.match(targetsTable, /^## Targets, paired: SMOKE TEST, no verdicts/)
    // Without the end-to-end part no ratio has a figure, and each says so rather than a verdict.
    targets.forEach((target, i) =>
      t.match(
        targetsTable,
        new RegExp(
          `\\| ${target.replace(/[/]/g, '\\$&')}: [^|]+\\| ${goals[i]!.replace(/[()+.]/g, '\\$&')} +\\| not measured \\(--micro-only\\) +\\|`,
        ),
        target,
      ),
    )
    t.notMatch(stdout, /\b(met|MISSED)\b/, 'a smoke test states no verdict')
    for (const old of ['c/u >= 0.8', 'p99 (c) within +1 ms of (b)', 'c0/c: retry protection off'])
      t.notMatch(targetsTable, old, `the old target ${old} is gone`)
    const stages = [
      'Content-Type + Accept (exact values)',
      'JSON.parse',
      'valid body: TypeBox compiled',
      'valid body: Ajv compiled',
      'invalid body: TypeBox compiled',
      'invalid body: Ajv compiled',
      'every error, mapped: TypeBox errors()',
      'every error, raw: Ajv allErrors',
      'checkBody, valid sale',
      'checkBody, invalid sale',
      'checkBody, worst case',
      'error body: fast-json-stringify',
      'error body: JSON.stringify',
      'replaceUnsupported',
      'BasicAuth, cached (SHA-256 + LRU)',
      'BasicAuth, uncached (scrypt N=16384)',
    ]
    for (const stage of stages)
      t.ok(
        stdout.split('\n').some((line) => line.includes(stage) && /\| [\d,.]+ +\| [\d,.]+ +\|$/.test(line)),
        `${stage}: ops/s and us/op`,
      )
    for (const ratio of [
      'TypeBox / Ajv, valid body',
      'fast-json-stringify / JSON.stringify',
      'cached / uncached credential check',
    ]) {
      t.match(stdout, new RegExp(`\\| ${ratio.replace(/[()+/.]/g, '\\$&')} +\\| \\d+\\.\\d\\dx +\\|`), ratio)
    }
    // The worst refused body within the limit is answered, with every error collected.
    t.match(stdout, /Worst-case refused body: [\d,]+ bytes, \d+ items in validationErrors, answered 400\./)
    t.notMatch(stdout, /## Each server/, 'no end-to-end part')
  },
)

t.test(
  "the run's chart: CPU per server and each paired ratio with its range and target, as SVG made without a browser",
  async (t) => {
    // @ts-expect-error the bench is plain JavaScript without declarations
    const { chartData, renderChart } = (await import('../bench/lib/chart.js')) as typeof import('../bench/lib/chart.js')
    const e2e = {
      baseline: 'before',
      sides: [
        { id: 'b', name: 'pass-through', cpuUs: 100 },
        { id: 'c', name: 'gateway', cpuUs: 80 },
        { id: 'e', name: 'Express peer', cpuUs: Number.NaN },
        { id: 'd@base', name: 'refusal', cpuUs: 40 },
      ],
      ratios: [
        { label: 'c/b', median: 1.25, min: 1.1, max: 1.4, target: 1.3 },
        { label: 'memory/off', median: 1.05, min: 1, max: 1.2, target: 1.08, atMost: true },
        { label: "c'/c''", median: 1.01, min: 0.95, max: 1.06 },
        { label: 'c/e', median: Number.NaN, min: Number.NaN, max: Number.NaN, target: 3 },
      ],
    }
    const data = chartData({ e2e })
    t.same(
      data.cpu.map((row: { group: string; target: string }) => [row.group, row.target]),
      [
        ['this build', '(b) pass-through'],
        ['this build', '(c) gateway'],
        ['built from before', '(d@base) refusal'],
      ],
      'every server with a figure, in the order of the tables, grouped by build',
    )
    type Row = { ratio: string; value: number; min: number; max: number; target?: number; verdict: string }
    t.same(
      data.ratios.map((row: Row) => [row.ratio, row.value, row.min, row.max, row.target, row.verdict]),
      [
        ['c/b, paired', 1.25, 1.1, 1.4, 1.3, 'missed'],
        ['memory/off, paired', 1.05, 1, 1.2, 1.08, 'met'],
        ["c'/c'', paired", 1.01, 0.95, 1.06, undefined, 'no target'],
      ],
      'each ratio measured, with its range and verdict; one without a figure is left out',
    )
    t.same(
      chartData({ e2e, smoke: true }).ratios.map((row: Row) => row.verdict),
      ['no verdict', 'no verdict', 'no target'],
      'a smoke test gives no verdict',
    )
    const svg = await renderChart(data, ['a title', 'warning: busy'])
    t.match(svg, /^<svg [^>]*xmlns="http:\/\/www.w3.org\/2000\/svg"/)
    for (const text of [
      'a title',
      'warning: busy',
      'Server CPU per request (µs, median)',
      '(c) gateway',
      'c/b, paired',
      "c'/c'', paired",
      'met',
      'missed',
    ])
      t.ok(svg.includes(`>${text.replace(/'/g, '&#39;')}<`) || svg.includes(`>${text}<`), `shows ${text}`)
    const bars: string[] = svg.match(/<path [^>]*aria-roledescription="bar"[^>]*>/g) ?? []
    t.equal(bars.length, data.cpu.length + data.ratios.length, 'a bar per figure')
    t.same(
      bars.filter((bar) => !/ fill="#[0-9a-f]{6}"/.test(bar)),
      [],
      'every bar has a fill: each panel has its own color scale',
    )
    t.equal(
      (svg.match(/aria-roledescription="rule mark"/g) ?? []).length,
      data.ratios.length,
      "a line for each ratio's range",
    )
    t.same(
      await renderChart(chartData({}), 'nothing measured').then((s: string) => s.includes('Server CPU')),
      false,
      'no panel without figures',
    )
  },
)

t.test(
  'the figures saved beside the chart draw it again, and docs/performance.svg is the drawing of its figures',
  async (t) => {
    // @ts-expect-error the bench is plain JavaScript without declarations
    const chart = (await import('../bench/lib/chart.js')) as typeof import('../bench/lib/chart.js')
    const data = chart.chartData({
      e2e: {
        sides: [
          { id: 'b', name: 'pass-through', cpuUs: 100 },
          { id: 'c', name: 'gateway', cpuUs: 80 },
        ],
        ratios: [{ label: 'c/b', median: 1.25, min: 1.1, max: 1.4, target: 1.3 }],
      },
    })
    const title = ['a run', 'its machine']
    t.equal(await chart.redrawChart(chart.chartFigures(data, title)), await chart.renderChart(data, title))
    const figures = readFileSync(new URL('../docs/performance.json', import.meta.url), 'utf8')
    const drawn = readFileSync(new URL('../docs/performance.svg', import.meta.url), 'utf8')
    t.equal(drawn, await chart.redrawChart(figures), 'node bench/redraw.js docs/performance.json docs/performance.svg')
    const bars = drawn.match(/<path [^>]*aria-roledescription="bar"[^>]*>/g) ?? []
    t.ok(bars.length > 0)
    t.same(
      bars.filter((bar) => !/ fill="#[0-9a-f]{6}"/.test(bar)),
      [],
      'every bar of docs/performance.svg has a fill',
    )
  },
)

// The bench's deciding pieces as pure functions: no server, no load, no timing.
// @ts-expect-error the bench is plain JavaScript without declarations
const pairing = (await import('../bench/lib/pairing.js')) as typeof import('../bench/lib/pairing.js')
// @ts-expect-error the bench is plain JavaScript without declarations
const plans = (await import('../bench/e2e/plan.js')) as typeof import('../bench/e2e/plan.js')
// @ts-expect-error the bench is plain JavaScript without declarations
const report = (await import('../bench/lib/targets.js')) as typeof import('../bench/lib/targets.js')

type Round = { cpuUs: number; p99?: number }
type Measured = { chain: string[]; rounds: Record<string, Round>[] }[]

/** The chain in which `x` and `y` are neighbours, and how many chains hold them so. */
function neighbours(chains: string[][], x: string, y: string) {
  return chains.filter((c) => c.includes(x) && c.includes(y) && Math.abs(c.indexOf(x) - c.indexOf(y)) === 1)
}

t.test('the median, the range of the pairs and how many went each way', async (t) => {
  t.equal(pairing.median([3, 1, 2]), 2)
  t.equal(pairing.median([4, 1, 3, 2]), 2.5, 'the mean of the two middle values')
  t.equal(pairing.median([Number.NaN, 5]), 5, 'a pair without a figure does not count')
  t.ok(Number.isNaN(pairing.median([])))
  t.same(pairing.pairStats([1.2, 0.9, 1.1, 1.0, Number.NaN]), {
    median: 1.05,
    min: 0.9,
    max: 1.2,
    above: 2,
    below: 1,
    count: 4,
    pivot: 1,
  })
  const byTarget = pairing.pairStats([0.5, 0.8, 0.7], 0.75)
  t.same([byTarget.above, byTarget.below, byTarget.pivot], [1, 2, 0.75], 'each way of the target')
  t.same(pairing.pairStats([]).count, 0)
})

t.test(
  'verdicts: a floor or a ceiling on the median, none in a smoke test, none without a target or a figure',
  async (t) => {
    const floor = { target: 0.75 }
    const ceiling = { target: 1.08, atMost: true }
    t.equal(pairing.judge(floor, 0.75, false), 'met')
    t.equal(pairing.judge(floor, 0.749, false), 'missed')
    t.equal(pairing.judge(ceiling, 1.08, false), 'met')
    t.equal(pairing.judge(ceiling, 1.081, false), 'missed')
    t.equal(pairing.judge(floor, 0.9, true), 'no verdict')
    t.equal(pairing.judge(ceiling, 2, true), 'no verdict')
    t.equal(pairing.judge({}, 1.02, false), 'no target')
    t.equal(pairing.judge(floor, Number.NaN, false), 'n/a')
    t.equal(report.verdictText({ target: 1.3, stretch: 1.6 }, 1.7, false), 'met; stretch met')
    t.equal(report.verdictText({ target: 1.3, stretch: 1.6 }, 1.4, false), 'met; stretch MISSED')
    t.equal(report.verdictText({ target: 1.3, stretch: 1.6 }, 1.2, false), 'MISSED')
    t.equal(report.verdictText({ target: 1.3 }, 1.4, true), 'no verdict (smoke test)')
    // Printed rounded away from the target: never a figure that reads as met beside a miss.
    t.equal(pairing.shown(1.2999), '1.299')
    t.equal(pairing.shown(0.75), '0.750')
    t.equal(pairing.shown(1.0801, true), '1.081')
    t.equal(pairing.shown(1.08, true), '1.080')
    t.equal(pairing.shown(Number.NaN), 'n/a')
  },
)

t.test('a smoke test: rounds under 3 s or fewer than 4 pairs; --quick is one, the default run is not', async (t) => {
  t.ok(pairing.isSmoke(plans.settings({ quick: true })))
  t.notOk(pairing.isSmoke(plans.settings()))
  t.ok(plans.settings().seconds >= pairing.MIN_SECONDS, 'the default rounds are at least 3 s')
  t.ok(pairing.isSmoke(plans.settings({ seconds: 2 })))
  t.ok(pairing.isSmoke(plans.settings({ pairs: 3 })))
  t.notOk(pairing.isSmoke(plans.settings({ quick: true, seconds: 3, pairs: 4 })), 'unless its rounds are lengthened')
  t.same(plans.settings({ connections: 16, pairs: 12 }).connections, 16)
  t.equal(plans.settings().fresh, false, 'one process a server for the whole run unless --fresh')
  t.equal(plans.settings({ fresh: true }).fresh, true)
})

t.test('a warning when the 1-minute load average is above 1 at the start', async (t) => {
  t.equal(pairing.loadWarning(1), undefined)
  t.equal(pairing.loadWarning(0.2), undefined)
  t.match(pairing.loadWarning(1.01), /load average was 1\.01 at the start \(above 1\)/)
})

t.test("chains: every ratio's two servers neighbours in one chain, no server twice in a chain", async (t) => {
  const plan = plans.planOf()
  const edges = plan.ratios.map((r: { numerator: string; denominator: string }) => [r.numerator, r.denominator])
  const chains: string[][] = pairing.chainsOf(edges)
  for (const [x, y] of edges) t.equal(neighbours(chains, x, y).length, 1, `${x} and ${y}`)
  for (const chain of chains) t.equal(new Set(chain).size, chain.length, `${chain.join(' ')}: each server once`)
  const rounds = chains.reduce((n, c) => n + c.length, 0)
  t.ok(rounds < 2 * edges.length, `${rounds} rounds a pass, fewer than two a ratio (${2 * edges.length})`)
  t.same(chains, [
    ['u', 'c', 'c0'],
    ['fs', 'fg'],
    ['d', 'b', 'c'],
    ["c''", "c'"],
  ])
  t.same(
    pairing.chainsOf([
      ['c', 'c0'],
      ['c0', 'c'],
    ]),
    [['c', 'c0']],
    'a pair asked twice is measured once',
  )
  t.throws(() => pairing.chainsOf([['c', 'c']]), /pairs c with itself/)
  t.same(
    pairing.chainsOf([
      ['a', 'b'],
      ['c', 'b'],
      ['a', 'd'],
      ['b', 'd'],
    ]),
    [
      ['d', 'a', 'b', 'c'],
      ['b', 'd'],
    ],
    'a chain grows at either end; a pair whose servers are both in it already starts a chain of its own',
  )
})

t.test(
  'the pairing routine: the two servers of a ratio one right after the other, the order swapped every pair',
  async (t) => {
    const chains = [
      ['u', 'c', 'c0'],
      ['d', 'b', 'c'],
      ["c'", "c''"],
    ]
    t.same(pairing.passOrder(chains[0], 0), ['u', 'c', 'c0'])
    t.same(pairing.passOrder(chains[0], 1), ['c0', 'c', 'u'])
    t.same(chains[0], ['u', 'c', 'c0'], 'the chain itself is left as it was')
    // A fake measurement: the order of the calls, and a fixed CPU per server that moves with the pass.
    const cpu: Record<string, number> = { u: 100, c: 200, c0: 180, d: 50, b: 150, "c'": 210, "c''": 220 }
    const calls: string[] = []
    const measured: Measured = await pairing.measurePasses(
      chains,
      { pairs: 4, seconds: 3 },
      async (id: string, seconds: number, pass: number) => {
        t.equal(seconds, 3)
        t.equal(pass, Math.floor(calls.length / 8), 'the pass each round belongs to, for --fresh')
        calls.push(id)
        return { cpuUs: cpu[id]! * (1 + calls.length / 100), p99: id === 'c' ? 12 : 10 }
      },
    )
    t.equal(calls.length, 4 * 8, 'every chain every pass')
    const passes = [0, 1, 2, 3].map((p) => calls.slice(p * 8, p * 8 + 8))
    for (const [x, y] of [
      ['c', 'u'],
      ['c0', 'c'],
      ['b', 'd'],
      ['c', 'b'],
      ["c''", "c'"],
    ]) {
      const orders = passes.map((pass) => {
        // The position of each server in the chain that pairs them: one right after the other.
        const chain = neighbours(chains, x!, y!)[0]!
        const start = passes[0]!.length - chains.slice(chains.indexOf(chain)).reduce((n, c) => n + c.length, 0)
        const slice = pass.slice(start, start + chain.length)
        t.equal(Math.abs(slice.indexOf(x!) - slice.indexOf(y!)), 1, `${x} and ${y} next to each other`)
        return slice.indexOf(x!) < slice.indexOf(y!)
      })
      t.same(orders, [orders[0], !orders[0], orders[0], !orders[0]], `${x} and ${y} swapped every pair`)
    }
    const cu = pairing.perPair(measured, 'u', 'c')
    t.equal(cu.length, 4, 'a ratio a pair')
    for (const [i, value] of cu.entries())
      t.equal(value, measured[0]!.rounds[i]!.u!.cpuUs / measured[0]!.rounds[i]!.c!.cpuUs)
    t.same(pairing.perPair(measured, 'u', 'd'), [], 'servers no chain pairs give no pairs')
    t.equal(pairing.roundsOf(measured, 'c').length, 8, '(c) measured in two chains a pass')
    const figures = pairing.ratioFigures({ label: 'c/u', numerator: 'u', denominator: 'c', target: 0.75 }, measured)
    t.same(
      [figures.count, figures.pivot, figures.median, figures.min, figures.max],
      [4, 0.75, pairing.median(cu), Math.min(...cu), Math.max(...cu)],
    )
    t.equal(figures.numeratorCpuUs, pairing.median(measured[0]!.rounds.map((r) => r.u!.cpuUs)))
    t.equal(figures.denominatorCpuUs, pairing.median(measured[0]!.rounds.map((r) => r.c!.cpuUs)))
    const aa = pairing.ratioFigures(plans.ratioOf("c'/c''"), measured)
    t.same([aa.pivot, aa.count], [1, 4], 'an arm without a target counts its pairs either side of 1')
    t.same(pairing.p99Pairs(measured)?.values, [2, 2, 2, 2], 'p99 (c) - p99 (b) in the c/b pairs')
    t.equal(pairing.p99Pairs([{ chain: ['u', 'c'], rounds: [] }]), undefined, 'none without c/b')
  },
)

t.test('the plan: the default ratios, --ratios, --full, the A/A arm, --baseline', async (t) => {
  const labels = (plan: { ratios: { label: string }[] }) => plan.ratios.map((r) => r.label)
  t.same(labels(plans.planOf()), ['c/u', 'memory/off', 'fg/fs', 'c/b', 'd/b', "c'/c''"])
  const memory = plans.planOf().ratios[1]!
  t.same([memory.numerator, memory.denominator, memory.target, memory.atMost], ['c', 'c0', 1.08, true])
  const cu = plans.planOf().ratios[0]!
  t.same([cu.numerator, cu.denominator, cu.target], ['u', 'c', 0.75], 'c/u = CPU(u)/CPU(c), at least 0.75')
  const fg = plans.planOf().ratios[2]!
  t.same([fg.numerator, fg.denominator, fg.target], ['fs', 'fg', 1])
  t.same(
    plans.planOf().sides.map((s: { id: string }) => s.id),
    ['u', 'c', 'c0', 'fs', 'fg', 'b', 'd', "c''", "c'"],
  )
  t.same(labels(plans.planOf({ ratios: 'c/f, c/e' })), ['c/f', 'c/e'])
  t.same(labels(plans.planOf({ ratios: 'c/f', aa: true })), ['c/f', "c'/c''"])
  t.same(labels(plans.planOf({ ratios: "d'/d''" })), ["d'/d''"], 'an A/A arm of any target')
  const full = labels(plans.planOf({ full: true }))
  for (const label of ['c/u', 'memory/off', 'fg/fs', 'c/b', 'd/b', 'c/f', 'c/e', 'fg/fa', 'cr/c', "c'/c''"])
    t.ok(full.includes(label), `--full pairs ${label}`)
  t.throws(() => plans.planOf({ ratios: 'c/x' }), /unknown ratio c\/x/)
  t.throws(() => plans.planOf({ ratios: "c'/d''" }), /unknown ratio/)
  t.throws(() => plans.planOf({ ratios: ' , ' }), /at least one/)
  t.throws(() => plans.planOf({ full: true, ratios: 'c/u' }), /not both/)
  t.throws(() => plans.planOf({ targets: 'c' }), /give --baseline too/)

  const against = plans.planOf({ baseline: 'old/dist', aa: true })
  t.same(labels(against), ['c this/baseline', "c'/c''", 'd this/baseline', "d'/d''", 'c0 this/baseline', "c0'/c0''"])
  const [c] = against.ratios
  t.same([c!.numerator, c!.denominator, c!.target, c!.atMost, c!.pivot], ['c', 'c@base', 1.03, true, 1])
  const both = plans.planOf({ baseline: 'old', targets: 'fg', ratios: 'memory/off' })
  t.same(labels(both), ['fg this/baseline', 'memory/off', 'memory/off (baseline)'])
  t.same([both.ratios[2]!.numerator, both.ratios[2]!.denominator], ['c@base', 'c0@base'])
  t.throws(() => plans.planOf({ baseline: 'old', targets: 'c,zz' }), /unknown target in zz/)
  t.throws(() => plans.planOf({ baseline: 'old', targets: ',' }), /at least one target/)
  t.throws(() => plans.sideOf('C!'), /unknown target in C!/)
  t.same(plans.sideOf("c''@base"), { id: "c''@base", key: 'c', target: plans.TARGETS[3], twin: 2, base: true })
})

t.test(
  'the Targets section: each ratio with its median, range, pairs each way and verdict; a smoke test says none',
  async (t) => {
    const ratio = (label: string, values: number[]) => {
      const r = plans.ratioOf(label)
      return { ...r, ...pairing.pairStats(values, r.target ?? 1), numeratorCpuUs: 100, denominatorCpuUs: 200 }
    }
    const e2e = {
      settings: plans.settings(),
      ratios: [
        ratio('c/u', [0.7, 0.8, 0.78, 0.76]),
        ratio('memory/off', [1.1, 1.2, 1.09, 1.3]),
        ratio("c'/c''", [1, 1.02]),
      ],
      p99: pairing.pairStats([1, -2, 3], 0),
    }
    const text = report.targetsSection(e2e, { smoke: false })
    t.match(
      text,
      /^## Targets, paired \(6 pairs of 3 s per ratio, 32 connections: the two servers of a ratio one right after the other, the order swapped every pair\)\n/,
    )
    t.match(
      text,
      /\| c\/u: [^|]+\| >= 0\.75 +\| 0\.770 +\| 0\.700 to 0\.800 +\| 3 above 0\.75, 1 below +\| \(u\) 100\.0, \(c\) 200\.0 +\| met +\|/,
    )
    t.match(
      text,
      /\| memory\/off: [^|]+\| <= 1\.08 +\| 1\.150 +\| 1\.090 to 1\.300 +\| 4 above 1\.08, 0 below +\| [^|]+\| MISSED +\|/,
    )
    t.match(
      text,
      /\| c'\/c'': A\/A[^|]+\| +\| 1\.010 +\| 1\.000 to 1\.020 +\| 1 above 1, 0 below, 1 at +\| [^|]+\| no target +\|/,
    )
    t.match(text, /\| c\/f: [^|]+\| >= 1 \(stretch 1\.2\) +\| not paired in this run \(--ratios c\/f, or --full\) +\|/)
    t.match(
      text,
      /\| p99 \(c\) - p99 \(b\)[^|]+\| <= 0 +\| \+1 +\| -2 to \+3 +\| 2 above 0, 1 below +\| +\| MISSED +\|/,
    )
    const smoke = report.targetsSection({ ...e2e, settings: plans.settings({ quick: true }) }, { smoke: true })
    t.match(smoke, /SMOKE TEST, no verdicts/)
    t.notMatch(smoke, /\b(met|MISSED)\b/)
    t.match(smoke, /\| c\/u: [^|]+\| >= 0\.75 +\| 0\.770 +\|[^\n]+\| no verdict \(smoke test\) +\|/)
    const failed = report.targetsSection(
      {
        ...e2e,
        ratios: [
          { ...ratio('c/e', []), error: 'peer: no answer' },
          { ...ratio('c/f', []), error: undefined },
        ],
      },
      { smoke: false },
    )
    t.match(failed, /\| c\/e: [^|]+\| >= 3 +\| n\/a: peer: no answer +\|/, 'a ratio whose server failed says why')
    t.match(failed, /\| c\/f: [^|]+\| >= 1 \(stretch 1\.2\) +\| n\/a +\|/)
    const nothing = report.targetsSection(undefined, { smoke: true, skipped: 'not measured (--micro-only)' })
    t.match(nothing, /^## Targets, paired: SMOKE TEST, no verdicts\n/)
    t.match(nothing, /\| c\/u: [^|]+\| >= 0\.75 +\| not measured \(--micro-only\) +\|/)
    const filled = report.targetsSection({ ...e2e, settings: { ...e2e.settings, fill: 100000 } }, { smoke: false })
    t.match(filled, /swapped every pair; each memory store filled with 100,000 payments first\)/)
    t.notMatch(filled, /new processes/)
    const fresh = report.targetsSection({ ...e2e, settings: { ...e2e.settings, fresh: true } }, { smoke: false })
    t.match(fresh, /swapped every pair, each pair in new processes\)/)
    const against = report.targetsSection({ ...e2e, baseline: 'old/dist', p99: undefined }, { smoke: false })
    t.match(against, /^## This build against old\/dist, paired/)
    t.notMatch(against, /not paired in this run/, 'a comparison lists only what it compared')
  },
)

t.test("the tables' figures", async (t) => {
  // @ts-expect-error the bench is plain JavaScript without declarations
  const format = (await import('../bench/lib/format.js')) as typeof import('../bench/lib/format.js')
  t.equal(format.table(['a', 'bb'], [['x', 1]]), '| a | bb |\n|---|----|\n| x | 1  |')
  t.equal(format.num(1234567), '1,234,567')
  t.equal(format.num(12.345), '12.3')
  t.equal(format.num(1.2345), '1.23')
  t.equal(format.num(-5.5, 1), '-5.5')
  t.equal(format.num(Number.NaN), 'n/a')
  t.equal(format.ratio(3, 2), '1.50x')
  t.equal(format.ratio(3, 0), 'n/a')
  t.equal(format.ratio(Number.NaN, 2), 'n/a')
  t.equal(format.mib(3 * 1048576), '3.0 MiB')
  t.equal(format.mib(undefined), 'n/a')
  t.equal(format.verdict(true), 'met')
  t.equal(format.verdict(false), 'MISSED')
  t.equal(format.verdict(undefined), 'n/a')
  t.equal(format.delta(3.25, 1), '+2.3')
  t.equal(format.delta(1, 3), '-2')
  t.equal(format.delta(1, Number.NaN), 'n/a')
})

t.test("a start's CPU profile by package: the running function's, node's loader's, V8's", async (t) => {
  // @ts-expect-error the bench is plain JavaScript without declarations
  const startup = (await import('../bench/lib/startup-profile.js')) as typeof import('../bench/lib/startup-profile.js')
  t.equal(startup.packageOf('file:///app/node_modules/undici/lib/dispatcher/pool.js'), 'undici')
  t.equal(
    startup.packageOf('file:///app/node_modules/a/node_modules/@sinclair/typebox/build/x.mjs'),
    '@sinclair/typebox',
  )
  t.equal(startup.packageOf('file:///app/dist/proxy/forward.js'), 'payments-gate')
  t.equal(startup.packageOf('node:internal/modules/esm/loader'), undefined)
  // A bundle: each line read as the module esbuild wrote above it, the bundle's own helpers as the build's.
  const bundle = join(
    t.testdir({
      dist: {
        'cli.js':
          'var helper;\n// node_modules/pino/pino.js\nvar p;\n// node_modules/a/node_modules/@scope/b/x.js\nvar b;\n// dist/gate.js\nvar g;\n',
      },
    }),
    'dist/cli.js',
  )
  const url = pathToFileURL(bundle).href
  t.same(
    [0, 1, 2, 4, 6, 99].map((line) => startup.packageOf(url, line)),
    ['payments-gate', 'pino', 'pino', '@scope/b', 'payments-gate', 'payments-gate'],
  )
  t.equal(startup.packageOf(url), 'payments-gate', 'without a line, by its path')
  t.equal(startup.packageOf('file:///nowhere/dist/cli.js', 3), 'payments-gate', 'a bundle not found: by its path')
  const frame = (functionName: string, url = '') => ({ functionName, url })
  // Nodes: a root, the loader under it, a package's top-level code under the loader, a builtin under that.
  const profile = {
    nodes: [
      { id: 1, callFrame: frame('(root)'), children: [2, 6, 7, 8, 9] },
      { id: 2, callFrame: frame('run', 'node:internal/modules/esm/module_job'), children: [3, 5] },
      { id: 3, callFrame: frame('', 'file:///app/node_modules/pino/pino.js'), children: [4] },
      { id: 4, callFrame: frame('readFileSync', 'node:fs') },
      { id: 5, callFrame: frame('compileSourceTextModule') },
      { id: 6, callFrame: frame('(garbage collector)') },
      { id: 7, callFrame: frame('(program)') },
      { id: 8, callFrame: frame('(idle)') },
      { id: 9, callFrame: frame('bootstrap', 'node:internal/bootstrap/node') },
    ],
    samples: [4, 3, 5, 5, 6, 7, 8, 9],
    timeDeltas: [1000, 1000, 2000, 3000, 500, 500, 9000, 1000],
  }
  const { total, shares } = startup.startupShares(profile)
  t.equal(total, 9, 'idle left out, in ms')
  t.same(shares, [
    [startup.LOADER, 5],
    ['pino', 2],
    ["node's own start", 1],
    ['garbage collection', 0.5],
    ['V8, unattributed (program)', 0.5],
  ])
})
