// A policy's rate limit and the in-flight cap through the real proxy in front of a real backend (docs/policies.md,
// rate limit; docs/deployment.md, backend protection): exact counts across gateways on one Redis, by Redis's clock,
// what a limited payment leaves behind (nothing), replays, hot reload, a store lost, report mode, a slow backend.
import { writeFile, rename } from 'node:fs/promises'
import { join } from 'node:path'
import type { ServerResponse } from 'node:http'
import { Redis } from 'ioredis'
import t, { type Test } from 'tap'
import type { IdempotencyStore } from '../../lib/idempotency/store.js'
import { staticPolicies, type PolicyFile } from '../../lib/policy/policy.js'
import { createGateway } from '../../lib/proxy/server.js'
import { runCli, spawnCli } from '../helpers/cli.js'
import { OTHER_PATH, policy, policyJson, saleBody, writeCredentials, writeFingerprintKey } from '../helpers/fixtures.js'
import { paymentHeaders, type Reply, send, until } from '../helpers/http.js'
import { loggedRequests } from '../helpers/logs.js'
import { startRedis } from '../helpers/redis.js'
import { created, freePort, startBackend, type Answer } from '../helpers/servers.js'
import { type Started, startGateway } from '../helpers/surfaces.js'

let references = 0
const sale = (entity = 'default') => saleBody({ entity, transactionReference: `rate-${++references}` })
const pay = (url: string, body: object, requestId?: string): Promise<Reply> =>
  send(url, { headers: paymentHeaders(requestId === undefined ? {} : { 'x-request-id': requestId }), body })

/** `default` limited as given, `collections` without a limit. */
const limited = (rateLimit: PolicyFile['rateLimit'], more: Partial<PolicyFile> = {}) =>
  staticPolicies([policy({ rateLimit, ...more }), policy({ entity: 'collections' })])

/** The Structured Field the default entity's answers carry: `pk` is `default` in base64. */
const PK = `pk=:${Buffer.from('default').toString('base64')}:`

/** A metric's value in a gateway's registry (0 when never counted). */
async function metric(started: Started, name: string, labels: string): Promise<number> {
  const text = await started.metrics.registry.metrics()
  const line = text.split('\n').find((row) => row.startsWith(`${name}{${labels}}`))
  return line === undefined ? 0 : Number(line.split(' ').at(-1))
}

t.test(
  'two gateways on one Redis: N of 3N payments at once pass, the rest 429 with Retry-After and the RateLimit fields; nothing claimed for them; a replay neither counted nor limited',
  async (t) => {
    const redis = await startRedis(t)
    if (redis === undefined) return
    const options = { idempotency: redis.url, gate: { policies: limited({ payments: 10, seconds: 60 }) } }
    const gateways = [await startGateway(t, options), await startGateway(t, options)]
    const payments = Array.from({ length: 30 }, () => sale())
    const replies = await Promise.all(payments.map((body, i) => pay((gateways[i % 2] as Started).url, body)))
    const passed = replies.filter((reply) => reply.status === 201)
    const refused = replies.filter((reply) => reply.status === 429)
    t.equal(passed.length, 10, 'exactly N forwarded')
    t.equal(refused.length, 20, 'the rest refused')
    t.equal(
      gateways.reduce((sum, { backend }) => sum + backend.received.length, 0),
      10,
      'the backend got N',
    )
    for (const reply of passed)
      t.equal(reply.headers['ratelimit-policy'], `"payments";q=10;w=60;${PK}`, 'the policy on a forwarded answer')
    const remaining = passed.map((reply) => Number(/;r=(\d+);t=(\d+);/.exec(reply.headers.ratelimit as string)?.[1]))
    t.same(
      remaining.sort((a, b) => a - b),
      [0, 1, 2, 3, 4, 5, 6, 7, 8, 9],
      'each forwarded answer says what was left after it, each count once',
    )
    for (const reply of refused) {
      const after = Number(reply.headers['retry-after'])
      t.match(reply.json, { errorName: 'requestRateIsTooHigh' })
      t.ok(after >= 1 && after <= 60, `Retry-After ${after}: whole seconds, within the window`)
      t.equal(reply.headers.ratelimit, `"payments";r=0;t=${after};${PK}`)
      t.equal(reply.headers['ratelimit-policy'], `"payments";q=10;w=60;${PK}`)
    }
    const store = new Redis({ port: redis.port, host: '127.0.0.1' })
    t.teardown(() => store.disconnect())
    t.equal((await store.keys('payments-gate:idem:*')).length, 10, 'a limited payment is never claimed')
    const index = replies.findIndex((reply) => reply.status === 201)
    const replay = await pay((gateways[1] as Started).url, payments[index] as object)
    t.equal(replay.headers['idempotent-replayed'], 'true', 'over the limit, a retry of a forwarded payment is replayed')
    t.equal(replay.headers.ratelimit, undefined, 'a replay carries no RateLimit fields')
    t.equal(replay.headers['ratelimit-policy'], undefined)
    const again = await pay(
      (gateways[0] as Started).url,
      payments[replies.findIndex((r) => r.status === 429)] as object,
    )
    t.equal(again.status, 429, 'a limited payment sent again is limited again, not in flight nor replayed')
    const other = await pay((gateways[0] as Started).url, sale('collections'))
    t.equal(other.status, 201, 'an entity without a limit is not held back')
    t.equal(other.headers.ratelimit, undefined, 'nor told of one')
    const counted = async (outcome: string) =>
      (await metric(
        gateways[0] as Started,
        'payments_gate_rate_limit_total',
        `entity="default",outcome="${outcome}"`,
      )) +
      (await metric(gateways[1] as Started, 'payments_gate_rate_limit_total', `entity="default",outcome="${outcome}"`))
    t.equal(await counted('admitted'), 10)
    t.equal(await counted('limited'), 21)
  },
)

