import t from 'tap'
import express from 'express'
import type { GateLogger } from '../../lib/surfaces/shared.js'
import { isClientError } from '../../lib/surfaces/shared.js'
import { THREW_UNPROTECTED } from '../../lib/surfaces/retry-protection.js'
import { SCRYPT_DEFAULTS } from '../../lib/defaults.js'
import { reject, serializeError } from '../../lib/errors.js'
import { CASES } from '../helpers/cases.js'
import { SALE_PATH, writeCredentials } from '../helpers/fixtures.js'
import { abortMidBody, send } from '../helpers/http.js'
import { memoryLogger } from '../helpers/logs.js'
import { serveOnLoopback as serve } from '../helpers/servers.js'
import { testGate } from '../helpers/surfaces.js'

const CLEAN = CASES[0]!
const INTERNAL = serializeError(reject('internalErrorOccurred').body)

t.test('a body parser in front that consumed the body: a clear 500, not a hang', async (t) => {
  const logger = memoryLogger()
  const gate = await testGate(t, { logger: logger as unknown as GateLogger })
  const app = express()
  app.use(express.json({ type: '*/*' }))
  app.use(gate.express())
  app.post(SALE_PATH, () => t.fail('not reached'))
  const { port, agent } = await serve(t, app)
  const answer = await send(port, CLEAN, agent)
  t.equal(answer.status, 500)
  t.equal(answer.body.toString(), INTERNAL, 'the standard 500, like every internal failure')
  t.match(logger.lines, [
    { object: { path: SALE_PATH }, message: /Mount the payments-gate middleware before express\.json\(\)/ },
  ])
})

t.test('express.json() in front is harmless: it does not take the v6 media type', async (t) => {
  const gate = await testGate(t)
  const app = express()
  app.use(express.json())
  app.use(gate.express())
  app.post(SALE_PATH, (req, res) => {
    res.status(201).json({ mcc: req.body.merchant.mcc, user: req.paymentsGate?.principal.username })
  })
  const { port, agent } = await serve(t, app)
  const answer = await send(port, CLEAN, agent)
  t.equal(answer.status, 201)
  t.same(JSON.parse(answer.body.toString()), { mcc: '5734', user: 'shop-1' })
})

t.test("a middleware in front that sets req.body without reading the stream (body-parser 1's `{}`)", async (t) => {
  const gate = await testGate(t)
  const app = express()
  // What body-parser 1 (Express 4's express.json()) does to every request whose type it does not take.
  app.use((req, _res, next) => {
    req.body = req.body || {}
    next()
  })
  app.use(gate.express())
  app.post(SALE_PATH, (req, res) => void res.status(201).json({ mcc: req.body.merchant.mcc }))
  const { port, agent } = await serve(t, app)
  const answer = await send(port, CLEAN, agent)
  t.equal(answer.status, 201, 'red before: every payment answered 500 as if its body had been read')
  t.same(JSON.parse(answer.body.toString()), { mcc: '5734' }, 'the checked document replaces it')
})

t.test('a client that leaves mid-body: the application is not called', async (t) => {
  // The real scrypt cost, so that the client can leave while the first password check still runs.
  const gate = await testGate(t, { credentials: await writeCredentials(t.testdir(), SCRYPT_DEFAULTS) })
  const app = express()
  app.use(gate.express())
  let calls = 0
  app.use((_req, res) => {
    calls++
    res.end()
  })
  const { server, port, agent } = await serve(t, app)
  await abortMidBody(server, port, SALE_PATH, CLEAN.headers)
  t.equal(calls, 0)
  t.equal((await send(port, { method: 'GET', path: '/x', headers: {} }, agent)).status, 200)
  t.equal(calls, 1)
})

t.test('an authenticator that throws: the standard 500', async (t) => {
  const gate = await testGate(t, {
    credentials: {
      authenticate: () => Promise.reject(new Error('down')),
    },
  })
  const app = express()
  app.use(gate.express())
  const { port, agent } = await serve(t, app)
  const answer = await send(port, CLEAN, agent)
  t.equal(answer.status, 500)
  t.equal(answer.body.toString(), INTERNAL)
})

