// `node bench/redraw.js [FIGURES.json [OUT.svg]]`: the chart of a run drawn again from the figures the bench saved
// beside it (bench/results/latest.json by default, into the .svg of the same name), without a new run.
import { readFileSync, writeFileSync } from 'node:fs'
import { redrawChart } from './lib/chart.js'

const figures = process.argv[2] ?? new URL('results/latest.json', import.meta.url).pathname
const out = process.argv[3] ?? figures.replace(/\.json$/, '.svg')
writeFileSync(out, await redrawChart(readFileSync(figures, 'utf8')))
process.stdout.write(`${out} drawn from ${figures}\n`)
