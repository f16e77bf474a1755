import { createServer, request, type IncomingMessage, type ServerResponse } from 'node:http'
import type { AddressInfo } from 'node:net'
import t, { type Test } from 'tap'
import { requestIdOf } from '../../lib/http/request-id.js'
import { backendPaths } from '../../lib/proxy/backend-path.js'
import { GatewayResponse, track, type Exchange } from '../../lib/proxy/exchange.js'
import { faultKind } from '../../lib/proxy/faults.js'
import { createForwarder, type BackendOutcome, type Forwarder, type ForwarderOptions } from '../../lib/proxy/forward.js'
import { send, until } from '../helpers/http.js'
import { type Answer, createdBytes, startBackend, startRawBackend } from '../helpers/servers.js'

/**
 * The payment engine on its own (undici): every request's body forwarded as a
 * payment by the real forwarder, and how each call ended as `settled` hears it.
 */
interface Host {
  readonly url: string
  readonly forwarder: Forwarder
  readonly outcomes: BackendOutcome[]
  readonly exchanges: Exchange[]
}

async function startHost(t: Test, target: string, options: Partial<ForwarderOptions> = {}): Promise<Host> {
  const forwarder = createForwarder({ timeout: 1000, ...options, target: new URL(target) })
  const outcomes: BackendOutcome[] = []
  const exchanges: Exchange[] = []
  const server = createServer<typeof IncomingMessage, typeof GatewayResponse>(
    { ServerResponse: GatewayResponse },
    (req, res) => {
      exchanges.push(track(res, { draining: false }, 'sale', requestIdOf(req.headers['x-request-id']), undefined))
      const chunks: Buffer[] = []
      req.on('data', (chunk: Buffer) => chunks.push(chunk))
      req.on('end', () => forwarder.forward(req, res, Buffer.concat(chunks), (outcome) => outcomes.push(outcome)))
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
  return { url: `http://127.0.0.1:${(server.address() as AddressInfo).port}`, forwarder, outcomes, exchanges }
}

async function hostFor(t: Test, answer: Answer, options: Partial<ForwarderOptions> = {}) {
  const backend = await startBackend(answer)
  t.teardown(() => backend.close())
  return { backend, host: await startHost(t, backend.url, options) }
}

const pay = (host: Host) => send(host.url, { path: '/pay', body: '{"amount":1}' })

/** The one outcome of the one call, once it is in; a second one would fail the test. */
async function outcomeOf(t: Test, host: Host): Promise<BackendOutcome | undefined> {
  t.ok(await until(() => host.outcomes.length > 0), 'settled was called')
  t.equal(host.outcomes.length, 1, 'once')
  return host.outcomes[0]
}

t.test('answered: the status, the relayed header list and, within keepAnswerBytes, the body', async (t) => {
  const { host, backend } = await hostFor(
    t,
    (_req, res) => {
      res.writeHead(201, {
        'X-Trace-ID': 'abc',
        'Set-Cookie': ['a=1', 'b=2'],
        Connection: 'keep-alive, x-private',
        'x-private': 'no',
        'X-Request-Id': 'the-backend-s',
      })
      res.write('{"outcome":')
      res.end('"authorized"}')
    },
    { keepAnswerBytes: 1024 },
  )
  const reply = await send(host.url, { path: '/pay', body: '{"amount":1}', headers: { 'x-request-id': 'client-7' } })
  t.equal(reply.status, 201)
  t.same(reply.headers['set-cookie'], ['a=1', 'b=2'])
  t.equal(backend.received[0]?.headers['x-request-id'], 'client-7', 'the backend gets the request id')
  t.equal(reply.headers['x-request-id'], 'client-7', "the gateway's id, not the backend's")
  const outcome = await outcomeOf(t, host)
  t.match(outcome, { kind: 'answered', status: 201 })
  if (outcome?.kind !== 'answered') return
  const names = outcome.headers.filter((_, i) => i % 2 === 0)
  t.same(
    names,
    ['X-Trace-ID', 'Set-Cookie', 'Set-Cookie', 'Date'],
    'as spelt and as often as sent; Connection, what it names, Keep-Alive, Transfer-Encoding and X-Request-Id dropped',
  )
  t.equal(outcome.body?.toString(), '{"outcome":"authorized"}', 'the body, whole')
  t.equal(outcome.body?.toString(), reply.text, 'what the client got')
})

t.test('no body kept without keepAnswerBytes, nor one larger than it', async (t) => {
  const answer: Answer = (_req, res) =>
    res.writeHead(201, { 'content-type': 'application/json' }).end('{"outcome":"authorized"}')
  const without = (await hostFor(t, answer)).host
  t.equal((await pay(without)).status, 201)
  t.match(await outcomeOf(t, without), { kind: 'answered', status: 201, body: undefined })
  const small = (await hostFor(t, answer, { keepAnswerBytes: 10 })).host
  t.equal((await pay(small)).status, 201)
  t.match(await outcomeOf(t, small), { kind: 'answered', status: 201, body: undefined })
})

t.test('the answer kept is measured as the store measures it: body and headers against one limit', async (t) => {
  const body = '{"outcome":"authorized"}'
  const answer: Answer = (_req, res) => res.writeHead(201, { 'content-type': 'application/json' }).end(body)
  const tight = (await hostFor(t, answer, { keepAnswerBytes: body.length + 8 })).host
  t.equal((await pay(tight)).text, body)
  t.match(
    await outcomeOf(t, tight),
    { kind: 'answered', status: 201, body: undefined },
    'the body alone fits, the answer does not',
  )
  const error = (_req: unknown, res: ServerResponse) =>
    res.writeHead(404, { 'content-type': 'text/html' }).end('<h1>gone</h1>')
  const replaced = (await hostFor(t, error, { keepAnswerBytes: 1024 })).host
  const reply = await pay(replaced)
  t.equal(reply.status, 404)
  const outcome = await outcomeOf(t, replaced)
  t.match(outcome, { kind: 'answered', status: 404 })
  if (outcome?.kind !== 'answered') return
  t.equal(outcome.body?.toString(), reply.text, 'an error answer: what the client got, the standard body')
  t.equal(replaced.exchanges[0]?.errorName, 'resourceIsNotFound')
  t.equal(replaced.exchanges[0]?.backendError, undefined, 'a 4xx is no backend fault')
})

t.test('a 5xx in the error format: answered with its own status, body and length', async (t) => {
  const body = JSON.stringify({ errorName: 'internalErrorOccurred', message: 'database down' })
  const { host } = await hostFor(
    t,
    (_req, res) => res.writeHead(500, { 'content-type': 'application/json' }).end(body),
    { keepAnswerBytes: 1024 },
  )
  const reply = await pay(host)
  t.equal(reply.status, 500)
  t.equal(reply.text, body)
  const outcome = await outcomeOf(t, host)
  t.match(outcome, { kind: 'answered', status: 500 })
  if (outcome?.kind !== 'answered') return
  t.equal(outcome.body?.toString(), body)
  t.same(outcome.headers.slice(-2), ['content-length', String(body.length)])
  t.equal(host.exchanges[0]?.backendError, 'serverError')
})

t.test('a 5xx replaced: answered with the standard body the client got, Retry-After kept', async (t) => {
  const answer: Answer = (_req, res) => res.writeHead(503, { 'retry-after': '7' }).end('<h1>down</h1>')
  const { host } = await hostFor(t, answer, { keepAnswerBytes: 1024 })
  const reply = await pay(host)
  t.equal(reply.status, 503)
  t.equal(reply.json.errorName, 'serviceUnavailable')
  t.equal(reply.headers['retry-after'], '7')
  const outcome = await outcomeOf(t, host)
  t.match(outcome, { kind: 'answered', status: 503 })
  if (outcome?.kind !== 'answered') return
  t.equal(outcome.body?.toString(), reply.text)
  t.same(outcome.headers, [
    'content-type',
    'application/json',
    'content-length',
    String(reply.text.length),
    'Retry-After',
    '7',
  ])
  t.equal(host.exchanges[0]?.errorName, 'serviceUnavailable')
  const small = (await hostFor(t, answer, { keepAnswerBytes: 10 })).host
  t.equal((await pay(small)).status, 503)
  t.match(
    await outcomeOf(t, small),
    { kind: 'answered', status: 503, body: undefined },
    'a standard body larger than asked is not kept',
  )
})

t.test('refused: 503, and the outcome says the payment never left', async (t) => {
  const closed = await startBackend()
  await closed.close()
  const host = await startHost(t, closed.url)
  const reply = await pay(host)
  t.equal(reply.status, 503)
  t.equal(reply.json.errorName, 'serviceUnavailable')
  t.same(await outcomeOf(t, host), { kind: 'refused' })
  t.equal(host.exchanges[0]?.backendError, 'refused')
})

t.test('no answer within the timeout: 500, timeout', async (t) => {
  const { host, backend } = await hostFor(t, () => undefined, { timeout: 100 })
  const reply = await pay(host)
  t.equal(reply.status, 500)
  t.equal(reply.json.errorName, 'internalErrorOccurred')
  t.same(await outcomeOf(t, host), { kind: 'timeout' })
  t.equal(backend.received.length, 1)
})

t.test('a body that stalls past the timeout after the headers: the client connection is cut, timeout', async (t) => {
  const { host } = await hostFor(
    t,
    (_req, res) => res.writeHead(201, { 'content-length': '100' }).write('{"outcome":'),
    { timeout: 100 },
  )
  await t.rejects(pay(host), { code: 'ECONNRESET' })
  t.same(await outcomeOf(t, host), { kind: 'timeout' })
  t.equal(host.exchanges[0]?.backendError, 'timeout')
})

t.test('reset before the headers: 500, reset; after them: a cut connection, reset', async (t) => {
  const before = (await hostFor(t, (req) => req.socket.destroy())).host
  t.equal((await pay(before)).status, 500)
  t.same(await outcomeOf(t, before), { kind: 'reset' })
  const after = (
    await hostFor(
      t,
      (_req, res) => (
        res.writeHead(201, { 'content-length': '100' }).write('{"out'),
        setTimeout(() => res.destroy(), 10)
      ),
    )
  ).host
  await t.rejects(pay(after), { code: 'ECONNRESET' })
  t.same(await outcomeOf(t, after), { kind: 'reset' })
  t.equal(after.exchanges[0]?.backendError, 'reset')
  t.equal(after.exchanges[0]?.errorName, undefined, 'no error answer was sent')
})

t.test('reset while a 5xx body is read: 500, reset', async (t) => {
  const { host } = await hostFor(
    t,
    (_req, res) => (
      res.writeHead(502, { 'content-length': '100' }).write('{"err'),
      setTimeout(() => res.destroy(), 10)
    ),
  )
  const reply = await pay(host)
  t.equal(reply.status, 500)
  t.equal(reply.json.errorName, 'internalErrorOccurred')
  t.same(await outcomeOf(t, host), { kind: 'reset' })
})

/** Sends a payment and leaves once `leave` resolves; resolves when the connection is gone. */
function payAndLeave(host: Host, leave: Promise<unknown>): Promise<void> {
  return new Promise((resolve) => {
    const req = request(`${host.url}/pay`, { method: 'POST', agent: false })
    req.on('error', () => undefined)
    req.on('close', () => resolve())
    req.end('{"amount":1}')
    void leave.then(() => req.destroy())
  })
}

t.test(
  'a client that leaves while the backend works: the payment is with the backend, so its answer is still read and reported',
  async (t) => {
    let arrived: () => void = () => undefined
    const atBackend = new Promise<void>((resolve) => (arrived = resolve))
    let answer: () => void = () => undefined
    const { host, backend } = await hostFor(
      t,
      (_req, res) => {
        answer = () => res.writeHead(201, { 'content-type': 'application/json' }).end('{"outcome":"authorized"}')
        arrived()
      },
      { keepAnswerBytes: 1024 },
    )
    await payAndLeave(host, atBackend)
    t.equal(host.outcomes.length, 0, 'not settled while the backend works')
    answer()
    t.match(await outcomeOf(t, host), { kind: 'answered', status: 201, body: Buffer.from('{"outcome":"authorized"}') })
    t.equal(backend.received.length, 1)
    t.equal(host.exchanges[0]?.backendError, undefined, 'not a backend fault')
  },
)

t.test('a client that leaves while a large answer streams: the rest is read, not written, and reported', async (t) => {
  const big = Buffer.alloc(8 << 20, 'x')
  let sent: () => void = () => undefined
  const done = new Promise<void>((resolve) => (sent = resolve))
  const { host } = await hostFor(t, (_req, res) => {
    res.writeHead(200, { 'content-type': 'text/plain', 'content-length': String(big.length) })
    res.write(big.subarray(0, 1 << 20))
    setTimeout(() => res.end(big.subarray(1 << 20), sent), 50)
  })
  await new Promise<void>((resolve) => {
    const req = request(`${host.url}/pay`, { method: 'POST', agent: false }, (res) => {
      res.pause()
      setTimeout(() => (req.destroy(), resolve()), 20)
    })
    req.on('error', () => undefined)
    req.end('{"amount":1}')
  })
  await done
  t.match(await outcomeOf(t, host), { kind: 'answered', status: 200, body: undefined })
})

t.test('a client that leaves while its payment waits for a connection: never sent, refused at once', async (t) => {
  const held: (() => void)[] = []
  const { host, backend } = await hostFor(t, (_req, res) => held.push(() => res.writeHead(201).end('{}')), {
    maxSockets: 1,
  })
  const first = pay(host)
  t.ok(await until(() => held.length === 1), 'the one connection is busy')
  await payAndLeave(
    host,
    until(() => host.exchanges.length === 2),
  )
  t.ok(await until(() => host.outcomes.length === 1), 'settled while the connection is still busy')
  t.same(host.outcomes[0], { kind: 'refused' }, 'the backend never got it')
  for (const release of held) release()
  t.equal((await first).status, 201)
  t.ok(await until(() => host.outcomes.length === 2))
  t.equal(backend.started, 1, 'only the first payment reached the backend')
  t.equal(host.exchanges[1]?.backendError, undefined, 'not a backend fault: nobody was told 503')
})

t.test(
  'the pool closed while a payment waits for a connection: an error code the fault table does not name, yet never written, so refused',
  async (t) => {
    const { host, backend } = await hostFor(t, () => undefined, { maxSockets: 1 })
    const first = pay(host)
    t.ok(await until(() => backend.started === 1), 'the one connection is busy')
    const waiting = pay(host)
    t.ok(await until(() => host.exchanges.length === 2), 'the second payment waits for it')
    host.forwarder.close()
    const reply = await waiting
    t.equal(reply.status, 503, 'the payment certainly did not happen')
    t.ok(await until(() => host.outcomes.length === 2))
    t.same(
      host.outcomes.map((outcome) => outcome.kind).sort(),
      ['refused', 'reset'],
      'the one written may have been received; the one waiting was never sent',
    )
    t.equal(
      faultKind(Object.assign(new Error('destroyed'), { code: 'UND_ERR_DESTROYED' })),
      'reset',
      'by its code alone it would be a reset',
    )
    t.equal((await first).status, 500)
    t.equal(backend.started, 1, 'only the first payment reached the backend')
  },
)

t.test('a client slower than the backend: undici waits for it, and the body arrives whole', async (t) => {
  const big = Buffer.alloc(16 << 20, 'x')
  const { host } = await hostFor(t, (_req, res) => res.writeHead(200, { 'content-type': 'text/plain' }).end(big))
  const length = await new Promise<number>((resolve, reject) => {
    const req = request(`${host.url}/pay`, { method: 'POST', agent: false }, (res) => {
      res.pause()
      let size = 0
      setTimeout(() => {
        res.on('data', (chunk: Buffer) => (size += chunk.length))
        res.on('end', () => resolve(size))
        res.resume()
      }, 300)
    })
    req.on('error', reject)
    req.end('{"amount":1}')
  })
  t.equal(length, big.length)
  t.match(await outcomeOf(t, host), { kind: 'answered', status: 200 })
})

t.test('informational 1xx answers are skipped, the final one relayed', async (t) => {
  const backend = await startRawBackend(t, (socket) =>
    socket.write(`HTTP/1.1 103 Early Hints\r\nLink: </a.css>; rel=preload\r\n\r\n${createdBytes()}`),
  )
  const host = await startHost(t, backend.url)
  const reply = await pay(host)
  t.equal(reply.status, 201)
  t.equal(reply.json.outcome, 'authorized')
  t.equal(reply.headers.link, undefined)
})

t.test('a header named in any of several Connection headers is dropped', async (t) => {
  const backend = await startRawBackend(t, (socket) =>
    socket.write(createdBytes('Connection: keep-alive\r\nX-Private: no\r\nConnection: x-private\r\nX-Public: yes\r\n')),
  )
  const host = await startHost(t, backend.url)
  const reply = await pay(host)
  t.equal(reply.status, 201)
  t.equal(reply.headers['x-private'], undefined)
  t.equal(reply.headers['x-public'], 'yes')
})

t.test("the target's path goes in front, its query before the request's", async (t) => {
  t.equal(backendPaths(new URL('http://b'))('/pay?x=1'), '/pay?x=1')
  t.equal(backendPaths(new URL('http://b/base/'))('/pay'), '/base/pay')
  t.equal(backendPaths(new URL('http://b/base'))('/pay?x=1'), '/base/pay?x=1')
  t.equal(backendPaths(new URL('http://b/base/?k=1'))('/pay'), '/base/pay?k=1')
  t.equal(backendPaths(new URL('http://b/base?k=1'))('/pay?x=1'), '/base/pay?k=1&x=1')
  t.equal(backendPaths(new URL('http://b/?k=1'))('/pay?'), '/pay?k=1')
})

t.test("undici's error codes: one table for both engines", async (t) => {
  const failure = (code?: string, syscall?: string) => Object.assign(new Error('x'), { code, syscall })
  t.equal(faultKind(failure('ECONNREFUSED', 'connect')), 'refused')
  t.equal(faultKind(failure('EHOSTUNREACH', 'connect')), 'refused', 'raised by connecting: nothing sent')
  t.equal(faultKind(failure('ENETUNREACH', 'connect')), 'refused')
  t.equal(faultKind(failure('EHOSTUNREACH', 'read')), 'reset', 'on an open connection: it may have been sent')
  t.equal(faultKind(failure('ENETUNREACH', 'write')), 'reset')
  t.equal(faultKind(failure('ENOTFOUND', 'getaddrinfo')), 'refused')
  t.equal(faultKind(failure('UND_ERR_CONNECT_TIMEOUT')), 'refused', 'no connection was made: nothing sent')
  t.equal(faultKind(failure('UND_ERR_HEADERS_TIMEOUT')), 'timeout')
  t.equal(faultKind(failure('UND_ERR_BODY_TIMEOUT')), 'timeout')
  t.equal(faultKind(failure('EBACKENDTIMEOUT')), 'timeout')
  t.equal(faultKind(failure('UND_ERR_SOCKET')), 'reset')
  t.equal(faultKind(failure('ECONNRESET')), 'reset')
  t.equal(faultKind(failure()), 'reset')
})
