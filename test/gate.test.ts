import t from 'tap'
import { NO_RULES } from '../lib/backend-errors/rules.js'
import { createGate, type Gate, type GateOptions } from '../lib/gate.js'
import type { IdempotencyStore } from '../lib/idempotency/store.js'
import { writeFile } from 'node:fs/promises'
import { createServer } from 'node:http'
import { createRedisClient } from '../lib/idempotency/redis-client.js'
import { LOGIN_KEY_PREFIX } from '../lib/login-throttle-redis.js'
import { serializeError } from '../lib/errors.js'
import { CASES } from './helpers/cases.js'
import {
  basic,
  FINGERPRINT_KEY,
  OTHER_PATH,
  POLICIES_DIR,
  saleBody,
  TEST_PAN,
  USERNAME,
  writeCredentials,
} from './helpers/fixtures.js'
import { paymentHeaders, raw, type Reply, send, until } from './helpers/http.js'
import { startRedis } from './helpers/redis.js'
import { closeServer, listenOnLoopback } from './helpers/servers.js'
import { scanLogsForCards } from './helpers/logs.js'
import { type Echo, everyEmbedding } from './helpers/surfaces.js'

/** The answer's parts that must not differ between embeddings (Express adds X-Powered-By, Fastify its own headers). */
function comparable(answer: Reply) {
  const { headers } = answer
  return {
    status: answer.status,
    contentType: headers['content-type'],
    contentLength: headers['content-length'],
    wwwAuthenticate: headers['www-authenticate'],
    allow: headers.allow,
    connection: headers.connection,
    body: answer.body.toString('latin1'),
  }
}

t.test('the shared table gives the same answers from the node handler, Express, Fastify and the proxy', async (t) => {
  const { embeddings, agent } = await everyEmbedding(t)

  for (const c of CASES) {
    await t.test(c.name, async (t) => {
      const answers: Reply[] = []
      for (const embedding of embeddings) {
        const before = embedding.handled()
        const answer = await send(embedding.port, c, agent)
        answers.push(answer)
        t.equal(answer.status, c.status, `${embedding.name}: status`)
        for (const [name, value] of Object.entries(c.responseHeaders ?? {}))
          t.equal(answer.headers[name], value, `${embedding.name}: ${name}`)
        const passed = c.errorName === undefined
        t.equal(
          embedding.handled() - before,
          passed ? 1 : 0,
          `${embedding.name}: ${passed ? 'handed to the application once' : 'never handed to the application'}`,
        )
        if (c.errorName !== undefined) {
          t.equal(answer.headers['content-type'], 'application/json', `${embedding.name}: content-type`)
          const body = JSON.parse(answer.body.toString())
          t.equal(body.errorName, c.errorName, `${embedding.name}: errorName`)
          t.type(body.message, 'string', `${embedding.name}: a message`)
          if (c.match !== undefined) t.match(body, c.match, `${embedding.name}: the answer's fields`)
          if (c.rejection !== undefined)
            t.equal(
              answer.body.toString(),
              serializeError(c.rejection.body),
              `${embedding.name}: the serializer's bytes`,
            )
          t.notOk(answer.text.includes(TEST_PAN), `${embedding.name}: the answer does not hold the card number`)
        } else if (c.status === 201) {
          const echo = JSON.parse(answer.body.toString()) as Echo
          t.equal(echo.username, 'shop-1', `${embedding.name}: principal`)
          t.equal(
            echo.entity,
            (echo.document as { merchant: { entity: string } }).merchant.entity,
            `${embedding.name}: entity`,
          )
        } else {
          t.equal(answer.body.toString(), 'other', `${embedding.name}: untouched`)
        }
      }
      if (c.errorName !== undefined) {
        const [first, ...rest] = answers.map(comparable)
        for (const [i, other] of rest.entries())
          t.same(other, first, `${embeddings[i + 1]!.name} answers byte for byte as node`)
      }
    })
  }
})

