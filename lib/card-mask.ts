/**
 * Card numbers as they may be shown (PCI DSS display rule): at most the first
 * six and last four digits. The logger runs every line through
 * `maskCardNumbers`, so no card number reaches a log whole.
 */

/** One card number, masked: its first six and last four digits kept, the rest starred. */
export function maskPan(pan: string): string {
  if (pan.length <= 10) return '*'.repeat(pan.length)
  return pan.slice(0, 6) + '*'.repeat(pan.length - 10) + pan.slice(-4)
}

/**
 * A run of 12 to 19 digits, optionally split by single spaces or hyphens (the
 * ways card numbers are written), not part of a longer run. Every such run is
 * masked whether or not it passes Luhn: masking a number that was not a card
 * costs nothing, letting a card through costs a PCI finding.
 */
const CARD_LIKE = /(?<![0-9])[0-9](?:[ -]?[0-9]){11,18}(?![0-9])/g

/** Masks every card-like digit run of a text to its first six and last four digits. */
export function maskCardNumbers(text: string): string {
  return text.replace(CARD_LIKE, (run) => maskPan(run.replace(/[ -]/g, '')))
}
