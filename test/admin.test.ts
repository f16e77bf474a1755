import t from 'tap'
import { createAdmin, metricsOf } from '../lib/admin.js'
import { createMetrics } from '../lib/metrics.js'

async function get(url: string): Promise<{ status: number; text: string; type: string | null }> {
  const res = await fetch(url)
  return { status: res.status, text: await res.text(), type: res.headers.get('content-type') }
}

t.test('healthz, readyz and metrics', async (t) => {
  let ready = false
  const metrics = createMetrics({ defaultMetrics: false })
  metrics.request('sale', 201, undefined, 0.002)
  const admin = createAdmin({ ready: () => ready, ...metricsOf(metrics.registry) })
  const { port } = await admin.listen(0, '127.0.0.1')
  t.teardown(() => admin.close())
  const base = `http://127.0.0.1:${port}`
  t.equal((await get(`${base}/healthz`)).status, 200)
  t.equal((await get(`${base}/readyz`)).status, 503, 'not ready before the gateway is')
  ready = true
  t.equal((await get(`${base}/readyz?verbose`)).status, 200)
  const scraped = await get(`${base}/metrics`)
  t.equal(scraped.status, 200)
  t.match(scraped.type, /^text\/plain; version=0\.0\.4/)
  t.match(scraped.text, /payments_gate_requests_total\{operation="sale",status="201",error_name="none"} 1/)
  t.equal((await get(`${base}/nothing`)).status, 404)
})

t.test('a failing metrics source answers 500', async (t) => {
  const admin = createAdmin({ ready: () => true, metrics: () => Promise.reject(new Error('worker gone')) })
  const { port } = await admin.listen(0, '127.0.0.1')
  t.teardown(() => admin.close())
  const scraped = await get(`http://127.0.0.1:${port}/metrics`)
  t.equal(scraped.status, 500)
  t.match(scraped.text, 'worker gone')
})
