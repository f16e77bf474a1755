/**
 * Card numbers as they may be shown (PCI DSS display rule): at most the first
 * six and last four digits. The logger runs every line through
 * `maskCardNumbers`, and so do the backend error bodies relayed to clients and
 * the span attributes taken from a request, so no card number leaves whole
 * (docs/logs-and-metrics.md).
 */

/** One card number, masked: its first six and last four digits kept, the rest starred. */
export function maskPan(pan: string): string {
  if (pan.length <= 10) return '*'.repeat(pan.length)
  return pan.slice(0, 6) + '*'.repeat(pan.length - 10) + pan.slice(-4)
}

/** Card numbers are 12 to 19 digits long (ISO/IEC 7812); a Luhn-valid one is at least 13. */
const SHORTEST = 12
const SHORTEST_LUHN = 13
const LONGEST = 19

/**
 * How many separators may stand between two digits of one number: `4111 - 1111`,
 * `4111%20%2D%201111` and `", "` (a number split in a JSON array) are three.
 * More, and the digits are two texts, not one number written apart.
 */
const MOST_SEPARATORS = 3

/**
 * What a character is to the scanner: a decimal digit's value, 0 to 9, or one of these. Every
 * Unicode decimal digit (`\p{Nd}`: `４`, `٤`, `𝟒`) is a digit, as a backend's number parser
 * (Python's `int`, Java's `Character.digit`) or a log reader reads it; an ASCII letter ends a number;
 * anything else separates.
 */
const SEPARATOR = -1
const BREAK = -2

/**
 * The zero of every run of ten Unicode decimal digits outside ASCII, in order (Unicode 17). Such
 * digits come only in runs of ten, zero to nine (Unicode's stability policy for Numeric_Type=Decimal),
 * so a digit's value is its distance from the zero at or below it. test/card-mask-unicode.test.ts checks
 * the list against the running node's `\p{Nd}`.
 */
const ZEROS = Int32Array.of(
  0x660,
  0x6f0,
  0x7c0,
  0x966,
  0x9e6,
  0xa66,
  0xae6,
  0xb66,
  0xbe6,
  0xc66,
  0xce6,
  0xd66,
  0xde6,
  0xe50,
  0xed0,
  0xf20,
  0x1040,
  0x1090,
  0x17e0,
  0x1810,
  0x1946,
  0x19d0,
  0x1a80,
  0x1a90,
  0x1b50,
  0x1bb0,
  0x1c40,
  0x1c50,
  0xa620,
  0xa8d0,
  0xa900,
  0xa9d0,
  0xa9f0,
  0xaa50,
  0xabf0,
  0xff10,
  0x104a0,
  0x10d30,
  0x10d40,
  0x11066,
  0x110f0,
  0x11136,
  0x111d0,
  0x112f0,
  0x11450,
  0x114d0,
  0x11650,
  0x116c0,
  0x116d0,
  0x116da,
  0x11730,
  0x118e0,
  0x11950,
  0x11bf0,
  0x11c50,
  0x11d50,
  0x11da0,
  0x11de0,
  0x11f50,
  0x16130,
  0x16a60,
  0x16ac0,
  0x16b50,
  0x16d70,
  0x1ccf0,
  0x1d7ce,
  0x1d7d8,
  0x1d7e2,
  0x1d7ec,
  0x1d7f6,
  0x1e140,
  0x1e2f0,
  0x1e4f0,
  0x1e5f1,
  0x1e950,
  0x1fbf0,
)

/** A character's value to the scanner, by its code point. */
function valueOf(point: number): number {
  if (point >= 48 && point <= 57) return point - 48
  if (point < (ZEROS[0] as number)) return isLetter(point) ? BREAK : SEPARATOR
  // The last zero at or below the point, by halving ZEROS[low, high): a few steps, for characters rare in a log line.
  let low = 0
  let high = ZEROS.length
  while (high - low > 1) {
    const middle = (low + high) >> 1
    if ((ZEROS[middle] as number) <= point) low = middle
    else high = middle
  }
  const value = point - (ZEROS[low] as number)
  return value < 10 ? value : SEPARATOR
}

/** An ASCII letter: `code | 0x20` of a code above ASCII stays above it. */
function isLetter(code: number): boolean {
  const lower = code | 0x20
  return lower >= 97 && lower <= 122
}

function hexValue(code: number): number {
  if (code >= 48 && code <= 57) return code - 48
  const lower = code | 0x20
  return lower >= 97 && lower <= 102 ? lower - 87 : -1
}

/** The value of `count` hex digits at `at`, or -1; past either end of the text `charCodeAt` is NaN, no hex digit. */
function hexAt(text: string, at: number, count: number): number {
  let value = 0
  for (let i = at; i < at + count; i++) {
    const digit = hexValue(text.charCodeAt(i))
    if (digit < 0) return -1
    value = value * 16 + digit
  }
  return value
}

