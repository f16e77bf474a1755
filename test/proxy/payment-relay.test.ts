import { execFileSync } from 'node:child_process'
import { readFileSync } from 'node:fs'
import { createServer, type IncomingMessage } from 'node:http'
import { createServer as createTlsServer } from 'node:https'
import type { Socket } from 'node:net'
import { join } from 'node:path'
import t, { type Test } from 'tap'
import { Pool, type Dispatcher } from 'undici'
import { NO_RULES } from '../../lib/backend-errors/rules.js'
import { GatewayResponse, track, type Exchange } from '../../lib/proxy/exchange.js'
import { paymentFault } from '../../lib/proxy/faults.js'
import { PaymentRelay, type BackendOutcome } from '../../lib/proxy/payment-relay.js'
import { PaymentsInFlight } from '../../lib/proxy/payments-in-flight.js'
import { send, until, type Reply } from '../helpers/http.js'
import { createdBytes, listenOnLoopback, startRawBackend } from '../helpers/servers.js'

/**
 * The payment relay under undici's controller API, and the rule it keeps
 * (docs/backend-faults.md, at most once): an error before undici handed the
 * request to a socket frees the key (503, `refused`), any error after it
 * does not (500, `timeout` or `reset`), whatever its code.
 */
const SETTINGS = { errorBodyLimit: 65_536, keepAnswerBytes: undefined, backendErrors: { rules: NO_RULES } }
const CALL: Dispatcher.DispatchOptions = {
  method: 'POST',
  path: '/pay',
  headers: { 'content-type': 'application/json' },
  body: '{"amount":1}',
}

interface Host {
  readonly url: string
  readonly outcomes: BackendOutcome[]
  readonly exchanges: Exchange[]
  readonly responses: GatewayResponse[]
  /** The relays whose calls are not over, as the forwarder's drain sees them. */
  readonly inFlight: PaymentsInFlight
}

/** A gateway of one relay: each request is sent as a payment through the dispatcher `dispatcherFor` gives, with `sendBy` ms to be written. */
async function startHost(t: Test, dispatcherFor: () => Dispatcher, sendByMs = 10_000): Promise<Host> {
  const outcomes: BackendOutcome[] = []
  const exchanges: Exchange[] = []
  const responses: GatewayResponse[] = []
  const inFlight = new PaymentsInFlight()
  const settings = { ...SETTINGS, inFlight }
  const server = createServer<typeof IncomingMessage, typeof GatewayResponse>(
    { ServerResponse: GatewayResponse },
    (req, res) => {
      exchanges.push(track(res, { draining: false }, 'sale', 'id', undefined))
      responses.push(res)
      req.resume()
      req.on('end', () =>
        new PaymentRelay(res, settings, (outcome) => outcomes.push(outcome), performance.now() + sendByMs).send(
          dispatcherFor(),
          CALL,
        ),
      )
    },
  )
  const port = await listenOnLoopback(server)
  t.teardown(() => new Promise<void>((resolve) => (server.closeAllConnections(), server.close(() => resolve()))))
  return { url: `http://127.0.0.1:${port}`, outcomes, exchanges, responses, inFlight }
}

/** undici's side played by hand: the request handed to a socket (onRequestStart) or not, then `error`. */
function failing(error: Error, written: boolean): Dispatcher {
  const controller = { aborted: false, paused: false, reason: null, abort() {}, pause() {}, resume() {} }
  return {
    dispatch(_call: Dispatcher.DispatchOptions, handler: Dispatcher.DispatchHandler) {
      if (written) handler.onRequestStart?.(controller, {})
      setImmediate(() => handler.onResponseError?.(controller, error))
      return true
    },
  } as unknown as Dispatcher
}

const coded = (code: string | undefined) => Object.assign(new Error(`failed: ${code}`), { code })