t.test(
  "a limited payment's retry after Retry-After is a new payment; a reload changes the limit from then on, and what was counted still counts",
  async (t) => {
    const dir = t.testdir({ 'default.json': policyJson('default', { rateLimit: { payments: 1, seconds: 1 } }) })
    const started = await startGateway(t, { idempotency: 'memory', gate: { policies: dir } })
    const { url, gate, backend } = started
    const body = (reference: string) => ({ ...saleBody(), transactionReference: reference })
    t.equal((await pay(url, body('reload-1'))).status, 201)
    const refused = await pay(url, body('reload-2'))
    t.equal(refused.status, 429)
    t.equal(refused.headers['retry-after'], '1')
    let retry = refused
    t.ok(
      await until(async () => (retry = await pay(url, body('reload-2'))).status !== 429, 10_000),
      'admitted once the window moved past the first',
    )
    t.equal(retry.status, 201, 'forwarded as a new payment: nothing was left under its reference')
    t.equal(retry.headers['idempotent-replayed'], undefined)
    t.equal(backend.received.length, 2)
    const next = join(dir, 'default.json.next')
    await writeFile(next, policyJson('default', { rateLimit: { payments: 3, seconds: 60 } }))
    await rename(next, join(dir, 'default.json'))
    await gate.reload()
    t.same(gate.policies.get('default')?.rateLimit, { payments: 3, seconds: 60 }, 'reloaded')
    const after = [await pay(url, body('reload-3')), await pay(url, body('reload-4')), await pay(url, body('reload-5'))]
    t.same(
      after.map((reply) => reply.status),
      [201, 201, 429],
      'the retry admitted before the reload still counts: two more of three',
    )
    t.equal(after[0]?.headers['ratelimit-policy'], `"payments";q=3;w=60;${PK}`, 'the new limit in the fields')
    t.match(after[0]?.headers.ratelimit, /^"payments";r=1;t=(59|60);/)
  },
)

t.test("gateways whose clocks disagree by two hours count alike: Redis's clock decides", async (t) => {
  const redis = await startRedis(t)
  if (redis === undefined) return
  const backend = await startBackend()
  t.teardown(() => backend.close())
  const dir = t.testdir({
    policies: { 'default.json': policyJson('default', { rateLimit: { payments: 6, seconds: 3600 } }) },
    keys: {},
  })
  const credentials = await writeCredentials(join(dir, 'keys'))
  const key = await writeFingerprintKey(join(dir, 'keys'))
  const ports: number[] = []
  for (const skew of [3_600_000, -3_600_000]) {
    const port = await freePort()
    const run = spawnCli(
      [
        'serve',
        ...['--listen', `127.0.0.1:${port}`, '--target', backend.url, '--credentials', credentials],
        ...['--policies', join(dir, 'policies'), '--idempotency', redis.url, '--idempotency-fingerprint-key', key],
        ...['--shutdown-delay', '0'],
      ],
      {
        TEST_CLOCK_SKEW_MS: String(skew),
        NODE_OPTIONS: `${process.env.NODE_OPTIONS ?? ''} --import=${new URL('../helpers/skewed-clock.mjs', import.meta.url).href}`,
      },
    )
    t.teardown(() => void run.child.kill('SIGKILL'))
    await run.waitFor(/"msg":"gateway listening"/)
    ports.push(port)
  }
  // The gateway behind first: a gateway that scored payments by its own clock would see them an hour old.
  const [ahead, behind] = ports.map((port) => `http://127.0.0.1:${port}`) as [string, string]
  const body = (i: number) => ({ ...saleBody({ entity: 'default' }), transactionReference: `skew-${i}` })
  const first = await Promise.all(Array.from({ length: 9 }, (_, i) => pay(behind, body(i))))
  const then = await Promise.all(Array.from({ length: 9 }, (_, i) => pay(ahead, body(9 + i))))
  const replies = [...first, ...then]
  t.equal(replies.filter((reply) => reply.status === 201).length, 6, 'six of eighteen, whichever gateway took them')
  t.equal(backend.received.length, 6)
})

