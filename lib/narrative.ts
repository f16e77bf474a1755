/**
 * The statement narrative's formatting rules (docs/checks.md, rewrites): a
 * character outside letters A-Z a-z, digits, space, hyphen, full stop and
 * comma becomes a space. A character is a Unicode code point, so an emoji
 * (two UTF-16 units) becomes one space.
 */
export const LINE1_MAX_LENGTH = 24

const ALL_SUPPORTED = /^[A-Za-z0-9 .,-]*$/

function isSupported(code: number): boolean {
  return (
    (code >= 0x61 && code <= 0x7a) ||
    (code >= 0x41 && code <= 0x5a) ||
    (code >= 0x30 && code <= 0x39) ||
    code === 0x20 ||
    code === 0x2d ||
    code === 0x2e ||
    code === 0x2c
  )
}

/** The text with every unsupported code point replaced by a space. The result is ASCII. */
export function replaceUnsupported(text: string): string {
  if (ALL_SUPPORTED.test(text)) return text
  let out = ''
  for (const character of text) {
    out += isSupported(character.codePointAt(0) as number) ? character : ' '
  }
  return out
}
