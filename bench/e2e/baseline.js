// `--baseline DIR`: chosen targets of the table, each on this build and on the build in DIR, measured in
// paired rounds: the two servers of a target one right after the other, the order swapped every pair.
// Each pair gives CPU(this build)/CPU(DIR) per request, and the figure is the median of those ratios:
// a round moves by more than a regression adds, while a pair's two halves are seconds apart.
import { mkdirSync } from 'node:fs'
import { bytesOf, invalidSale, SALE_PATH, validSale } from '../lib/fixtures.js'
import { startRedis } from '../lib/redis.js'
import { cpu, start, startProfile, stopAll, stopProfile } from './children.js'
import { round } from './load.js'
import { FASTIFY_ARMS } from './fastify.js'
import { credentials, median, sanity, settings, TARGETS } from './run.js'

/** The targets compared when `--targets` is not given: a payment and a refusal, the ladders' last rows. */
export const BASELINE_DEFAULT = ['c', 'd']

/** What may be compared: every target of the table, and the Fastify arms (fg is the payments-gate plugin). */
const COMPARABLE = [
  ...TARGETS,
  ...FASTIFY_ARMS.map(({ key, arm, name }) => ({
    key,
    name: `Fastify: ${name}`,
    script: 'fastify-arms',
    env: { BENCH_ARM: arm },
    idempotency: 'off',
    body: 'valid',
    expect: 201,
  })),
]

/** `--targets a,b,...` as keys of COMPARABLE; an unknown key is refused with the list of known ones. */
export function baselineTargets(list = BASELINE_DEFAULT.join(',')) {
  const keys = list
    .split(',')
    .map((k) => k.trim())
    .filter((k) => k !== '')
  const known = COMPARABLE.map((t) => t.key)
  const unknown = keys.filter((k) => !known.includes(k))
  if (keys.length === 0 || unknown.length > 0)
    throw new Error(`--targets: expected keys among ${known.join(',')}, got ${list}`)
  return keys.map((k) => COMPARABLE.find((t) => t.key === k))
}

export async function runBaseline({ quick, pairs, connections, baseline, keys, log, profileDir }) {
  const s = { ...settings(quick, undefined, pairs), ...(connections === undefined ? {} : { connections }) }
  const bodies = { valid: bytesOf(validSale()), invalid: bytesOf(invalidSale()) }
  const { headers, users } = await credentials()
  const chosen = baselineTargets(keys)
  let redis
  try {
    const backend = await start('backend')
    if (backend.error) throw new Error(backend.error)
    const needs = (what) => chosen.some((t) => t[what])
    redis = needs('idempotency') && chosen.some((t) => t.idempotency === 'redis') ? await startRedis() : undefined
    if (redis?.skipped) throw new Error(`(cr): ${redis.skipped}`)
    const receiver = needs('tracing') ? await start('receiver') : undefined
    if (receiver?.error) throw new Error(receiver.error)
    const compared = []
    for (const t of chosen) {
      const sides = {}
      for (const [side, dist] of [
        ['this', ''],
        ['baseline', baseline],
      ]) {
        const env = {
          BENCH_TARGET: backend.url,
          BENCH_USERS: users,
          BENCH_IDEMPOTENCY: (t.idempotency === 'redis' ? redis.url : t.idempotency) ?? '',
          BENCH_DIST: dist,
          ...t.env,
        }
        if (t.tracing)
          Object.assign(env, { OTEL_EXPORTER_OTLP_ENDPOINT: receiver.url, OTEL_TRACES_SAMPLER: 'always_on' })
        const server = await start(`${t.key} ${side}`, env, [], t.script ?? t.server)
        if (server.error) throw new Error(server.error)
        sides[side] = { key: t.key, expect: t.expect, child: server.child, url: `${server.url}${SALE_PATH}` }
        const error = await sanity(sides[side], bodies[t.body], headers)
        if (error) throw new Error(`(${t.key}) ${side === 'this' ? 'this build' : baseline}: ${error}`)
      }
      compared.push({ ...t, sides, pairs: [] })
    }
    const load = (t, side, seconds) =>
      round(t.sides[side].url, { body: bodies[t.body], headers, connections: s.connections, seconds })
    log(`baseline: warm-up ${s.warmupSeconds} s per server`)
    for (const t of compared) for (const side of ['this', 'baseline']) await load(t, side, s.warmupSeconds)

    const profiling =
      profileDir === undefined
        ? []
        : compared.flatMap((t) => ['this', 'baseline'].map((side) => ({ t, side, name: `${t.key}@${side}` })))
    if (profiling.length > 0) mkdirSync(profileDir, { recursive: true })
    for (const p of profiling) await startProfile(p.t.sides[p.side].child)
    log(
      `baseline: ${s.pairs} pairs of ${s.pairSeconds} s for ${compared.map((t) => `(${t.key})`).join(' ')}, this build and ${baseline}`,
    )
    for (let i = 0; i < s.pairs; i++) {
      for (const t of compared) {
        const cpuUs = {}
        for (const side of i % 2 === 0 ? ['this', 'baseline'] : ['baseline', 'this']) {
          const child = t.sides[side].child
          const before = await cpu(child)
          const r = await load(t, side, s.pairSeconds)
          cpuUs[side] = ((await cpu(child)) - before) / r.total
        }
        t.pairs.push(cpuUs)
      }
    }
    const profiled = {}
    for (const p of profiling)
      profiled[p.name] = await stopProfile(
        p.t.sides[p.side].child,
        new URL(`${p.name}.cpuprofile`, profileDir).pathname,
      )
    return { settings: s, baseline, profiled, compared: compared.map(summarizePairs) }
  } finally {
    await stopAll()
    await redis?.stop?.()
  }
}

/** A compared target: the median of its per-pair ratios, the median of each side, and in how many pairs this build cost more. */
export function summarizePairs({ key, name, pairs }) {
  const ratios = pairs.map((p) => p.this / p.baseline)
  return {
    key,
    name,
    ratio: median(ratios),
    ratios,
    thisCpuUs: median(pairs.map((p) => p.this)),
    baselineCpuUs: median(pairs.map((p) => p.baseline)),
    dearer: ratios.filter((r) => r > 1).length,
  }
}
