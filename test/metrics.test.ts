import t from 'tap'
import { register } from 'prom-client'
import { createMetrics } from '../lib/metrics.js'

t.test('metrics live on their own registry, with the process metrics by default', async (t) => {
  const metrics = createMetrics()
  metrics.request('sale', 201, undefined, 0.01)
  metrics.backendError('timeout')
  metrics.policyReload(true)
  metrics.policyReload(false)
  const text = await metrics.registry.metrics()
  t.match(text, /payments_gate_requests_total\{operation="sale",status="201",errorName="none"} 1/)
  t.match(text, /payments_gate_backend_errors_total\{kind="timeout"} 1/)
  t.match(text, /payments_gate_policy_reloads_total\{outcome="ok"} 1/)
  t.match(text, /payments_gate_policy_reloads_total\{outcome="failed"} 1/)
  t.match(text, /payments_gate_process_cpu_seconds_total/)
  t.equal(await register.getSingleMetricAsString('payments_gate_requests_total').catch(() => 'absent'), 'absent')
})

t.test('two gateways in one process do not collide', async (t) => {
  const a = createMetrics({ defaultMetrics: false })
  const b = createMetrics({ defaultMetrics: false })
  a.request('sale', 400, 'bodyIsEmpty', 0)
  t.notMatch(await b.registry.metrics(), /bodyIsEmpty/)
  t.notMatch(await a.registry.metrics(), /process_cpu/)
})
