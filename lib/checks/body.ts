import { fieldError, reject, schemaRejection, type Rejection } from '../errors.js'
import { appendKey } from '../schema/json-path.js'
import type { Names } from '../schema/names.js'
import { BACKSLASH, isJsonWhite, OPEN_BRACE, OPEN_BRACKET, QUOTE } from '../json-text.js'
import { checkSpelling, FOLDED_SIBLING, membersIn, PROTOTYPE_NAMED, spelledOnce, TOO_DEEP } from './spelling.js'

/**
 * How deeply a body may nest. The schema's own depth is 5; the rest is room
 * for unnamed fields, which are forwarded. The limit keeps re-serializing the
 * document (JSON.stringify recurses) from failing on a hostile body.
 */
export const MAX_DEPTH = 64

const OPENERS = ['{', '['] as const

/**
 * UTF-8 checked and decoded in one pass, the text made once: WHATWG's fatal decoder refuses what
 * `isUtf8` refuses (RFC 3629: overlong forms, surrogates, truncated sequences). ignoreBOM keeps a
 * leading U+FEFF, which JSON.parse then refuses: a byte order mark is not JSON (RFC 8259 section 8.1).
 */
const UTF8 = new TextDecoder('utf-8', { fatal: true, ignoreBOM: true })

/** The refusal of a body nested deeper than MAX_DEPTH: a schema refusal at the document's root. */
function tooDeep(): Rejection {
  return schemaRejection([
    fieldError('fieldHasInvalidValue', '$', `The document must not nest deeper than ${MAX_DEPTH} levels.`),
  ])
}

/** True when the bytes hold only JSON white space (or nothing). */
function isBlank(bytes: Uint8Array): boolean {
  for (let i = 0; i < bytes.length; i++) {
    const b = bytes[i]
    if (!isJsonWhite(b)) return false
  }
  return true
}

/**
 * Whether the text could nest deeper than MAX_DEPTH: only with more opening
 * brackets than that. Counted in the decoded text, where a bracket is one
 * character as it is one byte, by the string search V8 runs itself, not a
 * Buffer's, which calls into node for each one (docs/performance-history.md);
 * the byte-by-byte `depth` scan then runs only for the rare body that has that many.
 * Only a text the walk of its document did not see whole needs it (parseBody).
 */
function mayNestTooDeep(text: string): boolean {
  let count = 0
  for (const bracket of OPENERS) {
    for (let i = text.indexOf(bracket); i !== -1; i = text.indexOf(bracket, i + 1)) {
      if (++count > MAX_DEPTH) return true
    }
  }
  return false
}

/** How deeply the text nests, stopping once it is past MAX_DEPTH. Brackets in strings do not count. */
function depth(bytes: Uint8Array): number {
  let current = 0
  let deepest = 0
  let inString = false
  for (let i = 0; i < bytes.length; i++) {
    const b = bytes[i]
    if (inString) {
      if (b === BACKSLASH) i++
      else if (b === QUOTE) inString = false
    } else if (b === QUOTE) {
      inString = true
    } else if (b === OPEN_BRACE || b === OPEN_BRACKET) {
      if (++current > deepest && (deepest = current) > MAX_DEPTH) return deepest
    } else if (b === 0x7d || b === 0x5d) {
      current--
    }
  }
  return deepest
}

/** Check 5 (docs/checks.md), on a declared or a counted size. */
export function checkSize(size: number, limit: number): Rejection | undefined {
  return size > limit
    ? reject('bodyIsTooLarge', { message: `The request body must not be larger than ${limit} bytes.` })
    : undefined
}

export type Parsed = { readonly ok: true; readonly value: unknown } | Rejection

/**
 * Checks 5 to 7 (docs/checks.md): size, emptiness, UTF-8 and JSON, parsing once. A body that is
 * not UTF-8 is refused rather than decoded with replacement characters. The
 * parser's message is never passed on: V8 quotes the body in it, and the body
 * may hold a card number. Then the rules of check 8 that come before the
 * schema: depth, prototype keys, and one spelling of each member `names` (the
 * operation's) names.
 */
export function parseBody(bytes: Uint8Array, limit: number, names: Names): Parsed {
  const tooLarge = checkSize(bytes.length, limit)
  if (tooLarge !== undefined) return tooLarge
  if (isBlank(bytes)) return reject('bodyIsEmpty')
  let text: string
  try {
    text = UTF8.decode(bytes)
  } catch {
    return reject('bodyIsNotJson', { message: 'The request body is not valid UTF-8.' })
  }
  let value: unknown
  try {
    value = JSON.parse(text)
  } catch {
    return reject('bodyIsNotJson')
  }
  // One walk bounds the depth, counts the members and finds any member named as a prototype key. It sees what
  // JSON.parse kept: where it stopped early it saw part of that, and a text that repeats a key holds a value
  // JSON.parse dropped. There the text's screens decide the depth, as the text is what was sent.
  const members = membersIn(value, names, true, MAX_DEPTH)
  if (members === TOO_DEEP) return tooDeep()
  const spelled = members >= 0 && spelledOnce(text, bytes, members)
  if (!spelled && mayNestTooDeep(text) && depth(bytes) > MAX_DEPTH) return tooDeep()
  if (members === PROTOTYPE_NAMED || (members === FOLDED_SIBLING && mayHavePrototypeKeys(text))) {
    const prototypeKeys = findPrototypeKeys(value)
    if (prototypeKeys !== undefined) return prototypeKeys
  }
  if (spelled) return { ok: true, value }
  const misspelt = checkSpelling(
    text,
    bytes,
    names,
    members === PROTOTYPE_NAMED ? membersIn(value, names, false, MAX_DEPTH) : members,
  )
  return misspelt === undefined ? { ok: true, value } : misspelt
}

/** The screen of the text where the walk stopped early, at a folded sibling: a key may also be spelt with escapes. */
function mayHavePrototypeKeys(text: string): boolean {
  return text.includes('__proto__') || text.includes('constructor') || text.includes('\\u')
}

/**
 * `__proto__` keys, and `constructor` objects with a `prototype` key, anywhere
 * in the document: harmless to us (JSON.parse makes them own properties) but a
 * prototype-pollution attack on a backend that merges objects. Refused as
 * `fieldIsNotAllowed`. The walk is iterative, and the depth is bounded anyway.
 */
function findPrototypeKeys(value: unknown): Rejection | undefined {
  const pending: [unknown, string][] = [[value, '$']]
  let items
  for (let next = pending.pop(); next !== undefined; next = pending.pop()) {
    const [node, path] = next
    if (node === null || typeof node !== 'object') continue
    if (Array.isArray(node)) {
      for (let i = 0; i < node.length; i++) pending.push([node[i], `${path}[${i}]`])
      continue
    }
    for (const key of Object.keys(node)) {
      const child = (node as Record<string, unknown>)[key]
      const childPath = appendKey(path, key)
      if (
        key === '__proto__' ||
        (key === 'constructor' && child !== null && typeof child === 'object' && Object.hasOwn(child, 'prototype'))
      ) {
        ;(items ??= []).push(fieldError('fieldIsNotAllowed', childPath, 'Prototype keys are not allowed.'))
      } else {
        pending.push([child, childPath])
      }
    }
  }
  return items === undefined ? undefined : schemaRejection(items)
}
