import t from 'tap'
import { canonicalJson } from '../../lib/idempotency/canonical.js'

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
