import { Counter, Gauge, Registry, collectDefaultMetrics, type Histogram } from 'prom-client'
import type { LogTrouble } from './log.js'
import type { ReloadOutcome } from './watch.js'

/** What went wrong with a forwarded request: no connection, no answer in time, a cut connection, or a 5xx answer. */
export type BackendErrorKind = 'refused' | 'timeout' | 'reset' | 'serverError'

export interface Metrics {
  readonly registry: Registry
  /** One finished request: its operation (`other` for a path passed through), status and errorName (`none` when it has none). */
  request(operation: string, status: number, errorName: string | undefined, seconds: number): void
  backendError(kind: BackendErrorKind): void
  /** What a reload of the policy folder did (docs/logs-and-metrics.md). */
  policyReload(outcome: ReloadOutcome): void
  /** What a reload of the credentials file did. */
  credentialsReload(outcome: ReloadOutcome): void
  /** What a reload of the `--backend-errors` rules file did. */
  backendErrorsReload(outcome: ReloadOutcome): void
  /** What a reload of one side's certificate files did: the listener's pair, or the files used towards the backend. */
  tlsReload(side: TlsSide, outcome: ReloadOutcome): void
  /** What retry protection did with one payment (docs/idempotency.md). */
  retryProtection(outcome: RetryProtectionOutcome): void
  /** A failure of the retry-protection store or the shared login throttle. */
  storeError(): void
  /** Redis Cluster: a command sent again to the node named (`moved`, `ask`), or refused for now (`tryagain`, `clusterdown`). */
  storeRedirection(kind: string, node: string): void
  /** Redis Cluster: an error of one node's connection (refused, lost, timed out), by node. */
  storeNodeError(node: string): void
  /** Redis Cluster: its slots by state, as a node last said (`CLUSTER INFO`); all `unreachable` when none answered. */
  storeClusterSlots(slots: Readonly<Record<string, number>>): void
  /** A release of a claim given up after every attempt failed: its key stays held (docs/idempotency.md). */
  releaseFailure(): void
  /** A record of an answer given up after every attempt failed: past its window the key answers as the unknown outcome. */
  recordFailure(): void
  /** An entry of the memory store evicted before its TTL (docs/idempotency.md). */
  retryProtectionEviction(): void
  /** A claim the memory store refused because claims in flight fill it (docs/idempotency.md). */
  retryProtectionStoreFull(): void
  /** Exports what `read` says at each scrape: the age of the memory store's oldest entry, in seconds. */
  retryProtectionWindow(read: () => number): void
  /** Report mode: a request enforce mode would have refused, with that refusal's error name (docs/rollout.md). */
  wouldRefuse(operation: string, errorName: string, entity: string): void
  /** Report mode: a rewrite enforce mode would have made to a request it forwards. */
  wouldRewrite(operation: string, rewrite: string, entity: string): void
  /** What the rate limit did with a payment of an entity that has one (docs/policies.md, rate limit). */
  rateLimit(entity: string, outcome: RateLimitMetric): void
  /** A payment refused by `--backend-max-in-flight` (docs/deployment.md, backend protection). */
  shed(entity: string): void
  /** A write of the log's lines that failed, or a line dropped while too many waited (lib/log.ts). */
  logTrouble(trouble: LogTrouble): void
}

/**
 * Counted under the limit (`admitted`), refused for it (`limited`), over it in report mode (`reported`), not
 * counted for a store failure with `--idempotency-failure open` (`unchecked`), refused for one with `closed`
 * (`unavailable`).
 */
export type RateLimitMetric = 'admitted' | 'limited' | 'reported' | 'unchecked' | 'unavailable'

/** Whose certificate files: the listener's (`--tls-cert`, `--tls-key`) or those towards the backend (`--target-ca`, `--target-cert`, `--target-key`). */
export type TlsSide = 'listener' | 'target'

/**
 * Forwarded under a claim, replayed, refused as in flight or as another payment's reference, refused or forwarded
 * unprotected for a store failure, refused for a record under a fingerprint key this gateway does not hold.
 */
