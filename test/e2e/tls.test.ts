import { X509Certificate } from 'node:crypto'
import { readFileSync } from 'node:fs'
import { copyFile, rename } from 'node:fs/promises'
import { createServer as createHttpsServer, request, Agent, type Server } from 'node:https'
import type { IncomingHttpHeaders } from 'node:http'
import { createConnection, type AddressInfo } from 'node:net'
import { connect, type PeerCertificate, type TLSSocket } from 'node:tls'
import { join } from 'node:path'
import t, { type Test } from 'tap'
import { loadCertificates } from '../../lib/cli/certificates.js'
import { flagName } from '../../lib/cli/flags.js'
import { createGate } from '../../lib/gate.js'
import { createMetrics } from '../../lib/metrics.js'
import { createGateway, type GatewayOptions } from '../../lib/proxy/server.js'
import { watchTlsFiles } from '../../lib/tls/files.js'
import { checkPair, clientContext, type KeyPair } from '../../lib/tls/pem.js'
import { makePki, type PemFiles } from '../helpers/certificates.js'
import { POLICIES_DIR, saleBody, testCredentials } from '../helpers/fixtures.js'
import { paymentHeaders, raw, send, until } from '../helpers/http.js'
import { captureLogger, loggedRequests } from '../helpers/logs.js'

/** docs/deployment-reference.md, TLS: the gateway's own HTTPS listener, and https backends, with certificates made for the test. */
const pki = await makePki(t.testdir())
const ca = readFileSync(pki.ca)
const gate = await createGate({ policies: POLICIES_DIR, credentials: await testCredentials() })
t.teardown(() => gate.close())

/** The last request's log line. */
const lastRequest = () => loggedRequests().findLast((line) => line.status !== undefined)

let reference = 0
const sale = () => JSON.stringify(saleBody({ transactionReference: `tls-${reference++}` }))

interface TlsReply {
  readonly status: number
  readonly headers: IncomingHttpHeaders
  readonly json: any
  readonly peer: PeerCertificate
  readonly alpn: string | false | null
}

/** One request over TLS, trusting the test CA; a sale unless told. */
function sendTls(
  url: string,
  options: { agent?: Agent; path?: string; method?: string; body?: string } = {},
): Promise<TlsReply> {
  return new Promise((resolve, reject) => {
    const method = options.method ?? 'POST'
    const headers = method === 'POST' ? paymentHeaders() : {}
    const req = request(
      `${url}${options.path ?? '/payments/sales/migrateCardOnFile'}`,
      { method, headers, ca, agent: options.agent ?? false },
      (res) => {
        const chunks: Buffer[] = []
        const socket = res.socket as TLSSocket
        const peer = socket.getPeerCertificate()
        const alpn = socket.alpnProtocol
        res.on('data', (chunk: Buffer) => chunks.push(chunk))
        res.on('end', () => {
          const text = Buffer.concat(chunks).toString('utf8')
          resolve({
            status: res.statusCode as number,
            headers: res.headers,
            json: text.startsWith('{') ? JSON.parse(text) : undefined,
            peer,
            alpn,
          })
        })
      },
    )
    req.on('error', reject)
    req.end(method === 'POST' ? (options.body ?? sale()) : undefined)
  })
}

function pairOf(files: PemFiles): KeyPair {
  return { cert: readFileSync(files.cert), key: readFileSync(files.key) }
}

/** A pair as a source that never changes. */
function fixed(files: PemFiles) {
  return { current: pairOf(files), onChange: () => undefined }
}

interface HttpsBackend {
  readonly url: string
  readonly server: Server
  /** Headers of every request received. */
  readonly received: IncomingHttpHeaders[]
}

/** An https backend answering 201 to everything, with `files` as its certificate; `requestCert`: mutual TLS against the test CA. */
async function startHttpsBackend(
  t: Test,
  files: PemFiles,
  requestCert = false,
  version: 'TLSv1.2' | 'TLSv1.3' = 'TLSv1.3',
): Promise<HttpsBackend> {
  const received: IncomingHttpHeaders[] = []
  const tls = {
    ...pairOf(files),
    ca,
    requestCert,
    rejectUnauthorized: requestCert,
    minVersion: version,
    maxVersion: version,
  }
  const server = createHttpsServer(tls, (req, res) => {
    received.push(req.headers)
    req.resume()
    req.on('end', () => {
      res.writeHead(201, { 'content-type': 'application/vnd.example.payments-v6.hal+json' })
      res.end('{"outcome":"authorized"}')
    })
  })
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve))
  t.teardown(() => {
    server.closeAllConnections()
    return new Promise<void>((resolve) => server.close(() => resolve()))
  })
  return { url: `https://127.0.0.1:${(server.address() as AddressInfo).port}`, server, received }
}

