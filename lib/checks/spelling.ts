import { fieldError, schemaRejection, type FieldError, type Rejection } from '../errors.js'
import { foldCase } from '../fold-case.js'
import { appendKey } from '../schema/json-path.js'
import type { Names } from '../schema/names.js'
import {
  BACKSLASH,
  CLOSE_BRACE,
  CLOSE_BRACKET,
  COLON,
  COMMA,
  OPEN_BRACE,
  OPEN_BRACKET,
  QUOTE,
  endOfString,
  isJsonWhite,
  skipWhite,
} from '../json-text.js'

/**
 * One spelling of every member the schema names (docs/checks.md, choices): in an object whose
 * members the schema names, a sibling whose name is a named member's once folded as paths are
 * (foldCase: letter case, and compatibility forms such as `ﬆ` for `st`), or a named member
 * repeated, is refused as `fieldIsNotAllowed` at its path. The checks read one spelling; a backend
 * that matches names regardless of case (Go's encoding/json, ASP.NET Core), normalizes them (Python's
 * NFKC and casefold) or keeps the first of two repeated keys would read the other, which no check saw.
 *
 * A clean body costs one walk of the parsed document without allocation, and a count of the colons in
 * its text: JSON.parse keeps the last of repeated keys silently, so a text holding more keys than
 * the document has members repeats one. Only then, or when the walk meets a folded sibling, is the
 * text read again, keys and all, to say where. `text` is `bytes` decoded; `members` is what membersIn
 * gave for its document (body.ts, whose walk also bounds the depth).
 */
export function checkSpelling(text: string, bytes: Uint8Array, names: Names, members: number): Rejection | undefined {
  if (spelledOnce(text, bytes, members)) return undefined
  const items: FieldError[] = []
  const cursor = { text, at: 0 }
  findMisspelt(readTree(cursor), names, '$', items)
  return items.length === 0 ? undefined : schemaRejection(items)
}

/**
 * The screen of a clean body: true when its text holds no more keys than its document has members (no
 * repeat) and no object along the named paths holds a folded sibling. False, and checkSpelling reads
 * the text again to say where, if anywhere: a repeat of a member the schema does not name is let be.
 * Outside strings a colon follows each key and nothing else, so a text has at least as many colons
 * as keys, and at least as many keys as its document has members: as many colons as members is a
 * text without a repeat, the colons counted natively by V8. Only a text with a colon inside a string
 * has its keys counted one by one (docs/performance-history.md).
 */
export function spelledOnce(text: string, bytes: Uint8Array, members: number): boolean {
  // A walk that stopped (FOLDED_SIBLING) equals neither count.
  return colonsIn(text) === members || keysIn(bytes) === members
}

/** A colon, anywhere: a pattern of one character, which V8 finds at every place in one native search. */
const COLONS = /:/g

/**
 * The colons in a text, inside strings or not, found by one `match` where `indexOf` took a call for
 * each (docs/performance-history.md).
 */
function colonsIn(text: string): number {
  return text.match(COLONS)?.length ?? 0
}

const FOLDED = 'Only the spelling the schema gives this member is allowed, not another letter case of it.'
const REPEATED = 'A member the schema names must appear once.'

/** What membersIn gives for a document with a folded sibling: never a count of keys. */
export const FOLDED_SIBLING = -1
/** What membersIn gives, asked to stop there, for a document with a member named `__proto__` or `constructor`. */
export const PROTOTYPE_NAMED = -2

/** What membersIn gives at the first object or array nested deeper than the levels it was given. */
export const TOO_DEEP = -3

/**
 * The members of every object in a parsed document, or FOLDED_SIBLING when an object along the named
 * paths holds a member that is a named member's name folded but not that name; with `prototypeNames`,
 * PROTOTYPE_NAMED at the first member named `__proto__` or `constructor`, for the body's check of
 * prototype keys (body.ts), which then needs no search of the text; TOO_DEEP at the first object or
 * array below `levels` levels (the document itself the first), for the body's check of depth, which
 * then needs no count of brackets in the text: one walk for all four, its recursion bounded by `levels`.
 */