export type RetryProtectionOutcome =
  'claimed' | 'replayed' | 'inProgress' | 'alreadyUsed' | 'storeUnavailable' | 'unprotected' | 'unknownKey'

/**
 * The gateway's Prometheus metrics, on a registry of their own so that an
 * application embedding the gateway keeps its global registry to itself.
 */
export function createMetrics(options: { defaultMetrics?: boolean } = {}): Metrics {
  const registry = new Registry()
  if (options.defaultMetrics ?? true) collectDefaultMetrics({ register: registry, prefix: 'payments_gate_' })
  const requests = new RequestCounts()
  // Each as prom-client's Counter and Histogram report themselves (test/metrics.test.ts compares them).
  registry.registerMetric(
    new PlainCounter(
      'payments_gate_requests_total',
      'Requests answered, by operation, status and error_name.',
      requests,
    ) as unknown as Counter,
  )
  registry.registerMetric(new DurationHistogram(requests) as unknown as Histogram)
  const backendErrors = new Counter({
    name: 'payments_gate_backend_errors_total',
    help: 'Forwarded requests without a usable backend answer, by kind.',
    labelNames: ['kind'] as const,
    registers: [registry],
  })
  const policyReload = reloadMetrics(
    registry,
    ['payments_gate_policy_reloads_total', 'Reloads of the policy folder'],
    ['payments_gate_policy_files_refused', 'Policy files refused now, their last good policy in force.'],
  )
  const credentialsReload = reloadMetrics(
    registry,
    ['payments_gate_credentials_reloads_total', 'Reloads of the credentials file'],
    [
      'payments_gate_credentials_file_refused',
      '1 while the credentials file is refused, its last good users in force.',
    ],
  )
  const backendErrorsReload = reloadMetrics(
    registry,
    ['payments_gate_backend_errors_reloads_total', 'Reloads of the --backend-errors rules file'],
    [
      'payments_gate_backend_errors_file_refused',
      '1 while the --backend-errors rules file is refused, its last good rules in force.',
    ],
  )
  const tlsReload = reloadMetrics(
    registry,
    ['payments_gate_tls_reloads_total', 'Reloads of the certificate files, by side (listener, target)'],
    [
      'payments_gate_tls_files_refused',
      'Certificate files refused now, by side (listener, target), the last good ones in force.',
    ],
    ['listener', 'target'],
  )
  const retryProtection = new OutcomeCounts()
  registry.registerMetric(
    new PlainCounter(
      'payments_gate_retry_protection_total',
      'Payments that passed every check, by what retry protection did with them.',
      retryProtection,
    ) as unknown as Counter,
  )
  const logTroubles = new Counter({
    name: 'payments_gate_log_troubles_total',
    help: "Writes of the log's lines that failed (a full disk, an I/O error) and lines dropped while too many waited, by trouble.",
    labelNames: ['trouble'],
    registers: [registry],
  })
  const storeErrors = new Counter({
    name: 'payments_gate_store_errors_total',
    help: 'Failures of the retry-protection store or the shared login throttle (Redis unreachable, a command timed out).',
    registers: [registry],
  })
  // Redis Cluster: `node` is bounded by the cluster's nodes, `kind` and `state` by the cluster specification's words.
  const redirections = new Counter({
    name: 'payments_gate_store_redirections_total',
    help: 'Redis Cluster: store commands sent again to the node named (kind moved, ask) or refused for now (tryagain, clusterdown), by kind and node.',
    labelNames: ['kind', 'node'] as const,
    registers: [registry],
  })
  const nodeErrors = new Counter({
    name: 'payments_gate_store_node_errors_total',
    help: "Redis Cluster: errors of a node's connection (refused, lost, timed out), by node.",
    labelNames: ['node'] as const,
    registers: [registry],
  })
  const clusterSlots = new Gauge({
    name: 'payments_gate_store_cluster_slots',
    help: 'Redis Cluster: slots by state (ok, pfail, fail, unassigned; unreachable: all, when no node answered), as a node last said.',
    labelNames: ['state'] as const,
    registers: [registry],
  })
  const releaseFailures = new Counter({
    name: 'payments_gate_retry_protection_release_failures_total',
    help: 'Releases of a claim whose payment was never forwarded, given up after every attempt failed: the key stays held until the claim expires.',
    registers: [registry],
  })
  const recordFailures = new Counter({
    name: 'payments_gate_retry_protection_record_failures_total',
    help: "Records of a payment's answer given up after every attempt failed: past its window the key answers as the unknown outcome.",
    registers: [registry],
  })
  const evictions = new SingleCount()
  registry.registerMetric(
    new PlainCounter(
      'payments_gate_retry_protection_evictions_total',
      'Entries the memory store evicted before their TTL to stay within its bounds.',
      evictions,
    ) as unknown as Counter,
  )
  const full = new SingleCount()
  registry.registerMetric(
    new PlainCounter(
      'payments_gate_retry_protection_store_full_total',
      'Payments the memory store could not claim because claims in flight filled it.',
      full,
    ) as unknown as Counter,
  )
  let window: (() => number) | undefined
  // Counted only in report mode; `entity` is bounded by the credentials file, since report mode still refuses a user acting for an entity not theirs.
  const wouldRefuse = new Counter({
    name: 'payments_gate_would_refuse_total',
    help: 'Report mode: requests passed on that enforce mode would have refused, by operation, error_name and entity.',
    labelNames: ['operation', 'error_name', 'entity'] as const,
    registers: [registry],
  })
  const wouldRewrite = new Counter({
    name: 'payments_gate_would_rewrite_total',
    help: 'Report mode: rewrites enforce mode would have made to requests passed on as they came, by operation, rewrite and entity.',
    labelNames: ['operation', 'rewrite', 'entity'] as const,
    registers: [registry],
  })
  // `entity` is bounded as in the report-mode counters: a payment reaches the limit only for an entity its user may act for.
  const rateLimits = new EntityCounts(true)
  registry.registerMetric(
    new PlainCounter(
      'payments_gate_rate_limit_total',
      'Payments of entities with a rate limit, by entity and outcome: admitted, limited (429), reported (over it in report mode), unchecked or unavailable (the store failed, --idempotency-failure open or closed).',
      rateLimits,
    ) as unknown as Counter,
  )
  const shed = new EntityCounts(false)
  registry.registerMetric(
    new PlainCounter(
      'payments_gate_shed_total',
      'Payments answered 503 because this process was forwarding --backend-max-in-flight payments, by entity.',
      shed,
    ) as unknown as Counter,
  )
  return {
    registry,
    request: (operation, status, errorName, seconds) => requests.add(operation, status, errorName ?? 'none', seconds),
    backendError: (kind) => backendErrors.inc({ kind }),
    policyReload,
    credentialsReload,
    backendErrorsReload,
    tlsReload: (side, outcome) => tlsReload(outcome, side),
    retryProtection: (outcome) => retryProtection.inc(outcome),
    storeError: () => storeErrors.inc(),
    logTrouble: (trouble) => logTroubles.inc({ trouble }),
    storeRedirection: (kind, node) => redirections.inc({ kind, node }),
    storeNodeError: (node) => nodeErrors.inc({ node }),
    storeClusterSlots(slots) {
      for (const [state, count] of Object.entries(slots)) clusterSlots.set({ state }, count)
    },
    releaseFailure: () => releaseFailures.inc(),
    recordFailure: () => recordFailures.inc(),
    retryProtectionEviction: () => evictions.count.count++,
    retryProtectionStoreFull: () => full.count.count++,
    retryProtectionWindow(read) {
      if (window === undefined) {
        new Gauge({
          name: 'payments_gate_retry_protection_window_seconds',
          help: 'Age of the oldest entry the memory store keeps: how far back a retry is still recognized.',
          registers: [registry],
          collect() {
            this.set((window as () => number)())
          },
        })
      }
      window = read
    },
    wouldRefuse: (operation, errorName, entity) => wouldRefuse.inc({ operation, error_name: errorName, entity }),
    wouldRewrite: (operation, rewrite, entity) => wouldRewrite.inc({ operation, rewrite, entity }),
    rateLimit: (entity, outcome) => rateLimits.inc(entity, outcome),
    shed: (entity) => shed.inc(entity),
  }
}

