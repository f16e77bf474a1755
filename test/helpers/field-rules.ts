import type { Operation } from '../../lib/schema/payment.js'
import { recurringBody, saleBody } from './bodies.js'

/**
 * Every row of CONTRACT.md's "Field rules" (and the spec's field tables) as a
 * case: a valid body, one change, and the validation items the gateway must
 * answer. Shared by the core's tests and the `validate` command's.
 */
export interface FieldRuleCase {
  name: string
  operation: Operation
  body: unknown
  expected: [errorName: string, jsonPath: string][]
}

type Body = Record<string, any>

function sale(change: (body: Body) => void): Body {
  const body = saleBody()
  change(body)
  return body
}

function recurring(change: (body: Body) => void): Body {
  const body = recurringBody()
  change(body)
  return body
}

const instrument = (body: Body) => body.instruction.paymentInstrument

export const FIELD_RULE_CASES: FieldRuleCase[] = [
  { name: 'transactionReference absent', operation: 'sale', body: sale((b) => delete b.transactionReference), expected: [['fieldIsMissing', '$.transactionReference']] },
  { name: 'a missing object reports the object only', operation: 'sale', body: sale((b) => delete b.merchant), expected: [['fieldIsMissing', '$.merchant']] },
  { name: 'instruction.value absent', operation: 'recurring', body: recurring((b) => delete b.instruction.value), expected: [['fieldIsMissing', '$.instruction.value']] },
  { name: 'required field null', operation: 'sale', body: sale((b) => (b.merchant.entity = null)), expected: [['fieldIsNull', '$.merchant.entity']] },
  { name: 'required object null', operation: 'sale', body: sale((b) => (b.instruction.narrative = null)), expected: [['fieldIsNull', '$.instruction.narrative']] },
  { name: 'string given a number', operation: 'sale', body: sale((b) => (b.transactionReference = 42)), expected: [['fieldMustBeString', '$.transactionReference']] },
  { name: 'integer given a string', operation: 'sale', body: sale((b) => (b.instruction.value.amount = '250')), expected: [['fieldMustBeInteger', '$.instruction.value.amount']] },
  { name: 'boolean given a string', operation: 'sale', body: sale((b) => (b.instruction.debtRepayment = 'yes')), expected: [['fieldMustBeBoolean', '$.instruction.debtRepayment']] },
  { name: 'object given an array', operation: 'sale', body: sale((b) => (b.merchant = ['default'])), expected: [['fieldMustBeObject', '$.merchant']] },
  { name: 'object given a string', operation: 'recurring', body: recurring((b) => (b.instruction.narrative = 'Shop')), expected: [['fieldMustBeObject', '$.instruction.narrative']] },
  { name: 'the document is an array', operation: 'sale', body: [saleBody()], expected: [['fieldMustBeObject', '$']] },
  { name: 'the document is null', operation: 'recurring', body: null, expected: [['fieldMustBeObject', '$']] },
  { name: 'the document is a string', operation: 'sale', body: 'payment', expected: [['fieldMustBeObject', '$']] },
  { name: 'empty transactionReference', operation: 'sale', body: sale((b) => (b.transactionReference = '')), expected: [['fieldIsEmpty', '$.transactionReference']] },
  { name: 'empty merchant.entity', operation: 'sale', body: sale((b) => (b.merchant.entity = '')), expected: [['fieldIsEmpty', '$.merchant.entity']] },
  { name: 'empty narrative.line1', operation: 'recurring', body: recurring((b) => (b.instruction.narrative.line1 = '')), expected: [['fieldIsEmpty', '$.instruction.narrative.line1']] },
  { name: 'empty currency', operation: 'sale', body: sale((b) => (b.instruction.value.currency = '')), expected: [['fieldIsEmpty', '$.instruction.value.currency']] },
  { name: 'intent not an allowed value', operation: 'recurring', body: recurring((b) => (b.instruction.intent = 'monthly')), expected: [['fieldHasInvalidValue', '$.instruction.intent']] },
  { name: 'intent of the wrong type', operation: 'sale', body: sale((b) => (b.instruction.intent = 1)), expected: [['fieldMustBeString', '$.instruction.intent']] },
  { name: 'intent required on recurring', operation: 'recurring', body: recurring((b) => delete b.instruction.intent), expected: [['fieldIsMissing', '$.instruction.intent']] },
  { name: 'intent null on recurring', operation: 'recurring', body: recurring((b) => (b.instruction.intent = null)), expected: [['fieldIsNull', '$.instruction.intent']] },
  { name: 'channel not moto', operation: 'sale', body: sale((b) => (b.channel = 'web')), expected: [['fieldHasInvalidValue', '$.channel']] },
  { name: 'channel on recurring', operation: 'recurring', body: recurring((b) => (b.channel = 'moto')), expected: [['fieldIsNotAllowed', '$.channel']] },
  { name: 'customer on recurring', operation: 'recurring', body: recurring((b) => (b.customer = {})), expected: [['fieldIsNotAllowed', '$.customer']] },
  { name: 'instruction.scheme on recurring', operation: 'recurring', body: recurring((b) => (b.instruction.scheme = { reference: 'x' })), expected: [['fieldIsNotAllowed', '$.instruction.scheme']] },
  { name: 'amount not whole', operation: 'sale', body: sale((b) => (b.instruction.value.amount = 2.5)), expected: [['fieldMustBeInteger', '$.instruction.value.amount']] },
  { name: 'amount below 0', operation: 'sale', body: sale((b) => (b.instruction.value.amount = -1)), expected: [['integerIsTooSmall', '$.instruction.value.amount']] },
  { name: 'amount above 2147483647', operation: 'recurring', body: recurring((b) => (b.instruction.value.amount = 2147483648)), expected: [['integerIsTooLarge', '$.instruction.value.amount']] },
  { name: 'currency in lower case', operation: 'sale', body: sale((b) => (b.instruction.value.currency = 'gbp')), expected: [['stringFailedRegexCheck', '$.instruction.value.currency']] },
  { name: 'currency of four letters', operation: 'sale', body: sale((b) => (b.instruction.value.currency = 'GBPX')), expected: [['stringFailedRegexCheck', '$.instruction.value.currency']] },
  { name: 'mcc not four digits', operation: 'sale', body: sale((b) => (b.merchant.mcc = '573')), expected: [['stringFailedRegexCheck', '$.merchant.mcc']] },
  { name: 'transactionReference over 64 characters', operation: 'sale', body: sale((b) => (b.transactionReference = 'r'.repeat(65))), expected: [['stringIsTooLong', '$.transactionReference']] },
  { name: 'transactionReference with a space', operation: 'sale', body: sale((b) => (b.transactionReference = 'order 1')), expected: [['stringFailedRegexCheck', '$.transactionReference']] },
  { name: 'transactionReference with <', operation: 'recurring', body: recurring((b) => (b.transactionReference = 'order<1>')), expected: [['stringFailedRegexCheck', '$.transactionReference']] },
  { name: 'card number fails Luhn', operation: 'sale', body: sale((b) => (instrument(b).cardNumber = '4444333322221112')), expected: [['panFailedLuhnCheck', '$.instruction.paymentInstrument.cardNumber']] },
  { name: 'card number too short', operation: 'sale', body: sale((b) => (instrument(b).cardNumber = '42')), expected: [['stringFailedRegexCheck', '$.instruction.paymentInstrument.cardNumber']] },
  { name: 'card number as a number', operation: 'sale', body: sale((b) => (instrument(b).cardNumber = 4444333322221111)), expected: [['fieldMustBeString', '$.instruction.paymentInstrument.cardNumber']] },
  { name: 'expiry month 13', operation: 'sale', body: sale((b) => (instrument(b).cardExpiryDate.month = 13)), expected: [['dateHasInvalidFormat', '$.instruction.paymentInstrument.cardExpiryDate.month']] },
  { name: 'expiry month 0', operation: 'recurring', body: recurring((b) => (instrument(b).cardExpiryDate.month = 0)), expected: [['dateHasInvalidFormat', '$.instruction.paymentInstrument.cardExpiryDate.month']] },
  { name: 'expiry year of two digits', operation: 'sale', body: sale((b) => (instrument(b).cardExpiryDate.year = 35)), expected: [['dateHasInvalidFormat', '$.instruction.paymentInstrument.cardExpiryDate.year']] },
  { name: 'expiry date absent', operation: 'sale', body: sale((b) => delete instrument(b).cardExpiryDate), expected: [['fieldIsMissing', '$.instruction.paymentInstrument.cardExpiryDate']] },
  { name: 'token without href', operation: 'sale', body: sale((b) => (b.instruction.paymentInstrument = { type: 'card/token' })), expected: [['fieldIsMissing', '$.instruction.paymentInstrument.href']] },
  { name: 'token with an empty href', operation: 'sale', body: sale((b) => (b.instruction.paymentInstrument = { type: 'card/token', href: '' })), expected: [['fieldIsEmpty', '$.instruction.paymentInstrument.href']] },
  { name: 'instrument without type', operation: 'sale', body: sale((b) => delete instrument(b).type), expected: [['fieldIsMissing', '$.instruction.paymentInstrument.type']] },
  { name: 'instrument type a number', operation: 'sale', body: sale((b) => (instrument(b).type = 7)), expected: [['fieldMustBeString', '$.instruction.paymentInstrument.type']] },
  { name: 'instrument type empty', operation: 'sale', body: sale((b) => (instrument(b).type = '')), expected: [['fieldIsEmpty', '$.instruction.paymentInstrument.type']] },
  { name: 'instrument null', operation: 'sale', body: sale((b) => (b.instruction.paymentInstrument = null)), expected: [['fieldIsNull', '$.instruction.paymentInstrument']] },
  { name: 'instrument a string', operation: 'sale', body: sale((b) => (b.instruction.paymentInstrument = 'card')), expected: [['fieldMustBeObject', '$.instruction.paymentInstrument']] },
  { name: 'facilitator without its required fields', operation: 'sale', body: sale((b) => (b.merchant.paymentFacilitator = { isoId: 'i' })), expected: [['fieldIsMissing', '$.merchant.paymentFacilitator.pfId'], ['fieldIsMissing', '$.merchant.paymentFacilitator.subMerchant']] },
  { name: 'scheme without reference', operation: 'sale', body: sale((b) => (b.instruction.scheme = {})), expected: [['fieldIsMissing', '$.instruction.scheme.reference']] },
  { name: 'optional string null', operation: 'sale', body: sale((b) => (b.instruction.narrative.line2 = null)), expected: [['fieldMustBeString', '$.instruction.narrative.line2']] },
  {
    name: 'several problems, each once',
    operation: 'sale',
    body: sale((b) => {
      b.transactionReference = ''
      delete b.merchant.entity
      b.instruction.value = { amount: 1.5, currency: 5 }
      instrument(b).cardExpiryDate = { month: 13, year: '2035' }
      b.channel = 'phone'
    }),
    expected: [
      ['fieldIsEmpty', '$.transactionReference'],
      ['fieldIsMissing', '$.merchant.entity'],
      ['dateHasInvalidFormat', '$.instruction.paymentInstrument.cardExpiryDate.month'],
      ['fieldMustBeInteger', '$.instruction.paymentInstrument.cardExpiryDate.year'],
      ['fieldMustBeInteger', '$.instruction.value.amount'],
      ['fieldMustBeString', '$.instruction.value.currency'],
      ['fieldHasInvalidValue', '$.channel'],
    ],
  },
]

