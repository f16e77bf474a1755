import { once } from 'node:events'
import { createServer } from 'node:http'
import { connect } from 'node:net'
import { Hono } from 'hono'
import t from 'tap'
import type { GateContext, GateLogger } from '../../lib/surfaces/shared.js'
import { reject, serializeError } from '../../lib/errors.js'
import { SCRYPT_DEFAULTS } from '../../lib/defaults.js'
import { CASES } from '../helpers/cases.js'
import {
  AUTH,
  BODY_LIMIT,
  OTHER_PATH,
  REQUEST_TYPE,
  SALE_PATH,
  saleBody,
  TEST_PAN,
  USERNAME,
  writeCredentials,
} from '../helpers/fixtures.js'
import { honoApp, honoServer, serveHono } from '../helpers/hono-app.js'
import { abortMidBody, keepAliveAgent, paymentHeaders, raw, send, type Reply } from '../helpers/http.js'
import { memoryLogger } from '../helpers/logs.js'
import { closeServer, listenOnLoopback } from '../helpers/servers.js'
import { type Echo, testGate } from '../helpers/surfaces.js'

const CLEAN = CASES[0]!
const INTERNAL = serializeError(reject('internalErrorOccurred').body)

/** Every header the sidecar's refusal carries, less the id, which is new per request. */
function comparable(answer: Reply) {
  const { 'x-request-id': id, date: _, 'keep-alive': __, ...headers } = answer.headers
  return { status: answer.status, headers, id: id !== undefined, body: answer.body.toString('latin1') }
}

t.test('the shared table: every refusal as the node handler gives it, byte for byte', async (t) => {
  const gate = await testGate(t)
  let handled = 0
  const hono = await serveHono(
    t,
    honoApp(gate, () => handled++),
  )
  const server = createServer(
    gate.handler((_req, res, passed, requestId) => {
      if (passed === undefined) return res.end('other')
      res.writeHead(201, { 'content-type': 'application/json' })
      res.end(JSON.stringify({ document: passed.document, requestId }))
    }),
  )
  const node = await listenOnLoopback(server)
  t.teardown(() => closeServer(server))
  const agent = keepAliveAgent(t)
  for (const c of CASES) {
    const before = handled
    const [mine, sidecar] = [await send(hono, c, agent), await send(node, c, agent)]
    t.equal(mine.status, c.status, `${c.name}: status`)
    t.equal(handled - before, c.errorName === undefined ? 1 : 0, `${c.name}: handed on only when it passed`)
    if (c.errorName !== undefined) {
      t.same(comparable(mine), comparable(sidecar), `${c.name}: as the node handler answers`)
      t.notOk(mine.text.includes(TEST_PAN), `${c.name}: no card number`)
    } else if (c.status === 201) {
      const echo = mine.json as Echo
      t.same(echo.document, sidecar.json.document, `${c.name}: the rewritten document`)
      t.equal(echo.username, USERNAME)
      t.equal(echo.requestId, mine.headers['x-request-id'], `${c.name}: the id, on the answer too`)
    } else {
      t.equal(mine.text, 'other', `${c.name}: untouched`)
    }
  }
})

t.test('a passing payment: the rewritten document and the context, under the id the client sent', async (t) => {
  const gate = await testGate(t)
  const port = await serveHono(t, honoApp(gate))
  const answer = await send(port, { ...CLEAN, headers: { ...CLEAN.headers, 'x-request-id': 'mine-1' } })
  const expected = gate.checks.checkBody('sale', Buffer.from(CLEAN.body as string))
  t.equal(answer.status, 201)
  t.equal(answer.headers['x-request-id'], 'mine-1')
  t.same(answer.json, {
    document: expected.ok === true && expected.document,
    operation: 'sale',
    entity: 'default',
    username: USERNAME,
    requestId: 'mine-1',
  })
  t.equal(answer.json.document.merchant.mcc, '5734', 'mcc filled in from the policy')
})

t.test('a path not ours goes on untouched, its body unread', async (t) => {
  const gate = await testGate(t)
  const app = new Hono()
  app.use('*', gate.hono())
  app.post('/ledger', async (c) => c.text(`${c.get('paymentsGate') === undefined} ${await c.req.text()}`))
  const port = await serveHono(t, app)
  const answer = await send(port, { path: '/ledger', headers: paymentHeaders(), body: 'not a payment' })
  t.equal(answer.status, 200)
  t.equal(answer.text, 'true not a payment')
  t.equal(answer.headers['x-request-id'], undefined, 'no id on a path not ours')
})

t.test('under app.route(): the whole path, so basePath is relative to the root', async (t) => {
  const gate = await testGate(t, { basePath: '/v6' })
  const payments = new Hono()
  payments.use('/payments/*', gate.hono())
  payments.post(SALE_PATH, (c) => c.text(String(c.get('paymentsGate')?.operation), 201))
  const app = new Hono()
  app.route('/v6', payments)
  const port = await serveHono(t, app)
  const path = `/v6${SALE_PATH}`
  const { authorization: _, ...anonymous } = CLEAN.headers
  t.equal((await send(port, { path, headers: anonymous, body: { amount: -1 } })).status, 401, 'no credentials')
  const passed = await send(port, { ...CLEAN, path })
  t.equal(passed.status, 201)
  t.equal(passed.text, 'sale')
})

