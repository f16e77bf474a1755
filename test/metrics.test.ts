import t from 'tap'
import { AggregatorRegistry, Counter, Histogram, Registry, register } from 'prom-client'
import { createMetrics, type Metrics } from '../lib/metrics.js'

t.test('metrics live on their own registry, with the process metrics by default', async (t) => {
  const metrics = createMetrics()
  metrics.request('sale', 201, undefined, 0.01)
  metrics.backendError('timeout')
  const text = await metrics.registry.metrics()
  t.match(text, /payments_gate_requests_total\{operation="sale",status="201",error_name="none"} 1/)
  t.match(text, /payments_gate_backend_errors_total\{kind="timeout"} 1/)
  t.match(text, /payments_gate_process_cpu_seconds_total/)
  t.equal(await register.getSingleMetricAsString('payments_gate_requests_total').catch(() => 'absent'), 'absent')
})

t.test(
  'reloads: ok when something applied, failed once per refused version, and a gauge of what is refused now',
  async (t) => {
    const metrics = createMetrics({ defaultMetrics: false })
    const text = () => metrics.registry.metrics()
    t.match(await text(), /payments_gate_policy_files_refused 0\n/)
    t.match(await text(), /payments_gate_credentials_file_refused 0\n/)
    t.notMatch(await text(), /reloads_total\{/, 'no reload counted before one happens')
    metrics.policyReload({ applied: true, refused: [], refusedNow: 0 })
    const refused = [
      { file: 'p/a.json', reason: 'not JSON' },
      { file: 'p/b.json', reason: 'not JSON' },
    ]
    metrics.policyReload({ applied: false, refused, refusedNow: 2 })
    metrics.policyReload({ applied: true, refused: [], refusedNow: 1 })
    metrics.credentialsReload({ applied: false, refused: [{ file: 'c.json', reason: 'ENOENT' }], refusedNow: 1 })
    const after = await text()
    t.match(after, /payments_gate_policy_reloads_total\{outcome="ok"} 2\n/)
    t.match(after, /payments_gate_policy_reloads_total\{outcome="failed"} 2\n/)
    t.match(after, /payments_gate_policy_files_refused 1\n/)
    t.notMatch(after, /payments_gate_credentials_reloads_total\{outcome="ok"}/)
    t.match(after, /payments_gate_credentials_reloads_total\{outcome="failed"} 1\n/)
    t.match(after, /payments_gate_credentials_file_refused 1\n/)
    const workers = AggregatorRegistry.aggregate([
      await metrics.registry.getMetricsAsJSON(),
      await metrics.registry.getMetricsAsJSON(),
    ])
    t.match(
      await workers.metrics(),
      /payments_gate_policy_files_refused 1\n/,
      'with --workers, the files refused in every process are counted once',
    )
  },
)

t.test(
  'the --backend-errors rules file and the certificate files: reloads and refused files as the policies have them, the certificates by side',
  async (t) => {
    const metrics = createMetrics({ defaultMetrics: false })
    const text = () => metrics.registry.metrics()
    t.match(await text(), /payments_gate_backend_errors_file_refused 0\n/)
    t.match(
      await text(),
      /payments_gate_tls_files_refused\{side="listener"} 0\npayments_gate_tls_files_refused\{side="target"} 0\n/,
      'both sides at 0 from the start',
    )
    metrics.backendErrorsReload({
      applied: false,
      refused: [{ file: 'rules.json', reason: 'not JSON' }],
      refusedNow: 1,
    })
    metrics.tlsReload('target', {
      applied: false,
      refused: [{ file: 'ca.pem', reason: 'no certificate' }],
      refusedNow: 1,
    })
    metrics.tlsReload('listener', { applied: true, refused: [], refusedNow: 0 })
    const after = await text()
    t.match(after, /payments_gate_backend_errors_reloads_total\{outcome="failed"} 1\n/)
    t.match(after, /payments_gate_backend_errors_file_refused 1\n/)
    t.match(after, /payments_gate_tls_reloads_total\{side="target",outcome="failed"} 1\n/)
    t.match(after, /payments_gate_tls_reloads_total\{side="listener",outcome="ok"} 1\n/)
    t.match(
      after,
      /payments_gate_tls_files_refused\{side="listener"} 0\npayments_gate_tls_files_refused\{side="target"} 1\n/,
    )
    metrics.backendErrorsReload({ applied: true, refused: [], refusedNow: 0 })
    t.match(await text(), /payments_gate_backend_errors_file_refused 0\n/)
  },
)

t.test('two gateways in one process do not collide', async (t) => {
  const a = createMetrics({ defaultMetrics: false })
  const b = createMetrics({ defaultMetrics: false })
  a.request('sale', 400, 'bodyIsEmpty', 0)
  t.notMatch(await b.registry.metrics(), /bodyIsEmpty/)
  t.notMatch(await a.registry.metrics(), /process_cpu/)
})

/** The two request metrics as prom-client's own Counter and Histogram keep them: what the gateway's must match. */
function referenceMetrics(): Pick<Metrics, 'registry' | 'request'> {
  const registry = new Registry()
  const requests = new Counter({
    name: 'payments_gate_requests_total',
    help: 'Requests answered, by operation, status and error_name.',
    labelNames: ['operation', 'status', 'error_name'],
    registers: [registry],
  })
  const duration = new Histogram({
    name: 'payments_gate_request_duration_seconds',
    help: 'Time from the request to the end of its answer, by operation.',
    labelNames: ['operation'],
    buckets: [0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30],
    registers: [registry],
  })
  return {
    registry,
    request(operation, status, errorName, seconds) {
      requests.inc({ operation, status: String(status), error_name: errorName ?? 'none' })
      duration.observe({ operation }, seconds)
    },
  }
}

const REQUEST_METRICS = /^payments_gate_request(s_total|_duration_seconds)$/

/** The text of the two request metrics. */
async function requestMetricsText(registry: Registry): Promise<string> {
  const names = (await registry.getMetricsAsJSON())
    .map((metric) => metric.name)
    .filter((name) => REQUEST_METRICS.test(name))
  return (await Promise.all(names.map((name) => registry.getSingleMetricAsString(name)))).join('\n\n')
}

t.test(
  'requests are counted and timed exactly as prom-client counts and times them: the same text, the same JSON, the same sums across workers',
  async (t) => {
    const requests: Parameters<Metrics['request']>[] = [
      ['sale', 201, undefined, 0.0031],
      ['sale', 201, undefined, 0.005],
      ['sale', 400, 'bodyDoesNotMatchSchema', 0.0004],
      ['recurring', 201, undefined, 0.001],
      ['other', 502, undefined, 31],
      ['sale', 0, undefined, 0],
      ['unrouted', 400, 'requestIsMalformed', 30],
      ['sale', 201, undefined, 2.5000001],
    ]
    const ours = [createMetrics({ defaultMetrics: false }), createMetrics({ defaultMetrics: false })]
    const theirs = [referenceMetrics(), referenceMetrics()]
    requests.forEach((request, i) => {
      ours[i % 2]?.request(...request)
      theirs[i % 2]?.request(...request)
    })
    const json = async (registry: Registry) =>
      (await registry.getMetricsAsJSON())
        .filter((metric) => REQUEST_METRICS.test(metric.name))
        .map(({ name, type, aggregator, values }) => ({
          name,
          type,
          aggregator,
          values: values.map(({ labels, value }) => ({ labels, value })),
        }))
    for (const i of [0, 1]) {
      const [mine, reference] = [ours[i]?.registry, theirs[i]?.registry] as [Registry, Registry]
      t.equal(await requestMetricsText(mine), await requestMetricsText(reference), `process ${i}: the text`)
      t.same(await json(mine), await json(reference), `process ${i}: the JSON`)
    }
    const summed = async (registries: Registry[]) =>
      requestMetricsText(
        AggregatorRegistry.aggregate(await Promise.all(registries.map((registry) => registry.getMetricsAsJSON()))),
      )
    const sum = await summed(ours.map((metrics) => metrics.registry))
    t.equal(
      sum,
      await summed(theirs.map((metrics) => metrics.registry)),
      'summed across processes, as --workers sums them',
    )
    t.match(sum, /payments_gate_request_duration_seconds_count\{operation="sale"} 5\n/)
    t.match(sum, /payments_gate_requests_total\{operation="sale",status="201",error_name="none"} 3\n/)
    ours[0]?.registry.resetMetrics()
    t.notMatch(await ours[0]?.registry.metrics(), /operation="sale"/, 'a reset of the registry forgets the requests')
  },
)

t.test(
  "retry protection's outcomes are counted exactly as prom-client's Counter counts them, and a reset forgets them",
  async (t) => {
    const outcomes = [
      'claimed',
      'claimed',
      'replayed',
      'claimed',
      'storeUnavailable',
      'inProgress',
      'replayed',
    ] as const
    const ours = [createMetrics({ defaultMetrics: false }), createMetrics({ defaultMetrics: false })]
    const theirs = [new Registry(), new Registry()]
    const counters = theirs.map(
      (registry) =>
        new Counter({
          name: 'payments_gate_retry_protection_total',
          help: 'Payments that passed every check, by what retry protection did with them.',
          labelNames: ['outcome'],
          registers: [registry],
        }),
    )
    outcomes.forEach((outcome, i) => {
      ours[i % 2]?.retryProtection(outcome)
      counters[i % 2]?.inc({ outcome })
    })
    const text = (registry: Registry) => registry.getSingleMetricAsString('payments_gate_retry_protection_total')
    for (const i of [0, 1])
      t.equal(await text(ours[i]?.registry as Registry), await text(theirs[i] as Registry), `process ${i}: the text`)
    const summed = async (registries: Registry[]) =>
      AggregatorRegistry.aggregate(
        await Promise.all(registries.map((registry) => registry.getMetricsAsJSON())),
      ).getSingleMetricAsString('payments_gate_retry_protection_total')
    const sum = await summed(ours.map((metrics) => metrics.registry))
    t.equal(sum, await summed(theirs), 'summed across processes, as --workers sums them')
    t.match(sum, /payments_gate_retry_protection_total\{outcome="claimed"} 3\n/)
    ours[0]?.registry.resetMetrics()
    t.notMatch(await ours[0]?.registry.metrics(), /outcome=/, 'a reset of the registry forgets the outcomes')
  },
)

t.test(
  "the memory store's evictions, counted as prom-client counts them, and its window read at each scrape",
  async (t) => {
    const metrics = createMetrics({ defaultMetrics: false })
    const reference = new Registry()
    const counter = new Counter({
      name: 'payments_gate_retry_protection_evictions_total',
      help: 'Entries the memory store evicted before their TTL to stay within its bounds.',
      registers: [reference],
    })
    const text = (registry: Registry) =>
      registry.getSingleMetricAsString('payments_gate_retry_protection_evictions_total')
    t.equal(await text(metrics.registry), await text(reference), 'none yet')
    t.notMatch(await metrics.registry.metrics(), /window_seconds/, 'no window without a memory store')
    for (let i = 0; i < 3; i++) {
      metrics.retryProtectionEviction()
      counter.inc()
    }
    t.equal(await text(metrics.registry), await text(reference), 'three')
    let window = 12.5
    metrics.retryProtectionWindow(() => window)
    t.match(await metrics.registry.metrics(), /payments_gate_retry_protection_window_seconds 12\.5\n/)
    window = 30
    t.match(
      await metrics.registry.metrics(),
      /payments_gate_retry_protection_window_seconds 30\n/,
      'read again at the next scrape',
    )
    metrics.retryProtectionWindow(() => 7)
    t.match(
      await metrics.registry.metrics(),
      /payments_gate_retry_protection_window_seconds 7\n/,
      'a new store replaces the reader',
    )
    metrics.registry.resetMetrics()
    t.match(await text(metrics.registry), /evictions_total 0$/, 'a reset of the registry forgets them')
  },
)
