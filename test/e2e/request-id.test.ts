import t from 'tap'
import { AUTH, OTHER_PATH, REQUEST_TYPE, SALE_PATH, saleBody } from '../helpers/fixtures.js'
import { paymentHeaders, raw, send, until } from '../helpers/http.js'
import { loggedRequests, scanLogsForCards } from '../helpers/logs.js'
import { created, type Answer } from '../helpers/servers.js'
import { startGateway } from '../helpers/surfaces.js'

/** docs/logs-and-metrics.md, request ids: one id per request, from the client's answer to the log line and the backend. */

const NEW_ID = /^[\w-]{12}-[0-9a-z]+$/

/** The log line of the request with this id, once it is written. */
async function lineOf(id: string): Promise<Record<string, unknown> | undefined> {
  await until(() => loggedRequests().some((line) => line.requestId === id))
  return loggedRequests().find((line) => line.requestId === id)
}

/** A backend that also says an X-Request-Id of its own, which the gateway's replaces. */
const withOwnId: Answer = (req, res, body) => {
  res.setHeader('X-Request-Id', 'the-backend-s-own')
  created(req, res, body)
}

t.test(
  "a forwarded payment: the client's id goes to the backend, comes back on the answer, and is logged",
  async (t) => {
    const { url, backend } = await startGateway(t, { answer: withOwnId })
    const reply = await send(url, { headers: paymentHeaders({ 'x-request-id': 'order-42/try-1' }), body: saleBody() })
    t.equal(reply.status, 201)
    t.equal(reply.headers['x-request-id'], 'order-42/try-1')
    t.equal(backend.received[0]?.headers['x-request-id'], 'order-42/try-1')
    t.match(await lineOf('order-42/try-1'), { status: 201, operation: 'sale' })
  },
)

t.test(
  'no id, or one that is not sane: a new one, the same for the backend, the answer and the log line',
  async (t) => {
    const { url, backend } = await startGateway(t)
    for (const sent of [undefined, 'two words', 'x'.repeat(200)]) {
      const headers = sent === undefined ? paymentHeaders() : paymentHeaders({ 'x-request-id': sent })
      const reply = await send(url, { headers, body: saleBody() })
      const id = reply.headers['x-request-id'] as string
      t.match(id, NEW_ID, String(sent))
      t.equal(backend.received.at(-1)?.headers['x-request-id'], id)
      t.match(await lineOf(id), { status: 201 })
    }
  },
)

t.test('refusals carry the id: a bad body, a wrong password, a wrong method', async (t) => {
  const { url, backend } = await startGateway(t)
  const cases: [string, Parameters<typeof send>[1], number][] = [
    [
      'body',
      { headers: paymentHeaders({ 'x-request-id': 'r-body' }), body: { ...saleBody(), transactionReference: '' } },
      400,
    ],
    [
      'auth',
      { headers: paymentHeaders({ 'x-request-id': 'r-auth', authorization: 'Basic eDp5' }), body: saleBody() },
      401,
    ],
    ['method', { method: 'GET', headers: { 'x-request-id': 'r-method', authorization: AUTH } }, 405],
  ]
  for (const [name, options, status] of cases) {
    const reply = await send(url, options)
    t.equal(reply.status, status, name)
    t.equal(reply.headers['x-request-id'], `r-${name}`, name)
    t.match(await lineOf(`r-${name}`), { status }, name)
  }
  t.equal(backend.received.length, 0)
})

t.test("a path passed through: the backend gets the id, the client gets the gateway's", async (t) => {
  const { url, backend } = await startGateway(t, { answer: withOwnId })
  const reply = await send(url, { method: 'GET', path: OTHER_PATH, headers: { 'x-request-id': 'p-1' } })
  t.equal(reply.status, 201)
  t.equal(reply.headers['x-request-id'], 'p-1', "one id, the request's")
  t.equal(backend.received[0]?.headers['x-request-id'], 'p-1')
  const anonymous = await send(url, { method: 'GET', path: OTHER_PATH })
  t.match(anonymous.headers['x-request-id'], NEW_ID)
  t.equal(backend.received[1]?.headers['x-request-id'], anonymous.headers['x-request-id'])
})

t.test('backend faults carry the id: a 5xx replaced, an unreachable backend', async (t) => {
  const { url, backend } = await startGateway(t, {
    answer: (_req, res) => res.writeHead(502).end('<html>bad gateway</html>'),
  })
  const replaced = await send(url, { headers: paymentHeaders({ 'x-request-id': 'f-1' }), body: saleBody() })
  t.equal(replaced.status, 502)
  t.equal(replaced.headers['x-request-id'], 'f-1')
  const passThrough = await send(url, { method: 'GET', path: OTHER_PATH, headers: { 'x-request-id': 'f-2' } })
  t.equal(passThrough.headers['x-request-id'], 'f-2')
  await backend.close()
  const down = await send(url, { headers: paymentHeaders({ 'x-request-id': 'f-3' }), body: saleBody() })
  t.equal(down.status, 503)
  t.equal(down.headers['x-request-id'], 'f-3')
})

t.test("a replay carries the id of the retry it answers, never the first answer's", async (t) => {
  const { url, backend } = await startGateway(t, { idempotency: 'memory', answer: withOwnId })
  const payment = { ...saleBody(), transactionReference: 'request-id-replay' }
  const first = await send(url, { headers: paymentHeaders({ 'x-request-id': 'first' }), body: payment })
  const retry = await send(url, { headers: paymentHeaders({ 'x-request-id': 'retry' }), body: payment })
  const anonymous = await send(url, { headers: paymentHeaders(), body: payment })
  t.equal(backend.received.length, 1)
  t.equal(first.headers['x-request-id'], 'first')
  t.equal(retry.headers['idempotent-replayed'], 'true')
  t.equal(retry.headers['x-request-id'], 'retry')
  t.match(anonymous.headers['x-request-id'], NEW_ID)
  t.match(await lineOf('retry'), { retryProtection: 'replayed' })
})

t.test('an answer below HTTP, where no request was parsed, carries none', async (t) => {
  const { port } = await startGateway(t)
  const answer = await raw(
    port,
    `POST ${SALE_PATH} HTTP/1.1\r\nHost: a\r\nX-Request-Id: below\r\nContent-Type: ${REQUEST_TYPE}\r\nContent-Length: 1\r\nTransfer-Encoding: chunked\r\n\r\n`,
  )
  t.match(answer, /^HTTP\/1.1 400 /)
  t.notMatch(answer.toLowerCase(), /x-request-id/)
})

scanLogsForCards(t)
