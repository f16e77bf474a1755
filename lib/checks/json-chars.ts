/** The character codes of JSON's structure and white space (RFC 8259 section 2), for the scanners of a body's text. */
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
