// The one place where the bench builds payments-gate: every gateway child ((c), (c0), (cr), (d), the
// ladders' gateway steps, the soak) calls startGateway, so a change in how the gateway is assembled is made
// here once. It is set up as `payments-gate serve` sets it up: a credential store (scrypt hash, cached),
// the sample policy, JSON request logs to /dev/null through the logger's own destination, and Prometheus metrics.
import { readFileSync } from 'node:fs'
import { resolve } from 'node:path'
import { pathToFileURL } from 'node:url'
import pino from 'pino'

/**
 * The package the gateway children are built from: the build of this checkout (`dist/`, through the
 * package's public entry point), or, when BENCH_DIST names another build directory, that one: the
 * `--baseline` rows measure an earlier build side by side with this one.
 */
export const gatePackage = await import(
  process.env.BENCH_DIST ? pathToFileURL(resolve(process.env.BENCH_DIST, 'index.js')).href : 'payments-gate'
)
const {
  CredentialStore,
  compilePolicy,
  createGate,
  createGateway,
  createLogDestination,
  createLogger,
  createMetrics,
  staticPolicies,
} = gatePackage

/** What BENCH_IDEMPOTENCY may say: the store of retry protection, as `--idempotency` takes it. */
export const IDEMPOTENCY = /^(memory|off|redis(-cluster)?:\/\/.+)$/

/** The sample policy, with `rateLimit` (`{ payments, seconds }`) when given: (cl) and (crl) count every payment. */
function loadPolicy(rateLimit) {
  const file = JSON.parse(readFileSync(new URL('../../policies/default.json', import.meta.url), 'utf8'))
  const policy = compilePolicy(rateLimit === undefined ? file : { ...file, rateLimit })
  if (Array.isArray(policy)) throw new Error(`policies/default.json: ${policy.join('; ')}`)
  return policy
}

/**
 * The gate of every bench gateway: the users of `users` (the JSON of a users file), the sample policy, and
 * retry protection with `idempotency`: `memory` (the default, as deployed), `off`, or a `redis://` URL.
 */
export function buildGate({ users, idempotency = 'memory', rateLimit }) {
  if (!IDEMPOTENCY.test(idempotency))
    throw new Error(
      `BENCH_IDEMPOTENCY: expected memory, off, redis://HOST:PORT or redis-cluster://HOST:PORT,..., got ${idempotency}`,
    )
  // `idempotency` also goes to the gate: a build from before retry protection moved to the proxy (`--baseline`) reads it
  // there, and this build's middleware arms (servers/*-protected.js) protect their handler with it.
  return createGate({
    policies: staticPolicies([loadPolicy(rateLimit)]),
    credentials: new CredentialStore(JSON.parse(users)),
    vendor: 'example',
    idempotency,
    idempotencyFingerprintKey: BENCH_FINGERPRINT_KEY,
  })
}

/** The gateway's own log destination, to /dev/null; a build from before it existed (`--baseline`) gets pino's asynchronous destination, as it did then. */
function logDestination() {
  return createLogDestination ? createLogDestination('/dev/null') : pino.destination({ dest: '/dev/null', sync: false })
}

/** Not a secret: the bench's payments are made up. */
const BENCH_FINGERPRINT_KEY = Buffer.from('payments-gate bench fingerprint key, 32 bytes+')

/** A gateway (not yet listening) in front of `target`, built as `payments-gate serve` builds it. */
export async function startGateway({
  target,
  users,
  idempotency = 'memory',
  logs = true,
  metrics = true,
  tls,
  targetTls,
  rateLimit,
}) {
  const gate = await buildGate({ users, idempotency, rateLimit })
  const logger = logs ? createLogger({ destination: logDestination() }) : createLogger({ level: 'silent' })
  // `gate` too for a build from before the proxy took its checks (`--baseline`).
  return createGateway({
    checks: gate.checks,
    gate,
    target,
    logger,
    metrics: metrics ? createMetrics() : undefined,
    idempotency,
    // The key every bench gateway on one Redis shares (docs/idempotency-reference.md, keyed fingerprints); ignored by older builds.
    idempotencyFingerprintKey: BENCH_FINGERPRINT_KEY,
    tls,
    targetTls,
  })
}

/** The options of a gateway child, from the environment its parent gave it. */
export function fromEnv(env = process.env) {
  // BENCH_RATE_LIMIT: `PAYMENTS/SECONDS`, a limit the load never reaches, so that every payment is counted and forwarded.
  const [payments, seconds] = (env.BENCH_RATE_LIMIT ?? '').split('/').map(Number)
  return {
    target: env.BENCH_TARGET,
    users: env.BENCH_USERS,
    idempotency: env.BENCH_IDEMPOTENCY || 'memory',
    rateLimit: env.BENCH_RATE_LIMIT ? { payments, seconds } : undefined,
  }
}
