import { compileSchema } from '../schema/compile.js'
import { Type } from '../schema/typebox.js'
import type { PolicyFile as PolicyFileType } from './policy.js'

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

export const policyFileSchema = compileSchema<PolicyFileType>(PolicyFile)
