import fastJson, { type ObjectSchema } from 'fast-json-stringify'
import { maskCardNumbers } from './card-mask.js'

/**
 * The one table of top-level error names. Status and message are the defaults;
 * `headerHasInvalidValue` is answered as 400, 406 or 415 depending on the header.
 * Names follow the payments v6 service's own error list; the gateway's own
 * (`accessDenied`, `methodIsNotAllowed`, `bodyIsTooLarge`, `requestIsMalformed`,
 * `headersAreTooLarge`, `requestTimedOut`, the two of retry protection,
 * `paymentIsInProgress` and `transactionReferenceIsAlreadyUsed`, and the names
 * a backend's own error answer is given, docs/backend-faults.md) are listed in
 * docs/checks.md.
 */
export const ERRORS = {
  accessDenied: {
    status: 401,
    message:
      'Authentication failed. Send valid BasicAuth credentials of a user allowed to act for this merchant entity.',
  },
  headerIsMissing: { status: 400, message: 'A mandatory header is missing. Add it and retry.' },
  headerHasInvalidValue: { status: 400, message: 'A header does not hold an expected value. Correct it and retry.' },
  methodIsNotAllowed: { status: 405, message: 'This resource only accepts POST.' },
  bodyIsTooLarge: { status: 413, message: 'The request body is larger than this service accepts.' },
  bodyIsEmpty: { status: 400, message: 'The request body is empty. Send the payment as a JSON object.' },
  bodyIsNotJson: { status: 400, message: 'The request body is not valid JSON in UTF-8.' },
  bodyDoesNotMatchSchema: {
    status: 400,
    message: 'The request body has field validation errors. Correct every field listed in validationErrors and retry.',
  },
  urlContainsInvalidValue: {
    status: 400,
    message: 'The URL holds invalid values. Correct the items listed in validationErrors.',
  },
  entityIsNotConfigured: { status: 400, message: 'The merchant entity is valid but not configured for use.' },
  paymentInstrumentIsNotSupported: {
    status: 400,
    message: 'The payment instrument type is not configured for this merchant entity.',
  },
  underlyingPaymentInstrumentHasExpired: {
    status: 400,
    message: 'The underlying payment instrument has expired and its details were not given in the request.',
  },
  currencyIsNotSupported: {
    status: 400,
    message: 'The currency is valid but not configured for this merchant entity.',
  },
  merchantIsNotConfigured: {
    status: 400,
    message: 'The merchant is not configured to use an attribute present in the request.',
  },
  paymentIsInProgress: {
    status: 409,
    message:
      'A payment with this transactionReference is still being processed. Retry after the time given in Retry-After.',
  },
  transactionReferenceIsAlreadyUsed: {
    status: 422,
    message:
      'This transactionReference was already used for a different payment. Send a new transactionReference for a new payment.',
  },
  requestIsMalformed: { status: 400, message: 'The HTTP request is malformed.' },
  headersAreTooLarge: { status: 431, message: 'The request headers are too large.' },
  requestTimedOut: { status: 408, message: 'The request was not received in time.' },
  requestIsInvalid: {
    status: 400,
    message: 'The payment service refused the request as invalid. Correct it and retry.',
  },
  resourceIsNotFound: { status: 404, message: 'The payment service did not find the resource asked for.' },
  requestIsInConflict: {
    status: 409,
    message: 'The request conflicts with the current state of the payment. Check its state before retrying.',
  },
  requestIsNotProcessable: { status: 422, message: 'The payment service could not process the request as sent.' },
  requestRateIsTooHigh: { status: 429, message: 'Too many requests. Retry after the time given in Retry-After.' },
  requestIsRefused: { status: 400, message: 'The payment service refused the request.' },
  internalErrorOccurred: { status: 500, message: 'An internal error occurred. Retry later.' },
  serviceUnavailable: { status: 503, message: 'The service is unavailable. Retry later.' },
} as const satisfies Record<string, { status: number; message: string }>

export type ErrorName = keyof typeof ERRORS

/** Field error names of the spec ("Field validation errors"), each with its default message. */
export const FIELD_ERRORS = {
  fieldIsMissing: 'A mandatory field is missing.',
  fieldMustBeString: 'The field must be a string.',
  fieldMustBeNumber: 'The field must be a number.',
  fieldMustBeInteger: 'The field must be an integer.',
  fieldMustBeBoolean: 'The field must be a boolean.',
  fieldMustBeObject: 'The field must be a JSON object.',
  fieldMustBeArray: 'The field must be an array.',
  fieldIsNull: 'A mandatory field must not be null.',
  fieldIsEmpty: 'The field must not be empty.',
  fieldHasInvalidValue: 'The value is not one of the expected values.',
  fieldIsNotAllowed: 'The field is not allowed here.',
  numberIsTooSmall: 'The number is below the minimum.',
  numberIsTooLarge: 'The number is above the maximum.',
  integerIsTooSmall: 'The integer is below the minimum.',
  integerIsTooLarge: 'The integer is above the maximum.',
  stringIsTooShort: 'The string is shorter than the minimum length.',
  stringIsTooLong: 'The string is longer than the maximum length.',
  stringFailedRegexCheck: 'The string does not have the required format.',
  panFailedLuhnCheck: 'The card number fails the Luhn check.',
  dateHasInvalidFormat: 'The date does not have the expected format.',
} as const satisfies Record<string, string>

