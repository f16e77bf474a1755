// The end-to-end part: the plan's servers under the same load, every ratio measured in paired rounds
// (lib/pairing.js), then, in a full run, the gateway's memory and the serial latency probe.
import { mkdirSync } from 'node:fs'
import { hashPassword } from 'payments-gate'
import {
  ACCEPT,
  AUTHORIZATION,
  CONTENT_TYPE,
  PASSWORD,
  SALE_PATH,
  USER,
  bytesOf,
  invalidSale,
  validSale,
} from '../lib/fixtures.js'
import { makeCertificates } from '../lib/certificates.js'
import { chainsOf, measurePasses, median, p99Pairs, ratioFigures, roundsOf } from '../lib/pairing.js'
import { startRedis, startRedisCluster } from '../lib/redis.js'
import {
  collect,
  cpu,
  gcPauses,
  kernelCpu,
  requests,
  rss,
  start,
  startProfile,
  stop,
  stopAll,
  stopProfile,
} from './children.js'
import { fixedCount, round, serial } from './load.js'

/** The serial probe's requests are taken in this many chunks; its server CPU per request is the median chunk's. */
const SERIAL_CHUNKS = 5

/** The targets `--profile` profiles in a run of the default plan: the pass-through and the two gateways. */
const PROFILED = ['b', 'c', 'd']

/**
 * The paired run of `plan` (e2e/plan.js): every side started (a server process each), checked, warmed up,
 * each memory store filled with `fill` payments first, then the ratios in paired rounds. With `probe`, the
 * gateway (c) is then brought to `s.memoryRequests` requests for its memory figure, and every side gets the
 * serial probe. `baseline` is the directory of the build the `@base` sides load. With `profileDir`, the
 * sides (all of them with a baseline, else b, c and d) are profiled during the paired rounds. With
 * `s.fresh`, every side but the bare backend runs each pass in a new process, started, checked, warmed up
 * (and filled) as the first one was: what one process happens to cost (its code's and heap's layout)
 * then varies from pair to pair, and the median of the pairs no longer carries it (bench/README.md).
 */
