import t from 'tap'
import { appendKey, pointerToJsonPath } from '../../lib/schema/json-path.js'

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
