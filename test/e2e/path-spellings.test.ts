import t from 'tap'
import { createGateway } from '../../lib/proxy/server.js'
import { AUTH, REQUEST_TYPE, RESPONSE_TYPE, saleBody } from '../helpers/fixtures.js'
import { paymentHeaders, raw, send } from '../helpers/http.js'
import { captureLogger } from '../helpers/logs.js'
import { startBackend } from '../helpers/servers.js'
import { startGateway, testGate } from '../helpers/surfaces.js'

/**
 * Another spelling of a payment path is no way around the checks
 * (docs/checks.md, routes): refused as the operation would be, and a clean
 * payment on it is forwarded with its path as sent. An absolute-form target
 * is routed on its path and sent in origin form; a fragment is refused; both
 * engines send the path the router read.
 */
const { url, port, backend } = await startGateway(t)
const spellings = [
  '/payments/sales/migrateCardOnFile/',
  '/Payments/Sales/MigrateCardOnFile',
  '//payments/sales/migrate%43ardOnFile;x=1',
]

t.test('a Luhn-failing card on another spelling is refused, nothing forwarded', async (t) => {
  const body = saleBody()
  body.instruction.paymentInstrument.cardNumber = '4444333322221112'
  for (const path of spellings) {
    const reply = await send(url, { path, headers: paymentHeaders(), body })
    t.equal(reply.status, 400, path)
    t.equal(reply.json.validationErrors?.[0]?.errorName, 'panFailedLuhnCheck', path)
  }
  t.equal(backend.received.length, 0)
})

t.test('without credentials: 401, as on the path itself', async (t) => {
  const { authorization: _, ...anonymous } = paymentHeaders()
  const reply = await send(url, { path: spellings[0], headers: anonymous, body: saleBody() })
  t.equal(reply.status, 401)
})

t.test('a clean payment on another spelling is forwarded, its path as sent', async (t) => {
  const before = backend.received.length
  const reply = await send(url, { path: spellings[0], headers: paymentHeaders(), body: saleBody() })
  t.equal(reply.status, 201)
  t.equal(backend.received.length, before + 1)
  t.equal(backend.received.at(-1)?.url, spellings[0])
})

/** Writes one request on a raw socket, as a client using the gateway as its HTTP proxy does, and reads the status. */
async function rawStatus(target: string, headers: string, body = '', method = 'POST'): Promise<number> {
  const length = body === '' ? '' : `Content-Length: ${Buffer.byteLength(body)}\r\n`
  const answer = await raw(
    port,
    `${method} ${target} HTTP/1.1\r\nHost: gateway\r\nConnection: close\r\n${headers}${length}\r\n${body}`,
    { keepOpen: true },
  )
  return Number(answer.split(' ')[1])
}
const checked = `Authorization: ${AUTH}\r\nContent-Type: ${REQUEST_TYPE}\r\nAccept: ${RESPONSE_TYPE}\r\n`

t.test('an absolute-form target (RFC 9112 3.2.2) is routed on its path: unauthenticated, 401', async (t) => {
  const before = backend.received.length
  const body = JSON.stringify({ made: 'up' })
  t.equal(await rawStatus('http://any-host/payments/sales/migrateCardOnFile', '', body), 401)
  t.equal(await rawStatus('HTTP://any-host/Payments/Sales/migrateCardOnFile/', '', body), 401)
  t.equal(backend.received.length, before, 'nothing forwarded')
})

t.test('an absolute-form payment is checked and sent in origin form, its Host the target host', async (t) => {
  const before = backend.received.length
  const status = await rawStatus(
    'http://pay.example/payments/sales/migrateCardOnFile?x=1',
    checked,
    JSON.stringify(saleBody()),
  )
  t.equal(status, 201)
  t.equal(backend.received.length, before + 1)
  t.equal(backend.received.at(-1)?.url, '/payments/sales/migrateCardOnFile?x=1')
  t.equal(backend.received.at(-1)?.headers.host, 'pay.example')
})

t.test('a target with a fragment is refused 400 on any path, nothing forwarded', async (t) => {
  const before = backend.received.length
  for (const target of [
    '/payments/sales/migrateCardOnFile#x',
    '/elsewhere#x',
    'http://h/payments/sales/migrateCardOnFile#',
  ]) {
    t.equal(await rawStatus(target, '', '{}'), 400, target)
  }
  t.equal(backend.received.length, before)
})

t.test('a path passed through reaches the backend as sent: the engine does not read it again', async (t) => {
  const before = backend.received.length
  const path = '/x/..%2F/a//b\\c;d=1/./e?f=1'
  t.equal(await rawStatus(path, '', '', 'GET'), 201)
  t.equal(backend.received.length, before + 1)
  t.equal(backend.received.at(-1)?.url, path)
  const absolute = await rawStatus('http://h/other/../x', '', '', 'GET')
  t.equal(absolute, 201)
  t.equal(backend.received.at(-1)?.url, '/other/../x')
})

t.test('spellings that fold to an operation path beyond ASCII are checked', async (t) => {
  const before = backend.received.length
  for (const path of [
    '/payments/%C5%BFales/migrateCardOnFile',
    '/payments/sales/m%C4%B1grateCardOnFile',
    '/x/..%2Fpayments/sales/migrateCardOnFile',
  ]) {
    const reply = await send(url, { path, headers: { 'content-type': REQUEST_TYPE }, body: { made: 'up' } })
    t.equal(reply.status, 401, path)
  }
  t.equal(backend.received.length, before)
})

t.test("behind a target with its own path and query, both engines send the router's path after them", async (t) => {
  const own = await startBackend()
  t.teardown(() => own.close())
  const gate = await testGate(t)
  const gateway = createGateway({
    checks: gate.checks,
    target: `${own.url}/base/?k=1`,
    logger: captureLogger(),
    idempotency: 'off',
  })
  const { port: at } = await gateway.listen(0, '127.0.0.1')
  t.teardown(() => gateway.drain(0))
  const status = (bytes: string) => raw(at, bytes, { keepOpen: true }).then((answer) => Number(answer.split(' ')[1]))
  const body = JSON.stringify(saleBody())
  const payment = `POST http://h/payments/sales/migrateCardOnFile/?x=1 HTTP/1.1\r\nHost: a\r\nConnection: close\r\n${checked}Content-Length: ${Buffer.byteLength(body)}\r\n\r\n${body}`
  t.equal(await status(payment), 201)
  t.equal(own.received.at(-1)?.url, '/base/payments/sales/migrateCardOnFile/?k=1&x=1', 'the payment engine')
  t.equal(await status('GET http://h/a/..%2F/b\\c;d HTTP/1.1\r\nHost: a\r\nConnection: close\r\n\r\n'), 201)
  t.equal(own.received.at(-1)?.url, '/base/a/..%2F/b\\c;d?k=1', 'the pass-through engine')
})
