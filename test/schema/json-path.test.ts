import fc from 'fast-check'
import { paths } from 'jsonpath-rfc9535'
import t from 'tap'
import { appendKey, pointerToJsonPath } from '../../lib/schema/json-path.js'
import { runs } from '../helpers/fuzz.js'

t.test('plain identifiers use dot notation from the root', async (t) => {
  t.equal(pointerToJsonPath('', {}), '$')
  t.equal(pointerToJsonPath('/instruction/value/amount', {}), '$.instruction.value.amount')
  t.equal(pointerToJsonPath('/_a/$b', {}), '$._a.$b')
})

t.test('array elements get an index, object keys that look like numbers get brackets', async (t) => {
  t.equal(pointerToJsonPath('/a/0/b', { a: [{ b: 1 }] }), '$.a[0].b')
  t.equal(pointerToJsonPath('/a/0', { a: { 0: 1 } }), "$.a['0']")
  t.equal(pointerToJsonPath('/a/0/1', { a: [[1, 2]] }), '$.a[0][1]')
})

t.test('keys that are not plain identifiers go in brackets, quotes and backslashes escaped', async (t) => {
  t.equal(pointerToJsonPath('/odd key', {}), "$['odd key']")
  t.equal(pointerToJsonPath("/it's", {}), "$['it\\'s']")
  t.equal(pointerToJsonPath('/back\\slash', {}), "$['back\\\\slash']")
  t.equal(pointerToJsonPath('/a~1b/c~0d', {}), "$['a/b']['c~d']")
  t.equal(pointerToJsonPath('/1st', {}), "$['1st']")
  t.equal(pointerToJsonPath('/ünï', {}), "$['ünï']")
})

t.test('a path through a missing or scalar node stays an object path', async (t) => {
  t.equal(pointerToJsonPath('/a/b/0', { a: 5 }), "$.a.b['0']")
  t.equal(pointerToJsonPath('/a/b', null), '$.a.b')
})

t.test('a name in brackets escapes control characters as a normalized path does (RFC 9535 2.7)', async (t) => {
  t.equal(appendKey('$', 'a\nb'), "$['a\\nb']")
  t.equal(appendKey('$', '\b\f\r\t'), "$['\\b\\f\\r\\t']")
  t.equal(appendKey('$', '\u0000\u0001\u000b\u001f'), "$['\\u0000\\u0001\\u000b\\u001f']", 'lower-case hex')
  t.equal(appendKey('$', ' \u007f'), "$[' \u007f']", 'DEL and space are written as they are')
})

t.test("property: a name in brackets is written as RFC 9535's normalized path writes it", async (t) => {
  // Every code point but surrogates, which a normalized path cannot hold; no digit, so no card number is masked.
  const name = fc.string({
    unit: fc.oneof(
      fc.integer({ min: 0, max: 0x7f }).map((code) => String.fromCharCode(code)),
      fc.constantFrom('é', '\u2028', '\u{1F600}', '\ufeff'),
    ),
    maxLength: 8,
  })
  fc.assert(
    fc.property(name, (key) => {
      fc.pre(!/[0-9]/.test(key))
      const [oracle] = paths({ [key]: 1 }, '$[*]')
      const ours = appendKey('$', key)
      return ours === oracle || ours === `$.${key}`
    }),
    runs(2),
  )
})

t.test('appendKey adds one member', async (t) => {
  t.equal(appendKey('$', 'a'), '$.a')
  t.equal(appendKey('$.a', 'b c'), "$.a['b c']")
})

t.test("a card number in a member's name is masked, as the logs mask one", async (t) => {
  t.equal(appendKey('$', '4111111111111111'), "$['411111******1111']")
  t.equal(appendKey('$', 'pan4111111111111111'), "$['pan411111******1111']", 'inside an identifier')
  t.equal(appendKey('$', '4111 1111 1111 1111'), "$['4111 11** **** 1111']", 'written apart')
  t.equal(pointerToJsonPath('/a/4111111111111111/b', {}), "$.a['411111******1111'].b")
  t.equal(appendKey('$', '12345678901'), "$['12345678901']", 'digits too few for a card number stay')
})

t.test('an empty key, last in the pointer, is a member too', async (t) => {
  t.equal(pointerToJsonPath('/', {}), "$['']")
  t.equal(pointerToJsonPath('/a/', { a: {} }), "$.a['']")
})
