import t from 'tap'
import { REQUEST_NAMES, type Names } from '../../lib/schema/names.js'

/** A table as a plain object: each member's own table, or null. */
const shape = (names: Names | null): unknown =>
  names === null ? null : Object.fromEntries([...names.members].map(([name, below]) => [name, shape(below)]))

t.test(
  'the tables name what each schema names, variants of a union merged, open objects left without one',
  async (t) => {
    const sale = shape(REQUEST_NAMES.sale) as Record<string, any>
    t.same(Object.keys(sale), ['transactionReference', 'merchant', 'instruction', 'channel', 'customer'])
    t.same(sale.merchant.paymentFacilitator.subMerchant.city, null)
    t.same(sale.instruction.paymentInstrument, {
      type: null,
      cardNumber: null,
      cardExpiryDate: { month: null, year: null },
      cardHolderName: null,
      billingAddress: null,
      href: null,
    })
    t.same(sale.instruction.scheme, { reference: null })
    t.same(sale.customer, { riskProfile: null, authentication: null }, 'authentication is left open')
    const recurring = shape(REQUEST_NAMES.recurring) as Record<string, any>
    t.equal(recurring.customer, null, 'a member named only to refuse it has no table')
    t.equal(recurring.instruction.scheme, null)
    t.ok(REQUEST_NAMES.sale.folded.has('transactionreference'))
    t.notOk(REQUEST_NAMES.sale.folded.has('transactionReference'))
    t.ok(REQUEST_NAMES.sale.folded.has('instruction'), 'folded as paths are: foldCase')
  },
)
