import { readFile } from 'node:fs/promises'
import { join } from 'node:path'
import { connect } from 'node:tls'
import type { Redis } from 'ioredis'
import t, { type Test } from 'tap'
import {
  closeRedisClient,
  createRedisClient,
  redisTarget,
  redisTls,
  whenReady,
} from '../../lib/idempotency/redis-client.js'
import { makePki } from '../helpers/certificates.js'
import { boundPorts, COVERED, spawnCli } from '../helpers/cli.js'
import { basic, saleBody, USERNAME, writeCredentials, writeFingerprintKey } from '../helpers/fixtures.js'
import { paymentHeaders, send, until, type Reply } from '../helpers/http.js'
import { startRedis } from '../helpers/redis.js'
import { startTlsRedis, startTlsSentinel, startTwiceFailingTls } from '../helpers/redis-tls.js'
import { startBackend } from '../helpers/servers.js'
import { startGateway } from '../helpers/surfaces.js'

/**
 * Retry protection's Redis over TLS (docs/idempotency-reference.md, TLS to the store): a real `redis-server` that speaks only
 * TLS, its certificate verified against `--idempotency-ca` or the system's roots, never reached in clear.
 */

let references = 0
function sale(): Record<string, unknown> {
  return { ...saleBody(), transactionReference: `tls-${++references}` }
}

function pay(url: string, body: object): Promise<Reply> {
  return send(url, { headers: paymentHeaders(), body })
}

const pki = makePki(t.testdir())

t.test('rediss:// and rediss-sentinel:// are TLS forms; the others are not', async (t) => {
  for (const url of ['rediss://h:6380/0', 'rediss://u:p@h', 'rediss-sentinel://s1:26379,s2#m']) t.ok(redisTls(url), url)
  for (const url of ['redis://h:6379', 'redis-sentinel://s1:26379#m', 'rediss://', 'rediss-sentinel://s1', 'memory'])
    t.notOk(redisTls(url), url)
  t.match(redisTarget('rediss-sentinel://app:secret@s1:26380,s2/3#primary'), {
    sentinels: [
      { host: 's1', port: 26380 },
      { host: 's2', port: 26379 },
    ],
    name: 'primary',
    db: 3,
    username: 'app',
    password: 'secret',
    enableTLSForSentinelMode: true,
  })
  t.match(redisTarget('redis-sentinel://s1#m'), { enableTLSForSentinelMode: false })
})

t.test(
  'the client is given TLS options that verify: the CA bundle, the host as the name; to Sentinels and primary alike',
  async (t) => {
    const ca = Buffer.from('a bundle')
    const quiet = { commandTimeoutMs: 100, onError: () => {} }
    const named = createRedisClient('rediss://cache.example:6380/0', { ...quiet, ca }) as Redis
    t.teardown(() => closeRedisClient(named))
    t.same(named.options.tls, { ca, servername: 'cache.example' }, 'the name checked and sent as SNI is the host named')
    t.equal(named.options.tls?.rejectUnauthorized, undefined, "never turned off: node's default verifies")
    const address = createRedisClient('rediss://127.0.0.1:1/0', quiet) as Redis
    t.teardown(() => closeRedisClient(address))
    t.same(
      address.options.tls,
      {},
      "an address: checked against the certificate's IP names, against the system's roots",
    )
    const sentinel = createRedisClient('rediss-sentinel://127.0.0.1:1#m', { ...quiet, ca }) as Redis
    t.teardown(() => closeRedisClient(sentinel))
    t.match(sentinel.options, { tls: { ca }, sentinelTLS: { ca }, enableTLSForSentinelMode: true })
    const plain = createRedisClient('redis://127.0.0.1:1/0', quiet) as Redis
    t.teardown(() => closeRedisClient(plain))
    t.equal(plain.options.tls, undefined)
    for (const url of ['redis://127.0.0.1:1/0', 'redis-sentinel://127.0.0.1:1#m'])
      t.throws(
        () => createRedisClient(url, { ...quiet, ca }),
        {
          code: 'EIDEMPOTENCY',
          message:
            'idempotency is not a TLS URL, and a CA bundle (idempotencyCaBundle) is only for one of rediss://HOST:PORT[/DB], rediss-sentinel://HOST:PORT[,HOST:PORT...][/DB]#MASTER, rediss-cluster://HOST:PORT[,HOST:PORT...]',
        },
        `${url}: a CA bundle without TLS is refused`,
      )
  },
)

