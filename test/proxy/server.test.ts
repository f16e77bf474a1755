import { request } from 'node:http'
import { connect } from 'node:net'
import t from 'tap'
import { hashPassword } from '../../lib/credentials/hash.js'
import { CredentialStore } from '../../lib/credentials/store.js'
import {
  AUTH,
  ENTITIES,
  PASSWORD,
  REQUEST_TYPE,
  SALE_PATH,
  saleBody,
  TEST_COST,
  USERNAME,
  basic,
} from '../helpers/fixtures.js'
import { keepAliveAgent, paymentHeaders, raw, send, until } from '../helpers/http.js'
import { captureLogger, loggedRequests, logLines, scanLogsForCards } from '../helpers/logs.js'
import { startGateway } from '../helpers/surfaces.js'
import { createGateway } from '../../lib/proxy/server.js'

t.test('drain: stops accepting, lets every request in flight finish, then closes', async (t) => {
  const { gateway, backend, url, port } = await startGateway(t)
  const held: (() => void)[] = []
  backend.answer = (_req, res) => held.push(() => res.writeHead(201).end('done'))
  t.ok(gateway.ready)
  const inFlight = [1, 2, 3].map(() => send(url, { headers: paymentHeaders(), body: saleBody() }))
  await until(() => held.length === 3)
  const drained = gateway.drain(5000)
  t.notOk(gateway.ready, 'not ready while draining')
  await t.rejects(send(url, { method: 'GET', path: '/x' }), { code: 'ECONNREFUSED' }, 'no new connections')
  for (const release of held) release()
  const replies = await Promise.all(inFlight)
  t.same(
    replies.map((reply) => [reply.status, reply.text, reply.headers.connection]),
    [
      [201, 'done', 'close'],
      [201, 'done', 'close'],
      [201, 'done', 'close'],
    ],
  )
  await drained
  t.equal(gateway.server.listening, false)
  t.equal(port > 0, true)
})

t.test('drain: a request that arrives on an open connection meanwhile gets 503 serviceUnavailable', async (t) => {
  const { gateway, backend, port } = await startGateway(t)
  let release: () => void = () => undefined
  // Headers out before the drain starts: that answer keeps its connection open for the next request.
  backend.answer = (_req, res) => {
    res.writeHead(201, { 'content-length': '2' }).write('o')
    release = () => res.end('k')
  }
  const socket = connect(port, '127.0.0.1')
  const chunks: Buffer[] = []
  socket.on('data', (chunk: Buffer) => chunks.push(chunk))
  const closed = new Promise((resolve) => socket.on('close', resolve))
  const body = JSON.stringify(saleBody())
  const head = `POST ${SALE_PATH} HTTP/1.1\r\nHost: a\r\nAuthorization: ${AUTH}\r\nContent-Type: ${REQUEST_TYPE}\r\nContent-Length: ${Buffer.byteLength(body)}\r\n\r\n`
  let requests = 0
  gateway.server.on('request', () => requests++)
  socket.write(head + body)
  // The 201's head must have reached the client before the drain starts, or it would say `Connection: close`.
  await until(() => Buffer.concat(chunks).toString().includes('201 Created'))
  const drained = gateway.drain(5000)
  socket.write(`GET /other HTTP/1.1\r\nHost: a\r\n\r\n`)
  await until(() => requests === 2)
  release()
  await closed
  await drained
  const text = Buffer.concat(chunks).toString()
  t.match(text, /^HTTP\/1.1 201 Created[^]*\r\n\r\nok/)
  t.match(text, /HTTP\/1.1 503 Service Unavailable[^]*"errorName":"serviceUnavailable"/)
  t.equal(backend.received.length, 1)
})

t.test(
  'withdraw: not ready, yet new connections are accepted and served, each answer with Connection: close',
  async (t) => {
    const { gateway, backend, url } = await startGateway(t)
    const agent = keepAliveAgent(t)
    t.equal((await send(url, { headers: paymentHeaders(), body: saleBody() }, agent)).headers.connection, 'keep-alive')
    gateway.withdraw()
    t.notOk(gateway.ready, 'not ready once withdrawn')
    t.ok(gateway.server.listening, 'still listening')
    const replies = [
      await send(url, { headers: paymentHeaders(), body: saleBody({ transactionReference: 'withdrawn-1' }) }, agent),
      await send(url, { headers: paymentHeaders(), body: saleBody({ transactionReference: 'withdrawn-2' }) }),
      await send(url, { method: 'GET', path: '/other' }),
    ]
    t.same(
      replies.map((reply) => [reply.status, reply.headers.connection]),
      [
        [201, 'close'],
        [201, 'close'],
        [201, 'close'],
      ],
    )
    t.equal(backend.received.length, 4)
  },
)

