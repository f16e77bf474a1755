/** Valid request bodies to start from; each call returns a fresh copy to mutate. */

/** A Luhn-valid test card number (a well-known test PAN, never a real card). */
export const TEST_PAN = '4444333322221111'

export function saleBody(): Record<string, any> {
  return {
    transactionReference: 'order-1234/a',
    merchant: { entity: 'default' },
    instruction: {
      narrative: { line1: 'Mind Palace Ltd' },
      paymentInstrument: {
        type: 'card/plain',
        cardNumber: TEST_PAN,
        cardExpiryDate: { month: 5, year: 2035 },
      },
      value: { amount: 250, currency: 'GBP' },
    },
  }
}

export function recurringBody(): Record<string, any> {
  const body = saleBody()
  body.instruction.intent = 'subscription'
  return body
}

export function bytes(value: unknown): Buffer {
  return Buffer.from(JSON.stringify(value))
}
