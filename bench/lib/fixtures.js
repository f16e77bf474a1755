// Bodies and headers shared by the micro and end-to-end benchmarks, so both measure the same bytes.
// 4444333322221111 is the Luhn-valid test card number, never a real card.

export const VENDOR = 'example'
export const CONTENT_TYPE = `application/vnd.${VENDOR}.payments-v6+json`
export const ACCEPT = `application/vnd.${VENDOR}.payments-v6.hal+json`
export const SALE_PATH = '/payments/sales/migrateCardOnFile'
export const USER = 'bench-shop'
export const PASSWORD = 'bench-password-1'
export const AUTHORIZATION = `Basic ${Buffer.from(`${USER}:${PASSWORD}`).toString('base64')}`

/** A sale as a shop would send it: every common field filled in, about 600 bytes. */
export function validSale() {
  return {
    transactionReference: 'order-2024-000187',
    merchant: { entity: 'default', mcc: '5734' },
    instruction: {
      narrative: { line1: 'Mind Palace Ltd', line2: 'Order 2024-000187, 3 items' },
      paymentInstrument: {
        type: 'card/plain',
        cardNumber: '4444333322221111',
        cardExpiryDate: { month: 5, year: 2035 },
        cardHolderName: 'Sherlock Holmes',
        billingAddress: { address1: '221B Baker Street', city: 'London', postalCode: 'NW1 6XE', countryCode: 'GB' },
      },
      value: { amount: 12550, currency: 'GBP' },
      scheme: { reference: 'MCC0000001234567890' },
    },
    channel: 'moto',
    customer: { riskProfile: 'low', authentication: { version: '2.2.0', eci: '05' } },
  }
}

/**
 * The invalid body used end to end: the same sale with three field mistakes
 * (a failed Luhn check, a lower-case currency, an amount that is not whole).
 * It passes every header check and parses, so the refusal is decided by the
 * schema check (400 bodyDoesNotMatchSchema), the most expensive refusal.
 */
export function invalidSale() {
  const body = validSale()
  body.instruction.paymentInstrument.cardNumber = '4444333322221112'
  body.instruction.value.currency = 'gbp'
  body.instruction.value.amount = 125.5
  return body
}

/** The valid sale grown to the body limit with unknown keys (forwarded as they came): the size alone, no errors. */
export function paddedSale(limit = 65536) {
  const body = validSale()
  const holders = [
    body,
    body.merchant,
    body.instruction,
    body.instruction.value,
    body.instruction.narrative,
    body.instruction.paymentInstrument,
  ]
  fill(body, holders, limit)
  return body
}

function fill(body, holders, limit) {
  for (let i = 0; JSON.stringify(body).length < limit - 200; i++) {
    holders[i % holders.length][`unknown_${i}`] = { n: i, s: 'padding-value' }
  }
}

/**
 * The worst case a client can send within the 64 KiB limit: every named field
 * wrong (so every one yields an error item), thousands of unknown keys (which
 * the schema allows and walks), and nesting as deep as the gateway allows
 * (64 levels). It measures whether collecting every error is bounded.
 */
export function worstCaseSale(limit = 65536) {
  let deep = {}
  for (let i = 0; i < 60; i++) deep = { d: deep }
  const wrongPlain = {
    type: 'card/plain',
    cardNumber: '1234567890123456789',
    cardExpiryDate: { month: 13, year: 99 },
    cardHolderName: 42,
    billingAddress: 'none',
  }
  const body = {
    transactionReference: `bad ref <${'x'.repeat(80)}>`,
    merchant: {
      entity: '',
      mcc: 'abcd',
      paymentFacilitator: {
        pfId: '',
        isoId: 7,
        subMerchant: {
          city: 1,
          name: 2,
          postalCode: 3,
          merchantId: 4,
          countryCode: 5,
          street: 6,
          telephone: 7,
          taxId: 8,
          email: 9,
          state: 10,
        },
      },
    },
    instruction: {
      narrative: { line1: '', line2: 12 },
      paymentInstrument: wrongPlain,
      value: { amount: -1.5, currency: 'pounds' },
      debtRepayment: 'yes',
      intent: 'forever',
      scheme: { reference: null },
    },
    channel: 'web',
    customer: { riskProfile: 5, authentication: deep },
  }
  // Fill the rest of the limit with unknown keys at every level the schema walks.
  fill(
    body,
    [body, body.merchant, body.instruction, body.instruction.value, body.instruction.narrative, wrongPlain],
    limit,
  )
  return body
}

export const bytesOf = (value) => Buffer.from(JSON.stringify(value))
