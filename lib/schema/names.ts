import { OPERATIONS, REQUEST_SCHEMAS, type Operation } from './payment.js'
import { Kind, type TSchema } from './typebox.js'

/**
 * The members the schema names in one object of a request (docs/checks.md, one spelling of every
 * member): each as the schema spells it, with the table of the object it holds when that object
 * names members of its own (null otherwise), and the same names folded. An object the schema names
 * no member of (`billingAddress`, `customer.authentication`) has no table: what it holds is left alone.
 */
export interface Names {
  readonly members: ReadonlyMap<string, Names | null>
  readonly folded: ReadonlySet<string>
}

/** Characters outside ASCII whose upper- or lower-case form is an ASCII letter: İ, ı, ſ and the Kelvin sign K. */
const INTO_ASCII: ReadonlyMap<number, string> = new Map([
  [0x130, 'i'],
  [0x131, 'i'],
  [0x17f, 's'],
  [0x212a, 'k'],
])

/**
 * A member's name with letter case folded as a lenient backend matches names: Unicode simple case
 * folding (Go's encoding/json: `ſ` is `s`, the Kelvin sign is `k`), with the Turkic dotted and
 * dotless i taken as `i` too (ASP.NET Core's upper-casing makes `ı` an `I`). Every name the schema
 * names is ASCII, so only the four characters that fold into ASCII need mapping.
 */
export function fold(name: string): string {
  let mapped = name
  for (let i = 0; i < name.length; i++) {
    if (name.charCodeAt(i) > 0x7f) {
      mapped = ''
      for (const character of name) mapped += INTO_ASCII.get(character.codePointAt(0) as number) ?? character
      break
    }
  }
  return mapped.toLowerCase()
}

/** The table of an object schema, or of the variants of a union merged; null for any other schema. */
function namesOf(schema: TSchema): Names | null {
  if (schema[Kind] === 'Union') return (schema.anyOf as TSchema[]).map(namesOf).reduce(merge, null)
  if (schema[Kind] !== 'Object') return null
  const properties = Object.entries(schema.properties as Record<string, TSchema>)
  return tableOf(new Map(properties.map(([name, member]) => [name, namesOf(member)])))
}

function tableOf(members: Map<string, Names | null>): Names | null {
  return members.size === 0 ? null : { members, folded: new Set([...members.keys()].map(fold)) }
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