t.test('a payment claimed, recorded and replayed through rediss:// with the CA bundle', async (t) => {
  const { ca, server } = await pki
  const redis = await startTlsRedis(t, server, ca)
  const { url, backend } = await startGateway(t, {
    idempotency: redis.url,
    idempotencyCaBundle: await readFile(ca),
  })
  const payment = sale()
  const first = await pay(url, payment)
  t.equal(first.status, 201)
  const retry = await pay(url, payment)
  t.equal(retry.status, 201)
  t.equal(retry.headers['idempotent-replayed'], 'true', 'replayed from the record in the TLS Redis')
  t.equal(backend.received.length, 1, 'forwarded once')
  const client = createRedisClient(redis.url, { ca: await readFile(ca) })
  t.teardown(() => closeRedisClient(client))
  t.ok(await whenReady(client, 5000))
  t.ok((await client.keys('*')).length > 0, 'the record is in that Redis')
})

t.test(
  'rediss-sentinel://: TLS to the Sentinel and to the primary it names, verified against the CA bundle',
  async (t) => {
    const { ca, server } = await pki
    const primary = await startTlsRedis(t, server, ca)
    const sentinel = await startTlsSentinel(t, server, ca, primary)
    const { url, backend } = await startGateway(t, { idempotency: sentinel, idempotencyCaBundle: await readFile(ca) })
    const payment = sale()
    t.equal((await pay(url, payment)).status, 201)
    const retry = await pay(url, payment)
    t.equal(retry.headers['idempotent-replayed'], 'true', 'replayed from the primary the Sentinel named')
    t.equal(backend.received.length, 1)
    const other = await makePki(t.testdir())
    const { answer } = await refusedPayment(t, sentinel, await readFile(other.ca))
    t.equal(answer.status, 503, 'a Sentinel whose certificate the CA bundle does not verify is never asked')
  },
)

t.test(
  'createGate: throttleRedis as a rediss:// URL with its CA bundle counts wrong passwords in that Redis',
  async (t) => {
    const { ca, server } = await pki
    const redis = await startTlsRedis(t, server, ca)
    const bundle = await readFile(ca)
    const { url } = await startGateway(t, {
      gate: { credentials: await writeCredentials(t.testdir()), throttleRedis: redis.url, throttleRedisCa: bundle },
    })
    const wrong = await send(url, {
      headers: paymentHeaders({ authorization: basic(USERNAME, 'wrong') }),
      body: sale(),
    })
    t.equal(wrong.status, 401)
    const client = createRedisClient(redis.url, { ca: bundle })
    t.teardown(() => closeRedisClient(client))
    t.ok(await whenReady(client, 5000))
    t.ok(
      await until(async () => (await client.keys('payments-gate:*failures:*')).length === 1),
      'the failed login is counted in the TLS Redis',
    )
  },
)

/** A gateway on `idempotency` (failing closed), its store errors counted; resolves with the first payment's answer. */
async function refusedPayment(t: Test, idempotency: string, ca?: Buffer) {
  const errors: unknown[] = []
  const { url, backend } = await startGateway(t, {
    idempotency,
    idempotencyCaBundle: ca,
    idempotencyFailure: 'closed',
    onStoreError: (error) => errors.push(error),
  })
  const answer = await pay(url, sale())
  return { answer, errors, backend }
}

t.test('an untrusted certificate fails closed: 503, nothing forwarded, never in clear', async (t) => {
  const { ca, server } = await pki
  // A folder for each of the two other authorities: they are made at once.
  const dir = t.testdir({ other: {}, misnamed: {} })
  const trusted = startTlsRedis(t, server, ca)
  const untrusted = async (name: string, bundle: () => Promise<Buffer | undefined>) => {
    const { answer, errors, backend } = await refusedPayment(t, (await trusted).url, await bundle())
    t.equal(answer.status, 503, name)
    t.equal(answer.json.errorName, 'serviceUnavailable', name)
    t.equal(backend.received.length, 0, `${name}: nothing forwarded`)
    t.match(errors, [
      { code: /^(UNABLE_TO_VERIFY_LEAF_SIGNATURE|SELF_SIGNED_CERT_IN_CHAIN|UNABLE_TO_GET_ISSUER_CERT_LOCALLY)$/ },
    ])
  }
  const misnamed = async () => {
    const wrongName = await makePki(join(dir, 'misnamed'))
    const elsewhere = await wrongName.issue('elsewhere', { names: 'DNS:redis.elsewhere' })
    const redis = await startTlsRedis(t, elsewhere, wrongName.ca, 'redis.elsewhere')
    const { answer, errors } = await refusedPayment(t, redis.url, await readFile(wrongName.ca))
    t.equal(answer.status, 503, "a certificate from the CA given, for another name than the URL's host")
    t.match(errors, [{ code: 'ERR_TLS_CERT_ALTNAME_INVALID' }])
  }
  const inClear = async () => {
    const plain = await startRedis(t)
    if (plain === undefined) return
    const refused = await refusedPayment(t, `rediss://127.0.0.1:${plain.port}/0`, await readFile(ca))
    t.equal(refused.answer.status, 503, 'a Redis that speaks only in clear is never used by a rediss:// URL')
    t.equal(refused.backend.received.length, 0)
  }
  // Each case waits out its own gateway's store failure: the four run side by side. Every case ends before the
  // test does, a failed one too, so that none runs on past the test's teardowns.
  const cases = await Promise.allSettled([
    untrusted("no CA given: the system's roots do not hold the test CA", async () => undefined),
    untrusted('another CA', async () => readFile((await makePki(join(dir, 'other'))).ca)),
    misnamed(),
    inClear(),
  ])
  for (const result of cases) if (result.status === 'rejected') throw result.reason
})

