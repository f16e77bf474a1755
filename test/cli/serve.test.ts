import { closeSync, openSync, readFileSync, writeFileSync } from 'node:fs'
import { join } from 'node:path'
import { PassThrough } from 'node:stream'
import { Redis } from 'ioredis'
import t from 'tap'
import { startServing, storeErrorReporter, type ServeSetup } from '../../lib/cli/serve.js'
import { LOG_DEFAULTS } from '../../lib/defaults.js'
import { createRedisClient } from '../../lib/idempotency/redis-client.js'
import { createMetrics } from '../../lib/metrics.js'
import { luhnValid } from '../../lib/luhn.js'
import { boundPorts, COVERED, runCliOnce, spawnCli } from '../helpers/cli.js'
import { basic, saleBody, USERNAME, writeCredentials, writeFingerprintKey } from '../helpers/fixtures.js'
import { keepAliveSender, paymentHeaders, send, until } from '../helpers/http.js'
import { captureLogger, logLines, secretIn, TEST_REDIS_PASSWORD, WRONG_REDIS_PASSWORD } from '../helpers/logs.js'
import { startRedis } from '../helpers/redis.js'
import { created, freePort, poll, startBackend, takenPort } from '../helpers/servers.js'

const dir = t.testdir({ 'bad-policies': { 'default.json': '{"entity": "default"}' }, 'bad.json': '{"users": 1}' })
const credentials = await writeCredentials(dir)
const fingerprintKey = await writeFingerprintKey(dir)
const backend = await startBackend()
t.teardown(() => backend.close())

function io() {
  const stdout = new PassThrough()
  const stderr = new PassThrough()
  const lines: string[] = []
  stdout.on('data', (chunk: Buffer) => lines.push(...chunk.toString().split('\n').filter(Boolean)))
  stderr.resume()
  return { io: { stdin: new PassThrough(), stdout, stderr, env: {} }, lines }
}

function setup(extra: Partial<ServeSetup> = {}): ServeSetup {
  return {
    listen: { host: '127.0.0.1', port: 0 },
    target: new URL(backend.url),
    policies: 'policies',
    credentials,
    vendor: 'example',
    basePath: '',
    bodyLimit: 65536,
    timeout: 30000,
    admin: { host: '127.0.0.1', port: 0 },
    ...extra,
  }
}

t.test('startServing: admin, policies, credentials, gateway; stop drains and closes everything', async (t) => {
  const { io: streams, lines } = io()
  const serving = await startServing(setup(), streams)
  const admin = `http://127.0.0.1:${serving.admin?.port}`
  t.equal((await fetch(`${admin}/readyz`)).status, 200)
  const reply = await send(`http://127.0.0.1:${serving.address.port}`, { headers: paymentHeaders(), body: saleBody() })
  t.equal(reply.status, 201)
  t.match(
    await (await fetch(`${admin}/metrics`)).text(),
    /payments_gate_requests_total\{operation="sale",status="201",error_name="none"} 1/,
  )
  await serving.stop()
  await t.rejects(fetch(`${admin}/healthz`))
  t.ok(lines.some((line) => line.includes('"msg":"stopped"')))
  t.same(
    lines.filter((line) => (line.match(/[0-9]{12,19}/g) ?? []).some(luhnValid)),
    [],
  )
})

t.test('the start-up line names the store (password hidden) and the admin address; warnings come first', async (t) => {
  const { io: streams, lines } = io()
  const warnings = [{ variable: 'PAYMENTS_GATE_IDEMPOTENCY_STORE', message: 'not a variable' }]
  const serving = await startServing(setup({ idempotency: 'off', warnings }), streams)
  t.teardown(() => serving.stop())
  const logged = lines.map((line) => JSON.parse(line) as Record<string, unknown>)
  const warned = logged.findIndex((line) => line.msg === 'not a variable')
  const listening = logged.findIndex((line) => line.msg === 'gateway listening')
  t.match(logged[warned], { level: 40, variable: 'PAYMENTS_GATE_IDEMPOTENCY_STORE' })
  t.ok(warned < listening, 'before the start-up line')
  t.match(logged[listening], {
    idempotency: 'off',
    admin: { address: '127.0.0.1', port: serving.admin?.port },
    target: backend.url.endsWith('/') ? backend.url : `${backend.url}/`,
  })
})

