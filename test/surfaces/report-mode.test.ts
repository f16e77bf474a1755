import { createServer } from 'node:http'
import { join } from 'node:path'
import type { AddressInfo } from 'node:net'
import { gzipSync } from 'node:zlib'
import express from 'express'
import Fastify from 'fastify'
import { Hono } from 'hono'
import t from 'tap'
import type { Passed } from '../../lib/checks/index.js'
import type { GateContext, GateLogger, GateReport } from '../../lib/surfaces/shared.js'
import {
  AUTH,
  basic,
  policyJson,
  REQUEST_TYPE,
  SALE_PATH,
  saleBody,
  TEST_PAN,
  USERNAME,
  writeCredentials,
} from '../helpers/fixtures.js'
import { serveHono } from '../helpers/hono-app.js'
import { abortMidBody, paymentHeaders, send } from '../helpers/http.js'
import { memoryLogger } from '../helpers/logs.js'
import { closeServer, listenOnLoopback } from '../helpers/servers.js'
import { testGate } from '../helpers/surfaces.js'

// In report mode (docs/middleware.md) the middleware calls the application's handler instead of
// refusing: with the passed context when every check passed, the report always, the body as it came.

/** What each test application answers: what it was handed. */
interface Handed {
  context: Omit<GateContext, 'requestId'> | null
  body: unknown
  report: {
    entity?: string
    wouldRefuse?: string
    /** The status and header enforce would have refused with. */
    refusedWith?: string
    wouldRewrite: readonly string[]
    bytes?: string
  } | null
}

function handed(context: GateContext | Passed | undefined, body: unknown, report: GateReport | undefined): Handed {
  return {
    context:
      context === undefined
        ? null
        : {
            operation: context.operation,
            entity: context.entity,
            principal: context.principal as GateContext['principal'],
          },
    body,
    report:
      report === undefined
        ? null
        : {
            entity: report.entity,
            wouldRefuse: report.wouldRefuse?.body.errorName,
            refusedWith: `${report.wouldRefuse?.status} ${report.wouldRefuse?.body.headerName}`,
            wouldRewrite: report.wouldRewrite,
            bytes: Buffer.from(report.body).toString('hex'),
          },
  }
}

// `collections` enforces whatever the gate's mode: a team has switched it already.
const dir = t.testdir({
  policies: {
    'default.json': policyJson('default', {
      features: { dynamicMcc: true, paymentFacilitator: false, moto: false, debtRepayment: false },
      mcc: '5734',
    }),
    'collections.json': policyJson('collections', { mode: 'enforce' }),
  },
})
const gate = await testGate(t, {
  mode: 'report',
  policies: join(dir, 'policies'),
  credentials: await writeCredentials(dir),
})

async function nodeApp(): Promise<number> {
  const server = createServer(
    gate.handler((_req, res, passed, _requestId, report) =>
      res.end(JSON.stringify(handed(passed, report === undefined ? passed?.document : report.received, report))),
    ),
  )
  t.teardown(() => closeServer(server))
  return listenOnLoopback(server)
}

/** Express, with a JSON body parser after the gate, as an application that also takes JSON elsewhere has. */
async function expressApp(): Promise<number> {
  const app = express()
  app.use(gate.express())
  app.use(express.json({ type: ['application/json', '+json'] }))
  app.all(SALE_PATH, (req, res) => {
    res.end(JSON.stringify(handed(req.paymentsGate, req.body, req.paymentsGateReport)))
  })
  const server = createServer(app)
  t.teardown(() => closeServer(server))
  return listenOnLoopback(server)
}

/** Fastify, with a parser for `+json` types as an application that takes them has (its own takes only application/json). */
async function fastifyApp(): Promise<number> {
  const app = Fastify()
  await app.register(gate.fastify)
  app.addContentTypeParser(
    /^application\/[^;]+\+json/,
    { parseAs: 'string' },
    app.getDefaultJsonParser('error', 'error'),
  )
  app.all(SALE_PATH, async (request, reply) =>
    reply.send(JSON.stringify(handed(request.paymentsGate, request.body, request.paymentsGateReport))),
  )
  await app.listen({ port: 0, host: '127.0.0.1' })
  t.teardown(() => app.close())
  return (app.server.address() as AddressInfo).port
}

