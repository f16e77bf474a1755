import { compilePolicy, staticPolicies, type Policy, type PolicyFile, type PolicySource } from '../../lib/policy/policy.js'

export function policyFile(overrides: Partial<PolicyFile> = {}): PolicyFile {
  return {
    entity: 'default',
    currencies: ['GBP', 'EUR', 'USD'],
    paymentInstruments: ['card/plain', 'card/token'],
    features: { dynamicMcc: true, paymentFacilitator: false, moto: true, debtRepayment: false },
    mcc: '5734',
    narrative: { line1: 'truncate' },
    ...overrides,
  }
}

export function policy(overrides: Partial<PolicyFile> = {}): Policy {
  const compiled = compilePolicy(policyFile(overrides))
  if (Array.isArray(compiled)) throw new Error(compiled.join('; '))
  return compiled
}

/** The contract's sample policy for `default`, plus whatever else a test names. */
export function policies(...more: Partial<PolicyFile>[]): PolicySource {
  return staticPolicies([policy(), ...more.map((overrides) => policy(overrides))])
}

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