/**
 * A watched file's two metrics: reloads that applied something (`ok`) or refused
 * a new version of a file (`failed`), and a gauge of the files refused now, so
 * an alert on a refused file lasts as long as the file is refused. With
 * `--workers` every process holds the same files: the gauge is their largest.
 * With `sides`, both carry a `side` label, the gauge at 0 for each side from the start.
 */
function reloadMetrics(
  registry: Registry,
  [counter, reloaded]: [string, string],
  [gauge, help]: [string, string],
  sides: readonly string[] = [],
): (outcome: ReloadOutcome, side?: string) => void {
  const labelNames = sides.length > 0 ? ['side', 'outcome'] : ['outcome']
  const reloads = new Counter({
    name: counter,
    help: `${reloaded}, by outcome: ok (what is in force changed, or SIGHUP), failed (a new version refused; the last good one stays).`,
    labelNames,
    registers: [registry],
  })
  const refused = new Gauge({
    name: gauge,
    help,
    labelNames: sides.length > 0 ? ['side'] : [],
    aggregator: 'max',
    registers: [registry],
  })
  for (const side of sides) refused.set({ side }, 0)
  return ({ applied, refused: problems, refusedNow }, side) => {
    const labels = side === undefined ? {} : { side }
    if (applied) reloads.inc({ ...labels, outcome: 'ok' })
    if (problems.length > 0) reloads.inc({ ...labels, outcome: 'failed' }, problems.length)
    refused.set(labels, refusedNow)
  }
}

