// The run's own figures as one SVG chart beside its tables: server CPU per request by target, and each
// ratio against its target. Vega-Lite 5 compiles the spec, vega renders it to SVG in Node, no browser.
import { compile } from 'vega-lite'
import { parse, View } from 'vega'

/**
 * The chart's data from a run's results (each part optional): `cpu` rows { group, target, us },
 * `ratios` rows { ratio, value, target, atMost } where a ratio is held to `value >= target`
 * (or `value <= target` with atMost).
 */
export function chartData({ e2e, fastify, against, paired } = {}) {
  const cpu = []
  const ratios = []
  for (const t of e2e?.targets ?? [])
    if (Number.isFinite(t.cpuUs)) cpu.push({ group: 'end to end', target: `(${t.key}) ${t.name}`, us: t.cpuUs })
  for (const t of fastify?.arms ?? [])
    if (Number.isFinite(t.cpuUs)) cpu.push({ group: 'Fastify', target: `(${t.key}) ${t.name}`, us: t.cpuUs })
  for (const t of against?.compared ?? []) {
    cpu.push({ group: 'against the baseline', target: `(${t.key}) this build`, us: t.thisCpuUs })
    cpu.push({ group: 'against the baseline', target: `(${t.key}) ${against.baseline}`, us: t.baselineCpuUs })
    ratios.push({
      ratio: `(${t.key}) this build / baseline, paired`,
      value: t.ratio,
      target: BASELINE_TARGET,
      atMost: true,
    })
  }
  const over = (x, y) => {
    const byKey = Object.fromEntries((e2e?.targets ?? []).map((t) => [t.key, t]))
    return byKey[y]?.cpuUs / byKey[x]?.cpuUs
  }
  for (const [x, y, target] of E2E_TARGETS)
    ratios.push({ ratio: `${x}/${y}`, value: over(x, y), target, atMost: false })
  for (const r of fastify?.ratios ?? [])
    if (r.target !== undefined)
      ratios.push({ ratio: `${r.x}/${r.y}, paired by round`, value: r.value, target: r.target, atMost: false })
  for (const p of paired ?? [])
    ratios.push({ ratio: `memory/off (${p.name}), paired`, value: p.ratio, target: 1.08, atMost: true })
  return { cpu, ratios: ratios.filter((r) => Number.isFinite(r.value)) }
}

/** The end-to-end targets of the Targets table: x/y = CPU(y)/CPU(x) at least this. */
const E2E_TARGETS = [
  ['c', 'b', 1.3],
  ['c', 'u', 0.8],
  ['c', 'f', 1.0],
  ['d', 'b', 2.0],
  ['c', 'e', 3],
]

/** Issue 30: a build is no dearer than the one it is compared with, within 3%. */
export const BASELINE_TARGET = 1.03

/** The Vega-Lite spec: two panels, CPU by target above, the ratios against their targets below. */
export function chartSpec({ cpu, ratios }, title) {
  const withVerdict = ratios.map((r) => ({
    ...r,
    verdict: (r.atMost ? r.value <= r.target : r.value >= r.target) ? 'met' : 'missed',
  }))
  const panels = []
  if (cpu.length > 0) {
    panels.push({
      title: 'Server CPU per request (µs, median)',
      data: { values: cpu },
      mark: { type: 'bar', tooltip: true },
      encoding: {
        y: { field: 'target', type: 'nominal', sort: null, title: null, axis: { labelLimit: 420 } },
        x: { field: 'us', type: 'quantitative', title: 'µs of server CPU per request' },
        color: { field: 'group', type: 'nominal', title: null, legend: { orient: 'bottom' } },
      },
      width: 420,
    })
  }
  if (withVerdict.length > 0) {
    const y = { field: 'ratio', type: 'nominal', sort: null, title: null, axis: { labelLimit: 420 } }
    panels.push({
      title: 'Ratios against their targets (bar: this run; tick: the target)',
      data: { values: withVerdict },
      layer: [
        {
          mark: 'bar',
          encoding: {
            y,
            x: { field: 'value', type: 'quantitative', title: 'ratio' },
            color: {
              field: 'verdict',
              type: 'nominal',
              title: null,
              scale: { domain: ['met', 'missed'], range: ['#4c9a2a', '#c0392b'] },
              legend: { orient: 'bottom' },
            },
          },
        },
        {
          mark: { type: 'tick', color: 'black', thickness: 2 },
          encoding: { y, x: { field: 'target', type: 'quantitative' } },
        },
      ],
      width: 420,
    })
  }
  return {
    $schema: 'https://vega.github.io/schema/vega-lite/v5.json',
    title,
    vconcat: panels,
    // Each panel its own colors: shared, the ratios' explicit domain (met, missed) left the CPU panel's groups
    // without a color, and its bars without a fill.
    resolve: { scale: { color: 'independent' } },
    config: { font: 'sans-serif' },
  }
}

/**
 * What the chart is drawn from, saved beside it (`latest.json`) so that it can be redrawn without a new run
 * (`node bench/redraw.js`): the title and the data of `chartData`.
 */
export function chartFigures(data, title) {
  return `${JSON.stringify({ title, ...data }, null, 2)}\n`
}

/** The chart of saved figures (`chartFigures`' text). */
export function redrawChart(text) {
  const { title, cpu, ratios } = JSON.parse(text)
  return renderChart({ cpu, ratios }, title)
}

/** The chart as SVG text, rendered headless (vega's renderer 'none': no DOM, no canvas). */
export async function renderChart(data, title) {
  const view = new View(parse(compile(chartSpec(data, title)).spec), { renderer: 'none' })
  try {
    return await view.toSVG()
  } finally {
    view.finalize()
  }
}