/**
 * Where the percent-escape at `at` ends, or 0 when none starts there: `%HH`, or `%25` followed by
 * `25`s and then `HH` for text encoded twice or more (`%2534` is `%34` encoded again). The byte it
 * stands for is always its last two hex digits.
 */
function escapeEnd(text: string, at: number): number {
  if (text.charCodeAt(at) !== 37 /* % */ || hexAt(text, at + 1, 2) < 0) return 0
  let end = at + 3
  while (hexAt(text, end - 2, 2) === 0x25 && hexAt(text, end, 2) >= 0) end += 2
  return end
}

function isLowSurrogate(code: number): boolean {
  return code >= 0xdc00 && code <= 0xdfff
}

function isHighSurrogate(code: number): boolean {
  return code >= 0xd800 && code <= 0xdbff
}

function pairOf(high: number, low: number): number {
  return (high - 0xd800) * 0x400 + (low - 0xdc00) + 0x10000
}

/**
 * The scanner's state: the digits of the number being read (their values and
 * where each stands in the text) and the separators since the last one.
 */
interface Run {
  readonly values: number[]
  readonly starts: number[]
  readonly ends: number[]
  /** Whether every gap so far is one space or one hyphen, the ways card numbers are printed. */
  plain: boolean
  separators: number
  /** The last separator read: when it is the only one since the last digit, what stands between two digits. */
  lastSeparator: number
}

/** Text positions to star, as [start, end) pairs in order. */
type Starred = number[]

/**
 * Marks the digits of a finished run that must not be shown: in every window of
 * 13 to 19 digits that passes Luhn, all but its first six and last four; and in
 * a run of 12 to 19 digits printed plainly (single spaces or hyphens), all but
 * its first six and last four whether or not it passes Luhn, since a mistyped
 * card number is still a card number. The Luhn sums of all windows come from
 * two prefix sums, so a run of n digits costs O(n).
 */
function starRun(run: Run, starred: Starred): void {
  const { values, starts, ends } = run
  const n = values.length
  if (n < SHORTEST) return
  // What each digit adds to the depth of hiding: +1 where a hidden stretch starts, -1 where it ends (at most n - 4).
  const hidden = new Int32Array(n)
  if (run.plain && n <= LONGEST) hide(hidden, 6, n - 4)
  // evenLast[k]: the Luhn sum of digits 0..k-1 for a window whose last digit has an even index (its own
  // digit not doubled, the one before doubled ...); oddLast the same for an odd last index.
  const evenLast = new Int32Array(n + 1)
  const oddLast = new Int32Array(n + 1)
  for (let k = 0; k < n; k++) {
    const digit = values[k] as number
    const doubled = digit > 4 ? digit * 2 - 9 : digit * 2
    evenLast[k + 1] = (evenLast[k] as number) + (k % 2 === 0 ? digit : doubled)
    oddLast[k + 1] = (oddLast[k] as number) + (k % 2 === 1 ? digit : doubled)
  }
  for (let end = SHORTEST_LUHN; end <= n; end++) {
    // The window's last digit, at end - 1, has an even index when end is odd.
    const sums = end % 2 === 1 ? evenLast : oddLast
    const last = sums[end] as number
    for (let length = SHORTEST_LUHN; length <= LONGEST && length <= end; length++) {
      if ((last - (sums[end - length] as number)) % 10 === 0) hide(hidden, end - length + 6, end - 4)
    }
  }
  let depth = 0
  for (let k = 0; k < n; k++) {
    depth += hidden[k] as number
    if (depth > 0) starred.push(starts[k] as number, ends[k] as number)
  }
}

/** Marks the digits from `from` to before `to` hidden. */
function hide(hidden: Int32Array, from: number, to: number): void {
  hidden[from] = (hidden[from] as number) + 1
  hidden[to] = (hidden[to] as number) - 1
}

/** Ends the run being read: its digits starred as `starRun` says, and the state made ready for the next one. */
function finish(run: Run, starred: Starred): void {
  starRun(run, starred)
  run.values.length = 0
  run.starts.length = 0
  run.ends.length = 0
  run.plain = true
  run.separators = 0
}

/**
 * Whether the scan below could star a digit: false when no run of the text reaches SHORTEST digits, read
 * as the scan reads runs (a letter ends one, so do more than MOST_SEPARATORS separators) in a text with no
 * `%` or `\` and no character from the first non-ASCII decimal digit up, whose digits are ASCII's alone.
 * Most log lines are such, and this loop costs a fraction of the scan's (docs/performance-history.md).
 */
