import { connect as connectHttp2 } from 'node:http2'
import { connect, type Socket } from 'node:net'
import t from 'tap'
import { AUTH, REQUEST_TYPE, SALE_PATH, saleBody } from '../helpers/fixtures.js'
import { raw, until } from '../helpers/http.js'
import { logLines, scanLogsForCards } from '../helpers/logs.js'
import { startGateway } from '../helpers/surfaces.js'

/** docs/checks.md, "Refusals below HTTP", with raw sockets: an error body, a closed connection, nothing forwarded. */
const { port, backend, metrics, gateway } = await startGateway(t, {
  headersTimeout: 300,
  requestTimeout: 600,
  timeoutCheckInterval: 50,
})

function statusOf(answer: string): { status: number; json: any; close: boolean } {
  const [head = '', body = ''] = answer.split('\r\n\r\n')
  return {
    status: Number(head.split(' ')[1]),
    json: JSON.parse(body),
    close: /\r\nConnection: close\r\n/i.test(`${head}\r\n`),
  }
}

const smuggling = {
  'Content-Length with Transfer-Encoding': `POST /x HTTP/1.1\r\nHost: a\r\nContent-Length: 5\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n`,
  'two Content-Lengths': `POST /x HTTP/1.1\r\nHost: a\r\nContent-Length: 5\r\nContent-Length: 6\r\n\r\nhello`,
  'bare LF line ends': `POST /x HTTP/1.1\nHost: a\nContent-Length: 2\n\n{}`,
  'a space before the colon': `GET /x HTTP/1.1\r\nHost : a\r\n\r\n`,
  'not HTTP at all': `HELLO\r\n\r\n`,
}

for (const [name, bytes] of Object.entries(smuggling)) {
  t.test(`${name}: 400 requestIsMalformed`, async (t) => {
    const answer = statusOf(await raw(port, bytes))
    t.equal(answer.status, 400)
    t.equal(answer.json.errorName, 'requestIsMalformed')
    t.ok(answer.close)
    t.equal(backend.started, 0, 'nothing reached the backend')
  })
}

t.test(
  'an HTTP/1.1 request with no Host, or an empty one: 400 requestIsMalformed in the error format, logged',
  async (t) => {
    const sale = JSON.stringify(saleBody())
    const head = `Authorization: ${AUTH}\r\nContent-Type: ${REQUEST_TYPE}\r\nContent-Length: ${Buffer.byteLength(sale)}\r\n`
    for (const [name, request] of [
      ['a payment', `POST ${SALE_PATH} HTTP/1.1\r\n${head}\r\n${sale}`],
      ['an empty Host', `POST ${SALE_PATH} HTTP/1.1\r\nHost:\r\n${head}\r\n${sale}`],
      ['an absolute form, which names a host all the same', `POST http://h${SALE_PATH} HTTP/1.1\r\n${head}\r\n${sale}`],
      ['another path', 'GET /other HTTP/1.1\r\n\r\n'],
    ] as const) {
      const before = logLines.length
      // Red before: node's own 400, with no body and no log line.
      const answer = statusOf(await raw(port, request))
      t.equal(answer.status, 400, name)
      t.match(answer.json, { errorName: 'requestIsMalformed', message: /requires a Host header/ })
      t.ok(await until(() => logLines.length > before), 'logged')
    }
    t.equal(backend.started, 0, 'nothing reached the backend')
    const other = await startGateway(t)
    t.match(
      await raw(other.port, 'GET /other HTTP/1.0\r\n\r\n', { keepOpen: true }),
      /^HTTP\/1\.1 2/,
      'HTTP/1.0 has no Host to send',
    )
    t.equal(other.backend.started, 1, 'passed on')
  },
)

t.test("CONNECT: no tunnel; 405 on an operation's path, 400 otherwise, closed, logged and counted", async (t) => {
  const before = logLines.length
  const cases: [string, number, string][] = [
    [`CONNECT ${SALE_PATH} HTTP/1.1`, 405, 'methodIsNotAllowed'],
    ['CONNECT backend.example:443 HTTP/1.1', 400, 'requestIsMalformed'],
    ['CONNECT /other HTTP/1.1', 400, 'requestIsMalformed'],
  ]
  for (const [line, status, errorName] of cases) {
    const answer = statusOf(await raw(port, `${line}\r\nHost: a\r\n\r\n`))
    t.equal(answer.status, status, line)
    t.equal(answer.json.errorName, errorName, line)
    t.ok(answer.close, `${line}: Connection: close`)
  }
  t.equal(backend.started, 0, 'nothing reached the backend')
  t.ok(
    await until(() => logLines.slice(before).filter((line) => line.includes('refused below HTTP')).length === 3),
    'logged',
  )
  t.match(JSON.parse(logLines.slice(before).find((line) => line.includes('refused below HTTP')) ?? '{}'), {
    status: 405,
    errorName: 'methodIsNotAllowed',
    code: 'CONNECT',
  })
  t.match(
    await metrics.registry.metrics(),
    /payments_gate_requests_total\{operation="unrouted",status="405",error_name="methodIsNotAllowed"} 1/,
  )
})