t.test("the start-up line is flushed as it is written, not at the log's next periodic flush", async (t) => {
  const { io: streams } = io()
  // What the logger did to its destination, in order: each line written, and each flush.
  const done: string[] = []
  const write = streams.stdout.write.bind(streams.stdout) as (line: string) => boolean
  Object.assign(streams.stdout, {
    write: (line: string) => {
      done.push(line.includes('"msg":"gateway listening"') ? 'listening' : 'line')
      return write(line)
    },
    flush: (callback?: () => void) => {
      done.push('flush')
      callback?.()
    },
  })
  const serving = await startServing(setup(), streams)
  t.teardown(() => serving.stop())
  t.equal(done[done.indexOf('listening') + 1], 'flush')
})

t.test('a refused Redis password is logged by its code and message, the password nowhere', async (t) => {
  const redis = await startRedis(t)
  if (redis === undefined) return
  const owner = new Redis(redis.url)
  await owner.config('SET', 'requirepass', TEST_REDIS_PASSWORD)
  owner.disconnect()
  const report = storeErrorReporter(captureLogger(), createMetrics())
  // ioredis puts the AUTH command, the password its argument, on the error it emits.
  const client = createRedisClient(`redis://:${WRONG_REDIS_PASSWORD}@127.0.0.1:${redis.port}/0`, { onError: report })
  t.teardown(() => client.disconnect())
  t.ok(await until(() => logLines.some((line) => line.includes('WRONGPASS'))), 'the refusal is logged')
  const line = JSON.parse(logLines.find((text) => text.includes('WRONGPASS')) as string)
  t.match(line.err, { message: /^WRONGPASS/ })
  t.same(
    Object.keys(line.err).filter((key) => key !== 'code' && key !== 'message'),
    [],
    'code and message only',
  )
  t.notOk(
    logLines.some((text) => secretIn(text) !== undefined),
    'no line holds a password',
  )
})

t.test('a full memory store: evictions counted, the window exported, one warning line a minute at most', async (t) => {
  const { io: streams, lines } = io()
  const serving = await startServing(setup({ idempotencyMaxEntries: 2 }), streams)
  t.teardown(() => serving.stop())
  const admin = `http://127.0.0.1:${serving.admin?.port}`
  const metrics = async () => (await fetch(`${admin}/metrics`)).text()
  t.match(await metrics(), /payments_gate_retry_protection_evictions_total 0\n/, 'none yet')
  for (let i = 0; i < 5; i++) {
    const reply = await send(`http://127.0.0.1:${serving.address.port}`, {
      headers: paymentHeaders(),
      body: { ...saleBody(), transactionReference: `evicted-${i}` },
    })
    t.equal(reply.status, 201)
  }
  const text = await metrics()
  t.match(text, /payments_gate_retry_protection_evictions_total 3\n/, 'three payments evicted before their TTL')
  t.match(text, /payments_gate_retry_protection_window_seconds [0-9.e-]+\n/, 'the window')
  const warnings = lines.filter((line) => line.includes('retry-protection memory store full'))
  t.equal(warnings.length, 1, 'one line for the three')
  t.match(JSON.parse(warnings[0] as string), { level: 40, windowSeconds: 0 })
  const again = await send(`http://127.0.0.1:${serving.address.port}`, {
    headers: paymentHeaders(),
    body: { ...saleBody(), transactionReference: 'evicted-4' },
  })
  t.equal(again.headers['idempotent-replayed'], 'true', 'a recent payment is still replayed')
})

t.test(
  'a store full of payments in flight: a new payment is a store failure (closed: 503, open: unprotected), counted apart; none in flight is forgotten',
  async (t) => {
    // The backend holds every payment until told to answer.
    const held: (() => void)[] = []
    let arrival = () => {}
    const holding = await startBackend((req, res, body) => {
      held.push(() => created(req, res, body))
      arrival()
    })
    t.teardown(() => holding.close())
    const arrived = (count: number) =>
      new Promise<void>((resolve) => {
        arrival = () => void (held.length >= count && resolve())
        arrival()
      })
    for (const failure of ['closed', 'open'] as const) {
      const { io: streams, lines } = io()
      const serving = await startServing(
        setup({ idempotencyMaxEntries: 1, idempotencyFailure: failure, target: new URL(holding.url) }),
        streams,
      )
      const gateway = `http://127.0.0.1:${serving.address.port}`
      const payment = (reference: string) =>
        send(gateway, {
          headers: paymentHeaders(),
          body: { ...saleBody(), transactionReference: `${failure}-${reference}` },
        })
      const first = payment('a')
      await arrived(1)
      const retry = await payment('a')
      t.equal(retry.status, 409, `${failure}: the payment in flight is still claimed`)
      const other = payment('b')
      if (failure === 'closed')
        t.match(
          await other,
          { status: 503, json: { errorName: 'serviceUnavailable' } },
          'closed: refused, nothing forwarded',
        )
      else await arrived(2)
      for (const answer of held.splice(0)) answer()
      t.equal((await first).status, 201)
      if (failure === 'open') t.equal((await other).status, 201, 'open: forwarded unprotected')
      const metrics = await (await fetch(`http://127.0.0.1:${serving.admin?.port}/metrics`)).text()
      t.match(metrics, /payments_gate_retry_protection_store_full_total 1\n/, `${failure}: counted as a full store`)
      t.match(metrics, /payments_gate_store_errors_total 1\n/, 'and as a store failure')
      t.match(metrics, failure === 'closed' ? /outcome="storeUnavailable"} 1\n/ : /outcome="unprotected"} 1\n/)
      t.match(metrics, /payments_gate_retry_protection_evictions_total 0\n/, 'nothing evicted')
      t.ok(
        lines.some((line) => line.includes('"msg":"retry-protection store failed"') && line.includes('ESTOREFULL')),
        'logged',
      )
      await serving.stop()
    }
    t.equal(holding.received.length, 3, 'each payment reached the backend once, the refused one never')
  },
)