/**
 * Issue 42: a sub-app screened by its own `use('/payments/*')`, mounted with `app.route('/v6', ...)` and
 * no `basePath`, or under a path parameter: screened wherever it is mounted (docs/middleware-reference.md, mounts).
 */
t.test('a sub-app that screens its own payments, mounted under /v6 or /:tenant without basePath', async (t) => {
  for (const mount of ['/v6', '/:tenant']) {
    const gate = await testGate(t)
    const payments = new Hono()
    payments.use('/payments/*', gate.hono())
    let handled = 0
    payments.post(SALE_PATH, (c) => (handled++, c.text(String(c.get('paymentsGate')?.operation), 201)))
    const app = new Hono()
    app.route(mount, payments)
    const port = await serveHono(t, app)
    const path = `${mount === '/v6' ? '/v6' : '/acme'}${SALE_PATH}`
    const { authorization: _, ...anonymous } = CLEAN.headers
    const refused = await send(port, { path, headers: anonymous, body: { merchant: { entity: 'anyone' } } })
    t.equal(refused.status, 401, `${mount}: no credentials`)
    t.equal(handled, 0, `${mount}: the handler not called`)
    const passed = await send(port, { ...CLEAN, path })
    t.equal(passed.status, 201, `${mount}: a clean payment`)
    t.equal(passed.text, 'sale')
  }
})

