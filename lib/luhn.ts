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