function mayHoldCardNumber(text: string): boolean {
  let digits = 0
  let separators = 0
  for (let i = 0; i < text.length; i++) {
    const code = text.charCodeAt(i)
    if (code >= 48 && code <= 57) {
      digits = separators > MOST_SEPARATORS ? 1 : digits + 1
      if (digits >= SHORTEST) return true
      separators = 0
    } else if (code === 37 /* % */ || code === 92 /* \ */ || code >= (ZEROS[0] as number)) return true
    else if (isLetter(code)) digits = 0
    else separators++
  }
  return false
}

/** What a byte is to `mayHoldBytes`: a digit, an ASCII letter, a separator, or a byte that sends the text to the scan. */
const DIGIT_BYTE = 0
const LETTER_BYTE = 1
const SEPARATOR_BYTE = 2
const SCAN_BYTE = 3
const BYTE_CLASSES = Uint8Array.from({ length: 256 }, (_, byte) => {
  if (byte >= 48 && byte <= 57) return DIGIT_BYTE
  if (byte === 37 /* % */ || byte === 92 /* \ */ || byte >= 0x80) return SCAN_BYTE
  return isLetter(byte) ? LETTER_BYTE : SEPARATOR_BYTE
})

/**
 * mayHoldCardNumber on a text's UTF-8 bytes: true wherever it is true on the text, and for any
 * character outside ASCII too (its bytes are all above 0x7f). The log's destination has the bytes of
 * each line anyway, and this loop, one table look-up a byte, costs less than the text's screen
 * (docs/performance-history.md).
 */
export function mayHoldBytes(bytes: Uint8Array): boolean {
  let digits = 0
  let separators = 0
  for (let i = 0; i < bytes.length; i++) {
    const kind = BYTE_CLASSES[bytes[i] as number]
    if (kind === DIGIT_BYTE) {
      digits = separators > MOST_SEPARATORS ? 1 : digits + 1
      if (digits >= SHORTEST) return true
      separators = 0
    } else if (kind === SEPARATOR_BYTE) separators++
    else if (kind === LETTER_BYTE) digits = 0
    else return true
  }
  return false
}

/**
 * Masks every card number in a text to its first six and last four digits,
 * however it is written: digits with any separators between them (spaces,
 * `-`, `+`, `.`, `_`, `/`, up to three in a row), percent-encoded (`%20`
 * between digits, `%34` for a digit, `%2520` twice encoded, a character
 * outside ASCII as its UTF-8 bytes), JSON-escaped (`\t`, `\"`, `\u0020`), in any
 * script's decimal digits (`４`, `%EF%BC%94`), or inside a longer run of
 * digits, where every window of 13 to 19 digits that passes Luhn is masked.
 * An ASCII letter ends a number. Every masked digit, or escape of a digit,
 * becomes one `*`. A text with `%` or `\\` is also read as written. One pass
 * over the text, two with escapes, no regular expression: linear time whatever a client sends.
 */
export function maskCardNumbers(text: string): string {
  if (!mayHoldCardNumber(text)) return text
  let starred: Starred = []
  const escapes: Starred = []
  // An escape's hex digits may be a number's first digits (`%04111...` is `%04` then 15 digits), whole to a
  // reader that does not decode: a text with escapes is read as written too, and what either reading hides is starred.
  if (scan(text, starred, escapes)) starred = union(starred, widened(scanned(text), escapes))
  if (starred.length === 0) return text
  let masked = ''
  let from = 0
  for (let k = 0; k < starred.length; k += 2) {
    masked += `${text.slice(from, starred[k])}*`
    from = starred[k + 1] as number
  }
  return masked + text.slice(from)
}

/** The positions to star of `text` read as written, its escapes as the characters they are written with. */
function scanned(text: string): Starred {
  const starred: Starred = []
  scan(text, starred, undefined)
  return starred
}

/**
 * Each stretch of `starred` widened to the whole of every escape it touches: a part of an escape starred would break
 * its syntax (a JSON text would be JSON no more), the whole of it starred is one `*`.
 */
function widened(starred: Starred, escapes: Starred): Starred {
  const wide: Starred = []
  let k = 0
  for (let j = 0; j < starred.length; j += 2) {
    let start = starred[j] as number
    let end = starred[j + 1] as number
    while (k < escapes.length && (escapes[k + 1] as number) <= start) k += 2
    for (let e = k; e < escapes.length && (escapes[e] as number) < end; e += 2) {
      start = Math.min(start, escapes[e] as number)
      end = Math.max(end, escapes[e + 1] as number)
    }
    wide.push(start, end)
  }
  return wide
}