t.test('headers over 16 KiB: 431 headersAreTooLarge', async (t) => {
  const answer = statusOf(await raw(port, `GET /x HTTP/1.1\r\nHost: a\r\nX-Big: ${'a'.repeat(17 * 1024)}\r\n\r\n`))
  t.equal(answer.status, 431)
  t.equal(answer.json.errorName, 'headersAreTooLarge')
  t.equal(backend.started, 0)
})

t.test('headers not received in time: 408 requestTimedOut', async (t) => {
  const answer = statusOf(await raw(port, `POST ${SALE_PATH} HTTP/1.1\r\nHost: a\r\n`, { keepOpen: true }))
  t.equal(answer.status, 408)
  t.equal(answer.json.errorName, 'requestTimedOut')
  t.equal(backend.started, 0)
})

t.test('a body not received in time: 408 requestTimedOut, nothing forwarded, on its own request line', async (t) => {
  const before = logLines.length
  const head = `POST ${SALE_PATH} HTTP/1.1\r\nHost: a\r\nAuthorization: ${AUTH}\r\nContent-Type: ${REQUEST_TYPE}\r\nContent-Length: 100\r\n\r\n{"a":`
  const answer = statusOf(await raw(port, head, { keepOpen: true }))
  t.equal(answer.status, 408)
  t.equal(answer.json.errorName, 'requestTimedOut')
  t.equal(backend.started, 0)
  t.ok(await until(() => logLines.length > before), 'logged')
  // Red before: a "refused below HTTP" line and a request line with status 0, two lines (and counts) for one request.
  t.match(
    logLines.slice(before).map((line) => JSON.parse(line)),
    [
      {
        path: SALE_PATH,
        operation: 'sale',
        status: 408,
        errorName: 'requestTimedOut',
        code: 'ERR_HTTP_REQUEST_TIMEOUT',
      },
    ],
  )
  t.equal(logLines.length - before, 1, 'one line')
  t.match(
    await metrics.registry.metrics(),
    /payments_gate_requests_total\{operation="sale",status="408",error_name="requestTimedOut"} 1/,
  )
})

t.test('a client that resets mid-headers gets nothing and is not logged as a refusal', async (t) => {
  const before = logLines.length
  // The gateway's side of the connection: once it has closed, the gateway is done with the client.
  const accepted = new Promise<Socket>((resolve) => gateway.server.once('connection', resolve))
  await new Promise<void>((resolve) => {
    const socket = connect(port, '127.0.0.1', () => {
      socket.write(`GET /x HTTP/1.1\r\nHost: a\r\n`)
      setTimeout(() => socket.resetAndDestroy(), 20)
    })
    socket.on('close', () => resolve())
  })
  const served = await accepted
  if (!served.closed) await new Promise((resolve) => served.once('close', resolve))
  t.same(
    logLines.slice(before).filter((line) => line.includes('refused below HTTP')),
    [],
  )
  t.equal(backend.started, 0)
})

t.test(
  'HTTP/2 with prior knowledge: the server preface, then GOAWAY HTTP_1_1_REQUIRED (code 13), logged and counted',
  async (t) => {
    const before = logLines.length
    const session = connectHttp2(`http://127.0.0.1:${port}`)
    const settings = new Promise<unknown>((resolve) => session.once('remoteSettings', resolve))
    const goaway = new Promise<[number, number]>((resolve) =>
      session.once('goaway', (code, lastStreamId) => resolve([code, lastStreamId])),
    )
    session.on('error', () => undefined)
    const stream = session.request({ ':path': SALE_PATH, ':method': 'POST' })
    stream.on('error', () => undefined)
    stream.end('{}')
    t.ok(await settings, "the server's preface: a SETTINGS frame")
    t.same(await goaway, [13, 0], 'GOAWAY with HTTP_1_1_REQUIRED and last stream id 0')
    await new Promise((resolve) => session.once('close', resolve))
    t.equal(backend.started, 0, 'nothing reached the backend')
    t.ok(
      await until(() => logLines.slice(before).some((line) => line.includes('refused below HTTP')), 10_000),
      'logged',
    )
    const line = logLines.slice(before).find((line) => line.includes('refused below HTTP'))
    t.match(JSON.parse(line ?? '{}'), { status: 0, errorName: 'HTTP_1_1_REQUIRED', code: 'HPE_PAUSED_H2_UPGRADE' })
    t.match(
      await metrics.registry.metrics(),
      /payments_gate_requests_total\{operation="unrouted",status="0",error_name="HTTP_1_1_REQUIRED"} 1/,
    )
  },
)