t.test(
  'request ids: on every answer to an operation, in the context the application gets; none added on other paths by the middleware',
  async (t) => {
    const { embeddings, agent } = await everyEmbedding(t)
    let reference = 0
    for (const embedding of embeddings) {
      const sale = { ...saleBody(), transactionReference: `request-id-${embedding.name}-${++reference}` }
      const passed = await send(
        embedding.port,
        { headers: paymentHeaders({ 'x-request-id': 'mine-1' }), body: sale },
        agent,
      )
      t.equal(passed.status, 201, embedding.name)
      t.equal(passed.headers['x-request-id'], 'mine-1', `${embedding.name}: on the application's answer`)
      t.equal((JSON.parse(passed.text) as Echo).requestId, 'mine-1', `${embedding.name}: given to the application`)
      const fresh = await send(
        embedding.port,
        {
          headers: paymentHeaders({ 'x-request-id': 'not sane' }),
          body: { ...sale, transactionReference: `request-id-${++reference}` },
        },
        agent,
      )
      t.match(fresh.headers['x-request-id'], /^[\w-]{12}-[0-9a-z]+$/, `${embedding.name}: a new one`)
      t.equal(
        (JSON.parse(fresh.text) as Echo).requestId,
        fresh.headers['x-request-id'],
        `${embedding.name}: the same one`,
      )
      const refused = await send(
        embedding.port,
        { headers: paymentHeaders({ 'x-request-id': 'mine-2', authorization: 'Basic eDp5' }), body: sale },
        agent,
      )
      t.equal(refused.status, 401)
      t.equal(refused.headers['x-request-id'], 'mine-2', `${embedding.name}: on a refusal`)
      const other = await send(
        embedding.port,
        { method: 'GET', path: OTHER_PATH, headers: { 'x-request-id': 'mine-3' } },
        agent,
      )
      t.equal(
        other.headers['x-request-id'],
        embedding.name === 'proxy' ? 'mine-3' : undefined,
        `${embedding.name}: other paths`,
      )
    }
  },
)

t.test(
  'every surface reads a request target as the proxy does: absolute form routed, a fragment refused',
  async (t) => {
    const { embeddings } = await everyEmbedding(t)
    const body = JSON.stringify({ made: 'up' })
    const request = (target: string) =>
      `POST ${target} HTTP/1.1\r\nHost: a\r\nConnection: close\r\nContent-Type: application/json\r\nContent-Length: ${body.length}\r\n\r\n${body}`
    for (const embedding of embeddings) {
      const absolute = await raw(embedding.port, request('http://any-host/payments/sales/migrateCardOnFile'), {
        keepOpen: true,
      })
      t.match(absolute, /^HTTP\/1\.1 401 /, `${embedding.name}: absolute form, no credentials`)
      const fragment = await raw(embedding.port, request('/payments/sales/migrateCardOnFile#x'), { keepOpen: true })
      t.match(fragment, /^HTTP\/1\.1 400 [^]*"errorName":"requestIsMalformed"/, `${embedding.name}: a fragment`)
      t.equal(embedding.handled(), 0, `${embedding.name}: nothing handed to the application`)
    }
  },
)

t.test('the application receives the rewritten document', async (t) => {
  const { gate, embeddings, agent } = await everyEmbedding(t)
  const clean = CASES[0]!
  const expected = gate.checks.checkBody('sale', Buffer.from(clean.body as string))
  t.ok(expected.ok)
  for (const embedding of embeddings) {
    const echo = JSON.parse((await send(embedding.port, clean, agent)).body.toString()) as Echo
    t.same(echo.document, expected.ok && expected.document, `${embedding.name}: the document the checks produced`)
    const { merchant, instruction } = echo.document as {
      merchant: { mcc: string }
      instruction: { narrative: { line1: string } }
    }
    t.equal(merchant.mcc, '5734', `${embedding.name}: mcc filled in from the policy`)
    t.equal(instruction.narrative.line1, 'Mind Palace Ltd   Caf   ', `${embedding.name}: line1 replaced and truncated`)
    t.same([echo.operation, echo.entity, echo.username], ['sale', 'default', 'shop-1'])
  }
})

t.test(
  'a body limit below the smallest payment is refused before anything is opened, as --body-limit is',
  async (t) => {
    await t.rejects(
      createGate({ policies: new Map(), credentials: { authenticate: () => undefined as never }, bodyLimit: 0 }),
      { code: 'EINVALID', message: /^bodyLimit=0 must be a whole number of bytes from 167, below 2\^53$/ },
    )
  },
)

t.test('own policy source and authenticator; close is a no-op without a watched folder', async (t) => {
  const gate: Gate = await createGate({
    policies: new Map(),
    credentials: { authenticate: () => ({ username: 'u', entities: new Set(['default']) }) },
  })
  const verdict = gate.checks.checkBody('recurring', Buffer.from(JSON.stringify({})))
  t.equal(verdict.ok, false)
  t.equal(gate.checks.bodyLimit, 65536)
  t.equal(gate.checks.mediaTypes.request, 'application/vnd.example.payments-v6+json')
  await gate.close()
})

