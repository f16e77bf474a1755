// What a run measures: the servers it can start (TARGETS), the ratios it can state (RATIOS), and the plan of
// one run, which ratios and so which server processes ("sides"). Pure: test/bench.test.ts checks it.

/** Every load runs on this many connections unless `--connections` says otherwise. */
export const CONNECTIONS = 32

/**
 * The servers, in the order of the tables. `script` is the child's file (`servers/<script>.js`);
 * `idempotency` is the gateway's store of retry protection (BENCH_IDEMPOTENCY), `redis` meaning the bench's
 * own server, `cluster` its own Redis Cluster; `tracing` exports its spans to the bench's own OTLP receiver; `tls` names the side TLS is on;
 * `env` is the child's own environment. (a) is the backend every other target forwards to.
 */
export const TARGETS = [
  { key: 'a', name: 'bare backend', script: 'backend', body: 'valid', expect: 201 },
  { key: 'b', name: 'http-proxy-3 pass-through (keep-alive)', script: 'passthrough', body: 'valid', expect: 201 },
  { key: 'u', name: 'undici forwarder, body read whole (no checks)', script: 'undici', body: 'valid', expect: 201 },
  {
    key: 'c',
    name: 'payments-gate, valid sale (memory store)',
    script: 'gateway',
    idempotency: 'memory',
    body: 'valid',
    expect: 201,
  },
  {
    key: 'c0',
    name: 'payments-gate, valid sale, retry protection off',
    script: 'gateway',
    idempotency: 'off',
    body: 'valid',
    expect: 201,
  },
  {
    key: 'cr',
    name: 'payments-gate, valid sale, Redis store',
    script: 'gateway',
    idempotency: 'redis',
    body: 'valid',
    expect: 201,
  },
  // A Redis Cluster of three primaries (docs/idempotency-reference.md, Redis Cluster), the bench's own, against (cr).
  {
    key: 'ck',
    name: 'payments-gate, valid sale, Redis Cluster store',
    script: 'gateway',
    idempotency: 'cluster',
    body: 'valid',
    expect: 201,
  },
  // A policy's rate limit (docs/policies.md): the sample entity limited far above the load, against (c) and (cr).
  {
    key: 'cl',
    name: 'payments-gate, valid sale, an entity with a rate limit (memory store)',
    script: 'gateway',
    idempotency: 'memory',
    env: { BENCH_RATE_LIMIT: '1000000/1' },
    body: 'valid',
    expect: 201,
  },
  {
    key: 'crl',
    name: 'payments-gate, valid sale, an entity with a rate limit (Redis store)',
    script: 'gateway',
    idempotency: 'redis',
    env: { BENCH_RATE_LIMIT: '1000000/1' },
    body: 'valid',
    expect: 201,
  },
  {
    key: 'ct',
    name: 'payments-gate, valid sale, tracing on (OTLP to a local receiver)',
    script: 'gateway-traced',
    idempotency: 'memory',
    tracing: true,
    body: 'valid',
    expect: 201,
  },
  // TLS (docs/deployment.md): on the listener, keep-alive connections as a load balancer keeps them; or to an https backend.
  {
    key: 'cs',
    name: 'payments-gate, valid sale, TLS on the listener',
    script: 'gateway-tls',
    idempotency: 'memory',
    tls: 'listener',
    body: 'valid',
    expect: 201,
  },
  {
    key: 'cb',
    name: 'payments-gate, valid sale, an https backend (private CA)',
    script: 'gateway-tls',
    idempotency: 'memory',
    tls: 'backend',
    body: 'valid',
    expect: 201,
  },
  {
    key: 'd',
    name: 'payments-gate, invalid sale (400 schema)',
    script: 'gateway',
    idempotency: 'memory',
    body: 'invalid',
    expect: 400,
  },
  {
    key: 'e',
    name: 'Express 5 + express-openapi-validator + http-proxy-middleware',
    script: 'peer',
    body: 'valid',
    expect: 201,
  },
  {
    key: 'f',
    name: 'Fastify 5 + JSON schema (Ajv) + @fastify/reply-from',
    script: 'fastify',
    body: 'valid',
    expect: 201,
  },
  // The Fastify arms (servers/fastify-arms.js): the same sale to a Fastify route that answers 201 itself, screened four ways.
  ...[
    ['fp', 'plain', "Fastify route, Fastify's JSON parser, no checks"],
    ['fs', 'schema', 'Fastify route + the JSON schema on the route (Ajv)'],
    ['fa', 'auth', 'Fastify route + schema + a cached BasicAuth onRequest hook (SHA-256, constant-time compare)'],
    ['fg', 'plugin', 'Fastify route + the payments-gate plugin instead (every check of the gate)'],
  ].map(([key, arm, name]) => ({
    key,
    name,
    script: 'fastify-arms',
    env: { BENCH_ARM: arm },
    idempotency: 'off',
    body: 'valid',
    expect: 201,
  })),
  // The middleware with retry protection around the application's own handler, each paired with it off.
  ...[
    ['mx', 'express-protected', 'memory', 'Express 5 route behind the gate, retry protection on (memory store)'],
    ['mx0', 'express-protected', 'off', 'Express 5 route behind the gate, retry protection off'],
    ['mf', 'fastify-protected', 'memory', 'Fastify 5 route behind the gate, retry protection on (memory store)'],
    ['mf0', 'fastify-protected', 'off', 'Fastify 5 route behind the gate, retry protection off'],
  ].map(([key, script, idempotency, name]) => ({ key, name, script, idempotency, body: 'valid', expect: 201 })),
]

