import { fieldError, reject, schemaRejection, type FieldError, type Rejection } from '../errors.js'
import { LINE1_MAX_LENGTH, replaceUnsupported } from '../narrative.js'
import type { Policy } from '../policy/policy.js'
import type { PaymentRequest, SaleRequest } from '../schema/payment.js'

const INSTRUMENT_NOT_SUPPORTED = reject('paymentInstrumentIsNotSupported')
const CURRENCY_NOT_SUPPORTED = reject('currencyIsNotSupported')

/** Check 13: the first attribute in the request that the entity's features do not enable. */
function unconfiguredAttribute(document: PaymentRequest, policy: Policy): string | undefined {
  const { features } = policy
  if (document.merchant.mcc !== undefined && !features.dynamicMcc) return 'merchant.mcc (dynamic mcc)'
  if (document.merchant.paymentFacilitator !== undefined && !features.paymentFacilitator) {
    return 'merchant.paymentFacilitator'
  }
  if ((document as SaleRequest).channel === 'moto' && !features.moto) return 'channel moto'
  if (document.instruction.debtRepayment === true && !features.debtRepayment) return 'instruction.debtRepayment'
  return undefined
}

/**
 * Checks 11 to 13 and the two policy-dependent field rules, then the rewrites.
 * On success the document has been rewritten in place for forwarding: narrative
 * characters replaced, line1 truncated in `truncate` mode, mcc filled in.
 */
export function applyPolicy(document: PaymentRequest, policy: Policy): Rejection | undefined {
  const { merchant, instruction } = document
  const { narrative } = instruction
  const line1 = replaceUnsupported(narrative.line1)
  let items: FieldError[] | undefined
  if (policy.features.paymentFacilitator && merchant.paymentFacilitator === undefined) {
    items = [
      fieldError(
        'fieldIsMissing',
        '$.merchant.paymentFacilitator',
        'This entity is a Payment Facilitator: merchant.paymentFacilitator is mandatory.',
      ),
    ]
  }
  if (policy.line1 === 'reject' && line1.length > LINE1_MAX_LENGTH) {
    ;(items ??= []).push(
      fieldError(
        'stringIsTooLong',
        '$.instruction.narrative.line1',
        `The string must be at most ${LINE1_MAX_LENGTH} characters long.`,
      ),
    )
  }
  if (items !== undefined) return schemaRejection(items)
  if (!policy.paymentInstruments.has(instruction.paymentInstrument.type)) return INSTRUMENT_NOT_SUPPORTED
  if (!policy.currencies.has(instruction.value.currency)) return CURRENCY_NOT_SUPPORTED
  const attribute = unconfiguredAttribute(document, policy)
  if (attribute !== undefined) {
    return reject('merchantIsNotConfigured', { message: `The merchant entity is not configured to use ${attribute}.` })
  }
  narrative.line1 = line1.length > LINE1_MAX_LENGTH ? line1.slice(0, LINE1_MAX_LENGTH) : line1
  if (narrative.line2 !== undefined) narrative.line2 = replaceUnsupported(narrative.line2)
  if (merchant.mcc === undefined && policy.features.dynamicMcc) merchant.mcc = policy.mcc
  return undefined
}

/**
 * A change enforce mode makes to a passing document before forwarding it (docs/checks.md, rewrites):
 * the narrative's unsupported characters replaced, line1 cut to its length, the mcc filled in, and the
 * document serialized again (white space, escapes or repeated keys not as they came).
 */
export type Rewrite = 'line1Characters' | 'line1Truncated' | 'line2Characters' | 'mccFilledIn' | 'reserialized'

/**
 * The rewrites that turned `received` into `forwarded` (the same document after `applyPolicy`), and
 * whether `body`, the bytes it was parsed from, differ from its serialization: report mode's account
 * of what enforce mode would have changed (docs/rollout.md).
 */
export function rewritesOf(received: PaymentRequest, forwarded: PaymentRequest, body: Uint8Array): Rewrite[] {
  const rewrites: Rewrite[] = []
  const before = received.instruction.narrative
  const after = forwarded.instruction.narrative
  const line1 = replaceUnsupported(before.line1)
  if (line1 !== before.line1) rewrites.push('line1Characters')
  if (line1.length > after.line1.length) rewrites.push('line1Truncated')
  if (before.line2 !== after.line2) rewrites.push('line2Characters')
  if (received.merchant.mcc !== forwarded.merchant.mcc) rewrites.push('mccFilledIn')
  if (!Buffer.from(JSON.stringify(received)).equals(body)) rewrites.push('reserialized')
  return rewrites
}
