import t, { type Test } from 'tap'
import { Agent } from 'node:http'
import type { AddressInfo } from 'node:net'
import Fastify, { type FastifyInstance } from 'fastify'
import type { GateLogger } from '../../lib/surfaces/shared.js'
import { SCRYPT_DEFAULTS } from '../../lib/defaults.js'
import { THREW_UNPROTECTED } from '../../lib/surfaces/retry-protection.js'
import { reject, serializeError } from '../../lib/errors.js'
import { CASES } from '../helpers/cases.js'
import { BODY_LIMIT, REQUEST_TYPE, SALE_PATH, writeCredentials } from '../helpers/fixtures.js'
import { abortMidBody, raw, send } from '../helpers/http.js'
import { memoryLogger } from '../helpers/logs.js'
import { fastifyApp, testGate } from '../helpers/surfaces.js'

const CLEAN = CASES[0]!
const INTERNAL = serializeError(reject('internalErrorOccurred').body)

async function serve(t: Test, app: FastifyInstance) {
  await app.listen({ port: 0, host: '127.0.0.1' })
  const agent = new Agent({ keepAlive: true })
  t.teardown(async () => {
    agent.destroy()
    await app.close()
  })
  return { port: (app.server.address() as AddressInfo).port, agent }
}

t.test("Fastify's JSON parser never sees the v6 media type; other routes keep theirs", async (t) => {
  const gate = await testGate(t)
  const app = await fastifyApp(gate)
  let jsonParses = 0
  app.removeContentTypeParser('application/json')
  app.addContentTypeParser('application/json', { parseAs: 'string' }, (_request, body, done) => {
    jsonParses++
    done(null, JSON.parse(body as string))
  })
  app.post('/orders', async (request) => ({ got: request.body, gate: request.paymentsGate ?? null }))
  const { port, agent } = await serve(t, app)
  t.equal((await send(port, CLEAN, agent)).status, 201)
  t.equal(jsonParses, 0, 'not called for a screened request')
  const order = await send(
    port,
    { method: 'POST', path: '/orders', headers: { 'content-type': 'application/json' }, body: '{"n":1}' },
    agent,
  )
  t.same(JSON.parse(order.body.toString()), { got: { n: 1 }, gate: null })
  t.equal(jsonParses, 1, "the application's own route and parser are untouched")
})

t.test('another route that takes the v6 media type gets plain JSON, without the checks', async (t) => {
  const gate = await testGate(t)
  const app = await fastifyApp(gate)
  app.post('/drafts', async (request) => ({ got: request.body }))
  const { port, agent } = await serve(t, app)
  const headers = { 'content-type': REQUEST_TYPE }
  const draft = await send(
    port,
    { method: 'POST', path: '/drafts', headers, body: '{"transactionReference":""}' },
    agent,
  )
  t.equal(draft.status, 200)
  t.same(JSON.parse(draft.body.toString()), { got: { transactionReference: '' } })
  const poisoned = await send(port, { method: 'POST', path: '/drafts', headers, body: '{"__proto__":{"x":1}}' }, agent)
  t.equal(poisoned.status, 400, "Fastify's own prototype-poisoning guard")
  const large = await send(
    port,
    { method: 'POST', path: '/drafts', headers, body: `"${'x'.repeat(BODY_LIMIT)}"`, chunked: true },
    agent,
  )
  t.equal(large.status, 413)
  t.equal(JSON.parse(large.body.toString()).statusCode, 413, "Fastify's own error format on its own route")
})

t.test('a client that leaves mid-body: the handler is not called', async (t) => {
  // The real scrypt cost, so that the client can leave while the first password check still runs.
  const gate = await testGate(t, { credentials: await writeCredentials(t.testdir(), SCRYPT_DEFAULTS) })
  const app = Fastify()
  await app.register(gate.fastify)
  let calls = 0
  let settled: () => void
  const done = new Promise<void>((resolve) => (settled = resolve))
  let seen: unknown
  app.setErrorHandler((error, _request, reply) => {
    seen = error
    settled()
    return reply.send(error)
  })
  app.post(SALE_PATH, async () => {
    calls++
    return 'ok'
  })
  const { port } = await serve(t, app)
  await abortMidBody(app.server, port, SALE_PATH, CLEAN.headers)
  await done
  t.equal(calls, 0)
  t.match(seen, { message: 'payments-gate: the client aborted the request body' })
})

