import { decodeBase64 } from './base64.js'

const BASIC = /^basic +([A-Za-z0-9+/]+={0,2}) *$/i
// RFC 7617, section 2: neither the user-id nor the password may hold control characters.
const CONTROL = /[\u0000-\u001f\u007f]/
// ignoreBOM keeps a leading U+FEFF in the user-id, as every reader that decodes it without WHATWG's BOM rule does.
const utf8 = new TextDecoder('utf-8', { fatal: true, ignoreBOM: true })

/**
 * The credentials of a `Basic` header, as it is spelt whatever the scheme's
 * case and the spaces around it (RFC 9110 11.1: the scheme is case-insensitive),
 * or undefined when the header is not `Basic`.
 */
export function basicToken(authorization: string): string | undefined {
  return BASIC.exec(authorization)?.[1]
}

/** Whether a user-id or password holds a control character, which no `Basic` header may carry (RFC 7617 section 2). */
export function holdsControl(text: string): boolean {
  return CONTROL.test(text)
}

/** The user-id and password of a `Basic` header's token (RFC 7617), or undefined when it is not well formed. */
export function parseToken(token: string): { username: string; password: string } | undefined {
  const bytes = decodeBase64(token)
  if (bytes === undefined) return undefined
  let text: string
  try {
    text = utf8.decode(bytes)
  } catch {
    return undefined
  }
  const colon = text.indexOf(':')
  if (colon < 1 || holdsControl(text)) return undefined
  return { username: text.slice(0, colon), password: text.slice(colon + 1) }
}
