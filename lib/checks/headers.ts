import type { MediaTypes } from '../defaults.js'
import { reject, type Rejection } from '../errors.js'

/** Request headers as Node gives them: lower-case names. */
export type Headers = Readonly<Record<string, string | string[] | undefined>>

/** RFC 9110 section 5.6.2 `tchar`: tested one character at a time, so no pattern here can backtrack. */
const TCHAR = /^[!#$%&'*+.^_`|~0-9A-Za-z-]$/
/** RFC 9110 section 12.4.2 `qvalue`. */
const QVALUE = /^(?:0(?:\.[0-9]{0,3})?|1(?:\.0{0,3})?)$/

interface MediaType {
  type: string
  subtype: string
  parameters: Map<string, string>
}

/** Where the run of `tchar` from `at` ends (`at` itself when there is none). */
function tokenEnd(value: string, at: number): number {
  let end = at
  while (TCHAR.test(value.charAt(end))) end++
  return end
}

/** Where the OWS (spaces and tabs, RFC 9110 section 5.6.3) from `at` ends. */
function spaceEnd(value: string, at: number): number {
  let end = at
  while (value[end] === ' ' || value[end] === '\t') end++
  return end
}

/** Where the `quoted-string` (RFC 9110 section 5.6.4) opening at `at` ends, or undefined when it never closes. */
function quotedEnd(value: string, at: number): number | undefined {
  for (let end = at + 1; end < value.length; end += value[end] === '\\' ? 2 : 1) {
    if (value[end] === '"') return end + 1
  }
  return undefined
}

/**
 * RFC 9110 section 8.3.1, `type "/" subtype *( OWS ";" OWS [ parameter ] )`, with OWS around the whole,
 * read left to right in one pass: a value of thousands of empty parameters (`; ; ; ...`) costs its length,
 * where a backtracking pattern once took exponential time on it (docs/reliability.md, threat model).
 */
function parseMediaType(value: string): MediaType | undefined {
  const typeStart = spaceEnd(value, 0)
  const typeEnd = tokenEnd(value, typeStart)
  if (typeEnd === typeStart || value[typeEnd] !== '/') return undefined
  const subtypeEnd = tokenEnd(value, typeEnd + 1)
  if (subtypeEnd === typeEnd + 1) return undefined
  const media = {
    type: value.slice(typeStart, typeEnd).toLowerCase(),
    subtype: value.slice(typeEnd + 1, subtypeEnd).toLowerCase(),
    parameters: new Map<string, string>(),
  }
  let at = spaceEnd(value, subtypeEnd)
  while (at < value.length) {
    if (value[at] !== ';') return undefined
    const nameStart = spaceEnd(value, at + 1)
    const nameEnd = tokenEnd(value, nameStart)
    at = nameEnd
    // An empty parameter (`;;`) is allowed (RFC 9110 section 5.6.6's `[ parameter ]`).
    if (nameEnd > nameStart) {
      if (value[nameEnd] !== '=') return undefined
      const quoted = value[nameEnd + 1] === '"'
      const valueEnd = quoted ? quotedEnd(value, nameEnd + 1) : tokenEnd(value, nameEnd + 1)
      if (valueEnd === undefined || valueEnd === nameEnd + 1) return undefined
      const raw = value.slice(nameEnd + 1, valueEnd)
      media.parameters.set(
        value.slice(nameStart, nameEnd).toLowerCase(),
        quoted ? raw.slice(1, -1).replace(/\\(.)/g, '$1') : raw,
      )
      at = valueEnd
    }
    at = spaceEnd(value, at)
  }
  return media
}

function first(value: string | string[] | undefined): string | undefined {
  return Array.isArray(value) ? value[0] : value
}

/**
 * Check 2 and 3. Type and subtype compare case-insensitively (RFC 9110 8.3.1);
 * parameters are allowed, but a `charset` other than UTF-8 is refused, since
 * the body must be UTF-8 JSON.
 */
export function buildContentTypeCheck(types: MediaTypes): (headers: Headers) => Rejection | undefined {
  const expected = types.request.toLowerCase()
  const missing = reject('headerIsMissing', {
    headerName: 'Content-Type',
    message: `The Content-Type header is missing. Send ${types.request}.`,
  })
  const invalid = reject('headerHasInvalidValue', {
    status: 415,
    headerName: 'Content-Type',
    message: `The Content-Type must be ${types.request} (charset, if given, utf-8).`,
  })
  return (headers) => {
    const value = first(headers['content-type'])
    if (value === undefined) return missing
    if (value === types.request) return undefined
    const media = parseMediaType(value)
    if (media === undefined || `${media.type}/${media.subtype}` !== expected) return invalid
    const charset = media.parameters.get('charset')
    return charset === undefined || charset.toLowerCase() === 'utf-8' ? undefined : invalid
  }
}

/**
 * Check 4 (RFC 9110 section 12.5.1). The most specific media range that
 * matches the response type decides its quality: `type/subtype` over `type/*`
 * over `*\/*`. Acceptable when that quality is above zero. Malformed ranges
 * are ignored; an absent or empty header accepts anything.
 */
export function buildAcceptCheck(types: MediaTypes): (headers: Headers) => Rejection | undefined {
  const [type, subtype] = types.response.toLowerCase().split('/') as [string, string]
  const invalid = reject('headerHasInvalidValue', {
    status: 406,
    headerName: 'Accept',
    message: `The Accept header must admit ${types.response}.`,
  })
  return (headers) => {
    const value = headers.accept
    if (value === undefined || value === types.response || value === '*/*') return undefined
    const list = Array.isArray(value) ? value.join(',') : value
    if (list.trim() === '') return undefined
    let specificity = 0
    let quality = 0
    for (const element of list.split(',')) {
      const range = parseMediaType(element)
      if (range === undefined) continue
      const rank =
        range.type === type
          ? range.subtype === subtype
            ? 3
            : range.subtype === '*'
              ? 2
              : 0
          : range.type === '*' && range.subtype === '*'
            ? 1
            : 0
      if (rank === 0 || rank < specificity) continue
      const q = range.parameters.get('q') ?? '1'
      if (!QVALUE.test(q)) continue
      quality = rank > specificity ? Number(q) : Math.max(quality, Number(q))
      specificity = rank
    }
    return quality > 0 ? undefined : invalid
  }
}
