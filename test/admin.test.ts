import { connect, type Socket } from 'node:net'
import t, { type Test } from 'tap'
import { createAdmin, metricsOf, type AdminOptions } from '../lib/admin.js'
import { ADMIN_DEFAULTS } from '../lib/defaults.js'
import { createMetrics } from '../lib/metrics.js'
import { failAccept } from './helpers/http.js'
import { until } from './helpers/wait.js'

async function get(url: string): Promise<{ status: number; text: string; type: string | null }> {
  const res = await fetch(url)
  return { status: res.status, text: await res.text(), type: res.headers.get('content-type') }
}

/**
 * An admin listener on a free loopback port, closed when the test ends; `onAcceptError` fails the test unless the
 * test gives its own.
 */
async function listening(
  t: Test,
  options: Omit<AdminOptions, 'onAcceptError'> & Partial<Pick<AdminOptions, 'onAcceptError'>>,
) {
  const admin = createAdmin({ onAcceptError: (error) => t.error(error), ...options })
  const { port } = await admin.listen(0, '127.0.0.1')
  t.teardown(() => admin.close())
  return { admin, port }
}

t.test('healthz, readyz and metrics', async (t) => {
  let ready = false
  const metrics = createMetrics({ defaultMetrics: false })
  metrics.request('sale', 201, undefined, 0.002)
  const { port } = await listening(t, {
    ready: () => ready,
    ...metricsOf(metrics.registry),
  })
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
  const head = await fetch(`${base}/healthz`, { method: 'HEAD' })
  t.equal(head.status, 200, 'HEAD, as a probe may ask')
  // Red before: 200 to any method.
  for (const method of ['POST', 'DELETE', 'PUT']) {
    const answer = await fetch(`${base}/readyz`, { method })
    t.equal(answer.status, 405, method)
    t.equal(answer.headers.get('allow'), 'GET, HEAD')
  }
})

t.test('a failing metrics source answers 500', async (t) => {
  const { port } = await listening(t, {
    ready: () => true,
    metrics: () => Promise.reject(new Error('worker gone')),
  })
  const scraped = await get(`http://127.0.0.1:${port}/metrics`)
  t.equal(scraped.status, 500)
  t.match(scraped.text, 'worker gone')
})

/** A raw connection to the admin port, with what it received and a promise of its end. */
async function raw(port: number): Promise<{ socket: Socket; received: () => string; closed: Promise<void> }> {
  const socket = connect(port, '127.0.0.1')
  const chunks: Buffer[] = []
  socket.on('data', (chunk: Buffer) => chunks.push(chunk))
  socket.on('error', () => {})
  const closed = new Promise<void>((resolve) => socket.once('close', () => resolve()))
  await new Promise<void>((resolve, reject) => {
    socket.once('connect', resolve)
    socket.once('close', () => reject(new Error('closed before connecting')))
  })
  return { socket, received: () => Buffer.concat(chunks).toString(), closed }
}

t.test('a request that stalls is cut: half-sent headers, nothing at all, a body that never ends', async (t) => {
  const { port } = await listening(t, {
    ready: () => true,
    metrics: () => Promise.resolve(''),
  })
  const half = await raw(port)
  half.socket.write('GET /healthz HTTP/1.1\r\nHost: x\r\n')
  const silent = await raw(port)
  const body = await raw(port)
  body.socket.write('POST /healthz HTTP/1.1\r\nHost: x\r\nContent-Length: 100\r\n\r\n')
  const idle = await raw(port)
  idle.socket.write('GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n')
  // Each end is the server's: the test never closes these sockets, so only the admin's timeouts can. They run at
  // once, each on its own connection, so that the test lasts as long as the longest of them.
  await Promise.all([half.closed, silent.closed, body.closed, idle.closed])
  t.match(half.received(), /^HTTP\/1\.1 408 Request Timeout\r\n/, 'the half-sent request: 408, then closed')
  t.match(silent.received(), /^HTTP\/1\.1 408 Request Timeout\r\n/, 'the silent one too')
  t.match(idle.received(), /^HTTP\/1\.1 200 OK\r\n/, 'an answered keep-alive connection left idle is closed too')
})

t.test(
  'connections are capped: one past the cap is closed as it arrives, and a probe gets in once one ends',
  async (t) => {
    const { admin, port } = await listening(t, {
      ready: () => true,
      metrics: () => Promise.resolve(''),
    })
    t.equal(admin.server.maxConnections, ADMIN_DEFAULTS.maxConnections)
    const held = await Promise.all(Array.from({ length: ADMIN_DEFAULTS.maxConnections }, () => raw(port)))
    t.teardown(() => held.forEach(({ socket }) => socket.destroy()))
    // The kernel accepts the connection; the server closes it at once, before it could send a byte.
    const over = connect(port, '127.0.0.1')
    over.on('error', () => {})
    await new Promise<void>((resolve) => over.once('close', () => resolve()))
    t.pass('the connection past the cap was closed by the server')
    const first = held[0] as (typeof held)[number]
    first.socket.destroy()
    await first.closed
    const probe = () =>
      get(`http://127.0.0.1:${port}/healthz`).then(
        (res) => res.status === 200,
        () => false,
      )
    t.ok(await until(probe), 'a probe is answered once a connection is free')
  },
)

t.test('an accept that fails is told to onAcceptError, and the listener goes on', async (t) => {
  const failed: NodeJS.ErrnoException[] = []
  const { admin, port } = await listening(t, {
    ready: () => true,
    metrics: () => Promise.resolve(''),
    onAcceptError: (e) => failed.push(e),
  })
  failAccept(admin.server, 'ENOBUFS')
  t.match(failed, [{ code: 'ENOBUFS', syscall: 'accept' }])
  t.equal((await get(`http://127.0.0.1:${port}/healthz`)).status, 200, 'a probe is still answered')
})