const body = JSON.stringify(saleBody())
const payment = (headers = '') =>
  `POST ${SALE_PATH} HTTP/1.1\r\nHost: a\r\nAuthorization: ${AUTH}\r\nContent-Type: ${REQUEST_TYPE}\r\n${headers}Content-Length: ${Buffer.byteLength(body)}\r\n\r\n${body}`
const NEXT_PAYMENT = payment()

for (const [name, first, after, together] of [
  ['a malformed request pipelined behind a payment', payment(), 'HELLO\r\n\r\n', false],
  ['a CONNECT pipelined behind a payment', payment(), 'CONNECT backend.example:443 HTTP/1.1\r\nHost: a\r\n\r\n', false],
  ['a request after a payment with Connection: close', payment('Connection: close\r\n'), NEXT_PAYMENT, false],
  ['a request after Connection: close, in the same write', payment('Connection: close\r\n'), NEXT_PAYMENT, true],
  ['a payment pipelined behind a malformed request behind a payment', payment(), `HELLO\r\n\r\n${NEXT_PAYMENT}`, false],
] as const) {
  t.test(
    `${name}: the payment's answer, then the close; nothing after it processed, no 400 read as its answer`,
    async (t) => {
      let release = () => {}
      const held = new Promise<void>((resolve) => (release = resolve))
      const slow = await startGateway(t, {
        answer: (_req, res) =>
          void held.then(() => res.writeHead(201, { 'content-type': 'application/json' }).end('{}')),
      })
      const socket = connect(slow.port, '127.0.0.1')
      const chunks: Buffer[] = []
      socket.on('data', (chunk: Buffer) => chunks.push(chunk))
      const closed = new Promise((resolve) => socket.on('close', resolve))
      if (together) socket.write(first + after)
      else {
        socket.write(first)
        t.ok(await until(() => slow.backend.started === 1), 'the payment is at the backend')
        socket.write(after)
      }
      t.ok(await until(() => slow.backend.started === 1), 'the payment is at the backend')
      release()
      await closed
      const answer = Buffer.concat(chunks).toString('latin1')
      // Red before: the connection was cut with no answer, and a payment charged was left for its client to pay again.
      t.match(answer, /^HTTP\/1\.1 201 Created\r\n/, "the payment's answer")
      t.match(answer, /\r\nConnection: close\r\n/i, 'saying the connection ends with it')
      t.equal(answer.match(/HTTP\/1\.1 /g)?.length, 1, 'one answer: no refusal, no other request answered')
      t.equal(slow.backend.started, 1, 'nothing after it forwarded')
    },
  )
}

t.test("a head pipelined behind a payment that times out: the payment's answer, then the close", async (t) => {
  let release = () => {}
  const held = new Promise<void>((resolve) => (release = resolve))
  const slow = await startGateway(t, {
    headersTimeout: 300,
    requestTimeout: 600,
    timeoutCheckInterval: 50,
    answer: (_req, res) => void held.then(() => res.writeHead(201, { 'content-type': 'application/json' }).end('{}')),
  })
  const socket = connect(slow.port, '127.0.0.1')
  const chunks: Buffer[] = []
  socket.on('data', (chunk: Buffer) => chunks.push(chunk))
  const closed = new Promise((resolve) => socket.on('close', resolve))
  socket.write(payment())
  t.ok(await until(() => slow.backend.started === 1), 'the payment is at the backend')
  const timedOut = new Promise<NodeJS.ErrnoException>((resolve) => slow.gateway.server.once('clientError', resolve))
  socket.write(`POST ${SALE_PATH} HTTP/1.1\r\nHost: a\r\n`)
  t.match(await timedOut, { code: 'ERR_HTTP_REQUEST_TIMEOUT' }, 'the head behind it timed out')
  release()
  await closed
  const answer = Buffer.concat(chunks).toString('latin1')
  // Red before: the timeout cut the connection, and the charged payment's answer never came.
  t.match(answer, /^HTTP\/1\.1 201 Created\r\n/, "the payment's answer")
  t.match(answer, /\r\nConnection: close\r\n/i)
  t.equal(answer.match(/HTTP\/1\.1 /g)?.length, 1, 'no 408 read as its answer')
})

scanLogsForCards(t)
