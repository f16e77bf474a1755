import { createServer } from 'node:http'
import { join } from 'node:path'
import type { AddressInfo } from 'node:net'
import express from 'express'
import Fastify from 'fastify'
import t from 'tap'
import type { Passed } from '../../lib/checks/index.js'
import type { GateContext, GateReport } from '../../lib/surfaces/shared.js'
import {
  AUTH,
  basic,
  policyJson,
  SALE_PATH,
  saleBody,
  TEST_PAN,
  USERNAME,
  writeCredentials,
} from '../helpers/fixtures.js'
import { paymentHeaders, send } from '../helpers/http.js'
import { closeServer, listenOnLoopback } from '../helpers/servers.js'
import { testGate } from '../helpers/surfaces.js'

// In report mode (docs/middleware.md) the middleware calls the application's handler instead of
// refusing: with the passed context when every check passed, the report always, the body as it came.

/** What each test application answers: what it was handed. */
interface Handed {
  context: Omit<GateContext, 'requestId'> | null
  body: unknown
  report: { entity?: string; wouldRefuse?: string; wouldRewrite: readonly string[]; bytes?: string } | null
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
            wouldRewrite: report.wouldRewrite,
            bytes: report.body && Buffer.from(report.body).toString('hex'),
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

async function expressApp(): Promise<number> {
  const app = express()
  app.use(gate.express())
  app.all(SALE_PATH, (req, res) => {
    res.end(JSON.stringify(handed(req.paymentsGate, req.body, req.paymentsGateReport)))
  })
  const server = createServer(app)
  t.teardown(() => closeServer(server))
  return listenOnLoopback(server)
}

async function fastifyApp(): Promise<number> {
  const app = Fastify()
  await app.register(gate.fastify)
  app.all(SALE_PATH, async (request, reply) =>
    reply.send(JSON.stringify(handed(request.paymentsGate, request.body, request.paymentsGateReport))),
  )
  await app.listen({ port: 0, host: '127.0.0.1' })
  t.teardown(() => app.close())
  return (app.server.address() as AddressInfo).port
}

const surfaces: [string, number][] = [
  ['node', await nodeApp()],
  ['express', await expressApp()],
  ['fastify', await fastifyApp()],
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
      const type = await send(port, {
        headers: paymentHeaders({ 'content-type': 'application/json' }),
        body: saleBody(),
      })
      t.match(
        type.json,
        { context: null, report: { entity: 'default', wouldRefuse: 'headerHasInvalidValue' } },
        'a Content-Type enforce would refuse, on a body naming an entity the user may act for',
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

  t.test(`${name}: BasicAuth, check 9 and an entity that enforces still refuse`, async (t) => {
    t.match(
      await send(port, { headers: paymentHeaders({ authorization: basic(USERNAME, 'wrong') }), body: saleBody() }),
      { status: 401, json: { errorName: 'accessDenied' } },
    )
    t.match(
      await send(port, {
        headers: paymentHeaders({ 'content-type': 'application/json' }),
        body: saleBody({ entity: 'eu-tokens' }),
      }),
      { status: 401, json: { errorName: 'accessDenied' } },
      "check 9 on a body of another Content-Type, whoever's parser read it",
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
