import { maskCardNumbers } from '../card-mask.js'

/** A key that JSONPath's dot notation can carry as it is. */
const IDENTIFIER = /^[A-Za-z_$][A-Za-z0-9_$]*$/
/** What a name in brackets escapes (RFC 9535 2.7, normalized paths): the quote, the backslash, control characters. */
const QUOTED = /['\\\u0000-\u001f]/g
const SHORT_ESCAPES: Readonly<Record<string, string>> = {
  "'": "\\'",
  '\\': '\\\\',
  '\b': '\\b',
  '\f': '\\f',
  '\n': '\\n',
  '\r': '\\r',
  '\t': '\\t',
}
const ESCAPED_SLASH = /~1/g
const ESCAPED_TILDE = /~0/g

/** A key as one JSON Pointer (RFC 6901) reference token. */
export function escapePointerKey(key: string): string {
  return key.replace(/~/g, '~0').replace(/\//g, '~1')
}

/**
 * `path` followed by the object member `key`. A member's name is the client's text, and an error body shows it: a
 * card number in it is masked as the logs mask one, since no error may repeat one whole (docs/checks.md, error body).
 */
export function appendKey(path: string, key: string): string {
  const shown = maskCardNumbers(key)
  return IDENTIFIER.test(shown) ? `${path}.${shown}` : `${path}['${shown.replace(QUOTED, escaped)}']`
}

/** One character of a name, escaped as a normalized path escapes it: `\n`, or `\u0001` in lower-case hex. */
function escaped(character: string): string {
  return SHORT_ESCAPES[character] ?? `\\u${character.charCodeAt(0).toString(16).padStart(4, '0')}`
}

/**
 * The JSONPath (RFC 9535 normalized form, dot notation for plain identifiers)
 * of the element that a JSON Pointer (RFC 6901) names inside `document`.
 * The document is walked along the pointer so that an array's element is
 * written `[0]` and an object's key "0" is written `['0']`.
 */
export function pointerToJsonPath(pointer: string, document: unknown): string {
  let path = '$'
  let node: unknown = document
  // Token by token without split(): this runs for every reported field error.
  for (let start = 1; start <= pointer.length;) {
    let end = pointer.indexOf('/', start)
    if (end === -1) end = pointer.length
    const raw = pointer.slice(start, end)
    start = end + 1
    const key = raw.includes('~') ? raw.replace(ESCAPED_SLASH, '/').replace(ESCAPED_TILDE, '~') : raw
    if (Array.isArray(node)) {
      path += `[${key}]`
      node = node[Number(key)]
    } else {
      path = appendKey(path, key)
      node = node !== null && typeof node === 'object' ? (node as Record<string, unknown>)[key] : undefined
    }
  }
  return path
}
