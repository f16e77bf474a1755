/**
 * The shared tables of requests and answers.
 *
 * CASES: one request per check of docs/checks.md ("The checks, in order"),
 * plus 405, a clean pass of each operation and an untouched path, and the
 * answer every surface must give. test/gate.test.ts runs it against the node
 * handler, Express, Fastify and the proxy (`everyEmbedding`), so the answers
 * cannot drift; the proxy runs with retry protection on and looks a payment's
 * key up before the policy checks (docs/idempotency.md), so a row that passes
 * check 9 with another body than an earlier row has its own transactionReference.
 *
 * FIELD_RULE_CASES and VALID_EDGE_CASES: docs/checks.md's "Field rules" as
 * bodies and the validation items they must produce, shared by the core's
 * tests and the `validate` command's.
 */
import { ACCESS_DENIED } from '../../lib/checks/auth.js'
import { reject, type ErrorName, type Rejection } from '../../lib/errors.js'
import type { Operation } from '../../lib/schema/payment.js'
import {
  AUTH,
  BODY_LIMIT,
  OTHER_PATH,
  PASSWORD,
  RECURRING_PATH,
  REQUEST_TYPE,
  RESPONSE_TYPE,
  SALE_PATH,
  USERNAME,
  basic,
  recurringBody,
  saleBody,
  tokenRecurringBody,
  type BodyOverrides,
} from './fixtures.js'

export interface Case {
  /** What the row shows, with the number of its check in docs/checks.md. */
  readonly name: string
  readonly method: string
  readonly path: string
  readonly headers: Readonly<Record<string, string>>
  readonly body?: string | Buffer
  /** Send the body chunked, without Content-Length. */
  readonly chunked?: boolean
  readonly status: number
  /** Undefined when the request goes through to the application. */
  readonly errorName?: ErrorName
  /** The whole expected answer, where its message is the table's default. */
  readonly rejection?: Rejection
  /** Fields the answer's JSON body must hold (a partial match), where `rejection` cannot say it. */
  readonly match?: Readonly<Record<string, unknown>>
  /** Response headers the answer must carry (lower-case names). */
  readonly responseHeaders?: Readonly<Record<string, string>>
}

const GOOD = { authorization: AUTH, 'content-type': REQUEST_TYPE, accept: RESPONSE_TYPE }
const json = (value: unknown) => JSON.stringify(value)
/** The table's sale: its line1 needs replacing and cutting, so a pass shows the rewritten document. */
const instruction = (changes: Record<string, unknown>) => ({
  ...saleBody().instruction,
  narrative: { line1: 'Mind Palace Ltd – Café ☕ extra long line' },
  ...changes,
})
const tableSale = (overrides: BodyOverrides = {}) =>
  json(saleBody({ transactionReference: 'order-1001', instruction: instruction({}), ...overrides }))
const CHALLENGE = { 'www-authenticate': 'Basic realm="payments", charset="UTF-8"' }

/**
 * A clean sale padded with an unnamed field to exactly `bytes` bytes of UTF-8,
 * with a `transactionReference` of its own: it is another payment than the
 * clean sale's, and the proxy's retry protection tells them apart by it.
 */
function saleOfSize(bytes: number, transactionReference: string): string {
  const unpadded = Buffer.byteLength(tableSale({ transactionReference, padding: '' }))
  const body = tableSale({ transactionReference, padding: 'x'.repeat(bytes - unpadded) })
  if (Buffer.byteLength(body) !== bytes)
    throw new Error(`a sale of ${bytes} bytes cannot be built (${unpadded} without padding)`)
  return body
}