/**
 * The ratios a run can state, each the median of per-pair ratios CPU(numerator)/CPU(denominator) of
 * server CPU per request. A ratio named x/y is CPU(y)/CPU(x): how many requests (x) answers for the CPU
 * (y) spends on one, above 1 when (x) is the cheaper; memory/off is CPU(c)/CPU(c0), the memory store's
 * cost. `target` is a floor, or a ceiling with `atMost`; issue 43's three come first.
 */
export const RATIOS = [
  {
    label: 'c/u',
    numerator: 'u',
    denominator: 'c',
    target: 0.75,
    what: 'payments-gate vs the bare undici forwarder',
  },
  {
    label: 'memory/off',
    numerator: 'c',
    denominator: 'c0',
    target: 1.08,
    atMost: true,
    what: "the memory store's cost: CPU(c)/CPU(c0)",
  },
  {
    label: 'fg/fs',
    numerator: 'fs',
    denominator: 'fg',
    target: 1.0,
    what: 'the Fastify plugin vs a schema-only Fastify route',
  },
  {
    label: 'c/b',
    numerator: 'b',
    denominator: 'c',
    target: 1.3,
    stretch: 1.6,
    what: 'payments-gate vs the http-proxy-3 pass-through',
  },
  { label: 'd/b', numerator: 'b', denominator: 'd', target: 2.0, what: 'a refusal vs the pass-through' },
  {
    label: 'c/f',
    numerator: 'f',
    denominator: 'c',
    target: 1.0,
    stretch: 1.2,
    what: 'payments-gate vs the Fastify peer',
  },
  { label: 'c/e', numerator: 'e', denominator: 'c', target: 3, what: 'payments-gate vs the Express peer' },
  {
    label: 'fg/fa',
    numerator: 'fa',
    denominator: 'fg',
    target: 1.0,
    what: 'the Fastify plugin vs a schema route with a cached BasicAuth hook',
  },
  { label: 'fg/fp', numerator: 'fp', denominator: 'fg', what: 'the Fastify plugin vs a route with no checks' },
  { label: 'c/a', numerator: 'a', denominator: 'c', what: 'payments-gate vs the bare backend' },
  { label: 'cr/c', numerator: 'c', denominator: 'cr', what: 'the Redis store vs the memory store' },
  { label: 'ck/cr', numerator: 'cr', denominator: 'ck', what: 'the Redis Cluster store vs one Redis' },
  { label: 'cl/c', numerator: 'c', denominator: 'cl', what: 'an entity with a rate limit vs one without (memory)' },
  { label: 'crl/cr', numerator: 'cr', denominator: 'crl', what: 'an entity with a rate limit vs one without (Redis)' },
  { label: 'ct/c', numerator: 'c', denominator: 'ct', what: 'tracing on vs off' },
  { label: 'cs/c', numerator: 'c', denominator: 'cs', what: 'TLS on the listener vs plain HTTP' },
  { label: 'cb/c', numerator: 'c', denominator: 'cb', what: 'an https backend vs a plain one' },
  {
    label: 'express memory/off',
    numerator: 'mx',
    denominator: 'mx0',
    what: 'retry protection around an Express handler: CPU(mx)/CPU(mx0)',
  },
  {
    label: 'fastify memory/off',
    numerator: 'mf',
    denominator: 'mf0',
    what: 'retry protection around a Fastify handler: CPU(mf)/CPU(mf0)',
  },
]

/**
 * The A/A arm of the default run: two more processes of the gateway (c), the same build, against each
 * other: the run's own noise. Neither is (c) itself, which is measured in several chains a pair and so
 * serves more requests (and fills its memory store faster) than a process measured once a pair.
 */
export const AA = "c'/c''"

/**
 * The ratios of a default run: issue 43's, the pass-through's and the A/A arm, ten rounds a pair in four
 * chains (u c c0, fs fg, d b c, c' c''). The peers (c/f, c/e) and the rest on request.
 */
export const DEFAULT_RATIOS = ['c/u', 'memory/off', 'fg/fs', 'c/b', 'd/b', AA]

/** `--baseline DIR` without `--targets`: a valid payment, a refusal and a payment with retry protection off. */
export const BASELINE_DEFAULT = ['c', 'd', 'c0']

