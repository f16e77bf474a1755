// The end-to-end part: every target under the same load, in alternating
// rounds, then the gateway's memory and the serial latency probe.
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
import { startRedis } from '../lib/redis.js'
import { cpu, requests, rss, start, startProfile, stopAll, stopProfile } from './children.js'
import { fixedCount, round, serial } from './load.js'

/** Every load runs on this many connections (the p99 target is stated at this load). */
export const CONNECTIONS = 32

/**
 * The targets, in the order of the table. `server` names the child (its script
 * is `servers/<script ?? server>.js`); `idempotency` is the gateway's store of
 * retry protection (BENCH_IDEMPOTENCY), `redis` meaning the bench's own server;
 * `tracing` exports its spans to the bench's own OTLP receiver.
 */
export const TARGETS = [
  { key: 'a', name: 'bare backend', server: 'backend', body: 'valid', expect: 201 },
  { key: 'b', name: 'http-proxy-3 pass-through (keep-alive)', server: 'passthrough', body: 'valid', expect: 201 },
  { key: 'u', name: 'undici forwarder, body read whole (no checks)', server: 'undici', body: 'valid', expect: 201 },
  {
    key: 'c',
    name: 'payments-gate, valid sale (memory store)',
    server: 'gateway',
    idempotency: 'memory',
    body: 'valid',
    expect: 201,
  },
  {
    key: 'c0',
    name: 'payments-gate, valid sale, retry protection off',
    server: 'gateway-off',
    script: 'gateway',
    idempotency: 'off',
    body: 'valid',
    expect: 201,
  },
  {
    key: 'cr',
    name: 'payments-gate, valid sale, Redis store',
    server: 'gateway-redis',
    script: 'gateway',
    idempotency: 'redis',
    body: 'valid',
    expect: 201,
  },
  {
    key: 'ct',
    name: 'payments-gate, valid sale, tracing on (OTLP to a local receiver)',
    server: 'gateway-traced',
    idempotency: 'memory',
    tracing: true,
    body: 'valid',
    expect: 201,
  },
  // TLS (docs/deployment.md): on the listener, keep-alive connections as a load balancer keeps them; or to an https backend.
  {
    key: 'cs',
    name: 'payments-gate, valid sale, TLS on the listener',
    server: 'gateway-tls',
    script: 'gateway-tls',
    idempotency: 'memory',
    tls: 'listener',
    body: 'valid',
    expect: 201,
  },
  {
    key: 'cb',
    name: 'payments-gate, valid sale, an https backend (private CA)',
    server: 'gateway-https-backend',
    script: 'gateway-tls',
    idempotency: 'memory',
    tls: 'backend',
    body: 'valid',
    expect: 201,
  },
  {
    key: 'd',
    name: 'payments-gate, invalid sale (400 schema)',
    server: 'refusals',
    script: 'gateway',
    idempotency: 'memory',
    body: 'invalid',
    expect: 400,
  },
  {
    key: 'e',
    name: 'Express 5 + express-openapi-validator + http-proxy-middleware',
    server: 'peer',
    body: 'valid',
    expect: 201,
  },
  {
    key: 'f',
    name: 'Fastify 5 + JSON schema (Ajv) + @fastify/reply-from',
    server: 'fastify',
    body: 'valid',
    expect: 201,
  },
  // The middleware with retry protection around the application's own handler, each paired with it off.
  {
    key: 'mx',
    name: 'Express 5 route behind the gate, retry protection on (memory store)',
    server: 'express-protected',
    idempotency: 'memory',
    body: 'valid',
    expect: 201,
  },
  {
    key: 'mx0',
    name: 'Express 5 route behind the gate, retry protection off',
    server: 'express-unprotected',
    script: 'express-protected',
    idempotency: 'off',
    body: 'valid',
    expect: 201,
  },
  {
    key: 'mf',
    name: 'Fastify 5 route behind the gate, retry protection on (memory store)',
    server: 'fastify-protected',
    idempotency: 'memory',
    body: 'valid',
    expect: 201,
  },
  {
    key: 'mf0',
    name: 'Fastify 5 route behind the gate, retry protection off',
    server: 'fastify-unprotected',
    script: 'fastify-protected',
    idempotency: 'off',
    body: 'valid',
    expect: 201,
  },
]