/** A gateway in front of `target`, idempotency off (these tests send payments of their own only). */
async function startGateway(
  t: Test,
  options: Omit<GatewayOptions, 'checks' | 'logger'>,
): Promise<{ url: string; port: number }> {
  const gateway = createGateway({
    idempotency: 'off',
    logger: captureLogger(),
    metrics: createMetrics({ defaultMetrics: false }),
    ...options,
    checks: gate.checks,
  })
  const { port } = await gateway.listen(0, '127.0.0.1')
  t.teardown(() => gateway.drain(0))
  return { url: `https://localhost:${port}`, port }
}

t.test('HTTPS on the listener: a sale over TLS, ALPN http/1.1, X-Forwarded-Proto https', async (t) => {
  const backend = await startHttpsBackend(t, pki.server)
  const { url } = await startGateway(t, {
    target: backend.url,
    targetTls: { files: { current: { context: clientCa() }, onChange: () => undefined } },
    tls: fixed(pki.server),
  })
  const reply = await sendTls(url)
  t.equal(reply.status, 201)
  t.equal(reply.alpn, false, 'no ALPN asked: none chosen')
  t.match(backend.received[0], { 'x-forwarded-proto': 'https', 'x-forwarded-port': url.split(':')[2] })
  const alpn = await new Promise<string | false | null>((resolve, reject) => {
    const socket = connect(
      {
        host: '127.0.0.1',
        port: Number(url.split(':')[2]),
        servername: 'localhost',
        ca,
        ALPNProtocols: ['h2', 'http/1.1'],
      },
      () => {
        resolve(socket.alpnProtocol)
        socket.end()
      },
    )
    socket.on('error', reject)
  })
  t.equal(alpn, 'http/1.1', 'HTTP/2 is not offered')
})

