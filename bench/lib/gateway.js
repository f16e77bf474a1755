// The one place where the bench builds payments-gate: every gateway child ((c), (c0), (cr), (d), the
// ladder's quiet step, the soak) calls startGateway, so a change in how the gateway is assembled is made
// here once. It is set up as `payments-gate serve` sets it up: a credential store (scrypt hash, cached),
// the sample policy, JSON request logs to /dev/null written asynchronously, and Prometheus metrics.
import pino from 'pino'
import { CredentialStore } from '../../dist/credentials.js'
import { buildChecks } from '../../dist/gate.js'
import { createLogger } from '../../dist/log.js'
import { createMetrics } from '../../dist/metrics.js'
import { staticPolicies } from '../../dist/policy/policy.js'
import { createGateway } from '../../dist/proxy/server.js'
import { loadPolicy } from '../micro/setup.js'

/** What BENCH_IDEMPOTENCY may say: the store of retry protection, as `--idempotency` takes it. */
export const IDEMPOTENCY = /^(memory|off|redis:\/\/.+)$/

/**
 * A gateway (not yet listening) in front of `target`, for the users of `users`
 * (the JSON of a users file). `idempotency` is `memory` (the default, as
 * deployed), `off`, or a `redis://` URL. The gateway of this branch has no
 * retry protection yet, so every value builds the same gateway for now; the
 * value is checked here so that a typo in the bench cannot pass unnoticed.
 */
export function startGateway({ target, users, idempotency = 'memory', logs = true, metrics = true }) {
  if (!IDEMPOTENCY.test(idempotency)) throw new Error(`BENCH_IDEMPOTENCY: expected memory, off or redis://HOST:PORT, got ${idempotency}`)
  const authenticator = new CredentialStore(JSON.parse(users))
  const checks = buildChecks({ policies: staticPolicies([loadPolicy()]), authenticator, vendor: 'example' })
  const logger = logs ? createLogger({ destination: pino.destination({ dest: '/dev/null', sync: false }) }) : createLogger({ level: 'silent' })
  return createGateway({ checks, target, logger, metrics: metrics ? createMetrics() : undefined })
}

/** The options of a gateway child, from the environment its parent gave it. */
export function fromEnv(env = process.env) {
  return { target: env.BENCH_TARGET, users: env.BENCH_USERS, idempotency: env.BENCH_IDEMPOTENCY || 'memory' }
}
