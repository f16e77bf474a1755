import { foldCase } from '../fold-case.js'
import { REQUEST_SCHEMAS } from './bodies.js'
import { OPERATIONS, type Operation } from './payment.js'
import { Kind, type TSchema } from './typebox.js'

/**
 * The members the schema names in one object of a request (docs/checks.md, one spelling of every
 * member): each as the schema spells it, with the table of the object it holds when that object
 * names members of its own (null otherwise), and the same names folded (foldCase, as paths fold). An
 * object the schema names no member of (`billingAddress`, `customer.authentication`) has no table:
 * what it holds is left alone.
 */
export interface Names {
  readonly members: ReadonlyMap<string, Names | null>
  readonly folded: ReadonlySet<string>
}

/** The table of an object schema, or of the variants of a union merged; null for any other schema. */
function namesOf(schema: TSchema): Names | null {
  if (schema[Kind] === 'Union') return (schema.anyOf as TSchema[]).map(namesOf).reduce(merge, null)
  if (schema[Kind] !== 'Object') return null
  const properties = Object.entries(schema.properties as Record<string, TSchema>)
  return tableOf(new Map(properties.map(([name, member]) => [name, namesOf(member)])))
}

function tableOf(members: Map<string, Names | null>): Names | null {
  return members.size === 0 ? null : { members, folded: new Set([...members.keys()].map(foldCase)) }
}

/** Two tables as one: the members of both, those named in both merged in turn. */
function merge(a: Names | null, b: Names | null): Names | null {
  if (a === null || b === null) return a ?? b
  const members = new Map(a.members)
  for (const [name, below] of b.members) members.set(name, merge(members.get(name) ?? null, below))
  return tableOf(members)
}

/** The table of each operation's request body, from its schema. */
export const REQUEST_NAMES: Readonly<Record<Operation, Names>> = Object.fromEntries(
  OPERATIONS.map((operation) => [operation, namesOf(REQUEST_SCHEMAS[operation]) as Names]),
) as Record<Operation, Names>
