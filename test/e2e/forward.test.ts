import { request } from 'node:http'
import t from 'tap'
import { SALE_PATH, saleBody, USERNAME } from '../helpers/fixtures.js'
import { paymentHeaders, raw, send } from '../helpers/http.js'
import { loggedRequests, scanLogsForCards } from '../helpers/logs.js'
import { startGateway } from '../helpers/surfaces.js'

const { url, port, backend } = await startGateway(t)

t.test('a clean sale is forwarded once, rewritten, with a correct Content-Length', async (t) => {
  backend.received.length = 0
  const headers = paymentHeaders({
    connection: 'keep-alive, x-hop',
    'x-hop': 'drop me',
    te: 'trailers',
    'proxy-authorization': 'Basic eA==',
    'x-kept': 'yes',
  })
  const sale = saleBody()
  sale.instruction.narrative = { line1: 'Shop 1 – order 1234567890', line2: 'thanks' }
  const reply = await send(url, { path: `${SALE_PATH}?trace=1`, headers, body: `  ${JSON.stringify(sale)}  ` })
  t.equal(reply.status, 201)
  t.same(reply.headers['set-cookie'], ['a=1', 'b=2'], 'repeated headers come back whole')
  t.same(reply.json._links, { self: { href: '/payments/1' } })
  t.equal(backend.received.length, 1, 'forwarded exactly once')
  const [got] = backend.received
  t.equal(got?.url, `${SALE_PATH}?trace=1`)
  const document = JSON.parse(got?.body.toString('utf8') as string)
  t.equal(
    document.instruction.narrative.line1,
    'Shop 1   order 123456789',
    'line1: unsupported characters replaced, cut to 24',
  )
  t.equal(document.merchant.mcc, '5734', 'mcc filled in from the policy')
  t.equal(got?.body.toString('utf8'), JSON.stringify(document), 're-serialized, no surrounding white space')
  t.equal(got?.headers['content-length'], String(got?.body.length))
  t.equal(got?.headers['transfer-encoding'], undefined)
  t.equal(got?.headers.expect, undefined)
  t.equal(got?.headers['x-hop'], undefined, 'a header named in Connection is dropped')
  t.equal(got?.headers.te, undefined)
  t.equal(got?.headers['proxy-authorization'], undefined)
  t.equal(got?.headers['x-kept'], 'yes')
  t.equal(got?.headers.authorization, headers.authorization, 'end-to-end headers are forwarded')
  t.equal(got?.headers['x-forwarded-for'], '127.0.0.1')
  t.equal(got?.headers['x-forwarded-proto'], 'http')
  t.equal(got?.headers['x-forwarded-host'], url.slice('http://'.length))
  t.equal(got?.headers['x-forwarded-port'], new URL(url).port)
  const line = loggedRequests().find((entry) => entry.path === `${SALE_PATH}?trace=1`)
  t.match(line, { method: 'POST', operation: 'sale', entity: 'default', user: USERNAME, status: 201, complete: true })
  t.type(line?.durationMs, 'number')
})

t.test('other paths are forwarded untouched, bodies streamed as they came', async (t) => {
  backend.received.length = 0
  const reply = await send(url, { method: 'GET', path: '/status?x=1' })
  t.equal(reply.status, 201)
  const chunked = await new Promise<number>((resolve, reject) => {
    const req = request(
      `${url}/files/upload`,
      { method: 'PUT', agent: false, headers: { 'content-type': 'text/plain' } },
      (res) => {
        res.resume()
        res.on('end', () => resolve(res.statusCode as number))
      },
    )
    req.on('error', reject)
    req.write('not json ')
    req.end('at all')
  })
  t.equal(chunked, 201)
  t.equal(backend.received.length, 2)
  t.match(backend.received[0], { method: 'GET', url: '/status?x=1' })
  t.match(backend.received[1], { method: 'PUT', url: '/files/upload', headers: { 'transfer-encoding': 'chunked' } })
  t.equal(backend.received[1]?.body.toString(), 'not json at all')
  t.match(
    loggedRequests().find((entry) => entry.path === '/status?x=1'),
    { operation: 'other', status: 201 },
  )
})

t.test("X-Forwarded-* are added after an earlier proxy's, the same on both engines", async (t) => {
  backend.received.length = 0
  const extra = {
    host: 'shop.example:8443',
    'x-forwarded-for': '10.0.0.1',
    'x-forwarded-proto': 'https',
    'x-forwarded-host': 'pay.example',
  }
  t.equal((await send(url, { headers: paymentHeaders(extra), body: saleBody() })).status, 201)
  t.equal((await send(url, { method: 'GET', path: '/status', headers: extra })).status, 201)
  t.equal((await send(url, { method: 'GET', path: '/status', headers: { host: 'shop.example' } })).status, 201)
  const expected = {
    host: 'shop.example:8443',
    'x-forwarded-for': '10.0.0.1,127.0.0.1',
    'x-forwarded-port': '8443',
    'x-forwarded-proto': 'https,http',
    'x-forwarded-host': 'pay.example',
  }
  t.match(backend.received[0]?.headers, expected, 'a payment (undici)')
  t.match(backend.received[1]?.headers, expected, 'another path (http-proxy-3)')
  t.match(
    backend.received[2]?.headers,
    { 'x-forwarded-port': '80', 'x-forwarded-host': 'shop.example' },
    "HTTP's default port when Host names none",
  )
  t.match(await raw(port, 'GET /status HTTP/1.0\r\n\r\n', { keepOpen: true }), /^HTTP\/1.1 201 /)
  t.match(
    backend.received[3]?.headers,
    { 'x-forwarded-port': '80', 'x-forwarded-host': '' },
    'an HTTP/1.0 request without Host',
  )
})

t.test("the target's path and query go in front of the request's, the same on both engines", async (t) => {
  const prefixed = await startGateway(t, { target: `${backend.url}/base/?k=1` })
  backend.received.length = 0
  t.equal(
    (await send(prefixed.url, { path: `${SALE_PATH}?trace=1`, headers: paymentHeaders(), body: saleBody() })).status,
    201,
  )
  t.equal((await send(prefixed.url, { method: 'GET', path: '/status?trace=1' })).status, 201)
  t.same(
    backend.received.map((got) => got.url),
    [`/base${SALE_PATH}?k=1&trace=1`, '/base/status?k=1&trace=1'],
  )
})

t.test('the backend answer streams back with its status and headers, minus hop-by-hop ones', async (t) => {
  backend.answer = (_req, res) => {
    res.writeHead(202, 'Accepted Later', {
      connection: 'keep-alive, x-private',
      'x-private': 'no',
      'x-public': 'yes',
      'content-type': 'text/plain',
    })
    res.write('part one, ')
    setTimeout(() => res.end('part two'), 10)
  }
  const reply = await send(url, { method: 'GET', path: '/anything' })
  t.equal(reply.status, 202)
  t.equal(reply.text, 'part one, part two')
  t.equal(reply.headers['x-public'], 'yes')
  t.equal(reply.headers['x-private'], undefined)
  t.not(reply.headers['keep-alive'], 'timeout=5', "the backend's keep-alive hint stays between gateway and backend")
})

t.test('connections to the backend are kept alive and reused', async (t) => {
  const sockets = new Set<unknown>()
  backend.answer = (req, res) => {
    sockets.add(req.socket)
    res.end('ok')
  }
  for (let i = 0; i < 5; i++) await send(url, { method: 'GET', path: '/again' })
  t.equal(sockets.size, 1)
})

scanLogsForCards(t)
