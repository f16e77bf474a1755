// A policy's rate limit on createGate's surfaces (docs/middleware.md, rate limits): counted in the gate's
// process, 429 before the handler, report mode counting without refusing, and a store that fails.
import { createServer } from 'node:http'
import t, { type Test } from 'tap'
import { buildChecks, type Reported, type Verdict } from '../../lib/checks/index.js'
import type { GateOptions } from '../../lib/gate.js'
import type { GateReport } from '../../lib/surfaces/shared.js'
import { screenBody } from '../../lib/http/screen.js'
import { staticPolicies } from '../../lib/policy/policy.js'
import { RateLimiter, type RateLimitStore } from '../../lib/rate-limit/limiter.js'
import { ENTITIES, FINGERPRINT_KEY, policy, saleBody } from '../helpers/fixtures.js'
import { paymentHeaders, send, type Reply } from '../helpers/http.js'
import { honoApp, serveHono } from '../helpers/hono-app.js'
import { Handling, protectedServer, SURFACES } from '../helpers/protected-apps.js'
import { memoryLogger } from '../helpers/logs.js'
import { closeServer, listenOnLoopback } from '../helpers/servers.js'
import { everyEmbedding, testGate } from '../helpers/surfaces.js'
import { PassThrough } from 'node:stream'

const rateLimit = { payments: 1, seconds: 60 }
/** Each embedding its own entity: the surfaces of one gate share its count. */
const limitedPolicies = staticPolicies(ENTITIES.map((entity) => policy({ entity, rateLimit })))

t.test('every surface: one payment per minute, the next 429 with the fields before the handler', async (t) => {
  const { embeddings } = await everyEmbedding(t, { policies: limitedPolicies })
  for (const [i, embedding] of embeddings.entries()) {
    const entity = ENTITIES[i] as string
    const body = (n: number) => saleBody({ entity, transactionReference: `mw-${embedding.name}-${n}` })
    const first = await send(embedding.port, { headers: paymentHeaders(), body: body(1) })
    t.equal(first.status, 201, `${embedding.name}: the first`)
    const handled = embedding.handled()
    const second = await send(embedding.port, { headers: paymentHeaders(), body: body(2) })
    t.equal(second.status, 429, `${embedding.name}: the second refused`)
    t.match(second.json, { errorName: 'requestRateIsTooHigh' })
    t.match(second.headers['retry-after'], /^(59|60)$/)
    t.equal(second.headers['ratelimit-policy'], `"payments";q=1;w=60;pk=:${Buffer.from(entity).toString('base64')}:`)
    t.equal(embedding.handled(), handled, `${embedding.name}: the handler never ran for it`)
  }
})

t.test('Hono too', async (t) => {
  const gate = await testGate(t, { policies: limitedPolicies })
  let handled = 0
  const port = await serveHono(
    t,
    honoApp(gate, () => handled++),
  )
  const body = (n: number) => saleBody({ transactionReference: `hono-${n}` })
  t.equal((await send(port, { headers: paymentHeaders(), body: body(1) })).status, 201)
  t.equal((await send(port, { headers: paymentHeaders(), body: body(2) })).status, 429)
  t.equal(handled, 1)
  const refused = saleBody({
    transactionReference: 'hono-3',
    instruction: { ...saleBody().instruction, value: { amount: 1, currency: 'JPY' } },
  })
  t.equal((await send(port, { headers: paymentHeaders(), body: refused })).status, 400, 'a refusal of its own first')
})

t.test('report mode: counted, handed on with what enforce mode would refuse', async (t) => {
  const gate = await testGate(t, { policies: limitedPolicies, mode: 'report' })
  const seen: (Reported | undefined)[] = []
  const server = createServer(
    gate.handler((_req, res, passed, _id, report) => {
      seen.push(report)
      res.statusCode = passed === undefined ? 202 : 201
      res.end()
    }),
  )
  const port = await listenOnLoopback(server)
  t.teardown(() => closeServer(server))
  const body = (n: number) => saleBody({ transactionReference: `mw-report-${n}` })
  t.equal((await send(port, { headers: paymentHeaders(), body: body(1) })).status, 201)
  t.equal((await send(port, { headers: paymentHeaders(), body: body(2) })).status, 202, 'handed on, not passed')
  const refused = saleBody({
    transactionReference: 'mw-report-3',
    instruction: { ...saleBody().instruction, value: { amount: 1, currency: 'JPY' } },
  })
  t.equal(
    (await send(port, { headers: paymentHeaders(), body: refused })).status,
    202,
    'a currency refused: reported so',
  )
  t.equal(seen[0]?.wouldRefuse, undefined)
  t.match(seen[2], { wouldRefuse: { body: { errorName: 'currencyIsNotSupported' } } }, 'not counted for the limit')
  t.match(seen[1], { wouldRefuse: { status: 429, body: { errorName: 'requestRateIsTooHigh' } }, document: undefined })
})