t.test('the error handler: thrown errors become the standard 500, client errors stay Express', async (t) => {
  const logger = memoryLogger()
  const gate = await testGate(t, { logger: logger as unknown as GateLogger })
  const app = express()
  // Keeps Express's final handler from printing the stacks of the errors below.
  app.set('env', 'test')
  app.use(gate.express())
  app.get('/boom', () => {
    throw new Error('database password is hunter2')
  })
  app.get('/missing', () => {
    throw Object.assign(new Error('no such thing'), { status: 404 })
  })
  app.get('/late', (_req, res) => {
    res.write('partial')
    throw new Error('late')
  })
  app.use(gate.expressErrorHandler())
  const { port, agent } = await serve(t, app)
  const boom = await send(port, { method: 'GET', path: '/boom', headers: {} }, agent)
  t.equal(boom.status, 500)
  t.equal(boom.headers['content-type'], 'application/json')
  t.equal(boom.body.toString(), INTERNAL, 'the error itself is not shown')
  t.match(logger.lines[0], { object: { err: { message: 'database password is hunter2' } } })
  const missing = await send(port, { method: 'GET', path: '/missing', headers: {} }, agent)
  t.equal(missing.status, 404, "Express's own handler")
  t.match(missing.headers['content-type'], /text\/html/)
  await t.rejects(
    send(port, { method: 'GET', path: '/late', headers: {} }, agent),
    'headers already sent: Express cuts the connection',
  )
})

t.test(
  "the error handler: a payment's route that threw, unprotected, says its outcome is unknown, never to retry",
  async (t) => {
    const gate = await testGate(t)
    const app = express()
    app.set('env', 'test')
    app.use(gate.express())
    let failFirst = false
    app.use((_req, _res, next) => next(failFirst ? new Error('a middleware after the gate') : undefined))
    app.post(SALE_PATH, () => {
      throw new Error('the card was charged, then the ledger failed')
    })
    app.use(gate.expressErrorHandler())
    const { port, agent } = await serve(t, app)
    const threw = await send(port, CLEAN, agent)
    t.equal(threw.status, 500)
    t.equal(threw.body.toString(), THREW_UNPROTECTED.body.toString())
    t.match(threw.json, {
      errorName: 'internalErrorOccurred',
      message: /outcome of this payment is unknown.*a retry is processed again/,
    })
    t.notMatch(threw.body.toString(), /Retry later/)
    const report = await testGate(t, { mode: 'report' })
    const reporting = express()
    reporting.set('env', 'test')
    reporting.use(report.express())
    reporting.post(SALE_PATH, (req) => {
      throw new Error(`reported as ${req.paymentsGateReport?.wouldRefuse}, charged, then failed`)
    })
    reporting.use(report.expressErrorHandler())
    const reported = await serve(t, reporting)
    const luhn = CASES.find((row) => row.name === '8: card number fails the Luhn check')!
    const threwReported = await send(reported.port, luhn, reported.agent)
    t.equal(
      threwReported.body.toString(),
      THREW_UNPROTECTED.body.toString(),
      'report mode: a payment enforce would refuse',
    )
    failFirst = true
    const before = await send(port, CLEAN, agent)
    t.equal(before.body.toString(), INTERNAL, 'a middleware before any route: no handler ran, so the retry is safe')
  },
)

t.test('isClientError', async (t) => {
  t.ok(isClientError({ status: 400 }))
  t.ok(isClientError({ statusCode: 499 }))
  t.notOk(isClientError({ status: 500 }))
  t.notOk(isClientError({ status: '400' }))
  t.notOk(isClientError(new Error('x')))
  t.notOk(isClientError('a string'))
  t.notOk(isClientError(null))
})

/**
 * docs/middleware-reference.md, base path: `basePath` is relative to the server's root, and a gate mounted under
 * a path also screens what lies below its mount point. In every layout a request with no credentials
 * and a made-up body is refused before the handler, and a clean payment reaches it, checked.
 */
