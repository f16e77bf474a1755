import { policyFileSchema } from './file-schema.js'

/**
 * A file of `policies/<entity>.json` (docs/policies.md), as its schema (lib/policy/file-schema.ts) admits it. Written
 * out rather than inferred, so that the package's declarations hold no TypeBox types; test/declarations.test.ts holds
 * it to the schema.
 */
export interface PolicyFile {
  entity: string
  currencies: string[]
  paymentInstruments: string[]
  features: {
    dynamicMcc: boolean
    paymentFacilitator: boolean
    moto: boolean
    debtRepayment: boolean
  }
  mcc?: string
  narrative: { line1: 'truncate' | 'reject' }
  mode?: Mode
  rateLimit?: { payments: number; seconds: number }
}

/** `enforce` answers every refusal; `report` forwards the request as it came and reports what enforce would have done (docs/rollout.md). */
export type Mode = 'enforce' | 'report'

/** A loaded policy: validated, with sets for the per-request look-ups, frozen. */
export interface Policy {
  readonly entity: string
  readonly currencies: ReadonlySet<string>
  readonly paymentInstruments: ReadonlySet<string>
  readonly features: Readonly<PolicyFile['features']>
  readonly mcc: string | undefined
  readonly line1: 'truncate' | 'reject'
  /** This entity's mode, overriding the gateway's; undefined: the gateway's (docs/rollout.md). */
  readonly mode: Mode | undefined
  /** At most `payments` new payments per `seconds` for this entity; undefined: no limit (docs/policies.md, rate limit). */
  readonly rateLimit: RateLimit | undefined
}

/** A policy's `rateLimit`: at most `payments` payments in any `seconds` seconds. */
export interface RateLimit {
  readonly payments: number
  readonly seconds: number
}

/** What the checks need of the policies: the current policy of an entity. */
export interface PolicySource {
  get(entity: string): Policy | undefined
}

/**
 * Validates a parsed policy file and builds the frozen policy, or returns the
 * reasons it is refused, one line each (`$.features.moto: The field must be a boolean.`).
 */
export function compilePolicy(file: unknown): Policy | string[] {
  if (!policyFileSchema.check(file)) {
    return policyFileSchema.errors(file).map((item) => `${item.jsonPath}: ${item.message} (${item.errorName})`)
  }
  if (file.features.dynamicMcc && file.mcc === undefined) {
    return ['$.mcc: dynamicMcc is on, so the policy must name the mcc to fill in.']
  }
  return Object.freeze({
    entity: file.entity,
    currencies: new Set(file.currencies),
    paymentInstruments: new Set(file.paymentInstruments),
    features: Object.freeze({ ...file.features }),
    mcc: file.mcc,
    line1: file.narrative.line1,
    mode: file.mode,
    rateLimit: file.rateLimit && Object.freeze({ payments: file.rateLimit.payments, seconds: file.rateLimit.seconds }),
  })
}

/** A fixed set of policies, e.g. for tests or a program that builds its own. */
export function staticPolicies(policies: Iterable<Policy>): PolicySource {
  const byEntity = new Map<string, Policy>()
  for (const policy of policies) byEntity.set(policy.entity, policy)
  return byEntity
}