/** Bodies at the edges of the rules that must pass (the facilitator one under a facilitator entity's policy). */
export const VALID_EDGE_CASES: { name: string; operation: Operation; body: unknown }[] = [
  { name: 'amount 0', operation: 'sale', body: sale((b) => (b.instruction.value.amount = 0)) },
  { name: 'amount 2147483647', operation: 'sale', body: sale((b) => (b.instruction.value.amount = 2147483647)) },
  { name: 'transactionReference of 64 characters', operation: 'sale', body: sale((b) => (b.transactionReference = 'r'.repeat(64))) },
  { name: 'every allowed transactionReference character', operation: 'recurring', body: recurring((b) => (b.transactionReference = 'Az09-_/!@#$%()*=.:;?[]{}~+')) },
  { name: 'a 19-digit card number', operation: 'sale', body: sale((b) => (instrument(b).cardNumber = '6000000000000000004')) },
  { name: 'a 12-digit card number', operation: 'sale', body: sale((b) => (instrument(b).cardNumber = '600000000007')) },
  { name: 'another instrument type, left to the policy', operation: 'sale', body: sale((b) => (b.instruction.paymentInstrument = { type: 'card/network-token', anything: 1 })) },
  { name: 'a token instrument', operation: 'sale', body: sale((b) => (b.instruction.paymentInstrument = { type: 'card/token', href: 'https://x/tokens/1' })) },
  { name: 'all sale-only fields on a sale', operation: 'sale', body: sale((b) => { b.channel = 'moto'; b.customer = { riskProfile: 'r', authentication: [1, { x: null }] }; b.instruction.scheme = { reference: 's' }; b.instruction.intent = 'instalment' }) },
  { name: 'unknown fields', operation: 'recurring', body: recurring((b) => { b.extra = { deep: [1, 2] }; b.instruction.value.exponent = 2 }) },
  { name: 'a full facilitator', operation: 'sale', body: sale((b) => (b.merchant = { entity: 'facilitator', paymentFacilitator: { pfId: 'p', subMerchant: { city: 'c', name: 'n', postalCode: 'p', merchantId: 'm', countryCode: 'GB', street: 's', email: 'e' } } })) },
]