t.test(
  'the gate guards the path it is mounted on: in a router, under a prefix, with and without basePath',
  async (t) => {
    const layouts: [
      string,
      string,
      (app: express.Express, gate: express.RequestHandler, handler: express.RequestHandler) => void,
    ][] = [
      [
        '',
        'in a router mounted at /payments',
        (app, gate, handler) => {
          const router = express.Router()
          router.use(gate)
          router.post('/sales/migrateCardOnFile', handler)
          app.use('/payments', router)
        },
      ],
      [
        '/v6',
        'under /v6 with basePath /v6',
        (app, gate, handler) => {
          app.use('/v6', gate)
          app.post('/v6/payments/sales/migrateCardOnFile', handler)
        },
      ],
      [
        '',
        'under /v6 without basePath',
        (app, gate, handler) => {
          app.use('/v6', gate)
          app.post('/v6/payments/sales/migrateCardOnFile', handler)
        },
      ],
      [
        '/v6',
        'at the root with basePath /v6',
        (app, gate, handler) => {
          app.use(gate)
          app.post('/v6/payments/sales/migrateCardOnFile', handler)
        },
      ],
    ]
    for (const [basePath, name, mount] of layouts) {
      const gate = await testGate(t, { basePath })
      const app = express()
      const handled: unknown[] = []
      mount(app, gate.express(), (req, res) => {
        handled.push(req.paymentsGate?.operation)
        res.status(201).end()
      })
      const { port, agent } = await serve(t, app)
      const path = `${name.includes('/payments') ? '' : '/v6'}${SALE_PATH}`
      const { authorization: _, ...anonymous } = CLEAN.headers
      const refused = await send(port, { path, headers: anonymous, body: { amount: -1 } }, agent)
      t.equal(refused.status, 401, `${name}: no credentials`)
      const passed = await send(port, { ...CLEAN, path }, agent)
      t.equal(passed.status, 201, `${name}: a clean payment`)
      t.same(handled, ['sale'], `${name}: the handler saw only the checked one`)
    }
  },
)

/** docs/middleware-reference.md, mounts: Express routes what a middleware in front left in `req.url`, which the gate reads too. */
t.test('a middleware in front that rewrites req.url: the path Express routes is screened', async (t) => {
  const gate = await testGate(t)
  const app = express()
  const router = express.Router()
  // A legacy alias, rewritten below the router's mount point before the gate runs.
  router.use((req, _res, next) => {
    if (req.url === '/legacy-sale') req.url = SALE_PATH
    next()
  })
  router.use(gate.express())
  let handled = 0
  router.post(SALE_PATH, (req, res) => {
    handled++
    res.status(201).send(req.paymentsGate?.operation)
  })
  app.use('/v6', router)
  const { port, agent } = await serve(t, app)
  const { authorization: _, ...anonymous } = CLEAN.headers
  const refused = await send(port, { path: '/v6/legacy-sale', headers: anonymous, body: { amount: -1 } }, agent)
  t.equal(refused.status, 401)
  t.equal(handled, 0)
  t.equal((await send(port, { ...CLEAN, path: '/v6/legacy-sale' }, agent)).text, 'sale')
})

t.test('under Connect, which sets originalUrl but no baseUrl, a mounted payment path is screened', async (t) => {
  const gate = await testGate(t)
  const middleware = gate.express()
  let handled = 0
  // What Connect's `app.use('/v6', ...)` does to a request: originalUrl kept, the mount point taken off url.
  const { port, agent } = await serve(t, (req, res) => {
    Object.assign(req, { originalUrl: req.url })
    if (req.url?.startsWith('/v6/')) req.url = req.url.slice('/v6'.length)
    middleware(req as never, res, () => {
      handled++
      res.writeHead(201).end()
    })
  })
  const { authorization: _, ...anonymous } = CLEAN.headers
  const refused = await send(port, { path: `/v6${SALE_PATH}`, headers: anonymous, body: { amount: -1 } }, agent)
  t.equal(refused.status, 401)
  t.equal(handled, 0)
  t.equal((await send(port, { ...CLEAN, path: `/v6${SALE_PATH}` }, agent)).status, 201)
  t.equal(handled, 1)
})
