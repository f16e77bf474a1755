import { FIELD_ERRORS, type FieldError, type FieldErrorName } from '../errors.js'
import { LUHN_FORMAT } from './bodies.js'
import { pointerToJsonPath } from './json-path.js'
import { OptionalKind, ValueErrorType, type TObject, type TSchema, type ValueError } from './typebox.js'

/**
 * Turns TypeBox's errors into the spec's field errors, one per problem:
 * TypeBox reports a missing property and then the same property's type
 * error, and a string's length and pattern failures side by side, so only the
 * first error at a path is kept, and nothing below a path already reported
 * (a missing object reports the object, not each of its children).
 */
export function mapErrors(errors: Iterable<ValueError | LocatedError>, document: unknown): FieldError[] {
  const items: FieldError[] = []
  const reported: string[] = []
  collect(errors, document, items, reported)
  return items
}

function collect(
  errors: Iterable<ValueError | LocatedError>,
  document: unknown,
  items: FieldError[],
  reported: string[],
): void {
  for (const error of errors) {
    if (isCovered(error.path, reported)) continue
    if (error.type === ValueErrorType.Union) {
      const variant = discriminatedVariant(error)
      if (variant !== undefined) {
        collect(variant, document, items, reported)
        continue
      }
    }
    reported.push(error.path)
    const [errorName, message] = describe(error)
    items.push({
      errorName,
      message,
      jsonPath: 'jsonPath' in error ? error.jsonPath : pointerToJsonPath(error.path, document),
    })
  }
}

/** A problem whose JSONPath the walk that found it already knows (schema/compile.ts). */
export interface LocatedError extends ValueError {
  readonly jsonPath: string
}

const SLASH = 0x2f

function isCovered(path: string, reported: readonly string[]): boolean {
  for (const done of reported) {
    if (path === done || (path.startsWith(done) && path.charCodeAt(done.length) === SLASH)) return true
  }
  return false
}

/**
 * For a union with an OpenAPI `discriminator` and an object value, the errors
 * of the one variant that the discriminator selects. A client that sent
 * `type: "card/plain"` wants to hear what its plain card lacks, not why it is
 * not a token.
 */
function discriminatedVariant(error: ValueError): Iterable<ValueError> | undefined {
  const union = error.schema as DiscriminatedUnion
  if (union.discriminator === undefined || !isObject(error.value)) return undefined
  const variant = selectVariant(union, error.value)
  return variant === undefined ? undefined : error.errors[variant]
}

/**
 * Which variant of a discriminated union an object means: the one whose
 * discriminator is the matching literal, else the one that takes any other
 * value, else none.
 */
export function selectVariant(union: DiscriminatedUnion, value: Record<string, unknown>): number | undefined {
  const property = (union.discriminator as { propertyName: string }).propertyName
  const tag = value[property]
  const variants = union.anyOf
  let fallback: number | undefined
  for (let i = 0; i < variants.length; i++) {
    const tagSchema = (variants[i] as TObject).properties[property]
    if (tagSchema === undefined || !('const' in tagSchema)) fallback = i
    else if (tagSchema.const === tag) return i
  }
  return fallback
}

export interface DiscriminatedUnion extends TSchema {
  anyOf: TSchema[]
  discriminator?: { propertyName: string }
}

function isObject(value: unknown): value is Record<string, unknown> {
  return typeof value === 'object' && value !== null && !Array.isArray(value)
}

const TYPE_ERRORS: ReadonlyMap<ValueErrorType, FieldErrorName> = new Map([
  [ValueErrorType.String, 'fieldMustBeString'],
  [ValueErrorType.Integer, 'fieldMustBeInteger'],
  [ValueErrorType.Number, 'fieldMustBeNumber'],
  [ValueErrorType.Boolean, 'fieldMustBeBoolean'],
  [ValueErrorType.Object, 'fieldMustBeObject'],
  [ValueErrorType.Array, 'fieldMustBeArray'],
])

type Described = readonly [FieldErrorName, string]

function named(errorName: FieldErrorName): Described {
  return [errorName, FIELD_ERRORS[errorName]]
}

interface Annotated {
  'x-error'?: FieldErrorName
  'x-format'?: string
  minLength?: number
  maxLength?: number
  minimum?: number
  maximum?: number
  format?: string
  const?: unknown
  anyOf?: { const?: unknown }[]
  [OptionalKind]?: string
}

