// Load with autocannon, and the serial probe with node's own client. Every
// request carries a transactionReference of its own (lib/references.js).
import * as http from 'node:http'
import * as https from 'node:https'
import autocannon from 'autocannon'
import { median } from '../lib/pairing.js'
import { freshBodies } from '../lib/references.js'

/**
 * autocannon rebuilds a request for every send only when it is given in
 * `requests` with a `setupRequest` of its own (a top-level one runs once).
 */
function fresh(body) {
  const next = freshBodies(body)
  return [{ setupRequest: (req) => ({ ...req, body: next() }) }]
}

/** One autocannon round; resolves to req/s, latencies (ms) and the status counts. */
export function round(url, { body, headers, connections, seconds }) {
  return new Promise((resolve, reject) => {
    autocannon(
      {
        url,
        method: 'POST',
        headers,
        requests: fresh(body),
        connections,
        pipelining: 1,
        duration: seconds,
        timeout: 10,
      },
      (error, result) => {
        if (error) return reject(error)
        const statuses = Object.fromEntries(
          Object.entries(result.statusCodeStats ?? {}).map(([code, { count }]) => [code, count]),
        )
        resolve({
          rps: result.requests.average,
          total: result.requests.total,
          p50: result.latency.p50,
          p99: result.latency.p99,
          errors: result.errors + result.timeouts,
          statuses,
        })
      },
    )
  })
}

/** Sends `count` requests as fast as possible to load a server up (memory phase). */
export function fixedCount(url, { body, headers, connections, count }) {
  return new Promise((resolve, reject) => {
    autocannon(
      { url, method: 'POST', headers, requests: fresh(body), connections, amount: count, timeout: 10 },
      (error, result) => (error ? reject(error) : resolve(result.requests.total)),
    )
  })
}

/**
 * One keep-alive connection, `count` requests one after the other, each timed
 * with hrtime: latency in microseconds, below autocannon's 1 ms resolution.
 * With `cpu` (resolves to the server's CPU time so far, in microseconds), the
 * requests are taken in `chunks` and `cpuUs` is the median chunk's server CPU
 * per request: a stall of the shared machine spoils one chunk, not the figure.
 */
export async function serial(url, { body, headers, count, warmup, cpu, chunks = 1 }) {
  const target = new URL(url)
  // (cs): the bench's own certificate, made for the run; autocannon does not verify it either.
  const { Agent, request } = target.protocol === 'https:' ? https : http
  const agent = new Agent({ keepAlive: true, maxSockets: 1, rejectUnauthorized: false })
  const next = freshBodies(body)
  const options = {
    host: target.hostname,
    port: target.port,
    path: target.pathname,
    method: 'POST',
    agent,
    headers: { ...headers, 'content-length': body.length },
  }
  const once = () =>
    new Promise((resolve, reject) => {
      const payload = next()
      const started = process.hrtime.bigint()
      const req = request(options, (res) => {
        res.on('data', () => {})
        res.on('end', () => resolve({ us: Number(process.hrtime.bigint() - started) / 1000, status: res.statusCode }))
        res.on('error', reject)
      })
      req.setTimeout(10000, () => req.destroy(new Error('serial probe: no answer in 10 s')))
      req.on('error', reject)
      req.end(payload)
    })
  try {
    for (let i = 0; i < warmup; i++) await once()
    const times = new Float64Array(count)
    const statuses = {}
    const perChunk = Math.ceil(count / chunks)
    const chunkCpu = []
    let before = await cpu?.()
    for (let i = 0; i < count; i++) {
      const { us, status } = await once()
      times[i] = us
      statuses[status] = (statuses[status] ?? 0) + 1
      if (cpu !== undefined && ((i + 1) % perChunk === 0 || i + 1 === count)) {
        const now = await cpu()
        chunkCpu.push((now - before) / ((i % perChunk) + 1))
        before = now
      }
    }
    times.sort()
    const cpuUs = chunkCpu.length === 0 ? undefined : median(chunkCpu)
    return { p50: percentile(times, 0.5), p99: percentile(times, 0.99), count, statuses, cpuUs }
  } finally {
    agent.destroy()
  }
}

function percentile(sorted, q) {
  return sorted[Math.min(sorted.length - 1, Math.floor(q * sorted.length))]
}
