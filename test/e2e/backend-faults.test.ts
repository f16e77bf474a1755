import { createServer } from 'node:http'
import type { AddressInfo } from 'node:net'
import t from 'tap'
import { paymentHeaders, send } from '../helpers/client.js'
import { scanLogsForCards, startGateway } from '../helpers/gateway.js'
import { saleBody } from '../helpers/payments.js'

/** CONTRACT.md, "The backend's side": every row, with the payment sent at most once. */
const { url, backend, metrics } = await startGateway(t, { timeout: 150 })
const payment = () => send(url, { headers: paymentHeaders(), body: saleBody() })

t.beforeEach(() => {
  backend.received.length = 0
})

t.test('backend refuses the connection: 503 serviceUnavailable', async (t) => {
  const closed = createServer()
  await new Promise<void>((resolve) => closed.listen(0, '127.0.0.1', resolve))
  const { port } = closed.address() as AddressInfo
  await new Promise((resolve) => closed.close(resolve))
  const started = await startGateway(t, { target: `http://127.0.0.1:${port}` })
  const reply = await send(started.url, { headers: paymentHeaders(), body: saleBody() })
  t.equal(reply.status, 503)
  t.equal(reply.json.errorName, 'serviceUnavailable')
  t.match(await started.metrics.registry.getSingleMetricAsString('payments_gate_backend_errors_total'), /kind="refused"} 1/)
})

t.test('backend slower than --timeout: 500 internalErrorOccurred, sent once', async (t) => {
  const startedBefore = backend.started
  backend.answer = () => undefined
  const reply = await payment()
  t.equal(reply.status, 500)
  t.equal(reply.json.errorName, 'internalErrorOccurred')
  t.equal(backend.started - startedBefore, 1, 'never retried')
  t.match(await metrics.registry.getSingleMetricAsString('payments_gate_backend_errors_total'), /kind="timeout"} 1/)
})

t.test('backend resets before its headers: 500 internalErrorOccurred, sent once', async (t) => {
  const startedBefore = backend.started
  backend.answer = (req) => req.socket.destroy()
  const reply = await payment()
  t.equal(reply.status, 500)
  t.equal(reply.json.errorName, 'internalErrorOccurred')
  t.equal(backend.started - startedBefore, 1, 'never retried')
})

t.test('backend 5xx with a body not in the error format: same status, standard body', async (t) => {
  backend.answer = (_req, res) => {
    res.writeHead(502, { 'content-type': 'text/html' })
    res.end('<h1>Bad gateway</h1>')
  }
  let reply = await payment()
  t.equal(reply.status, 502)
  t.equal(reply.headers['content-type'], 'application/json')
  t.same(reply.json, { errorName: 'internalErrorOccurred', message: reply.json.message })

  backend.answer = (_req, res) => {
    res.writeHead(503, { 'content-type': 'application/json', 'retry-after': '7' })
    res.end('{"errorName": 5, "message": "x"}')
  }
  reply = await payment()
  t.equal(reply.status, 503)
  t.equal(reply.json.errorName, 'serviceUnavailable')
  t.equal(reply.headers['retry-after'], '7')

  backend.answer = (_req, res) => {
    res.writeHead(500)
    res.end('null')
  }
  reply = await payment()
  t.equal(reply.status, 500)
  t.equal(reply.json.errorName, 'internalErrorOccurred')
})

t.test('backend 5xx in the error format is passed through', async (t) => {
  const body = JSON.stringify({ errorName: 'internalErrorOccurred', message: 'database down', detail: 1 })
  backend.answer = (_req, res) => {
    res.writeHead(500, { 'content-type': 'application/json', 'x-trace': 'abc' })
    res.write(body.slice(0, 10))
    res.end(body.slice(10))
  }
  const reply = await payment()
  t.equal(reply.status, 500)
  t.equal(reply.text, body)
  t.equal(reply.headers['x-trace'], 'abc')
  t.equal(reply.headers['content-length'], String(body.length))
})

t.test('a 5xx body larger than what is inspected is replaced', async (t) => {
  backend.answer = (_req, res) => {
    res.writeHead(500, { 'content-type': 'application/json' })
    res.end(JSON.stringify({ errorName: 'x', message: 'y'.repeat(70000) }))
  }
  const reply = await payment()
  t.equal(reply.status, 500)
  t.equal(reply.json.errorName, 'internalErrorOccurred')
  t.ok(reply.text.length < 1000)
})

t.test('backend resets while its 5xx body is read: 500, nothing of it has gone out', async (t) => {
  backend.answer = (_req, res) => {
    res.writeHead(500, { 'content-length': '1000' })
    res.write('{"errorName"')
    setTimeout(() => res.socket?.destroy(), 10)
  }
  const reply = await payment()
  t.equal(reply.status, 500)
  t.equal(reply.json.errorName, 'internalErrorOccurred')
})

t.test('backend resets after its headers went out: the client connection is cut', async (t) => {
  backend.answer = (_req, res) => {
    res.writeHead(200, { 'content-length': '1000', 'content-type': 'application/json' })
    res.write('{"outcome": "auth')
    setTimeout(() => res.socket?.destroy(), 10)
  }
  await t.rejects(payment(), { code: 'ECONNRESET' }, 'a truncated answer, never a made-up success')
  t.match(await metrics.registry.getSingleMetricAsString('payments_gate_backend_errors_total'), /kind="reset"} [1-9]/)
})

scanLogsForCards(t)
