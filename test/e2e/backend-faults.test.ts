import t from 'tap'
import { SALE_PATH, saleBody } from '../helpers/fixtures.js'
import { paymentHeaders, send, until } from '../helpers/http.js'
import { loggedRequests, scanLogsForCards } from '../helpers/logs.js'
import { freePort } from '../helpers/servers.js'
import { startGateway } from '../helpers/surfaces.js'

/** docs/backend-faults.md, "When the backend fails": every fault, with the payment sent at most once. */
const { url, backend, metrics } = await startGateway(t, { timeout: 150 })
const payment = () => send(url, { headers: paymentHeaders(), body: saleBody() })

t.beforeEach(() => {
  backend.received.length = 0
})

t.test('backend refuses the connection: 503 serviceUnavailable', async (t) => {
  // Below the ephemeral range: a port freed by listen(0) may be taken by another file's backend, which then holds
  // the payment until --timeout (a 500, once in a fresh-clone run).
  const port = await freePort()
  const started = await startGateway(t, { target: `http://127.0.0.1:${port}` })
  const reply = await send(started.url, { headers: paymentHeaders(), body: saleBody() })
  t.equal(reply.status, 503)
  t.equal(reply.json.errorName, 'serviceUnavailable')
  t.match(
    await started.metrics.registry.getSingleMetricAsString('payments_gate_backend_errors_total'),
    /kind="refused"} 1/,
  )
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

t.test(
  'backend resets after its 2xx head, before any of its body: 500 internalErrorOccurred, logged as sent',
  async (t) => {
    const logged = loggedRequests().length
    backend.answer = (_req, res) => {
      res.writeHead(201, { 'content-length': '1000', 'content-type': 'application/json' }).flushHeaders()
      setTimeout(() => res.socket?.destroy(), 10)
    }
    // Red before: the connection was cut with nothing sent, and the log line said 201.
    const reply = await payment()
    t.equal(reply.status, 500)
    t.equal(reply.json.errorName, 'internalErrorOccurred')
    t.match(reply.json.message, /may have been processed/)
    t.ok(await until(() => loggedRequests().length > logged), 'its line written')
    t.match(loggedRequests().slice(logged), [
      { status: 500, backendError: 'reset', errorName: 'internalErrorOccurred' },
    ])
  },
)

t.test('backend resets after its headers went out: the client connection is cut', async (t) => {
  backend.answer = (_req, res) => {
    res.writeHead(200, { 'content-length': '1000', 'content-type': 'application/json' })
    res.write('{"outcome": "auth')
    setTimeout(() => res.socket?.destroy(), 10)
  }
  await t.rejects(payment(), { code: 'ECONNRESET' }, 'a truncated answer, never a made-up success')
  t.match(await metrics.registry.getSingleMetricAsString('payments_gate_backend_errors_total'), /kind="reset"} [1-9]/)
})

t.test('other paths: a 101 never asked for is a broken answer; bytes past a whole answer are dropped', async (t) => {
  const other = (method = 'GET') => send(url, { method, path: '/status' })
  const raw = (bytes: string) => (backend.answer = (req) => void req.socket.write(bytes))
  // Red before: node's client dropped the request without an event, and the client waited for ever.
  raw('HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n\r\n')
  t.match(await other(), { status: 500, json: { errorName: 'internalErrorOccurred' } }, 'an unasked upgrade')
  // Red before: relayed as the final answer, the backend's real one lost.
  raw('HTTP/1.1 101 Switching Protocols\r\n\r\nHTTP/1.1 201 Created\r\nContent-Length: 2\r\n\r\n{}')
  t.match(await other(), { status: 500, json: { errorName: 'internalErrorOccurred' } }, 'a 101 as a final answer')
  // Red before: the client's connection cut, not even the status sent.
  raw('HTTP/1.1 201 Created\r\nContent-Length: 8\r\n\r\n{"ok":1}EXTRA')
  t.match(await other(), { status: 201, text: '{"ok":1}' }, 'a body past its Content-Length: the answer whole')
  raw('HTTP/1.1 204 No Content\r\nContent-Length: 8\r\n\r\n{"ok":1}')
  t.match(await other(), { status: 204, text: '' }, 'a 204 with a body')
  raw('HTTP/1.1 200 OK\r\nContent-Length: 8\r\n\r\n{"ok":1}')
  t.match(await other('HEAD'), { status: 200, text: '' }, 'an answer to HEAD with a body')
})

