import type { FieldError } from '../errors.js'
import { mapErrors, selectVariant, type DiscriminatedUnion, type LocatedError } from './error-map.js'
import { appendKey, escapePointerKey, pointerToJsonPath } from './json-path.js'
import {
  compiledCheck,
  Kind,
  Type,
  TypeCompiler,
  type TObject,
  type TSchema,
  type TypeCheck,
  type ValueError,
} from './typebox.js'

export interface CompiledSchema<T> {
  /** The hot path: the compiled check alone. */
  check(value: unknown): value is T
  /** Only after `check` failed: every problem, mapped to the spec's field errors. */
  errors(value: unknown): FieldError[]
}

/**
 * A node of the schema, compiled. TypeBox's own error walk is interpreted and
 * visits the whole document, several times the cost of this (`npm run bench` shows both), so
 * the errors are found the way a person would: the compiled check of each
 * node says where to look, the walk goes down only into nodes that fail, and
 * TypeBox's walk runs on the failing leaves alone. What it reports, and in
 * what order, is what TypeBox's walk of the whole document reports (the
 * tests compare both).
 */
interface Guide {
  readonly check: (value: unknown) => boolean
  /** TypeBox's walk of this node, paths relative to it. */
  readonly errors: (value: unknown) => Iterable<ValueError>
  /** A plain object: its own problems (missing, additional members) are those of a copy whose members accept anything. */
  readonly object?: { readonly check: (value: unknown) => boolean; readonly members: readonly Member[] }
  readonly union?: { readonly schema: DiscriminatedUnion; readonly variants: readonly Guide[] }
}

interface Member {
  readonly key: string
  readonly pointer: string
  /** The member's step in a JSONPath (`.key`, or `['odd key']`), written once here rather than for every error. */
  readonly step: string
  readonly required: boolean
  readonly guide: Guide
}

/** The guides of the nodes below a root, which depend on the node alone: compiled once however many callers compile their schema. */
const guides = new WeakMap<TSchema, Guide>()

/**
 * Compiles a schema once, at start-up. The check is compiled anew for each
 * caller, so that its inline caches learn that caller's documents only, and
 * the root of the error walk uses that same compiled function: compiling the
 * root a second time for the walk made the hot check several times slower in
 * the micro benchmark once odd documents had been checked.
 */
export function compileSchema<T>(schema: TSchema): CompiledSchema<T> {
  const compiled = TypeCompiler.Compile(schema)
  const root = guide(schema, compiled)
  return {
    check: root.check as (value: unknown) => value is T,
    errors(value) {
      const found: LocatedError[] = []
      walk(root, value, '', '$', found)
      return mapErrors(found, value)
    },
  }
}

function guideOf(schema: TSchema): Guide {
  let known = guides.get(schema)
  if (known === undefined) guides.set(schema, (known = guide(schema, TypeCompiler.Compile(schema))))
  return known
}

function guide(schema: TSchema, compiled: TypeCheck<TSchema>): Guide {
  const check = compiledCheck(compiled)
  if (schema[Kind] === 'Object') {
    const object = schema as TObject
    const keys = Object.keys(object.properties)
    const anything = Object.fromEntries(keys.map((key) => [key, Type.Unknown()]))
    const shallow = TypeCompiler.Compile({ ...object, properties: anything } as TSchema)
    const required = new Set(object.required ?? [])
    return {
      check,
      errors: (value) => shallow.Errors(value),
      object: {
        check: compiledCheck(shallow),
        members: keys.map((key) => ({
          key,
          pointer: `/${escapePointerKey(key)}`,
          step: appendKey('', key),
          required: required.has(key),
          guide: guideOf(object.properties[key] as TSchema),
        })),
      },
    }
  }
  const errors = (value: unknown) => compiled.Errors(value)
  const union = schema as DiscriminatedUnion
  if (schema[Kind] === 'Union' && union.discriminator !== undefined) {
    return { check, errors, union: { schema: union, variants: union.anyOf.map(guideOf) } }
  }
  return { check, errors }
}

/**
 * Adds the problems of `value` at `path` (its JSON Pointer) and `jsonPath` to
 * `found`, in the order TypeBox's own walk reports them.
 */
function walk(node: Guide, value: unknown, path: string, jsonPath: string, found: LocatedError[]): void {
  if (node.check(value)) return
  if (node.object !== undefined && isObject(value)) {
    if (!node.object.check(value)) addPrefixed(node.errors(value), value, path, jsonPath, found)
    for (const member of node.object.members) {
      // TypeBox visits a required member even when it is missing, an optional one only when it is there.
      const child = value[member.key]
      if (member.required || child !== undefined)
        walk(member.guide, child, path + member.pointer, jsonPath + member.step, found)
    }
    return
  }
  if (node.union !== undefined && isObject(value)) {
    const variant = selectVariant(node.union.schema, value)
    if (variant !== undefined) return walk(node.union.variants[variant] as Guide, value, path, jsonPath, found)
  }
  addPrefixed(node.errors(value), value, path, jsonPath, found)
}

/**
 * TypeBox's errors of a node (`value`), with the node's own paths put in front
 * of theirs: most are the node's own (path ''), the rest one member below it.
 * A union's variant errors (`error.errors`) keep their own paths: they are
 * read only for a discriminated union holding an object (error-map.ts), and
 * the walk never reports such a union whole, it walks into the variant.
 */
function addPrefixed(
  errors: Iterable<ValueError>,
  value: unknown,
  prefix: string,
  jsonPrefix: string,
  found: LocatedError[],
): void {
  for (const error of errors) {
    const jsonPath = error.path === '' ? jsonPrefix : jsonPrefix + pointerToJsonPath(error.path, value).slice(1)
    // Written out rather than spread: every problem gets the same shape, which V8 handles fastest.
    found.push({
      type: error.type,
      schema: error.schema,
      path: prefix + error.path,
      value: error.value,
      message: error.message,
      errors: error.errors,
      jsonPath,
    })
  }
}

function isObject(value: unknown): value is Record<string, unknown> {
  return typeof value === 'object' && value !== null && !Array.isArray(value)
}
