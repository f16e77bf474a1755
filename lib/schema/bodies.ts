import { FormatRegistry, Type, type TSchema } from './typebox.js'
import { luhnValid } from '../luhn.js'
import type { Operation } from './payment.js'

/**
 * The schemas of the two request bodies of the payments v6 API, with the field rules of docs/checks.md.
 * These schemas are the single source of truth: the gateway compiles them, the
 * OpenAPI document is printed from them and the tests hand them to Ajv. Their
 * TypeScript types are lib/schema/payment.ts's, held to them by
 * test/declarations.test.ts.
 *
 * Two annotations feed the error mapping (lib/schema/error-map.ts) and are
 * plain OpenAPI extensions elsewhere:
 * - `x-format`: how a value with a `pattern` must look, for the error message;
 * - `x-error`: the field error name to report for a range failure instead of
 *   the generic one (the expiry date's month and year).
 */

export const LUHN_FORMAT = 'luhn'
FormatRegistry.Set(LUHN_FORMAT, luhnValid)

/** Characters allowed in `transactionReference` (docs/checks.md, field rules). */
const TRANSACTION_REFERENCE_PATTERN = '^[A-Za-z0-9_/!@#$%()*=.:;?\\[\\]{}~+-]*$'
/** A payment instrument type the gateway knows no inner fields of. */
const OTHER_INSTRUMENT_TYPE_PATTERN = '^(?!card/(?:plain|token)$)'

const nonEmpty = (description: string) => Type.String({ minLength: 1, description })
const optionalString = (description: string) => Type.Optional(Type.String({ description }))
/** A field that only the sale has: present in a recurring request it is `fieldIsNotAllowed`. */
const saleOnly = () => Type.Optional(Type.Never())

const SubMerchant = Type.Object({
  city: nonEmpty('Sub-merchant city.'),
  name: nonEmpty('Sub-merchant name.'),
  postalCode: nonEmpty('Sub-merchant postal code.'),
  merchantId: nonEmpty('Sub-merchant identifier.'),
  countryCode: nonEmpty('Sub-merchant country code.'),
  street: nonEmpty('Sub-merchant street.'),
  telephone: optionalString('Sub-merchant telephone.'),
  taxId: optionalString('Sub-merchant tax identifier.'),
  email: optionalString('Sub-merchant email.'),
  state: optionalString('Sub-merchant state.'),
})

const PaymentFacilitator = Type.Object(
  {
    pfId: nonEmpty('Facilitator identifier.'),
    isoId: optionalString('ISO identifier.'),
    subMerchant: SubMerchant,
  },
  { description: 'Payment Facilitator information; required when the caller is a Payment Facilitator.' },
)

const Merchant = Type.Object({
  entity: nonEmpty('Directs the payment for billing, reporting and reconciliation.'),
  mcc: Type.Optional(
    Type.String({
      pattern: '^[0-9]{4}$',
      'x-format': 'four digits',
      description: 'Merchant category code for this request; only with the dynamic mcc feature.',
    }),
  ),
  paymentFacilitator: Type.Optional(PaymentFacilitator),
})

const Narrative = Type.Object({
  line1: nonEmpty('First statement line; unsupported characters become spaces; at most 24 characters.'),
  line2: optionalString('Additional payment details, such as an order number.'),
})

const CardExpiryDate = Type.Object({
  month: Type.Integer({
    minimum: 1,
    maximum: 12,
    'x-error': 'dateHasInvalidFormat',
    'x-format': 'a month from 1 to 12',
  }),
  year: Type.Integer({
    minimum: 1000,
    maximum: 9999,
    'x-error': 'dateHasInvalidFormat',
    'x-format': 'a four-digit year',
  }),
})

const PlainCard = Type.Object({
  type: Type.Literal('card/plain'),
  cardNumber: Type.String({
    minLength: 1,
    pattern: '^[0-9]{12,19}$',
    format: LUHN_FORMAT,
    'x-format': '12 to 19 digits',
    description: 'The card number (PAN).',
  }),
  cardExpiryDate: CardExpiryDate,
  cardHolderName: optionalString('Name on the card.'),
  billingAddress: Type.Optional(Type.Object({}, { description: 'Billing address.' })),
})

const TokenCard = Type.Object({
  type: Type.Literal('card/token'),
  href: nonEmpty('Link to the stored token.'),
})

const OtherInstrument = Type.Object({
  type: Type.String({
    minLength: 1,
    pattern: OTHER_INSTRUMENT_TYPE_PATTERN,
    'x-format': 'a payment instrument type',
  }),
})

/** Chosen by `type`; instruments other than the two cards are checked only against the policy. */
const PaymentInstrument = Type.Union([PlainCard, TokenCard, OtherInstrument], {
  discriminator: { propertyName: 'type' },
  description: 'The stored payment instrument.',
})

const Value = Type.Object({
  amount: Type.Integer({
    minimum: 0,
    maximum: 2147483647,
    description: 'Whole number carrying the currency exponent: with exponent two, 250 means 2.50.',
  }),
  currency: Type.String({
    minLength: 1,
    pattern: '^[A-Z]{3}$',
    'x-format': 'three upper-case letters (ISO 4217)',
    description: 'ISO 4217 alphabetic currency code.',
  }),
})

const Intent = Type.Union([Type.Literal('instalment'), Type.Literal('subscription')], {
  description: 'Reason for the card on file agreement.',
})

const instructionFields = {
  narrative: Narrative,
  paymentInstrument: PaymentInstrument,
  value: Value,
  debtRepayment: Type.Optional(Type.Boolean({ description: 'Marks the payment as a debt repayment.' })),
}

const transactionReference = Type.String({
  minLength: 1,
  maxLength: 64,
  pattern: TRANSACTION_REFERENCE_PATTERN,
  'x-format': 'letters, digits and - _ / ! @ # $ % ( ) * = . : ; ? [ ] { } ~ +',
  description: 'Unique reference generated by the caller.',
})

export const SaleRequest = Type.Object(
  {
    transactionReference,
    merchant: Merchant,
    instruction: Type.Object({
      ...instructionFields,
      intent: Type.Optional(Intent),
      scheme: Type.Optional(Type.Object({ reference: nonEmpty('Scheme reference.') })),
    }),
    channel: Type.Optional(Type.Literal('moto', { description: 'Process as a Mail Order or Telephone Order.' })),
    customer: Type.Optional(
      Type.Object({
        riskProfile: optionalString('Customer risk profile.'),
        authentication: Type.Optional(Type.Unknown({ description: '3DS or Network Token authentication.' })),
      }),
    ),
  },
  { title: 'CardOnFileSale' },
)

export const RecurringRequest = Type.Object(
  {
    transactionReference,
    merchant: Merchant,
    instruction: Type.Object({
      ...instructionFields,
      intent: Intent,
      scheme: saleOnly(),
    }),
    channel: saleOnly(),
    customer: saleOnly(),
  },
  { title: 'MigrateRecurringAuthorization' },
)

export const REQUEST_SCHEMAS: Readonly<Record<Operation, TSchema>> = {
  sale: SaleRequest,
  recurring: RecurringRequest,
}
