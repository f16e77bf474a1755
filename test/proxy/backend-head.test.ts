import t from 'tap'
import { acceptedHeaders, reasonPhrase } from '../../lib/proxy/backend-head.js'
import type { Exchange } from '../../lib/proxy/exchange.js'
import { AUTH, OTHER_PATH, REQUEST_TYPE, SALE_PATH, saleBody } from '../helpers/fixtures.js'
import { paymentHeaders, raw, send } from '../helpers/http.js'
import { loggedRequests, watchCrashes } from '../helpers/logs.js'
import { startRawBackend } from '../helpers/servers.js'
import { startGateway } from '../helpers/surfaces.js'

/**
 * docs/backend-faults.md, what the backend's head may hold: a reason phrase or header that node's
 * `writeHead` refuses is left out, and nothing the backend sends makes the gateway throw.
 */
const noCrashes = watchCrashes(t)

/**
 * The first exception or rejection that escapes the gateway. watchCrashes records it and keeps the process alive,
 * and the client that was never answered would then wait for its connection until tap's timeout: each
 * wait for an answer below races it, so a relay that throws fails the test at once, with its stack.
 */
const crashed = new Promise<never>((_resolve, reject) => {
  process.once('uncaughtException', reject)
  process.once('unhandledRejection', reject)
})
crashed.catch(() => undefined)
const answered = <T>(answer: Promise<T>): Promise<T> => Promise.race([answer, crashed])

const exchange = () => ({ droppedHeaders: undefined }) as unknown as Exchange

t.test('a reason phrase node would refuse is dropped: node sends its standard one', async (t) => {
  t.equal(reasonPhrase('Created'), 'Created')
  t.equal(reasonPhrase('Cr\u00e9\u00e9 \tok'), 'Cr\u00e9\u00e9 \tok', 'obs-text and HTAB are allowed (RFC 9112 4)')
  t.equal(reasonPhrase(''), '')
  t.equal(reasonPhrase(undefined), undefined)
  for (const reason of ['Cre\u0001ated', 'x\u007f', 'x\u0000', 'x\u0100', 'x\r\nSet-Cookie: a=b'])
    t.equal(reasonPhrase(reason), undefined, JSON.stringify(reason))
})

t.test('headers node would refuse are dropped and named for the log line; a clean list is not copied', async (t) => {
  const clean = ['Content-Type', 'text/plain', 'X-Obs', 'caf\u00e9']
  const first = exchange()
  t.equal(acceptedHeaders(clean, first), clean)
  t.equal(first.droppedHeaders, undefined)
  const second = exchange()
  const list = ['A', '1', 'Bad Name', '2', 'C', '3', 'D', 'x\u0001', 'E', 'x\u0100', '', '6', 'F', '7']
  t.strictSame(acceptedHeaders(list, second), ['A', '1', 'C', '3', 'F', '7'])
  t.strictSame(second.droppedHeaders, ['Bad Name', 'D', 'E', ''])
})

const bodyOf = (reference: string) => JSON.stringify(saleBody({ transactionReference: reference }))
const rawPayment = (reference: string) => {
  const body = bodyOf(reference)
  return `POST ${SALE_PATH} HTTP/1.1\r\nHost: a\r\nConnection: close\r\nAuthorization: ${AUTH}\r\nContent-Type: ${REQUEST_TYPE}\r\nContent-Length: ${Buffer.byteLength(body)}\r\n\r\n${body}`
}

t.test(
  'a control character in the reason of a charged 201: the client gets 201 Created, and so does its retry',
  async (t) => {
    const backend = await startRawBackend(t, (socket) =>
      socket.write('HTTP/1.1 201 Cre\u0001ated\r\nContent-Type: application/json\r\nContent-Length: 2\r\n\r\n{}'),
    )
    const { port } = await startGateway(t, { target: backend.url, idempotency: 'memory' })
    t.match(
      await answered(raw(port, rawPayment('reason-1'), { keepOpen: true })),
      /^HTTP\/1\.1 201 Created\r\n[^]*\r\n\r\n\{\}$/,
    )
    t.match(
      await answered(raw(port, rawPayment('reason-1'), { keepOpen: true })),
      /^HTTP\/1\.1 201 Created\r\n[^]*\r\n\r\n\{\}$/,
      'replayed',
    )
    t.equal(backend.requests.length, 1, 'sent once')
  },
)

t.test(
  'a control character in the reason of a backend error on a payment: its status, the standard body',
  async (t) => {
    const backend = await startRawBackend(t, (socket) =>
      socket.write('HTTP/1.1 502 Bad\u0001Gateway\r\nContent-Length: 5\r\n\r\noops!'),
    )
    const { port } = await startGateway(t, { target: backend.url })
    t.match(
      await answered(raw(port, rawPayment('reason-2'), { keepOpen: true })),
      /^HTTP\/1\.1 502 Bad Gateway\r\n[^]*"errorName":"internalErrorOccurred"/,
    )
  },
)