t.test(
  'with a Redis URL, one client carries retry protection and the login throttle, and stop closes every connection',
  async (t) => {
    const redis = await startRedis(t)
    if (redis === undefined) return
    const observer = new Redis(redis.url, { connectionName: 'observer' })
    t.teardown(() => observer.disconnect())
    /** The connections Redis has open, but the observer's own. */
    const connections = async () => {
      const lines = ((await observer.client('LIST')) as string).split('\n')
      return lines.filter((line) => line !== '' && !line.includes(' name=observer ')).length
    }
    /** Polls until none is left: Redis drops a connection that sent QUIT just after answering it. Fails after 10 s. */
    async function allClosed(): Promise<number> {
      await until(async () => (await connections()) === 0, 10_000)
      return connections()
    }

    const serving = await startServing(
      setup({ idempotency: redis.url, idempotencyFingerprintKey: fingerprintKey, shutdownDelay: 0 }),
      io().io,
    )
    t.equal(await connections(), 1, "one connection: the store's client, which the throttle shares")
    const url = `http://127.0.0.1:${serving.address.port}`
    const wrong = paymentHeaders({ authorization: basic(USERNAME, 'wrong') })
    t.equal((await send(url, { headers: wrong, body: saleBody() })).status, 401)
    t.equal(
      await observer.get(`payments-gate:login:failures:${USERNAME}`),
      '1',
      'the failed login was counted in Redis',
    )
    t.equal((await send(url, { headers: paymentHeaders(), body: saleBody() })).status, 201)
    t.ok((await observer.keys('payments-gate:idem:*')).length > 0, 'the payment was claimed in Redis')
    t.equal(await connections(), 1, 'on the same connection')
    await serving.stop()
    t.equal(await allClosed(), 0, 'stop closed it')

    // Writes that wait for replicas take connections of their own (docs/idempotency-reference.md, replicas and failover): eight.
    const replicated = setup({
      idempotency: redis.url,
      idempotencyFingerprintKey: fingerprintKey,
      idempotencyReplicas: 1,
      shutdownDelay: 0,
    })
    const waiting = await startServing(replicated, io().io)
    t.equal(await connections(), 9, 'the shared client and the eight of acknowledged writes')
    await waiting.stop()
    t.equal(await allClosed(), 0, 'stop closed all nine')

    // A Redis that may evict keys could drop a claim in flight: refused at start, one line naming the flag.
    await observer.config('SET', 'maxmemory-policy', 'volatile-lru')
    await t.rejects(
      startServing(setup({ idempotency: redis.url, idempotencyFingerprintKey: fingerprintKey }), io().io),
      {
        code: 'EUSAGE',
        message: `--idempotency: the Redis at 127.0.0.1:${redis.port} may evict keys (maxmemory-policy volatile-lru): a claim evicted in flight lets a retry through; set maxmemory-policy noeviction`,
      },
    )
    t.equal(await allClosed(), 0, 'its connection closed')
  },
)