export const CASES: readonly Case[] = [
  { name: 'clean sale passes', method: 'POST', path: SALE_PATH, headers: GOOD, body: tableSale(), status: 201 },
  {
    name: 'clean recurring passes',
    method: 'POST',
    path: RECURRING_PATH,
    headers: GOOD,
    body: json(tokenRecurringBody()),
    status: 201,
  },
  {
    name: 'clean sale, chunked, with a query string',
    method: 'POST',
    path: `${SALE_PATH}?trace=1`,
    headers: GOOD,
    body: tableSale({ transactionReference: 'order-1002' }),
    chunked: true,
    status: 201,
  },
  { name: 'another path is untouched', method: 'GET', path: OTHER_PATH, headers: {}, status: 200 },
  {
    name: '405: GET on an operation path',
    method: 'GET',
    path: SALE_PATH,
    headers: { authorization: AUTH },
    status: 405,
    errorName: 'methodIsNotAllowed',
    rejection: reject('methodIsNotAllowed', { headers: { Allow: 'POST' } }),
    responseHeaders: { allow: 'POST' },
  },
  {
    name: "405: GET on the other operation path, with a payment's headers",
    method: 'GET',
    path: RECURRING_PATH,
    headers: GOOD,
    status: 405,
    errorName: 'methodIsNotAllowed',
    rejection: reject('methodIsNotAllowed', { headers: { Allow: 'POST' } }),
    responseHeaders: { allow: 'POST' },
  },
  {
    name: '1: no Authorization',
    method: 'POST',
    path: SALE_PATH,
    headers: { 'content-type': REQUEST_TYPE },
    body: tableSale(),
    status: 401,
    errorName: 'accessDenied',
    rejection: ACCESS_DENIED,
    responseHeaders: CHALLENGE,
  },
  {
    name: '1: wrong password',
    method: 'POST',
    path: SALE_PATH,
    headers: { ...GOOD, authorization: basic(USERNAME, 'wrong') },
    body: tableSale(),
    status: 401,
    errorName: 'accessDenied',
    rejection: ACCESS_DENIED,
    responseHeaders: CHALLENGE,
  },
  {
    name: '1: unknown user',
    method: 'POST',
    path: RECURRING_PATH,
    headers: { ...GOOD, authorization: basic('nobody', PASSWORD) },
    body: tableSale(),
    status: 401,
    errorName: 'accessDenied',
    rejection: ACCESS_DENIED,
    responseHeaders: CHALLENGE,
  },
  {
    name: '1: not Basic',
    method: 'POST',
    path: SALE_PATH,
    headers: { ...GOOD, authorization: 'Bearer abc' },
    body: tableSale(),
    status: 401,
    errorName: 'accessDenied',
    rejection: ACCESS_DENIED,
    responseHeaders: CHALLENGE,
  },
  {
    name: '2: no Content-Type',
    method: 'POST',
    path: SALE_PATH,
    headers: { authorization: AUTH },
    body: tableSale(),
    status: 400,
    errorName: 'headerIsMissing',
    match: { headerName: 'Content-Type' },
  },
  {
    name: '3: Content-Type application/json',
    method: 'POST',
    path: SALE_PATH,
    headers: { ...GOOD, 'content-type': 'application/json' },
    body: tableSale(),
    status: 415,
    errorName: 'headerHasInvalidValue',
  },
  {
    name: '3: a +json type (RFC 6839) other than the v6 type, in UTF-8',
    method: 'POST',
    path: SALE_PATH,
    headers: { ...GOOD, 'content-type': 'application/merchant+json; charset=utf-8' },
    body: tableSale(),
    status: 415,
    errorName: 'headerHasInvalidValue',
    match: { headerName: 'Content-Type' },
  },
  {
    name: '3: Content-Type text/json',
    method: 'POST',
    path: SALE_PATH,
    headers: { ...GOOD, 'content-type': 'text/json' },
    body: tableSale(),
    status: 415,
    errorName: 'headerHasInvalidValue',
    match: { headerName: 'Content-Type' },
  },
  {
    name: '3: Content-Type with charset latin1',
    method: 'POST',
    path: SALE_PATH,
    headers: { ...GOOD, 'content-type': `${REQUEST_TYPE}; charset=latin1` },
    body: tableSale(),
    status: 415,
    errorName: 'headerHasInvalidValue',
  },
  {
    name: '3: upper-case Content-Type with charset utf-8 passes',
    method: 'POST',
    path: SALE_PATH,
    headers: { ...GOOD, 'content-type': `${REQUEST_TYPE.toUpperCase()}; charset=UTF-8` },
    body: tableSale({ transactionReference: 'order-1003' }),
    status: 201,
  },
  {
    name: '3: Content-Type with CHARSET=latin1, its name in capitals',
    method: 'POST',
    path: SALE_PATH,
    headers: { ...GOOD, 'content-type': `${REQUEST_TYPE}; CHARSET=latin1` },
    body: tableSale(),
    status: 415,
    errorName: 'headerHasInvalidValue',
    match: { headerName: 'Content-Type' },
  },
  {
    name: '3: Content-Type naming its charset twice',
    method: 'POST',
    path: SALE_PATH,
    headers: { ...GOOD, 'content-type': `${REQUEST_TYPE}; charset=utf-7; charset=utf-8` },
    body: tableSale(),
    status: 415,
    errorName: 'headerHasInvalidValue',
    match: { headerName: 'Content-Type' },
  },
  {
    name: '3: Content-Encoding gzip',
    method: 'POST',
    path: SALE_PATH,
    headers: { ...GOOD, 'content-encoding': 'gzip' },
    body: tableSale(),
    status: 415,
    errorName: 'headerHasInvalidValue',
    match: { headerName: 'Content-Encoding' },
  },
  {
    name: '2: Connection naming Content-Type, Accept and Authorization',
    method: 'POST',
    path: SALE_PATH,
    headers: { ...GOOD, connection: 'content-type, accept, authorization' },
    body: tableSale(),
    status: 400,
    errorName: 'headerHasInvalidValue',
    match: { headerName: 'Connection' },
  },
  {
    name: '4: Accept text/html',
    method: 'POST',
    path: SALE_PATH,
    headers: { ...GOOD, accept: 'text/html' },
    body: tableSale(),
    status: 406,
    errorName: 'headerHasInvalidValue',
    match: { headerName: 'Accept' },
  },
  {
    name: '5: declared body too large',
    method: 'POST',
    path: SALE_PATH,
    headers: GOOD,
    body: tableSale({ padding: 'x'.repeat(BODY_LIMIT) }),
    status: 413,
    errorName: 'bodyIsTooLarge',
  },
  {
    name: '5: chunked body too large',
    method: 'POST',
    path: SALE_PATH,
    headers: GOOD,
    body: tableSale({ padding: 'x'.repeat(BODY_LIMIT) }),
    chunked: true,
    status: 413,
    errorName: 'bodyIsTooLarge',
  },
  {
    name: '5: body of exactly the limit passes',
    method: 'POST',
    path: SALE_PATH,
    headers: GOOD,
    body: saleOfSize(BODY_LIMIT, 'limit-1'),
    status: 201,
  },
  {
    name: '5: body of exactly the limit passes, chunked',
    method: 'POST',
    path: SALE_PATH,
    headers: GOOD,
    body: saleOfSize(BODY_LIMIT, 'limit-2'),
    chunked: true,
    status: 201,
  },
  {
    name: '5: declared body one byte over the limit',
    method: 'POST',
    path: SALE_PATH,
    headers: GOOD,
    body: saleOfSize(BODY_LIMIT + 1, 'limit-3'),
    status: 413,
    errorName: 'bodyIsTooLarge',
  },
  {
    name: '5: chunked body one byte over the limit',
    method: 'POST',
    path: SALE_PATH,
    headers: GOOD,
    body: saleOfSize(BODY_LIMIT + 1, 'limit-4'),
    chunked: true,
    status: 413,
    errorName: 'bodyIsTooLarge',
  },
  {
    name: '6: empty body',
    method: 'POST',
    path: SALE_PATH,
    headers: GOOD,
    body: '',
    status: 400,
    errorName: 'bodyIsEmpty',
    rejection: reject('bodyIsEmpty'),
  },
  {
    name: '6: white space only',
    method: 'POST',
    path: RECURRING_PATH,
    headers: GOOD,
    body: ' \r\n\t ',
    status: 400,
    errorName: 'bodyIsEmpty',
    rejection: reject('bodyIsEmpty'),
  },
  {
    name: '7: not JSON',
    method: 'POST',
    path: SALE_PATH,
    headers: GOOD,
    body: '{"transactionReference":',
    status: 400,
    errorName: 'bodyIsNotJson',
    rejection: reject('bodyIsNotJson'),
  },
  {
    name: '7: not UTF-8',
    method: 'POST',
    path: SALE_PATH,
    headers: GOOD,
    body: Buffer.from([0x7b, 0x22, 0xff, 0x22, 0x3a, 0x31, 0x7d]),
    status: 400,
    errorName: 'bodyIsNotJson',
  },
  {
    name: '8: schema problems',
    method: 'POST',
    path: SALE_PATH,
    headers: GOOD,
    body: tableSale({ transactionReference: '', channel: 'post' }),
    status: 400,
    errorName: 'bodyDoesNotMatchSchema',
  },
  {
    name: '8: card number fails the Luhn check',
    method: 'POST',
    path: SALE_PATH,
    headers: GOOD,
    body: tableSale({
      instruction: instruction({
        paymentInstrument: {
          type: 'card/plain',
          cardNumber: '4444333322221112',
          cardExpiryDate: { month: 5, year: 2035 },
        },
      }),
    }),
    status: 400,
    errorName: 'bodyDoesNotMatchSchema',
    match: {
      validationErrors: [{ errorName: 'panFailedLuhnCheck', jsonPath: '$.instruction.paymentInstrument.cardNumber' }],
    },
  },
  {
    name: '8: sale-only field in a recurring request',
    method: 'POST',
    path: RECURRING_PATH,
    headers: GOOD,
    body: json(tokenRecurringBody({ channel: 'moto' })),
    status: 400,
    errorName: 'bodyDoesNotMatchSchema',
  },
  {
    name: '8: prototype key',
    method: 'POST',
    path: SALE_PATH,
    headers: GOOD,
    body: tableSale({ __proto__x: 1 }).replace('__proto__x', '__proto__'),
    status: 400,
    errorName: 'bodyDoesNotMatchSchema',
  },
  {
    name: '9: entity the user may not act for',
    method: 'POST',
    path: SALE_PATH,
    headers: GOOD,
    body: tableSale({ entity: 'eu-tokens' }),
    status: 401,
    errorName: 'accessDenied',
    rejection: ACCESS_DENIED,
    responseHeaders: CHALLENGE,
  },
  {
    name: '9: entity the user may not act for, without a policy either',
    method: 'POST',
    path: SALE_PATH,
    headers: GOOD,
    body: tableSale({ entity: 'nowhere' }),
    status: 401,
    errorName: 'accessDenied',
    rejection: ACCESS_DENIED,
    responseHeaders: CHALLENGE,
  },
  {
    name: '10: entity without a policy',
    method: 'POST',
    path: SALE_PATH,
    headers: GOOD,
    body: tableSale({ entity: 'ghost' }),
    status: 400,
    errorName: 'entityIsNotConfigured',
    rejection: reject('entityIsNotConfigured'),
  },
  {
    name: '10+: Payment Facilitator entity without paymentFacilitator',
    method: 'POST',
    path: SALE_PATH,
    headers: GOOD,
    body: tableSale({ entity: 'marketplace' }),
    status: 400,
    errorName: 'bodyDoesNotMatchSchema',
    match: { validationErrors: [{ errorName: 'fieldIsMissing', jsonPath: '$.merchant.paymentFacilitator' }] },
  },
  {
    name: '10+: line1 too long where the policy says reject',
    method: 'POST',
    path: SALE_PATH,
    headers: GOOD,
    body: tableSale({
      entity: 'collections',
      instruction: { ...instruction({}), value: { amount: 1, currency: 'GBP' } },
    }),
    status: 400,
    errorName: 'bodyDoesNotMatchSchema',
  },
  {
    name: '11: payment instrument not in the policy',
    method: 'POST',
    path: SALE_PATH,
    headers: GOOD,
    body: tableSale({
      transactionReference: 'policy-11',
      instruction: instruction({ paymentInstrument: { type: 'wallet/x' } }),
    }),
    status: 400,
    errorName: 'paymentInstrumentIsNotSupported',
    rejection: reject('paymentInstrumentIsNotSupported'),
  },
  {
    name: '12: currency not in the policy',
    method: 'POST',
    path: SALE_PATH,
    headers: GOOD,
    body: tableSale({
      transactionReference: 'policy-12',
      instruction: instruction({ value: { amount: 1, currency: 'JPY' } }),
    }),
    status: 400,
    errorName: 'currencyIsNotSupported',
    rejection: reject('currencyIsNotSupported'),
  },
  {
    name: '13: paymentFacilitator on an entity that is not one',
    method: 'POST',
    path: SALE_PATH,
    headers: GOOD,
    body: tableSale({
      transactionReference: 'policy-13a',
      merchant: {
        entity: 'default',
        paymentFacilitator: {
          pfId: 'pf',
          subMerchant: { city: 'c', name: 'n', postalCode: 'p', merchantId: 'm', countryCode: 'GB', street: 's' },
        },
      },
    }),
    status: 400,
    errorName: 'merchantIsNotConfigured',
  },
  {
    name: '13: debtRepayment not enabled',
    method: 'POST',
    path: SALE_PATH,
    headers: GOOD,
    body: tableSale({ transactionReference: 'policy-13b', instruction: instruction({ debtRepayment: true }) }),
    status: 400,
    errorName: 'merchantIsNotConfigured',
  },
]

