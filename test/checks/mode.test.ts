import t from 'tap'
import { ACCESS_DENIED, type Principal } from '../../lib/checks/auth.js'
import { buildChecks, type Reported, type Verdict } from '../../lib/checks/index.js'
import { rewritesOf } from '../../lib/checks/policy.js'
import { compilePolicy } from '../../lib/policy/policy.js'
import type { PaymentRequest } from '../../lib/schema/payment.js'
import { bytes, policies, policyFile, saleBody, TEST_PAN } from '../helpers/fixtures.js'

// Report mode (docs/rollout.md): the same checks, a verdict that says what enforce mode would have done.
const headers = { 'content-type': 'application/vnd.example.payments-v6+json' }
const shop: Principal = { username: 'shop-1', entities: new Set(['default', 'strict', 'trial', 'nowhere']) }
// `default` follows the gateway's mode, `strict` always enforces, `trial` always reports; `nowhere` has no policy.
const source = policies({ entity: 'strict', mode: 'enforce' }, { entity: 'trial', mode: 'report' })
const report = buildChecks({ policies: source, mode: 'report' })
const enforce = buildChecks({ policies: source })

function reported(verdict: Verdict): Reported {
  if (verdict.ok !== 'report') throw new Error(`expected a report, got ${JSON.stringify(verdict)}`)
  return verdict
}

const errorNameOf = (verdict: Verdict) =>
  verdict.ok === false
    ? verdict.body.errorName
    : verdict.ok === 'report'
      ? verdict.wouldRefuse?.body.errorName
      : 'passed'

t.test('the mode is enforce unless told, and a policy file may name one', async (t) => {
  t.equal(enforce.mode, 'enforce')
  t.equal(report.mode, 'report')
  t.match(compilePolicy(policyFile({ mode: 'report' })), { mode: 'report' })
  t.match(compilePolicy(policyFile()), { mode: undefined })
  t.match(compilePolicy({ ...policyFile(), mode: 'audit' }), [/^\$\.mode: /])
})

t.test(
  'report mode: a clean sale is reported with the rewrites enforce would make, the document as it came kept apart',
  async (t) => {
    const body = saleBody()
    body.instruction.narrative = { line1: 'Mind Palace — Baker Street London', line2: 'order #12' }
    const sent = Buffer.from(` ${JSON.stringify(body)}`)
    const verdict = reported(report.check('sale', headers, sent, shop))
    t.equal(verdict.wouldRefuse, undefined)
    t.same(verdict.wouldRewrite, [
      'line1Characters',
      'line1Truncated',
      'line2Characters',
      'mccFilledIn',
      'reserialized',
    ])
    t.equal(verdict.body, sent, 'the bytes that came, to forward')
    t.same(verdict.received, body, 'the body as parsed, not rewritten')
    t.equal(
      verdict.document?.instruction.narrative.line1,
      'Mind Palace   Baker Stre',
      'the document enforce would forward',
    )
    t.equal(verdict.document?.merchant.mcc, '5734')
    t.match(verdict, { operation: 'sale', entity: 'default', principal: shop })
    t.same(
      reported(report.checkBody('sale', bytes(saleBody()), shop)).wouldRewrite,
      ['mccFilledIn'],
      'nothing but the mcc for a clean body',
    )
  },
)

t.test('report mode: every refusal of a body that names its entity is reported, with that entity', async (t) => {
  const luhn = saleBody()
  luhn.instruction.paymentInstrument.cardNumber = TEST_PAN.slice(0, -1) + '2'
  const cases: [string, Buffer, string, string][] = [
    ['a schema failure', bytes(luhn), 'bodyDoesNotMatchSchema', 'default'],
    ['an entity without a policy', bytes(saleBody({ entity: 'nowhere' })), 'entityIsNotConfigured', 'nowhere'],
    [
      'a policy refusal',
      bytes({ ...saleBody(), instruction: { ...saleBody().instruction, value: { amount: 1, currency: 'JPY' } } }),
      'currencyIsNotSupported',
      'default',
    ],
  ]
  for (const [name, body, errorName, entity] of cases) {
    const verdict = reported(report.checkBody('sale', body, shop))
    t.match(verdict, { entity, wouldRefuse: { body: { errorName } }, document: undefined, body }, name)
    t.same(verdict.wouldRewrite, [], `${name}: no rewrite`)
  }
})

