import fc from 'fast-check'
import t from 'tap'
import { compileSchema } from '../../lib/schema/compile.js'
import { mapErrors } from '../../lib/schema/error-map.js'
import { REQUEST_SCHEMAS } from '../../lib/schema/bodies.js'
import type { Operation } from '../../lib/schema/payment.js'
import { TypeCompiler } from '../../lib/schema/typebox.js'
import { recurringBody, saleBody, TEST_PAN } from '../helpers/fixtures.js'
import { runs, setPath } from '../helpers/fuzz.js'
import { ajvRecurring, ajvSale } from '../helpers/oracle.js'

/**
 * Differential tests: TypeBox's compiled check and Ajv, compiled from the same
 * JSON Schema, must agree on valid/invalid for every generated body; a body
 * TypeBox refuses always gets at least one field error; and the guided error
 * walk reports exactly what TypeBox's walk of the whole document reports.
 */
const compiled = { sale: compileSchema(REQUEST_SCHEMAS.sale), recurring: compileSchema(REQUEST_SCHEMAS.recurring) }
const oracle = { sale: ajvSale, recurring: ajvRecurring }
const whole = {
  sale: TypeCompiler.Compile(REQUEST_SCHEMAS.sale),
  recurring: TypeCompiler.Compile(REQUEST_SCHEMAS.recurring),
}
const sameErrors = (operation: Operation, document: unknown) =>
  JSON.stringify(compiled[operation].errors(document)) ===
  JSON.stringify(mapErrors(whole[operation].Errors(document), document))

const PATHS = [
  'transactionReference',
  'merchant',
  'merchant.entity',
  'merchant.mcc',
  'merchant.paymentFacilitator',
  'merchant.paymentFacilitator.pfId',
  'merchant.paymentFacilitator.subMerchant',
  'instruction',
  'instruction.narrative',
  'instruction.narrative.line1',
  'instruction.narrative.line2',
  'instruction.paymentInstrument',
  'instruction.paymentInstrument.type',
  'instruction.paymentInstrument.cardNumber',
  'instruction.paymentInstrument.cardExpiryDate',
  'instruction.paymentInstrument.cardExpiryDate.month',
  'instruction.paymentInstrument.cardExpiryDate.year',
  'instruction.paymentInstrument.href',
  'instruction.value',
  'instruction.value.amount',
  'instruction.value.currency',
  'instruction.debtRepayment',
  'instruction.intent',
  'instruction.scheme',
  'instruction.scheme.reference',
  'channel',
  'customer',
  'customer.riskProfile',
  'customer.authentication',
  'extra',
]

const interesting = fc.constantFrom<unknown>(
  '',
  'GBP',
  'gbp',
  'moto',
  'web',
  'instalment',
  'subscription',
  'card/plain',
  'card/token',
  'card/other',
  TEST_PAN,
  '4444333322221112',
  '600000000007',
  'r'.repeat(64),
  'r'.repeat(65),
  'a b',
  'x😀',
  '5734',
  '57340',
  0,
  1,
  12,
  13,
  1000,
  9999,
  10000,
  -1,
  2.5,
  2147483647,
  2147483648,
  null,
  true,
  false,
  {},
  [],
  { reference: 'r' },
  { month: 1, year: 2030 },
  { type: 'card/token', href: 'h' },
  {
    pfId: 'p',
    subMerchant: { city: 'c', name: 'n', postalCode: 'p', merchantId: 'm', countryCode: 'GB', street: 's' },
  },
)

const mutation = fc.record({
  path: fc.constantFrom(...PATHS),
  remove: fc.boolean(),
  value: fc.oneof(interesting, fc.jsonValue({ maxDepth: 2 })),
})

t.test('TypeBox and Ajv agree on valid/invalid for generated bodies; guided and whole error walks agree', async (t) => {
  // 4,000 runs at npm test's FUZZ_RUNS (300); fewer under npm run mutate's.
  const bodies = runs(40 / 3)
  let valid = 0
  let invalid = 0
  fc.assert(
    fc.property(
      fc.constantFrom<Operation>('sale', 'recurring'),
      fc.array(mutation, { maxLength: 4 }),
      (operation, mutations) => {
        const body = operation === 'sale' ? saleBody() : recurringBody()
        // A copy: constantFrom hands out the same object every run, and a later mutation would write into it,
        // until one held itself.
        for (const { path, remove, value } of mutations) setPath(body, path, structuredClone(value), remove)
        const document = JSON.parse(JSON.stringify(body))
        const typebox = compiled[operation].check(document)
        if (typebox !== oracle[operation](document)) return false
        if (typebox) valid++
        else {
          invalid++
          if (compiled[operation].errors(document).length === 0) return false
          if (!sameErrors(operation, document)) return false
        }
        return true
      },
    ),
    bodies,
  )
  // Each kind one body in twenty at least, whatever the count: 200 of npm test's 4,000.
  t.ok(valid > bodies.numRuns / 20, `enough valid bodies (${valid} of ${bodies.numRuns})`)
  t.ok(invalid > bodies.numRuns / 20, `enough invalid bodies (${invalid} of ${bodies.numRuns})`)
})

t.test('TypeBox and Ajv agree on arbitrary JSON documents', async (t) => {
  fc.assert(
    fc.property(
      fc.jsonValue({ maxDepth: 4 }),
      (value) =>
        compiled.sale.check(value) === ajvSale(value) &&
        compiled.recurring.check(value) === ajvRecurring(value) &&
        sameErrors('sale', value) &&
        sameErrors('recurring', value),
    ),
    runs(10 / 3),
  )
  t.pass('agreed')
})
