/** Requests of the shared case table (embeddings, proxy) and the OpenAPI test: a line1 that needs rewriting, a token recurring payment. 4444333322221111 is the Luhn-valid test card. */
export function saleBody(overrides: { entity?: string; [key: string]: unknown } = {}): Record<string, unknown> {
  const { entity = 'default', ...rest } = overrides
  return {
    transactionReference: 'order-1001',
    merchant: { entity },
    instruction: {
      narrative: { line1: 'Mind Palace Ltd – Café ☕ extra long line' },
      paymentInstrument: { type: 'card/plain', cardNumber: '4444333322221111', cardExpiryDate: { month: 5, year: 2035 } },
      value: { amount: 250, currency: 'GBP' },
    },
    ...rest,
  }
}

export function recurringBody(entity = 'default'): Record<string, unknown> {
  return {
    transactionReference: 'sub-42',
    merchant: { entity },
    instruction: {
      narrative: { line1: 'Monthly plan' },
      paymentInstrument: { type: 'card/token', href: 'https://tokens.example/t/1' },
      value: { amount: 999, currency: 'EUR' },
      intent: 'subscription',
    },
  }
}