t.test(
  'drain: after the grace period a payment at the backend gets the unknown outcome, and other connections are cut',
  async (t) => {
    const { gateway, backend, url } = await startGateway(t)
    backend.answer = () => undefined
    const payment = send(url, { headers: paymentHeaders(), body: saleBody() })
    const passedThrough = send(url, { method: 'GET', path: '/other' })
    await until(() => backend.received.length === 2)
    await gateway.drain(20)
    const answer = await payment
    t.equal(answer.status, 500)
    t.match(answer.json.message, /^The outcome of this payment is unknown/)
    await t.rejects(passedThrough, { code: 'ECONNRESET' })
    const drained = (line: Record<string, unknown>) =>
      line.status === 500 && line.backendError === 'timeout' && line.backendErrorCode === 'EDRAINED'
    t.ok(await until(() => loggedRequests().some(drained)), 'logged as a timeout the drain cut')
  },
)

t.test("drain: a payment whose client left, cut at the deadline, is logged with its request's id", async (t) => {
  const { gateway, backend, port } = await startGateway(t)
  backend.answer = () => undefined
  const body = JSON.stringify(saleBody())
  const socket = connect(port, '127.0.0.1')
  socket.on('error', () => undefined)
  socket.write(
    `POST ${SALE_PATH} HTTP/1.1\r\nHost: a\r\nAuthorization: ${AUTH}\r\nContent-Type: ${REQUEST_TYPE}\r\nX-Request-Id: left-at-drain\r\nContent-Length: ${Buffer.byteLength(body)}\r\n\r\n${body}`,
  )
  t.ok(await until(() => backend.received.length === 1))
  socket.destroy()
  t.ok(await until(() => loggedRequests().some((line) => line.requestId === 'left-at-drain')), 'its line, as it left')
  await gateway.drain(10)
  t.match(
    loggedRequests().find((line) => Array.isArray(line.requestIds)),
    { requestIds: ['left-at-drain'], backendError: 'timeout', backendErrorCode: 'EDRAINED', msg: /cut by the drain/ },
  )
})

t.test('a check that throws is answered 500 internalErrorOccurred and logged', async (t) => {
  const { url, backend } = await startGateway(t, {
    gate: {
      credentials: {
        authenticate: () => {
          throw new Error('credential store broken')
        },
      },
    },
  })
  const reply = await send(url, { headers: paymentHeaders(), body: saleBody() })
  t.equal(reply.status, 500)
  t.equal(reply.json.errorName, 'internalErrorOccurred')
  t.equal(backend.received.length, 0)
  t.ok(loggedRequests().some((line) => line.msg === 'request failed'))
})

t.test('listen rejects when the port is taken', async (t) => {
  const first = await startGateway(t)
  const second = createGateway({ checks: first.gate.checks, target: first.backend.url, logger: captureLogger() })
  await t.rejects(second.listen(first.port, '127.0.0.1'), { code: 'EADDRINUSE' })
  t.notOk(second.ready)
})

t.test('metrics count requests by operation, status and errorName', async (t) => {
  const { url, metrics } = await startGateway(t)
  const anonymous = paymentHeaders()
  delete anonymous.authorization
  await send(url, { headers: anonymous, body: saleBody() })
  await send(url, { method: 'GET', path: '/health' })
  await send(url, { method: 'GET', path: '/payments/authorizations/migrateRecurring/' })
  const text = await metrics.registry.metrics()
  t.match(text, /payments_gate_requests_total\{operation="sale",status="401",error_name="accessDenied"} 1/)
  t.match(
    text,
    /payments_gate_requests_total\{operation="recurring",status="405",error_name="methodIsNotAllowed"} 1/,
    'a 405 keeps the operation of its path',
  )
  t.match(text, /payments_gate_requests_total\{operation="other",status="201",error_name="none"} 1/)
  t.match(text, /payments_gate_request_duration_seconds_count\{operation="sale"} 1/)
})

t.test(
  "the log line names the caller: the connection's address, or behind --trust-proxy N the Nth X-Forwarded-For entry from the right",
  async (t) => {
    const direct = await startGateway(t)
    const behind = await startGateway(t, { trustProxy: 2 })
    const forged = { 'x-forwarded-for': '6.6.6.6, 203.0.113.7, 10.0.0.2' }
    const lineOf = async (url: string, path: string, headers: Record<string, string> = {}) => {
      await send(url, { method: 'GET', path, headers })
      await until(() => loggedRequests().some((line) => line.path === path))
      return loggedRequests().find((line) => line.path === path)
    }
    t.match(
      await lineOf(direct.url, '/who-direct', forged),
      { remoteAddress: '127.0.0.1' },
      'no proxy trusted: the header is not believed',
    )
    t.match(
      await lineOf(behind.url, '/who-behind', forged),
      { remoteAddress: '203.0.113.7' },
      'the address the farthest trusted proxy added, not the forged leftmost',
    )
    t.match(
      await lineOf(behind.url, '/who-short', { 'x-forwarded-for': '203.0.113.8' }),
      { remoteAddress: '127.0.0.1' },
      'fewer entries than trusted hops: the peer',
    )
    t.match(await lineOf(behind.url, '/who-none'), { remoteAddress: '127.0.0.1' }, 'no header: the peer')
    const payment = await send(behind.url, {
      headers: paymentHeaders({ 'x-forwarded-for': '198.51.100.1,192.0.2.1' }),
      body: saleBody(),
    })
    t.equal(payment.status, 201)
    await until(() => loggedRequests().some((line) => line.remoteAddress === '198.51.100.1'))
    t.match(
      loggedRequests().find((line) => line.remoteAddress === '198.51.100.1'),
      { operation: 'sale', status: 201 },
    )
  },
)

