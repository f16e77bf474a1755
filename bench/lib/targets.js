// The Targets section, the run's verdicts: every ratio the run paired, with the median of its pairs, their
// range and how many went each way; no verdict in a smoke test.
import { RATIOS } from '../e2e/plan.js'
import { delta, num, table, verdict } from './format.js'
import { judge, shown } from './pairing.js'

/** A ratio's target as printed: `>= 1.3 (stretch 1.6)`, `<= 1.08`, or nothing. */
const goal = ({ target, stretch, atMost }) =>
  target === undefined ? '' : `${atMost ? '<=' : '>='} ${target}${stretch === undefined ? '' : ` (stretch ${stretch})`}`

/** The verdict column: `met`, `MISSED`, with the stretch's where there is one; never a verdict in a smoke test. */
export function verdictText(ratio, value, smoke) {
  const v = judge(ratio, value, smoke)
  if (v === 'no verdict') return 'no verdict (smoke test)'
  if (v !== 'met' && v !== 'missed') return v
  const stretch = ratio.stretch === undefined || v === 'missed' ? '' : `; stretch ${verdict(value >= ratio.stretch)}`
  return `${verdict(v === 'met')}${stretch}`
}

/** `4 above 0.75, 2 below`: how many pairs fell on each side of the ratio's target (or 1). */
const eachWay = ({ above, below, pivot, count }) =>
  `${above} above ${pivot}, ${below} below${above + below < count ? `, ${count - above - below} at` : ''}`

/**
 * The run's ratios, each from its paired rounds: the median of the per-pair ratios, their range and how
 * many pairs fell each way, each side's median CPU in those pairs and the verdict (none in a smoke test).
 * Ratios with a target that the run did not pair are listed as such (`skipped` says why, when nothing was).
 */
export function targetsSection(e2e, { smoke, skipped } = {}) {
  const s = e2e?.settings
  const measured = e2e?.ratios ?? []
  const rows = measured.map((r) => {
    const label = `${r.label}: ${r.what}`
    if (r.count === 0) return [label, goal(r), `n/a${r.error ? `: ${r.error}` : ''}`, '', '', '', 'n/a']
    return [
      label,
      goal(r),
      shown(r.median, r.atMost),
      `${r.min.toFixed(3)} to ${r.max.toFixed(3)}`,
      eachWay(r),
      `(${r.numerator}) ${num(r.numeratorCpuUs, 1)}, (${r.denominator}) ${num(r.denominatorCpuUs, 1)}`,
      verdictText(r, r.median, smoke),
    ]
  })
  if (e2e?.baseline === undefined)
    for (const r of RATIOS.filter((x) => x.target !== undefined && !measured.some((m) => m.label === x.label)))
      rows.push([
        `${r.label}: ${r.what}`,
        goal(r),
        skipped ?? `not paired in this run (--ratios ${r.label}, or --full)`,
        '',
        '',
        '',
        '',
      ])
  const p99 = e2e?.p99
  if (p99 !== undefined) {
    const rule = { target: 0, atMost: true }
    rows.push([
      `p99 (c) - p99 (b), ms, in the c/b pairs (autocannon, ${s.connections} connections)`,
      '<= 0',
      delta(p99.median, 0),
      `${delta(p99.min, 0)} to ${delta(p99.max, 0)}`,
      eachWay(p99),
      '',
      verdictText(rule, p99.median, smoke),
    ])
  }
  const title = e2e?.baseline === undefined ? '## Targets, paired' : `## This build against ${e2e.baseline}, paired`
  return [
    `${title}${s ? ` (${s.pairs} pairs of ${s.seconds} s per ratio, ${s.connections} connections: the two servers of a ratio one right after the other, the order swapped every pair${s.fresh ? ', each pair in new processes' : ''}${s.fill ? `; each memory store filled with ${num(s.fill)} payments first` : ''})` : ''}${smoke ? ': SMOKE TEST, no verdicts' : ''}`,
    '',
    "x/y is CPU(y)/CPU(x), server CPU per request: above 1, (x) is the cheaper. memory/off is CPU(c)/CPU(c0), `this/baseline` CPU(this build)/CPU(baseline). Each figure is the median of the per-pair ratios, printed rounded away from its target; an A/A arm (x'/x'': two more processes of (x), one build) shows what one build measures against itself in this run.",
    '',
    table(
      [
        'ratio',
        'target',
        'median of the pairs',
        'range of the pairs',
        'pairs each way',
        'us/req, median in the pairs',
        'verdict',
      ],
      rows,
    ),
  ].join('\n')
}
