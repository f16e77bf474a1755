const NON_ASCII = /\P{ASCII}/u

/**
 * Letters compared as a backend that folds case beyond ASCII compares them
 * (Unicode case folding, as Go's `EqualFold`, .NET's `OrdinalIgnoreCase` or
 * Python's `casefold` do): compatibility forms first (`ﬁ` is `fi`, `ﬆ` is
 * `st`, a full-width `ｓ` is `s`, the Kelvin sign is `K`), then lower, upper
 * and lower case again: lower takes the capital `ẞ` to `ß`, upper takes `ß`
 * to `SS`, `ſ` to `S` and the dotless `ı` to `I`; the dotted `İ` is `i`, as
 * the Turkic folding has it. One folding for the paths the router reads and
 * the member names the one-spelling rule reads (docs/checks.md, routes and
 * choices), so that a text in ASCII costs a look and a lower-casing.
 */
export function foldCase(text: string): string {
  if (!NON_ASCII.test(text)) return text.toLowerCase()
  return text.normalize('NFKC').replaceAll('\u0130', 'i').toLowerCase().toUpperCase().toLowerCase()
}