t.test('start-up failures: invalid policy, bad credentials, port in use; nothing left listening', async (t) => {
  const port = await takenPort(t)
  const policy = join(dir, 'bad-policies', 'default.json')
  await t.rejects(startServing(setup({ policies: join(dir, 'bad-policies') }), io().io), {
    message: new RegExp(
      `^--policies: ${policy}: .+; fix it \\(payments-gate check-policies DIR lists every problem\\)$`,
    ),
  })
  await t.rejects(startServing(setup({ credentials: join(dir, 'bad.json') }), io().io), {
    message: /^--credentials: .*bad\.json: \$\.users: .*; give a credentials file as docs\/credentials\.md describes$/,
  })
  await t.rejects(startServing(setup({ listen: { host: '127.0.0.1', port } }), io().io), {
    message: `--listen: 127.0.0.1:${port} is in use; stop what listens there or give another port`,
  })
  await t.rejects(startServing(setup({ tlsCert: join(dir, 'none.pem'), tlsKey: join(dir, 'none.key') }), io().io), {
    message: `--tls-cert: ${join(dir, 'none.pem')}: no such file or folder; give a readable PEM file (docs/deployment-reference.md#tls)`,
  })
  await t.rejects(
    startServing(
      setup({ admin: { host: '127.0.0.1', port }, where: (key) => `PAYMENTS_GATE_${key.toUpperCase()}` }),
      io().io,
    ),
    {
      message: `PAYMENTS_GATE_ADMIN: 127.0.0.1:${port} is in use; stop what listens there or give another port`,
    },
  )
})

t.test(
  'the real process with a stdout that refuses every line (/dev/full): payments answered, the failed writes counted in /metrics, SIGTERM ends it with 0',
  async (t) => {
    const full = openSync('/dev/full', 'w')
    t.teardown(() => closeSync(full))
    // Its start-up line is lost with the rest: it is given its ports, and asked whether it is ready.
    const [listen, admin] = [await freePort(), await freePort()]
    const run = spawnCli(
      [
        'serve',
        '--listen',
        `127.0.0.1:${listen}`,
        '--admin',
        `127.0.0.1:${admin}`,
        '--target',
        backend.url,
        '--credentials',
        credentials,
      ],
      { PAYMENTS_GATE_SHUTDOWN_DELAY: '0', ...COVERED },
      'lib/cli.ts',
      { stdout: full },
    )
    t.teardown(() => run.child.kill('SIGKILL'))
    await poll(`http://127.0.0.1:${admin}/readyz`, 200)
    const metrics = () => fetch(`http://127.0.0.1:${admin}/metrics`).then((res) => res.text())
    const url = `http://127.0.0.1:${listen}`
    t.equal((await send(url, { headers: paymentHeaders(), body: saleBody() })).status, 201, 'a payment answered')
    t.ok(
      await until(async () => /payments_gate_log_troubles_total\{trouble="writeFailed"} [1-9]/.test(await metrics())),
      'the failed writes counted',
    )
    run.child.kill('SIGTERM')
    t.equal(await run.exited, 0, 'it stops, its waiting lines given up')
  },
)

t.test('a bad flag is one line on stderr and exit 2, from the real process; a bad variable too', async (t) => {
  const run = spawnCli(['serve', '--target', 'http://127.0.0.1:1', '--credentials', credentials, '--bogus'])
  t.equal(await run.exited, 2)
  t.match(run.output().stderr, /^payments-gate serve: .*bogus.*\n$/)
  // In-process: cli/startup.test.ts shows a real process refusing a variable.
  const env = await runCliOnce(['serve'], { PAYMENTS_GATE_TARGET: 'ftp://x', PAYMENTS_GATE_CREDENTIALS: credentials })
  t.equal(env.code, 2)
  t.match(env.stderr, /^payments-gate serve: PAYMENTS_GATE_TARGET="ftp:\/\/x" must be an http:\/\/ or https:\/\/ URL/)
})

