// Turns the measurements into the tables and the verdict on each target.
import { CONNECTIONS } from '../e2e/run.js'
import { mib, num, ratio, table, verdict } from './format.js'
import { CATEGORY_NAMES } from './profile.js'

const NOT_BUILT = 'n/a (not built yet)'

const pairs = [
  ['TypeBox / Ajv, valid body', 'valid body: TypeBox compiled', 'valid body: Ajv compiled'],
  ['TypeBox / Ajv, invalid body', 'invalid body: TypeBox compiled', 'invalid body: Ajv compiled'],
  ['TypeBox errors() / Ajv allErrors', 'every error, mapped: TypeBox errors()', 'every error, raw: Ajv allErrors'],
  ['fast-json-stringify / JSON.stringify', 'error body: fast-json-stringify', 'error body: JSON.stringify'],
  ['cached / uncached credential check', 'BasicAuth, cached (SHA-256 + LRU)', 'BasicAuth, uncached (scrypt N=16384)'],
]

export function microSection(micro) {
  const by = new Map(micro.results.map((r) => [r.name, r]))
  const rows = micro.results.map((r) => [r.stage, r.name, num(r.opsPerSec), num(r.usPerOp, 2)])
  const ratios = pairs.map(([label, x, y]) => [label, ratio(by.get(x)?.opsPerSec, by.get(y)?.opsPerSec)])
  const valid = by.get('checkBody, valid sale')
  const padded = micro.results.find((r) => r.name.startsWith('checkBody, valid sale padded'))
  const worst = micro.results.find((r) => r.name.startsWith('checkBody, worst case'))
  const cost = [
    ['worst case / valid sale (625 B)', ratio(worst?.usPerOp, valid?.usPerOp)],
    ['worst case / valid sale padded to the limit', ratio(worst?.usPerOp, padded?.usPerOp)],
  ]
  return [
    '## Micro benchmarks (tinybench, median sample)',
    '',
    table(['stage', 'operation', 'ops/s', 'us/op'], rows),
    '',
    table(['ratio (ops/s)', 'value'], ratios),
    '',
    `Worst-case refused body: ${num(micro.worst.bytes)} bytes, ${micro.worst.errors} items in validationErrors, answered ${micro.worst.status}.`,
    '',
    table(['cost per request', 'value'], cost),
  ].join('\n')
}

/** The ratios of server CPU per request the end-to-end section prints, [x, y, what x/y compares]; the first TARGETED_RATIOS have targets. */
const RATIOS = [
  ['c', 'b', 'payments-gate vs the http-proxy-3 pass-through'],
  ['c', 'u', 'payments-gate vs the bare undici forwarder'],
  ['c', 'f', 'payments-gate vs the Fastify peer'],
  ['c', 'e', 'payments-gate vs the Express peer'],
  ['d', 'b', 'a refusal vs the pass-through'],
  ['c', 'a', 'payments-gate vs the bare backend'],
  ['c0', 'c', 'retry protection off vs the memory store'],
  ['cr', 'c', 'the Redis store vs the memory store'],
  ['cl', 'c', 'an entity with a rate limit vs one without (memory)'],
  ['crl', 'cr', 'an entity with a rate limit vs one without (Redis)'],
  ['ct', 'c', 'tracing on vs off'],
  ['cs', 'c', 'TLS on the listener vs plain HTTP'],
  ['cb', 'c', 'an https backend vs a plain one'],
]
const TARGETED_RATIOS = 5

