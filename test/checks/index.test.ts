import fc from 'fast-check'
import t from 'tap'
import { ACCESS_DENIED, type Principal } from '../../lib/checks/auth.js'
import { reject, serializeError, type Rejection } from '../../lib/errors.js'
import { buildChecks } from '../../lib/checks/index.js'
import { DEFAULTS } from '../../lib/defaults.js'
import { bytes, policies, saleBody } from '../helpers/fixtures.js'
import { runs } from '../helpers/fuzz.js'

const headers = { 'content-type': 'application/vnd.example.payments-v6+json' }
const shop: Principal = { username: 'shop-1', entities: new Set(['default']) }

t.test('defaults: vendor example, body limit 65536, no base path', async (t) => {
  const checks = buildChecks({ policies: policies() })
  t.equal(checks.bodyLimit, DEFAULTS.bodyLimit)
  t.equal(checks.mediaTypes.request, 'application/vnd.example.payments-v6+json')
  t.equal(checks.route('POST', '/payments/sales/migrateCardOnFile'), 'sale')
})

t.test('one reading of a target: its operation, its origin form, or the 400 of a target that is not one', async (t) => {
  const checks = buildChecks({ policies: policies() })
  t.match(checks.targetOf('http://h/payments/sales/migrateCardOnFile'), { ok: true, operation: 'sale', host: 'h' })
  t.equal(checks.operationOf('http://h/payments/sales/migrateCardOnFile'), 'sale')
  t.equal(checks.operationOf('/payments/sales/migrateCardOnFile#x'), undefined, 'refused: no operation')
  t.match(checks.route('POST', '/payments/sales/migrateCardOnFile#x'), {
    status: 400,
    body: { errorName: 'requestIsMalformed' },
  })
})

t.test('options: vendor, base path, body limit', async (t) => {
  const checks = buildChecks({ policies: policies(), vendor: 'acme', basePath: '/v6/', bodyLimit: 10 })
  t.equal(checks.route('POST', '/v6/payments/authorizations/migrateRecurring'), 'recurring')
  t.match(checks.checkHead({ 'content-type': 'application/vnd.example.payments-v6+json' }), { status: 415 })
  t.equal(checks.checkHead({ 'content-type': 'application/vnd.acme.payments-v6+json' }), undefined)
  t.match(checks.checkBody('sale', bytes(saleBody())), { status: 413, body: { errorName: 'bodyIsTooLarge' } })
})

t.test('without an authenticator nobody gets in', async (t) => {
  const checks = buildChecks({ policies: policies() })
  t.equal(checks.authenticate('Basic c2hvcDpwdw=='), ACCESS_DENIED)
  t.equal(ACCESS_DENIED.headers?.['WWW-Authenticate'], 'Basic realm="payments", charset="UTF-8"')
})

t.test("authentication is the authenticator's answer", async (t) => {
  const seen: (string | undefined)[] = []
  const checks = buildChecks({
    policies: policies(),
    authenticator: { authenticate: (header) => (seen.push(header), header === 'Basic ok' ? shop : ACCESS_DENIED) },
  })
  t.equal(checks.authenticate('Basic ok'), shop)
  t.equal(checks.authenticate(undefined), ACCESS_DENIED)
  t.strictSame(seen, ['Basic ok', undefined])
})

t.test('checkHead refuses a declared Content-Length over the limit before the body is read', async (t) => {
  const checks = buildChecks({ policies: policies(), bodyLimit: 100 })
  t.match(checks.checkHead({ ...headers, 'content-length': '101' }), {
    status: 413,
    body: { errorName: 'bodyIsTooLarge' },
  })
  t.equal(checks.checkHead({ ...headers, 'content-length': '100' }), undefined)
})

t.test("the checks run in the contract's order: headers, then the body", async (t) => {
  const checks = buildChecks({ policies: policies() })
  t.match(checks.check('sale', {}, Buffer.from('not json')), { status: 400, body: { errorName: 'headerIsMissing' } })
  t.match(checks.check('sale', { 'content-type': 'text/plain' }, Buffer.from('')), { status: 415 })
  t.match(checks.check('sale', { ...headers, accept: 'text/html' }, Buffer.from('')), { status: 406 })
  t.match(checks.check('sale', headers, Buffer.from('')), { status: 400, body: { errorName: 'bodyIsEmpty' } })
})