t.test('report mode: a body that names no entity gets the answer enforce gives', async (t) => {
  const cases: [string, Buffer, string][] = [
    ['not JSON', Buffer.from('{"merchant":'), 'bodyIsNotJson'],
    ['empty', Buffer.from(' '), 'bodyIsEmpty'],
    ['a byte order mark', Buffer.concat([Buffer.from([0xef, 0xbb, 0xbf]), bytes(saleBody())]), 'bodyIsNotJson'],
    ['a comment', Buffer.from(`/* c */${JSON.stringify(saleBody())}`), 'bodyIsNotJson'],
    [
      'an entity that is not a string',
      bytes({ ...saleBody(), merchant: { entity: ['default'] } }),
      'bodyDoesNotMatchSchema',
    ],
    ['a body that is not an object', bytes(['a']), 'bodyDoesNotMatchSchema'],
    ['the entity misspelt', Buffer.from('{"merchant":{"Entity":"default"}}'), 'bodyDoesNotMatchSchema'],
    [
      'the entity repeated',
      Buffer.from(JSON.stringify(saleBody()).replace('"entity":"default"', '"entity":"elsewhere","entity":"default"')),
      'bodyDoesNotMatchSchema',
    ],
    ['too large', Buffer.from(`{"pad":"${'z'.repeat(70_000)}"}`), 'bodyIsTooLarge'],
  ]
  for (const [name, body, errorName] of cases) {
    t.match(report.checkBody('sale', body, shop), { ok: false, body: { errorName } }, name)
    t.same(report.checkBody('sale', body, shop), enforce.checkBody('sale', body, shop), `${name}: as enforce answers`)
  }
})

t.test('report mode: a refused Accept is reported, and the body is still read for its entity', async (t) => {
  const wrong = { ...headers, accept: 'text/html' }
  t.equal(report.holdable(wrong), true)
  t.match(reported(report.check('sale', wrong, bytes(saleBody()), shop)), {
    entity: 'default',
    wouldRefuse: { status: 406 },
    wouldRewrite: [],
    document: undefined,
  })
  t.match(
    report.check('sale', wrong, Buffer.from('x'), shop),
    { ok: false, status: 406 },
    "a body that names no entity: the header's refusal, as enforce answers",
  )
  t.match(
    report.check('sale', wrong, bytes(saleBody({ entity: 'strict' })), shop),
    { ok: false, status: 406 },
    "an enforcing entity gets the header's refusal",
  )
  t.match(
    enforce.check('sale', wrong, bytes(saleBody({ entity: 'trial' })), shop),
    { ok: false, status: 406 },
    'enforce mode refuses a header before it reads an entity',
  )
})

