import { createServer, type IncomingMessage } from 'node:http'
import t from 'tap'
import { GatewayResponse, track } from '../../lib/proxy/exchange.js'
import { send } from '../helpers/http.js'
import { listenOnLoopback } from '../helpers/servers.js'

t.test('every head a tracked response writes carries its request id, however writeHead is called', async (t) => {
  const heads: Record<string, (res: GatewayResponse) => void> = {
    '/implicit': (res) => {
      res.statusCode = 204
      res.end()
    },
    '/status-text': (res) => res.writeHead(202, 'Taken').end(),
    '/object': (res) => res.writeHead(200, { 'content-type': 'text/plain' }).end('x'),
    '/list': (res) => res.writeHead(200, 'OK', ['Content-Type', 'text/plain']).end('x'),
  }
  const server = createServer<typeof IncomingMessage, typeof GatewayResponse>(
    { ServerResponse: GatewayResponse },
    (req, res) => {
      track(res, { draining: false }, 'other', `id${req.url}`, undefined)
      heads[req.url as string]?.(res)
    },
  )
  const port = await listenOnLoopback(server)
  t.teardown(
    () =>
      new Promise<void>((resolve) => {
        server.closeAllConnections()
        server.close(() => resolve())
      }),
  )
  for (const path of Object.keys(heads)) {
    const reply = await send(port, { method: 'GET', path })
    t.equal(reply.headers['x-request-id'], `id${path}`, path)
  }
  const list = await send(port, { method: 'GET', path: '/list' })
  t.equal(list.headers['content-type'], 'text/plain', 'the headers given are kept')
})

t.test(
  "a payment the rate limit admitted: its RateLimit fields on every head, the caller's headers untouched",
  async (t) => {
    const own = { 'content-type': 'text/plain', 'x-request-id': 'id-own' }
    const list = ['Content-Type', 'text/plain']
    const heads: Record<string, (res: GatewayResponse) => void> = {
      '/implicit': (res) => res.end(),
      '/object': (res) => res.writeHead(200, { 'content-type': 'text/plain' }).end('x'),
      '/own': (res) => res.writeHead(200, own).end('x'),
      '/list': (res) => res.writeHead(200, 'OK', list).end('x'),
    }
    const server = createServer<typeof IncomingMessage, typeof GatewayResponse>(
      { ServerResponse: GatewayResponse },
      (req, res) => {
        const exchange = track(res, { draining: false }, 'sale', req.url === '/own' ? 'id-own' : 'id', undefined)
        exchange.rateLimitFields = ['RateLimit-Policy', '"payments";q=1;w=1', 'RateLimit', '"payments";r=0;t=1']
        heads[req.url as string]?.(res)
      },
    )
    const port = await listenOnLoopback(server)
    t.teardown(
      () =>
        new Promise<void>((resolve) => {
          server.closeAllConnections()
          server.close(() => resolve())
        }),
    )
    for (const path of Object.keys(heads)) {
      const reply = await send(port, { method: 'GET', path })
      t.equal(reply.headers['ratelimit-policy'], '"payments";q=1;w=1', path)
      t.equal(reply.headers.ratelimit, '"payments";r=0;t=1', path)
    }
    t.same(own, { 'content-type': 'text/plain', 'x-request-id': 'id-own' }, 'an object given is not changed')
    t.same(list, ['Content-Type', 'text/plain'], 'nor a list: a relayed list is what retry protection records')
  },
)
