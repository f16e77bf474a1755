import type { FieldError } from '../errors.js'
import { mapErrors } from './error-map.js'
import { TypeCompiler, type TSchema } from './typebox.js'

export interface CompiledSchema<T> {
  /** The hot path: the compiled check alone. */
  check(value: unknown): value is T
  /** Only after `check` failed: every problem, mapped to the spec's field errors. */
  errors(value: unknown): FieldError[]
}

/** Compiles a schema once, at start-up. */
export function compileSchema<T>(schema: TSchema): CompiledSchema<T> {
  const compiled = TypeCompiler.Compile(schema)
  return {
    check: (value: unknown): value is T => compiled.Check(value),
    errors: (value: unknown) => mapErrors(compiled.Errors(value), value),
  }
}