export async function runPaired({ plan, s, baseline, fill = 0, probe = false, profileDir, log }) {
  const bodies = { valid: bytesOf(validSale()), invalid: bytesOf(invalidSale()) }
  const { headers, users } = await credentials()
  const needs = (what) => plan.sides.some((side) => side.target[what])
  let redis
  let cluster
  let certificates
  try {
    const backend = await start('backend')
    if (backend.error) throw new Error(backend.error)
    redis = plan.sides.some((side) => side.target.idempotency === 'redis') ? await startRedis() : undefined
    if (redis?.skipped) log(`e2e: (cr) skipped: ${redis.skipped}`)
    cluster = plan.sides.some((side) => side.target.idempotency === 'cluster') ? await startRedisCluster() : undefined
    if (cluster?.skipped) log(`e2e: (ck) skipped: ${cluster.skipped}`)
    const receiver = needs('tracing') ? await start('receiver') : undefined
    certificates = needs('tls') ? makeCertificates() : undefined
    const tlsEnv = certificates === undefined ? {} : await tlsTargets(certificates, backend, log)
    const context = { backend, stores: { redis, cluster }, receiver, tlsEnv, users, baseline }
    const sides = []
    for (const side of plan.sides) sides.push(await startSide(side, context))
    for (const side of sides) if (side.error === undefined) side.error = await sanity(side, bodies[side.body], headers)
    const byId = Object.fromEntries(sides.map((side) => [side.id, side]))
    const live = sides.filter((side) => side.error === undefined)
    const load = (side, seconds) =>
      round(side.url, { body: bodies[side.body], headers, connections: s.connections, seconds })

    /**
     * The warm-up, then a full collection: a process measured before its first mark-compact looks young, and a
     * cost that shows only in an old one (docs/performance-history.md, the fifteenth session) would be missed by `--fresh`.
     */
    const warmUp = async (side) => {
      await load(side, s.warmupSeconds)
      await collect(side.child)
    }
    log(`e2e: warm-up ${s.warmupSeconds} s per server, then a full garbage collection`)
    for (const side of live) await warmUp(side)
    const filled = async (side) => {
      if (fill === 0 || side.idempotency !== 'memory' || side.body !== 'valid') return
      await fixedCount(side.url, { body: bodies.valid, headers, connections: s.connections, count: fill })
    }
    const gateway = probe ? byId.c?.child : undefined
    const memory = { requests: s.memoryRequests, afterWarmup: gateway ? await rss(gateway) : Number.NaN }
    for (const side of fill > 0 ? live.filter((x) => x.idempotency === 'memory' && x.body === 'valid') : []) {
      log(`e2e: ${fill} payments to fill the memory store of (${side.id})`)
      await filled(side)
    }
    /** A new process for `side`, ready as the first was; the bare backend, which the other servers call, is kept. */
    const renew = async (side) => {
      if (side.child === backend.child) return
      log(`e2e: (${side.id}) in a new process`)
      await stop(side.child)
      const next = await startSide(side, context)
      Object.assign(side, { child: next.child, url: next.url })
      const wrong = next.error ?? (await sanity(side, bodies[side.body], headers))
      if (wrong !== undefined) throw new Error(`${side.id}, started again: ${wrong}`)
      await warmUp(side)
      await filled(side)
    }
    const renewed = new Map()
    const measure = async (id, seconds, pass) => {
      const side = byId[id]
      if (s.fresh && renewed.get(id) !== pass && pass > 0) {
        renewed.set(id, pass)
        await renew(side)
      }
      return measureRound(side, seconds, load)
    }

    // Only the paired rounds are profiled: the same requests as the ratios.
    const profiling =
      profileDir === undefined ? [] : live.filter((x) => baseline !== undefined || PROFILED.includes(x.id))
    if (profiling.length > 0) mkdirSync(profileDir, { recursive: true })
    for (const side of profiling) await startProfile(side.child)
    const paired = plan.ratios.filter(
      (r) => byId[r.numerator].error === undefined && byId[r.denominator].error === undefined,
    )
    const measured = await measurePasses(
      chainsOf(paired.map((r) => [r.numerator, r.denominator])),
      s,
      measure,
      (text) => log(`e2e: ${text}`),
    )
    const profiled = {}
    for (const side of profiling)
      profiled[side.id] = await stopProfile(side.child, new URL(`${side.id}.cpuprofile`, profileDir).pathname)

    if (gateway) {
      const missing = s.memoryRequests - (await requests(gateway))
      if (missing > 0) {
        log(`e2e: ${missing} more valid requests to the gateway for the memory figure`)
        await fixedCount(byId.c.url, { body: bodies.valid, headers, connections: s.connections, count: missing })
      }
      memory.served = await requests(gateway)
      memory.after = await rss(gateway)
    }
    if (probe) log(`e2e: serial probe, ${s.serialCount} requests per server on one connection`)
    for (const side of probe ? live : []) {
      side.serial = await serial(side.url, {
        body: bodies[side.body],
        headers,
        count: s.serialCount,
        warmup: s.serialWarmup,
        cpu: () => cpu(side.child),
        chunks: SERIAL_CHUNKS,
      })
    }
    return {
      settings: { ...s, fill },
      baseline,
      sides: sides.map((side) => summarize(side, roundsOf(measured, side.id))),
      ratios: plan.ratios.map((r) => ({
        ...ratioFigures(r, measured),
        error: byId[r.numerator].error ?? byId[r.denominator].error,
      })),
      p99: p99Pairs(measured),
      memory: probe ? memory : undefined,
      profiled,
    }
  } finally {
    await stopAll()
    await redis?.stop?.()
    await cluster?.stop?.()
    certificates?.remove()
  }
}

/** One round of a side: its load, and the server CPU time it took per answered request (and its Redis's). */
export async function measureRound(side, seconds, load) {
  const before = await cpu(side.child)
  const kernelBefore = await kernelCpu(side.child)
  const gcBefore = await gcPauses(side.child)
  const sidecarBefore = side.sidecar?.cpu()
  const r = await load(side, seconds)
  r.cpuUs = ((await cpu(side.child)) - before) / r.total
  r.kernelUs = ((await kernelCpu(side.child)) - kernelBefore) / r.total
  r.gcUs = ((await gcPauses(side.child)) - gcBefore) / r.total
  if (side.sidecar) r.sidecarCpuUs = (side.sidecar.cpu() - sidecarBefore) / r.total
  return r
}

