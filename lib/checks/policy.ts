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
      fieldError('fieldIsMissing', '$.merchant.paymentFacilitator', 'This entity is a Payment Facilitator: merchant.paymentFacilitator is mandatory.'),
    ]
  }
  if (policy.line1 === 'reject' && line1.length > LINE1_MAX_LENGTH) {
    ;(items ??= []).push(
      fieldError('stringIsTooLong', '$.instruction.narrative.line1', `The string must be at most ${LINE1_MAX_LENGTH} characters long.`),
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
