import type { Exchange } from './exchange.js'

/**
 * What node's `writeHead` refuses (it throws ERR_INVALID_CHAR or ERR_INVALID_HTTP_TOKEN), tested the way
 * node tests it: a reason phrase or header value with a character outside HTAB, visible ASCII, space and
 * obs-text (RFC 9110 5.5), a header name that is not a token (RFC 9110 5.6.2). A backend that sends one
 * must not make the gateway throw while it relays the answer (docs/backend-faults.md).
 */
const INVALID_VALUE = /[^\t\x20-\x7e\x80-\xff]/
const TOKEN = /^[!#$%&'*+.^_`|~0-9A-Za-z-]+$/

/** The backend's reason phrase when node would send it, else undefined: node's standard one goes out. */
export function reasonPhrase(reason: string | undefined): string | undefined {
  return reason === undefined || INVALID_VALUE.test(reason) ? undefined : reason
}

/**
 * The backend's raw header list without the headers node would refuse to write; the list itself when
 * there are none (nearly always), else a copy, the names of those dropped noted for the log line.
 */
export function acceptedHeaders(raw: string[], exchange: Exchange): string[] {
  let kept: string[] | undefined
  for (let i = 0; i < raw.length; i += 2) {
    const name = raw[i] as string
    const valid = TOKEN.test(name) && !INVALID_VALUE.test(raw[i + 1] as string)
    if (valid) {
      kept?.push(name, raw[i + 1] as string)
      continue
    }
    kept ??= raw.slice(0, i)
    ;(exchange.droppedHeaders ??= []).push(name)
  }
  return kept ?? raw
}
