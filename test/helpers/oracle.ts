import Ajv from 'ajv'
import { errorBodySchema } from '../../lib/errors.js'
import { luhnValid } from '../../lib/luhn.js'
import { LUHN_FORMAT, REQUEST_SCHEMAS } from '../../lib/schema/bodies.js'

/**
 * Ajv, an independent validator, compiled from the same JSON Schemas: the
 * oracle for the TypeBox checks and for the shape of every error body.
 * Non-strict, because the schemas carry OpenAPI annotations (`discriminator`,
 * `x-format`) that are not validation keywords.
 */
export const ajv = new Ajv.default({ strict: false, allErrors: false })
ajv.addFormat(LUHN_FORMAT, luhnValid)

export const ajvSale = ajv.compile(REQUEST_SCHEMAS.sale)
export const ajvRecurring = ajv.compile(REQUEST_SCHEMAS.recurring)
export const isErrorBody = ajv.compile(errorBodySchema)