t.test('a request on HTTP/1.0 without keep-alive is answered and closed', async (t) => {
  const { url } = await startGateway(t)
  const status = await new Promise<number>((resolve, reject) => {
    const req = request(`${url}/old`, { agent: false, headers: { connection: 'close' } }, (res) => {
      res.resume()
      resolve(res.statusCode as number)
    })
    req.on('error', reject)
    req.end()
  })
  t.equal(status, 201)
})

t.test('pipelined requests are handled in turn, each once its predecessor is answered', async (t) => {
  const { backend, port } = await startGateway(t)
  const events: string[] = []
  backend.answer = (req, res) => {
    events.push(`arrived ${req.url}`)
    setTimeout(
      () => {
        events.push(`answered ${req.url}`)
        res.writeHead(200, { 'content-length': '2' }).end('ok')
      },
      req.url === '/slow' ? 30 : 0,
    )
  }
  const text = await raw(
    port,
    `GET /slow HTTP/1.1\r\nHost: a\r\n\r\nGET /fast HTTP/1.1\r\nHost: a\r\nConnection: close\r\n\r\n`,
    { keepOpen: true },
  )
  t.equal(text.match(/HTTP\/1.1 200 OK/g)?.length, 2)
  t.same(events, ['arrived /slow', 'answered /slow', 'arrived /fast', 'answered /fast'])
})

t.test('requests pipelined behind an answer that closes the connection are never handled (RFC 9112 9.6)', async (t) => {
  const { backend, port } = await startGateway(t)
  const before = logLines.length
  const hidden = 'POST /other HTTP/1.1\r\nHost: a\r\nContent-Length: 2\r\n\r\n{}'
  const refused = `POST ${SALE_PATH} HTTP/1.1\r\nHost: a\r\nAuthorization: Basic eDp5\r\nContent-Type: ${REQUEST_TYPE}\r\nContent-Length: 2\r\n\r\n{}`
  const text = await raw(port, refused + hidden + hidden, { keepOpen: true })
  t.match(text, /^HTTP\/1.1 401 Unauthorized[^]*\r\nConnection: close\r\n/i)
  t.equal(text.match(/HTTP\/1.1/g)?.length, 1, 'one answer')
  t.equal(backend.started, 0, 'the requests behind it never reached the backend')
  t.same(
    logLines.slice(before).map((line) => JSON.parse(line).path),
    [SALE_PATH],
  )
})

scanLogsForCards(t)

t.test("each request's path is looked up once, for the label and the checks, also a path passed through", async (t) => {
  const { gate, url } = await startGateway(t)
  const looked: (string | undefined)[] = []
  const targetOf = gate.checks.targetOf
  Object.assign(gate.checks, { targetOf: (path: string | undefined) => (looked.push(path), targetOf(path)) })
  t.equal((await send(url, { method: 'GET', path: '/health/' })).status, 201)
  t.equal((await send(url, { headers: paymentHeaders(), body: saleBody() })).status, 201)
  t.same(looked, ['/health/', SALE_PATH])
})

t.test('behind --trust-proxy, failed logins lock the client address, not the username for everybody', async (t) => {
  const user = { username: USERNAME, password: await hashPassword(PASSWORD, TEST_COST), entities: ENTITIES }
  const login = (url: string, authorization: string, client: string) =>
    send(url, { headers: paymentHeaders({ authorization, 'x-forwarded-for': client }), body: saleBody() })
  const behind = await startGateway(t, {
    trustProxy: 1,
    gate: { credentials: new CredentialStore([user], { addressMaxFailures: 1 }) },
  })
  t.equal((await login(behind.url, basic(USERNAME, 'wrong'), '203.0.113.7')).status, 401)
  t.equal(
    (await login(behind.url, AUTH, '203.0.113.7')).status,
    401,
    'that address is locked, even for a right password',
  )
  t.equal((await login(behind.url, AUTH, '198.51.100.1')).status, 201, 'another client is let in')
  const direct = await startGateway(t, {
    gate: { credentials: new CredentialStore([user], { addressMaxFailures: 1 }) },
  })
  t.equal((await login(direct.url, basic(USERNAME, 'wrong'), '203.0.113.7')).status, 401)
  t.equal((await login(direct.url, AUTH, '203.0.113.7')).status, 201, 'no proxy trusted: no address is counted')
})