function describe(error: ValueError): Described {
  const schema = error.schema as Annotated
  const override = schema['x-error']
  switch (error.type) {
    case ValueErrorType.ObjectRequiredProperty:
      return named('fieldIsMissing')
    case ValueErrorType.Never:
    case ValueErrorType.ObjectAdditionalProperties:
      return named('fieldIsNotAllowed')
    case ValueErrorType.StringMinLength:
      return schema.minLength === 1
        ? named('fieldIsEmpty')
        : ['stringIsTooShort', `The string must be at least ${schema.minLength} characters long.`]
    case ValueErrorType.StringMaxLength:
      // TypeBox counts UTF-16 units, the contract characters: within the limit in characters, the string holds one
      // beyond the BMP, which the ASCII pattern that goes with each maxLength of ours (payment.ts) refuses.
      if (!longerThan(error.value as string, schema.maxLength as number))
        return formatted(override ?? 'stringFailedRegexCheck', schema)
      return ['stringIsTooLong', `The string must be at most ${schema.maxLength} characters long.`]
    case ValueErrorType.StringPattern:
      return formatted(override ?? 'stringFailedRegexCheck', schema)
    case ValueErrorType.StringFormat:
      return schema.format === LUHN_FORMAT ? named('panFailedLuhnCheck') : formatted('stringFailedRegexCheck', schema)
    case ValueErrorType.Integer:
      // JSON.parse reads a whole number beyond a double's range (`1e400`) as Infinity: it is out of bounds, not fractional.
      if (error.value === Infinity && schema.maximum !== undefined)
        return bound(override ?? 'integerIsTooLarge', 'at most', schema.maximum, schema)
      if (error.value === -Infinity && schema.minimum !== undefined)
        return bound(override ?? 'integerIsTooSmall', 'at least', schema.minimum, schema)
      break
    case ValueErrorType.IntegerMinimum:
      return bound(override ?? 'integerIsTooSmall', 'at least', schema.minimum, schema)
    case ValueErrorType.IntegerMaximum:
      return bound(override ?? 'integerIsTooLarge', 'at most', schema.maximum, schema)
    case ValueErrorType.NumberMinimum:
      return bound(override ?? 'numberIsTooSmall', 'at least', schema.minimum, schema)
    case ValueErrorType.NumberMaximum:
      return bound(override ?? 'numberIsTooLarge', 'at most', schema.maximum, schema)
    case ValueErrorType.Literal:
      return choice([schema.const], error)
    case ValueErrorType.Union:
      // A discriminated union is a union of objects: reaching here, the value is not one.
      return (error.schema as DiscriminatedUnion).discriminator === undefined
        ? choice(
            (schema.anyOf as { const?: unknown }[]).map((variant) => variant.const),
            error,
          )
        : wrongType('fieldMustBeObject', error)
  }
  const typeError = TYPE_ERRORS.get(error.type)
  return typeError === undefined ? named('fieldHasInvalidValue') : wrongType(typeError, error)
}

/** Whether `text` has more than `most` characters (code points). */
function longerThan(text: string, most: number): boolean {
  let count = 0
  for (let i = 0; i < text.length; i += (text.codePointAt(i) as number) > 0xffff ? 2 : 1)
    if (++count > most) return true
  return false
}

/** A value of the wrong JSON type; null in a mandatory field is `fieldIsNull`, except for the document itself. */
function wrongType(errorName: FieldErrorName, error: ValueError): Described {
  const optional = (error.schema as Annotated)[OptionalKind] !== undefined
  return error.value === null && error.path !== '' && !optional ? named('fieldIsNull') : named(errorName)
}

function formatted(errorName: FieldErrorName, schema: Annotated): Described {
  const shape = schema['x-format']
  return shape === undefined ? named(errorName) : [errorName, `The value must be ${shape}.`]
}

function bound(errorName: FieldErrorName, relation: string, limit: number | undefined, schema: Annotated): Described {
  return schema['x-format'] === undefined
    ? [errorName, `The value must be ${relation} ${limit}.`]
    : formatted(errorName, schema)
}

/**
 * A field limited to a set of constants (a literal, or a union of literals):
 * a value of another JSON type is a type error, a value of the right type is
 * `fieldHasInvalidValue`, and a required one that is null is `fieldIsNull`.
 */
function choice(allowed: readonly unknown[], error: ValueError): Described {
  if (allowed.every((value) => typeof value === 'string') && typeof error.value !== 'string') {
    return wrongType('fieldMustBeString', error)
  }
  return ['fieldHasInvalidValue', `The value must be one of: ${allowed.map(String).join(', ')}.`]
}
