// The Fastify arms: the same sale to a Fastify 5 route screened four ways (servers/fastify-arms.js), in
// alternating rounds of their own, the order rotated each round. A ratio of two arms is taken round by
// round (the two runs of a round are seconds apart) and the figure is the median of those ratios.
import { bytesOf, SALE_PATH, validSale } from '../lib/fixtures.js'
import { start, stopAll } from './children.js'
import { round } from './load.js'
import { alternate, credentials, median, sanity, settings, summarize } from './run.js'

/** The arms, in the order of the table. */
export const FASTIFY_ARMS = [
  { key: 'fp', arm: 'plain', name: "Fastify route, Fastify's JSON parser, no checks" },
  { key: 'fs', arm: 'schema', name: '... + the JSON schema on the route (Ajv)' },
  {
    key: 'fa',
    arm: 'auth',
    name: '... + a cached BasicAuth check in an onRequest hook (SHA-256, constant-time compare)',
  },
  { key: 'fg', arm: 'plugin', name: 'the payments-gate plugin instead (every check of the gate)' },
]

/** The ratios of the issue, [x, y, target, stretch]: x/y = CPU(y)/CPU(x), round by round. */
export const FASTIFY_RATIOS = [
  ['fg', 'fa', 1.0],
  ['fg', 'fs', 1.0],
  ['fg', 'fp'],
]

/** Rounds of the arms: more than the main table's, since the arms differ by a few microseconds. */
export function fastifySettings(quick, rounds) {
  const s = settings(quick, rounds)
  return rounds === undefined ? { ...s, rounds: quick ? 3 : 8 } : s
}

export async function runFastify({ quick, rounds, log }) {
  const s = fastifySettings(quick, rounds)
  const body = bytesOf(validSale())
  const { headers, users } = await credentials()
  try {
    const targets = []
    for (const arm of FASTIFY_ARMS) {
      const server = await start(
        `fastify ${arm.arm}`,
        { BENCH_ARM: arm.arm, BENCH_USERS: users, BENCH_IDEMPOTENCY: 'off', BENCH_DIST: '' },
        [],
        'fastify-arms',
      )
      const t = {
        ...arm,
        expect: 201,
        child: server.child,
        url: server.url && `${server.url}${SALE_PATH}`,
        error: server.error,
        rounds: [],
      }
      if (t.error === undefined) t.error = await sanity(t, body, headers)
      targets.push(t)
    }
    const live = targets.filter((t) => t.error === undefined)
    const load = (t, seconds) => round(t.url, { body, headers, connections: s.connections, seconds })
    log(`fastify: warm-up ${s.warmupSeconds} s per arm`)
    for (const t of live) await load(t, s.warmupSeconds)
    await alternate(live, s, load, (text) => log(`fastify: ${text}`))
    const by = Object.fromEntries(targets.map((t) => [t.key, t]))
    const ratios = FASTIFY_RATIOS.map(([x, y, target]) => ({ x, y, target, ...pairedRatio(by[x], by[y]) }))
    return { settings: s, arms: targets.map(summarize), ratios }
  } finally {
    await stopAll()
  }
}

/** x/y = CPU(y)/CPU(x) in each round, their median, and in how many rounds x was the cheaper. */
export function pairedRatio(x, y) {
  const perRound = (x?.rounds ?? []).map((r, i) => y.rounds[i]?.cpuUs / r.cpuUs).filter(Number.isFinite)
  return { value: median(perRound), perRound, cheaper: perRound.filter((v) => v > 1).length }
}
