import { subscribe, unsubscribe } from 'node:diagnostics_channel'
import type { Socket } from 'node:net'
import t from 'tap'
import { saleBody } from '../helpers/fixtures.js'
import { keepAliveSender, paymentHeaders, send, until } from '../helpers/http.js'
import { createdBytes, type RawBackend, startRawBackend } from '../helpers/servers.js'
import { startGateway } from '../helpers/surfaces.js'

/**
 * A payment reaches the backend at most once, whatever the backend's
 * connection does: closed while idle before it is reused, cut while the
 * payment is written or after it was, cut after the answer's headers, or
 * closed by the answer itself. The backend here is a raw `net` server, so it
 * can misbehave at a chosen point; it counts every request head it sees, so a
 * payment sent again, on the same connection or a new one, would show.
 * The client gets 503 only when the backend certainly did not get the
 * payment, 500 when it may have, and a cut connection once an answer started.
 */

/** A gateway in front of `backend`; payments sent on a new connection each, or on one kept-alive connection. */
async function gatewayFor(t: Parameters<typeof startGateway>[0], backend: RawBackend, keepAlive = false) {
  const { url } = await startGateway(t, { target: backend.url, timeout: 2000 })
  const post = keepAlive ? keepAliveSender(t, url, 1) : (options: Parameters<typeof send>[1]) => send(url, options)
  return () => post({ headers: paymentHeaders(), body: saleBody() })
}

/** The connections undici opened to a backend, and those it has let go. */
interface BackendConnections {
  opened: number
  closed: number
}

/**
 * Counts the gateway's connections to its backend as undici announces them (`undici:client:connected`,
 * its documented diagnostics channel; the gateway runs in this process). A connection counts as closed
 * once its `close` event has run undici's own listener, added before this one: the pool has let it go.
 */
function backendConnections(t: Parameters<typeof startGateway>[0]): BackendConnections {
  const connections = { opened: 0, closed: 0 }
  const onClose = () => connections.closed++
  const onConnected = (message: unknown) => {
    connections.opened++
    ;(message as { socket: Socket }).socket.once('close', onClose)
  }
  subscribe('undici:client:connected', onConnected)
  t.teardown(() => unsubscribe('undici:client:connected', onConnected))
  return connections
}

t.test(
  '(a) a kept-alive connection the backend closed while idle: the next payment goes on a new one, once',
  async (t) => {
    const connections = backendConnections(t)
    const backend = await startRawBackend(t)
    const pay = await gatewayFor(t, backend)
    t.equal((await pay()).status, 201)
    for (const socket of backend.sockets) socket.end()
    t.ok(
      await until(() => backend.open === 0 && connections.closed === 1),
      'the idle connection is closed on both sides, and the gateway let it go',
    )
    t.equal((await pay()).status, 201)
    t.equal(backend.heads, 2, 'two payments, two request heads')
    t.same(
      backend.requests.map((request) => request.connection),
      [0, 1],
      'the second on a new connection',
    )
  },
)

t.test(
  '(a) a kept-alive connection the backend reset while idle, once the gateway saw the reset: the next payment goes on a new one, once',
  async (t) => {
    const connections = backendConnections(t)
    const backend = await startRawBackend(t)
    const pay = await gatewayFor(t, backend)
    t.equal((await pay()).status, 201)
    t.same(connections, { opened: 1, closed: 0 }, 'one connection to the backend, kept alive')
    for (const socket of backend.sockets) socket.resetAndDestroy()
    t.ok(await until(() => connections.closed === 1), 'the reset reached the gateway, which let the connection go')
    t.equal((await pay()).status, 201)
    t.equal(backend.heads, 2, 'two payments, two request heads')
    t.same(
      backend.requests.map((request) => request.connection),
      [0, 1],
      'the second on a new connection',
    )
  },
)

t.test(
  '(a) a kept-alive connection the backend reset while idle, the next payment sent at once: at most once',
  async (t) => {
    const backend = await startRawBackend(t)
    const pay = await gatewayFor(t, backend)
    t.equal((await pay()).status, 201)
    for (const socket of backend.sockets) socket.resetAndDestroy()
    // Sent without waiting: the reset may reach the gateway before or after it, and the contract holds either way.
    const second = await pay()
    t.ok([201, 500, 503].includes(second.status), `a contract answer: ${second.status}`)
    t.ok(backend.heads <= 2, 'never sent twice')
    if (second.status === 201)
      t.same(
        backend.requests.map((request) => request.connection),
        [0, 1],
        'the 201 came on a new connection',
      )
    if (second.status === 503) t.equal(backend.heads, 1, 'a 503 only when the backend did not get it')
  },
)

t.test(
  '(b) the backend resets the connection once it has the payment: 500, received once, not sent again',
  async (t) => {
    const backend = await startRawBackend(t, (socket) => socket.resetAndDestroy())
    const pay = await gatewayFor(t, backend)
    const reply = await pay()
    t.equal(reply.status, 500)
    t.equal(reply.json.errorName, 'internalErrorOccurred')
    t.equal(backend.requests.length, 1)
    t.equal(backend.connections, 1, 'no second connection: no retry')
  },
)