export function e2eSection(e2e) {
  const s = e2e.settings
  const t = Object.fromEntries(e2e.targets.map((x) => [x.key, x]))
  const rows = e2e.targets.map((x) =>
    x.error
      ? [
          `(${x.key}) ${x.name}`,
          x.error.startsWith('peer') || x.error.startsWith('gateway') ? NOT_BUILT : x.error,
          '',
          '',
          '',
          '',
        ]
      : [
          `(${x.key}) ${x.name}`,
          num(x.rps),
          num(x.p50),
          num(x.p99),
          num(x.cpuUs),
          x.unexpected === 0 ? 'all' : `${x.unexpected} NOT`,
        ],
  )
  const serialRows = e2e.targets.map((x) => [
    `(${x.key}) ${x.name}`,
    x.serial ? num(x.serial.p50) : NOT_BUILT,
    x.serial ? num(x.serial.p99) : '',
    x.serial ? num(x.serial.p50 - (t.b?.serial?.p50 ?? NaN)) : '',
    x.serial ? num(x.serial.cpuUs) : '',
  ])
  const cheaper = (x, y) => ratio(t[y]?.cpuUs, t[x]?.cpuUs)
  const serialCheaper = (x, y) => ratio(t[y]?.serial?.cpuUs, t[x]?.serial?.cpuUs)
  const ratios = RATIOS.map(([x, y, label]) => [`${x}/${y}: ${label}`, cheaper(x, y)])
  // One request at a time, the ratios the targets are set on.
  const serialRatios = RATIOS.slice(0, TARGETED_RATIOS).map(([x, y, label]) => [
    `${x}/${y}: ${label}`,
    serialCheaper(x, y),
  ])
  const added = [
    ['c - u: checks, logs and metrics on top of bare forwarding', delta(round1(t.c?.cpuUs), round1(t.u?.cpuUs))],
    ['c - c0: the memory store', delta(round1(t.c?.cpuUs), round1(t.c0?.cpuUs))],
    ['cr - c: the Redis store instead, in the gateway', delta(round1(t.cr?.cpuUs), round1(t.c?.cpuUs))],
    ['redis-server itself, per (cr) request (not in cr/c)', num(t.cr?.sidecarCpuUs, 1)],
    ['ct - c: spans made, batched and exported over OTLP', delta(round1(t.ct?.cpuUs), round1(t.c?.cpuUs))],
    ['p99 c - p99 b (ms, not CPU)', delta(t.c?.p99, t.b?.p99)],
  ]
  const memory = e2e.memory
  return [
    `## End to end (autocannon, ${s.connections} connections, ${s.rounds} alternating rounds of ${s.seconds} s per target, median round)`,
    '',
    table(['target', 'req/s', 'p50 ms', 'p99 ms', 'server CPU us/req', 'expected status'], rows),
    '',
    'A ratio x/y is the server CPU per request of (y) over that of (x): how many requests (x) answers for the CPU (y) spends on one. Above 1, (x) is the cheaper.',
    '',
    table(['ratio of server CPU per request', 'value'], ratios),
    '',
    table(['server CPU per request added (us)', 'value'], added),
    '',
    `### Serial probe (one keep-alive connection, ${s.serialCount} sequential requests after ${s.serialWarmup} warm-up)`,
    '',
    table(['target', 'p50 us', 'p99 us', 'p50 over (b) us', 'server CPU us/req'], serialRows),
    '',
    'One request at a time, nothing is batched: each request pays its own system calls and event-loop wake-ups, as on a gateway far from saturation. Server CPU per request is the median of five chunks of the requests.',
    '',
    table(['ratio of server CPU per request, one request at a time', 'value'], serialRatios),
    '',
    '### Gateway memory',
    '',
    table(
      ['when', 'RSS'],
      [
        ['after warm-up', mib(memory.afterWarmup)],
        [
          `after ${num(memory.served ?? NaN)} requests${s.memoryRequests < 200_000 ? ' (--quick: scaled down from 200,000)' : ''}`,
          mib(memory.after),
        ],
      ],
    ),
  ].join('\n')
}

const round1 = (x) => Math.round(x * 10) / 10

const delta = (x, y) =>
  Number.isFinite(x) && Number.isFinite(y) ? `${x - y >= 0 ? '+' : ''}${Number((x - y).toFixed(1))}` : 'n/a'

/**
 * The targets of the performance issue, as ratios of server CPU per request
 * (x/y = CPU of (y) over CPU of (x), the median round of each), each with its
 * figure from this run; then the cost of retry protection, which has no target.
 */