/** The upper bounds of the request duration histogram, in seconds. */
const DURATION_BUCKETS = [0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30] as const

/** The count of one label set of a counter. */
interface Count {
  readonly labels: Readonly<Record<string, string>>
  count: number
}

/** Counts kept as plain numbers: every label set's, in the order first seen (prom-client's order). */
interface Counts {
  readonly counts: readonly Count[]
  reset(): void
}

/** What the requests of one operation added up to. */
interface OperationCells {
  readonly operation: string
  /** Status, then errorName, to the count. */
  readonly statuses: Map<number, Map<string, Count>>
  /** Requests by duration bucket, not cumulated; the last is over the largest bound. */
  readonly buckets: number[]
  sum: number
  count: number
}

/**
 * Every request's counts and duration, as plain numbers, handed to prom-client
 * only when the metrics are read. prom-client's own `inc` and `observe` build
 * and hash a label set on every call and key the buckets by their bounds as
 * strings, on every request (docs/performance-history.md has the cost), where this
 * costs a few map look-ups.
 */
class RequestCounts implements Counts {
  readonly operations = new Map<string, OperationCells>()
  /** Every count, in the order its label set was first seen (prom-client's order). */
  readonly counts: Count[] = []

  add(operation: string, status: number, errorName: string, seconds: number): void {
    let cells = this.operations.get(operation)
    if (cells === undefined) {
      cells = {
        operation,
        statuses: new Map(),
        buckets: new Array<number>(DURATION_BUCKETS.length + 1).fill(0),
        sum: 0,
        count: 0,
      }
      this.operations.set(operation, cells)
    }
    let names = cells.statuses.get(status)
    if (names === undefined) cells.statuses.set(status, (names = new Map()))
    let counted = names.get(errorName)
    if (counted === undefined) {
      counted = { labels: { operation, status: String(status), error_name: errorName }, count: 0 }
      names.set(errorName, counted)
      this.counts.push(counted)
    }
    counted.count++
    let bucket = 0
    while (bucket < DURATION_BUCKETS.length && seconds > (DURATION_BUCKETS[bucket] as number)) bucket++
    ;(cells.buckets[bucket] as number)++
    cells.sum += seconds
    cells.count++
  }

  reset(): void {
    this.operations.clear()
    this.counts.length = 0
  }
}

/** One line of a histogram: a bucket, the sum or the count, as prom-client's registry reads them. */
interface HistogramValue {
  readonly labels: Readonly<Record<string, string | number>>
  readonly value: number
  readonly metricName: string
}