t.test(
  'report mode: a head that changes how the body is read gets the answer enforce gives, whatever the entity',
  async (t) => {
    // A backend that parses by declared type, charset or coding would read another body than the checks did.
    const cases: [string, Record<string, string | undefined>, number, string][] = [
      ['no Content-Type', { 'content-type': undefined }, 400, 'Content-Type'],
      ['a form', { 'content-type': 'application/x-www-form-urlencoded' }, 415, 'Content-Type'],
      ['text/json', { 'content-type': 'text/json' }, 415, 'Content-Type'],
      ['JSON in latin1', { 'content-type': 'application/json; charset=latin1' }, 415, 'Content-Type'],
      ['a +json type in UTF-16', { 'content-type': 'application/merchant+json; charset=utf-16' }, 415, 'Content-Type'],
      ['gzipped JSON', { 'content-type': 'application/json', 'content-encoding': 'gzip' }, 415, 'Content-Type'],
      [
        'JSON with Connection naming Content-Type',
        { 'content-type': 'application/json', connection: 'content-type' },
        400,
        'Connection',
      ],
      [
        'JSON with a length over the limit',
        { 'content-type': 'application/json', 'content-length': '70000' },
        415,
        'Content-Type',
      ],
      ['charset utf-7', { 'content-type': `${headers['content-type']}; charset=utf-7` }, 415, 'Content-Type'],
      ['CHARSET latin1', { 'content-type': `${headers['content-type']}; CHARSET=latin1` }, 415, 'Content-Type'],
      ['multipart', { 'content-type': 'multipart/form-data; boundary=x' }, 415, 'Content-Type'],
      ['gzip', { 'content-encoding': 'gzip' }, 415, 'Content-Encoding'],
      ['Connection naming a checked header', { connection: 'content-type' }, 400, 'Connection'],
      [
        'a held Accept beside a refused Content-Type',
        { accept: 'text/html', 'content-type': 'text/plain' },
        415,
        'Content-Type',
      ],
      ['a held Accept beside a coding', { accept: 'text/html', 'content-encoding': 'br' }, 415, 'Content-Encoding'],
      [
        'a held Accept beside a length over the limit',
        { accept: 'text/html', 'content-length': '70000' },
        406,
        'Accept',
      ],
    ]
    for (const [name, changes, status, headerName] of cases) {
      const sent = { ...headers, ...changes }
      t.equal(report.holdable(sent), false, `${name}: not held`)
      for (const entity of ['default', 'trial']) {
        const verdict = report.check('sale', sent, bytes(saleBody({ entity })), shop)
        t.match(verdict, { ok: false, status }, `${name}, ${entity}`)
        t.match(verdict, { body: { headerName } }, `${name}, ${entity}: enforce's first refusal`)
        t.same(verdict, enforce.check('sale', sent, bytes(saleBody({ entity })), shop), `${name}: as enforce answers`)
      }
    }
    t.equal(report.holdable(headers), true, 'a head that passes')
    t.equal(report.holdable({ ...headers, 'content-encoding': 'identity' }), true, 'identity is no coding')
  },
)

t.test(
  "report mode: a JSON type in UTF-8 is read as the checks read it, and reported with enforce's 415",
  async (t) => {
    // A backend that parses application/json or a +json type (RFC 6839) reads UTF-8 JSON, the bytes the checks read.
    for (const type of [
      'application/json',
      'Application/JSON; charset="UTF-8"',
      'application/merchant+json',
      'application/problem+json; charset=utf-8',
    ]) {
      const sent = { ...headers, 'content-type': type }
      t.equal(report.holdable(sent), true, `${type}: held`)
      const body = bytes(saleBody())
      const verdict = reported(report.check('sale', sent, body, shop))
      t.match(
        verdict,
        { entity: 'default', wouldRefuse: { status: 415, body: { headerName: 'Content-Type' } }, document: undefined },
        `${type}: enforce's refusal, reported`,
      )
      t.same(verdict.wouldRefuse, enforce.check('sale', sent, body, shop), `${type}: the very answer enforce gives`)
      t.equal(verdict.body, body, `${type}: the bytes as they came`)
      t.same(verdict.received, saleBody(), `${type}: the body the checks read`)
      t.match(
        report.check('sale', { ...sent, accept: 'text/html' }, body, shop),
        { wouldRefuse: { status: 415 } },
        `${type}: beside a refused Accept, the first refusal, as enforce answers`,
      )
      t.same(
        report.check('sale', sent, bytes(saleBody({ entity: 'strict' })), shop),
        enforce.check('sale', sent, bytes(saleBody({ entity: 'strict' })), shop),
        `${type}: an enforcing entity gets the 415`,
      )
      t.match(
        report.check('sale', sent, Buffer.from('{"merchant"'), shop),
        { ok: false, status: 415 },
        `${type}: a body that names no entity gets the 415`,
      )
      t.equal(
        report.check('sale', sent, bytes(saleBody({ entity: 'elsewhere' })), shop),
        ACCESS_DENIED,
        `${type}: check 9 still refuses`,
      )
    }
  },
)

