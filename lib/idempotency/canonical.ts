import type { TSchema } from '@sinclair/typebox'
import { REQUEST_SCHEMAS } from '../schema/bodies.js'

/**
 * A character JSON.stringify escapes in a string: a quote, a backslash, a control character, or a
 * surrogate (ECMA-262 QuoteJSONString escapes the lone ones; a pair is left to JSON.stringify too).
 */
const ESCAPED = /["\\\u0000-\u001f\ud800-\udfff]/

/** Below this many members, an insertion sort orders the names; Array.prototype.sort past it (a body may hold thousands). */
const FEW_MEMBERS = 16

/** `"name":` for each member name the payment schemas hold, written once: nearly every member a payment has. */
const WRITTEN_NAMES = new Map<string, string>()
function collectNames(schema: TSchema): void {
  for (const [name, member] of Object.entries((schema.properties ?? {}) as Record<string, TSchema>)) {
    WRITTEN_NAMES.set(name, JSON.stringify(name) + ':')
    collectNames(member)
  }
  for (const variant of (schema.anyOf ?? []) as TSchema[]) collectNames(variant)
}
for (const schema of Object.values(REQUEST_SCHEMAS)) collectNames(schema)

/** A string as JSON.stringify writes it. */
function quoted(text: string): string {
  return ESCAPED.test(text) ? JSON.stringify(text) : '"' + text + '"'
}

/** The names in UTF-16 code unit order, as the default sort compares strings. */
function sortedNames(members: object): string[] {
  const names = Object.keys(members)
  if (names.length > FEW_MEMBERS) return names.sort()
  for (let i = 1; i < names.length; i++) {
    const name = names[i] as string
    let j = i - 1
    for (; j >= 0 && (names[j] as string) > name; j--) names[j + 1] = names[j] as string
    names[j + 1] = name
  }
  return names
}

/**
 * A JSON document written one way whatever the order its members came in:
 * members sorted by name at every level (by UTF-16 code units, as RFC 8785
 * sorts them), no white space, numbers and strings as `JSON.stringify`
 * writes the parsed values (RFC 8785 writes numbers that way too). Two
 * documents that differ only in member order or spacing have one canonical
 * form, so a retry whose client serialized it anew is still the same payment
 * (docs/idempotency.md, the key and the fingerprint).
 */
export function canonicalJson(value: unknown): string {
  if (typeof value === 'string') return quoted(value)
  if (value === null || typeof value !== 'object') return JSON.stringify(value)
  // One string grown in place: a payment is fingerprinted on every request (docs/performance-history.md).
  if (Array.isArray(value)) {
    let text = '['
    for (let i = 0; i < value.length; i++) text += (i === 0 ? '' : ',') + canonicalJson(value[i])
    return text + ']'
  }
  const members = value as Record<string, unknown>
  const names = sortedNames(members)
  let text = '{'
  for (let i = 0; i < names.length; i++) {
    const name = names[i] as string
    text += (i === 0 ? '' : ',') + (WRITTEN_NAMES.get(name) ?? quoted(name) + ':') + canonicalJson(members[name])
  }
  return text + '}'
}
