import { appendKey } from './schema/json-path.js'

/** The character codes of JSON's structure and white space (RFC 8259 section 2), for the scanners of a JSON text. */
export const SPACE = 0x20
export const TAB = 0x09
export const LF = 0x0a
export const CR = 0x0d
export const QUOTE = 0x22
export const BACKSLASH = 0x5c
export const COLON = 0x3a
export const COMMA = 0x2c
export const OPEN_BRACE = 0x7b
export const CLOSE_BRACE = 0x7d
export const OPEN_BRACKET = 0x5b
export const CLOSE_BRACKET = 0x5d

/** JSON's white space (RFC 8259 section 2): a space, a tab, a line feed or a carriage return. */
export function isJsonWhite(code: number | undefined): boolean {
  return code === SPACE || code === LF || code === CR || code === TAB
}

/** The end of the string whose opening quote is at `start`, in text known to be JSON: its closing quote. */
export function endOfString(text: string, start: number): number {
  let end = text.indexOf('"', start + 1)
  for (;;) {
    let backslashes = 0
    while (text.charCodeAt(end - 1 - backslashes) === BACKSLASH) backslashes++
    if (backslashes % 2 === 0) return end
    end = text.indexOf('"', end + 1)
  }
}

/** The first character at or after `at` that is not JSON white space. */
export function skipWhite(text: string, at: number): number {
  let next = at
  while (isJsonWhite(text.charCodeAt(next))) next++
  return next
}

/** Why a file whose `repeatedKey` is found is refused, after that path. */
export const REPEATED =
  'given twice in one object, where the gateway would read the last and a reader of the file the first; give it once'

/** An object or an array open around the scanner: an object's names so far and the last, an array's index. */
interface Open {
  readonly names: Set<string> | undefined
  member: string
  index: number
}

/**
 * The path of the first member name given twice in one object of `text`, known to be JSON, or undefined. JSON.parse
 * keeps the last of the two silently, where a reader of the file, or of a diff of it, sees the first: a file an
 * operator writes (credentials, a policy, backend-error rules) is refused with it. One pass, no recursion: a file
 * may nest as deep as JSON.parse reads.
 */
export function repeatedKey(text: string): string | undefined {
  const open: Open[] = []
  for (let at = 0; at < text.length; at++) {
    const code = text.charCodeAt(at)
    if (code === QUOTE) {
      const end = endOfString(text, at)
      const next = skipWhite(text, end + 1)
      if (text.charCodeAt(next) === COLON) {
        // A name is always in an object; compared as JSON.parse reads it (`"\u0061"` is `"a"`).
        const object = open[open.length - 1] as Open & { names: Set<string> }
        const name = JSON.parse(text.slice(at, end + 1)) as string
        if (object.names.has(name)) return appendKey(pathOf(open), name)
        object.names.add(name)
        object.member = name
      }
      at = end
    } else if (code === OPEN_BRACE || code === OPEN_BRACKET)
      open.push({ names: code === OPEN_BRACE ? new Set() : undefined, member: '', index: 0 })
    else if (code === CLOSE_BRACE || code === CLOSE_BRACKET) open.pop()
    else if (code === COMMA) {
      const array = open[open.length - 1] as Open
      if (array.names === undefined) array.index++
    }
  }
  return undefined
}

/** The path of the innermost open object: each level by its member's name or its item's index. */
function pathOf(open: readonly Open[]): string {
  let path = '$'
  for (let level = 0; level < open.length - 1; level++) {
    const { names, member, index } = open[level] as Open
    path = names === undefined ? `${path}[${index}]` : appendKey(path, member)
  }
  return path
}