t.test(
  'throttleRedis: a client of yours shares the failed-login throttle of the middleware and stays open; a URL is opened and closed by the gate',
  async (t) => {
    const redis = await startRedis(t)
    if (redis === undefined) return
    const credentials = await writeCredentials(t.testdir())
    const client = createRedisClient(redis.url)
    t.teardown(() => client.disconnect())
    const gate = await createGate({ policies: POLICIES_DIR, credentials, throttleRedis: client })
    const server = createServer(gate.handler((_req, res) => res.end()))
    const port = await listenOnLoopback(server)
    t.teardown(() => closeServer(server))
    const wrong = await send(port, {
      path: '/payments/sales/migrateCardOnFile',
      headers: { ...paymentHeaders(), authorization: basic(USERNAME, 'wrong') },
      body: saleBody(),
    })
    t.equal(wrong.status, 401)
    t.same(
      await client.keys(`${LOGIN_KEY_PREFIX}*`),
      [`${LOGIN_KEY_PREFIX}failures:${USERNAME}`],
      'the failure is counted in Redis',
    )
    await gate.close()
    t.equal(client.status, 'ready', 'a client given is the caller to close')
    const owning = await createGate({ policies: POLICIES_DIR, credentials, throttleRedis: redis.url })
    await owning.close()
    const dir = t.testdir({ 'bad.json': '{"users": 1}' })
    await t.rejects(
      createGate({ credentials: `${dir}/bad.json`, throttleRedis: redis.url }),
      { code: 'ECREDENTIALS' },
      'a gate that cannot start closes the client it opened',
    )
    // The store's client code, its messages naming the gate's options.
    await t.rejects(createGate({ credentials, throttleRedis: 'mongodb://x' }), {
      code: 'EIDEMPOTENCY',
      message: /^throttleRedis "mongodb:\/\/x" is none of redis:\/\//,
    })
    await t.rejects(createGate({ credentials, throttleRedis: redis.url, throttleRedisCa: Buffer.from('ca') }), {
      code: 'EIDEMPOTENCY',
      message: /^throttleRedis is not a TLS URL, and a CA bundle \(throttleRedisCa\) is only for one of rediss:\/\//,
    })
  },
)

t.test('without policies, the folder ./policies is loaded and watched', async (t) => {
  const gate = await createGate({
    credentials: { authenticate: () => ({ username: 'u', entities: new Set<string>() }) },
  })
  t.teardown(() => gate.close())
  t.ok(gate.policies.get('default'), 'the sample policy of the working folder')
})

t.test('backend-errors rules: a file loaded and watched, or a source of your own; none by default', async (t) => {
  const dir = t.testdir({
    'rules.json': JSON.stringify({ rules: [{ status: 404, errorName: 'resourceIsNotFound' }] }),
    'bad.json': '{"rules": [1]}',
  })
  const options = {
    policies: new Map(),
    credentials: { authenticate: () => ({ username: 'u', entities: new Set<string>() }) },
  }
  const watched = await createGate({ ...options, backendErrors: `${dir}/rules.json` })
  t.match(watched.backendErrors?.rules.rules, [{ from: 404, errorName: 'resourceIsNotFound' }])
  await writeFile(`${dir}/rules.json`, JSON.stringify({ rules: [{ status: 409, errorName: 'requestIsInConflict' }] }))
  await watched.reload()
  t.match(
    watched.backendErrors?.rules.rules,
    [{ from: 409, errorName: 'requestIsInConflict' }],
    'reload (SIGHUP) re-reads the rules file at once',
  )
  await watched.close()
  const own = { rules: NO_RULES }
  const mine = await createGate({ ...options, backendErrors: own })
  t.equal(mine.backendErrors, own)
  await mine.close()
  const none = await createGate(options)
  t.equal(none.backendErrors, undefined)
  await none.close()
  await t.rejects(createGate({ ...options, backendErrors: `${dir}/bad.json` }), {
    code: 'EBACKENDERRORS',
    message: `${dir}/bad.json: $.rules[0]: must be an object`,
  })
  await t.rejects(
    createGate({ ...options, policies: 'policies', backendErrors: `${dir}/missing.json` }),
    { code: 'EBACKENDERRORS' },
    'the policy folder is let go too',
  )
})

