// The run's own figures as one SVG chart beside its tables: server CPU per request by target, and each
// ratio against its target. Vega-Lite 5 compiles the spec, vega renders it to SVG in Node, no browser.
import { judge } from './pairing.js'

/**
 * The chart's data from a run's paired results: `cpu` rows { group, target, us } (each server's median CPU per
 * request, grouped by build), `ratios` rows { ratio, value, min, max, target, atMost, verdict }: each ratio
 * measured, its median, the range of its pairs and its verdict (`no verdict` in a smoke test).
 */
export function chartData({ e2e, smoke = false } = {}) {
  const cpu = []
  for (const x of e2e?.sides ?? [])
    if (Number.isFinite(x.cpuUs))
      cpu.push({
        group: x.id.endsWith('@base') ? `built from ${e2e.baseline}` : 'this build',
        target: `(${x.id}) ${x.name}`,
        us: x.cpuUs,
      })
  const ratios = (e2e?.ratios ?? [])
    .filter((r) => Number.isFinite(r.median))
    .map((r) => ({
      ratio: `${r.label}, paired`,
      value: r.median,
      min: r.min,
      max: r.max,
      target: r.target,
      atMost: r.atMost === true,
      verdict: judge(r, r.median, smoke),
    }))
  return { cpu, ratios }
}

/** The Vega-Lite spec: two panels, CPU by target above, the ratios against their targets below. */
export function chartSpec({ cpu, ratios }, title) {
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
  if (ratios.length > 0) {
    const y = { field: 'ratio', type: 'nominal', sort: null, title: null, axis: { labelLimit: 420 } }
    panels.push({
      title: 'Ratios, paired (bar: the median of the pairs; line: their range; tick: the target)',
      data: { values: ratios },
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
              scale: {
                domain: ['met', 'missed', 'no verdict', 'no target'],
                range: ['#4c9a2a', '#c0392b', '#8c8c8c', '#4a78a8'],
              },
              legend: { orient: 'bottom' },
            },
          },
        },
        {
          transform: [{ filter: 'isValid(datum.min) && isValid(datum.max)' }],
          mark: { type: 'rule', color: 'black' },
          encoding: { y, x: { field: 'min', type: 'quantitative' }, x2: { field: 'max' } },
        },
        {
          transform: [{ filter: 'isValid(datum.target)' }],
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
  // Loaded here: a run that draws nothing (a refused option, the stages alone) never pays for vega.
  const [{ compile }, { parse, View }] = await Promise.all([import('vega-lite'), import('vega')])
  const view = new View(parse(compile(chartSpec(data, title)).spec), { renderer: 'none' })
  try {
    return await view.toSVG()
  } finally {
    view.finalize()
  }
}
