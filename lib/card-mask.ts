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

/** What a stretch of text is to the scanner. */
const DIGIT = 0
const SEPARATOR = 1
const BREAK = 2

function hexValue(code: number): number {
  if (code >= 48 && code <= 57) return code - 48
  const lower = code | 0x20
  return lower >= 97 && lower <= 102 ? lower - 87 : -1
}

function hexAt(text: string, at: number, count: number): number {
  if (at + count > text.length) return -1
  let value = 0
  for (let i = at; i < at + count; i++) {
    const digit = hexValue(text.charCodeAt(i))
    if (digit < 0) return -1
    value = value * 16 + digit
  }
  return value
}

function isLetter(code: number): boolean {
  const lower = code | 0x20
  return lower >= 97 && lower <= 122
}

/** A character's kind, digits and letters by their code; anything else separates. */
function kindOf(code: number): number {
  if (code >= 48 && code <= 57) return DIGIT
  return isLetter(code) ? BREAK : SEPARATOR
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
  /** The one separator character since the last digit, or -1. */
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
  const hidden = new Int32Array(n + 1)
  const hide = (from: number, to: number) => {
    hidden[from] = (hidden[from] as number) + 1
    hidden[to] = (hidden[to] as number) - 1
  }
  if (run.plain && n <= LONGEST) hide(6, n - 4)
  if (n >= SHORTEST_LUHN) {
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
      const sums = (end - 1) % 2 === 0 ? evenLast : oddLast
      const last = sums[end] as number
      for (let length = SHORTEST_LUHN; length <= LONGEST && length <= end; length++) {
        if ((last - (sums[end - length] as number)) % 10 === 0) hide(end - length + 6, end - 4)
      }
    }
  }
  let depth = 0
  for (let k = 0; k < n; k++) {
    depth += hidden[k] as number
    if (depth > 0) starred.push(starts[k] as number, ends[k] as number)
  }
}

/** Ends the run being read: its digits starred as `starRun` says, and the state made ready for the next one. */
function finish(run: Run, starred: Starred): void {
  starRun(run, starred)
  run.values.length = 0
  run.starts.length = 0
  run.ends.length = 0
  run.plain = true
  run.separators = 0
  run.lastSeparator = -1
}

/**
 * Masks every card number in a text to its first six and last four digits,
 * however it is written: digits with any separators between them (spaces,
 * `-`, `+`, `.`, `_`, `/`, up to three in a row), percent-encoded (`%20`
 * between digits, `%34` for a digit, `%2520` twice encoded), JSON-escaped
 * (`\t`, `\u0020`), or inside a longer run of digits, where every window of
 * 13 to 19 digits that passes Luhn is masked. A letter ends a number. Every
 * masked digit, or escape of a digit, becomes one `*`. One pass over the
 * text, no regular expression: linear time whatever a client sends.
 */
export function maskCardNumbers(text: string): string {
  const length = text.length
  const starred: Starred = []
  const run: Run = { values: [], starts: [], ends: [], plain: true, separators: 0, lastSeparator: -1 }
  let i = 0
  while (i < length) {
    const code = text.charCodeAt(i)
    let kind = kindOf(code)
    let end = i + 1
    let value = code - 48
    if (code === 37 /* % */) {
      // %HH, and %25HH for text encoded twice (or more): what it decodes to decides.
      let decoded = hexAt(text, i + 1, 2)
      if (decoded >= 0) {
        end = i + 3
        while (decoded === 0x25 && hexAt(text, end, 2) >= 0) {
          decoded = hexAt(text, end, 2)
          end += 2
        }
        kind = kindOf(decoded)
        value = decoded - 48
      }
    } else if (code === 92 /* \ */ && i + 1 < length) {
      const next = text.charCodeAt(i + 1)
      const escaped = next === 117 /* u */ ? hexAt(text, i + 2, 4) : -1
      if (escaped >= 0) {
        end = i + 6
        kind = kindOf(escaped)
        value = escaped - 48
      } else if (isLetter(next)) end = i + 2
    }
    if (kind === DIGIT) {
      if (run.separators > MOST_SEPARATORS) finish(run, starred)
      if (run.values.length > 0 && !(run.separators === 1 && (run.lastSeparator === 32 || run.lastSeparator === 45)))
        run.plain = run.plain && run.separators === 0
      run.values.push(value)
      run.starts.push(i)
      run.ends.push(end)
      run.separators = 0
      run.lastSeparator = -1
    } else if (kind === SEPARATOR) {
      run.separators++
      run.lastSeparator = end === i + 1 ? code : -1
    } else if (run.values.length > 0) {
      // A letter ends a number; one with no digit before it has nothing to end (most of a log line).
      finish(run, starred)
    }
    i = end
  }
  finish(run, starred)
  if (starred.length === 0) return text
  let masked = ''
  let from = 0
  for (let k = 0; k < starred.length; k += 2) {
    masked += `${text.slice(from, starred[k])}*`
    from = starred[k + 1] as number
  }
  return masked + text.slice(from)
}
