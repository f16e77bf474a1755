/** Strict base64: what does not encode back to itself is refused, so a hash string or a header has one spelling. */
export function decodeBase64(text: string): Buffer | undefined {
  const bytes = Buffer.from(text, 'base64')
  return bytes.length > 0 && bytes.toString('base64') === text ? bytes : undefined
}
