import { spawn } from 'node:child_process'
import { existsSync, readFileSync } from 'node:fs'
import t from 'tap'

// `npm run bench` runs against the built code, as users do; `npm ci` builds it (the `prepare` script).
const built = new URL('../dist/gate.js', import.meta.url)

/** The benchmark's own command in a child, outside the coverage of the tests: no timing is asserted, only what it prints. */
function bench(args: string[]): Promise<{ code: number | null; stdout: string; stderr: string }> {
  // tap's process tracking would count the benchmark's own files into the coverage of lib/, and so
  // would node itself, for the built files mapped back to lib/ by their source maps: neither records.
  const { NODE_V8_COVERAGE: _, ...inherited } = process.env
  const env = { ...inherited, _TAPJS_PROCESSINFO_COVERAGE_: '0' }
  const child = spawn(process.execPath, ['bench/run.js', ...args], { env, stdio: ['ignore', 'pipe', 'pipe'] })
  let stdout = ''
  let stderr = ''
  child.stdout.on('data', (chunk: Buffer) => (stdout += chunk.toString()))
  child.stderr.on('data', (chunk: Buffer) => (stderr += chunk.toString()))
  return new Promise((resolve) => child.on('exit', (code) => resolve({ code, stdout, stderr })))
}

t.test(
  'npm run bench -- --micro-only --quick prints every stage, every ratio and the targets of server CPU per request',
  async (t) => {
    t.ok(existsSync(built), 'dist/ is built (npm run build)')
    const { code, stdout, stderr } = await bench(['--micro-only', '--quick'])
    t.equal(code, 0, stderr)
    const targets = [
      'c/b >= 1.3 (stretch 1.6)',
      'c/u >= 0.8',
      'c/f >= 1.0 (stretch 1.2)',
      'd/b >= 2.0',
      'c/e >= 3',
      'p99 (c) <= p99 (b) at 32 connections',
      'c0/c: retry protection off vs the memory store',
      'cr/c: the Redis store vs the memory store',
    ]
    const targetsTable = stdout.slice(stdout.indexOf('## Targets'), stdout.indexOf('## Micro'))
    // Without the end-to-end part no target has a figure, and each says so rather than a verdict.
    for (const target of targets) {
      t.match(
        targetsTable,
        new RegExp(`\\| ${target.replace(/[()+/.:]/g, '\\$&')} +\\| n/a +\\| (n/a|no target) +\\|`),
        target,
      )
    }
    for (const old of ['c/b >= 0.95', 'p99 (c) within +1 ms of (b)', 'd/b >= 1.5', 'c/e >= 2', 'TypeBox >= 2x Ajv'])
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
    t.match(stdout, /\(end to end skipped: --micro-only\)/)
  },
)

t.test(
  "the run's chart: CPU per target and each ratio against its target, as SVG made without a browser",
  async (t) => {
    // @ts-expect-error the bench is plain JavaScript without declarations
    const { chartData, renderChart } = (await import('../bench/lib/chart.js')) as typeof import('../bench/lib/chart.js')
    const e2e = {
      targets: [
        { key: 'b', name: 'pass-through', cpuUs: 100 },
        { key: 'c', name: 'gateway', cpuUs: 80 },
        { key: 'd', name: 'refusal', cpuUs: 40 },
        { key: 'e', name: 'Express peer', cpuUs: Number.NaN },
      ],
    }
    const fastify = {
      arms: [{ key: 'fg', name: 'the plugin', cpuUs: 30 }],
      ratios: [
        { x: 'fg', y: 'fa', target: 1, value: 1.05 },
        { x: 'fg', y: 'fp', value: 0.8 },
      ],
    }
    const against = { baseline: 'before', compared: [{ key: 'd', thisCpuUs: 41, baselineCpuUs: 40, ratio: 1.04 }] }
    const data = chartData({ e2e, fastify, against, paired: [{ name: 'this build', ratio: 1.1 }] })
    t.same(
      data.cpu.map((row: { target: string }) => row.target),
      ['(b) pass-through', '(c) gateway', '(d) refusal', '(fg) the plugin', '(d) this build', '(d) before'],
      'every target with a figure, in the order of the tables',
    )
    t.same(
      data.ratios.map((row: { ratio: string; value: number; target: number; atMost: boolean }) => [
        row.ratio,
        row.value,
        row.target,
        row.atMost,
      ]),
      [
        ['(d) this build / baseline, paired', 1.04, 1.03, true],
        ['c/b', 1.25, 1.3, false],
        ['d/b', 2.5, 2, false],
        ['fg/fa, paired by round', 1.05, 1, false],
        ['memory/off (this build), paired', 1.1, 1.08, true],
      ],
      'each ratio with its target; one without a target or a figure is left out',
    )
    const svg = await renderChart(data, ['a title', 'its second line'])
    t.match(svg, /^<svg [^>]*xmlns="http:\/\/www.w3.org\/2000\/svg"/)
    for (const text of [
      'a title',
      'its second line',
      'Server CPU per request (µs, median)',
      '(fg) the plugin',
      'd/b',
      'fg/fa, paired by round',
      'met',
      'missed',
    ])
      t.ok(svg.includes(`>${text}<`), `shows ${text}`)
    const bars: string[] = svg.match(/<path [^>]*aria-roledescription="bar"[^>]*>/g) ?? []
    t.equal(bars.length, data.cpu.length + data.ratios.length, 'a bar per figure')
    t.same(
      bars.filter((bar) => !/ fill="#[0-9a-f]{6}"/.test(bar)),
      [],
      'every bar has a fill: each panel has its own color scale',
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
        targets: [
          { key: 'b', name: 'pass-through', cpuUs: 100 },
          { key: 'c', name: 'gateway', cpuUs: 80 },
        ],
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