/** Hono, with a handler that also reads the body by its declared type, as `c.req.parseBody()` does. */
async function honoApp(): Promise<number> {
  const app = new Hono()
  app.use('/payments/*', gate.hono())
  app.all(SALE_PATH, async (c) => {
    const form = await c.req.parseBody()
    const passed = c.get('paymentsGate')
    const report = c.get('paymentsGateReport')
    const body: unknown = c.req.valid('json' as never)
    const json: unknown = await c.req.json()
    return c.body(JSON.stringify({ ...handed(passed, body, report), form, json }))
  })
  return serveHono(t, app)
}

const surfaces: [string, number][] = [
  ['node', await nodeApp()],
  ['express', await expressApp()],
  ['fastify', await fastifyApp()],
  ['hono', await honoApp()],
]

const rewritable = saleBody({ transactionReference: 'mw-1' })
rewritable.instruction.narrative.line1 = 'Café & Co'
const luhn = saleBody({ transactionReference: 'mw-2' })
luhn.instruction.paymentInstrument.cardNumber = `${TEST_PAN.slice(0, -1)}2`
const principal = { username: USERNAME }

for (const [name, port] of surfaces) {
  t.test(`${name}: the handler is called with the passed context, the body as it came and the report`, async (t) => {
    const clean = await send(port, { headers: paymentHeaders(), body: rewritable })
    t.equal(clean.status, 200)
    t.match(clean.json, {
      context: { operation: 'sale', entity: 'default', principal },
      report: { entity: 'default', wouldRewrite: ['line1Characters', 'mccFilledIn'] },
    })
    t.equal(clean.json.report.wouldRefuse, undefined)
    t.same(clean.json.body, rewritable, 'not rewritten')
    t.equal(clean.json.report.bytes, Buffer.from(JSON.stringify(rewritable)).toString('hex'), 'the bytes as they came')
  })

  t.test(
    `${name}: a request enforce would refuse reaches the handler with the refusal reported and no passed context`,
    async (t) => {
      const refused = await send(port, { headers: paymentHeaders(), body: luhn })
      t.match(refused.json, {
        context: null,
        body: luhn,
        report: { entity: 'default', wouldRefuse: 'bodyDoesNotMatchSchema', wouldRewrite: [] },
      })
      const accept = await send(port, { headers: paymentHeaders({ accept: 'text/html' }), body: saleBody() })
      t.match(
        accept.json,
        { context: null, report: { entity: 'default', wouldRefuse: 'headerHasInvalidValue' } },
        'an Accept enforce would refuse, on a body naming an entity the user may act for',
      )
    },
  )

  t.test(`${name}: a request whose entity the gate cannot read gets the answer enforce gives`, async (t) => {
    const cases: [string, Parameters<typeof send>[1], number, string][] = [
      ['not JSON', { headers: paymentHeaders(), body: '{"merchant"' }, 400, 'bodyIsNotJson'],
      ['another method', { method: 'PUT', headers: paymentHeaders(), body: saleBody() }, 405, 'methodIsNotAllowed'],
      ['a GET', { method: 'GET', headers: { authorization: AUTH } }, 405, 'methodIsNotAllowed'],
      [
        'a body past the limit',
        { headers: paymentHeaders(), body: `{"pad":"${'z'.repeat(70_000)}"}`, chunked: true },
        413,
        'bodyIsTooLarge',
      ],
      [
        'the entity repeated',
        {
          headers: paymentHeaders(),
          body: JSON.stringify(saleBody()).replace('"entity":"default"', '"entity":"eu-tokens","entity":"default"'),
        },
        400,
        'bodyDoesNotMatchSchema',
      ],
      [
        'the entity in another letter case beside it',
        { headers: paymentHeaders(), body: { ...saleBody(), merchant: { entity: 'default', Entity: 'eu-tokens' } } },
        400,
        'bodyDoesNotMatchSchema',
      ],
      [
        'no entity, and a Content-Type enforce refuses',
        { headers: paymentHeaders({ 'content-type': 'application/json' }), body: { merchant: {} } },
        415,
        'headerHasInvalidValue',
      ],
    ]
    for (const [what, request, status, errorName] of cases) {
      t.match(await send(port, request), { status, json: { errorName } }, what)
    }
  })

  t.test(
    `${name}: a body its declared type, charset or coding would have a backend read otherwise gets enforce's answer`,
    async (t) => {
      // Each names the user's own entity as JSON, and another merchant's to a reader that goes by the header.
      const note = JSON.stringify({
        ...saleBody(),
        note: '&merchant[entity]=eu-tokens&merchant[x]=',
      })
      const utf7 = JSON.stringify(saleBody()).replace('{', '{"x":"+ACIALAAiAGUAbgB0AGkAdAB5ACIAOgAi-eu-tokens",')
      const cases: [string, Parameters<typeof send>[1], number, string][] = [
        [
          'a form (urlencoded)',
          { headers: paymentHeaders({ 'content-type': 'application/x-www-form-urlencoded' }), body: note },
          415,
          'Content-Type',
        ],
        [
          'charset=utf-7',
          { headers: paymentHeaders({ 'content-type': `${REQUEST_TYPE}; charset=utf-7` }), body: utf7 },
          415,
          'Content-Type',
        ],
        [
          'CHARSET=UTF-7, its name in capitals',
          { headers: paymentHeaders({ 'content-type': `${REQUEST_TYPE}; CHARSET=UTF-7` }), body: utf7 },
          415,
          'Content-Type',
        ],
        [
          'the charset twice',
          { headers: paymentHeaders({ 'content-type': `${REQUEST_TYPE}; charset=utf-7; charset=utf-8` }), body: utf7 },
          415,
          'Content-Type',
        ],
        [
          'multipart',
          { headers: paymentHeaders({ 'content-type': 'multipart/form-data; boundary=x' }), body: note },
          415,
          'Content-Type',
        ],
        [
          'text/json, which readers read as text or in ISO-8859-1',
          { headers: paymentHeaders({ 'content-type': 'text/json' }), body: saleBody() },
          415,
          'Content-Type',
        ],
        [
          'JSON in charset=utf-7',
          { headers: paymentHeaders({ 'content-type': 'application/json; charset=utf-7' }), body: utf7 },
          415,
          'Content-Type',
        ],
        [
          'gzipped JSON',
          {
            headers: paymentHeaders({ 'content-type': 'application/json', 'content-encoding': 'gzip' }),
            body: gzipSync(JSON.stringify(saleBody({ entity: 'eu-tokens' }))),
          },
          415,
          'Content-Type',
        ],
        [
          'no Content-Type',
          { headers: { authorization: paymentHeaders().authorization as string }, body: saleBody() },
          400,
          'Content-Type',
        ],
        [
          'gzip, beside a body in clear',
          { headers: paymentHeaders({ 'content-encoding': 'gzip' }), body: saleBody() },
          415,
          'Content-Encoding',
        ],
        [
          'gzip, the body gzipped',
          {
            headers: paymentHeaders({ 'content-encoding': 'gzip' }),
            body: gzipSync(JSON.stringify(saleBody({ entity: 'eu-tokens' }))),
          },
          415,
          'Content-Encoding',
        ],
        [
          'a transfer coding before chunked',
          { headers: paymentHeaders({ 'transfer-encoding': 'gzip, chunked' }), body: saleBody() },
          415,
          'Transfer-Encoding',
        ],
        [
          'Connection naming Content-Type, Accept and Authorization',
          { headers: paymentHeaders({ connection: 'content-type, accept, authorization' }), body: saleBody() },
          400,
          'Connection',
        ],
      ]
      for (const [what, request, status, headerName] of cases) {
        const reply = await send(port, request)
        t.match(
          reply,
          {
            status,
            json: {
              errorName: status === 400 && headerName === 'Content-Type' ? 'headerIsMissing' : 'headerHasInvalidValue',
              headerName,
            },
          },
          what,
        )
        t.equal(reply.json.context, undefined, `${what}: the handler was not called`)
      }
    },
  )

  t.test(
    `${name}: a JSON type in UTF-8 reaches the handler as the checks read it, reported with enforce's 415`,
    async (t) => {
      for (const type of ['application/json', 'application/json; charset=UTF-8', 'application/merchant+json']) {
        const body = saleBody({ transactionReference: 'mw-json' })
        const sent = ` ${JSON.stringify(body)}\n`
        const reply = await send(port, { headers: paymentHeaders({ 'content-type': type }), body: sent })
        t.equal(reply.status, 200, `${type}: the handler answered`)
        t.match(
          reply.json,
          {
            context: null,
            report: {
              entity: 'default',
              wouldRefuse: 'headerHasInvalidValue',
              refusedWith: '415 Content-Type',
              wouldRewrite: [],
              bytes: Buffer.from(sent).toString('hex'),
            },
          },
          `${type}: reported as enforce would refuse it`,
        )
        t.same(reply.json.body, body, `${type}: the body the checks read`)
        if (name === 'hono') t.same(reply.json.json, body, `${type}: c.req.json() reads the same`)
      }
      const strict = saleBody({ entity: 'collections' })
      t.match(
        await send(port, { headers: paymentHeaders({ 'content-type': 'application/json' }), body: strict }),
        { status: 415, json: { errorName: 'headerHasInvalidValue', headerName: 'Content-Type' } },
        'an entity that enforces gets the 415',
      )
      t.match(
        await send(port, { headers: paymentHeaders({ 'content-type': 'application/json' }), body: '{"merchant"' }),
        { status: 415, json: { headerName: 'Content-Type' } },
        'a body that names no entity gets the 415',
      )
      t.match(
        await send(port, {
          headers: paymentHeaders({ 'content-type': 'application/json' }),
          body: saleBody({ entity: 'eu-tokens' }),
        }),
        { status: 401, json: { errorName: 'accessDenied' } },
        'check 9 still refuses',
      )
    },
  )

  t.test(`${name}: BasicAuth, check 9 and an entity that enforces still refuse`, async (t) => {
    t.match(
      await send(port, { headers: paymentHeaders({ authorization: basic(USERNAME, 'wrong') }), body: saleBody() }),
      { status: 401, json: { errorName: 'accessDenied' } },
    )
    t.match(await send(port, { headers: paymentHeaders(), body: saleBody({ entity: 'eu-tokens' }) }), {
      status: 401,
      json: { errorName: 'accessDenied' },
    })
    const strict = saleBody({ entity: 'collections' })
    strict.instruction.value.currency = 'EUR'
    t.match(await send(port, { headers: paymentHeaders(), body: strict }), {
      status: 400,
      json: { errorName: 'currencyIsNotSupported' },
    })
  })
}