t.test('decided by the route Hono matched: a path its getPath maps to a payment route is screened', async (t) => {
  const gate = await testGate(t)
  // An application whose routing reads another path than the request's own: `/p/...` is `/payments/...`.
  const app = new Hono({
    getPath: (request) => new URL(request.url).pathname.replace(/^\/p\//, '/payments/'),
  })
  app.use('*', gate.hono())
  let handled = 0
  app.post(SALE_PATH, (c) => (handled++, c.text(String(c.get('paymentsGate')?.operation), 201)))
  app.post('/p/other', (c) => c.text('other'))
  const port = await serveHono(t, app)
  const { authorization: _, ...anonymous } = CLEAN.headers
  const refused = await send(port, { path: '/p/sales/migrateCardOnFile', headers: anonymous, body: { amount: -1 } })
  t.equal(refused.status, 401, 'the request path names no operation, the route it reached does')
  t.equal(handled, 0)
  t.equal((await send(port, { ...CLEAN, path: '/p/sales/migrateCardOnFile' })).text, 'sale')
  t.equal((await send(port, { path: '/other', headers: anonymous, body: 'x' })).status, 404, 'not a route')
})

t.test('a target the router refuses, a fragment, is answered 400 as on every surface', async (t) => {
  const gate = await testGate(t)
  let handled = 0
  const port = await serveHono(
    t,
    honoApp(gate, () => handled++),
  )
  const body = JSON.stringify({ amount: -1 })
  const answer = await raw(
    port,
    `POST ${SALE_PATH}#x HTTP/1.1\r\nHost: a\r\nConnection: close\r\nContent-Type: ${REQUEST_TYPE}\r\nContent-Length: ${body.length}\r\n\r\n${body}`,
    { keepOpen: true },
  )
  t.match(answer, /^HTTP\/1\.1 400 [^]*"errorName":"requestIsMalformed"/)
  t.notMatch(answer, /x-request-id/i, 'no id: no operation was screened')
  t.equal(handled, 0)
})

t.test('a body past the limit: 413, the connection closed, never buffered whole, the handler not called', async (t) => {
  const gate = await testGate(t)
  let handled = 0
  const port = await serveHono(
    t,
    honoApp(gate, () => handled++),
  )
  const agent = keepAliveAgent(t)
  const body = `{"pad":"${'z'.repeat(BODY_LIMIT * 64)}"}`
  const answer = await send(port, { headers: paymentHeaders(), body, chunked: true }, agent)
  t.equal(answer.status, 413)
  t.equal(answer.json.errorName, 'bodyIsTooLarge')
  t.equal(answer.headers.connection, 'close', 'the unread rest is not taken for a next request')
  t.equal(handled, 0)
  t.equal((await send(port, CLEAN, agent)).status, 201, 'the server still serves')
})

t.test('a client that resets the connection of a body refused as too large: the process goes on', async (t) => {
  // Credentials at once, so that the body is read, and refused, before the reset arrives.
  const gate = await testGate(t, {
    credentials: { authenticate: () => ({ username: USERNAME, entities: new Set(['default']) }) },
  })
  const port = await serveHono(t, honoApp(gate))
  const head = Object.entries(paymentHeaders({ 'transfer-encoding': 'chunked' }))
    .map(([name, value]) => `${name}: ${String(value)}\r\n`)
    .join('')
  const chunk = 'z'.repeat(BODY_LIMIT * 2)
  // Red before: @hono/node-server's body, read through Readable.fromWeb, emitted the reset as an error no one heard.
  for (let i = 0; i < 5; i++) {
    const socket = connect(port, '127.0.0.1')
    socket.on('error', () => undefined)
    await once(socket, 'connect')
    socket.write(
      `POST ${SALE_PATH} HTTP/1.1\r\nhost: x\r\n${head}\r\n${chunk.length.toString(16)}\r\n${chunk}\r\n`,
      () => setImmediate(() => socket.resetAndDestroy()),
    )
    await once(socket, 'close')
  }
  t.equal((await send(port, CLEAN)).status, 201, 'the server still serves')
})

t.test('a request with no body stream at all is refused as an empty body', async (t) => {
  const gate = await testGate(t)
  const app = honoApp(gate)
  // Hono's own fetch, in process: a Fetch API request may have a null body, which no node socket gives.
  const answer = await app.request(SALE_PATH, { method: 'POST', headers: paymentHeaders() as Record<string, string> })
  t.equal(answer.status, 400)
  t.match(await answer.json(), { errorName: 'bodyIsEmpty' })
})

t.test('a client that leaves mid-body: the application is not called', async (t) => {
  // The real scrypt cost, so that the client can leave while the first password check still runs.
  const gate = await testGate(t, { credentials: await writeCredentials(t.testdir(), SCRYPT_DEFAULTS) })
  let calls = 0
  const app = new Hono()
  app.use(gate.hono())
  app.all('*', (c) => (calls++, c.text('ok')))
  const { server, port } = await honoServer(t, app)
  await abortMidBody(server, port, SALE_PATH, CLEAN.headers)
  t.equal(calls, 0)
  t.equal((await send(port, { method: 'GET', path: '/x', headers: {} })).status, 200, 'the server still serves')
  t.equal(calls, 1)
})

t.test('an authenticator that throws: the standard 500, logged', async (t) => {
  const logger = memoryLogger()
  const gate = await testGate(t, {
    credentials: { authenticate: () => Promise.reject(new Error('credential store down')) },
    logger: logger as unknown as GateLogger,
  })
  const port = await serveHono(t, honoApp(gate))
  const answer = await send(port, CLEAN)
  t.equal(answer.status, 500)
  t.equal(answer.text, INTERNAL)
  t.match(logger.lines, [{ object: { err: { message: 'credential store down' } } }])
})

t.test(
  'report mode: the handler gets the request as it came, the report, and the context when it passed',
  async (t) => {
    const gate = await testGate(t, { mode: 'report' })
    const app = new Hono()
    app.use('/payments/*', gate.hono())
    app.all(SALE_PATH, async (c) => {
      const context: GateContext | undefined = c.get('paymentsGate')
      const report = c.get('paymentsGateReport')
      return c.json({
        context: context && { operation: context.operation, entity: context.entity },
        valid: c.req.valid('json' as never) ?? null,
        text: await c.req.text(),
        wouldRefuse: report?.wouldRefuse?.body.errorName ?? null,
        wouldRewrite: report?.wouldRewrite,
      })
    })
    const port = await serveHono(t, app)
    const rewritable = saleBody({ transactionReference: 'hono-1' })
    rewritable.instruction.narrative.line1 = 'Café & Co'
    const clean = await send(port, { headers: paymentHeaders(), body: rewritable })
    t.match(clean.json, {
      context: { operation: 'sale', entity: 'default' },
      wouldRefuse: null,
      wouldRewrite: ['line1Characters', 'mccFilledIn'],
    })
    t.same(clean.json.valid, rewritable, 'not rewritten')
    t.equal(clean.json.text, JSON.stringify(rewritable), 'the bytes as they came, for the handler to read')
    const luhn = saleBody({ transactionReference: 'hono-2' })
    luhn.instruction.paymentInstrument.cardNumber = `${TEST_PAN.slice(0, -1)}2`
    t.match((await send(port, { headers: paymentHeaders(), body: luhn })).json, {
      context: undefined,
      wouldRefuse: 'bodyDoesNotMatchSchema',
    })
    // A body whose entity cannot be read gets enforce's answer (docs/rollout.md), as on every surface.
    const notJson = await send(port, { headers: paymentHeaders(), body: '{"merchant"' })
    t.match(notJson, { status: 400, json: { errorName: 'bodyIsNotJson' } })
    const large = `{"pad":"${'z'.repeat(70_000)}"}`
    const past = await send(port, { headers: paymentHeaders(), body: large, chunked: true })
    t.match(past, { status: 413, json: { errorName: 'bodyIsTooLarge' } })
    const get = await send(port, { method: 'GET', headers: { authorization: AUTH } })
    t.match(get, { status: 405, json: { errorName: 'methodIsNotAllowed' } }, 'a method enforce would refuse')
    const denied = await send(port, { headers: paymentHeaders({ authorization: 'Basic eDp5' }), body: rewritable })
    t.equal(denied.status, 401, 'BasicAuth still refuses')
    t.equal((await send(port, { method: 'GET', path: OTHER_PATH, headers: {} })).status, 404, 'other paths: Hono')
  },
)