t.test('other paths, on the pass-through engine, get the same answers', async (t) => {
  const other = () => send(url, { method: 'GET', path: '/status' })
  const fault = async (answer: typeof backend.answer) => {
    backend.answer = answer
    return other()
  }
  t.match(
    await fault(() => undefined),
    { status: 500, json: { errorName: 'internalErrorOccurred' } },
    'silent past --timeout',
  )
  t.match(
    await fault((req) => req.socket.destroy()),
    { status: 500, json: { errorName: 'internalErrorOccurred' } },
    'reset before the headers',
  )
  const html = await fault((_req, res) =>
    res.writeHead(502, { 'content-type': 'text/html' }).end('<h1>Bad gateway</h1>'),
  )
  t.match(html, { status: 502, json: { errorName: 'internalErrorOccurred' } }, 'a 5xx not in the error format replaced')
  const busy = await fault((_req, res) => res.writeHead(503, { 'retry-after': '7' }).end('busy'))
  t.match(
    busy,
    { status: 503, json: { errorName: 'serviceUnavailable' }, headers: { 'retry-after': '7' } },
    'Retry-After kept',
  )
  const body = JSON.stringify({ errorName: 'internalErrorOccurred', message: 'database down' })
  const own = await fault((_req, res) => res.writeHead(500, { 'x-trace': 'abc' }).end(body))
  t.match(
    own,
    { status: 500, text: body, headers: { 'x-trace': 'abc', 'content-length': String(body.length) } },
    'a 5xx in the error format passed on',
  )
  const cut = await fault(
    (_req, res) => (
      res.writeHead(500, { 'content-length': '1000' }).write('{"errorName"'),
      setTimeout(() => res.socket?.destroy(), 10)
    ),
  )
  t.match(cut, { status: 500, json: { errorName: 'internalErrorOccurred' } }, 'reset while the 5xx body is read')
  backend.answer = (_req, res) => (
    res.writeHead(200, { 'content-length': '1000' }).write('part'),
    setTimeout(() => res.socket?.destroy(), 10)
  )
  await t.rejects(other(), { code: 'ECONNRESET' }, 'reset after the headers: the client connection is cut')
  const unreachable = await startGateway(t, { target: `http://127.0.0.1:${await freePort()}` })
  t.match(
    await send(unreachable.url, { method: 'GET', path: '/status' }),
    { status: 503, json: { errorName: 'serviceUnavailable' } },
    'refused',
  )
})

scanLogsForCards(t)

t.test(
  "a backend status past 599, or a 307: a 500 with node's reason phrase, not the backend's, on a payment and elsewhere",
  async (t) => {
    for (const [status, reason] of [
      [600, 'Weird'],
      [999, 'Odd'],
      [307, 'Temporary Redirect'],
    ] as const) {
      backend.answer = (_req, res) => res.writeHead(status, reason, { location: '/elsewhere' }).end('odd')
      const reply = await fetch(`${url}${SALE_PATH}`, {
        method: 'POST',
        headers: paymentHeaders() as Record<string, string>,
        body: JSON.stringify(saleBody()),
        redirect: 'manual',
      })
      t.equal(reply.status, 500, `${status}`)
      t.equal(reply.statusText, 'Internal Server Error')
      t.match(await reply.json(), { errorName: 'internalErrorOccurred', message: /may have been processed/ })
    }
    backend.answer = (_req, res) => res.writeHead(600, 'Weird').end('odd')
    const other = await fetch(`${url}/other`)
    t.equal(other.status, 500, 'a path passed through')
    t.equal(other.statusText, 'Internal Server Error')
    t.equal(((await other.json()) as { errorName: string }).errorName, 'internalErrorOccurred')
  },
)

t.test('backend 307 or 308 on a payment: 500 internalErrorOccurred without Location, never followed', async (t) => {
  for (const status of [307, 308]) {
    backend.answer = (_req, res) => {
      res.writeHead(status, { location: 'https://elsewhere.example/payments', 'retry-after': '1' })
      res.end(JSON.stringify({ errorName: 'moved', message: 'send it there' }))
    }
    const startedBefore = backend.started
    // Red before: the redirect went to the client, and fetch sent the payment again, to Location, 20 times.
    const reply = await payment()
    t.equal(reply.status, 500, `${status}`)
    t.equal(reply.json.errorName, 'internalErrorOccurred')
    t.match(reply.json.message, /may have been processed/)
    t.equal(reply.headers.location, undefined)
    t.equal(reply.headers['retry-after'], undefined)
    t.equal(backend.started - startedBefore, 1, 'sent once')
  }
  t.match(
    await metrics.registry.getSingleMetricAsString('payments_gate_backend_errors_total'),
    /kind="serverError"} [1-9]/,
  )
})
