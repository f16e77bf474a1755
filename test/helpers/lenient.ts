/**
 * A model of lenient backends, for the property that the gate never lets one book what its checks did
 * not see (test/property/tenants.test.ts): a byte order mark and comments accepted, repeated keys kept
 * with the first or the last winning, and member names matched exactly, regardless of letter case, as
 * Go's encoding/json (`ſ` is `s`) and ASP.NET Core (`ı` is `I`) match them, or normalized and case
 * folded, as Python's `unicodedata.normalize('NFKC', name).casefold()` (`ﬆ` is `st`). Written apart
 * from lib/ so that it does not share the gate's mistakes.
 */

/** A document as such a backend reads it: an object's members in order, repeats kept; anything else its value. */
export type Lenient = { readonly members: readonly (readonly [string, Lenient])[] } | { readonly value: unknown }

/** How a backend compares member names. */
export type Folding = 'none' | 'case' | 'compatibility'

/** How one backend picks a member: by its name as `fold` compares it, and the first or the last of several. */
export interface Reading {
  readonly fold: Folding
  readonly wins: 'first' | 'last'
}

export const READINGS: readonly Reading[] = (['none', 'case', 'compatibility'] as const).flatMap((fold) =>
  (['first', 'last'] as const).map((wins) => ({ fold, wins })),
)

/** Letter case folded by upper- then lower-casing the whole name. */
const caseFolded = (name: string) => name.toUpperCase().toLowerCase()

/**
 * A name as each folding compares it. Python's casefold is full case folding, which JavaScript lacks:
 * it is modelled as lower, upper and lower case in turn (`ẞ`, `ß` and `ss` meet), between two NFKC
 * normalizations, as Unicode's NFKC_Casefold closes it.
 */
export const FOLDINGS: Readonly<Record<Folding, (name: string) => string>> = {
  none: (name) => name,
  case: caseFolded,
  compatibility: (name) => caseFolded(name.normalize('NFKC').toLowerCase()).normalize('NFKC'),
}

/**
 * Every character outside ASCII that a folding takes to ASCII letters, by those letters: `ſ` and the
 * full-width `ｓ` under `s`, `ﬆ` under `st`. Planes 0 and 1 hold every compatibility form of a letter.
 */
export const FOLDS_INTO: ReadonlyMap<string, readonly string[]> = (() => {
  const table = new Map<string, string[]>()
  for (let code = 0x80; code <= 0x1ffff; code++) {
    if (code >= 0xd800 && code <= 0xdfff) continue
    const character = String.fromCodePoint(code)
    const into = new Set([FOLDINGS.case(character), FOLDINGS.compatibility(character)])
    for (const letters of into) {
      if (/^[a-z]+$/.test(letters)) table.set(letters, [...(table.get(letters) ?? []), character])
    }
  }
  return table
})()

const toggled = (c: string) => (c === c.toLowerCase() ? c.toUpperCase() : c.toLowerCase())

/**
 * Another spelling of an ASCII name that some folding may take to it: position by position, with
 * `choices` in turn, the letter kept (0), in the other case (1), or one of the characters that fold
 * into the letters there, one or more (2 and up). Never the name itself.
 */
export function respell(name: string, choices: readonly number[]): string {
  let out = ''
  let turn = 0
  for (let at = 0; at < name.length;) {
    const choice = choices[turn++ % choices.length] as number
    const letter = name.charAt(at)
    const candidates = [1, 2, 3].flatMap((length) =>
      (FOLDS_INTO.get(name.slice(at, at + length).toLowerCase()) ?? []).map((character) => ({ character, length })),
    )
    const picked = choice < 2 || candidates.length === 0 ? undefined : candidates[(choice - 2) % candidates.length]
    out += picked?.character ?? (choice === 0 ? letter : toggled(letter))
    at += picked?.length ?? 1
  }
  return out === name ? toggled(name.charAt(0)) + name.slice(1) : out
}

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

/** The value at `path` as one backend reads it, an object's as a plain object; undefined when absent. */
export function readAt(tree: Lenient, path: readonly string[], reading: Reading): unknown {
  let node: Lenient | undefined = tree
  for (const name of path) {
    if (node === undefined || !('members' in node)) return undefined
    const fold = FOLDINGS[reading.fold]
    const matches: (readonly [string, Lenient])[] = node.members.filter(([key]) => fold(key) === fold(name))
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
