/**
 * The one module that imports TypeBox, so that moving from `@sinclair/typebox`
 * 0.34 to `typebox` 1.x touches this file only.
 */
export { Type, FormatRegistry, OptionalKind, Kind } from '@sinclair/typebox'
export type { Static, TSchema, TObject, TProperties } from '@sinclair/typebox'
export { TypeCompiler } from '@sinclair/typebox/compiler'
export type { TypeCheck } from '@sinclair/typebox/compiler'
export { ValueErrorType } from '@sinclair/typebox/errors'
export type { ValueError } from '@sinclair/typebox/errors'
