/** Below this many members, an insertion sort orders the names; Array.prototype.sort past it (a body may hold thousands). */
const FEW_MEMBERS = 16

/** What `inOrder` gives for a value whose sorted copy JSON.stringify would not write in that order. */
export const UNWRITABLE = Symbol('unwritable')

/** Sorts `names` in place in UTF-16 code unit order, as the default sort compares strings; whether any moved. */
function sortNames(names: string[]): boolean {
  if (names.length > FEW_MEMBERS) {
    for (let i = 1; i < names.length; i++)
      if ((names[i - 1] as string) > (names[i] as string)) {
        names.sort()
        return true
      }
    return false
  }
  let moved = false
  for (let i = 1; i < names.length; i++) {
    const name = names[i] as string
    let j = i - 1
    for (; j >= 0 && (names[j] as string) > name; j--) names[j + 1] = names[j] as string
    if (j !== i - 1) moved = true
    names[j + 1] = name
  }
  return moved
}

/** The most an array index may be (ECMA-262 6.1.7: an integer index below 2^32 - 1). */
const MOST_INDEX = 2 ** 32 - 2

/** Whether a name is an array index: the canonical decimal form of an integer up to MOST_INDEX. */
function isArrayIndex(name: string): boolean {
  const first = name.charCodeAt(0)
  if (!(first >= 0x31 && first <= 0x39)) return name === '0'
  for (let i = 1; i < name.length; i++) {
    const c = name.charCodeAt(i)
    if (!(c >= 0x30 && c <= 0x39)) return false
  }
  return Number(name) <= MOST_INDEX
}

/**
 * `value` with the members of every object in sorted order, which JSON.stringify then writes in that
 * order (it lists the names an object holds in the order they were set): the value itself where it
 * already is, copies only of the objects and arrays that are not. UNWRITABLE where an object holds an
 * array index or `__proto__`, which JSON.stringify would not write where a copy set them.
 */
export function inOrder(value: unknown): unknown {
  if (value === null || typeof value !== 'object') return value
  if (Array.isArray(value)) {
    let copy: unknown[] | undefined
    for (let i = 0; i < value.length; i++) {
      const item: unknown = value[i]
      const ordered = inOrder(item)
      if (ordered === UNWRITABLE) return UNWRITABLE
      if (copy === undefined && ordered !== item) copy = value.slice(0, i)
      if (copy !== undefined) copy.push(ordered)
    }
    return copy ?? value
  }
  const members = value as Record<string, unknown>
  const names = Object.keys(members)
  // An object lists its array indices before its other names, whatever the order they were set in
  // (ECMA-262 OrdinaryOwnPropertyKeys), so a copy could not put them in sorted order; the first name tells.
  if (names.length > 0 && isArrayIndex(names[0] as string)) return UNWRITABLE
  const moved = sortNames(names)
  let copy: Record<string, unknown> | undefined
  for (let i = 0; i < names.length; i++) {
    const name = names[i] as string
    // A copy would take it for its prototype.
    if (name === '__proto__') return UNWRITABLE
    const member = members[name]
    const ordered = inOrder(member)
    if (ordered === UNWRITABLE) return UNWRITABLE
    if (copy === undefined && (moved || ordered !== member)) {
      copy = {}
      for (let j = 0; j < i; j++) copy[names[j] as string] = members[names[j] as string]
    }
    if (copy !== undefined) copy[name] = ordered
  }
  return copy ?? value
}

/**
 * The canonical form written member by member, for a document `inOrder` cannot give JSON.stringify:
 * one string grown in place, which costs less than joining the pieces (docs/performance-history.md).
 */
function written(value: unknown): string {
  if (value === null || typeof value !== 'object') return JSON.stringify(value)
  if (Array.isArray(value)) {
    let text = '['
    for (let i = 0; i < value.length; i++) text += (i === 0 ? '' : ',') + written(value[i])
    return text + ']'
  }
  const members = value as Record<string, unknown>
  const names = Object.keys(members)
  sortNames(names)
  let text = '{'
  for (let i = 0; i < names.length; i++) {
    const name = names[i] as string
    text += (i === 0 ? '' : ',') + JSON.stringify(name) + ':' + written(members[name])
  }
  return text + '}'
}

/**
 * A JSON document written one way whatever the order its members came in:
 * members sorted by name at every level (by UTF-16 code units, as RFC 8785
 * sorts them), no white space, numbers and strings as `JSON.stringify`
 * writes the parsed values (RFC 8785 writes numbers that way too). Two
 * documents that differ only in member order or spacing have one canonical
 * form, so a retry whose client serialized it anew is still the same payment
 * (docs/idempotency.md, the key and the fingerprint). Written by V8's own
 * serializer from a sorted copy, so the HMAC reads one flat string
 * (docs/performance-history.md).
 */
export function canonicalJson(value: unknown): string {
  const ordered = inOrder(value)
  return ordered === UNWRITABLE ? written(value) : JSON.stringify(ordered)
}
