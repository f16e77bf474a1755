import t from 'tap'
import { createMetrics } from '../../lib/metrics.js'
import { createPayments } from '../../lib/proxy/retry-protection.js'
import { FINGERPRINT_KEY } from '../helpers/fixtures.js'
import { freePort } from '../helpers/servers.js'
import { until } from '../helpers/wait.js'

// Out of Stryker's tests (stryker.config.json): a closed ioredis Cluster keeps the process alive for two seconds,
// which every mutant of retry-protection.ts would pay (docs/reliability.md, issue 43).
t.test("a Redis Cluster store given no metrics of its own reports its nodes' errors to the gateway's", async (t) => {
  const metrics = createMetrics({ defaultMetrics: false })
  const payments = createPayments(
    { forward() {} },
    {
      idempotency: `redis-cluster://127.0.0.1:${await freePort()}`,
      idempotencyFingerprintKey: FINGERPRINT_KEY,
      timeout: 1_000,
      metrics,
    },
  )
  const counted = () => metrics.registry.getSingleMetricAsString('payments_gate_store_node_errors_total')
  t.ok(await until(async () => /} [1-9]/.test(await counted())), 'the refused connection counted')
  await payments.close()
})