t.test(
  // No Redis client on the memory store, no http-proxy-3 before a path passed through, undici's pool alone, one
  // OpenTelemetry API, the bundled packages from dist/cli.js alone (scripts/bundle-cli.js), not node's own undici.
  'the real process loads what its configuration uses, when it uses it',
  async (t) => {
    const loads = join(t.testdir(), 'loads.txt')
    writeFileSync(loads, '')
    const report = new URL('../helpers/report-loads.mjs', import.meta.url).href
    const run = spawnCli(
      ['serve', '--listen', '127.0.0.1:0', '--target', backend.url, '--credentials', credentials],
      {
        NODE_OPTIONS: `${process.env.NODE_OPTIONS ?? ''} --import=${report}`,
        PAYMENTS_GATE_TEST_LOADS: loads,
        // What it loaded is known once it listens: no shutdown delay to wait out.
        PAYMENTS_GATE_SHUTDOWN_DELAY: '0',
      },
      // What the package runs, as built.
      'dist/cli.js',
    )
    await run.waitFor(/"msg":"gateway listening"/)
    const listening = run
      .output()
      .stdout.split('\n')
      .find((line) => line.includes('"msg":"gateway listening"'))
    const atStart = readFileSync(loads, 'utf8')
    // The report sees the packages serve does load, so its silence on the others means something.
    t.match(atStart, /^pino\//m)
    t.match(atStart, /^undici\/lib\/dispatcher\/pool\.js$/m)
    t.notMatch(atStart, /^undici\/index\.js$/m, "undici's entry point, which loads all of it")
    t.notMatch(atStart, /^ioredis\//m)
    for (const bundled of ['@sinclair/typebox', 'fast-json-stringify', 'ajv', 'prom-client', 'lru-cache'])
      t.notMatch(atStart, new RegExp(`^${bundled}/`, 'm'), `${bundled}: in dist/cli.js (scripts/bundle-cli.js)`)
    t.notMatch(atStart, /^http-proxy-3\//m, 'http-proxy-3 waits for a path passed through')
    t.match(atStart, /^@opentelemetry\/api\/dist\/index\.cjs$/m)
    t.notMatch(atStart, /^@opentelemetry\/api\/dist\/index\.mjs$/m, 'one build of the OpenTelemetry API, not both')
    const port = (JSON.parse(listening as string) as { listen: { port: number } }).listen.port
    const passed = await send(port, { method: 'GET', path: '/status' })
    t.equal(passed.status, 201, 'a path that is not a payment is passed through')
    t.equal(backend.received.at(-1)?.url, '/status')
    t.match(readFileSync(loads, 'utf8'), /^http-proxy-3\//m, 'loaded by it')
    const paid = await send(port, { headers: paymentHeaders(), body: saleBody({ transactionReference: 'loads-1' }) })
    t.equal(paid.status, 201, 'a payment')
    run.child.kill('SIGTERM')
    await run.exited
    const atExit = readFileSync(loads, 'utf8')
    t.match(atExit, /^node:internal\/http$/m, "the report sees node's own modules too")
    t.notMatch(
      atExit,
      /^node:internal\/deps\/undici\/undici$/m,
      "node's own undici, which an import of node:http loads",
    )
    // Without the OTEL_ variables, a payment served and a stop (cli/tracing.test.ts shows the report sees the SDK).
    t.notMatch(atExit, /^@opentelemetry\/(sdk|exporter|resources)/m, 'nothing of the OpenTelemetry SDK')
  },
)

// One process for both: a run of requests, then a stop with one of them still at the backend.
t.test(
  'the real process: after a run of requests, SIGTERM with one in flight lets it finish, then exit 0; every request has its log line',
  async (t) => {
    // The payment `in-flight` answered 300 ms late, the others at once.
    const lateOne = await startBackend((req, res, body) =>
      body.includes('"in-flight"')
        ? setTimeout(() => res.writeHead(201).end('late but whole'), 300)
        : created(req, res, body),
    )
    t.teardown(() => lateOne.close())
    const run = spawnCli(
      [
        'serve',
        '--listen',
        '127.0.0.1:0',
        '--target',
        lateOne.url,
        '--credentials',
        credentials,
        '--admin',
        '127.0.0.1:0',
      ],
      { PAYMENTS_GATE_SHUTDOWN_DELAY: '0' },
    )
    const { listen: port } = await boundPorts(run)
    const post = keepAliveSender(t, `http://127.0.0.1:${port}`)
    const count = 300
    const replies = await Promise.all(
      Array.from({ length: count }, (_, i) =>
        post({ headers: paymentHeaders(), body: { ...saleBody(), transactionReference: `log-${i}` } }),
      ),
    )
    t.same(new Set(replies.map((reply) => reply.status)), new Set([201]))
    const reply = send(`http://127.0.0.1:${port}`, {
      headers: paymentHeaders(),
      body: saleBody({ transactionReference: 'in-flight' }),
    })
    t.ok(await until(() => lateOne.started > count, 10_000), 'the backend has the request')
    run.child.kill('SIGTERM')
    t.match(await reply, { status: 201, text: 'late but whole' })
    t.equal(await run.exited, 0)
    t.match(run.output().stdout, /"msg":"draining"/)
    const lines = run
      .output()
      .stdout.split('\n')
      .filter((line) => line.includes('"operation":"sale"'))
    t.equal(lines.length, count + 1, 'one line per request, the one in flight too, none lost in the buffer')
    t.ok(lines.join('\n').length > 2 * LOG_DEFAULTS.alone.bufferBytes, "lines enough for several of the log's batches")
  },
)
