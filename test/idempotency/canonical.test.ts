import canonicalize from 'canonicalize'
import fc from 'fast-check'
import t from 'tap'
import { canonicalJson, inOrder, UNWRITABLE } from '../../lib/idempotency/canonical.js'
import { runs } from '../helpers/fuzz.js'

t.test('canonicalJson: one form whatever the member order and spacing, nothing else merged', async (t) => {
  const a = JSON.parse('{"b": {"y": [1, {"q": 1, "p": 2}], "x": null}, "a": "é\\u0041", "c": true}')
  const b = JSON.parse('{"c":true,"a":"éA","b":{"x":null,"y":[1,{"p":2,"q":1}]}}')
  t.equal(canonicalJson(a), '{"a":"éA","b":{"x":null,"y":[1,{"p":2,"q":1}]},"c":true}')
  t.equal(canonicalJson(a), canonicalJson(b), 'member order and spacing do not count')
  t.not(canonicalJson([1, 2]), canonicalJson([2, 1]), 'array order does')
  t.not(canonicalJson({ a: '1' }), canonicalJson({ a: 1 }), 'a string is not a number')
  t.equal(canonicalJson(JSON.parse('1.0')), '1', 'numbers as parsed')
  t.equal(canonicalJson(JSON.parse('1e2')), '100')
  t.equal(canonicalJson({ 'a"b': 1 }), '{"a\\"b":1}', 'names escaped')
  t.equal(
    canonicalJson(JSON.parse('{"\\u00e9":1,"z":2,"Z":3}')),
    '{"Z":3,"z":2,"é":1}',
    'names in UTF-16 code unit order',
  )
  t.equal(canonicalJson(JSON.parse('{"__proto__":{"a":1}}')), '{"__proto__":{"a":1}}', 'an own __proto__ member kept')
  t.not(canonicalJson({ a: { b: 1 } }), canonicalJson({ 'a.b': 1 }))
})

/** Member names as payments spell them, as anyone may, and ones JSON.stringify escapes. */
const NAME = fc.oneof(
  fc.constantFrom('transactionReference', 'merchant', 'entity', 'amount', 'currency', 'cardNumber', '__proto__'),
  fc.string({ unit: 'grapheme', maxLength: 6 }),
  fc.constantFrom('a"b', 'a\\b', '\u0000', '\u001f', '\u007f', '\u2028', 'é', '😀', 'Z', 'z', '10', '9'),
)
const VALUE = fc.letrec((tie) => ({
  value: fc.oneof(
    { depthSize: 'small' },
    fc.constantFrom(null, true, false, 0, -0, 1e21, 1e-7, 5e-324, 0.1),
    fc.double({ noNaN: true, noDefaultInfinity: true }),
    fc.string({ unit: 'grapheme' }),
    fc.array(tie('value'), { maxLength: 4 }),
    fc.dictionary(NAME, tie('value'), { maxKeys: 24 }),
  ),
}))

t.test('canonicalJson writes what RFC 8785 canonicalization does, read by an independent implementation', async (t) => {
  // The oracle reads the document parsed from its own serialization, in shuffled member order.
  fc.assert(
    fc.property(VALUE.value, fc.integer(), (value, salt) => {
      const document = JSON.parse(JSON.stringify(value, (_, v: unknown) => shuffled(v, salt))) as unknown
      const expected = canonicalize(document)
      if (canonicalJson(document) !== expected) throw new Error(`${canonicalJson(document)} !== ${expected}`)
    }),
    runs(),
  )
  t.pass('every generated document')
})

t.test('an object of many members is sorted as one of few', async (t) => {
  const names = Array.from({ length: 40 }, (_, i) => `m${(i * 7919) % 40}`)
  const document = Object.fromEntries(names.map((name, i) => [name, i]))
  t.equal(canonicalJson(document), canonicalize(document))
  const sorted = Object.fromEntries([...names].sort().map((name, i) => [name, { b: i, a: i }]))
  t.equal(canonicalJson(sorted), canonicalize(sorted), 'already sorted, members below not')
  t.equal(canonicalJson({ b: 1, a: 2 }), '{"a":2,"b":1}')
})