t.test('an authenticator that throws: the standard 500 from onRequest', async (t) => {
  const logger = memoryLogger()
  const gate = await testGate(t, {
    credentials: {
      authenticate: () => {
        throw new Error('down')
      },
    },
    logger: logger as unknown as GateLogger,
  })
  const { port, agent } = await serve(t, await fastifyApp(gate))
  const answer = await send(port, CLEAN, agent)
  t.equal(answer.status, 500)
  t.equal(answer.headers['content-type'], 'application/json')
  t.equal(answer.body.toString(), INTERNAL)
  t.match(logger.lines, [{ object: { err: { message: 'down' } } }])
})

t.test('the errorHandler option: thrown errors become the standard 500, client errors stay Fastify', async (t) => {
  const gate = await testGate(t)
  const app = Fastify()
  await app.register(gate.fastify, { errorHandler: true })
  app.get('/boom', async () => {
    throw new Error('secret detail')
  })
  app.get('/teapot', async () => {
    throw Object.assign(new Error('short and stout'), { statusCode: 418 })
  })
  const { port, agent } = await serve(t, app)
  const boom = await send(port, { method: 'GET', path: '/boom', headers: {} }, agent)
  t.equal(boom.status, 500)
  t.equal(boom.body.toString(), INTERNAL)
  const teapot = await send(port, { method: 'GET', path: '/teapot', headers: {} }, agent)
  t.equal(teapot.status, 418)
  t.match(JSON.parse(teapot.body.toString()), { message: 'short and stout' })
})

t.test(
  "the errorHandler option: a payment's handler that threw, unprotected, says its outcome is unknown",
  async (t) => {
    const gate = await testGate(t)
    const app = Fastify()
    await app.register(gate.fastify, { errorHandler: true })
    app.post(SALE_PATH, async () => {
      throw new Error('the card was charged, then the ledger failed')
    })
    const { port, agent } = await serve(t, app)
    const threw = await send(port, CLEAN, agent)
    t.equal(threw.status, 500)
    t.equal(threw.body.toString(), THREW_UNPROTECTED.body.toString())
    t.notMatch(threw.body.toString(), /Retry later/)
    const report = await testGate(t, { mode: 'report' })
    const reporting = Fastify()
    await reporting.register(report.fastify, { errorHandler: true })
    reporting.post(SALE_PATH, async () => {
      throw new Error('charged, then failed')
    })
    const reported = await serve(t, reporting)
    const luhn = CASES.find((row) => row.name === '8: card number fails the Luhn check')!
    const threwReported = await send(reported.port, luhn, reported.agent)
    t.equal(
      threwReported.body.toString(),
      THREW_UNPROTECTED.body.toString(),
      'report mode: a payment enforce would refuse',
    )
  },
)

t.test('the plugin announces itself and skips encapsulation', async (t) => {
  const gate = await testGate(t)
  const plugin = gate.fastify as unknown as Record<symbol, unknown>
  t.equal(plugin[Symbol.for('skip-override')], true)
  t.equal(plugin[Symbol.for('fastify.display-name')], 'payments-gate')
  const app = Fastify()
  await app.register(async (child) => {
    await child.register(gate.fastify)
  })
  app.post(SALE_PATH, async () => 'unscreened')
  const { port, agent } = await serve(t, app)
  const answer = await send(port, CLEAN, agent)
  t.equal(answer.status, 415, 'registered in a child context, it screens that context only')
  t.match(JSON.parse(answer.body.toString()), { code: 'FST_ERR_CTP_INVALID_MEDIA_TYPE' }, 'Fastify itself answered')
})

/**
 * docs/middleware-reference.md, base path: `basePath` is relative to the server's root, and the plugin also
 * screens what lies below the prefix of the instance it is registered on.
 */
t.test('the plugin guards the path it is registered on: under a prefix, with and without basePath', async (t) => {
  const layouts: [string, string, string][] = [
    ['', '/v6', 'prefix /v6 without basePath'],
    ['/v6', '/v6', 'prefix /v6 with basePath /v6'],
    ['', '', 'no prefix, no basePath'],
    ['/v6', '', 'no prefix, basePath /v6'],
  ]
  for (const [basePath, prefix, name] of layouts) {
    const gate = await testGate(t, { basePath })
    const app = Fastify()
    const handled: unknown[] = []
    await app.register(
      async (child) => {
        await child.register(gate.fastify)
        const route = basePath === '' || prefix !== '' ? SALE_PATH : `${basePath}${SALE_PATH}`
        child.post(route, async (request, reply) => {
          handled.push(request.paymentsGate?.operation)
          return reply.code(201).send()
        })
      },
      { prefix },
    )
    const { port, agent } = await serve(t, app)
    const path = `${basePath === '' ? prefix : basePath}${SALE_PATH}`
    const { authorization: _, ...anonymous } = CLEAN.headers
    const refused = await send(port, { path, headers: anonymous, body: { amount: -1 } }, agent)
    t.equal(refused.status, 401, `${name}: no credentials`)
    const passed = await send(port, { ...CLEAN, path }, agent)
    t.equal(passed.status, 201, `${name}: a clean payment`)
    t.same(handled, ['sale'], `${name}: the handler saw only the checked one`)
  }
})

