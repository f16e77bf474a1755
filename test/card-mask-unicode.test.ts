import t from 'tap'
import { maskCardNumbers } from '../lib/card-mask.js'
import { unicodeDigits } from './helpers/unicode.js'

/**
 * Every code point against the running node's `\p{Nd}`: a node on a newer Unicode, with digits lib/card-mask.ts
 * does not list, fails here. A file of its own, so that mutation runs (stryker.config.json) keep to the fast
 * examples of test/card-mask.test.ts.
 */
t.test("every code point is a digit to the masker exactly when it is one of Unicode's", async (t) => {
  const digits = unicodeDigits()
  const wrong: string[] = []
  for (let point = 0; point <= 0x10ffff; point++) {
    if (point >= 0xd800 && point <= 0xdfff) continue
    // Eleven digits are no card number; a twelfth makes one printed plainly, masked whatever its digits.
    const text = `41111111111${String.fromCodePoint(point)}`
    if ((maskCardNumbers(text) !== text) !== digits.has(point)) wrong.push(point.toString(16))
  }
  t.same(
    wrong,
    [],
    "read otherwise than the running node's Unicode reads them (a newer Unicode: ZEROS in lib/card-mask.ts)",
  )
})