for (const mode of ['enforce', 'report'] as const) {
  t.test(
    `fastify, ${mode}: a body the application's own parser read for the v6 type never reaches the handler`,
    async (t) => {
      const logger = memoryLogger()
      const own = await testGate(t, { mode, logger: logger as unknown as GateLogger })
      const app = Fastify()
      await app.register(own.fastify)
      let parsed = 0
      let handled = 0
      // Fastify prefers a parser registered for the header's whole value to the plugin's, for the media type alone.
      app.addContentTypeParser(`${REQUEST_TYPE}; charset=utf-8`, { parseAs: 'string' }, (_request, _body, done) => {
        parsed++
        done(null, saleBody({ entity: 'eu-tokens' }))
      })
      app.post(SALE_PATH, async () => (handled++, 'handled'))
      await app.listen({ port: 0, host: '127.0.0.1' })
      t.teardown(() => app.close())
      const port = (app.server.address() as AddressInfo).port
      const reply = await send(port, {
        headers: paymentHeaders({ 'content-type': `${REQUEST_TYPE}; charset=utf-8` }),
        body: saleBody(),
      })
      t.match(reply, { status: 500, json: { errorName: 'internalErrorOccurred' } })
      t.equal(parsed, 1, "the application's parser read it")
      t.equal(handled, 0, 'the handler was not called')
      t.match(logger.lines, [
        { object: { route: SALE_PATH }, message: /another content-type parser than the plugin's/ },
      ])
      t.equal(
        (await send(port, { headers: paymentHeaders(), body: saleBody() })).status,
        200,
        'the plugin reads the rest',
      )
    },
  )
}

t.test(
  "fastify, report: a JSON type goes to the application's parser for it, and the handler still gets what the checks read",
  async (t) => {
    const app = Fastify()
    await app.register(gate.fastify)
    const given: string[] = []
    // A parser of the application's own for application/json, reading the bytes otherwise than the checks do.
    app.removeContentTypeParser('application/json')
    app.addContentTypeParser('application/json', { parseAs: 'string' }, (_request, body, done) => {
      given.push(body as string)
      done(null, saleBody({ entity: 'eu-tokens' }))
    })
    let handled = 0
    app.post(SALE_PATH, async (request) => {
      handled++
      return JSON.stringify(handed(request.paymentsGate, request.body, request.paymentsGateReport))
    })
    await app.listen({ port: 0, host: '127.0.0.1' })
    t.teardown(() => app.close())
    const port = (app.server.address() as AddressInfo).port
    const body = saleBody({ transactionReference: 'own-parser' })
    const sent = JSON.stringify(body)
    const reply = await send(port, { headers: paymentHeaders({ 'content-type': 'application/json' }), body: sent })
    t.match(reply, {
      status: 200,
      json: { context: null, report: { entity: 'default', refusedWith: '415 Content-Type' } },
    })
    t.same(reply.json.body, body, 'the body the checks read, not the one that parser made')
    t.same(given, [sent], 'that parser was given the bytes as they came, once')
    const chunked = await send(port, {
      headers: paymentHeaders({ 'content-type': 'application/json' }),
      body: sent,
      chunked: true,
    })
    t.same(chunked.json.body, body, 'chunked too')
    const refused = await send(port, {
      headers: paymentHeaders({ 'content-type': 'application/json' }),
      body: saleBody({ entity: 'collections' }),
    })
    t.match(refused, { status: 415, json: { headerName: 'Content-Type' } }, 'an entity that enforces gets the 415')
    t.equal(given.length, 2, 'and no parser of the application read it')
    t.equal(handled, 2)
    const none = await send(port, {
      headers: paymentHeaders({ 'content-type': 'application/merchant+json' }),
      body: saleBody(),
    })
    t.match(
      none,
      { status: 415, json: { code: 'FST_ERR_CTP_INVALID_MEDIA_TYPE' } },
      'a JSON type the application has no parser for gets its own answer, as without the plugin',
    )
    t.equal(handled, 2, 'no handler called')
  },
)

t.test('fastify, report: a client that leaves mid-body with a JSON type: the handler is not called', async (t) => {
  const app = Fastify()
  await app.register(gate.fastify)
  let calls = 0
  let seen: (error: unknown) => void
  const errored = new Promise<unknown>((resolve) => (seen = resolve))
  app.setErrorHandler((error, _request, reply) => {
    seen(error)
    return reply.send(error)
  })
  app.post(SALE_PATH, async () => (calls++, 'ok'))
  await app.listen({ port: 0, host: '127.0.0.1' })
  t.teardown(() => app.close())
  const port = (app.server.address() as AddressInfo).port
  await abortMidBody(
    app.server,
    port,
    SALE_PATH,
    paymentHeaders({ 'content-type': 'application/json' }) as Record<string, string>,
  )
  t.match(await errored, { message: 'payments-gate: the client aborted the request body' })
  t.equal(calls, 0)
})