t.test(
  'the store lost: closed refuses with 503 and forwards nothing; open forwards, not limited, counted',
  async (t) => {
    for (const failure of ['closed', 'open'] as const) {
      const redis = await startRedis(t)
      if (redis === undefined) return
      const started = await startGateway(t, {
        idempotency: redis.url,
        idempotencyFailure: failure,
        gate: { policies: limited({ payments: 100, seconds: 60 }) },
      })
      t.equal((await pay(started.url, sale())).status, 201, `${failure}: Redis up`)
      await redis.stop()
      const reply = await pay(started.url, sale())
      if (failure === 'closed') {
        t.equal(reply.status, 503)
        t.match(reply.json, { errorName: 'serviceUnavailable' })
        t.equal(started.backend.received.length, 1, 'closed: nothing forwarded')
        t.equal(await metric(started, 'payments_gate_rate_limit_total', 'entity="default",outcome="unavailable"'), 1)
      } else {
        t.equal(reply.status, 201, 'open: forwarded')
        t.equal(reply.headers.ratelimit, undefined, 'no count, no fields')
        t.equal(started.backend.received.length, 2)
        t.equal(await metric(started, 'payments_gate_rate_limit_total', 'entity="default",outcome="unchecked"'), 1)
      }
    }
  },
)

t.test(
  "report mode counts and reports what the limit would do, refuses nothing, adds no fields; it writes the limit's count to the store, where retry protection only looks",
  async (t) => {
    const redis = await startRedis(t)
    if (redis === undefined) return
    const started = await startGateway(t, {
      idempotency: redis.url,
      gate: { policies: limited({ payments: 2, seconds: 60 }, { mode: 'report' }) },
    })
    const replies = []
    for (let i = 0; i < 4; i++) replies.push(await pay(started.url, sale(), `report-limit-${i}`))
    t.same(
      replies.map((reply) => reply.status),
      [201, 201, 201, 201],
      'every payment forwarded',
    )
    t.ok(
      replies.every((reply) => reply.headers.ratelimit === undefined),
      'the answers as the backend sent them',
    )
    const lines = loggedRequests().filter((line) => String(line.requestId).startsWith('report-limit-'))
    t.same(
      lines.map((line) => line.wouldRefuse),
      [undefined, undefined, 'requestRateIsTooHigh', 'requestRateIsTooHigh'],
    )
    t.equal(
      await metric(
        started,
        'payments_gate_would_refuse_total',
        'operation="sale",error_name="requestRateIsTooHigh",entity="default"',
      ),
      2,
    )
    t.equal(await metric(started, 'payments_gate_rate_limit_total', 'entity="default",outcome="reported"'), 2)
    const store = new Redis({ port: redis.port, host: '127.0.0.1' })
    t.teardown(() => store.disconnect())
    t.same(await store.keys('payments-gate:*'), ['payments-gate:rate:{default}'], 'counted; no key claimed')
  },
)

/** A backend that holds every payment (a POST) until the test lets it go, and answers anything else at once. */
function heldBackend(): { answer: Answer; held: ServerResponse[]; release(): void } {
  const held: ServerResponse[] = []
  return {
    held,
    answer: (req, res, body) => (req.method === 'POST' ? void held.push(res) : created(req, res, body)),
    release() {
      for (const res of held.splice(0)) {
        res.writeHead(201, { 'content-type': 'application/vnd.example.payments-v6.hal+json' })
        res.end('{}')
      }
    },
  }
}