/** How many errors node's own TLS client has on one connection to the port (the system's roots, no CA given). */
function errorsOfOneConnection(port: number): Promise<number> {
  return new Promise((resolve) => {
    let errors = 0
    const socket = connect({ port, host: '127.0.0.1' })
    socket.on('error', () => errors++)
    socket.on('close', () => setImmediate(() => resolve(errors)))
  })
}

t.test(
  'a connection that fails twice in one read is reported, then tried again, and ends nothing: to a server, a Sentinel, the primary a Sentinel names, a cluster node',
  async (t) => {
    const { ca, server } = await pki
    // The relay's certificate is from a CA of its own, which neither the system's roots nor the test CA verify.
    const relay = await startTwiceFailingTls(t, (await makePki(t.testdir())).server)
    t.equal(await errorsOfOneConnection(relay.port), 2, "the premise: node's TLS client fails twice on one connection")
    const at = `127.0.0.1:${relay.port}`
    // A Sentinel the test CA verifies, naming the relay as the primary.
    const sentinel = await startTlsSentinel(t, server, ca, { port: relay.port, url: `rediss://${at}/0` })
    const bundle = await readFile(ca)
    // ioredis reports a Sentinel's and a cluster node's failures in words of its own, without the cause.
    const cases: [string, Buffer | undefined, RegExp][] = [
      [`rediss://${at}/0`, undefined, /certificate/],
      [`rediss-sentinel://${at}#payments`, undefined, /^All sentinels are unreachable/],
      [sentinel, bundle, /certificate/],
      [`rediss-cluster://${at}`, undefined, /^Connection is closed/],
    ]
    for (const [url, bundle, report] of cases) {
      const errors: Error[] = []
      const client = createRedisClient(url, {
        ca: bundle,
        commandTimeoutMs: 200,
        onError: (error) => errors.push(error),
      })
      // The Sentinel connects to the relay too, as it watches its primary: the client's own reports are counted.
      t.ok(await until(() => errors.length >= 2), `${url}: failed, tried again, the process still running`)
      await closeRedisClient(client)
      t.match(errors[0]?.message, report, `${url}: the failure is reported`)
    }
  },
)

t.test(
  'serve --idempotency rediss://... --idempotency-ca FILE: a real process shares retry protection over TLS',
  async (t) => {
    const { ca, server } = await pki
    const redis = await startTlsRedis(t, server, ca)
    const backend = await startBackend()
    t.teardown(() => backend.close())
    const dir = t.testdir()
    const run = spawnCli(
      [
        'serve',
        '--listen',
        '127.0.0.1:0',
        '--target',
        backend.url,
        '--credentials',
        await writeCredentials(dir),
        '--idempotency-fingerprint-key',
        await writeFingerprintKey(dir),
        '--idempotency',
        redis.url,
        '--idempotency-ca',
        ca,
      ],
      COVERED,
    )
    t.teardown(async () => {
      run.child.kill('SIGINT')
      await run.exited
    })
    const url = `http://127.0.0.1:${(await boundPorts(run)).listen}`
    const payment = sale()
    t.equal((await pay(url, payment)).status, 201)
    const retry = await pay(url, payment)
    t.equal(retry.headers['idempotent-replayed'], 'true')
    t.equal(backend.received.length, 1)
    t.notMatch(run.output().stdout, /"level":(40|50)/, 'no store error logged')
  },
)
