import t from 'tap'
import { buildChecks, type Passed, type Verdict } from '../../lib/checks/index.js'
import type { Rejection } from '../../lib/errors.js'
import { watchPolicies } from '../../lib/policy/store.js'
import type { SaleRequest } from '../../lib/schema/payment.js'
import { bytes, PAYMENT_FACILITATOR, saleBody } from '../helpers/fixtures.js'

// The shipped sample policies, read from disk by the real store:
// default (GBP EUR USD, cards, dynamic mcc 5734, moto, truncate), eu-tokens (EUR, token only, nothing
// enabled), marketplace (a Payment Facilitator, GBP EUR, reject), collections (GBP, debt repayment, moto,
// dynamic mcc 6012, reject).
const policies = await watchPolicies('policies')
t.teardown(() => policies.close())
const checks = buildChecks({ policies })

function refusal(verdict: Verdict): Rejection['body'] & { status: number } {
  if (verdict.ok) throw new Error('expected a refusal')
  return { status: verdict.status, ...verdict.body }
}

function accepted(verdict: Verdict): Passed & { document: SaleRequest } {
  if (!verdict.ok) throw new Error(`refused: ${verdict.body.errorName}`)
  return verdict as Passed & { document: SaleRequest }
}

/** The sale for `entity` as bytes, with `change` applied. */
function saleRequest(entity: string, change: (request: Record<string, any>) => void = () => {}): Buffer {
  const request = saleBody({ entity })
  change(request)
  return bytes(request)
}

const token = { type: 'card/token', href: 'https://tokens.example/t/1' }

t.test('check 10: an entity without a policy is entityIsNotConfigured', async (t) => {
  t.match(refusal(checks.checkBody('sale', saleRequest('nobody'))), { status: 400, errorName: 'entityIsNotConfigured' })
})

t.test('check 11: an instrument type the policy does not list is paymentInstrumentIsNotSupported', async (t) => {
  t.match(
    refusal(
      checks.checkBody(
        'sale',
        saleRequest('eu-tokens', (r) => (r.instruction.value.currency = 'EUR')),
      ),
    ),
    {
      status: 400,
      errorName: 'paymentInstrumentIsNotSupported',
    },
  )
  const other = saleRequest('default', (r) => (r.instruction.paymentInstrument = { type: 'apm/paypal' }))
  t.match(refusal(checks.checkBody('sale', other)), { errorName: 'paymentInstrumentIsNotSupported' })
})

t.test('check 12: a currency the policy does not list is currencyIsNotSupported', async (t) => {
  const request = saleRequest('eu-tokens', (r) => (r.instruction.paymentInstrument = token))
  t.match(refusal(checks.checkBody('sale', request)), { status: 400, errorName: 'currencyIsNotSupported' })
  t.match(
    refusal(
      checks.checkBody(
        'sale',
        saleRequest('default', (r) => (r.instruction.value.currency = 'JPY')),
      ),
    ),
    {
      errorName: 'currencyIsNotSupported',
    },
  )
})

t.test('check 13: each attribute the features do not enable is merchantIsNotConfigured', async (t) => {
  const euro = (change: (r: Record<string, any>) => void) =>
    saleRequest('eu-tokens', (r) => {
      r.instruction.paymentInstrument = token
      r.instruction.value.currency = 'EUR'
      change(r)
    })
  t.ok(
    checks.checkBody(
      'sale',
      euro(() => {}),
    ).ok,
    'the plain request passes',
  )
  const cases: Array<[string, Buffer, RegExp]> = [
    ['mcc', euro((r) => (r.merchant.mcc = '5411')), /merchant\.mcc/],
    [
      'paymentFacilitator',
      euro((r) => (r.merchant.paymentFacilitator = PAYMENT_FACILITATOR)),
      /merchant\.paymentFacilitator/,
    ],
    ['moto', euro((r) => (r.channel = 'moto')), /moto/],
    ['debtRepayment', euro((r) => (r.instruction.debtRepayment = true)), /debtRepayment/],
  ]
  for (const [name, body, message] of cases) {
    t.match(
      refusal(checks.checkBody('sale', body)),
      { status: 400, errorName: 'merchantIsNotConfigured', message },
      name,
    )
  }
  t.ok(
    checks.checkBody(
      'sale',
      euro((r) => (r.instruction.debtRepayment = false)),
    ).ok,
    'debtRepayment false uses nothing',
  )
  const enabled = saleRequest('collections', (r) => {
    r.channel = 'moto'
    r.instruction.debtRepayment = true
    r.merchant.mcc = '6011'
  })
  t.equal(accepted(checks.checkBody('sale', enabled)).document.merchant.mcc, '6011', 'enabled attributes pass')
})