/** `payments_gate_request_duration_seconds`, read from the counts: a metric of the registry like prom-client's Histogram. */
class DurationHistogram {
  readonly name = 'payments_gate_request_duration_seconds'
  readonly help = 'Time from the request to the end of its answer, by operation.'
  readonly type = 'histogram'
  readonly aggregator = 'sum'
  readonly #counts: RequestCounts

  constructor(counts: RequestCounts) {
    this.#counts = counts
  }

  async get(): Promise<{ name: string; help: string; type: string; values: HistogramValue[]; aggregator: string }> {
    const values: HistogramValue[] = []
    for (const { operation, buckets, sum, count } of this.#counts.operations.values()) {
      let cumulated = 0
      for (let i = 0; i <= DURATION_BUCKETS.length; i++) {
        cumulated += buckets[i] as number
        values.push({
          labels: { le: DURATION_BUCKETS[i] ?? '+Inf', operation },
          value: cumulated,
          metricName: `${this.name}_bucket`,
        })
      }
      values.push({ labels: { operation }, value: sum, metricName: `${this.name}_sum` })
      values.push({ labels: { operation }, value: count, metricName: `${this.name}_count` })
    }
    return { name: this.name, help: this.help, type: this.type, values, aggregator: this.aggregator }
  }

  reset(): void {
    this.#counts.reset()
  }
}

/** Retry protection's outcomes, one count a payment (docs/idempotency.md). */
class OutcomeCounts implements Counts {
  readonly counts: Count[] = []
  readonly #byOutcome = new Map<RetryProtectionOutcome, Count>()

  inc(outcome: RetryProtectionOutcome): void {
    let counted = this.#byOutcome.get(outcome)
    if (counted === undefined) {
      counted = { labels: { outcome }, count: 0 }
      this.#byOutcome.set(outcome, counted)
      this.counts.push(counted)
    }
    counted.count++
  }

  reset(): void {
    this.#byOutcome.clear()
    this.counts.length = 0
  }
}

/** Counts by entity, and by outcome where there is one: two map look-ups a payment, nothing built. */
class EntityCounts implements Counts {
  readonly counts: Count[] = []
  readonly #outcome: boolean
  readonly #byEntity = new Map<string, Map<string, Count>>()

  /** `outcome`: whether the counts carry an `outcome` label besides `entity`. */
  constructor(outcome: boolean) {
    this.#outcome = outcome
  }

  inc(entity: string, outcome = ''): void {
    let outcomes = this.#byEntity.get(entity)
    if (outcomes === undefined) this.#byEntity.set(entity, (outcomes = new Map()))
    let counted = outcomes.get(outcome)
    if (counted === undefined) {
      counted = { labels: this.#outcome ? { entity, outcome } : { entity }, count: 0 }
      outcomes.set(outcome, counted)
      this.counts.push(counted)
    }
    counted.count++
  }

  reset(): void {
    this.#byEntity.clear()
    this.counts.length = 0
  }
}

/** One count without labels. */
class SingleCount implements Counts {
  readonly count: Count = { labels: {}, count: 0 }
  readonly counts = [this.count]

  reset(): void {
    this.count.count = 0
  }
}

/**
 * A counter of the registry read from counts kept as plain numbers: updated
 * with a map look-up on the hot path, handed over only when the metrics are
 * read, the same text and JSON as prom-client's Counter.
 */
class PlainCounter {
  readonly type = 'counter'
  readonly aggregator = 'sum'

  readonly name: string
  readonly help: string
  private readonly source: Counts

  constructor(name: string, help: string, source: Counts) {
    this.name = name
    this.help = help
    this.source = source
  }

  async get(): Promise<{
    name: string
    help: string
    type: string
    values: { labels: Count['labels']; value: number }[]
    aggregator: string
  }> {
    const values = this.source.counts.map(({ labels, count }) => ({ labels, value: count }))
    return { name: this.name, help: this.help, type: this.type, values, aggregator: this.aggregator }
  }

  reset(): void {
    this.source.reset()
  }
}
