// Turns the measurements into the tables and the verdict on each target.
import { delta, mib, num, ratio, table } from './format.js'
import { pairStats } from './pairing.js'
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

const round1 = (x) => Math.round(x * 10) / 10

/**
 * Each server measured: the medians of its rounds (every round of its pairs), then, in a full run, the serial
 * probe and the gateway's memory.
 */
export function serversSection(e2e) {
  const s = e2e.settings
  const rows = e2e.sides.map((x) =>
    x.error
      ? [
          `(${x.id}) ${x.name}`,
          x.error.startsWith('peer') || x.error.startsWith('gateway') ? NOT_BUILT : x.error,
          '',
          '',
          '',
          '',
          '',
          '',
          '',
        ]
      : [
          `(${x.id}) ${x.name}`,
          num(x.rps),
          num(x.p50),
          num(x.p99),
          num(x.cpuUs, 1),
          num(x.kernelUs, 1),
          num(x.gcUs, 1),
          String(x.rounds),
          x.unexpected === 0 ? 'all' : `${x.unexpected} NOT`,
        ],
  )
  // (cr)'s redis-server, (ck)'s three cluster nodes together.
  const stores = e2e.sides.filter((x) => x.sidecarCpuUs !== undefined)
  const lines = [
    `## Each server (autocannon, ${s.connections} connections, the median of its rounds of ${s.seconds} s in the pairs)`,
    '',
    table(
      [
        'server',
        'req/s',
        'p50 ms',
        'p99 ms',
        'server CPU us/req',
        'of it in the kernel us/req',
        'GC pauses us/req',
        'rounds',
        'expected status',
      ],
      rows,
    ),
    ...stores.flatMap((store) => [
      '',
      `redis-server itself, per (${store.id}) request (not counted in its ratios): ${num(store.sidecarCpuUs, 1)} us of CPU.`,
    ]),
  ]
  if (e2e.memory === undefined) return lines.join('\n')
  const serialRows = e2e.sides.map((x) => [
    `(${x.id}) ${x.name}`,
    x.serial ? num(x.serial.p50) : NOT_BUILT,
    x.serial ? num(x.serial.p99) : '',
    x.serial ? num(x.serial.cpuUs) : '',
  ])
  const memory = e2e.memory
  return [
    ...lines,
    '',
    `### Serial probe (one keep-alive connection, ${s.serialCount} sequential requests after ${s.serialWarmup} warm-up)`,
    '',
    table(['server', 'p50 us', 'p99 us', 'server CPU us/req'], serialRows),
    '',
    'One request at a time, nothing is batched: each request pays its own system calls and event-loop wake-ups, as on a gateway far from saturation. Server CPU per request is the median of five chunks of the requests. The servers are probed one after another, not paired: no ratio is taken from them.',
    '',
    '### Gateway memory (c)',
    '',
    table(
      ['when', 'RSS'],
      [
        ['after warm-up', mib(memory.afterWarmup)],
        [
          `after ${num(memory.served ?? NaN)} requests${memory.requests < 200_000 ? ' (--quick: scaled down from 200,000)' : ''}`,
          mib(memory.after),
        ],
      ],
    ),
  ].join('\n')
}

const LADDER_TITLES = {
  valid: 'Valid sales, from the bare undici forwarder (u) to the gateway (c), the pass-through (b) for reference',
  refused: "Refusals, from node's own floor to the gateway answering (d) 400 bodyDoesNotMatchSchema",
}

/**
 * What `x` adds to `y`, the two neighbours in the ladder's chain: the median over the pairs of x's CPU per
 * request minus y's, and in how many pairs x cost more. A difference of the two medians would subtract
 * figures of different moments, and a moment moves by more than a step adds.
 */
function paired(x, y) {
  const stats = pairStats(
    x.cpuRounds.map((cpu, i) => cpu - y.cpuRounds[i]),
    0,
  )
  return stats.count === 0 ? 'n/a' : `${delta(round1(stats.median), 0)} (higher in ${stats.above} of ${stats.count})`
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
      table(['step', 'req/s', 'server CPU us/req', 'us added by the step (paired with the step above)', ...last], rows),
    ].join('\n')
  })
  return [
    `## One step at a time (--ladder: ${s.pairs} passes of ${s.seconds} s per step, each ladder measured top to bottom then bottom to top, ${s.connections} connections, median round)`,
    '',
    sections.join('\n\n'),
  ].join('\n')
}

/** `--profile`: where each profiled server's CPU went during the paired rounds, per request, side by side. */
export function profileSection(breakdowns, requests) {
  const names = Object.keys(breakdowns)
  const us = (m, name) => (m === undefined ? 'n/a' : num(m.get(name), 1))
  const rows = [...CATEGORY_NAMES, 'total'].map((category) => [
    category,
    ...names.map((n) => us(breakdowns[n], category)),
  ])
  return [
    '### Where the CPU goes (--profile: V8 CPU profiles of the paired rounds, us per request, idle left out)',
    '',
    table(['category of the sampled function', ...names.map((n) => `(${n})`)], rows),
    '',
    `Requests answered while profiled: ${names.map((n) => `(${n}) ${num(requests[n])}`).join(', ')}.`,
  ].join('\n')
}