/** Every code docs/backend-faults.md's table names, and the TLS ones a backend over TLS adds. */
const CODES = [
  'ECONNREFUSED',
  'ENOTFOUND',
  'EAI_AGAIN',
  'EHOSTUNREACH',
  'ENETUNREACH',
  'UND_ERR_CONNECT_TIMEOUT',
  'UND_ERR_HEADERS_TIMEOUT',
  'UND_ERR_BODY_TIMEOUT',
  'ECONNRESET',
  'EPIPE',
  'UND_ERR_SOCKET',
  'UND_ERR_DESTROYED',
  'DEPTH_ZERO_SELF_SIGNED_CERT',
  'UNABLE_TO_VERIFY_LEAF_SIGNATURE',
  'CERT_HAS_EXPIRED',
  'ERR_TLS_CERT_ALTNAME_INVALID',
  'ERR_SSL_TLSV13_ALERT_CERTIFICATE_REQUIRED',
  'ERR_SSL_SSLV3_ALERT_BAD_CERTIFICATE',
  undefined,
]
const TIMEOUTS = new Set(['UND_ERR_HEADERS_TIMEOUT', 'UND_ERR_BODY_TIMEOUT'])

t.test('the rule: before the write every code is refused; after it, timeout or reset, never refused', async (t) => {
  for (const code of CODES) {
    t.equal(paymentFault(coded(code), false), 'refused', `${code} before the write`)
    t.equal(
      paymentFault(coded(code), true),
      TIMEOUTS.has(code as string) ? 'timeout' : 'reset',
      `${code} after the write`,
    )
  }
})

t.test('each code through the relay: 503 and the key freed before the write, 500 and kept after it', async (t) => {
  for (const code of CODES) {
    for (const written of [false, true]) {
      const host = await startHost(t, () => failing(coded(code), written))
      const reply = await send(host.url, { path: '/pay', body: '{}' })
      t.ok(await until(() => host.outcomes.length === 1))
      const kind = paymentFault(coded(code), written)
      t.same(host.outcomes, [{ kind }], `${code}, ${written ? 'after' : 'before'} the write: ${kind}`)
      t.equal(reply.status, written ? 500 : 503)
      t.equal(host.exchanges[0]?.backendError, kind)
    }
  }
})

t.test('a payment past its deadline before undici queues it: dropped at once, with no negative timer', async (t) => {
  const warnings: Error[] = []
  const heard = (warning: Error) => warnings.push(warning)
  process.on('warning', heard)
  t.teardown(() => process.off('warning', heard))
  const queued = { dispatch: () => true } as unknown as Dispatcher
  // A claim that waited out the store's command timeout longer than --timeout (failure open, a frozen Redis).
  const host = await startHost(t, () => queued, -50)
  const reply = await send(host.url, { path: '/pay', body: '{}' })
  t.equal(reply.status, 503)
  await new Promise((resolve) => setImmediate(resolve))
  // Red before: TimeoutNegativeWarning, a negative delay node sets to 1 ms.
  t.same(
    warnings.map((warning) => warning.name),
    [],
    'no warning',
  )
})

t.test('a payment past its deadline when undici hands it a socket: never written, 503, refused', async (t) => {
  let aborted: Error | undefined
  const controller = {
    aborted: false,
    paused: false,
    reason: null,
    abort: (reason: Error) => (aborted = reason),
    pause() {},
    resume() {},
  }
  const late = {
    dispatch(_call: Dispatcher.DispatchOptions, handler: Dispatcher.DispatchHandler) {
      // undici's HTTP/1.1 writer catches a throw from onRequestStart and reports it as the request's error.
      try {
        handler.onRequestStart?.(controller, {})
      } catch (error) {
        aborted = error as Error
        setImmediate(() => handler.onResponseError?.(controller, aborted as Error))
      }
      return true
    },
  } as unknown as Dispatcher
  const host = await startHost(t, () => late, -1)
  const reply = await send(host.url, { path: '/pay', body: '{}' })
  t.equal(reply.status, 503)
  t.equal(reply.json.errorName, 'serviceUnavailable')
  t.ok(aborted, 'undici was told not to write it')
  t.ok(await until(() => host.outcomes.length === 1))
  t.same(host.outcomes, [{ kind: 'refused' }], 'settled once, as refused')
})

