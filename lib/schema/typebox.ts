/**
 * The one module that imports TypeBox, so that moving from `@sinclair/typebox`
 * 0.34 to `typebox` 1.x touches this file only.
 */
export { Type, FormatRegistry, OptionalKind, Kind } from '@sinclair/typebox'
export type { Static, TSchema, TObject, TProperties } from '@sinclair/typebox'
import { TypeCompiler, type TypeCheck } from '@sinclair/typebox/compiler'
import type { TSchema } from '@sinclair/typebox'
export { TypeCompiler }
export type { TypeCheck }
export { ValueErrorType } from '@sinclair/typebox/errors'
export type { ValueError } from '@sinclair/typebox/errors'

/**
 * The function TypeBox compiled for a schema. `TypeCheck.Check` is one method
 * shared by every compiled schema, and the error walk calls the compiled
 * functions of many nodes through it: its call would turn megamorphic for the
 * hot path too. The compiled function is taken from the TypeCheck instead.
 */
export function compiledCheck(check: TypeCheck<TSchema>): (value: unknown) => boolean {
  return check['checkFunc']
}
