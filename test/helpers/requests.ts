/** A valid sale request body for `entity`, with parts replaced; `undefined` values drop a key. */
export function saleRequest(entity: string, change: (request: Record<string, any>) => void = () => {}): Buffer {
  const request: Record<string, any> = {
    transactionReference: 'order-1001',
    merchant: { entity },
    instruction: {
      narrative: { line1: 'Mind Palace Ltd' },
      paymentInstrument: { type: 'card/plain', cardNumber: '4444333322221111', cardExpiryDate: { month: 12, year: 2030 } },
      value: { amount: 250, currency: 'GBP' },
    },
  }
  change(request)
  return Buffer.from(JSON.stringify(request))
}

export const PAYMENT_FACILITATOR = {
  pfId: 'pf-1',
  subMerchant: {
    city: 'London',
    name: 'Corner Shop',
    postalCode: 'N1 9GU',
    merchantId: 'sub-1',
    countryCode: 'GB',
    street: '1 High Street',
  },
}