export function targetsSection(e2e) {
  const t = Object.fromEntries((e2e?.targets ?? []).map((x) => [x.key, x.error ? {} : x]))
  const over = (x, y) => t[y]?.cpuUs / t[x]?.cpuUs
  // Rounded up, 1.297 would read 1.30 next to a MISSED: a ratio held to a floor is shown rounded down.
  const atLeast = (value) => (Number.isFinite(value) ? (Math.floor(value * 1000) / 1000).toFixed(3) : 'n/a')
  const floor = (label, value, target, stretch) => {
    const met = Number.isFinite(value) ? value >= target : undefined
    const more = stretch === undefined || !met ? '' : `; stretch ${verdict(value >= stretch)}`
    return [label, atLeast(value), `${verdict(met)}${more}`]
  }
  const fixed = (value) => (Number.isFinite(value) ? value.toFixed(3) : 'n/a')
  const p99 = [t.c?.p99, t.b?.p99]
  const p99Met = p99.every(Number.isFinite) ? p99[0] <= p99[1] : undefined
  const rows = [
    floor('c/b >= 1.3 (stretch 1.6)', over('c', 'b'), 1.3, 1.6),
    floor('c/u >= 0.8', over('c', 'u'), 0.8),
    floor('c/f >= 1.0 (stretch 1.2)', over('c', 'f'), 1.0, 1.2),
    floor('d/b >= 2.0', over('d', 'b'), 2.0),
    floor('c/e >= 3', over('c', 'e'), 3),
    [
      `p99 (c) <= p99 (b) at ${CONNECTIONS} connections`,
      p99Met === undefined ? 'n/a' : `${p99[0]} ms vs ${p99[1]} ms`,
      verdict(p99Met),
    ],
    ['c0/c: retry protection off vs the memory store', fixed(over('c0', 'c')), 'no target'],
    ['cr/c: the Redis store vs the memory store', fixed(over('cr', 'c')), 'no target'],
    ...(e2e?.paired
      ? [
          [
            `CPU(c)/CPU(c0) paired: the memory store's cost, median of ${e2e.settings.pairs} per-pair ratios`,
            fixed(e2e.paired[0].ratio),
            `<= ${PAIRED_TARGET}: ${verdict(e2e.paired[0].ratio <= PAIRED_TARGET)}`,
          ],
        ]
      : []),
    ...(e2e?.limited ?? []).map((pair) => [
      `${pair.name}, median of ${e2e.settings.pairs} per-pair ratios`,
      fixed(pair.ratio),
      'no target',
    ]),
    ['ct/c: tracing on vs off', fixed(over('ct', 'c')), 'no target'],
    ['cs/c: TLS on the listener vs plain HTTP', fixed(over('cs', 'c')), 'no target'],
    ['cb/c: an https backend vs a plain one', fixed(over('cb', 'c')), 'no target'],
  ]
  return [
    '## Targets (ratios of server CPU per request; x/y = CPU of (y) / CPU of (x), above 1 means (x) is cheaper)',
    '',
    table(['target', 'this run', 'verdict'], rows),
  ].join('\n')
}

/**
 * The paired figure of the memory store's cost: CPU(memory)/CPU(off) per request, the median of the
 * per-pair ratios, for each build measured (this one, and a `--baseline` build with `--pairs-only`).
 */
export function pairedSection({ settings: s, paired }) {
  const rows = paired.map((b) => {
    const sorted = [...b.ratios].sort((x, y) => x - y)
    return [
      b.name,
      b.ratio.toFixed(3),
      `${sorted[0].toFixed(3)} to ${sorted.at(-1).toFixed(3)}`,
      num(b.memoryCpuUs, 1),
      num(b.offCpuUs, 1),
      verdict(b.ratio <= PAIRED_TARGET),
    ]
  })
  return [
    `## The memory store's cost, paired (${s.pairs} pairs of ${s.pairSeconds} s, ${s.connections} connections: the gateway with the memory store and with retry protection off, one right after the other${s.fill ? `; each memory store filled with ${num(s.fill)} payments first` : ''})`,
    '',
    table(
      [
        'build',
        'CPU(memory)/CPU(off), median of the pairs',
        'range of the pairs',
        'memory us/req (median)',
        'off us/req (median)',
        `<= ${PAIRED_TARGET}`,
      ],
      rows,
    ),
  ].join('\n')
}

