import { compileSchema } from '../schema/compile.js'
import { Type, type Static } from '../schema/typebox.js'

/**
 * The largest `rateLimit` a policy may set (docs/policies.md, rate limit): the store keeps one entry per payment
 * counted in the window, so the count bounds its memory per entity; the window is counted in milliseconds, which
 * must stay a safe integer.
 */
export const RATE_LIMIT_MAX = Object.freeze({
  payments: 1_000_000,
  seconds: Math.floor(Number.MAX_SAFE_INTEGER / 1000),
})

/** The file format of `policies/<entity>.json` (docs/policies.md). Unknown keys are refused. */
export const PolicyFile = Type.Object(
  {
    entity: Type.String({ minLength: 1 }),
    currencies: Type.Array(Type.String({ pattern: '^[A-Z]{3}$', 'x-format': 'three upper-case letters (ISO 4217)' })),
    paymentInstruments: Type.Array(Type.String({ minLength: 1 })),
    features: Type.Object(
      {
        dynamicMcc: Type.Boolean(),
        paymentFacilitator: Type.Boolean(),
        moto: Type.Boolean(),
        debtRepayment: Type.Boolean(),
      },
      { additionalProperties: false },
    ),
    mcc: Type.Optional(Type.String({ pattern: '^[0-9]{4}$', 'x-format': 'four digits' })),
    narrative: Type.Object(
      { line1: Type.Union([Type.Literal('truncate'), Type.Literal('reject')]) },
      { additionalProperties: false },
    ),
    mode: Type.Optional(Type.Union([Type.Literal('enforce'), Type.Literal('report')])),
    rateLimit: Type.Optional(
      Type.Object(
        {
          payments: Type.Integer({ minimum: 1, maximum: RATE_LIMIT_MAX.payments }),
          // Its bound told as the flags tell theirs (option-values.ts): thirteen digits would be masked as a card number.
          seconds: Type.Integer({
            minimum: 1,
            maximum: RATE_LIMIT_MAX.seconds,
            'x-format': 'a whole number of seconds from 1, below 2^53 / 1000',
          }),
        },
        { additionalProperties: false },
      ),
    ),
  },
  { additionalProperties: false },
)
export type PolicyFile = Static<typeof PolicyFile>

/** `enforce` answers every refusal; `report` forwards the request as it came and reports what enforce would have done (docs/rollout.md). */
export type Mode = 'enforce' | 'report'

export const policyFileSchema = compileSchema<PolicyFile>(PolicyFile)

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
