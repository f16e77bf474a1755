// Turns the measurements into the tables and the verdict on each target of issue 6.
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

export function e2eSection(e2e) {
  const s = e2e.settings
  const t = Object.fromEntries(e2e.targets.map((x) => [x.key, x]))
  const rows = e2e.targets.map((x) =>
    x.error
      ? [`(${x.key}) ${x.name}`, x.error.startsWith('peer') || x.error.startsWith('gateway') ? NOT_BUILT : x.error, '', '', '', '']
      : [`(${x.key}) ${x.name}`, num(x.rps), num(x.p50), num(x.p99), num(x.cpuUs), x.unexpected === 0 ? 'all' : `${x.unexpected} NOT`],
  )
  const serialRows = e2e.targets.map((x) => [`(${x.key}) ${x.name}`, x.serial ? num(x.serial.p50) : NOT_BUILT, x.serial ? num(x.serial.p99) : '', x.serial ? num(x.serial.p50 - (t.b?.serial?.p50 ?? NaN)) : ''])
  const ratios = [
    ['c/b req/s (checking vs bare pass-through)', ratio(t.c?.rps, t.b?.rps)],
    ['d/b req/s (refusal vs bare pass-through)', ratio(t.d?.rps, t.b?.rps)],
    ['c/e req/s (payments-gate vs Express peer)', ratio(t.c?.rps, t.e?.rps)],
    ['c/a req/s (payments-gate vs bare backend)', ratio(t.c?.rps, t.a?.rps)],
    ['p99 c - p99 b (ms)', delta(t.c?.p99, t.b?.p99)],
    ['server CPU per request, c - b (us)', delta(round1(t.c?.cpuUs), round1(t.b?.cpuUs))],
    ['server CPU per request, d / b', ratio(t.d?.cpuUs, t.b?.cpuUs)],
    ['server CPU per request, e / c', ratio(t.e?.cpuUs, t.c?.cpuUs)],
  ]
  const memory = e2e.memory
  return [
    `## End to end (autocannon, ${s.connections} connections, ${s.rounds} alternating rounds of ${s.seconds} s per target, median round)`,
    '',
    table(['target', 'req/s', 'p50 ms', 'p99 ms', 'server CPU us/req', 'expected status'], rows),
    '',
    table(['ratio', 'value'], ratios),
    '',
    `### Serial probe (one keep-alive connection, ${s.serialCount} sequential requests after ${s.serialWarmup} warm-up)`,
    '',
    table(['target', 'p50 us', 'p99 us', 'p50 over (b) us'], serialRows),
    '',
    '### Gateway memory',
    '',
    table(
      ['when', 'RSS'],
      [
        ['after warm-up', mib(memory.afterWarmup)],
        [`after ${num(memory.served ?? NaN)} requests${s.memoryRequests < 200_000 ? ' (--quick: scaled down from 200,000)' : ''}`, mib(memory.after)],
      ],
    ),
  ].join('\n')
}

const round1 = (x) => Math.round(x * 10) / 10

const delta = (x, y) => (Number.isFinite(x) && Number.isFinite(y) ? `${x - y >= 0 ? '+' : ''}${Number((x - y).toFixed(1))}` : 'n/a')

/** The targets of issue 6, each with its figure from this run. */
export function targetsSection(micro, e2e) {
  const t = Object.fromEntries((e2e?.targets ?? []).map((x) => [x.key, x.error ? {} : x]))
  const by = new Map(micro.results.map((r) => [r.name, r]))
  const typebox = by.get('valid body: TypeBox compiled')?.opsPerSec / by.get('valid body: Ajv compiled')?.opsPerSec
  const cb = t.c?.rps / t.b?.rps
  const db = t.d?.rps / t.b?.rps
  const ce = t.c?.rps / t.e?.rps
  const p99 = t.c?.p99 - t.b?.p99
  const is = (value, ok) => (Number.isFinite(value) ? ok(value) : undefined)
  // Rounded up, 1.497 would read 1.50 next to a MISSED: a ratio held to a floor is shown rounded down.
  const atLeast = (value) => (Number.isFinite(value) ? (Math.floor(value * 1000) / 1000).toFixed(3) : 'n/a')
  const rows = [
    ['c/b >= 0.95', atLeast(cb), verdict(is(cb, (v) => v >= 0.95))],
    ['p99 (c) within +1 ms of (b)', Number.isFinite(p99) ? `${p99 >= 0 ? '+' : ''}${p99} ms` : 'n/a', verdict(is(p99, (v) => v <= 1))],
    ['d/b >= 1.5', atLeast(db), verdict(is(db, (v) => v >= 1.5))],
    ['c/e >= 2', atLeast(ce), verdict(is(ce, (v) => v >= 2))],
    ['TypeBox >= 2x Ajv (valid sale)', Number.isFinite(typebox) ? `${atLeast(typebox)}x` : 'n/a', verdict(is(typebox, (v) => v >= 2))],
  ]
  return ['## Targets (issue 6)', '', table(['target', 'this run', 'verdict'], rows)].join('\n')
}

/**
 * `--ladder`: from (b) to (c) one step at a time, each step's server CPU per
 * request and what it adds to the step before: what part of c/b the contract
 * itself costs (a body read whole, then re-serialized) and what the rest does.
 */
export function ladderSection(ladder) {
  const s = ladder.settings
  const live = ladder.steps.filter((x) => x.error === undefined)
  const b = live.find((x) => x.key === 'b')
  const rows = ladder.steps.map((x) => {
    if (x.error) return [x.name, x.error, '', '', '']
    const before = live[live.indexOf(x) - 1]
    return [x.name, num(x.rps), num(x.cpuUs), before ? delta(round1(x.cpuUs), round1(before.cpuUs)) : '', ratio(x.rps, b?.rps)]
  })
  return [
    `## From (b) to (c), one step at a time (--ladder: ${s.rounds} alternating rounds of ${s.seconds} s, ${s.connections} connections, median round)`,
    '',
    table(['step', 'req/s', 'server CPU us/req', 'us added by the step', 'req/s over (b)'], rows),
  ].join('\n')
}

/** `--profile`: where each server's CPU went, per request, from its whole-life CPU profile. */
export function profileSection(breakdowns, requests) {
  const { passthrough: b, gateway: c, refusals: d } = breakdowns
  const us = (m, name) => (m === undefined ? 'n/a' : num(m.get(name), 1))
  const rows = [...CATEGORY_NAMES, 'total'].map((name) => [name, us(b, name), us(c, name), us(d, name), b && c ? delta(round1(c.get(name)), round1(b.get(name))) : 'n/a'])
  return [
    '### Where the CPU goes (--profile: V8 CPU profiles of the measured rounds, us per request, idle left out)',
    '',
    table(['category of the sampled function', '(b) pass-through', '(c) gateway, valid', '(d) gateway, refused', 'c - b'], rows),
    '',
    `Requests answered while profiled: (b) ${num(requests.passthrough)}, (c) ${num(requests.gateway)}, (d) ${num(requests.refusals)}.`,
  ].join('\n')
}
