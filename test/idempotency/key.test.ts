import t from 'tap'
import { hashTag, idempotencyKey } from '../../lib/idempotency/key.js'

t.test('idempotencyKey: the entity and the transactionReference, as a JSON pair', async (t) => {
  t.equal(idempotencyKey('default', 'order-1'), '["default","order-1"]')
  t.equal(JSON.parse(idempotencyKey('a"b', 'c\\d')).join('|'), 'a"b|c\\d')
})

t.test('idempotencyKey: no two pairs spell one key, whatever characters they hold', async (t) => {
  const pairs: [string, string][] = [
    ['a', 'b:c'],
    ['a:b', 'c'],
    ['a', '","b'],
    ['a","', 'b'],
    ['', 'ab'],
    ['ab', ''],
  ]
  const keys = pairs.map(([entity, reference]) => idempotencyKey(entity, reference))
  t.equal(new Set(keys).size, pairs.length)
})

t.test(
  'hashTag: the whole text as one Redis Cluster hash tag, with no brace inside, and no two texts alike',
  async (t) => {
    t.equal(hashTag('["default","order-1"]'), '{["default","order-1"]}')
    t.equal(hashTag('a{b}c%d'), '{a%7Bb%7Dc%25d}')
    const texts = ['{', '%7B', '}', '%7D', '%', '%25', '{}', '']
    const tags = texts.map(hashTag)
    t.equal(new Set(tags).size, texts.length, 'percent-encoding is one to one')
    for (const tag of tags) t.notMatch(tag.slice(1, -1), /[{}]/, `${tag}: no brace inside`)
  },
)