/** Issue 21: the memory store costs at most 8% of a payment's CPU. */
const PAIRED_TARGET = 1.08

const LADDER_TITLES = {
  valid: 'Valid sales, from the bare undici forwarder (u) to the gateway (c), the pass-through (b) for reference',
  refused: "Refusals, from node's own floor to the gateway answering (d) 400 bodyDoesNotMatchSchema",
}

/**
 * What `x` adds to `y`, the two measured in the same rounds: the median over the rounds of x's CPU per
 * request minus y's in that round, and in how many rounds x cost more. A difference of the two medians
 * would subtract figures from different rounds, and on a shared machine a round moves by more than a
 * step adds, while the two runs of one round are seconds apart.
 */
function paired(x, y) {
  const differences = x.cpuRounds.map((cpu, i) => cpu - y.cpuRounds[i]).filter(Number.isFinite)
  if (differences.length === 0) return 'n/a'
  const sorted = differences.sort((p, q) => p - q)
  const middle = sorted[Math.floor((sorted.length - 1) / 2)]
  return `${delta(round1(middle), 0)} (higher in ${sorted.filter((d) => d > 0).length} of ${sorted.length})`
}

/**
 * `--ladder`: each ladder one step at a time, each step's server CPU per request and what it adds to the
 * step before, paired round by round. The reference row (b) adds nothing to anything. The last column relates each row to the ladder's
 * yardstick: for valid sales (b)'s CPU over the row's (as c/b in the targets), for refusals the row's CPU
 * over the floor's.
 */
export function ladderSection(ladder) {
  const s = ladder.settings
  const sections = ladder.ladders.map(({ key, steps }) => {
    const live = steps.filter((x) => x.error === undefined)
    const climbing = live.filter((x) => !x.reference)
    const yardstick = key === 'valid' ? live.find((x) => x.reference) : climbing[0]
    const last = key === 'valid' ? ['x/b (CPU of (b) / CPU of the row)'] : ["times the floor's CPU"]
    const rows = steps.map((x) => {
      if (x.error) return [x.name, x.error, '', '', '']
      const before = x.reference ? undefined : climbing[climbing.indexOf(x) - 1]
      const added = before ? paired(x, before) : ''
      const relative = key === 'valid' ? ratio(yardstick?.cpuUs, x.cpuUs) : ratio(x.cpuUs, yardstick?.cpuUs)
      return [x.name, num(x.rps), num(x.cpuUs), added, relative]
    })
    return [
      `### ${LADDER_TITLES[key]}`,
      '',
      table(['step', 'req/s', 'server CPU us/req', 'us added by the step (paired rounds)', ...last], rows),
    ].join('\n')
  })
  return [
    `## One step at a time (--ladder: ${s.rounds} alternating rounds of ${s.seconds} s per ladder, ${s.connections} connections, median round)`,
    '',
    sections.join('\n\n'),
  ].join('\n')
}

/** `--profile`: where each server's CPU went, per request, from its whole-life CPU profile. */
export function profileSection(breakdowns, requests) {
  const { passthrough: b, gateway: c, refusals: d } = breakdowns
  const us = (m, name) => (m === undefined ? 'n/a' : num(m.get(name), 1))
  const rows = [...CATEGORY_NAMES, 'total'].map((name) => [
    name,
    us(b, name),
    us(c, name),
    us(d, name),
    b && c ? delta(round1(c.get(name)), round1(b.get(name))) : 'n/a',
  ])
  return [
    '### Where the CPU goes (--profile: V8 CPU profiles of the measured rounds, us per request, idle left out)',
    '',
    table(
      ['category of the sampled function', '(b) pass-through', '(c) gateway, valid', '(d) gateway, refused', 'c - b'],
      rows,
    ),
    '',
    `Requests answered while profiled: (b) ${num(requests.passthrough)}, (c) ${num(requests.gateway)}, (d) ${num(requests.refusals)}.`,
  ].join('\n')
}