t.test('retry protection around the handler: its settings are checked before anything is opened', async (t) => {
  const options = { policies: new Map(), credentials: { authenticate: () => undefined as never } }
  const refused: [Partial<GateOptions>, string, RegExp][] = [
    [{ idempotencyInFlight: 0 }, 'EINVALID', /^idempotencyInFlight=0 must be a whole number of seconds from 1 to /],
    [{ idempotencyTtl: 1.5 }, 'EINVALID', /^idempotencyTtl=1.5 /],
    [{ idempotencyReplicas: -1 }, 'EINVALID', /^idempotencyReplicas=-1 /],
    [{ idempotencyMaxEntries: 0 }, 'EINVALID', /^idempotencyMaxEntries=0 /],
    [{ idempotencyFailure: 'maybe' as 'open' }, 'EINVALID', /^idempotencyFailure="maybe" must be closed or open$/],
    [{ idempotency: 'mongodb://x' }, 'EIDEMPOTENCY', /is none of memory, off, /],
    [{ idempotency: 'redis://127.0.0.1:1/0' }, 'EFINGERPRINTKEY', /must be given with a Redis store/],
    [
      { idempotency: 'memory', idempotencyReplicas: 1 },
      'EIDEMPOTENCY',
      /^idempotencyReplicas 1 needs a Redis store in idempotency: only Redis has replicas to wait for$/,
    ],
  ]
  for (const [settings, code, message] of refused)
    await t.rejects(createGate({ ...options, ...settings }), { code, message }, JSON.stringify(settings))
})

t.test('a store of yours is yours to close; store failures go to onStoreError', async (t) => {
  let closed = 0
  const failures: unknown[] = []
  const store: IdempotencyStore = {
    claim: () => Promise.reject(new Error('down')),
    record() {},
    release() {},
    close: async () => void closed++,
  }
  const gate = await createGate({
    policies: POLICIES_DIR,
    credentials: await writeCredentials(t.testdir()),
    idempotency: store,
    onStoreError: (error) => failures.push(error),
  })
  const server = createServer(gate.handler((_req, res) => res.end('handled')))
  const port = await listenOnLoopback(server)
  t.teardown(() => closeServer(server))
  t.equal((await send(port, { headers: paymentHeaders(), body: saleBody() })).status, 503)
  t.match(failures, [{ message: 'down' }])
  await gate.close()
  t.equal(closed, 0, 'a store given is the caller to close')
})

t.test(
  'a Redis store: one client carries the throttle when throttleRedis names the same Redis; the gate closes it',
  async (t) => {
    const redis = await startRedis(t)
    if (redis === undefined) return
    const credentials = await writeCredentials(t.testdir())
    const observer = createRedisClient(redis.url)
    t.teardown(() => observer.disconnect())
    const clients = async () =>
      String(await observer.client('LIST'))
        .trim()
        .split('\n').length - 1
    const protectedGate = (throttleRedis: string | undefined) =>
      createGate({
        policies: POLICIES_DIR,
        credentials,
        idempotency: redis.url,
        idempotencyFingerprintKey: FINGERPRINT_KEY,
        throttleRedis,
      })
    const one = await protectedGate(redis.url)
    t.equal(await clients(), 1, 'one client for the store and the throttle')
    const server = createServer(one.handler((_req, res) => res.end()))
    const port = await listenOnLoopback(server)
    t.teardown(() => closeServer(server))
    const wrong = { ...paymentHeaders(), authorization: basic(USERNAME, 'wrong') }
    t.equal((await send(port, { headers: wrong, body: saleBody() })).status, 401)
    t.same(await observer.keys(`${LOGIN_KEY_PREFIX}*`), [`${LOGIN_KEY_PREFIX}failures:${USERNAME}`], 'counted there')
    await one.close()
    t.ok(await until(async () => (await clients()) === 0), 'closed with the gate')
    const two = await protectedGate(redis.url.replace(/\/0$/, '/1'))
    t.equal(await clients(), 2, 'another Redis for the throttle: a client of its own')
    await two.close()
    const alone = await protectedGate(undefined)
    t.equal(await clients(), 1, 'no throttleRedis: the throttle counts in the process, as before')
    await alone.close()
    const dir = t.testdir({ 'bad.json': '{"users": 1}' })
    await t.rejects(
      createGate({
        credentials: `${dir}/bad.json`,
        idempotency: redis.url,
        idempotencyFingerprintKey: FINGERPRINT_KEY,
      }),
      { code: 'ECREDENTIALS' },
    )
    t.ok(await until(async () => (await clients()) === 0), 'a gate that cannot start closes the store it opened')
  },
)

scanLogsForCards(t)
