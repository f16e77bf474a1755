// The command line of `npm run bench` (bench/README.md), read and checked before anything runs; test/bench.test.ts
// checks its refusals without starting a bench.
import { parseArgs } from 'node:util'
import { planOf, settings } from './e2e/plan.js'

/** What `args` (bench/run.js's arguments) ask for; throws the message the command prints for a refused one. */
export function benchOptions(args) {
  const { values } = parseArgs({
    args,
    options: {
      quick: { type: 'boolean' },
      full: { type: 'boolean' },
      ratios: { type: 'string' },
      aa: { type: 'boolean' },
      baseline: { type: 'string' },
      targets: { type: 'string' },
      pairs: { type: 'string' },
      seconds: { type: 'string' },
      connections: { type: 'string' },
      fill: { type: 'string' },
      profile: { type: 'boolean' },
      ladder: { type: 'boolean' },
      'ladder-only': { type: 'boolean' },
      'pairs-only': { type: 'boolean' },
      fresh: { type: 'boolean' },
      'micro-only': { type: 'boolean' },
      help: { type: 'boolean', short: 'h' },
    },
  })
  const number = (flag, whole = true) => {
    const n = values[flag] === undefined ? undefined : Number(values[flag])
    if (n !== undefined && !((whole ? Number.isInteger(n) : Number.isFinite(n)) && n > 0))
      throw new Error(`--${flag}: expected a ${whole ? 'whole ' : ''}number above 0, got ${values[flag]}`)
    return n
  }
  const s = settings({
    quick: values.quick,
    pairs: number('pairs'),
    seconds: number('seconds', false),
    connections: number('connections'),
    fresh: values.fresh,
  })
  const plan = planOf({
    ratios: values.ratios,
    full: values.full,
    aa: values.aa,
    baseline: values.baseline,
    targets: values.targets,
  })
  const fill = number('fill') ?? 0
  const baseline = values.baseline
  // What runs: the stages and the probe only in a run of the default kind; the start-up also against a baseline.
  const only = values['micro-only']
    ? 'micro'
    : values['ladder-only']
      ? 'ladder'
      : values['pairs-only']
        ? 'pairs'
        : undefined
  // A new process each pair leaves no one process to profile, or to probe for memory and latency after the pairs.
  if (values.fresh && (values.profile || (only !== 'pairs' && baseline === undefined)))
    throw new Error('--fresh: only with --pairs-only or --baseline, and without --profile')
  return { values, s, plan, fill, baseline, only }
}
