const NON_ASCII = /\P{ASCII}/u

/**
 * Letters compared as a backend that folds case beyond ASCII compares them
 * (Unicode case folding, as Go's `EqualFold`, .NET's `OrdinalIgnoreCase` or
 * Python's `casefold` do): compatibility forms first (`ﬁ` is `fi`, a
 * full-width `ｓ` is `s`, the Kelvin sign is `K`), then upper case, which
 * takes `ſ` to `S` and the dotless `ı` to `I`, then lower case; the dotted
 * `İ` is `i`, as the Turkic folding has it.
 */
export function foldCase(text: string): string {
  if (!NON_ASCII.test(text)) return text.toLowerCase()
  return text.normalize('NFKC').replaceAll('\u0130', 'i').toUpperCase().toLowerCase()
}