t.test('a passed-through path: the status relayed with the standard reason, a 5xx replaced as ever', async (t) => {
  const answers = [
    'HTTP/1.1 200 O\u0001K\r\nContent-Length: 2\r\n\r\nhi',
    'HTTP/1.1 503 Down\u007f\r\nRetry-After: 3\r\nContent-Length: 0\r\n\r\n',
  ]
  const backend = await startRawBackend(t, (socket, request) => socket.write(answers[request.index % 2] as string))
  const { url, port } = await startGateway(t, { target: backend.url })
  const get = `GET ${OTHER_PATH} HTTP/1.1\r\nHost: a\r\n\r\n`
  const text = await answered(
    raw(port, `${get}${get.replace('\r\n\r\n', '\r\nConnection: close\r\n\r\n')}`, {
      keepOpen: true,
    }),
  )
  t.match(text, /^HTTP\/1\.1 200 OK\r\n[^]*\r\n\r\nhiHTTP\/1\.1 503 Service Unavailable\r\n/)
  t.match(text, /retry-after: 3\r\n/i)
  t.equal((await answered(send(url, { method: 'GET', path: OTHER_PATH }))).status, 200, 'the gateway still answers')
})

t.test('a status node refuses to write (below 100) is a broken answer: 500, never a crash', async (t) => {
  const backend = await startRawBackend(t, (socket) => socket.write('HTTP/1.1 099 Odd\r\nContent-Length: 2\r\n\r\nhi'))
  const { url } = await startGateway(t, { target: backend.url })
  const other = await answered(send(url, { method: 'GET', path: OTHER_PATH }))
  t.equal(other.status, 500)
  t.equal(other.json.errorName, 'internalErrorOccurred')
  const payment = await answered(send(url, { headers: paymentHeaders(), body: saleBody() }))
  t.equal(payment.status, 500, 'undici refuses it: the payment was written, its outcome unknown')
  t.match(loggedRequests().at(-1), { status: 500, backendError: 'reset' })
  backend.answer = (socket) => socket.write('HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok')
  t.equal((await answered(send(url, { method: 'GET', path: OTHER_PATH }))).text, 'ok', 'the gateway still answers')
})

t.test(
  "a backend's broken chunk after a payment's 201 head: the unknown outcome, logged with the parser error's class",
  async (t) => {
    // undici's HTTPParserError looks its code up by number in a map of names, and so has none.
    const backend = await startRawBackend(t, (socket) =>
      socket.write('HTTP/1.1 201 Created\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n'),
    )
    const { url } = await startGateway(t, { target: backend.url })
    const body = saleBody({ transactionReference: 'broken-chunk-1' })
    const payment = await answered(send(url, { headers: paymentHeaders(), body }))
    t.equal(payment.status, 500)
    t.match(loggedRequests().at(-1), { status: 500, backendError: 'reset', backendErrorCode: 'HTTPParserError' })
  },
)

t.test(
  "a backend's unsolicited 100 Continue: dropped on a passed-through path; on a payment undici gives up, an unknown outcome",
  async (t) => {
    const backend = await startRawBackend(t, (socket) =>
      socket.write('HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 201 Created\r\nContent-Length: 2\r\n\r\n{}'),
    )
    const { url } = await startGateway(t, { target: backend.url, idempotency: 'memory' })
    const other = await answered(send(url, { method: 'GET', path: OTHER_PATH }))
    t.same([other.status, other.text], [201, '{}'], 'node skips the 100, the 201 relayed')
    const body = saleBody({ transactionReference: 'continue-1' })
    const payment = await answered(send(url, { headers: paymentHeaders(), body }))
    t.equal(payment.status, 500, 'undici drops the connection on an unsolicited 100 (docs/backend-faults.md)')
    t.equal(payment.json.errorName, 'internalErrorOccurred')
    t.match(loggedRequests().at(-1), { status: 500, backendError: 'reset', backendErrorCode: 'UND_ERR_SOCKET' })
    const retry = await answered(send(url, { headers: paymentHeaders(), body }))
    t.same([retry.status, retry.headers['idempotent-replayed']], [500, 'true'], 'the outcome unknown, replayed')
    t.equal(backend.requests.length, 2, 'the payment sent once, beside the other path')
  },
)

noCrashes()

t.test(
  "a backend's 204 with Content-Length: relayed without it (RFC 9110 8.6), on a payment, its replay and elsewhere",
  async (t) => {
    const backend = await startRawBackend(t, (socket) =>
      socket.write('HTTP/1.1 204 No Content\r\nContent-Length: 14\r\nX-Kept: yes\r\n\r\n'),
    )
    const { url } = await startGateway(t, { target: backend.url, idempotency: 'memory' })
    const body = saleBody({ transactionReference: 'no-content-1' })
    const payment = await answered(send(url, { headers: paymentHeaders(), body }))
    const replay = await answered(send(url, { headers: paymentHeaders(), body }))
    const other = await answered(send(url, { method: 'GET', path: OTHER_PATH }))
    for (const [name, reply] of [
      ['the payment', payment],
      ['its replay', replay],
      ['a path passed through', other],
    ] as const) {
      t.equal(reply.status, 204, name)
      t.equal(reply.headers['content-length'], undefined, `${name}: no Content-Length`)
      t.equal(reply.headers['x-kept'], 'yes', `${name}: the other headers kept`)
    }
    t.equal(replay.headers['idempotent-replayed'], 'true')
    t.equal(backend.requests.length, 2, 'the payment sent once, beside the other path')
  },
)