t.test(
  'a queued payment dropped at its deadline leaves the connection undici then hands it open for the next',
  async (t) => {
    const held: Socket[] = []
    const backend = await startRawBackend(t, (socket, request) => {
      if (request.index === 0) held.push(socket)
      else socket.write(createdBytes())
    })
    const pool = new Pool(backend.url, { connections: 1, pipelining: 1, allowH2: false })
    t.teardown(() => pool.destroy())
    const host = await startHost(t, () => pool, 300)
    const first = send(host.url, { path: '/pay', body: '{}' })
    t.ok(await until(() => held.length === 1), 'the one connection is busy')
    const queued = await send(host.url, { path: '/pay', body: '{}' })
    t.equal(queued.status, 503, 'dropped at its deadline, never written')
    ;(held[0] as Socket).write(createdBytes())
    t.equal((await first).status, 201)
    t.equal((await send(host.url, { path: '/pay', body: '{}' })).status, 201)
    t.equal(backend.connections, 1, 'the connection the dropped payment was handed served the next one')
    t.equal(backend.requests.length, 2, 'the dropped payment never reached the backend')
    t.same(
      host.outcomes.map((outcome) => outcome.kind),
      ['refused', 'answered', 'answered'],
    )
  },
)

/** A certificate for 127.0.0.1 made with openssl, and its key; undefined when openssl is missing (the test says so). */
function certificate(dir: string, name: string): { key: Buffer; cert: Buffer } | undefined {
  const key = join(dir, `${name}.key`)
  const cert = join(dir, `${name}.pem`)
  try {
    execFileSync(
      'openssl',
      [
        'req',
        '-x509',
        '-newkey',
        'ec',
        '-pkeyopt',
        'ec_paramgen_curve:prime256v1',
        '-nodes',
        '-days',
        '1',
        '-subj',
        '/CN=127.0.0.1',
        '-addext',
        'subjectAltName=IP:127.0.0.1',
        '-keyout',
        key,
        '-out',
        cert,
      ],
      { stdio: 'ignore' },
    )
  } catch {
    return undefined
  }
  return { key: readFileSync(key), cert: readFileSync(cert) }
}

t.test(
  'TLS to the backend: a server certificate refused fails before the write, a client certificate refused under TLS 1.3 after it',
  async (t) => {
    const server = certificate(t.testdir(), 'server')
    if (server === undefined) {
      t.fail('openssl is needed to make the test certificates')
      return
    }
    let received = 0
    const backend = createTlsServer(
      { ...server, requestCert: true, rejectUnauthorized: true, minVersion: 'TLSv1.3' },
      (_req, res) => {
        received++
        res.writeHead(201).end('{}')
      },
    )
    const origin = `https://127.0.0.1:${await listenOnLoopback(backend)}`
    t.teardown(() => new Promise<void>((resolve) => (backend.closeAllConnections(), backend.close(() => resolve()))))
    const pools: Pool[] = []
    t.teardown(() => Promise.all(pools.map((pool) => pool.destroy())))
    const pool = (connect: Pool.Options['connect']) => () => {
      const made = new Pool(origin, { connections: 1, allowH2: false, connect })
      pools.push(made)
      return made
    }

    const untrusted = await startHost(t, pool({}))
    let reply: Reply = await send(untrusted.url, { path: '/pay', body: '{}' })
    t.equal(reply.status, 503, 'the certificate is checked before anything is written')
    t.ok(await until(() => untrusted.outcomes.length === 1))
    t.same(untrusted.outcomes, [{ kind: 'refused' }], 'key freed: the payment never left')

    const noClientCertificate = await startHost(
      t,
      pool({ ca: server.cert, maxVersion: 'TLSv1.3', minVersion: 'TLSv1.3' }),
    )
    reply = await send(noClientCertificate.url, { path: '/pay', body: '{}' })
    t.equal(reply.status, 500, 'under TLS 1.3 the request is written before the server refuses the client')
    t.ok(await until(() => noClientCertificate.outcomes.length === 1))
    t.same(noClientCertificate.outcomes, [{ kind: 'reset' }], 'key kept: the outcome is unknown')
    t.equal(received, 0, 'the backend answered neither')
  },
)

