import { request } from 'node:http'
import t from 'tap'
import { paymentHeaders, send } from '../helpers/client.js'
import { loggedRequests, scanLogsForCards, startGateway, USER } from '../helpers/gateway.js'
import { SALE_PATH, saleBody } from '../helpers/payments.js'

const { url, backend } = await startGateway(t)

t.test('a clean sale is forwarded once, rewritten, with a correct Content-Length', async (t) => {
  backend.received.length = 0
  const headers = paymentHeaders({ connection: 'keep-alive, x-hop', 'x-hop': 'drop me', te: 'trailers', 'proxy-authorization': 'Basic eA==', 'x-kept': 'yes' })
  const reply = await send(url, { path: `${SALE_PATH}?trace=1`, headers, body: `  ${JSON.stringify(saleBody())}  ` })
  t.equal(reply.status, 201)
  t.same(reply.headers['set-cookie'], ['a=1', 'b=2'], 'repeated headers come back whole')
  t.same(reply.json._links, { self: { href: '/payments/1' } })
  t.equal(backend.received.length, 1, 'forwarded exactly once')
  const [got] = backend.received
  t.equal(got?.url, `${SALE_PATH}?trace=1`)
  const document = JSON.parse(got?.body.toString('utf8') as string)
  t.equal(document.instruction.narrative.line1, 'Shop 1   order 123456789', 'line1: unsupported characters replaced, cut to 24')
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
  const line = loggedRequests().find((entry) => entry.path === `${SALE_PATH}?trace=1`)
  t.match(line, { method: 'POST', operation: 'sale', entity: 'default', user: USER, status: 201, complete: true })
  t.type(line?.durationMs, 'number')
})

t.test('other paths are forwarded untouched, bodies streamed as they came', async (t) => {
  backend.received.length = 0
  const reply = await send(url, { method: 'GET', path: '/status?x=1' })
  t.equal(reply.status, 201)
  const chunked = await new Promise<number>((resolve, reject) => {
    const req = request(`${url}/files/upload`, { method: 'PUT', agent: false, headers: { 'content-type': 'text/plain' } }, (res) => {
      res.resume()
      res.on('end', () => resolve(res.statusCode as number))
    })
    req.on('error', reject)
    req.write('not json ')
    req.end('at all')
  })
  t.equal(chunked, 201)
  t.equal(backend.received.length, 2)
  t.match(backend.received[0], { method: 'GET', url: '/status?x=1' })
  t.match(backend.received[1], { method: 'PUT', url: '/files/upload', headers: { 'transfer-encoding': 'chunked' } })
  t.equal(backend.received[1]?.body.toString(), 'not json at all')
  t.match(loggedRequests().find((entry) => entry.path === '/status?x=1'), { operation: 'other', status: 201 })
})

t.test('the backend answer streams back with its status and headers, minus hop-by-hop ones', async (t) => {
  backend.answer = (_req, res) => {
    res.writeHead(202, 'Accepted Later', { connection: 'keep-alive, x-private', 'x-private': 'no', 'x-public': 'yes', 'content-type': 'text/plain' })
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
