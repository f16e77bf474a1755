/** Request bodies and headers for tests: a clean sale and recurring request for the sample `default` entity. */
export const TEST_PAN = '4444333322221111'
export const VENDOR = 'example'
export const SALE_PATH = '/payments/sales/migrateCardOnFile'
export const RECURRING_PATH = '/payments/authorizations/migrateRecurring'
export const CONTENT_TYPE = `application/vnd.${VENDOR}.payments-v6+json`
export const ACCEPT = `application/vnd.${VENDOR}.payments-v6.hal+json`

export function saleBody(): Record<string, any> {
  return {
    transactionReference: 'order-1',
    merchant: { entity: 'default' },
    instruction: {
      narrative: { line1: 'Shop 1 – order 1234567890', line2: 'thanks' },
      paymentInstrument: { type: 'card/plain', cardNumber: TEST_PAN, cardExpiryDate: { month: 12, year: 2030 } },
      value: { amount: 250, currency: 'GBP' },
    },
  }
}

export function recurringBody(): Record<string, any> {
  const body = saleBody()
  body.instruction.intent = 'subscription'
  return body
}

export function basic(username: string, password: string): string {
  return `Basic ${Buffer.from(`${username}:${password}`).toString('base64')}`
}
