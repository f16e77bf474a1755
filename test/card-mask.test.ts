import fc from 'fast-check'
import t from 'tap'
import { maskCardNumbers, maskPan } from '../lib/card-mask.js'
import { luhnValid } from '../lib/luhn.js'

t.test('maskPan keeps at most the first six and last four digits', async (t) => {
  t.equal(maskPan('4444333322221111'), '444433******1111')
  t.equal(maskPan('1234567890'), '**********')
})

t.test('a 12-19 digit number printed plainly keeps its first six and last four digits, Luhn or not', async (t) => {
  t.equal(maskCardNumbers('pan 4444333322221111 end'), 'pan 444433******1111 end')
  t.equal(maskCardNumbers('/p?card=4444-3333-2222-1111'), '/p?card=4444-33**-****-1111')
  t.equal(maskCardNumbers('4444 3333 2222 1111'), '4444 33** **** 1111')
  t.equal(maskCardNumbers('123456789012'), '123456**9012')
  t.equal(maskCardNumbers('a 12345678901 b'), 'a 12345678901 b', 'eleven digits are not a card number')
  t.equal(maskCardNumbers('12345678901234567890'), '12345678********7890', 'twenty: its Luhn-valid windows')
  t.equal(maskCardNumbers('11111111111111111111'), '11111111111111111111', 'twenty digits without a Luhn window')
})

t.test('a Luhn-valid number is masked whatever separates, encodes or surrounds its digits', async (t) => {
  const cases: [string, string][] = [
    ['4111+1111+1111+1111', '4111+11**+****+1111'],
    ['4111%201111%201111%201111', '4111%2011**%20****%201111'],
    ['4111.1111.1111.1111', '4111.11**.****.1111'],
    ['4111_1111_1111_1111', '4111_11**_****_1111'],
    ['4111 - 1111 - 1111 - 1111', '4111 - 11** - **** - 1111'],
    ['[4111, 1111, 1111, 1111]', '[4111, 11**, ****, 1111]'],
    ['4111%25201111%25201111%25201111', '4111%252011**%2520****%25201111'],
    ['%34%31%31%31111111111111', '%34%31%31%3111******1111'],
    ['4111\\t1111\\u00201111\\n1111', '4111\\t11**\\u0020****\\n1111'],
    ['\\u0034111111111111111', '\\u003411111******1111'],
    ['1111111111111%25', '111111***1111%25'],
    ['99994111111111111111777', '999941*************1777'],
    ['4111\u00a01111\u20131111\u30001111', '4111\u00a011**\u2013****\u30001111'],
  ]
  for (const [text, masked] of cases) t.equal(maskCardNumbers(text), masked, text)
})

t.test('digits apart are not one number: a letter, an encoded letter or four separators between them', async (t) => {
  // 4111111111111111 passes Luhn; each half alone is too short to be a card number.
  for (const text of [
    '"remoteAddress":"127.0.0.1:52100"',
    '2026-11-27T15:10:50.123Z',
    '41111111 x 11111111',
    '41111111    11111111',
    '41111111%4111111111',
    '41111111%g011111111',
    '41111111\\u004111111111',
    '41111111\\u1211111111',
    '%2',
    '\\',
    '\\u12',
  ])
    t.equal(maskCardNumbers(text), text, text)
})

/** A Luhn-valid number of 13 to 19 digits. */
const pan = fc
  .integer({ min: 13, max: 19 })
  .chain((length) => fc.array(fc.integer({ min: 0, max: 9 }), { minLength: length - 1, maxLength: length - 1 }))
  .map((digits) => {
    const body = digits.join('')
    for (let check = 0; check < 10; check++) if (luhnValid(body + check)) return body + check
    /* c8 ignore next: one of the ten check digits always passes */
    throw new Error('no check digit')
  })

/** How one digit may be written: as it is, percent-encoded once or twice, or as a JSON escape. */
const spelling = fc.constantFrom(
  (digit: string) => digit,
  (digit: string) => `%3${digit}`,
  (digit: string) => `%253${digit}`,
  (digit: string) => `\\u003${digit}`,
)

/** What may stand between two digits: nothing, or one to three separators, plain, encoded or escaped. */
const gap = fc
  .array(fc.constantFrom(' ', '-', '+', '.', '_', '/', ',', '%20', '%2D', '%2520', '\\t', '\\u00a0', '\u2013', '"'), {
    maxLength: 3,
  })
  .map((parts) => parts.join(''))

t.test('property: no Luhn-valid 13-19 digit number survives masking, however written or embedded', async (t) => {
  fc.assert(
    fc.property(
      pan,
      fc.array(fc.tuple(spelling, gap), { minLength: 19, maxLength: 19 }),
      fc.string({ unit: fc.constantFrom('0', '7', '9'), maxLength: 8 }),
      fc.string({ unit: fc.constantFrom('0', '3', '8'), maxLength: 8 }),
      fc.constantFrom('', 'pan=', '"card":"', '/p/'),
      (number, ways, before, after, prefix) => {
        const written = [...number].map((digit, k) => {
          const [spell, between] = ways[k] as [(digit: string) => string, string]
          return k === 0 ? spell(digit) : between + spell(digit)
        })
        const masked = maskCardNumbers(`${prefix}${before}${written.join('')}${after} end`)
        // Decoded as a reader would (percent-escapes, JSON escapes), then only digits and stars kept.
        const decoded = masked
          .replace(/%25/g, '%')
          .replace(/%3([0-9])/g, '$1')
          .replace(/\\u003([0-9])/g, '$1')
          .replace(/%[0-9A-F]{2}|\\u[0-9a-f]{4}|\\t/g, ' ')
          .replace(/[^0-9*]/g, '')
        return !decoded.includes(number)
      },
    ),
    { numRuns: 2000 },
  )
})

t.test('masking takes time linear in the text, whatever it holds', async (t) => {
  const texts = ['4'.repeat(200_000), '4-'.repeat(100_000), '%3'.repeat(100_000), '%25'.repeat(70_000)]
  for (const text of texts) t.equal(maskCardNumbers(text).length <= text.length, true)
})
