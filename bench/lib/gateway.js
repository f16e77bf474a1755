// The one place where the bench builds payments-gate: every gateway child ((c), (c0), (cr), (d), the
// ladder's quiet step, the soak) calls startGateway, so a change in how the gateway is assembled is made
// here once. It is set up as `payments-gate serve` sets it up: a credential store (scrypt hash, cached),
// the sample policy, JSON request logs to /dev/null written asynchronously, and Prometheus metrics.
import pino from 'pino'
import { CredentialStore, createGate, createGateway, createLogger, createMetrics, staticPolicies } from 'payments-gate'
import { loadPolicy } from '../micro/setup.js'

/** What BENCH_IDEMPOTENCY may say: the store of retry protection, as `--idempotency` takes it. */
export const IDEMPOTENCY = /^(memory|off|redis:\/\/.+)$/

/**
 * The gate of every bench gateway, through the package's public entry point:
 * the users of `users` (the JSON of a users file), the sample policy, and
 * retry protection with `idempotency`: `memory` (the default, as deployed),
 * `off`, or a `redis://` URL.
 */
export function buildGate({ users, idempotency = 'memory' }) {
  if (!IDEMPOTENCY.test(idempotency)) throw new Error(`BENCH_IDEMPOTENCY: expected memory, off or redis://HOST:PORT, got ${idempotency}`)
  return createGate({ policies: staticPolicies([loadPolicy()]), credentials: new CredentialStore(JSON.parse(users)), vendor: 'example', idempotency })
}

/** A gateway (not yet listening) in front of `target`, built as `payments-gate serve` builds it. */
export async function startGateway({ target, users, idempotency = 'memory', logs = true, metrics = true }) {
  const gate = await buildGate({ users, idempotency })
  const logger = logs ? createLogger({ destination: pino.destination({ dest: '/dev/null', sync: false }) }) : createLogger({ level: 'silent' })
  return createGateway({ gate, target, logger, metrics: metrics ? createMetrics() : undefined })
}

/** The options of a gateway child, from the environment its parent gave it. */
export function fromEnv(env = process.env) {
  return { target: env.BENCH_TARGET, users: env.BENCH_USERS, idempotency: env.BENCH_IDEMPOTENCY || 'memory' }
}
