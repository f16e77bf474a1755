import type { MediaTypes } from '../defaults.js'
import { reject, type Rejection } from '../errors.js'

/** Request headers as Node gives them: lower-case names. */
export type Headers = Readonly<Record<string, string | string[] | undefined>>

/** RFC 9110 section 5.6.2 `tchar`: tested one character at a time (so unanchored), so no pattern here can backtrack. */
const TCHAR = /[!#$%&'*+.^_`|~0-9A-Za-z-]/
/** `TCHAR` as a table of the ASCII codes, made once: a look-up a character, where a test of the pattern costs a call (docs/performance-history.md). */
const TCHARS = new Uint8Array(128)
for (let code = 0; code < 128; code++) TCHARS[code] = TCHAR.test(String.fromCharCode(code)) ? 1 : 0
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
  let code = value.charCodeAt(end)
  // Past the end, charCodeAt gives NaN, which no comparison admits.
  while (code < 128 && TCHARS[code] === 1) code = value.charCodeAt(++end)
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
 * A parameter named twice is malformed (RFC 6838 section 4.3): readers keep the first or the last, so
 * `charset=utf-7; charset=utf-8` would be read in two charsets.
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
      const name = value.slice(nameStart, nameEnd).toLowerCase()
      if (media.parameters.has(name)) return undefined
      media.parameters.set(name, quoted ? raw.slice(1, -1).replace(/\\(.)/g, '$1') : raw)
      at = valueEnd
    }
    at = spaceEnd(value, at)
  }
  return media
}

/**
 * The elements of a list (RFC 9110 5.6.1), split at the commas outside quoted strings (5.6.4): inside one, a comma
 * is text, and a quoted string that never closes runs to the end, as negotiator (Express) reads it.
 */
function listElements(list: string): string[] {
  if (!list.includes('"')) return list.split(',')
  const elements: string[] = []
  let start = 0
  for (let at = 0; at < list.length; at++) {
    if (list[at] === '"') at = (quotedEnd(list, at) ?? list.length) - 1
    else if (list[at] === ',') {
      elements.push(list.slice(start, at))
      start = at + 1
    }
  }
  elements.push(list.slice(start))
  return elements
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
 * Whether the body is declared as UTF-8 JSON: `application/json` (RFC 8259 section 11) or a
 * `+json` type (RFC 6839 section 3.1), its charset UTF-8 when named. JSON exchanged between systems
 * is UTF-8 (RFC 8259 section 8.1), so a reader going by either type reads the bytes the checks read.
 * Not `text/json`: registered nowhere, read as text by some readers, and as a `text/*` type without
 * a charset, as ISO-8859-1 by others (RFC 2616 section 3.7.1's old default).
 */
export function buildJsonTypeCheck(): (headers: Headers) => boolean {
  return (headers) => {
    const value = first(headers['content-type'])
    const media = value === undefined ? undefined : parseMediaType(value)
    if (media === undefined || media.type !== 'application') return false
    // RFC 6838 section 4.2: a subtype's name starts with a letter or digit, so `+json` alone names none.
    if (media.subtype !== 'json' && !(media.subtype.length > 5 && media.subtype.endsWith('+json'))) return false
    const charset = media.parameters.get('charset')
    return charset === undefined || charset.toLowerCase() === 'utf-8'
  }
}

/**
 * Check 3, the content coding: none (no header, or an empty list: RFC 9110 5.6.1), or `identity`,
 * its synonym (RFC 9110 12.5.3). The checks read the body's bytes as they came; a backend or
 * framework that decodes `gzip`, `deflate`, `br` or `zstd` (Express's body parsers do) would read
 * other bytes. RFC 9110 15.5.16 answers a content coding not supported with 415.
 */
export function buildContentEncodingCheck(): (headers: Headers) => Rejection | undefined {
  return buildCodingCheck(
    'Content-Encoding',
    ['', 'identity'],
    'The request body must not be encoded: send it without a Content-Encoding.',
  )
}

/**
 * Check 3, the transfer coding: none, or `chunked` alone. Node's parser takes `gzip, chunked` (chunked
 * last, RFC 9112 6.1) and undoes only the chunks, so the checks would read a coded body another
 * reader decodes. RFC 9112 6.1 answers a transfer coding not understood with 501, a 5xx for the
 * client's mistake; 415, as for a content coding.
 */
export function buildTransferCodingCheck(): (headers: Headers) => Rejection | undefined {
  return buildCodingCheck(
    'Transfer-Encoding',
    ['chunked'],
    'The request body must have no transfer coding but chunked.',
  )
}

/** A coding header absent, or one of `accepted` (trimmed, in any case); otherwise 415 with `message`. */
function buildCodingCheck(
  headerName: 'Content-Encoding' | 'Transfer-Encoding',
  accepted: readonly string[],
  message: string,
): (headers: Headers) => Rejection | undefined {
  const name = headerName.toLowerCase() as Lowercase<typeof headerName>
  const invalid = reject('headerHasInvalidValue', { status: 415, headerName, message })
  return (headers) => {
    const value = headers[name]
    return value === undefined || accepted.includes(String(value).trim().toLowerCase()) ? undefined : invalid
  }
}

/**
 * The names a `Connection` header lists (RFC 9110 7.6.1), lower-cased, which a proxy removes from
 * the message before it forwards it; undefined for none besides `keep-alive` or `close`, which
 * nearly every message says, so that no set is built for them. The one reading of the header, for
 * the proxy's hop-by-hop headers and for the check below.
 */
export function connectionOptions(connection: string | string[] | undefined): Set<string> | undefined {
  if (connection === undefined) return undefined
  const value = String(connection).toLowerCase()
  if (value === 'keep-alive' || value === 'close') return undefined
  return new Set(value.split(',').map((name) => name.trim()))
}

/** The headers the checks read, besides the request line (docs/checks.md, checks 1 to 5). */
const CHECKED_HEADERS = ['authorization', 'content-type', 'content-encoding', 'accept', 'content-length'] as const

/**
 * The checks read headers that a proxy must remove when `Connection` names them (RFC 9110 7.6.1):
 * the backend would get the payment without the credentials, the media type or the length the
 * gateway checked, and read it otherwise. Such a request is refused, on every surface alike.
 */
export function buildConnectionCheck(): (headers: Headers) => Rejection | undefined {
  const invalid = reject('headerHasInvalidValue', {
    headerName: 'Connection',
    message:
      'The Connection header must not name Authorization, Content-Type, Content-Encoding, Accept or Content-Length: a proxy removes the headers it names.',
  })
  return (headers) => {
    const options = connectionOptions(headers.connection)
    if (options === undefined) return undefined
    for (const name of CHECKED_HEADERS) if (options.has(name)) return invalid
    return undefined
  }
}

/**
 * An `Expect` other than `100-continue` (RFC 9110 10.1.1: a server may answer 417): node's HTTP server hands it to its
 * `checkExpectation` listener, where it would answer a bare 417 of its own.
 */
export const UNMET_EXPECTATION: Rejection = Object.freeze(
  reject('headerHasInvalidValue', {
    status: 417,
    headerName: 'Expect',
    message: 'The Expect header may only hold 100-continue.',
  }),
)

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
    for (const element of listElements(list)) {
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