t.test(
  '--backend-max-in-flight with a slow backend: the payment past the cap is answered 503 at once, nothing claimed; other paths pass; a place is free again once the backend answers',
  async (t) => {
    const backend = heldBackend()
    const started = await startGateway(t, { idempotency: 'memory', backendMaxInFlight: 2, answer: backend.answer })
    const { url } = started
    const first = [pay(url, sale()), pay(url, sale())]
    t.ok(await until(() => backend.held.length === 2, 10_000), 'two payments at the backend')
    const shedBody = sale()
    const shed = await pay(url, shedBody, 'shed-1')
    t.equal(shed.status, 503)
    t.equal(shed.headers['retry-after'], '1')
    t.match(shed.json, { errorName: 'serviceUnavailable', message: /as many payments as it may/ })
    t.match(
      loggedRequests().find((line) => line.requestId === 'shed-1'),
      { limited: 'shed', status: 503, entity: 'default' },
    )
    t.equal(await metric(started, 'payments_gate_shed_total', 'entity="default"'), 1)
    const other = await send(url, { method: 'GET', path: OTHER_PATH })
    t.equal(other.status, 201, 'a path passed through is not counted')
    const refused = await pay(url, {
      ...sale(),
      instruction: { ...sale().instruction, value: { amount: 1, currency: 'JPY' } },
    })
    t.equal(refused.status, 503, 'checked before the policy refuses it too: the cap comes first')
    backend.release()
    t.same(
      (await Promise.all(first)).map((reply) => reply.status),
      [201, 201],
    )
    const retried = pay(url, shedBody)
    t.ok(await until(() => backend.held.length === 1, 10_000), 'the shed payment, sent again, reaches the backend')
    backend.release()
    const answered = await retried
    t.equal(answered.status, 201, 'a new payment: nothing was claimed for it')
    t.equal(answered.headers['idempotent-replayed'], undefined)
  },
)

t.test(
  '--backend-max-in-flight and retry protection: at the cap, a retry gets its 409 or its replay; a new payment is shed, its claim released',
  async (t) => {
    const backend = heldBackend()
    const started = await startGateway(t, { idempotency: 'memory', backendMaxInFlight: 1, answer: backend.answer })
    const { url } = started
    const [charged, fresh, holder] = [sale(), sale(), sale()]
    const first = pay(url, charged)
    t.ok(await until(() => backend.held.length === 1, 10_000), 'the one place is taken')
    t.match(
      await pay(url, charged),
      { status: 409, json: { errorName: 'paymentIsInProgress' } },
      'in progress, not shed',
    )
    t.match(await pay(url, fresh, 'shed-new'), { status: 503, json: { message: /as many payments as it may/ } })
    t.match(
      loggedRequests().find((line) => line.requestId === 'shed-new'),
      { limited: 'shed' },
    )
    backend.release()
    t.equal((await first).status, 201)
    const third = pay(url, holder)
    t.ok(await until(() => backend.held.length === 1, 10_000), 'the place is taken again')
    const replay = await pay(url, charged, 'replayed-at-cap')
    t.equal(replay.status, 201, 'the charged payment is replayed, not shed')
    t.equal(replay.headers['idempotent-replayed'], 'true')
    t.equal(
      loggedRequests().find((line) => line.requestId === 'replayed-at-cap')?.limited,
      undefined,
      'not counted as shed',
    )
    t.equal(await metric(started, 'payments_gate_shed_total', 'entity="default"'), 1)
    backend.release()
    t.equal((await third).status, 201)
    const retried = pay(url, fresh)
    t.ok(await until(() => backend.held.length === 1, 10_000), 'the shed payment, sent again, reaches the backend')
    backend.release()
    t.equal((await retried).headers['idempotent-replayed'], undefined, 'a new payment: its claim was released')
  },
)

t.test('--backend-max-in-flight in report mode: the payment past the cap is shed too', async (t) => {
  const backend = heldBackend()
  const started = await startGateway(t, {
    idempotency: 'memory',
    backendMaxInFlight: 1,
    answer: backend.answer,
    gate: { mode: 'report' },
  })
  const first = pay(started.url, sale())
  t.ok(await until(() => backend.held.length === 1, 10_000), 'passed on as it came')
  t.match(await pay(started.url, sale(), 'shed-report'), {
    status: 503,
    json: { message: /as many payments as it may/ },
  })
  t.match(
    loggedRequests().find((line) => line.requestId === 'shed-report'),
    { limited: 'shed', status: 503 },
  )
  backend.release()
  t.equal((await first).status, 201)
})

t.test('--backend-max-in-flight with a store that fails, failure open: the payment past the cap is shed', async (t) => {
  const backend = heldBackend()
  const broken: IdempotencyStore = {
    claim: () => Promise.reject(new Error('the store is down')),
    record: () => undefined,
    release: () => undefined,
    close: async () => undefined,
  }
  const started = await startGateway(t, {
    idempotency: broken,
    idempotencyFailure: 'open',
    backendMaxInFlight: 1,
    answer: backend.answer,
  })
  const first = pay(started.url, sale())
  t.ok(await until(() => backend.held.length === 1, 10_000), 'forwarded unprotected')
  t.match(await pay(started.url, sale()), { status: 503, json: { message: /as many payments as it may/ } })
  backend.release()
  t.equal((await first).status, 201)
})

