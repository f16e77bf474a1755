import { request } from 'node:http'
import { connect } from 'node:net'
import t from 'tap'
import { AUTH, basic, REQUEST_TYPE, SALE_PATH, saleBody } from '../helpers/fixtures.js'
import { paymentHeaders, send, until } from '../helpers/http.js'
import { loggedRequests, scanLogsForCards } from '../helpers/logs.js'
import { startGateway } from '../helpers/surfaces.js'

const { url, port, backend, gateway } = await startGateway(t)

interface ContinueOutcome {
  readonly continued: boolean
  readonly status: number
  readonly body: string
}

/** A request with `Expect: 100-continue`: the body goes only after a 100. */
function expectContinue(headers: Record<string, string>, body: string, path = SALE_PATH): Promise<ContinueOutcome> {
  return new Promise((resolve, reject) => {
    let continued = false
    const req = request(`${url}${path}`, {
      method: 'POST',
      agent: false,
      headers: { ...headers, expect: '100-continue', 'content-length': Buffer.byteLength(body) },
    })
    req.on('continue', () => {
      continued = true
      req.end(body)
    })
    req.on('response', (res) => {
      const chunks: Buffer[] = []
      res.on('data', (chunk: Buffer) => chunks.push(chunk))
      res.on('end', () =>
        resolve({ continued, status: res.statusCode as number, body: Buffer.concat(chunks).toString() }),
      )
    })
    req.on('error', reject)
    req.flushHeaders()
  })
}

t.beforeEach(() => {
  backend.received.length = 0
})

t.test(
  'Expect: 100-continue with a good head: 100, then the body is checked and forwarded without Expect',
  async (t) => {
    const outcome = await expectContinue(paymentHeaders() as Record<string, string>, JSON.stringify(saleBody()))
    t.ok(outcome.continued)
    t.equal(outcome.status, 201)
    t.equal(backend.received.length, 1)
    t.equal(backend.received[0]?.headers.expect, undefined)
  },
)

t.test('Expect: 100-continue with bad credentials: refused without a 100, the body never sent', async (t) => {
  const headers = paymentHeaders({ authorization: basic('shop-1', 'nope') }) as Record<string, string>
  const outcome = await expectContinue(headers, JSON.stringify(saleBody()))
  t.notOk(outcome.continued)
  t.equal(outcome.status, 401)
  t.equal(JSON.parse(outcome.body).errorName, 'accessDenied')
  t.equal(backend.received.length, 0)
})

t.test('Expect: 100-continue on another path: the gateway sends the 100 and streams the body on', async (t) => {
  const outcome = await expectContinue({ 'content-type': 'text/plain' }, 'hello', '/upload')
  t.ok(outcome.continued)
  t.equal(outcome.status, 201)
  t.equal(backend.received[0]?.body.toString(), 'hello')
  t.equal(backend.received[0]?.headers.expect, undefined)
})

t.test('any other expectation: 417 headerHasInvalidValue in the error format, logged, nothing forwarded', async (t) => {
  for (const [path, expect] of [
    [SALE_PATH, 'foo'],
    [SALE_PATH, 'FOO, bar'],
    ['/upload', 'foo=bar'],
  ] as const) {
    const before = loggedRequests().length
    // Red before: node's own 417, an empty body, and no log line.
    const reply = await send(port, { path, headers: paymentHeaders({ expect }), body: saleBody() })
    t.equal(reply.status, 417, `${path} ${expect}`)
    t.equal(reply.headers['content-type'], 'application/json')
    t.same(reply.json, {
      errorName: 'headerHasInvalidValue',
      message: 'The Expect header may only hold 100-continue.',
      headerName: 'Expect',
    })
    t.ok(await until(() => loggedRequests().length > before), 'logged')
    t.match(loggedRequests().slice(before), [{ path, status: 417, errorName: 'headerHasInvalidValue' }])
  }
  t.equal(backend.received.length, 0, 'nothing forwarded')
})

t.test('an upload aborted mid-body is not forwarded', async (t) => {
  const path = `${SALE_PATH}?aborted=1`
  const body = JSON.stringify(saleBody())
  const startedBefore = backend.started
  // Left once the gateway has the head: a client gone before that sent it no request at all.
  const received = new Promise((resolve) => gateway.server.once('request', resolve))
  const socket = connect(port, '127.0.0.1')
  socket.on('error', () => undefined)
  socket.write(
    `POST ${path} HTTP/1.1\r\nHost: a\r\nAuthorization: ${AUTH}\r\nContent-Type: ${REQUEST_TYPE}\r\n` +
      `Content-Length: ${Buffer.byteLength(body)}\r\n\r\n${body.slice(0, 40)}`,
  )
  await received
  socket.destroy()
  await until(() => loggedRequests().some((line) => line.path === path))
  const line = loggedRequests().find((line) => line.path === path)
  t.match(line, { complete: false })
  // Its end came before its body's: node's refusal, 400, written on its own line, or nothing when the reset came first.
  t.ok(line?.status === 0 || (line?.status === 400 && line.code === 'HPE_INVALID_EOF_STATE'), `status ${line?.status}`)
  t.equal(backend.started, startedBefore, 'the backend saw nothing')
})

t.test(
  'a client that leaves while the backend works: the backend request is dropped, nothing is answered',
  async (t) => {
    const path = `${SALE_PATH}?left=1`
    let arrived: () => void = () => undefined
    const atBackend = new Promise<void>((resolve) => (arrived = resolve))
    backend.answer = () => arrived()
    const req = request(`${url}${path}`, { method: 'POST', agent: false, headers: paymentHeaders() })
    req.on('error', () => undefined)
    req.end(JSON.stringify(saleBody()))
    await atBackend
    req.destroy()
    await until(() => loggedRequests().some((line) => line.path === path))
    t.match(
      loggedRequests().find((line) => line.path === path),
      { status: 0, complete: false },
    )
    t.equal(backend.received.length, 1, 'sent once, never again')
  },
)

t.test('a client that leaves mid-answer: the rest of the backend answer is dropped', async (t) => {
  const path = '/stream?left=1'
  backend.answer = (_req, res) => {
    res.writeHead(200, { 'content-type': 'text/plain' })
    res.write('first part')
  }
  await new Promise<void>((resolve) => {
    const req = request(`${url}${path}`, { agent: false }, (res) => {
      res.once('data', () => {
        req.destroy()
        resolve()
      })
    })
    req.on('error', () => undefined)
    req.end()
  })
  await until(() => loggedRequests().some((line) => line.path === path))
  t.match(
    loggedRequests().find((line) => line.path === path),
    { status: 200, complete: false, backendError: undefined },
  )
})

scanLogsForCards(t)