/** The serial probe's requests are taken in this many chunks; its server CPU per request is the median chunk's. */
const SERIAL_CHUNKS = 5

/** The children `--profile` profiles during the rounds: the baseline and the two gateways. */
export const PROFILED = ['passthrough', 'gateway', 'refusals']

/** The rounds and their lengths; `rounds` (`--rounds N`) and `pairs` (`--pairs N`) override the counts, for a noisy machine. */
export function settings(quick, rounds, pairs) {
  const s = quick
    ? {
        rounds: 2,
        seconds: 1,
        warmupSeconds: 0.5,
        connections: CONNECTIONS,
        memoryRequests: 10_000,
        serialCount: 500,
        serialWarmup: 100,
        pairs: 4,
        pairSeconds: 1,
      }
    : {
        rounds: 3,
        seconds: 2,
        warmupSeconds: 1,
        connections: CONNECTIONS,
        memoryRequests: 200_000,
        serialCount: 3000,
        serialWarmup: 300,
        pairs: 12,
        pairSeconds: 2,
      }
  return { ...s, ...(rounds === undefined ? {} : { rounds }), ...(pairs === undefined ? {} : { pairs }) }
}

export async function runE2E({ quick, rounds, pairs, profileDir, log }) {
  const s = settings(quick, rounds, pairs)
  const bodies = { valid: bytesOf(validSale()), invalid: bytesOf(invalidSale()) }
  const { headers, users } = await credentials()
  let redis
  const certificates = makeCertificates()
  try {
    const backend = await start('backend')
    if (backend.error) throw new Error(backend.error)
    redis = await startRedis()
    if (redis.skipped) log(`e2e: (cr) skipped: ${redis.skipped}`)
    const receiver = await start('receiver')
    const servers = { backend, receiver }
    const tlsEnv = await tlsTargets(certificates, backend, log)
    const targets = []
    // (c), (c0), (cr), (ct) and (d) have a gateway each, so that a profile and the memory figure each describe one kind of request.
    for (const t of TARGETS) {
      const redisTarget = t.idempotency === 'redis'
      if (servers[t.server] === undefined) {
        const env = {
          BENCH_TARGET: backend.url,
          BENCH_USERS: users,
          BENCH_IDEMPOTENCY: (redisTarget ? redis.url : t.idempotency) ?? '',
        }
        // Every request sampled, batches sent as the SDK's defaults send them.
        if (t.tracing)
          Object.assign(env, { OTEL_EXPORTER_OTLP_ENDPOINT: receiver.url, OTEL_TRACES_SAMPLER: 'always_on' })
        if (redisTarget && redis.skipped) servers[t.server] = { error: `skipped: ${redis.skipped}` }
        else if (t.tls && tlsEnv[t.tls].error) servers[t.server] = { error: tlsEnv[t.tls].error }
        else if (t.tls) servers[t.server] = await start(t.server, { ...env, ...tlsEnv[t.tls] }, [], t.script)
        else if (t.tracing && receiver.error) servers[t.server] = { error: receiver.error }
        else servers[t.server] = await start(t.server, env, [], t.script ?? t.server)
      }
      const server = servers[t.server]
      const url =
        server.url && `${t.tls === 'listener' ? server.url.replace('http:', 'https:') : server.url}${SALE_PATH}`
      targets.push({
        ...t,
        child: server.child,
        sidecar: redisTarget ? redis : undefined,
        url,
        error: server.error,
        rounds: [],
      })
    }
    for (const t of targets) if (t.error === undefined) t.error = await sanity(t, bodies[t.body], headers)
    const live = targets.filter((t) => t.error === undefined)
    const load = (t, seconds) => round(t.url, { body: bodies[t.body], headers, connections: s.connections, seconds })

    log(`e2e: warm-up ${s.warmupSeconds} s per target`)
    for (const t of live) await load(t, s.warmupSeconds)
    const gateway = servers.gateway.child
    const memory = { requests: s.memoryRequests, afterWarmup: gateway ? await rss(gateway) : Number.NaN }

    // Only the measured rounds are profiled: the same requests as the table's server CPU column.
    const profiling = profileDir === undefined ? [] : PROFILED.filter((name) => servers[name].child !== undefined)
    if (profiling.length > 0) mkdirSync(profileDir, { recursive: true })
    for (const name of profiling) await startProfile(servers[name].child)
    await alternate(live, s, load, (text) => log(`e2e: ${text}`))
    const profiled = {}
    for (const name of profiling)
      profiled[name] = await stopProfile(servers[name].child, new URL(`${name}.cpuprofile`, profileDir).pathname)
    const [c, c0] = ['c', 'c0'].map((key) => live.find((t) => t.key === key))
    const paired =
      c && c0
        ? await pairRounds([{ name: 'this build', memory: c, off: c0 }], s, load, (text) => log(`e2e: ${text}`))
        : undefined

    if (gateway) {
      const c = live.find((t) => t.key === 'c')
      const missing = s.memoryRequests - (await requests(gateway))
      if (missing > 0 && c) {
        log(`e2e: ${missing} more valid requests to the gateway for the memory figure`)
        await fixedCount(c.url, { body: bodies.valid, headers, connections: s.connections, count: missing })
      }
      memory.served = await requests(gateway)
      memory.after = await rss(gateway)
    }

    log(`e2e: serial probe, ${s.serialCount} requests per target on one connection`)
    for (const t of live) {
      t.serial = await serial(t.url, {
        body: bodies[t.body],
        headers,
        count: s.serialCount,
        warmup: s.serialWarmup,
        cpu: () => cpu(t.child),
        chunks: SERIAL_CHUNKS,
      })
    }
    return { settings: s, targets: targets.map(summarize), memory, profiled, paired }
  } finally {
    await stopAll()
    await redis?.stop?.()
    certificates.remove()
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

/**
 * The measured rounds: every target in turn, the order rotated each round so
 * that no target always runs first or right after another; each round keeps
 * its req/s, latencies and the server's CPU time per answered request.
 */
export async function alternate(live, s, load, log) {
  for (let i = 0; i < s.rounds; i++) {
    const order = live.map((_, j) => live[(j + i) % live.length])
    log(`round ${i + 1}/${s.rounds}: ${order.map((t) => t.key).join(' ')}, ${s.seconds} s each`)
    for (const t of order) {
      const before = await cpu(t.child)
      const sidecarBefore = t.sidecar?.cpu()
      const r = await load(t, s.seconds)
      r.cpuUs = ((await cpu(t.child)) - before) / r.total
      if (t.sidecar) r.sidecarCpuUs = (t.sidecar.cpu() - sidecarBefore) / r.total
      t.rounds.push(r)
    }
  }
}

/**
 * What the memory store costs, in paired rounds: for each build, the gateway
 * with the memory store and the same gateway with retry protection off, one
 * right after the other (the order swapped every pair), `s.pairs` times; each
 * pair gives CPU(memory)/CPU(off) per request, and the figure is the median of
 * those ratios. Two medians taken apart divide figures of different moments,
 * and on a shared machine a moment moves by more than the store costs.
 */
async function pairRounds(builds, s, load, log) {
  for (const build of builds) build.pairs = []
  log(
    `paired rounds: ${s.pairs} pairs of ${s.pairSeconds} s, memory store and off, ${builds.map((b) => b.name).join(' and ')}`,
  )
  for (let i = 0; i < s.pairs; i++) {
    for (const build of builds) {
      const cpuUs = {}
      for (const key of i % 2 === 0 ? ['memory', 'off'] : ['off', 'memory']) {
        const t = build[key]
        const before = await cpu(t.child)
        const r = await load(t, s.pairSeconds)
        cpuUs[key] = ((await cpu(t.child)) - before) / r.total
      }
      build.pairs.push(cpuUs)
    }
  }
  return builds.map(({ name, pairs }) => ({
    name,
    ratio: median(pairs.map((p) => p.memory / p.off)),
    ratios: pairs.map((p) => p.memory / p.off),
    memoryCpuUs: median(pairs.map((p) => p.memory)),
    offCpuUs: median(pairs.map((p) => p.off)),
  }))
}

/**
 * `--pairs-only`: the paired rounds alone, with a backend and two gateways per build: this one, and with
 * `baseline` (another build's directory, `--baseline`) that one too, pair after pair in the same run.
 * `fill` (`--fill N`) payments are sent to each memory store first, so that it is measured full, as a
 * gateway that has run a while is.
 */
export async function runPairs({ quick, pairs, fill = 0, log, baseline }) {
  const s = settings(quick, undefined, pairs)
  const body = bytesOf(validSale())
  const { headers, users } = await credentials()
  try {
    const backend = await start('backend')
    if (backend.error) throw new Error(backend.error)
    const builds = []
    for (const [name, dist] of [
      ['this build', ''],
      ...(baseline === undefined ? [] : [[`built from ${baseline}`, baseline]]),
    ]) {
      const build = { name }
      for (const key of ['memory', 'off']) {
        const server = await start(
          `pairs ${name} ${key}`,
          { BENCH_TARGET: backend.url, BENCH_USERS: users, BENCH_IDEMPOTENCY: key, BENCH_DIST: dist },
          [],
          'gateway',
        )
        if (server.error) throw new Error(server.error)
        build[key] = { key, expect: 201, child: server.child, url: `${server.url}${SALE_PATH}` }
        const error = await sanity(build[key], body, headers)
        if (error) throw new Error(`${name} ${key}: ${error}`)
      }
      builds.push(build)
    }
    const load = (t, seconds) => round(t.url, { body, headers, connections: s.connections, seconds })
    log(`pairs: warm-up ${s.warmupSeconds} s per gateway`)
    for (const build of builds) for (const key of ['memory', 'off']) await load(build[key], s.warmupSeconds)
    for (const build of builds) {
      if (fill > 0) log(`pairs: ${fill} payments to fill the memory store of ${build.name}`)
      if (fill > 0) await fixedCount(build.memory.url, { body, headers, connections: s.connections, count: fill })
    }
    return { settings: { ...s, fill }, paired: await pairRounds(builds, s, load, (text) => log(`pairs: ${text}`)) }
  } finally {
    await stopAll()
  }
}

/**
 * `--ladder`, valid sales: from the bare undici forwarder (u) to the gateway (c), one thing the gateway does
 * added at each step (servers/steps.js), with the http-proxy-3 pass-through (b) as the reference row.
 * `env` is each step's own environment on top of the backend's URL and the users.
 */
export const STEPS = [
  {
    key: 'b',
    name: '(b) http-proxy-3 pass-through, body streamed (reference)',
    server: 'passthrough',
    reference: true,
  },
  { key: 'u', name: '(u) undici forwarder: body read whole, forwarded as it came', server: 'undici' },
  { key: 'parsed', name: '+ parsed, forwarded re-serialized', server: 'steps', env: { BENCH_STEP: 'parsed' } },
  {
    key: 'checked',
    name: '+ every check of the core (auth, headers, body, schema, policy, rewrites)',
    server: 'steps',
    env: { BENCH_STEP: 'checked' },
  },
  {
    key: 'quiet0',
    name: 'payments-gate without logs and metrics, retry protection off',
    server: 'steps',
    env: { BENCH_STEP: 'gateway', BENCH_IDEMPOTENCY: 'off' },
  },
  {
    key: 'quiet',
    name: '+ retry protection (memory store)',
    server: 'steps',
    env: { BENCH_STEP: 'gateway', BENCH_IDEMPOTENCY: 'memory' },
  },
  {
    key: 'c',
    name: '(c) payments-gate (+ JSON logs, Prometheus metrics)',
    server: 'gateway',
    env: { BENCH_IDEMPOTENCY: 'memory' },
  },
]

/**
 * `--ladder`, refusals: from node's own floor (a bare server reading the body and sending the gateway's 400
 * answer as fixed bytes) to the gateway refusing (d), one thing added at each step (servers/refusal-steps.js).
 */
export const REFUSAL_STEPS = [
  {
    key: 'floor',
    name: 'node:http: body read whole, a fixed 400 answer',
    server: 'refusal-steps',
    env: { BENCH_STEP: 'floor' },
  },
  { key: 'parsed', name: '+ parsed', server: 'refusal-steps', env: { BENCH_STEP: 'parsed' } },
  {
    key: 'checked',
    name: '+ every check of the core instead (auth, headers, parse, schema check, error walk)',
    server: 'refusal-steps',
    env: { BENCH_STEP: 'checked' },
  },
  {
    key: 'answered',
    name: '+ the answer built from the refusal (error body serialized)',
    server: 'refusal-steps',
    env: { BENCH_STEP: 'answered' },
  },
  {
    key: 'quiet',
    name: 'payments-gate without logs and metrics',
    server: 'refusal-steps',
    env: { BENCH_STEP: 'gateway' },
  },
  {
    key: 'd',
    name: '(d) payments-gate (+ JSON logs, Prometheus metrics)',
    server: 'gateway',
    env: { BENCH_IDEMPOTENCY: 'memory' },
  },
]

export const LADDERS = [
  { key: 'valid', steps: STEPS, body: 'valid', expect: 201 },
  { key: 'refused', steps: REFUSAL_STEPS, body: 'invalid', expect: 400 },
]

/**
 * `--ladder`: each ladder under the same load, in alternating rounds of its own. Another build is compared
 * with this one in paired rounds (`--baseline`, e2e/baseline.js), not in the ladders' rounds.
 */
export async function runLadder({ quick, rounds, log }) {
  const s = settings(quick, rounds)
  const bodies = { valid: bytesOf(validSale()), invalid: bytesOf(invalidSale()) }
  const { headers, users } = await credentials()
  const ladders = []
  for (const ladder of LADDERS) {
    try {
      const backend = await start('backend')
      if (backend.error) throw new Error(backend.error)
      const body = bodies[ladder.body]
      const targets = []
      for (const step of ladder.steps) {
        const env = { BENCH_TARGET: backend.url, BENCH_USERS: users, BENCH_STEP: '', BENCH_DIST: '', ...step.env }
        const server = await start(`ladder ${ladder.key} ${step.key}`, env, [], step.server)
        const t = {
          ...step,
          expect: ladder.expect,
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
      log(`ladder ${ladder.key}: warm-up ${s.warmupSeconds} s per step`)
      for (const t of live) await load(t, s.warmupSeconds)
      await alternate(live, s, load, (text) => log(`ladder ${ladder.key}: ${text}`))
      ladders.push({ key: ladder.key, steps: targets.map((t) => ({ ...summarize(t), reference: t.reference })) })
    } finally {
      await stopAll()
    }
  }
  return { settings: s, ladders }
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

export function median(values) {
  const sorted = [...values].sort((x, y) => x - y)
  return sorted.length === 0 ? Number.NaN : sorted[Math.floor((sorted.length - 1) / 2)]
}

/** The median of the rounds, and whether every answer had the expected status. */
export function summarize(t) {
  const unexpected = t.rounds.reduce(
    (n, r) =>
      n +
      r.errors +
      Object.entries(r.statuses).reduce((m, [code, count]) => m + (Number(code) === t.expect ? 0 : count), 0),
    0,
  )
  return {
    key: t.key,
    name: t.name,
    error: t.error,
    rps: median(t.rounds.map((r) => r.rps)),
    p50: median(t.rounds.map((r) => r.p50)),
    p99: median(t.rounds.map((r) => r.p99)),
    cpuUs: median(t.rounds.map((r) => r.cpuUs)),
    cpuRounds: t.rounds.map((r) => r.cpuUs),
    sidecarCpuUs: t.sidecar ? median(t.rounds.map((r) => r.sidecarCpuUs)) : undefined,
    unexpected,
    serial: t.serial,
  }
}