export interface FieldRuleCase {
  name: string
  operation: Operation
  body: unknown
  expected: [errorName: string, jsonPath: string][]
}

type Body = Record<string, any>

function sale(change: (body: Body) => void): Body {
  const body = saleBody()
  change(body)
  return body
}

function recurring(change: (body: Body) => void): Body {
  const body = recurringBody()
  change(body)
  return body
}

const instrument = (body: Body) => body.instruction.paymentInstrument

export const FIELD_RULE_CASES: FieldRuleCase[] = [
  {
    name: 'transactionReference absent',
    operation: 'sale',
    body: sale((b) => delete b.transactionReference),
    expected: [['fieldIsMissing', '$.transactionReference']],
  },
  {
    name: 'a missing object reports the object only',
    operation: 'sale',
    body: sale((b) => delete b.merchant),
    expected: [['fieldIsMissing', '$.merchant']],
  },
  {
    name: 'instruction.value absent',
    operation: 'recurring',
    body: recurring((b) => delete b.instruction.value),
    expected: [['fieldIsMissing', '$.instruction.value']],
  },
  {
    name: 'required field null',
    operation: 'sale',
    body: sale((b) => (b.merchant.entity = null)),
    expected: [['fieldIsNull', '$.merchant.entity']],
  },
  {
    name: 'required object null',
    operation: 'sale',
    body: sale((b) => (b.instruction.narrative = null)),
    expected: [['fieldIsNull', '$.instruction.narrative']],
  },
  {
    name: 'string given a number',
    operation: 'sale',
    body: sale((b) => (b.transactionReference = 42)),
    expected: [['fieldMustBeString', '$.transactionReference']],
  },
  {
    name: 'integer given a string',
    operation: 'sale',
    body: sale((b) => (b.instruction.value.amount = '250')),
    expected: [['fieldMustBeInteger', '$.instruction.value.amount']],
  },
  {
    name: 'boolean given a string',
    operation: 'sale',
    body: sale((b) => (b.instruction.debtRepayment = 'yes')),
    expected: [['fieldMustBeBoolean', '$.instruction.debtRepayment']],
  },
  {
    name: 'object given an array',
    operation: 'sale',
    body: sale((b) => (b.merchant = ['default'])),
    expected: [['fieldMustBeObject', '$.merchant']],
  },
  {
    name: 'object given a string',
    operation: 'recurring',
    body: recurring((b) => (b.instruction.narrative = 'Shop')),
    expected: [['fieldMustBeObject', '$.instruction.narrative']],
  },
  { name: 'the document is an array', operation: 'sale', body: [saleBody()], expected: [['fieldMustBeObject', '$']] },
  { name: 'the document is null', operation: 'recurring', body: null, expected: [['fieldMustBeObject', '$']] },
  { name: 'the document is a string', operation: 'sale', body: 'payment', expected: [['fieldMustBeObject', '$']] },
  {
    name: 'empty transactionReference',
    operation: 'sale',
    body: sale((b) => (b.transactionReference = '')),
    expected: [['fieldIsEmpty', '$.transactionReference']],
  },
  {
    name: 'empty merchant.entity',
    operation: 'sale',
    body: sale((b) => (b.merchant.entity = '')),
    expected: [['fieldIsEmpty', '$.merchant.entity']],
  },
  {
    name: 'empty narrative.line1',
    operation: 'recurring',
    body: recurring((b) => (b.instruction.narrative.line1 = '')),
    expected: [['fieldIsEmpty', '$.instruction.narrative.line1']],
  },
  {
    name: 'empty currency',
    operation: 'sale',
    body: sale((b) => (b.instruction.value.currency = '')),
    expected: [['fieldIsEmpty', '$.instruction.value.currency']],
  },
  {
    name: 'intent not an allowed value',
    operation: 'recurring',
    body: recurring((b) => (b.instruction.intent = 'monthly')),
    expected: [['fieldHasInvalidValue', '$.instruction.intent']],
  },
  {
    name: 'intent of the wrong type',
    operation: 'sale',
    body: sale((b) => (b.instruction.intent = 1)),
    expected: [['fieldMustBeString', '$.instruction.intent']],
  },
  {
    name: 'intent required on recurring',
    operation: 'recurring',
    body: recurring((b) => delete b.instruction.intent),
    expected: [['fieldIsMissing', '$.instruction.intent']],
  },
  {
    name: 'intent null on recurring',
    operation: 'recurring',
    body: recurring((b) => (b.instruction.intent = null)),
    expected: [['fieldIsNull', '$.instruction.intent']],
  },
  {
    name: 'channel not moto',
    operation: 'sale',
    body: sale((b) => (b.channel = 'web')),
    expected: [['fieldHasInvalidValue', '$.channel']],
  },
  {
    name: 'channel on recurring',
    operation: 'recurring',
    body: recurring((b) => (b.channel = 'moto')),
    expected: [['fieldIsNotAllowed', '$.channel']],
  },
  {
    name: 'customer on recurring',
    operation: 'recurring',
    body: recurring((b) => (b.customer = {})),
    expected: [['fieldIsNotAllowed', '$.customer']],
  },
  {
    name: 'instruction.scheme on recurring',
    operation: 'recurring',
    body: recurring((b) => (b.instruction.scheme = { reference: 'x' })),
    expected: [['fieldIsNotAllowed', '$.instruction.scheme']],
  },
  {
    name: 'amount not whole',
    operation: 'sale',
    body: sale((b) => (b.instruction.value.amount = 2.5)),
    expected: [['fieldMustBeInteger', '$.instruction.value.amount']],
  },
  {
    name: 'amount below 0',
    operation: 'sale',
    body: sale((b) => (b.instruction.value.amount = -1)),
    expected: [['integerIsTooSmall', '$.instruction.value.amount']],
  },
  {
    name: 'amount above 2147483647',
    operation: 'recurring',
    body: recurring((b) => (b.instruction.value.amount = 2147483648)),
    expected: [['integerIsTooLarge', '$.instruction.value.amount']],
  },
  {
    name: 'currency in lower case',
    operation: 'sale',
    body: sale((b) => (b.instruction.value.currency = 'gbp')),
    expected: [['stringFailedRegexCheck', '$.instruction.value.currency']],
  },
  {
    name: 'currency of four letters',
    operation: 'sale',
    body: sale((b) => (b.instruction.value.currency = 'GBPX')),
    expected: [['stringFailedRegexCheck', '$.instruction.value.currency']],
  },
  {
    name: 'mcc not four digits',
    operation: 'sale',
    body: sale((b) => (b.merchant.mcc = '573')),
    expected: [['stringFailedRegexCheck', '$.merchant.mcc']],
  },
  {
    name: 'transactionReference over 64 characters',
    operation: 'sale',
    body: sale((b) => (b.transactionReference = 'r'.repeat(65))),
    expected: [['stringIsTooLong', '$.transactionReference']],
  },
  {
    name: 'transactionReference of 33 characters beyond the BMP (66 UTF-16 units): too long in units only',
    operation: 'sale',
    body: sale((b) => (b.transactionReference = '\u{1F600}'.repeat(33))),
    expected: [['stringFailedRegexCheck', '$.transactionReference']],
  },
  {
    name: 'transactionReference of 65 characters beyond the BMP',
    operation: 'recurring',
    body: recurring((b) => (b.transactionReference = '\u{1F600}'.repeat(65))),
    expected: [['stringIsTooLong', '$.transactionReference']],
  },
  {
    name: 'transactionReference with a space',
    operation: 'sale',
    body: sale((b) => (b.transactionReference = 'order 1')),
    expected: [['stringFailedRegexCheck', '$.transactionReference']],
  },
  {
    name: 'transactionReference with <',
    operation: 'recurring',
    body: recurring((b) => (b.transactionReference = 'order<1>')),
    expected: [['stringFailedRegexCheck', '$.transactionReference']],
  },
  {
    name: 'card number fails Luhn',
    operation: 'sale',
    body: sale((b) => (instrument(b).cardNumber = '4444333322221112')),
    expected: [['panFailedLuhnCheck', '$.instruction.paymentInstrument.cardNumber']],
  },
  {
    name: 'card number too short',
    operation: 'sale',
    body: sale((b) => (instrument(b).cardNumber = '42')),
    expected: [['stringFailedRegexCheck', '$.instruction.paymentInstrument.cardNumber']],
  },
  {
    name: 'card number as a number',
    operation: 'sale',
    body: sale((b) => (instrument(b).cardNumber = 4444333322221111)),
    expected: [['fieldMustBeString', '$.instruction.paymentInstrument.cardNumber']],
  },
  {
    name: 'expiry month 13',
    operation: 'sale',
    body: sale((b) => (instrument(b).cardExpiryDate.month = 13)),
    expected: [['dateHasInvalidFormat', '$.instruction.paymentInstrument.cardExpiryDate.month']],
  },
  {
    name: 'expiry month 0',
    operation: 'recurring',
    body: recurring((b) => (instrument(b).cardExpiryDate.month = 0)),
    expected: [['dateHasInvalidFormat', '$.instruction.paymentInstrument.cardExpiryDate.month']],
  },
  {
    name: 'expiry year of two digits',
    operation: 'sale',
    body: sale((b) => (instrument(b).cardExpiryDate.year = 35)),
    expected: [['dateHasInvalidFormat', '$.instruction.paymentInstrument.cardExpiryDate.year']],
  },
  {
    name: 'expiry date absent',
    operation: 'sale',
    body: sale((b) => delete instrument(b).cardExpiryDate),
    expected: [['fieldIsMissing', '$.instruction.paymentInstrument.cardExpiryDate']],
  },
  {
    name: 'token without href',
    operation: 'sale',
    body: sale((b) => (b.instruction.paymentInstrument = { type: 'card/token' })),
    expected: [['fieldIsMissing', '$.instruction.paymentInstrument.href']],
  },
  {
    name: 'token with an empty href',
    operation: 'sale',
    body: sale((b) => (b.instruction.paymentInstrument = { type: 'card/token', href: '' })),
    expected: [['fieldIsEmpty', '$.instruction.paymentInstrument.href']],
  },
  {
    name: 'instrument without type',
    operation: 'sale',
    body: sale((b) => delete instrument(b).type),
    expected: [['fieldIsMissing', '$.instruction.paymentInstrument.type']],
  },
  {
    name: 'instrument type a number',
    operation: 'sale',
    body: sale((b) => (instrument(b).type = 7)),
    expected: [['fieldMustBeString', '$.instruction.paymentInstrument.type']],
  },
  {
    name: 'instrument type empty',
    operation: 'sale',
    body: sale((b) => (instrument(b).type = '')),
    expected: [['fieldIsEmpty', '$.instruction.paymentInstrument.type']],
  },
  {
    name: 'instrument null',
    operation: 'sale',
    body: sale((b) => (b.instruction.paymentInstrument = null)),
    expected: [['fieldIsNull', '$.instruction.paymentInstrument']],
  },
  {
    name: 'instrument a string',
    operation: 'sale',
    body: sale((b) => (b.instruction.paymentInstrument = 'card')),
    expected: [['fieldMustBeObject', '$.instruction.paymentInstrument']],
  },
  {
    name: 'facilitator without its required fields',
    operation: 'sale',
    body: sale((b) => (b.merchant.paymentFacilitator = { isoId: 'i' })),
    expected: [
      ['fieldIsMissing', '$.merchant.paymentFacilitator.pfId'],
      ['fieldIsMissing', '$.merchant.paymentFacilitator.subMerchant'],
    ],
  },
  {
    name: 'scheme without reference',
    operation: 'sale',
    body: sale((b) => (b.instruction.scheme = {})),
    expected: [['fieldIsMissing', '$.instruction.scheme.reference']],
  },
  {
    name: 'a missing member beside an incomplete plain card: the card variant is reported under its parent',
    operation: 'sale',
    body: sale((b) => {
      delete b.instruction.value
      b.instruction.paymentInstrument = { type: 'card/plain', cardExpiryDate: { month: 1, year: 2030 } }
    }),
    expected: [
      ['fieldIsMissing', '$.instruction.value'],
      ['fieldIsMissing', '$.instruction.paymentInstrument.cardNumber'],
    ],
  },
  {
    name: 'optional string null',
    operation: 'sale',
    body: sale((b) => (b.instruction.narrative.line2 = null)),
    expected: [['fieldMustBeString', '$.instruction.narrative.line2']],
  },
  {
    name: 'several problems, each once',
    operation: 'sale',
    body: sale((b) => {
      b.transactionReference = ''
      delete b.merchant.entity
      b.instruction.value = { amount: 1.5, currency: 5 }
      instrument(b).cardExpiryDate = { month: 13, year: '2035' }
      b.channel = 'phone'
    }),
    expected: [
      ['fieldIsEmpty', '$.transactionReference'],
      ['fieldIsMissing', '$.merchant.entity'],
      ['dateHasInvalidFormat', '$.instruction.paymentInstrument.cardExpiryDate.month'],
      ['fieldMustBeInteger', '$.instruction.paymentInstrument.cardExpiryDate.year'],
      ['fieldMustBeInteger', '$.instruction.value.amount'],
      ['fieldMustBeString', '$.instruction.value.currency'],
      ['fieldHasInvalidValue', '$.channel'],
    ],
  },
]

