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

/**
 * A name JSON.stringify would not write where a copy set it: an array index, which every object lists
 * first in numeric order (ECMA-262 OrdinaryOwnPropertyKeys), or `__proto__`, which a copy would take
 * for its prototype. Every array index starts with a digit.
 */
function misplaced(name: string): boolean {
  const first = name.charCodeAt(0)
  return (first >= 0x30 && first <= 0x39) || name === '__proto__'
}

/**
 * `value` with the members of every object in sorted order, which JSON.stringify then writes in that
 * order (it lists the names an object holds in the order they were set): the value itself where it
 * already is, copies only of the objects and arrays that are not. UNWRITABLE where an object holds a
 * `misplaced` name.
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
  const moved = sortNames(names)
  let copy: Record<string, unknown> | undefined
  for (let i = 0; i < names.length; i++) {
    const name = names[i] as string
    if (misplaced(name)) return UNWRITABLE
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

/** The canonical form written member by member, for a document `inOrder` cannot give JSON.stringify. */
function written(value: unknown): string {
  if (value === null || typeof value !== 'object') return JSON.stringify(value)
  if (Array.isArray(value)) return `[${value.map(written).join(',')}]`
  const members = value as Record<string, unknown>
  const names = Object.keys(members)
  sortNames(names)
  return `{${names.map((name) => `${JSON.stringify(name)}:${written(members[name])}`).join(',')}}`
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
