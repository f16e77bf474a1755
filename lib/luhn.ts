/**
 * The Luhn (mod 10) check of a card number given as a string of ASCII digits.
 * Anything else fails, so the check is safe on unvalidated input.
 */
export function luhnValid(digits: string): boolean {
  const length = digits.length
  if (length === 0) return false
  let sum = 0
  let double = false
  for (let i = length - 1; i >= 0; i--) {
    let d = digits.charCodeAt(i) - 48
    if (d < 0 || d > 9) return false
    if (double) {
      d *= 2
      if (d > 9) d -= 9
    }
    sum += d
    double = !double
  }
  return sum % 10 === 0
}

/**
 * A card number as it may be shown: at most its first six and last four
 * digits (PCI DSS display rule), the rest masked.
 */
export function maskPan(pan: string): string {
  if (pan.length <= 10) return '*'.repeat(pan.length)
  return pan.slice(0, 6) + '*'.repeat(pan.length - 10) + pan.slice(-4)
}