/** Bodies at the edges of the rules that must pass (the facilitator one under a facilitator entity's policy). */
export const VALID_EDGE_CASES: { name: string; operation: Operation; body: unknown }[] = [
  { name: 'amount 0', operation: 'sale', body: sale((b) => (b.instruction.value.amount = 0)) },
  { name: 'amount 2147483647', operation: 'sale', body: sale((b) => (b.instruction.value.amount = 2147483647)) },
  {
    name: 'transactionReference of 64 characters',
    operation: 'sale',
    body: sale((b) => (b.transactionReference = 'r'.repeat(64))),
  },
  {
    name: 'every allowed transactionReference character',
    operation: 'recurring',
    body: recurring((b) => (b.transactionReference = 'Az09-_/!@#$%()*=.:;?[]{}~+')),
  },
  {
    name: 'a 19-digit card number',
    operation: 'sale',
    body: sale((b) => (instrument(b).cardNumber = '6000000000000000004')),
  },
  { name: 'a 12-digit card number', operation: 'sale', body: sale((b) => (instrument(b).cardNumber = '600000000007')) },
  {
    name: 'another instrument type, left to the policy',
    operation: 'sale',
    body: sale((b) => (b.instruction.paymentInstrument = { type: 'card/network-token', anything: 1 })),
  },
  {
    name: 'a token instrument',
    operation: 'sale',
    body: sale((b) => (b.instruction.paymentInstrument = { type: 'card/token', href: 'https://x/tokens/1' })),
  },
  {
    name: 'all sale-only fields on a sale',
    operation: 'sale',
    body: sale((b) => {
      b.channel = 'moto'
      b.customer = { riskProfile: 'r', authentication: [1, { x: null }] }
      b.instruction.scheme = { reference: 's' }
      b.instruction.intent = 'instalment'
    }),
  },
  {
    name: 'unknown fields',
    operation: 'recurring',
    body: recurring((b) => {
      b.extra = { deep: [1, 2] }
      b.instruction.value.exponent = 2
    }),
  },
  {
    name: 'a full facilitator',
    operation: 'sale',
    body: sale(
      (b) =>
        (b.merchant = {
          entity: 'facilitator',
          paymentFacilitator: {
            pfId: 'p',
            subMerchant: {
              city: 'c',
              name: 'n',
              postalCode: 'p',
              merchantId: 'm',
              countryCode: 'GB',
              street: 's',
              email: 'e',
            },
          },
        }),
    ),
  },
]
