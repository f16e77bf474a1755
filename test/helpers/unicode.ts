/**
 * Every decimal digit of the running node's Unicode with its value, read from `\p{Nd}` alone: Unicode encodes
 * them only in runs of ten, zero to nine (its stability policy for Numeric_Type=Decimal).
 */
export function unicodeDigits(): Map<number, number> {
  const digits = new Map<number, number>()
  const decimal = /^\p{Nd}$/u
  let inRun = 0
  for (let point = 0; point <= 0x10ffff; point++) {
    if (decimal.test(String.fromCodePoint(point))) digits.set(point, inRun++ % 10)
    else inRun = 0
  }
  return digits
}