t.test('a Payment Facilitator entity without merchant.paymentFacilitator: fieldIsMissing', async (t) => {
  t.same(refusal(checks.checkBody('sale', saleRequest('marketplace'))).validationErrors, [
    {
      errorName: 'fieldIsMissing',
      message: 'This entity is a Payment Facilitator: merchant.paymentFacilitator is mandatory.',
      jsonPath: '$.merchant.paymentFacilitator',
    },
  ])
  t.match(
    refusal(
      checks.checkBody(
        'sale',
        saleRequest('marketplace', (r) => (r.instruction.value.currency = 'USD')),
      ),
    ),
    {
      status: 400,
      errorName: 'bodyDoesNotMatchSchema',
    },
    'checked right after check 10, before currency',
  )
  const pf = saleRequest('marketplace', (r) => (r.merchant.paymentFacilitator = PAYMENT_FACILITATOR))
  t.same(accepted(checks.checkBody('sale', pf)).document.merchant.paymentFacilitator, PAYMENT_FACILITATOR)
})

t.test('narrative line1 over 24 characters: stringIsTooLong in reject mode, cut in truncate mode', async (t) => {
  const long = 'Mind Palace Ltd Baker Street'
  const rejected = refusal(
    checks.checkBody(
      'sale',
      saleRequest('collections', (r) => (r.instruction.narrative.line1 = long)),
    ),
  )
  t.match(rejected, { status: 400, errorName: 'bodyDoesNotMatchSchema' })
  t.same(
    rejected.validationErrors?.map(({ errorName, jsonPath }) => ({ errorName, jsonPath })),
    [{ errorName: 'stringIsTooLong', jsonPath: '$.instruction.narrative.line1' }],
  )
  t.equal(rejected.validationErrors?.[0]?.message, 'The string must be at most 24 characters long.')
  const both = refusal(
    checks.checkBody(
      'sale',
      saleRequest('marketplace', (r) => (r.instruction.narrative.line1 = long)),
    ),
  )
  t.same(
    both.validationErrors?.map((item) => item.errorName),
    ['fieldIsMissing', 'stringIsTooLong'],
    'both rules reported',
  )
  const exactly = 'x'.repeat(24)
  t.equal(
    accepted(
      checks.checkBody(
        'sale',
        saleRequest('collections', (r) => (r.instruction.narrative.line1 = exactly)),
      ),
    ).document.instruction.narrative.line1,
    exactly,
  )

  const cut = accepted(
    checks.checkBody(
      'sale',
      saleRequest('default', (r) => (r.instruction.narrative.line1 = long)),
    ),
  )
  t.equal(cut.document.instruction.narrative.line1, 'Mind Palace Ltd Baker St')
  const emoji = accepted(
    checks.checkBody(
      'sale',
      saleRequest('default', (r) => (r.instruction.narrative.line1 = 'Café 🍰 & Co')),
    ),
  )
  t.equal(emoji.document.instruction.narrative.line1, `Caf${' '.repeat(6)}Co`, 'a code point becomes one space')
  const line2 = accepted(
    checks.checkBody(
      'sale',
      saleRequest('default', (r) => (r.instruction.narrative.line2 = 'Order #42 — thanks!')),
    ),
  )
  t.equal(line2.document.instruction.narrative.line2, 'Order  42   thanks ', 'line2 gets the same replacement, no cut')
})

t.test('merchant.mcc is filled in from the policy when dynamic mcc is on and the request has none', async (t) => {
  t.equal(accepted(checks.checkBody('sale', saleRequest('default'))).document.merchant.mcc, '5734')
  t.equal(
    accepted(
      checks.checkBody(
        'sale',
        saleRequest('default', (r) => (r.merchant.mcc = '5411')),
      ),
    ).document.merchant.mcc,
    '5411',
  )
  const euro = saleRequest('eu-tokens', (r) => {
    r.instruction.paymentInstrument = token
    r.instruction.value.currency = 'EUR'
  })
  t.notOk('mcc' in accepted(checks.checkBody('sale', euro)).document.merchant, 'dynamic mcc off: nothing added')
})

t.test('the recurring operation goes through the same policy checks', async (t) => {
  const recurring = (entity: string, change: (r: Record<string, any>) => void = () => {}) =>
    saleRequest(entity, (r) => {
      r.instruction.intent = 'subscription'
      change(r)
    })
  t.equal(accepted(checks.checkBody('recurring', recurring('default'))).document.merchant.mcc, '5734')
  t.match(refusal(checks.checkBody('recurring', recurring('nobody'))), { errorName: 'entityIsNotConfigured' })
  t.match(
    refusal(
      checks.checkBody(
        'recurring',
        recurring('default', (r) => (r.instruction.debtRepayment = true)),
      ),
    ),
    {
      errorName: 'merchantIsNotConfigured',
    },
  )
})