/**
 * `--baseline DIR`: each compared target on this build and on DIR's, in paired rounds; the figure is the
 * median of the per-pair ratios CPU(this build)/CPU(DIR) (below 1, this build is the cheaper).
 */
export function baselineSection({ settings: s, baseline, compared }) {
  const rows = compared.map((x) => {
    const sorted = [...x.ratios].sort((p, q) => p - q)
    return [
      `(${x.key}) ${x.name}`,
      num(x.thisCpuUs, 1),
      num(x.baselineCpuUs, 1),
      x.ratio.toFixed(3),
      `${sorted[0].toFixed(3)} to ${sorted.at(-1).toFixed(3)}`,
      `${x.dearer} of ${x.ratios.length}`,
    ]
  })
  return [
    `## This build against ${baseline}, paired (${s.pairs} pairs of ${s.pairSeconds} s per target, ${s.connections} connections, the order swapped every pair)`,
    '',
    table(
      [
        'target',
        'this build us/req (median)',
        `${baseline} us/req (median)`,
        'this / baseline, median of the pairs',
        'range of the pairs',
        'pairs where this build cost more',
      ],
      rows,
    ),
  ].join('\n')
}

/** `--profile` with `--baseline`: where each compared server's CPU went, this build beside the baseline. */
export function baselineProfileSection(breakdowns, requests) {
  const names = Object.keys(breakdowns)
  const us = (m, name) => (m === undefined ? 'n/a' : num(m.get(name), 1))
  const rows = [...CATEGORY_NAMES, 'total'].map((category) => [
    category,
    ...names.map((n) => us(breakdowns[n], category)),
  ])
  return [
    '### Where the CPU goes (--profile: V8 CPU profiles of the paired rounds, us per request, idle left out)',
    '',
    table(['category of the sampled function', ...names], rows),
    '',
    `Requests answered while profiled: ${names.map((n) => `${n} ${num(requests[n])}`).join(', ')}.`,
  ].join('\n')
}

/** The Fastify arms: each arm's median round, then the issue's ratios taken round by round. */
export function fastifySection({ settings: s, arms, ratios }) {
  const rows = arms.map((x) =>
    x.error
      ? [`(${x.key}) ${x.name}`, x.error, '', '', '']
      : [
          `(${x.key}) ${x.name}`,
          num(x.rps),
          num(x.p99),
          num(x.cpuUs, 1),
          x.unexpected === 0 ? 'all' : `${x.unexpected} NOT`,
        ],
  )
  const ratioRows = ratios.map(({ x, y, target, value, perRound, cheaper }) => [
    `${x}/${y}`,
    Number.isFinite(value) ? value.toFixed(3) : 'n/a',
    perRound.length === 0 ? 'n/a' : `${Math.min(...perRound).toFixed(3)} to ${Math.max(...perRound).toFixed(3)}`,
    `${cheaper} of ${perRound.length}`,
    target === undefined
      ? 'no target'
      : `>= ${target.toFixed(1)}: ${verdict(Number.isFinite(value) ? value >= target : undefined)}`,
  ])
  return [
    `## Embedded in Fastify 5 (the same sale to a route that answers 201 itself; ${s.rounds} alternating rounds of ${s.seconds} s per arm, ${s.connections} connections, the order rotated each round)`,
    '',
    table(['arm', 'req/s', 'p99 ms', 'server CPU us/req (median round)', 'expected status'], rows),
    '',
    'x/y is CPU(y)/CPU(x) in each round, the median of the rounds: above 1, (x) is the cheaper.',
    '',
    table(['ratio', 'median of the rounds', 'range', 'rounds where x was cheaper', 'target'], ratioRows),
  ].join('\n')
}