t.test(
  '(b) the backend closes the connection once it has the payment, without an answer: 500, received once',
  async (t) => {
    const backend = await startRawBackend(t, (socket) => socket.end())
    const pay = await gatewayFor(t, backend)
    const reply = await pay()
    t.equal(reply.status, 500)
    t.equal(reply.json.errorName, 'internalErrorOccurred')
    t.equal(backend.requests.length, 1)
    t.equal(backend.connections, 1)
  },
)

t.test('(b) the backend resets the connection while the payment is being written: 500, at most once', async (t) => {
  const backend = await startRawBackend(t)
  backend.onHead = (socket) => socket.resetAndDestroy()
  const pay = await gatewayFor(t, backend)
  const reply = await pay()
  t.equal(reply.status, 500, 'written, perhaps received: the client must not assume either')
  t.equal(backend.heads, 1)
  t.equal(backend.requests.length, 0)
  t.equal(backend.connections, 1)
})

t.test('(b) on a reused connection, a payment the backend drops unanswered is not sent again', async (t) => {
  // The case where HTTP clients retry an idempotent request: the connection looked alive and was not.
  const backend = await startRawBackend(t, (socket, request) =>
    request.index === 0 ? socket.write(createdBytes()) : socket.end(),
  )
  const pay = await gatewayFor(t, backend)
  t.equal((await pay()).status, 201)
  const reply = await pay()
  t.equal(reply.status, 500)
  t.equal(backend.heads, 2)
  t.same(
    backend.requests.map((request) => [request.connection, request.index]),
    [
      [0, 0],
      [0, 1],
    ],
    'the dropped payment was never sent on a new connection',
  )
  t.equal(backend.connections, 1)
})

t.test('(c) the backend resets after its answer headers: the client connection is cut, received once', async (t) => {
  const backend = await startRawBackend(t, (socket) =>
    socket.write('HTTP/1.1 201 Created\r\nContent-Type: application/json\r\nContent-Length: 100\r\n\r\n{"outcome":'),
  )
  // Reset once undici has read that head (`undici:request:headers`, published as the relay gets it), never before.
  const onHeaders = (message: unknown) => {
    if ((message as { request: { origin: string } }).request.origin !== backend.url) return
    for (const socket of backend.sockets) socket.resetAndDestroy()
  }
  subscribe('undici:request:headers', onHeaders)
  t.teardown(() => unsubscribe('undici:request:headers', onHeaders))
  const pay = await gatewayFor(t, backend)
  await t.rejects(pay(), { code: 'ECONNRESET' }, 'a truncated answer, never a made-up one')
  t.equal(backend.requests.length, 1)
  t.equal(backend.connections, 1)
})

t.test(
  'an answer with Connection: close: relayed whole, the connection closed by the gateway and never reused',
  async (t) => {
    // The backend says it will close but leaves that to the gateway, which must not write the next payment on it.
    const backend = await startRawBackend(t, (socket) => socket.write(createdBytes('Connection: close\r\n')))
    const pay = await gatewayFor(t, backend, true)
    const first = await pay()
    t.equal(first.status, 201)
    t.equal(first.headers.connection, 'keep-alive', "the backend's Connection: close stays between gateway and backend")
    t.equal((await pay()).status, 201)
    t.same(
      backend.requests.map((request) => request.connection),
      [0, 1],
    )
    t.ok(await until(() => backend.closedByGateway === 2), 'the gateway closed both connections itself')
  },
)

t.test('Keep-Alive: timeout=1 leaves no safe idle time: each payment on a connection of its own', async (t) => {
  const backend = await startRawBackend(t, (socket) => socket.write(createdBytes('Keep-Alive: timeout=1\r\n')))
  const pay = await gatewayFor(t, backend)
  t.equal((await pay()).status, 201)
  t.equal((await pay()).status, 201)
  t.same(
    backend.requests.map((request) => request.connection),
    [0, 1],
  )
  t.ok(await until(() => backend.closedByGateway === 2), 'the gateway closed each one after its answer')
})

t.test(
  "Keep-Alive: timeout=2: the connection is reused, and let go by the gateway before the backend's limit",
  async (t) => {
    const backend = await startRawBackend(t, (socket) => socket.write(createdBytes('Keep-Alive: timeout=2\r\n')))
    const pay = await gatewayFor(t, backend)
    t.equal((await pay()).status, 201)
    t.equal((await pay()).status, 201)
    t.same(
      backend.requests.map((request) => request.connection),
      [0, 0],
      'one connection for both',
    )
    // This backend never closes an idle connection itself: a close can only come from the gateway.
    t.ok(await until(() => backend.closedByGateway === 1), 'the gateway closed the idle connection')
  },
)