t.test('a store that fails: closed refuses 503, open passes; report mode refuses nothing', async (t) => {
  const failing: RateLimitStore = {
    take: () => Promise.reject(new Error('down')),
    refund: () => {},
  }
  const bytes = Buffer.from(JSON.stringify(saleBody({ transactionReference: 'mw-failing' })))
  const screened = async (failure: 'closed' | 'open', mode: 'enforce' | 'report'): Promise<Verdict> => {
    const checks = buildChecks({ policies: limitedPolicies, rateLimiter: new RateLimiter(failing, { failure }), mode })
    const body = new PassThrough()
    body.end(bytes)
    const verdict = await screenBody(checks, body, {
      ok: true,
      operation: 'sale',
      principal: { username: 'shop-1', entities: new Set(ENTITIES) } as never,
      mode,
      refused: undefined,
    })
    return verdict as Verdict
  }
  t.match(await screened('closed', 'enforce'), { ok: false, status: 503 })
  t.match(await screened('open', 'enforce'), { ok: true, entity: 'default' })
  t.match(await screened('closed', 'report'), { ok: 'report', wouldRefuse: undefined })
  t.match(await screened('open', 'report'), { ok: 'report', wouldRefuse: undefined })
})

/** A gate with retry protection around `surface`'s handler (test/helpers/protected-apps.ts), the limited policies. */
async function protectedApp(t: Test, surface: (typeof SURFACES)[number], options: Partial<GateOptions> = {}) {
  const gate = await testGate(t, { policies: limitedPolicies, idempotency: 'memory', ...options })
  const handling = new Handling()
  const server = await protectedServer(surface, gate, handling)
  const port = await listenOnLoopback(server)
  t.teardown(() => closeServer(server))
  const pay = (reference: string): Promise<Reply> =>
    send(port, { headers: paymentHeaders(), body: saleBody({ transactionReference: reference }) })
  return { handling, pay }
}

t.test(
  'with retry protection around the handler: looked up, counted, then claimed, as the proxy does; a replay is not counted, a limited payment never claimed',
  async (t) => {
    for (const surface of SURFACES) {
      const { handling, pay } = await protectedApp(t, surface)
      const first = `ok-${surface}-limited-1`
      t.equal((await pay(first)).status, 201, `${surface}: the first`)
      const retry = await pay(first)
      t.equal(
        retry.headers['idempotent-replayed'],
        'true',
        `${surface}: its retry replayed, neither counted nor limited`,
      )
      const second = `ok-${surface}-limited-2`
      for (const attempt of [1, 2]) {
        const limited = await pay(second)
        t.equal(limited.status, 429, `${surface}: the second refused (${attempt}), not claimed: never 409 nor replayed`)
        t.match(limited.json, { errorName: 'requestRateIsTooHigh' })
        t.equal(limited.headers['idempotent-replayed'], undefined)
      }
      t.equal(handling.count(second), 0, `${surface}: its handler never ran`)
    }
  },
)

t.test('with retry protection, report mode counts what enforce would count and refuses nothing', async (t) => {
  const gate = await testGate(t, { policies: limitedPolicies, idempotency: 'memory', mode: 'report' })
  const seen: (GateReport | undefined)[] = []
  const server = createServer(
    gate.handler((_req, res, passed, _id, report) => {
      seen.push(report)
      res.statusCode = passed === undefined ? 202 : 201
      res.end()
    }),
  )
  const port = await listenOnLoopback(server)
  t.teardown(() => closeServer(server))
  const pay = (n: number) =>
    send(port, { headers: paymentHeaders(), body: saleBody({ transactionReference: `mw-protected-report-${n}` }) })
  t.equal((await pay(1)).status, 201, 'passed')
  t.equal((await pay(2)).status, 202, 'handed on, never refused')
  t.equal(seen[0]?.wouldRefuse, undefined, 'the first within the limit')
  t.match(seen[1], { wouldRefuse: { status: 429, body: { errorName: 'requestRateIsTooHigh' } }, document: undefined })
})

t.test("with retry protection on a Redis that is gone: closed refuses 503 and logs the count's failure", async (t) => {
  const logger = memoryLogger()
  const gate = await testGate(t, {
    policies: limitedPolicies,
    idempotency: 'redis://127.0.0.1:1/0',
    idempotencyFingerprintKey: FINGERPRINT_KEY,
    logger,
  })
  const server = createServer(gate.handler((_req, res) => res.end()))
  const port = await listenOnLoopback(server)
  t.teardown(() => closeServer(server))
  const refused = await send(port, { headers: paymentHeaders(), body: saleBody({ transactionReference: 'mw-gone' }) })
  t.equal(refused.status, 503)
  t.ok(
    logger.lines.some(({ message }) => message === 'payments-gate: rate-limit store failed'),
    'the failure logged',
  )
})
