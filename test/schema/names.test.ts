import t from 'tap'
import { fold, REQUEST_NAMES, type Names } from '../../lib/schema/names.js'

/** A table as a plain object: each member's own table, or null. */
const shape = (names: Names | null): unknown =>
  names === null ? null : Object.fromEntries([...names.members].map(([name, below]) => [name, shape(below)]))

t.test('fold: letter case, and the four characters outside ASCII whose case mapping is an ASCII letter', async (t) => {
  t.equal(fold('Entity'), 'entity')
  t.equal(fold('ENTITY'), 'entity')
  t.equal(fold('ſcheme'), 'scheme', 'the long s')
  t.equal(fold('\u212Aey'), 'key', 'the Kelvin sign')
  t.equal(fold('İd'), 'id', 'the dotted capital I')
  t.equal(fold('ıd'), 'id', 'the dotless i')
  t.equal(fold('éntity'), 'éntity', 'any other character stays itself')
  t.equal(fold('x\u{1F600}ſ'), 'x\u{1F600}s', 'characters outside the BMP are read whole')
})

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
  },
)