t.test('a clean body comes back rewritten, with its operation and entity', async (t) => {
  const checks = buildChecks({ policies: policies() })
  const body = saleBody()
  body.instruction.narrative.line1 = 'Mind Palace — Baker Street London'
  body.instruction.narrative.line2 = 'order #12'
  const verdict = checks.check('sale', headers, bytes(body), shop)
  t.equal(verdict.ok, true)
  if (verdict.ok !== true) return
  t.equal(verdict.operation, 'sale')
  t.equal(verdict.entity, 'default')
  t.equal(verdict.document.instruction.narrative.line1, 'Mind Palace   Baker Stre')
  t.equal(verdict.document.instruction.narrative.line2, 'order  12')
  t.equal(verdict.document.merchant.mcc, '5734')
})

t.test('check 9 runs after the schema and before the policy', async (t) => {
  const checks = buildChecks({ policies: policies() })
  const other: Principal = { username: 'shop-2', entities: new Set(['elsewhere']) }
  t.equal(checks.checkBody('sale', bytes(saleBody()), other), ACCESS_DENIED)
  t.match(checks.checkBody('sale', Buffer.from('{}'), other), {
    status: 400,
    body: { errorName: 'bodyDoesNotMatchSchema' },
  })
  const unknown = saleBody()
  unknown.merchant.entity = 'elsewhere'
  t.match(checks.checkBody('sale', bytes(unknown), other), {
    status: 400,
    body: { errorName: 'entityIsNotConfigured' },
  })
  t.match(
    checks.checkBody('sale', bytes(unknown)),
    { status: 400, body: { errorName: 'entityIsNotConfigured' } },
    'no principal: check 9 skipped',
  )
})

t.test("an error built by reject has the table's status", async (t) => {
  t.equal(reject('entityIsNotConfigured').status, 400)
})

t.test('one spelling of every named member: a folded sibling or a repeat is refused in both modes', async (t) => {
  const marketplace = { username: 'alice', entities: new Set(['default']) }
  const sale = JSON.stringify(saleBody())
  const bodies: [string, string, string][] = [
    [
      'a folded entity',
      sale.replace('"entity":"default"', '"entity":"default","Entity":"marketplace"'),
      '$.merchant.Entity',
    ],
    ['a second merchant', sale.replace('{', '{"MERCHANT":{"entity":"marketplace"},'), '$.MERCHANT'],
    [
      'a folded currency',
      sale.replace('"currency":"GBP"', '"currency":"GBP","Currency":"JPY"'),
      '$.instruction.value.Currency',
    ],
    [
      'a repeated entity',
      sale.replace('"entity":"default"', '"entity":"marketplace","entity":"default"'),
      '$.merchant.entity',
    ],
  ]
  for (const mode of ['enforce', 'report'] as const) {
    const checks = buildChecks({ policies: policies(), mode })
    for (const [name, body, jsonPath] of bodies) {
      t.match(
        checks.checkBody('sale', Buffer.from(body), marketplace),
        {
          ok: false,
          status: 400,
          body: {
            errorName: 'bodyDoesNotMatchSchema',
            validationErrors: [{ errorName: 'fieldIsNotAllowed', jsonPath }],
          },
        },
        `${mode}: ${name}`,
      )
    }
  }
})

t.test('no error body repeats a card number written in a member name, however deep or spelt', async (t) => {
  const checks = buildChecks({ policies: policies() })
  const sale = JSON.stringify(saleBody()).slice(1)
  const pans = ['4111111111111111', '5555555555554444', '378282246310005', '6011000990139424']
  const spelt = fc
    .tuple(
      fc.constantFrom(...pans),
      fc.constantFrom('', ' ', '-'),
      fc.string({ maxLength: 3 }),
      fc.string({ maxLength: 3 }),
    )
    .map(([pan, gap, before, after]) => ({
      pan,
      key: before + (gap === '' ? pan : (pan.match(/.{1,4}/g) as string[]).join(gap)) + after,
    }))
  const chain = fc.tuple(
    fc.array(fc.string({ maxLength: 6 }), { maxLength: 2 }),
    spelt,
    fc.array(fc.string(), { maxLength: 2 }),
  )
  fc.assert(
    fc.property(chain, fc.boolean(), ([above, { pan, key }, below], constructor) => {
      const inner = constructor ? '{"constructor":{"prototype":{}}}' : '{"__proto__":1}'
      const nested = [...above, key, ...below].reduceRight((value, name) => `{${JSON.stringify(name)}:${value}}`, inner)
      const verdict = checks.checkBody('sale', Buffer.from(`{"x":${nested},${sale}`))
      const shown = serializeError((verdict as Rejection).body)
      return shown.includes('Prototype keys') && !shown.replace(/[ -]/g, '').includes(pan)
    }),
    runs(),
  )
})
