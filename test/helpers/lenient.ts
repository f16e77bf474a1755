/**
 * A model of lenient backends, for the property that the gate never lets one book what its checks did
 * not see (test/property/tenants.test.ts): a byte order mark and comments accepted, repeated keys kept
 * with the first or the last winning, and member names matched exactly or regardless of letter case,
 * as Go's encoding/json (`ſ` is `s`) and ASP.NET Core (`ı` is `I`) match them. Written apart from
 * lib/ so that it does not share the gate's mistakes: case is folded by upper- then lower-casing.
 */

/** A document as such a backend reads it: an object's members in order, repeats kept; anything else its value. */
export type Lenient = { readonly members: readonly (readonly [string, Lenient])[] } | { readonly value: unknown }

/** How one backend picks a member: by exact name or with case folded, and the first or the last of several. */
export interface Reading {
  readonly fold: boolean
  readonly wins: 'first' | 'last'
}

export const READINGS: readonly Reading[] = [
  { fold: false, wins: 'first' },
  { fold: false, wins: 'last' },
  { fold: true, wins: 'first' },
  { fold: true, wins: 'last' },
]

/** The text without a leading byte order mark and without comments (outside strings). */
function withoutComments(text: string): string {
  let out = ''
  let i = text.charCodeAt(0) === 0xfeff ? 1 : 0
  while (i < text.length) {
    const c = text[i] as string
    if (c === '"') {
      let end = i + 1
      while (text[end] !== '"') end += text[end] === '\\' ? 2 : 1
      out += text.slice(i, end + 1)
      i = end + 1
    } else if (text.startsWith('/*', i)) {
      const end = text.indexOf('*/', i + 2)
      i = end === -1 ? text.length : end + 2
    } else if (text.startsWith('//', i)) {
      const end = text.indexOf('\n', i)
      i = end === -1 ? text.length : end
    } else {
      out += c
      i++
    }
  }
  return out
}

/** Reads bytes as a lenient backend does; undefined when even it cannot. */
export function readLeniently(bytes: Uint8Array): Lenient | undefined {
  const text = withoutComments(Buffer.from(bytes).toString('utf8'))
  const at = { i: 0 }
  try {
    const tree = value(text, at)
    return text.slice(at.i).trim() === '' ? tree : undefined
  } catch {
    return undefined
  }
}

function skip(text: string, at: { i: number }): void {
  while (/\s/.test(text[at.i] ?? '')) at.i++
}

function value(text: string, at: { i: number }): Lenient {
  skip(text, at)
  if (text[at.i] === '{') {
    at.i++
    const members: [string, Lenient][] = []
    skip(text, at)
    while (text[at.i] !== '}') {
      const key = string(text, at)
      skip(text, at)
      if (text[at.i++] !== ':') throw new Error('colon')
      members.push([key, value(text, at)])
      skip(text, at)
      if (text[at.i] === ',') at.i++
      skip(text, at)
    }
    at.i++
    return { members }
  }
  skip(text, at)
  const start = at.i
  if (text[at.i] === '"') {
    string(text, at)
  } else if (text[at.i] === '[') {
    // An array's items are read whole: no named member of the payments holds one.
    let depth = 0
    do {
      const c = text[at.i]
      if (c === '"') {
        string(text, at)
        continue
      }
      if (c === '[') depth++
      else if (c === ']') depth--
      at.i++
    } while (depth > 0 && at.i < text.length)
  } else {
    while (at.i < text.length && !/[\s,}\]]/.test(text[at.i] as string)) at.i++
  }
  return { value: JSON.parse(text.slice(start, at.i)) }
}

function string(text: string, at: { i: number }): string {
  const start = at.i
  let end = start + 1
  while (text[end] !== '"') end += text[end] === '\\' ? 2 : 1
  at.i = end + 1
  return JSON.parse(text.slice(start, at.i)) as string
}

/** A document the application was handed, as the same model: its members in their order. */
export function asLenient(document: unknown): Lenient {
  return document !== null && typeof document === 'object' && !Array.isArray(document)
    ? { members: Object.entries(document).map(([key, member]) => [key, asLenient(member)] as const) }
    : { value: document }
}

const folded = (name: string) => name.toUpperCase().toLowerCase()

/** The value at `path` as one backend reads it, an object's as a plain object; undefined when absent. */
export function readAt(tree: Lenient, path: readonly string[], reading: Reading): unknown {
  let node: Lenient | undefined = tree
  for (const name of path) {
    if (node === undefined || !('members' in node)) return undefined
    const matches: (readonly [string, Lenient])[] = node.members.filter(([key]) =>
      reading.fold ? folded(key) === folded(name) : key === name,
    )
    node = (reading.wins === 'first' ? matches[0] : matches.at(-1))?.[1]
  }
  return node === undefined ? undefined : plain(node, reading)
}

function plain(node: Lenient, reading: Reading): unknown {
  if (!('members' in node)) return node.value
  const out: Record<string, unknown> = {}
  for (const [key, member] of reading.wins === 'first' ? [...node.members].reverse() : node.members)
    out[key] = plain(member, reading)
  return out
}
