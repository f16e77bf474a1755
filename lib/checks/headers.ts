import type { MediaTypes } from '../defaults.js'
import { reject, type Rejection } from '../errors.js'

/** Request headers as Node gives them: lower-case names. */
export type Headers = Readonly<Record<string, string | string[] | undefined>>

/** RFC 9110 `token` characters. */
const TOKEN = "[!#$%&'*+.^_`|~0-9A-Za-z-]+"
const QUOTED = '"(?:[^"\\\\]|\\\\.)*"'
/** RFC 9110 section 8.3.1: `type "/" subtype *( OWS ";" OWS [ parameter ] )`. */
const MEDIA_TYPE = new RegExp(
  `^[ \\t]*(${TOKEN})/(${TOKEN})((?:[ \\t]*;[ \\t]*(?:${TOKEN}=(?:${TOKEN}|${QUOTED}))?)*)[ \\t]*$`,
)
const PARAMETER = new RegExp(`;[ \\t]*(${TOKEN})=(${TOKEN}|${QUOTED})`, 'g')
/** RFC 9110 section 12.4.2 `qvalue`. */
const QVALUE = /^(?:0(?:\.[0-9]{0,3})?|1(?:\.0{0,3})?)$/

interface MediaType {
  type: string
  subtype: string
  parameters: Map<string, string>
}

function parseMediaType(value: string): MediaType | undefined {
  const match = MEDIA_TYPE.exec(value)
  if (match === null) return undefined
  const parameters = new Map<string, string>()
  for (const [, name, raw] of (match[3] as string).matchAll(PARAMETER)) {
    const unquoted = (raw as string).startsWith('"')
      ? (raw as string).slice(1, -1).replace(/\\(.)/g, '$1')
      : (raw as string)
    parameters.set((name as string).toLowerCase(), unquoted)
  }
  return { type: (match[1] as string).toLowerCase(), subtype: (match[2] as string).toLowerCase(), parameters }
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