t.test(
  'each object in order where it stands: first, after members in order, in arrays, below array indices',
  async (t) => {
    for (const text of [
      '[{"b":1,"a":2}]',
      '[1,"x",{"b":1,"a":2},{"d":1,"c":2},[{"f":1,"e":2}]]',
      '{"a":1,"b":[1,2],"c":{"e":1,"d":2},"f":{"h":1,"g":2}}',
      '{"a":{"b":{"c":[{"e":1,"d":2}]}}}',
      '{"a":1,"b":{"10":1,"9":2}}',
      '[1,{"b":{"0":1}}]',
      '{"b":[{"10":1,"9":2,"a":[{"z":1,"y":2}]}],"a":1}',
      '{"a":1,"__proto__":{"b":1,"a":2}}',
      '[{"__proto__":[]}]',
      '{"":1,"\\u0000":2," ":3}',
      '{"!":1,"0":2}',
      '{"!":1,"9":2}',
      '{"":1,"4294967295":2,"4294967294":3}',
      '{"b":1,"01":2,"1.5":3,"-1":4,"4294967295":5,"9x":6,"a":7}',
    ]) {
      const document = JSON.parse(text) as unknown
      t.equal(canonicalJson(document), canonicalize(document), text)
    }
    const document = JSON.parse('{"b":{"d":1,"c":2},"a":[{"f":1,"e":2}]}') as unknown
    const before = JSON.stringify(document)
    canonicalJson(document)
    t.equal(JSON.stringify(document), before, 'the document itself is left as it was')
  },
)

t.test('strings JSON.stringify escapes are written as it writes them, lone surrogates included', async (t) => {
  for (const text of ['"', '\\', '\n', '\u0000', '\u001f', '\ud800', 'a\udc00', '😀', '\u2028', '\u007f', 'plain']) {
    // The message names the text by its code units: a raw U+2028 would break tap's own output.
    const units = [...text].map((c) => (c.codePointAt(0) as number).toString(16)).join(' ')
    t.equal(canonicalJson(text), JSON.stringify(text), units)
    t.equal(canonicalJson({ [text]: text }), `{${JSON.stringify(text)}:${JSON.stringify(text)}}`)
  }
})

/** A value with the members of each object in an order drawn from `salt` (a stand-in for each client's own order). */
function shuffled(value: unknown, salt: number): unknown {
  if (value === null || typeof value !== 'object' || Array.isArray(value)) return value
  const entries = Object.entries(value)
  for (let i = entries.length - 1; i > 0; i--) {
    const j = Math.abs((salt * (i + 31)) | 0) % (i + 1)
    ;[entries[i], entries[j]] = [entries[j] as [string, unknown], entries[i] as [string, unknown]]
  }
  return Object.fromEntries(entries)
}

t.test('inOrder copies only the objects and arrays out of order, and shares the rest', async (t) => {
  const sorted = JSON.parse(canonicalJson(JSON.parse('{"b":[{"d":1,"c":[2]}],"a":{"f":1,"e":2},"g":"x"}'))) as unknown
  t.equal(inOrder(sorted), sorted, 'a document in order is itself')
  const wide = Object.fromEntries(
    Array.from({ length: 40 }, (_, i) => [`m${String(i).padStart(2, '0')}`, { a: i, b: [i] }]),
  )
  t.equal(inOrder(wide), wide, 'an object of many members in order is itself')
  const unsorted: Record<string, unknown> = { ...wide, a: 1 }
  const copy = inOrder(unsorted) as Record<string, unknown>
  t.not(copy, unsorted)
  t.same(Object.keys(copy), Object.keys(unsorted).sort())
  t.equal(copy.m07, unsorted.m07, 'its members in order shared')

  const document = JSON.parse('{"a":{"x":1,"y":[1,{"p":1}]},"c":[{"k":1},{"m":2,"l":1},[3]],"b":1}') as {
    a: unknown
    c: unknown[]
  }
  const ordered = inOrder(document) as { a: unknown; c: unknown[]; b: number }
  t.same(Object.keys(ordered), ['a', 'b', 'c'])
  t.equal(ordered.a, document.a, 'an object in order shared')
  t.not(ordered.c, document.c, 'an array with an item out of order copied')
  t.equal(ordered.c[0], document.c[0], 'its items before it shared')
  t.not(ordered.c[1], document.c[1])
  t.equal(ordered.c[2], document.c[2], 'and after it')

  const kept = JSON.parse('{"a":1,"b":{"c":[1,{"d":1}]}}') as { b: unknown }
  const late = inOrder({ ...kept, c: { f: 1, e: 2 } }) as { b: unknown }
  t.equal(late.b, kept.b, 'members before the first one out of order kept as they were')

  t.equal(inOrder({ a: 1, b: { '10': 1 } }), UNWRITABLE, 'an array index among the names')
  for (const index of ['0', '7', '4294967294']) t.equal(inOrder({ b: 1, [index]: 2 }), UNWRITABLE, index)
  for (const name of ['-1', '01', '1.5', '1/', '1:', '1e3', '4294967295', '9x']) {
    const document = { [name]: 1, z: 2 }
    t.equal(inOrder(document), document, `${name}, no array index, is written as set`)
  }
  t.equal(inOrder([1, JSON.parse('{"__proto__":1}')]), UNWRITABLE, 'an own __proto__ member')
  const besideDigits = { '/': 1, ':': 2, '@': 3 }
  t.equal(inOrder(besideDigits), besideDigits, 'names that start just outside the digits are written as set')
})