/** A host whose backend holds each payment until the test answers it: the raw backend's sockets, one per payment. */
async function heldPayments(t: Test): Promise<{ host: Host; held: Socket[] }> {
  const held: Socket[] = []
  const backend = await startRawBackend(t, (socket) => held.push(socket))
  const pool = new Pool(backend.url, { connections: 1, pipelining: 1, allowH2: false })
  t.teardown(() => pool.destroy())
  return { host: await startHost(t, () => pool), held }
}

t.test("the drain's cut: a payment at the backend gets the unknown outcome, settled as a timeout", async (t) => {
  const { host, held } = await heldPayments(t)
  const reply = send(host.url, { path: '/pay', body: '{}' })
  t.ok(await until(() => held.length === 1))
  let settled = false
  void host.inFlight.settled().then(() => (settled = true))
  await new Promise((resolve) => setImmediate(resolve))
  t.notOk(settled, 'not settled while the backend holds it')
  host.inFlight.cut()
  const answer = await reply
  t.equal(answer.status, 500)
  t.equal(answer.json.errorName, 'internalErrorOccurred')
  t.match(answer.json.message, /^The outcome of this payment is unknown/)
  t.same(host.outcomes, [{ kind: 'timeout' }], 'settled once, its key kept')
  t.equal(host.exchanges[0]?.backendErrorCode, 'EDRAINED')
  await host.inFlight.settled()
  t.ok(settled, 'settled resolves once the last call is over')
  t.ok(await until(() => (held[0] as Socket).destroyed), "the backend's connection is let go")
})

t.test("the drain's cut: a payment still waiting for a connection is withdrawn, 503, refused", async (t) => {
  const { host, held } = await heldPayments(t)
  const first = send(host.url, { path: '/pay', body: '{}' })
  t.ok(await until(() => held.length === 1), 'the one connection is busy')
  const queued = send(host.url, { path: '/pay', body: '{}' })
  t.ok(await until(() => host.exchanges.length === 2))
  host.inFlight.cut()
  const [firstReply, queuedReply] = await Promise.all([first, queued])
  t.equal(firstReply.status, 500)
  t.equal(queuedReply.status, 503, 'never written: the client may retry')
  t.same(host.outcomes.map((outcome) => outcome.kind).sort(), ['refused', 'timeout'])
  t.equal(held.length, 1, 'the queued payment never reached the backend')
})

t.test("the drain's cut after the backend's head went out: the client's connection is cut", async (t) => {
  const { host, held } = await heldPayments(t)
  const reply = send(host.url, { path: '/pay', body: '{}' })
  t.ok(await until(() => held.length === 1))
  ;(held[0] as Socket).write('HTTP/1.1 201 Created\r\nContent-Length: 10\r\n\r\n{"ok"')
  t.ok(await until(() => host.responses[0]?.headersSent === true), 'the head went with the first piece')
  host.inFlight.cut()
  await t.rejects(reply, 'a truncated answer ends in a cut connection')
  t.same(host.outcomes, [{ kind: 'timeout' }])
})

t.test("the drain's cut leaves a payment already answered as it was", async (t) => {
  const host = await startHost(t, () => failing(coded('ECONNRESET'), true))
  t.equal((await send(host.url, { path: '/pay', body: '{}' })).status, 500)
  t.ok(await until(() => host.outcomes.length === 1))
  host.inFlight.cut()
  await host.inFlight.settled()
  t.same(host.outcomes, [{ kind: 'reset' }], 'settled once, by the backend')
})
