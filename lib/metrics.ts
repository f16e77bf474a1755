import { Counter, Histogram, Registry, collectDefaultMetrics } from 'prom-client'

/** What went wrong with a forwarded request: no connection, no answer in time, a cut connection, or a 5xx answer. */
export type BackendErrorKind = 'refused' | 'timeout' | 'reset' | 'serverError'

export interface Metrics {
  readonly registry: Registry
  /** One finished request: its operation (`other` for a path passed through), status and errorName (`none` when it has none). */
  request(operation: string, status: number, errorName: string | undefined, seconds: number): void
  backendError(kind: BackendErrorKind): void
  policyReload(ok: boolean): void
  /** What retry protection did with one payment (docs/idempotency.md). */
  retryProtection(outcome: RetryProtectionOutcome): void
  /** A failure of the retry-protection store or the shared login throttle. */
  storeError(): void
}

/** Forwarded under a claim, replayed, refused as in flight or as another payment's reference, refused or forwarded unprotected for a store failure. */
export type RetryProtectionOutcome = (typeof RETRY_PROTECTION_OUTCOMES)[number]
const RETRY_PROTECTION_OUTCOMES = ['claimed', 'replayed', 'inProgress', 'alreadyUsed', 'storeUnavailable', 'unprotected'] as const

/**
 * The gateway's Prometheus metrics, on a registry of their own so that an
 * application embedding the gateway keeps its global registry to itself.
 */
export function createMetrics(options: { defaultMetrics?: boolean } = {}): Metrics {
  const registry = new Registry()
  if (options.defaultMetrics ?? true) collectDefaultMetrics({ register: registry, prefix: 'payments_gate_' })
  const requests = new Counter({
    name: 'payments_gate_requests_total',
    help: 'Requests answered, by operation, status and errorName.',
    labelNames: ['operation', 'status', 'errorName'] as const,
    registers: [registry],
  })
  const duration = new Histogram({
    name: 'payments_gate_request_duration_seconds',
    help: 'Time from the request to the end of its answer, by operation.',
    labelNames: ['operation'] as const,
    buckets: [0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30],
    registers: [registry],
  })
  const backendErrors = new Counter({
    name: 'payments_gate_backend_errors_total',
    help: 'Forwarded requests without a usable backend answer, by kind.',
    labelNames: ['kind'] as const,
    registers: [registry],
  })
  const reloads = new Counter({
    name: 'payments_gate_policy_reloads_total',
    help: 'Policy folder reloads, by outcome (ok, or failed: the previous policy stays).',
    labelNames: ['outcome'] as const,
    registers: [registry],
  })
  const retryProtection = new Counter({
    name: 'payments_gate_retry_protection_total',
    help: 'Payments that passed every check, by what retry protection did with them.',
    labelNames: ['outcome'] as const,
    registers: [registry],
  })
  // Looked up once: this runs on every forwarded payment.
  const protectedBy = Object.fromEntries(RETRY_PROTECTION_OUTCOMES.map((outcome) => [outcome, retryProtection.labels(outcome)])) as Record<
    RetryProtectionOutcome,
    { inc(): void }
  >
  const storeErrors = new Counter({
    name: 'payments_gate_store_errors_total',
    help: 'Failures of the retry-protection store or the shared login throttle (Redis unreachable, a command timed out).',
    registers: [registry],
  })
  // prom-client hashes the label values on every call; the few label sets a
  // gateway sees (operations x statuses x error names) are looked up once.
  const counted = new Map<string, { inc(): void }>()
  const timed = new Map<string, { observe(value: number): void }>()
  return {
    registry,
    request(operation, status, errorName, seconds) {
      const key = `${operation} ${status} ${errorName}`
      let count = counted.get(key)
      if (count === undefined) counted.set(key, (count = requests.labels(operation, String(status), errorName ?? 'none')))
      count.inc()
      let time = timed.get(operation)
      if (time === undefined) timed.set(operation, (time = duration.labels(operation)))
      time.observe(seconds)
    },
    backendError: (kind) => backendErrors.inc({ kind }),
    policyReload: (ok) => reloads.inc({ outcome: ok ? 'ok' : 'failed' }),
    retryProtection: (outcome) => protectedBy[outcome].inc(),
    storeError: () => storeErrors.inc(),
  }
}
