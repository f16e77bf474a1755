import { request } from 'node:http'
import t, { type Test } from 'tap'
import { basic, RECURRING_PATH, recurringBody, SALE_PATH, saleBody, TEST_PAN } from '../helpers/fixtures.js'
import { paymentHeaders, send } from '../helpers/http.js'
import { scanLogsForCards } from '../helpers/logs.js'
import { startGateway } from '../helpers/surfaces.js'

/** CONTRACT.md's check table, row by row, answered by the proxy with nothing forwarded. */
const { url, backend } = await startGateway(t, { gate: { bodyLimit: 2048 } })

function withBody(change: (body: Record<string, any>) => void): Record<string, any> {
  const body = saleBody()
  change(body)
  return body
}

interface Row {
  readonly name: string
  readonly headers?: Record<string, string | undefined>
  readonly body?: string | Buffer | object
  readonly status: number
  readonly errorName: string
  readonly extra?: (t: Test, reply: Awaited<ReturnType<typeof send>>) => void
}

const rows: Row[] = [
  {
    name: '1 no Authorization',
    headers: { authorization: undefined },
    status: 401,
    errorName: 'accessDenied',
    extra: (t, reply) => t.equal(reply.headers['www-authenticate'], 'Basic realm="payments", charset="UTF-8"'),
  },
  { name: '1 wrong password', headers: { authorization: basic('shop-1', 'wrong') }, status: 401, errorName: 'accessDenied' },
  {
    name: '2 no Content-Type',
    headers: { 'content-type': undefined },
    status: 400,
    errorName: 'headerIsMissing',
    extra: (t, reply) => t.equal(reply.json.headerName, 'Content-Type'),
  },
  { name: '3 wrong Content-Type', headers: { 'content-type': 'application/json' }, status: 415, errorName: 'headerHasInvalidValue' },
  {
    name: '4 Accept that does not admit HAL',
    headers: { accept: 'text/html' },
    status: 406,
    errorName: 'headerHasInvalidValue',
    extra: (t, reply) => t.equal(reply.json.headerName, 'Accept'),
  },
  { name: '5 body over the limit', body: { pad: 'x'.repeat(4096) }, status: 413, errorName: 'bodyIsTooLarge' },
  { name: '6 empty body', body: '  \n', status: 400, errorName: 'bodyIsEmpty' },
  { name: '7 not JSON', body: '{"a":', status: 400, errorName: 'bodyIsNotJson' },
  { name: '7 not UTF-8', body: Buffer.from([0x7b, 0x22, 0xff, 0x22, 0x3a, 0x31, 0x7d]), status: 400, errorName: 'bodyIsNotJson' },
  {
    name: '8 schema: Luhn failure',
    body: withBody((b) => (b.instruction.paymentInstrument.cardNumber = '4444333322221112')),
    status: 400,
    errorName: 'bodyDoesNotMatchSchema',
    extra: (t, reply) =>
      t.match(reply.json.validationErrors, [{ errorName: 'panFailedLuhnCheck', jsonPath: '$.instruction.paymentInstrument.cardNumber' }]),
  },
  { name: '9 entity the user may not act for', body: withBody((b) => (b.merchant.entity = 'eu-tokens')), status: 401, errorName: 'accessDenied' },
  // shop-1 may act for these three entities; "nowhere" has no policy file.
  { name: '10 no policy', body: withBody((b) => (b.merchant.entity = 'nowhere')), status: 401, errorName: 'accessDenied' },
  {
    name: '11 instrument not in the policy',
    body: withBody((b) => (b.instruction.paymentInstrument = { type: 'card/virtual' })),
    status: 400,
    errorName: 'paymentInstrumentIsNotSupported',
  },
  { name: '12 currency not in the policy', body: withBody((b) => (b.instruction.value.currency = 'JPY')), status: 400, errorName: 'currencyIsNotSupported' },
  {
    name: '13 feature not enabled',
    body: withBody((b) => (b.instruction.debtRepayment = true)),
    status: 400,
    errorName: 'merchantIsNotConfigured',
  },
  {
    name: 'policy rule: Payment Facilitator entity without paymentFacilitator',
    body: withBody((b) => (b.merchant.entity = 'marketplace')),
    status: 400,
    errorName: 'bodyDoesNotMatchSchema',
    extra: (t, reply) => t.match(reply.json.validationErrors, [{ errorName: 'fieldIsMissing', jsonPath: '$.merchant.paymentFacilitator' }]),
  },
]

for (const row of rows) {
  t.test(row.name, async (t) => {
    const headers = paymentHeaders()
    for (const [name, value] of Object.entries(row.headers ?? {})) {
      if (value === undefined) delete headers[name]
      else headers[name] = value
    }
    const reply = await send(url, { headers, body: row.body ?? saleBody() })
    t.equal(reply.status, row.status)
    t.equal(reply.headers['content-type'], 'application/json')
    t.equal(reply.json.errorName, row.errorName)
    t.type(reply.json.message, 'string')
    row.extra?.(t, reply)
    t.notOk(reply.text.includes(TEST_PAN), 'the answer does not hold the card number')
    t.equal(backend.received.length, 0, 'nothing forwarded')
  })
}

t.test('10 an entity the user may act for without a policy file', async (t) => {
  const started = await startGateway(t, {
    gate: { credentials: { authenticate: () => ({ username: 'ops', entities: new Set(['nowhere']) }) } },
  })
  const reply = await send(started.url, { headers: paymentHeaders(), body: withBody((b) => (b.merchant.entity = 'nowhere')) })
  t.equal(reply.status, 400)
  t.equal(reply.json.errorName, 'entityIsNotConfigured')
  t.equal(started.backend.received.length, 0)
})

t.test('5 a chunked body over the limit, with no Content-Length to refuse early', async (t) => {
  const reply = await new Promise<{ status: number; body: string }>((resolve, reject) => {
    const req = request(`${url}${SALE_PATH}`, { method: 'POST', agent: false, headers: paymentHeaders() }, (res) => {
      const chunks: Buffer[] = []
      res.on('data', (chunk: Buffer) => chunks.push(chunk))
      res.on('end', () => resolve({ status: res.statusCode as number, body: Buffer.concat(chunks).toString() }))
    })
    req.on('error', reject)
    req.write('{"pad": "')
    req.end(`${'x'.repeat(4096)}"}`)
  })
  t.equal(reply.status, 413)
  t.equal(JSON.parse(reply.body).errorName, 'bodyIsTooLarge')
  t.equal(backend.received.length, 0)
})

t.test('another method on an operation path: 405 with Allow: POST', async (t) => {
  const reply = await send(url, { method: 'GET', path: RECURRING_PATH, headers: paymentHeaders() })
  t.equal(reply.status, 405)
  t.equal(reply.headers.allow, 'POST')
  t.equal(reply.json.errorName, 'methodIsNotAllowed')
  t.equal(backend.received.length, 0)
})

t.test('a clean recurring request passes', async (t) => {
  const reply = await send(url, { path: RECURRING_PATH, headers: paymentHeaders(), body: recurringBody() })
  t.equal(reply.status, 201)
  t.equal(backend.received.length, 1)
})

scanLogsForCards(t)