/** Starts the server of one side: its target's script, with the environment of its build and store. */
async function startSide(side, { backend, stores, receiver, tlsEnv, users, baseline }) {
  const t = side.target
  // The bench's own Redis or Redis Cluster, for (cr) and (ck).
  const store = stores[t.idempotency]
  const own = { ...side, ...t, id: side.id, name: t.name, rounds: [] }
  if (t.key === 'a' && side.twin === 0 && !side.base)
    return { ...own, child: backend.child, url: `${backend.url}${SALE_PATH}` }
  const env = {
    BENCH_TARGET: backend.url,
    BENCH_USERS: users,
    BENCH_IDEMPOTENCY: (store === undefined ? t.idempotency : store.url) ?? '',
    BENCH_DIST: side.base ? baseline : '',
    BENCH_STEP: '',
    ...t.env,
  }
  // Every request sampled, batches sent as the SDK's defaults send them.
  if (t.tracing) Object.assign(env, { OTEL_EXPORTER_OTLP_ENDPOINT: receiver.url, OTEL_TRACES_SAMPLER: 'always_on' })
  const why = store?.skipped
    ? `skipped: ${store.skipped}`
    : t.tls
      ? tlsEnv[t.tls].error
      : t.tracing
        ? receiver.error
        : undefined
  if (why !== undefined) return { ...own, error: why }
  const server = await start(side.id, { ...env, ...(t.tls ? tlsEnv[t.tls] : {}) }, [], t.script)
  const url = server.url && `${t.tls === 'listener' ? server.url.replace('http:', 'https:') : server.url}${SALE_PATH}`
  return {
    ...own,
    child: server.child,
    url,
    error: server.error,
    sidecar: store,
  }
}

/** The environment of (cs)'s and (cb)'s gateways, each `{ error }` when it cannot run; (cb)'s https backend started here. */
async function tlsTargets(certificates, backend, log) {
  if (certificates.skipped) {
    log(`e2e: (cs) and (cb) skipped: ${certificates.skipped}`)
    return {
      listener: { error: `skipped: ${certificates.skipped}` },
      backend: { error: `skipped: ${certificates.skipped}` },
    }
  }
  const https = await start('backend-tls', { BENCH_TLS_CERT: certificates.cert, BENCH_TLS_KEY: certificates.key })
  return {
    listener: { BENCH_TARGET: backend.url, BENCH_LISTEN_CERT: certificates.cert, BENCH_LISTEN_KEY: certificates.key },
    backend: https.error
      ? { error: https.error }
      : { BENCH_TARGET: https.url.replace('http:', 'https:'), BENCH_TARGET_CA: certificates.ca },
  }
}

/** The headers every request carries, and the users file (JSON) of the one user they name. */
export async function credentials() {
  return {
    headers: { 'content-type': CONTENT_TYPE, accept: ACCEPT, authorization: AUTHORIZATION },
    users: JSON.stringify([{ username: USER, password: await hashPassword(PASSWORD), entities: ['default'] }]),
  }
}

/** One request, to make sure each target answers what it should before it is measured. */
export async function sanity(t, body, headers) {
  const r = await serial(t.url, { body, headers, count: 3, warmup: 0 }).catch((error) => ({ error }))
  if (r.error) return `no answer: ${r.error.message}`
  const codes = Object.keys(r.statuses)
  return codes.length === 1 && Number(codes[0]) === t.expect
    ? undefined
    : `answers ${codes.join(',') || 'nothing'}, expected ${t.expect}`
}

/** A server's figures over its rounds (their medians), and whether every answer had the expected status. */
export function summarize(t, rounds) {
  const unexpected = rounds.reduce(
    (n, r) =>
      n +
      r.errors +
      Object.entries(r.statuses).reduce((m, [code, count]) => m + (Number(code) === t.expect ? 0 : count), 0),
    0,
  )
  return {
    id: t.id,
    key: t.key,
    name: t.name,
    error: t.error,
    rounds: rounds.length,
    rps: median(rounds.map((r) => r.rps)),
    p50: median(rounds.map((r) => r.p50)),
    p99: median(rounds.map((r) => r.p99)),
    cpuUs: median(rounds.map((r) => r.cpuUs)),
    cpuRounds: rounds.map((r) => r.cpuUs),
    kernelUs: median(rounds.map((r) => r.kernelUs)),
    gcUs: median(rounds.map((r) => r.gcUs)),
    sidecarCpuUs: t.sidecar ? median(rounds.map((r) => r.sidecarCpuUs)) : undefined,
    unexpected,
    serial: t.serial,
  }
}