/**
 * Issue 47: a prefix that is not already in the router's canonical spelling (upper case, a trailing
 * slash) still guards the payment route below it.
 */
t.test(
  'a prefix spelt otherwise than the router reads it, /V6 or /api/: the payment route is still screened',
  async (t) => {
    for (const prefix of ['/V6', '/api/']) {
      const gate = await testGate(t)
      const app = Fastify()
      const handled: unknown[] = []
      await app.register(
        async (child) => {
          await child.register(gate.fastify)
          child.post(SALE_PATH, async (request, reply) => {
            handled.push(request.paymentsGate?.operation)
            return reply.code(201).send()
          })
        },
        { prefix },
      )
      const { port, agent } = await serve(t, app)
      const path = `${prefix.replace(/\/$/, '')}${SALE_PATH}`
      const { authorization: _, ...anonymous } = CLEAN.headers
      t.equal(
        (await send(port, { path, headers: anonymous, body: { amount: -1 } }, agent)).status,
        401,
        `${prefix}: no credentials`,
      )
      t.equal((await send(port, { ...CLEAN, path }, agent)).status, 201, `${prefix}: a clean payment`)
      t.same(handled, ['sale'], `${prefix}: the handler saw only the checked one`)
    }
  },
)

/** Issue 42: the plugin under a parameterised prefix, `{ prefix: '/:tenant' }`, compared as literal text before. */
t.test('under a parameterised prefix: bogus credentials are refused, the handler not called', async (t) => {
  const gate = await testGate(t)
  const app = Fastify()
  let handled = 0
  await app.register(
    async (child) => {
      await child.register(gate.fastify)
      child.post(SALE_PATH, async (request, reply) => {
        handled++
        return reply.code(201).send(request.paymentsGate?.operation)
      })
    },
    { prefix: '/:tenant' },
  )
  const { port, agent } = await serve(t, app)
  const path = `/acme${SALE_PATH}`
  const bogus = { ...CLEAN.headers, authorization: `Basic ${Buffer.from('shop-1:guess').toString('base64')}` }
  t.equal((await send(port, { path, headers: bogus, body: { merchant: { entity: 'victim' } } }, agent)).status, 401)
  t.equal(handled, 0)
  const passed = await send(port, { ...CLEAN, path }, agent)
  t.equal(passed.status, 201)
  t.equal(passed.text, 'sale')
})

t.test('a target with a fragment, which Fastify routes on the path before it, is refused 400', async (t) => {
  const gate = await testGate(t)
  const app = await fastifyApp(gate, () => t.fail('not reached'))
  const { port } = await serve(t, app)
  const body = JSON.stringify({ amount: -1 })
  const answer = await raw(
    port,
    `POST ${SALE_PATH}#x HTTP/1.1\r\nHost: a\r\nConnection: close\r\nContent-Type: ${REQUEST_TYPE}\r\nContent-Length: ${body.length}\r\n\r\n${body}`,
    { keepOpen: true },
  )
  t.match(answer, /^HTTP\/1\.1 400 [^]*\r\nconnection: close\r\n[^]*"errorName":"requestIsMalformed"/i)
})

t.test("a handler that hijacks the reply still answers with the payment's X-Request-Id", async (t) => {
  const gate = await testGate(t)
  const app = Fastify()
  await app.register(gate.fastify)
  app.post(SALE_PATH, async (_request, reply) => {
    reply.hijack()
    reply.raw.writeHead(201, { 'content-type': 'text/plain' })
    reply.raw.end('hijacked')
  })
  app.post('/other', async (_request, reply) => {
    reply.hijack()
    reply.raw.end('other')
  })
  const { port } = await serve(t, app)
  const answer = await send(port, { ...CLEAN, headers: { ...CLEAN.headers, 'x-request-id': 'mine-2' } })
  t.equal(answer.status, 201)
  t.equal(answer.text, 'hijacked')
  t.equal(answer.headers['x-request-id'], 'mine-2')
  const other = await send(port, { ...CLEAN, path: '/other' })
  t.equal(other.headers['x-request-id'], undefined, 'none on a path not ours')
})
