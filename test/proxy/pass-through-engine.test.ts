import { createServer, type IncomingMessage } from 'node:http'
import type { AddressInfo } from 'node:net'
import t, { type Test } from 'tap'
import { GatewayResponse, track, type Exchange } from '../../lib/proxy/exchange.js'
import type { Forwarder } from '../../lib/proxy/forward.js'
import * as forward from '../../lib/proxy/forward.js'
import { send } from '../helpers/http.js'
import { startBackend } from '../helpers/servers.js'

/**
 * http-proxy-3, the engine of the paths that are not payments, is loaded by the first request on one
 * (lib/proxy/forward.ts): a gateway whose forwarder passes every request through, `/gone` given up by its
 * client at once, `/pay` forwarded as a payment.
 */
async function startHost(t: Test, createForwarder: typeof forward.createForwarder, target: string) {
  const forwarder: Forwarder = createForwarder({ timeout: 1000, target: new URL(target) })
  const exchanges: Exchange[] = []
  const server = createServer<typeof IncomingMessage, typeof GatewayResponse>(
    { ServerResponse: GatewayResponse },
    (req, res) => {
      exchanges.push(track(res, { draining: false }, req.url === '/pay' ? 'sale' : 'other', 'id', undefined))
      if (req.url !== '/pay') {
        forwarder.forward(req, res)
        if (req.url === '/gone') res.destroy()
        return
      }
      const chunks: Buffer[] = []
      req.on('data', (chunk: Buffer) => chunks.push(chunk))
      req.on('end', () => forwarder.forward(req, res, Buffer.concat(chunks), () => undefined))
    },
  )
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve))
  t.teardown(
    () =>
      new Promise<void>((resolve) => {
        server.closeAllConnections()
        server.close(() => resolve())
        forwarder.close()
      }),
  )
  return { url: `http://127.0.0.1:${(server.address() as AddressInfo).port}`, exchanges }
}

t.test('requests that come while http-proxy-3 loads wait for it; one whose client left is not sent', async (t) => {
  const backend = await startBackend((_req, res) => res.writeHead(200).end('passed'))
  t.teardown(() => backend.close())
  const host = await startHost(t, forward.createForwarder, backend.url)
  const gone = send(host.url, { path: '/gone', method: 'GET' }).catch((error: unknown) => error)
  const replies = await Promise.all(['/a', '/b'].map((path) => send(host.url, { path, method: 'GET' })))
  t.same(
    replies.map((reply) => [reply.status, reply.text]),
    [
      [200, 'passed'],
      [200, 'passed'],
    ],
  )
  t.type(await gone, Error, 'the client that left got nothing')
  // Every request waits on the one load, in order: had `/gone` been sent, it would be there first.
  t.same(backend.received.map((r) => r.url).sort(), ['/a', '/b'], 'the request whose client had left was not sent')
  t.equal((await send(host.url, { path: '/c', method: 'GET' })).text, 'passed', 'and once loaded, at once')
})

t.test('http-proxy-3 failing to load: nothing is sent, 503 to try again; payments go on', async (t) => {
  const backend = await startBackend((_req, res) => res.writeHead(201).end('{}'))
  t.teardown(() => backend.close())
  const broken = await t.mockImport<typeof forward>('../../lib/proxy/forward.js', {
    'http-proxy-3': {
      createProxyServer: () => {
        throw new Error('http-proxy-3 is gone')
      },
    },
  })
  const host = await startHost(t, broken.createForwarder, backend.url)
  const reply = await send(host.url, { path: '/status', method: 'GET' })
  t.equal(reply.status, 503)
  t.match(JSON.parse(reply.text), { errorName: 'serviceUnavailable' })
  t.match(host.exchanges[0], { backendError: 'refused', errorName: 'serviceUnavailable' })
  t.equal((await send(host.url, { path: '/pay', body: '{}' })).status, 201, 'a payment is forwarded by undici')
  t.same(
    backend.received.map((r) => r.url),
    ['/pay'],
  )
})
