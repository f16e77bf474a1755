import type { Policy } from '../policy/policy.js'

/**
 * The IETF RateLimit fields of a policy's rate limit (draft-ietf-httpapi-ratelimit-headers-11), as Structured
 * Fields (RFC 9651): each a List of one Item, the String `"payments"` naming the quota policy, with Integer
 * parameters and the entity as its partition key, a Byte Sequence, so that a client acting for several
 * entities tells their quotas apart. Every number is a whole one the policy's bounds keep within an Integer's 15
 * digits (RFC 9651 3.3.1, policy.ts), so its decimal is its serialization (4.1.4).
 */
export const POLICY_FIELD = 'RateLimit-Policy'
export const SERVICE_FIELD = 'RateLimit'

/** A Byte Sequence (RFC 9651 4.1.8): the bytes in base64 with padding, between colons. */
function byteSequence(text: string): string {
  return `:${Buffer.from(text, 'utf8').toString('base64')}:`
}

/** What every answer of one policy's entity shares: the `RateLimit-Policy` value and the `pk` parameter. */
interface PolicyFields {
  readonly policy: string
  readonly pk: string
}

/** Made once per policy (a reload makes a new one), not per payment. */
const made = new WeakMap<Policy, PolicyFields>()

function fieldsOf(policy: Policy, limit: NonNullable<Policy['rateLimit']>): PolicyFields {
  let fields = made.get(policy)
  if (fields === undefined) {
    const pk = byteSequence(policy.entity)
    fields = { policy: `"payments";q=${limit.payments};w=${limit.seconds};pk=${pk}`, pk }
    made.set(policy, fields)
  }
  return fields
}

/** `RateLimit-Policy: "payments";q=N;w=S;pk=:ENTITY:` for a policy with a rate limit. */
export function policyField(policy: Policy, limit: NonNullable<Policy['rateLimit']>): string {
  return fieldsOf(policy, limit).policy
}

/** `RateLimit: "payments";r=REMAINING;t=SECONDS;pk=:ENTITY:`: what is left, and when more is. */
export function serviceField(
  policy: Policy,
  limit: NonNullable<Policy['rateLimit']>,
  remaining: number,
  seconds: number,
): string {
  return `"payments";r=${remaining};t=${seconds};pk=${fieldsOf(policy, limit).pk}`
}