export type FieldErrorName = keyof typeof FIELD_ERRORS

export interface FieldError {
  errorName: FieldErrorName
  message: string
  jsonPath: string
}

export interface ErrorBody {
  /** A name of the table, or one that a backend-errors rule defines (docs/backend-faults.md). */
  errorName: string
  message: string
  headerName?: string
  validationErrors?: FieldError[]
}

/** A refused request: what to answer. Checks return it; they never write to a response. */
export interface Rejection {
  readonly ok: false
  readonly status: number
  readonly body: ErrorBody
  /** Extra response headers, e.g. `WWW-Authenticate` or `Allow`. */
  readonly headers?: Readonly<Record<string, string>>
  /**
   * Close the connection after answering: the request's body was not read
   * (or not to its end), so the rest of it must not be read as the next
   * request on a keep-alive connection.
   */
  readonly close?: boolean
}

export interface RejectOptions {
  status?: number
  message?: string
  headerName?: string
  validationErrors?: FieldError[]
  headers?: Readonly<Record<string, string>>
  close?: boolean
}

export function isErrorName(name: string): name is ErrorName {
  return Object.hasOwn(ERRORS, name)
}

export function reject(errorName: ErrorName, options: RejectOptions = {}): Rejection {
  const entry = ERRORS[errorName]
  const body: ErrorBody = { errorName, message: options.message ?? entry.message }
  if (options.headerName !== undefined) body.headerName = options.headerName
  if (options.validationErrors !== undefined) body.validationErrors = maskedPaths(options.validationErrors)
  const { headers, close } = options
  return {
    ok: false,
    status: options.status ?? entry.status,
    body,
    ...(headers && { headers }),
    ...(close && { close }),
  }
}

/**
 * The items, each JSONPath masked whole: member names are the client's text, each masked as it is added
 * (schema/json-path.ts), but a card number split over several (`$.a.$41111111.$11111111`) is whole only in the
 * path (docs/checks.md, error body).
 */
function maskedPaths(items: FieldError[]): FieldError[] {
  for (const item of items)
    if (maskCardNumbers(item.jsonPath) !== item.jsonPath)
      return items.map((each) => ({ ...each, jsonPath: maskCardNumbers(each.jsonPath) }))
  return items
}

/** The one 500 refusal: every surface answers its own failure, and a backend's unknown outcome, with this value. */
export const INTERNAL_ERROR: Rejection = Object.freeze(reject('internalErrorOccurred'))

/** The one 503 refusal without a message of its own. */
export const SERVICE_UNAVAILABLE: Rejection = Object.freeze(reject('serviceUnavailable'))

/**
 * A refusal under a name a backend-errors rule defines: not in the table, so
 * it brings its own message (docs/backend-faults.md, rules).
 */
export function definedRejection(
  errorName: string,
  message: string,
  status: number,
  headers?: Readonly<Record<string, string>>,
): Rejection {
  return { ok: false, status, body: { errorName, message }, ...(headers && { headers }) }
}

/** The same refusal, answered with `Connection: close`. */
export function closing(rejection: Rejection): Rejection {
  return rejection.close === true ? rejection : { ...rejection, close: true }
}

export function fieldError(
  errorName: FieldErrorName,
  jsonPath: string,
  message: string = FIELD_ERRORS[errorName],
): FieldError {
  return { errorName, message, jsonPath }
}

/** One `bodyDoesNotMatchSchema` rejection from its items. */
export function schemaRejection(validationErrors: FieldError[]): Rejection {
  return reject('bodyDoesNotMatchSchema', { validationErrors })
}

/** JSON Schema of the error body: the serializer's input and the OpenAPI document's error schema. */
export const errorBodySchema: ObjectSchema = {
  type: 'object',
  properties: {
    errorName: { type: 'string' },
    message: { type: 'string' },
    headerName: { type: 'string' },
    validationErrors: {
      type: 'array',
      items: {
        type: 'object',
        properties: {
          errorName: { type: 'string' },
          message: { type: 'string' },
          jsonPath: { type: 'string' },
        },
        required: ['errorName', 'message', 'jsonPath'],
        additionalProperties: false,
      },
    },
  },
  required: ['errorName', 'message'],
  additionalProperties: false,
}

/**
 * The one serializer of error bodies, built once. It is fed only `ErrorBody`
 * objects that we build, so its schema is trusted (fast-json-stringify does not
 * validate its input).
 */
export const serializeError: (body: ErrorBody) => string = fastJson(errorBodySchema)

export const ERROR_CONTENT_TYPE = 'application/json'