export function membersIn(value: unknown, names: Names | null, prototypeNames: boolean, levels: number): number {
  if (value === null || typeof value !== 'object') return 0
  if (levels === 0) return TOO_DEEP
  let count = 0
  if (Array.isArray(value)) {
    // The schema names no member of an array's items (names.ts), so their walk never finds a folded sibling.
    for (let i = 0; i < value.length; i++) {
      const below = membersIn(value[i], null, prototypeNames, levels - 1)
      if (below < 0) return below
      count += below
    }
    return count
  }
  for (const key in value) {
    if (prototypeNames && (key === '__proto__' || key === 'constructor')) return PROTOTYPE_NAMED
    let named: Names | null = null
    if (names !== null) {
      const member = names.members.get(key)
      if (member !== undefined) named = member
      else if (names.folded.has(foldCase(key))) return FOLDED_SIBLING
    }
    const below = membersIn((value as Record<string, unknown>)[key], named, prototypeNames, levels - 1)
    if (below < 0) return below
    count += 1 + below
  }
  return count
}

/**
 * The keys in a JSON text, repeated ones included: the strings followed by a colon. Outside strings
 * every quote opens one, so the count jumps from string to string. Read in its UTF-8 bytes, where a
 * quote, a backslash or a colon is never part of another character's bytes: a loop over bytes costs
 * less than a search of the text for each quote (docs/performance-history.md).
 */
function keysIn(bytes: Uint8Array): number {
  let keys = 0
  for (let at = 0; at < bytes.length;) {
    if (bytes[at++] !== QUOTE) continue
    // Past the closing quote; the text is JSON, so the string is closed.
    for (let b = bytes[at++]; b !== QUOTE; b = bytes[at++]) if (b === BACKSLASH) at++
    let next = bytes[at]
    while (isJsonWhite(next)) next = bytes[++at]
    if (next === COLON) keys++
  }
  return keys
}

/** A JSON text read again with every key kept: an object as its members in order, an array as its items, anything else null. */
type Tree = { readonly members: readonly (readonly [string, Tree])[] } | readonly Tree[] | null

interface Cursor {
  readonly text: string
  at: number
}

/** Reads one value of text known to be JSON, nested no deeper than MAX_DEPTH, at the cursor. */
function readTree(cursor: Cursor): Tree {
  const { text } = cursor
  cursor.at = skipWhite(text, cursor.at)
  const first = text.charCodeAt(cursor.at)
  if (first === OPEN_BRACE) {
    const members: [string, Tree][] = []
    cursor.at = skipWhite(text, cursor.at + 1)
    while (text.charCodeAt(cursor.at) === QUOTE) {
      const end = endOfString(text, cursor.at)
      const key = JSON.parse(text.slice(cursor.at, end + 1)) as string
      // Past the colon.
      cursor.at = skipWhite(text, end + 1) + 1
      members.push([key, readTree(cursor)])
      cursor.at = skipWhite(text, cursor.at)
      if (text.charCodeAt(cursor.at) === COMMA) cursor.at = skipWhite(text, cursor.at + 1)
    }
    cursor.at++
    return { members }
  }
  if (first === OPEN_BRACKET) {
    const items: Tree[] = []
    cursor.at = skipWhite(text, cursor.at + 1)
    while (text.charCodeAt(cursor.at) !== CLOSE_BRACKET) {
      items.push(readTree(cursor))
      cursor.at = skipWhite(text, cursor.at)
      if (text.charCodeAt(cursor.at) === COMMA) cursor.at++
    }
    cursor.at++
    return items
  }
  if (first === QUOTE) {
    cursor.at = endOfString(text, cursor.at) + 1
    return null
  }
  // A number, true, false or null: it ends at the next delimiter, white space or the end of the text.
  let next = cursor.at
  for (let c = text.charCodeAt(next); c > 0x20 && c !== COMMA && c !== CLOSE_BRACE && c !== CLOSE_BRACKET;) {
    c = text.charCodeAt(++next)
  }
  cursor.at = next
  return null
}

/** The folded siblings and repeated named members of an object of the tree, and of the objects below it that the schema names. */
function findMisspelt(tree: Tree, names: Names, path: string, items: FieldError[]): void {
  if (tree === null || !('members' in tree)) return
  const seen = new Set<string>()
  for (const [key, value] of tree.members) {
    const below = names.members.get(key)
    if (below === undefined) {
      if (names.folded.has(foldCase(key))) items.push(fieldError('fieldIsNotAllowed', appendKey(path, key), FOLDED))
      continue
    }
    if (seen.has(key)) items.push(fieldError('fieldIsNotAllowed', appendKey(path, key), REPEATED))
    seen.add(key)
    if (below !== null) findMisspelt(value, below, appendKey(path, key), items)
  }
}
