/** A valid policy file's content for `entity`, with any top-level key replaced. */
export function policyJson(entity: string, overrides: Record<string, unknown> = {}): string {
  return JSON.stringify({
    entity,
    currencies: ['GBP'],
    paymentInstruments: ['card/plain'],
    features: { dynamicMcc: false, paymentFacilitator: false, moto: false, debtRepayment: false },
    narrative: { line1: 'truncate' },
    ...overrides,
  })
}
