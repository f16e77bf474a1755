/**
 * The two request bodies of the payments v6 API as TypeScript types, and their operations. Written out rather than
 * inferred from the schemas (lib/schema/bodies.ts), so that the package's declarations hold no TypeBox types and a
 * project that type-checks against them does not load TypeBox's; test/declarations.test.ts holds each to its schema.
 */

/** A sale's `merchant.paymentFacilitator.subMerchant`. */
interface SubMerchant {
  city: string
  name: string
  postalCode: string
  merchantId: string
  countryCode: string
  street: string
  telephone?: string
  taxId?: string
  email?: string
  state?: string
}

interface Merchant {
  entity: string
  mcc?: string
  paymentFacilitator?: {
    pfId: string
    isoId?: string
    subMerchant: SubMerchant
  }
}

interface Narrative {
  line1: string
  line2?: string
}

interface PlainCard {
  type: 'card/plain'
  cardNumber: string
  cardExpiryDate: { month: number; year: number }
  cardHolderName?: string
  billingAddress?: Record<never, never>
}

interface TokenCard {
  type: 'card/token'
  href: string
}

/** An instrument the gateway knows no inner fields of: checked only against the policy. */
interface OtherInstrument {
  type: string
}

type Intent = 'instalment' | 'subscription'

interface Instruction {
  narrative: Narrative
  paymentInstrument: PlainCard | TokenCard | OtherInstrument
  value: { amount: number; currency: string }
  debtRepayment?: boolean
}

interface SaleInstruction extends Instruction {
  intent?: Intent
  scheme?: { reference: string }
}

interface RecurringInstruction extends Instruction {
  intent: Intent
  scheme?: never
}

export interface SaleRequest {
  transactionReference: string
  merchant: Merchant
  instruction: SaleInstruction
  channel?: 'moto'
  customer?: {
    riskProfile?: string
    authentication?: unknown
  }
}

/** The fields only a sale has are refused here (`fieldIsNotAllowed`). */
export interface RecurringRequest {
  transactionReference: string
  merchant: Merchant
  instruction: RecurringInstruction
  channel?: never
  customer?: never
}

/** A request body that passed its operation's schema. */
export type PaymentRequest = SaleRequest | RecurringRequest

export type Operation = 'sale' | 'recurring'
export const OPERATIONS: readonly Operation[] = ['sale', 'recurring']

/** The operation's path below `{base}` (docs/checks.md, routes). */
export const OPERATION_PATHS: Readonly<Record<Operation, string>> = {
  sale: '/payments/sales/migrateCardOnFile',
  recurring: '/payments/authorizations/migrateRecurring',
}