/**
 * Adds to `starred` the positions of `text` that hide a card number, its escapes decoded into `escapes` (where each
 * stands), or read as written without; true when the text holds a `%` or a `\`, where the other reading may find
 * another number.
 */
function scan(text: string, starred: Starred, escapes: Starred | undefined): boolean {
  const decode = escapes !== undefined
  const length = text.length
  const run: Run = { values: [], starts: [], ends: [], plain: true, separators: 0, lastSeparator: 0 }
  let holdsEscapes = false
  let i = 0
  while (i < length) {
    const code = text.charCodeAt(i)
    let value = valueOf(code)
    let end = i + 1
    // As written, an escape is characters like any others: `%` and `\` separate, its hex letters end a number.
    if (code === 37 /* % */ || code === 92 /* \ */) holdsEscapes = true
    if (decode && code === 37 /* % */) {
      const escaped = escapeEnd(text, i)
      if (escaped > 0) {
        end = escaped
        let point = hexAt(text, end - 2, 2)
        // Outside ASCII a character is escaped as its UTF-8 bytes (RFC 3986 2.5): a lead byte and one to three more.
        let more = point >= 0xf0 ? 3 : point >= 0xe0 ? 2 : point >= 0xc0 ? 1 : 0
        if (more > 0) {
          point &= 0x3f >> more
          let next = end
          for (; more > 0; more--) {
            // No escape at `next` (0) reads as no byte: hexAt before the text's start is -1.
            const after = escapeEnd(text, next)
            const byte = hexAt(text, after - 2, 2)
            if ((byte & 0xc0) !== 0x80) break
            point = point * 64 + (byte & 0x3f)
            next = after
          }
          if (more === 0) end = next
        }
        // A lead byte without all its continuation bytes is read alone, as a separator.
        value = more === 0 ? valueOf(point) : SEPARATOR
      }
    } else if (decode && code === 92 /* \ */) {
      // Past the text's end `next` is NaN: neither `u` nor a letter. A two-character escape (`\t`, `\"`, `\\`, `\/`:
      // RFC 8259 7) is one character, so one separator, and `\",\"` (an array in a JSON string) three.
      const next = text.charCodeAt(i + 1)
      let escaped = next === 117 /* u */ ? hexAt(text, i + 2, 4) : -1
      if (escaped >= 0) {
        end = i + 6
        // A character above the BMP is escaped as its two surrogates (RFC 8259 7).
        if (isHighSurrogate(escaped) && text.charCodeAt(end) === 92 && text.charCodeAt(end + 1) === 117) {
          const low = hexAt(text, end + 2, 4)
          if (isLowSurrogate(low)) {
            escaped = pairOf(escaped, low)
            end += 6
          }
        }
        value = valueOf(escaped)
      } else if (isLetter(next) || next === 34 /* " */ || next === 92 /* \ */ || next === 47 /* / */) end = i + 2
    } else if (isHighSurrogate(code) && isLowSurrogate(text.charCodeAt(i + 1))) {
      value = valueOf(pairOf(code, text.charCodeAt(i + 1)))
      end = i + 2
    }
    // Where an escape (`%` or `\`, read as more than one character) stands: its parts are starred together.
    if (end > i + 1 && (code === 37 || code === 92)) escapes?.push(i, end)
    if (value >= 0) {
      if (run.separators > MOST_SEPARATORS) finish(run, starred)
      if (run.values.length > 0 && !(run.separators === 1 && (run.lastSeparator === 32 || run.lastSeparator === 45)))
        run.plain = run.plain && run.separators === 0
      run.values.push(value)
      run.starts.push(i)
      run.ends.push(end)
      run.separators = 0
    } else if (value === SEPARATOR) {
      run.separators++
      // An escaped separator starts with `%` or `\`, a pair with a surrogate: never a plain space or hyphen.
      run.lastSeparator = code
    } else if (run.values.length > 0) {
      // A letter ends a number; one with no digit before it has nothing to end (most of a log line).
      finish(run, starred)
    }
    i = end
  }
  finish(run, starred)
  return holdsEscapes
}

/** The positions either list stars, in order, an overlap starred as one stretch: an escape stays one `*`. */
function union(a: Starred, b: Starred): Starred {
  const merged: Starred = []
  let j = 0
  let k = 0
  while (j < a.length || k < b.length) {
    const fromA = k >= b.length || (j < a.length && (a[j] as number) <= (b[k] as number))
    const list = fromA ? a : b
    const at = fromA ? j : k
    const start = list[at] as number
    const end = list[at + 1] as number
    if (fromA) j += 2
    else k += 2
    const last = merged.length - 1
    if (last >= 0 && start < (merged[last] as number)) merged[last] = Math.max(merged[last] as number, end)
    else merged.push(start, end)
  }
  return merged
}