/** Issue 30: a build is no dearer than the one it is compared with, within 3%. */
export const BASELINE_TARGET = 1.03

/**
 * A side's id: `c`, `c'` and `c''` (more processes of the same target and build, the A/A arm), `c@base`
 * (the `--baseline` build's).
 */
export function sideOf(id) {
  const [, key, twin = '', base] = /^([a-z0-9]+)('{0,2})(@base)?$/.exec(id) ?? []
  const target = TARGETS.find((t) => t.key === key)
  if (target === undefined) throw new Error(`unknown target in ${id}: expected one of ${TARGETS.map((t) => t.key)}`)
  return { id, key, target, twin: twin.length, base: base !== undefined }
}

/** A ratio of the catalog by its label, or the A/A arm `x'/x''` of any target x (`aaOf`). */
export function ratioOf(label) {
  const known = RATIOS.find((r) => r.label === label)
  if (known !== undefined) return known
  const aa = /^([a-z0-9]+)'\/\1''$/.exec(label)
  if (aa !== null && TARGETS.some((t) => t.key === aa[1])) return aaOf(aa[1])
  throw new Error(
    `--ratios: unknown ratio ${label}: expected ${RATIOS.map((r) => r.label).join(', ')}, or x'/x'' for an A/A arm`,
  )
}

/** The A/A arm of target `key`: CPU(x'')/CPU(x'), two more processes of it, the same build, each measured once a pair. */
export function aaOf(key) {
  return {
    label: `${key}'/${key}''`,
    numerator: `${key}''`,
    denominator: `${key}'`,
    aa: true,
    what: `A/A: two more processes of (${key}), the same build: this run's noise`,
  }
}

const list = (text) =>
  text
    .split(',')
    .map((k) => k.trim())
    .filter((k) => k !== '')

/**
 * The plan of a run: its ratios (each with its numerator's and denominator's side ids) and the sides to
 * start. Without `baseline`: `ratios` (a comma-separated list), or every ratio with `full`, or the default
 * ones; `aa` adds the A/A arm. With `baseline` (a directory's name): each key of `targets` this build against
 * that build's, held to BASELINE_TARGET, with `aa` an A/A arm of each, and each ratio of `ratios` on both builds.
 */
export function planOf({ ratios, full = false, aa = false, baseline, targets } = {}) {
  if (targets !== undefined && baseline === undefined)
    throw new Error('--targets names what --baseline DIR compares: give --baseline too')
  if (full && ratios !== undefined) throw new Error('--full states every ratio: give --full or --ratios, not both')
  const planned = []
  if (baseline === undefined) {
    const labels = full ? [...RATIOS.map((r) => r.label), AA] : ratios === undefined ? DEFAULT_RATIOS : list(ratios)
    if (labels.length === 0) throw new Error('--ratios: name at least one ratio')
    planned.push(...labels.map(ratioOf))
    if (aa && !planned.some((r) => r.aa)) planned.push(ratioOf(AA))
  } else {
    const keys = list(targets ?? BASELINE_DEFAULT.join(','))
    if (keys.length === 0) throw new Error('--targets: name at least one target')
    for (const key of keys) {
      sideOf(key)
      planned.push({
        label: `${key} this/baseline`,
        numerator: key,
        denominator: `${key}@base`,
        target: BASELINE_TARGET,
        atMost: true,
        // How many pairs this build cost more in, as issue 43 counts them.
        pivot: 1,
        what: `(${key}) this build vs ${baseline}`,
      })
      if (aa) planned.push(aaOf(key))
    }
    for (const r of (ratios === undefined ? [] : list(ratios)).map(ratioOf))
      planned.push(r, {
        ...r,
        label: `${r.label} (baseline)`,
        numerator: `${r.numerator}@base`,
        denominator: `${r.denominator}@base`,
        what: `${r.what}, on ${baseline}`,
      })
  }
  const ids = [...new Set(planned.flatMap((r) => [r.numerator, r.denominator]))]
  return { ratios: planned, sides: ids.map(sideOf) }
}

/**
 * The rounds and their lengths. `--quick` is a smoke test (rounds of 1 s, two pairs); `pairs`, `seconds`
 * and `connections` override the defaults; `fresh` runs every pair's servers in new processes.
 */
export function settings({ quick = false, pairs, seconds, connections, fresh = false } = {}) {
  const s = quick
    ? { pairs: 2, seconds: 1, warmupSeconds: 0.5, memoryRequests: 10_000, serialCount: 500, serialWarmup: 100 }
    : { pairs: 6, seconds: 3, warmupSeconds: 1, memoryRequests: 200_000, serialCount: 3000, serialWarmup: 300 }
  return {
    ...s,
    connections: connections ?? CONNECTIONS,
    fresh,
    ...(pairs === undefined ? {} : { pairs }),
    ...(seconds === undefined ? {} : { seconds }),
  }
}