t.test('a payment whose client left keeps its place until the backend answers', async (t) => {
  const backend = heldBackend()
  const started = await startGateway(t, { idempotency: 'off', backendMaxInFlight: 1, answer: backend.answer })
  const controller = new AbortController()
  const gone = fetch(`${started.url}/payments/sales/migrateCardOnFile`, {
    method: 'POST',
    headers: paymentHeaders() as Record<string, string>,
    body: JSON.stringify(sale()),
    signal: controller.signal,
  }).catch(() => undefined)
  t.ok(await until(() => backend.held.length === 1, 10_000))
  controller.abort()
  await gone
  t.equal((await pay(started.url, sale())).status, 503, 'still with the backend: its place is taken')
  backend.release()
  t.ok(
    await until(async () => {
      const reply = pay(started.url, sale())
      await until(() => backend.held.length > 0 || false, 200)
      backend.release()
      return (await reply).status === 201
    }, 10_000),
    'free once the backend answered',
  )
})

t.test('bad values are refused before anything starts', async (t) => {
  t.throws(
    () =>
      createGateway({ checks: {} as never, target: 'http://127.0.0.1:1', logger: {} as never, backendMaxInFlight: 0 }),
    { code: 'EINVALID', message: /backendMaxInFlight=0 must be a whole number of payments from 1/ },
  )
  const dir = t.testdir({
    'default.json': policyJson('default', { rateLimit: { payments: 0, seconds: 1.5, burst: 3 } }),
  })
  // The refusals in this process, through the command's main: test/cli/startup.test.ts shows each kind in a real one.
  const checked = await runCli(['check-policies', dir])
  t.equal(checked.code, 1)
  const said = checked.stdout + checked.stderr
  t.match(said, /\$\.rateLimit\.payments: The value must be at least 1\. \(integerIsTooSmall\)/)
  t.match(said, /\$\.rateLimit\.seconds: .*\(fieldMustBeInteger\)/)
  t.match(said, /\$\.rateLimit\.burst: .*\(fieldIsNotAllowed\)/)
  const credentials = await writeCredentials(t.testdir())
  const serve = await runCli([
    'serve',
    '--target',
    'http://127.0.0.1:1',
    '--credentials',
    credentials,
    '--backend-max-in-flight',
    '0',
  ])
  t.equal(serve.code, 2)
  t.match(
    serve.stderr,
    /^payments-gate serve: --backend-max-in-flight="0" must be a whole number of payments from 1, below 2\^53\n$/,
  )
})

t.test('a limit needs no retry protection: with --idempotency off, counted in this process', async (t: Test) => {
  const started = await startGateway(t, {
    idempotency: 'off',
    gate: { policies: limited({ payments: 1, seconds: 60 }) },
  })
  t.equal((await pay(started.url, sale())).status, 201)
  const refused = await pay(started.url, sale())
  t.equal(refused.status, 429)
  const policyRefused = await pay(started.url, {
    ...sale(),
    instruction: { ...sale().instruction, value: { amount: 1, currency: 'JPY' } },
  })
  t.equal(policyRefused.status, 400, 'a payment its policy refuses is refused for that, and not counted')
  t.equal(started.backend.received.length, 1)
})

t.test(
  'report mode does not count a payment retry protection would answer, and a failing store refuses nothing',
  async (t) => {
    const redis = await startRedis(t)
    if (redis === undefined) return
    const policies = limited({ payments: 5, seconds: 60 })
    const enforce = await startGateway(t, { idempotency: redis.url, gate: { policies } })
    const report = await startGateway(t, { idempotency: redis.url, mode: 'report', gate: { policies } })
    const body = sale()
    t.equal((await pay(enforce.url, body)).status, 201, 'recorded by a gateway that enforces')
    t.equal((await pay(report.url, body, 'report-replayed')).status, 201)
    t.match(
      loggedRequests().find((line) => line.requestId === 'report-replayed'),
      { wouldRetryProtection: 'replayed' },
    )
    t.equal(
      await metric(report, 'payments_gate_rate_limit_total', 'entity="default",outcome="admitted"'),
      0,
      'not counted',
    )
    await redis.stop()
    t.equal((await pay(report.url, sale())).status, 201, 'the store gone: passed on')
    t.equal(await metric(report, 'payments_gate_rate_limit_total', 'entity="default",outcome="unchecked"'), 1)
  },
)