t.test('plain HTTP sent to the TLS port is never answered in clear; TLS 1.1 is refused', async (t) => {
  const backend = await startHttpsBackend(t, pki.server)
  const { port } = await startGateway(t, { target: backend.url, tls: fixed(pki.server) })
  const answer = await raw(port, 'GET /status HTTP/1.1\r\nHost: localhost\r\n\r\n')
  t.notMatch(answer, /HTTP\//, 'no HTTP answer')
  const error = await new Promise<NodeJS.ErrnoException>((resolve) => {
    const socket = connect({
      host: '127.0.0.1',
      port,
      ca,
      servername: 'localhost',
      maxVersion: 'TLSv1.1',
      minVersion: 'TLSv1',
    })
    socket.on('error', resolve)
  })
  t.match(error.code, /^ERR_SSL_/, 'the handshake fails')
})

t.test("a connection silent before its handshake is closed within the header timeout, not node's 120 s", async (t) => {
  const backend = await startHttpsBackend(t, pki.server)
  const { port } = await startGateway(t, { target: backend.url, tls: fixed(pki.server), headersTimeout: 300 })
  const socket = createConnection(port, '127.0.0.1')
  socket.on('error', () => undefined)
  await new Promise((resolve) => socket.on('close', resolve))
  t.equal(socket.bytesRead, 0, 'closed without an answer')
})

/** The test CA as the backend's trust, as --target-ca gives it. */
function clientCa(client?: PemFiles) {
  return clientContext(ca, client === undefined ? undefined : pairOf(client))
}

t.test('an https backend with a private CA: payments (undici) and other paths (http-proxy-3)', async (t) => {
  const backend = await startHttpsBackend(t, pki.server)
  const { port } = await startGateway(t, {
    target: backend.url,
    targetTls: { files: { current: { context: clientCa() }, onChange: () => undefined } },
  })
  const base = `http://127.0.0.1:${port}`
  const payment = await fetch(`${base}/payments/sales/migrateCardOnFile`, {
    method: 'POST',
    headers: paymentHeaders() as Record<string, string>,
    body: sale(),
  })
  t.equal(payment.status, 201)
  const other = await fetch(`${base}/status`)
  t.equal(other.status, 201)
  t.equal(backend.received.length, 2)
  t.equal(backend.received[0]?.['x-forwarded-proto'], 'http')
})

t.test('--target-servername: a target given as an address, its certificate naming a host', async (t) => {
  const named = await pki.issue('named', { names: 'DNS:payments.internal' })
  const backend = await startHttpsBackend(t, named)
  const files = { current: { context: clientCa() }, onChange: () => undefined }
  const wrong = await startGateway(t, { target: backend.url, targetTls: { files } })
  const refused = await fetch(`http://127.0.0.1:${wrong.port}/payments/sales/migrateCardOnFile`, {
    method: 'POST',
    headers: paymentHeaders() as Record<string, string>,
    body: sale(),
  })
  t.equal(refused.status, 503, 'the address is not a name of the certificate: refused before the payment is written')
  t.match(lastRequest(), { status: 503, backendError: 'refused' })
  const right = await startGateway(t, { target: backend.url, targetTls: { files, servername: 'payments.internal' } })
  const passed = await fetch(`http://127.0.0.1:${right.port}/payments/sales/migrateCardOnFile`, {
    method: 'POST',
    headers: paymentHeaders() as Record<string, string>,
    body: sale(),
  })
  t.equal(passed.status, 201)
  const other = await fetch(`http://127.0.0.1:${right.port}/status`)
  t.equal(other.status, 201, 'the pass-through engine checks the same name')
})

t.test(
  "the name a backend must prove is the configured one on every payment, never the client's Host; one pooled connection",
  async (t) => {
    const named = await pki.issue('named-host', { names: 'DNS:payments.internal' })
    const files = { current: { context: clientCa() }, onChange: () => undefined }
    for (const [what, cert, servername, sni] of [
      ['an address target: checked against its address, no SNI (RFC 6066 3)', pki.server, undefined, false],
      ['--target-servername', named, 'payments.internal', 'payments.internal'],
    ] as const) {
      const backend = await startHttpsBackend(t, cert)
      const names: (string | false)[] = []
      backend.server.on('secureConnection', (socket: TLSSocket) => names.push(socket.servername as string | false))
      const { port } = await startGateway(t, { target: backend.url, targetTls: { files, servername } })
      const statuses = []
      for (const host of ['gateway.example.com', 'other.example.org', 'localhost', '10.1.2.3'])
        statuses.push(
          (
            await send(port, {
              headers: paymentHeaders({ host }),
              body: sale(),
            })
          ).status,
        )
      t.same(statuses, [201, 201, 201, 201], `${what}: whatever the Host`)
      t.same(names, [sni], `${what}: one connection, its SNI`)
      t.same(
        backend.received.map((headers) => headers.host),
        ['gateway.example.com', 'other.example.org', 'localhost', '10.1.2.3'],
        `${what}: the client's Host still reaches the backend`,
      )
    }
  },
)

async function payment(port: number): Promise<number> {
  const reply = await fetch(`http://127.0.0.1:${port}/payments/sales/migrateCardOnFile`, {
    method: 'POST',
    headers: paymentHeaders() as Record<string, string>,
    body: sale(),
  })
  await reply.arrayBuffer()
  return reply.status
}

t.test(
  'backend certificates that fail verification: 503 before the payment is written, nothing reaches the backend',
  async (t) => {
    const expired = await pki.issue('expired-backend', { days: -1 })
    const notYetValid = await pki.issue('not-yet-valid-backend', { startsInDays: 1 })
    const wrongName = await pki.issue('wrong-name', { names: 'DNS:elsewhere.example' })
    const untrusted = await pki.issue('untrusted', { selfSigned: true })
    const codes = {
      expired: 'CERT_HAS_EXPIRED',
      'not yet valid': 'CERT_NOT_YET_VALID',
      'wrong name': 'ERR_TLS_CERT_ALTNAME_INVALID',
      untrusted: 'DEPTH_ZERO_SELF_SIGNED_CERT',
    }
    for (const [name, files] of [
      ['expired', expired],
      ['not yet valid', notYetValid],
      ['wrong name', wrongName],
      ['untrusted', untrusted],
    ] as const) {
      const backend = await startHttpsBackend(t, files)
      const { port } = await startGateway(t, {
        target: backend.url,
        targetTls: { files: { current: { context: clientCa() }, onChange: () => undefined } },
      })
      t.equal(await payment(port), 503, name)
      t.match(
        lastRequest(),
        { status: 503, backendError: 'refused', backendErrorCode: codes[name] },
        `${name}: the reason logged`,
      )
      t.equal((await fetch(`http://127.0.0.1:${port}/status`)).status, 503, `${name}: another path`)
      t.equal(backend.received.length, 0, `${name}: nothing sent`)
    }
    const backend = await startHttpsBackend(t, pki.server)
    const { port } = await startGateway(t, { target: backend.url })
    t.equal(await payment(port), 503, "the system's roots do not trust the test CA")
  },
)

t.test('mutual TLS: the client certificate accepted; none, or one the backend does not trust, refused', async (t) => {
  const backend = await startHttpsBackend(t, pki.server, true)
  const mutual = await startGateway(t, {
    target: backend.url,
    targetTls: { files: { current: { context: clientCa(pki.client) }, onChange: () => undefined } },
  })
  t.equal(await payment(mutual.port), 201)
  t.equal(
    (await fetch(`http://127.0.0.1:${mutual.port}/status`)).status,
    201,
    'the pass-through engine presents it too',
  )
  const stranger = await pki.issue('stranger', { client: true, selfSigned: true })
  for (const [name, client] of [
    ['no client certificate', undefined],
    ['an untrusted one', stranger],
  ] as const) {
    const { port } = await startGateway(t, {
      target: backend.url,
      targetTls: { files: { current: { context: clientCa(client) }, onChange: () => undefined } },
    })
    // TLS 1.3: the client's handshake is done before the backend checks its certificate, so the request is written.
    t.equal(await payment(port), 500, `${name}: refused after the payment was written, the outcome unknown`)
    t.match(lastRequest(), { status: 500, backendError: 'reset' })
  }
  // TLS 1.2: the backend's refusal ends the handshake, before anything is written.
  const older = await startHttpsBackend(t, pki.server, true, 'TLSv1.2')
  const { port } = await startGateway(t, {
    target: older.url,
    targetTls: { files: { current: { context: clientCa() }, onChange: () => undefined } },
  })
  t.equal(await payment(port), 503, 'TLS 1.2, no client certificate: refused before the payment is written')
  t.equal(older.received.length, 0)
})

t.test('a client certificate renewed in its files: new backend connections present the new one', async (t) => {
  const dir = t.testdir()
  const stranger = await pki.issue('stranger-renewed', { client: true, selfSigned: true })
  const [cert, key] = [join(dir, 'client.crt'), join(dir, 'client.key')]
  await copyFile(stranger.cert, cert)
  await copyFile(stranger.key, key)
  const certificates = await loadCertificates(
    { target: new URL('https://127.0.0.1'), targetCa: pki.ca, targetCert: cert, targetKey: key },
    flagName,
    { debounceMs: 60_000, rescanMs: 60_000 },
  )
  t.teardown(() => certificates.close())
  const backend = await startHttpsBackend(t, pki.server, true)
  const { port } = await startGateway(t, { target: backend.url, targetTls: certificates.target })
  t.equal(await payment(port), 500, 'the backend refuses the first certificate')
  await copyFile(pki.client.key, `${key}.tmp`)
  await copyFile(pki.client.cert, `${cert}.tmp`)
  await rename(`${key}.tmp`, key)
  await rename(`${cert}.tmp`, cert)
  await certificates.reload()
  t.equal(await payment(port), 201, 'payments: the renewed certificate')
  t.equal((await fetch(`http://127.0.0.1:${port}/status`)).status, 201, 'other paths: the renewed certificate')
})

t.test('rotation under load: new connections get the new certificate, no request fails', async (t) => {
  const dir = t.testdir()
  const next = await pki.issue('next')
  const cert = `${dir}/tls.crt`
  const key = `${dir}/tls.key`
  await copyFile(pki.server.cert, cert)
  await copyFile(pki.server.key, key)
  const pair = await watchTlsFiles(
    [
      { key: 'tlsCert', path: cert },
      { key: 'tlsKey', path: key },
    ],
    (texts) => {
      const loaded = { cert: texts[0] as Buffer, key: texts[1] as Buffer }
      checkPair(loaded, 0)
      return loaded
    },
    { debounceMs: 10, rescanMs: 200 },
  )
  t.teardown(() => pair.close())
  const backend = await startHttpsBackend(t, pki.server)
  const { url } = await startGateway(t, {
    target: backend.url,
    targetTls: { files: { current: { context: clientCa() }, onChange: () => undefined } },
    tls: pair,
  })
  const serialOf = (files: PemFiles) => new X509Certificate(readFileSync(files.cert)).serialNumber
  const agent = new Agent({ keepAlive: true, maxSockets: 4, ca })
  t.teardown(() => agent.destroy())
  const statuses: (number | string)[] = []
  let rotated = false
  const deadline = Date.now() + 20_000
  const loop = async () => {
    // `rotated` is set by the test while these loops run, between their awaits.
    // eslint-disable-next-line no-unmodified-loop-condition
    while (statuses.length < 3000 && Date.now() < deadline && !(rotated && statuses.length > 200)) {
      statuses.push(
        await sendTls(url, { agent }).then(
          (reply) => reply.status,
          (error: Error) => error.message,
        ),
      )
    }
  }
  const load = Promise.all([loop(), loop(), loop(), loop()])
  await until(() => statuses.length > 50, 10_000)
  await copyFile(next.cert, `${key}.new-cert`)
  await copyFile(next.key, `${key}.new-key`)
  await rename(`${key}.new-key`, key)
  await rename(`${key}.new-cert`, cert)
  t.ok(
    await until(async () => (await sendTls(url)).peer.serialNumber === serialOf(next), 10_000),
    'a new connection gets the new certificate',
  )
  rotated = true
  await load
  t.same([...new Set(statuses)], [201], `every one of ${statuses.length} requests answered 201`)
})