t.test('report mode still refuses a user acting for an entity not theirs (check 9)', async (t) => {
  const other: Principal = { username: 'shop-2', entities: new Set(['elsewhere']) }
  t.equal(report.checkBody('sale', bytes(saleBody()), other), ACCESS_DENIED)
  const broken = saleBody()
  delete (broken as Record<string, unknown>).transactionReference
  t.equal(
    report.checkBody('sale', bytes(broken), other),
    ACCESS_DENIED,
    'also when the schema fails but the entity is readable',
  )
  t.match(
    enforce.checkBody('sale', bytes(broken), other),
    { body: { errorName: 'bodyDoesNotMatchSchema' } },
    'enforce answers the schema first, as ever',
  )
  t.match(
    report.checkBody('sale', bytes(broken)),
    { ok: 'report', entity: 'default' },
    'without a principal (validate) check 9 is skipped',
  )
})

t.test("a policy's mode overrides the gateway's for its entity", async (t) => {
  const currency = (entity: string) => {
    const body = saleBody({ entity })
    body.instruction.value.currency = 'JPY'
    return bytes(body)
  }
  t.match(
    report.checkBody('sale', currency('strict'), shop),
    { ok: false, body: { errorName: 'currencyIsNotSupported' } },
    'strict enforces under report',
  )
  t.match(
    report.checkBody('sale', bytes(saleBody({ entity: 'strict' })), shop),
    { ok: true, entity: 'strict' },
    'and passes, rewritten',
  )
  t.match(
    enforce.checkBody('sale', currency('trial'), shop),
    { ok: 'report', wouldRefuse: { body: { errorName: 'currencyIsNotSupported' } } },
    'trial reports under enforce',
  )
  t.match(enforce.checkBody('sale', bytes(saleBody({ entity: 'trial' })), shop), {
    ok: 'report',
    wouldRefuse: undefined,
    wouldRewrite: ['mccFilledIn'],
  })
  const broken = saleBody({ entity: 'trial' })
  broken.instruction.value.amount = -1
  t.match(
    enforce.checkBody('sale', bytes(broken), shop),
    { ok: 'report', entity: 'trial' },
    "a schema failure takes its entity's mode",
  )
  t.match(
    enforce.checkBody('sale', Buffer.from('{'), shop),
    { ok: false, body: { errorName: 'bodyIsNotJson' } },
    "without an entity, the gateway's mode",
  )
  t.match(
    enforce.checkBody('sale', bytes(saleBody({ entity: 'nowhere' })), shop),
    { ok: false },
    "an entity without a policy, the gateway's mode",
  )
  t.equal(errorNameOf(enforce.checkBody('sale', bytes(saleBody()), shop)), 'passed')
  t.equal(
    errorNameOf(report.checkBody('sale', Buffer.from('{'), shop, 'enforce')),
    'bodyIsNotJson',
    "a caller's mode wins over the checks' own",
  )
  t.equal(
    errorNameOf(enforce.checkBody('sale', Buffer.from('{'), shop, 'enforce', report.checkHead({}))),
    'headerIsMissing',
    'an earlier refusal comes first',
  )
})

t.test('rewritesOf names each change between a document and its rewritten copy', async (t) => {
  const document = saleBody() as PaymentRequest
  const same = structuredClone(document)
  t.same(rewritesOf(document, same, bytes(document)), [])
  t.same(rewritesOf(document, same, Buffer.from(`${JSON.stringify(document)}\n`)), ['reserialized'])
  const long = structuredClone(document)
  long.instruction.narrative.line1 = 'a'.repeat(30)
  const cut = structuredClone(long)
  cut.instruction.narrative.line1 = 'a'.repeat(24)
  t.same(rewritesOf(long, cut, bytes(long)), ['line1Truncated'])
})
